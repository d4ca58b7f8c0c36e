//! Capstan's HTTP layer: a thin actix-web mapping of requests onto the domain's use cases.

pub mod envelope;
pub mod error;
pub mod extract;
mod routes;
pub mod views;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{from_fn, Compress};
use actix_web::{web, App, HttpResponse};
use domain::Capstan;
use serde_json::json;

/// Default limit of a request body.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// What handlers share: the use cases and the HTTP settings.
pub struct AppState {
    pub capstan: Capstan,
    pub body_limit: usize,
}

impl AppState {
    pub fn new(capstan: Capstan) -> Self {
        Self {
            capstan,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, error::ApiError> {
    state.capstan.ready().await?;
    Ok(HttpResponse::Ok().json(json!({"status": "ready"})))
}

async fn not_found() -> HttpResponse {
    // The envelope middleware writes the body, naming the method and path.
    HttpResponse::NotFound().finish()
}

/// The production application: used by the server and by the HTTP tests alike.
pub fn app(
    state: web::Data<AppState>,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        .app_data(state)
        .route("/healthz", web::get().to(healthz))
        .route("/readyz", web::get().to(readyz))
        .service(web::scope("/v1").configure(routes::api_routes))
        .configure(routes::api_routes)
        .default_service(web::to(not_found))
        .wrap(Compress::default())
        .wrap(from_fn(envelope::envelope))
}
