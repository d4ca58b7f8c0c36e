//! The route table. Every route is served under `/v1` and, for unversioned clients, at the root.

mod catalog;
mod organization;
mod resources;
mod services;
mod variables;

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

/// The API's routes, mounted twice by the app (under `/v1` and at the root).
pub fn api_routes(r: &mut Routes) {
    catalog::routes(r);
    organization::routes(r);
    resources::routes(r);
    services::routes(r);
    variables::routes(r);
}
