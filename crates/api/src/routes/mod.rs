//! The route table. Every route is served under `/v1` and, for unversioned clients, at the root.

mod catalog;
mod organization;
mod resources;
mod services;
mod variables;

use actix_web::{web, HttpResponse};
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

/// The API's routes, mounted twice by the app (under `/v1` and at the root).
pub fn api_routes(cfg: &mut web::ServiceConfig) {
    catalog::routes(cfg);
    organization::routes(cfg);
    resources::routes(cfg);
    services::routes(cfg);
    variables::routes(cfg);
}
