//! Capstan's HTTP layer: a thin actix-web mapping of requests onto the domain's use cases.

pub mod controls;
mod database_views;
mod deployment_views;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod jwt;
pub mod limits;
mod live;
mod log_views;
pub mod metrics;
pub mod openapi;
mod rate_limiter;
mod routes;
mod stage_views;
mod view_parts;
pub mod views;
pub mod waiting;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::middleware::{from_fn, Compress};
use actix_web::{web, App, HttpResponse};
use domain::Capstan;
use openapi::{Doc, Routes};
use serde_json::json;

/// Default limit of a request body.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// Default time a request may take.
pub const DEFAULT_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// What handlers share: the use cases and the HTTP settings.
pub struct AppState {
    pub capstan: Capstan,
    pub body_limit: usize,
    pub limiter: limits::RateLimiter,
    pub request_timeout: std::time::Duration,
    /// Origins allowed to call from a browser; none: CORS is off.
    pub cors_origins: Vec<String>,
    /// How Bearer JWTs are verified; none: they are refused.
    pub jwt: Option<jwt::JwtVerifier>,
    /// What `/metrics` shows; none when the metrics could not be set up (the route says 503).
    pub metrics: Option<std::sync::Arc<metrics::Metrics>>,
    /// Becomes true when the server stops: open event streams end then, so a graceful stop
    /// does not wait on them. None: they end when their clients leave.
    pub stopping: Option<tokio::sync::watch::Receiver<bool>>,
    /// The application's clock (a stand-in's may be moved by its controls).
    pub clock: std::sync::Arc<dyn domain::clock::Clock>,
    /// The stand-in's controls under `/_capstan/`; none: they answer 404.
    pub controls: Option<controls::Controls>,
    /// What the links answers carry start with (the operator's `CAPSTAN_PUBLIC_URL`); none:
    /// they are relative. Never the request's `Host` or forwarded headers, which the client
    /// writes.
    pub links_base: Option<String>,
    /// The live sockets each credential holds open here, against the cap.
    pub live_sockets: live::sockets::Sockets,
}

impl AppState {
    /// The defaults of API.md: 1000 requests per hour per principal, in this process. The
    /// use cases report to this state's metrics: workers must run this state's `capstan`.
    pub fn new(capstan: Capstan) -> Self {
        let metrics = match metrics::Metrics::new() {
            Ok(m) => Some(std::sync::Arc::new(m)),
            Err(e) => {
                tracing::error!(error = %e, "metrics are off");
                None
            }
        };
        let capstan = match &metrics {
            Some(m) => capstan.with_observer(m.clone()),
            None => capstan,
        };
        Self {
            capstan,
            metrics,
            body_limit: DEFAULT_BODY_LIMIT,
            limiter: limits::RateLimiter::local(1000),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            cors_origins: Vec::new(),
            jwt: None,
            stopping: None,
            clock: std::sync::Arc::new(domain::clock::SystemClock),
            controls: None,
            links_base: None,
            live_sockets: live::sockets::Sockets::default(),
        }
    }

    /// Adds what every running replica consumes to each scrape of `/metrics`.
    pub fn with_replica_metrics(self, on: bool) -> Self {
        if let (true, Some(m)) = (on, &self.metrics) {
            if let Err(e) = m.read_replicas() {
                tracing::error!(error = %e, "replica metrics are off");
            }
        }
        self
    }

    /// Caps the live sockets one credential may hold open on this instance.
    pub fn with_live_sockets_per_token(mut self, cap: usize) -> Self {
        self.live_sockets = live::sockets::Sockets::new(cap);
        self
    }

    pub fn with_limiter(mut self, limiter: limits::RateLimiter) -> Self {
        self.limiter = limiter.with_clock(self.clock.clone());
        self
    }

    pub fn with_links_base(mut self, base: &str) -> Self {
        self.links_base = Some(base.trim_end_matches('/').to_string());
        self
    }

    pub fn with_request_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn with_jwt(mut self, verifier: jwt::JwtVerifier) -> Self {
        self.jwt = Some(verifier);
        self
    }

    pub fn with_cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = origins;
        self
    }

    /// Reads time from `clock` (which the use cases must share), rate limits included.
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn domain::clock::Clock>) -> Self {
        self.limiter = self.limiter.with_clock(clock.clone());
        self.clock = clock;
        self
    }

    /// Serves the stand-in's controls.
    pub fn with_controls(mut self, controls: controls::Controls) -> Self {
        self.controls = Some(controls);
        self
    }

    /// Ends open event streams when `stopping` becomes true.
    pub fn with_stopping(mut self, stopping: tokio::sync::watch::Receiver<bool>) -> Self {
        self.stopping = Some(stopping);
        self
    }
}

/// Every route the server has, recorded without serving them.
pub fn endpoints() -> Vec<openapi::Endpoint> {
    let mut r = Routes::new(None);
    system_routes(&mut r);
    controls::routes(&mut r);
    routes::api_routes(&mut r);
    r.endpoints
}

/// The OpenAPI document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    openapi::document(&endpoints())
}

/// The document, made once per process: it is the same for every app, and making it (every
/// route's schemas, then their JSON) costs more than anything else an app's start does.
static OPENAPI_JSON: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| serde_json::to_string(&openapi()).unwrap_or_else(|_| "{}".into()));

async fn openapi_json() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(OPENAPI_JSON.as_str())
}

async fn docs_page() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(include_str!("docs.html"))
}

/// Probes and the document: at the root only, without credentials.
fn system_routes(r: &mut Routes) {
    let status = || {
        openapi::Body::inline(
            utoipa::openapi::ObjectBuilder::new()
                .property(
                    "status",
                    utoipa::openapi::ObjectBuilder::new()
                        .schema_type(utoipa::openapi::schema::Type::String),
                )
                .required("status")
                .into(),
        )
    };
    r.at("/healthz")
        .get(
            healthz,
            Doc::answer("The process answers", 200, Some(status())).public(),
        )
        .add();
    r.at("/readyz")
        .get(
            readyz,
            Doc::answer("The database answers", 200, Some(status())).public(),
        )
        .add();
    r.at("/openapi.json")
        .get(
            openapi_json,
            Doc::answer("This document", 200, None).public(),
        )
        .add();
    r.at("/docs")
        .get(
            docs_page,
            Doc::answer("A page that renders this document", 200, None).public(),
        )
        .add();
    r.at("/metrics")
        .get(
            metrics::scrape,
            Doc::answer(
                "Prometheus metrics (text format): requests, latency, rate-limit refusals, \
                 deployments and the queue",
                200,
                None,
            )
            .public(),
        )
        .add();
}

fn api_routes(cfg: &mut web::ServiceConfig) {
    let mut r = Routes::new(Some(cfg));
    routes::api_routes(&mut r);
    r.register();
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
    let cors = cors(&state.cors_origins);
    // Off, the controls are not routed at all: any method on them is an unknown path (404).
    let controls_on = state.controls.is_some();
    // Listed innermost first: the envelope sees every answer, the limiter every request.
    App::new()
        .app_data(state)
        .configure(|cfg| {
            let mut r = Routes::new(Some(cfg));
            system_routes(&mut r);
            if controls_on {
                controls::routes(&mut r);
            }
            r.register();
        })
        .configure(live::routes)
        .service(web::scope("/v1").configure(api_routes))
        .configure(api_routes)
        .default_service(web::to(not_found))
        .wrap(from_fn(limits::idempotency))
        .wrap(from_fn(limits::rate_limit))
        .wrap(from_fn(controls::faults::inject))
        .wrap(cors)
        .wrap(from_fn(envelope::envelope))
        // Outside the envelope: the body it writes (an error's JSON) is the one encoded, so
        // the encoding header always matches what is sent.
        .wrap(Compress::default())
        .wrap(from_fn(metrics::observe))
}

/// CORS is off (no header is sent, browsers refuse cross-origin calls) unless origins are
/// configured.
fn cors(origins: &[String]) -> actix_cors::Cors {
    let mut cors = actix_cors::Cors::default()
        .allowed_methods(["GET", "POST", "PUT", "DELETE"])
        .allowed_headers([
            actix_web::http::header::AUTHORIZATION,
            actix_web::http::header::CONTENT_TYPE,
            actix_web::http::header::HeaderName::from_static("idempotency-key"),
        ])
        .expose_headers([
            "x-request-id",
            "x-ratelimit-limit",
            "x-ratelimit-remaining",
            "x-ratelimit-reset",
            "retry-after",
        ])
        .max_age(3600);
    for origin in origins {
        cors = cors.allowed_origin(origin);
    }
    cors
}
