//! What every response gets, whatever produced it: an `X-Request-Id`, the JSON error body on
//! every error (including actix's own 404, 405 and payload errors), and an access log line.

use crate::error::{error_response, ErrorBodyWritten, InternalCause};
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::HttpMessage;
use std::time::Instant;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being served, in the request's extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

fn incoming_id(req: &ServiceRequest) -> Option<String> {
    let v = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then(|| v.to_string())
}

fn default_message(status: StatusCode, method: &str, path: &str) -> String {
    match status {
        StatusCode::NOT_FOUND => format!("no route for {method} {path}"),
        StatusCode::METHOD_NOT_ALLOWED => format!("method {method} is not allowed on {path}"),
        StatusCode::PAYLOAD_TOO_LARGE => "body: the request body is too large".into(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "Content-Type must be application/json".into(),
        s => s.canonical_reason().unwrap_or("error").to_string(),
    }
}

/// Headers that suit a JSON API: no sniffing, no framing, no caching of answers that may hold
/// secrets, no referrer; the /docs page may run its own inline script and nothing else.
fn security_headers(headers: &mut actix_web::http::header::HeaderMap, path: &str) {
    use actix_web::http::header;
    let csp = if path == "/docs" {
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:; frame-ancestors 'none'"
    } else {
        "default-src 'none'; frame-ancestors 'none'"
    };
    for (name, value) in [
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::CONTENT_SECURITY_POLICY, csp),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

pub async fn envelope(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    let request_id = incoming_id(&req).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let method = req.method().to_string();
    let path = req.path().to_string();
    // Handler and extractor errors arrive here as responses; only a failing middleware
    // below would give an Err, which actix then answers itself.
    let mut res = next.call(req).await?.map_into_boxed_body();

    let status = res.status();
    // A fault rule's answer is what the test suite asked for, body and all.
    let faulted = res
        .response()
        .extensions()
        .get::<crate::controls::faults::Answered>()
        .is_some();
    if (status.is_client_error() || status.is_server_error()) && !faulted {
        let cause = res.response().extensions().get::<InternalCause>().cloned();
        let written = res
            .response()
            .extensions()
            .get::<ErrorBodyWritten>()
            .is_some();
        if status.is_server_error() {
            tracing::error!(request_id = %request_id, cause = cause.as_ref().map(|c| c.0.as_str()).unwrap_or("unknown"), "{method} {path} failed");
        }
        let replacement = if status == StatusCode::INTERNAL_SERVER_ERROR {
            Some(format!(
                "internal error; quote request id {request_id} when reporting it"
            ))
        } else if !written {
            Some(default_message(status, &method, &path))
        } else {
            None
        };
        if let Some(message) = replacement {
            let mut replaced = error_response(status, &message);
            // Keep headers such as Allow on a 405 and the rate-limit headers, but none that
            // describe the body replaced.
            for (k, v) in res.headers() {
                if k != actix_web::http::header::CONTENT_TYPE
                    && k != actix_web::http::header::CONTENT_LENGTH
                    && k != actix_web::http::header::CONTENT_ENCODING
                {
                    replaced.headers_mut().insert(k.clone(), v.clone());
                }
            }
            res = res.into_response(replaced);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    security_headers(res.headers_mut(), &path);
    tracing::info!(
        request_id = %request_id,
        status = status.as_u16(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "{method} {path}"
    );
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ApiError;
    use actix_web::{test, web, App};
    use domain::DomainError;

    async fn broken() -> Result<actix_web::HttpResponse, ApiError> {
        Err(DomainError::Internal("connection refused to db-7.internal:5432".into()).into())
    }

    async fn plain_405() -> actix_web::HttpResponse {
        actix_web::HttpResponse::MethodNotAllowed().finish()
    }

    /// Whatever encodes the body inside the envelope, the error body it writes is sent as it
    /// says: a client that accepts gzip reads the JSON.
    #[actix_rt::test]
    async fn a_replaced_error_body_keeps_no_encoding_of_the_body_it_replaced() {
        let app = test::init_service(
            App::new()
                .route("/broken", web::get().to(broken))
                .wrap(actix_web::middleware::Compress::default())
                .wrap(actix_web::middleware::from_fn(envelope)),
        )
        .await;
        let req = test::TestRequest::get()
            .uri("/broken")
            .insert_header(("accept-encoding", "gzip"))
            .to_request();
        let res = test::call_service(&app, req).await;
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            res.headers()
                .get(actix_web::http::header::CONTENT_ENCODING)
                .is_none(),
            "{:?}",
            res.headers()
        );
        let body: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(body["status"], 500);
    }

    #[actix_rt::test]
    async fn a_500_says_nothing_of_internals_and_quotes_the_request_id() {
        let app = test::init_service(
            App::new()
                .route("/broken", web::get().to(broken))
                .route("/plain", web::get().to(plain_405))
                .wrap(actix_web::middleware::from_fn(envelope)),
        )
        .await;
        let res =
            test::call_service(&app, test::TestRequest::get().uri("/broken").to_request()).await;
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let id = res
            .headers()
            .get(&REQUEST_ID)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let body: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(body["status"], 500);
        assert_eq!(body["error"], "Internal Server Error");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(&id), "{message}");
        assert!(!message.contains("db-7"), "{message}");

        // An error response written without a body still gets the JSON body.
        let res =
            test::call_service(&app, test::TestRequest::get().uri("/plain").to_request()).await;
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
        let body: serde_json::Value = test::read_body_json(res).await;
        assert_eq!(body["status"], 405);
    }
}
