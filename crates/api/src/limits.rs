//! Rate limiting (GCRA per principal, per client address without valid credentials) and safe
//! retries (`Idempotency-Key` on POST). Both are middleware: they wrap every API route the same
//! way and keep handlers unaware of them.

use crate::error::ApiError;
use crate::extract::authentication;
use crate::AppState;
use actix_web::body::{to_bytes, BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::ResponseError;
use actix_web::{web, HttpMessage, HttpResponse};
use domain::ports::{IdempotencyClaim, StoredResponse};
use domain::ratelimit::RateDecision;
use futures_util::StreamExt;

pub use crate::rate_limiter::RateLimiter;

/// Probes, metrics, the API's own description and the stand-in's controls: not metered, so a
/// load balancer's health checks, a metrics scraper and a test suite's resets never run out.
fn is_unmetered(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/readyz" | "/openapi.json" | "/docs" | "/metrics"
    ) || path.starts_with("/_capstan/")
}

/// The service a path to the git receiver names (under /v1 too).
fn receiver_of(path: &str) -> Option<&str> {
    domain::git::receiver_service(path.strip_prefix("/v1").unwrap_or(path))
}

/// Requests without valid credentials share their source address's quota.
fn address_key(req: &ServiceRequest) -> String {
    format!(
        "ip:{}",
        req.peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_else(|| "unknown".into())
    )
}

/// A git provider delivers the pushes of every repository from a few addresses: a delivery
/// signed with its service's secret is metered per service, so one busy repository cannot use
/// up the others' quota. Any other delivery (unsigned, forged, or for no service) is
/// unauthenticated and metered by its source address: forgeries never spend a service's
/// quota, and ids made up one after another give no quota of their own. The body is read to
/// check the signature (no query: the secret derives from the id) and handed on unchanged.
async fn receiver_key(
    req: &mut ServiceRequest,
    state: &AppState,
    service: &str,
) -> Result<String, ApiError> {
    let body = read_body(req, state.body_limit).await?;
    req.set_payload(actix_web::dev::Payload::from(body.clone()));
    let Ok(id) = domain::ids::parse_uuid(service) else {
        return Ok(address_key(req));
    };
    let delivery = crate::extract::delivery(req.headers(), &body);
    let id = domain::ids::ServiceId(id);
    Ok(if state.capstan.git_delivery_signed(id, &delivery) {
        format!("git-webhook:{id}")
    } else {
        address_key(req)
    })
}

fn set_headers(headers: &mut HeaderMap, d: &RateDecision) {
    let mut put = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    };
    put("x-ratelimit-limit", d.limit.to_string());
    put("x-ratelimit-remaining", d.remaining.to_string());
    put("x-ratelimit-reset", d.reset.to_string());
    if let Some(after) = d.retry_after {
        put("retry-after", after.to_string());
    }
}

fn app_state(req: &ServiceRequest) -> Option<web::Data<AppState>> {
    req.app_data::<web::Data<AppState>>().cloned()
}

pub async fn rate_limit(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(state) = app_state(&req) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let decision = if is_unmetered(req.path()) {
        let gcra = state.limiter.gcra();
        Ok(RateDecision {
            allowed: true,
            limit: gcra.limit,
            remaining: gcra.limit,
            reset: state.limiter.now_us().div_euclid(1_000_000),
            retry_after: None,
        })
    } else if let Some(service) = receiver_of(req.path()).map(str::to_string) {
        match receiver_key(&mut req, &state, &service).await {
            Ok(key) => state.limiter.acquire(&key).await,
            // A body that could not be read: metered as unauthenticated, then refused.
            Err(unread) => match state.limiter.acquire(&address_key(&req)).await {
                Ok(d) if d.allowed => {
                    let mut res = req.into_response(unread.error_response());
                    set_headers(res.headers_mut(), &d);
                    return Ok(res.map_into_boxed_body());
                }
                other => other,
            },
        }
    } else {
        let key = match authentication(req.request()).await {
            Ok(p) => p.rate_key(),
            Err(_) => address_key(&req),
        };
        state.limiter.acquire(&key).await
    };
    let decision = match decision {
        Ok(d) => d,
        Err(e) => return Ok(req.into_response(e.error_response()).map_into_boxed_body()),
    };
    if !decision.allowed {
        if let Some(m) = &state.metrics {
            m.refused();
        }
        let error = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "rate limit exceeded: {} requests per hour; retry in {} seconds",
                decision.limit,
                decision.retry_after.unwrap_or(1)
            ),
        );
        let mut res = req.into_response(error.error_response());
        set_headers(res.headers_mut(), &decision);
        return Ok(res.map_into_boxed_body());
    }
    let mut res = next.call(req).await?.map_into_boxed_body();
    set_headers(res.headers_mut(), &decision);
    Ok(res)
}

const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// How long a key's first answer is replayed.
const IDEMPOTENCY_TTL: time::Duration = time::Duration::hours(24);

fn valid_key(key: &str) -> bool {
    (1..=255).contains(&key.len()) && key.chars().all(|c| c.is_ascii_graphic())
}

/// Reads the body (up to the limit) so it can be hashed and handed on unchanged.
async fn read_body(req: &mut ServiceRequest, limit: usize) -> Result<web::Bytes, ApiError> {
    let mut payload = req.take_payload();
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("body: could not be read: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("body: the request body is larger than {limit} bytes"),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

fn request_hash(req: &ServiceRequest, body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(req.method().as_str());
    h.update([0]);
    h.update(req.path());
    h.update([0]);
    h.update(req.query_string());
    h.update([0]);
    h.update(body);
    domain::hex::encode(&h.finalize())
}

/// `Idempotency-Key` on a POST: the first answer (success or client error) is kept for a day
/// per principal and replayed for the same request; another request under the same key is
/// refused (422); a key whose first request is still running: 409.
pub async fn idempotency(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let key = req
        .headers()
        .get(IDEMPOTENCY_KEY)
        .map(|v| v.to_str().map(str::to_owned));
    let (Some(key), true, Some(state)) = (key, req.method() == Method::POST, app_state(&req))
    else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let Ok(principal) = authentication(req.request()).await else {
        // The handler answers 401.
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let refuse = |req: ServiceRequest, e: ApiError| {
        Ok(req.into_response(e.error_response()).map_into_boxed_body())
    };
    let key = match key {
        Ok(k) if valid_key(&k) => k,
        _ => {
            return refuse(
                req,
                ApiError::bad_request("Idempotency-Key: must be 1 to 255 visible ASCII characters"),
            )
        }
    };
    let body = match read_body(&mut req, state.body_limit).await {
        Ok(b) => b,
        Err(e) => return refuse(req, e),
    };
    let hash = request_hash(&req, &body);
    req.set_payload(actix_web::dev::Payload::from(body));
    let who = principal.rate_key();
    let store = state.capstan.store().clone();
    let now = state.clock.now();
    let claim = store
        .claim_idempotency_key(&who, &key, &hash, now, now - IDEMPOTENCY_TTL)
        .await;
    match claim {
        Err(e) => refuse(req, ApiError::from(domain::DomainError::from(e))),
        Ok(IdempotencyClaim::Mismatch) => refuse(
            req,
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Idempotency-Key: already used with a different request; use a new key",
            ),
        ),
        Ok(IdempotencyClaim::Replay(None)) => refuse(
            req,
            ApiError::new(
                StatusCode::CONFLICT,
                "Idempotency-Key: the first request with this key is still running; retry later",
            ),
        ),
        Ok(IdempotencyClaim::Replay(Some(first))) => {
            let status = StatusCode::from_u16(first.status).unwrap_or(StatusCode::OK);
            let mut res = HttpResponse::build(status)
                .insert_header((CONTENT_TYPE, "application/json"))
                .insert_header(("idempotent-replayed", "true"))
                .body(first.body);
            res.extensions_mut().insert(crate::error::ErrorBodyWritten);
            Ok(req.into_response(res).map_into_boxed_body())
        }
        Ok(IdempotencyClaim::Claimed) => {
            let res = next.call(req).await?;
            let status = res.status();
            let (http_req, res) = res.into_parts();
            let (head, body) = res.into_parts();
            let bytes = match to_bytes(body).await {
                Ok(b) => b,
                Err(_) => {
                    let _ = store.release_idempotency_key(&who, &key).await;
                    return Err(actix_web::error::ErrorInternalServerError(
                        "body unreadable",
                    ));
                }
            };
            // Server errors are not final: a retry should run again.
            let kept = if status.is_server_error() {
                store.release_idempotency_key(&who, &key).await
            } else {
                let response = StoredResponse {
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&bytes).into_owned(),
                };
                store.save_idempotent_response(&who, &key, &response).await
            };
            if let Err(e) = kept {
                tracing::warn!(error = %e, "could not record an idempotency key's answer");
            }
            let res = head.set_body(BoxBody::new(bytes));
            Ok(ServiceResponse::new(http_req, res))
        }
    }
}

/// Ends a request that runs longer than the configured time with 503. Wrapped around each
/// resource (after routing), where the request may be shared with the timeout's answer.
pub async fn timeout(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    // A status read may wait as long as it asked (`?wait=`) on top of the usual time.
    let waits = crate::waiting::wait_param(req.query_string()).unwrap_or_default();
    let limit = app_state(&req)
        .map(|s| s.request_timeout)
        .unwrap_or(crate::DEFAULT_REQUEST_TIMEOUT)
        + waits;
    let http = req.request().clone();
    match tokio::time::timeout(limit, next.call(req)).await {
        Ok(res) => res.map(ServiceResponse::map_into_boxed_body),
        Err(_) => {
            let e = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the request took longer than {} seconds",
                    limit.as_secs_f64()
                ),
            );
            Ok(ServiceResponse::new(http, e.error_response()))
        }
    }
}
