//! The route table. Every route is served under `/v1` and, for unversioned clients, at the root.

mod advanced_settings;
mod catalog;
mod clusters;
mod credentials;
mod custom_domains;
mod database_backups;
mod database_links;
mod database_moves;
mod deployment_logs;
mod deployment_rules;
mod deployments;
mod events;
mod image_deploys;
mod job_cleanup;
mod links;
mod listings;
mod members;
mod metadata_groups;
mod organization;
mod organization_webhooks;
mod resources;
mod restrictions;
mod service_output;
mod services;
mod sources;
mod stages;
mod terraform;
mod variables;
pub(crate) mod webhooks;

use crate::openapi::Routes;
use actix_web::HttpResponse;
use serde::Serialize;

pub(crate) fn ok<T: Serialize>(body: T) -> HttpResponse {
    HttpResponse::Ok().json(body)
}

pub(crate) fn created<T: Serialize>(body: T) -> HttpResponse {
    HttpResponse::Created().json(body)
}

pub(crate) fn no_content() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

pub(crate) fn accepted<T: Serialize>(body: T) -> HttpResponse {
    HttpResponse::Accepted().json(body)
}

/// What a delete answers: 204 when done, 202 with the status when handed to the engine.
pub(crate) trait Deleted {
    fn response(self) -> HttpResponse;
}

impl Deleted for () {
    fn response(self) -> HttpResponse {
        no_content()
    }
}

impl<T: Serialize> Deleted for domain::services::Deletion<T> {
    fn response(self) -> HttpResponse {
        match self {
            domain::services::Deletion::Done => no_content(),
            domain::services::Deletion::Requested(status) => accepted(status),
        }
    }
}

/// The API's routes, mounted twice by the app (under `/v1` and at the root).
pub fn api_routes(r: &mut Routes) {
    // Literal paths that a `{id}` pattern of the same scope would otherwise take.
    terraform::routes(r);
    deployments::fixed_routes(r);
    clusters::fixed_routes(r);
    advanced_settings::routes(r);
    catalog::routes(r);
    clusters::routes(r);
    credentials::routes(r);
    custom_domains::routes(r);
    database_links::routes(r);
    database_backups::routes(r);
    database_moves::routes(r);
    sources::routes(r);
    deployment_logs::routes(r);
    deployment_rules::routes(r);
    organization::routes(r);
    organization_webhooks::routes(r);
    resources::routes(r);
    restrictions::routes(r);
    services::routes(r);
    deployments::routes(r);
    events::routes(r);
    image_deploys::routes(r);
    links::routes(r);
    job_cleanup::routes(r);
    service_output::routes(r);
    listings::routes(r);
    members::routes(r);
    metadata_groups::routes(r);
    stages::routes(r);
    variables::routes(r);
    webhooks::routes(r);
}
