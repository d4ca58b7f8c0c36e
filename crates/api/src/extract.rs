//! Request extractors: the authenticated principal, JSON bodies, path ids and page parameters,
//! each failing with the API's error body and a message naming what is wrong.

use crate::error::ApiError;
use crate::AppState;
use actix_web::http::{header, StatusCode};
use actix_web::{dev::Payload, web, FromRequest, HttpMessage, HttpRequest};
use domain::auth::Principal;
use domain::model::from_json;
use domain::pagination::PageRequest;
use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use std::str::FromStr;

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "application state missing",
            )
        })
}

/// The caller, from `Authorization: Token ...` (or `Bearer ...`).
pub struct Auth(pub Principal);

pub(crate) type Authentication = Shared<LocalBoxFuture<'static, Result<Principal, ApiError>>>;

/// The request's authentication, started once and shared by every extractor that needs it.
///
/// actix polls a handler's extractors together and answers with the first error; the body and
/// query extractors therefore wait for authentication before reporting their own errors, so that
/// a request with bad credentials always gets 401, never a 400 about its page number.
pub(crate) fn authentication(req: &HttpRequest) -> Authentication {
    if let Some(running) = req.extensions().get::<Authentication>() {
        return running.clone();
    }
    let started = authenticate(req).boxed_local().shared();
    req.extensions_mut().insert(started.clone());
    started
}

impl FromRequest for Auth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let auth = authentication(req);
        // Every authenticated route reads its query through here first: no parameter may
        // carry a NUL character into a filter or a record.
        let query = query_without_nul(req.query_string());
        Box::pin(async move {
            let p = auth.await?;
            query?;
            Ok(Auth(p))
        })
    }
}

/// The caller of the live API: `Authorization` as on REST or, for browsers (which cannot set a
/// WebSocket's headers), the `token` query parameter: an API token, a JWT, or the header's
/// whole value. The parameter is read here only; no log line carries a query string.
/// The credential is kept: the socket checks it again as long as it stays open.
pub struct LiveAuth(pub Principal, pub Credential);

/// An `Authorization` value, never shown (not even by `Debug`).
pub struct Credential(String);

impl Credential {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(..)")
    }
}

impl FromRequest for LiveAuth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let header = header_value(req).or_else(|| {
            let token = query_value(req, "token").ok().flatten()?;
            Some(Ok(authorization_of(token.trim())))
        });
        let credential = header.clone().and_then(Result::ok).unwrap_or_default();
        let auth = authenticate_with(req, header);
        let query = query_without_nul(req.query_string());
        Box::pin(async move {
            let p = auth.await?;
            query?;
            Ok(LiveAuth(p, Credential(credential)))
        })
    }
}

/// The `Authorization` value a bare token stands for: a JWT (three dot-separated parts) is a
/// bearer, anything else an API token; a value with its scheme is kept as it is.
fn authorization_of(token: &str) -> String {
    if token.contains(' ') {
        token.to_string()
    } else if token.split('.').count() == 3 {
        format!("Bearer {token}")
    } else {
        format!("Token {token}")
    }
}

/// The `Authorization` header, or `Err` when it is not text.
fn header_value(req: &HttpRequest) -> Option<Result<String, ()>> {
    req.headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().map(str::to_owned).map_err(|_| ()))
}

fn authenticate(
    req: &HttpRequest,
) -> impl std::future::Future<Output = Result<Principal, ApiError>> + 'static {
    authenticate_with(req, header_value(req))
}

fn authenticate_with(
    req: &HttpRequest,
    header: Option<Result<String, ()>>,
) -> impl std::future::Future<Output = Result<Principal, ApiError>> + 'static {
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let origin = agent.map_or(
        domain::model::Origin::Api,
        domain::model::Origin::from_user_agent,
    );
    let user_agent: Option<String> = agent.map(|a| a.chars().take(256).collect());
    let state = state(req);
    let principal = async move {
        let value = match header {
            None => return Err(ApiError::unauthorized("Authorization header is missing")),
            Some(Err(_)) => {
                return Err(ApiError::unauthorized("Authorization header is malformed"))
            }
            Some(Ok(v)) => v,
        };
        principal_of(&*state?, &value).await
    };
    async move {
        let mut p = principal.await?;
        p.origin = origin;
        p.user_agent = user_agent;
        Ok(p)
    }
}

/// Who an `Authorization` value (`Token <api token>` or `Bearer <jwt>`) stands for now: a
/// deleted token, a JWT past its expiry or a user no longer known is refused.
pub(crate) async fn principal_of(state: &AppState, value: &str) -> Result<Principal, ApiError> {
    let (scheme, credentials) = value.trim().split_once(' ').ok_or_else(|| {
        ApiError::unauthorized("Authorization must be 'Token <api token>' or 'Bearer <jwt>'")
    })?;
    let credentials = credentials.trim();
    if credentials.is_empty() {
        return Err(ApiError::unauthorized(
            "Authorization credentials are empty",
        ));
    }
    if scheme.eq_ignore_ascii_case("token") {
        Ok(state.capstan.authenticate_api_token(credentials).await?)
    } else if scheme.eq_ignore_ascii_case("bearer") {
        let Some(verifier) = &state.jwt else {
            return Err(ApiError::unauthorized(
                "Bearer tokens are not accepted: no JWT key is configured",
            ));
        };
        let subject = verifier
            .subject(credentials)
            .map_err(ApiError::unauthorized)?;
        Ok(state.capstan.authenticate_user(&subject).await?)
    } else {
        Err(ApiError::unauthorized(
            "Authorization must be 'Token <api token>' or 'Bearer <jwt>'",
        ))
    }
}

/// A JSON body parsed into `T`; errors name the member at fault.
pub struct JsonBody<T>(pub T);

fn is_json(content_type: &str) -> bool {
    let mime = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// Reads the body as JSON once authentication is known (so bad credentials answer 401 before
/// any complaint about the body); `None` when there is no body and `required` is false.
fn json_body<T: DeserializeOwned + 'static>(
    req: &HttpRequest,
    payload: &mut Payload,
    required: bool,
) -> LocalBoxFuture<'static, Result<Option<T>, ApiError>> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let declared_len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let limit = state(req).map(|s| s.body_limit);
    let mut payload = payload.take();
    let auth = authentication(req);
    Box::pin(async move {
        let parsed = read_json(content_type, declared_len, limit, &mut payload, required).await;
        if parsed.is_err() {
            auth.await?;
        }
        parsed
    })
}

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = json_body::<T>(req, payload, true);
        Box::pin(async move {
            body.await?
                .map(JsonBody)
                .ok_or_else(|| ApiError::bad_request("body: a JSON body is required"))
        })
    }
}

/// A JSON body that may be left out (then `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default + 'static> FromRequest for OptionalJson<T> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = json_body::<T>(req, payload, false);
        Box::pin(async move { Ok(OptionalJson(body.await?.unwrap_or_default())) })
    }
}

pub(crate) async fn read_json<T: DeserializeOwned>(
    content_type: Option<String>,
    declared_len: Option<usize>,
    limit: Result<usize, ApiError>,
    payload: &mut Payload,
    required: bool,
) -> Result<Option<T>, ApiError> {
    let limit = limit?;
    if let Some(ct) = &content_type {
        if !is_json(ct) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Type must be application/json, not {ct}"),
            ));
        }
    }
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body: the request body is larger than {limit} bytes"),
        )
    };
    if declared_len.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("body: could not be read: {e}")))?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return if required {
            Err(ApiError::bad_request("body: a JSON body is required"))
        } else {
            Ok(None)
        };
    }
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("body: malformed JSON: {e}")))?;
    if let Some(at) = nul_in(&value, "body") {
        return Err(nul_refused(&at));
    }
    if value.is_null() && !required {
        return Ok(None);
    }
    Ok(Some(from_json(&value)?))
}

/// Where a JSON value holds a NUL character (in a string or a member's name), as a path from
/// `at` (`body.name`, `body.ports[0].name`). No text Capstan keeps may hold one: PostgreSQL
/// refuses it, and both backends must answer alike.
fn nul_in(value: &serde_json::Value, at: &str) -> Option<String> {
    match value {
        serde_json::Value::String(s) if s.contains('\0') => Some(at.to_string()),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_in(v, &format!("{at}[{i}]"))),
        serde_json::Value::Object(members) => members.iter().find_map(|(k, v)| {
            let here = format!("{at}.{k}");
            if k.contains('\0') {
                Some(here)
            } else {
                nul_in(v, &here)
            }
        }),
        _ => None,
    }
}

fn nul_refused(at: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{}: must not contain a NUL character",
        at.strip_prefix("body.").unwrap_or(at)
    ))
}

/// Refuses a query string any of whose names or values holds a NUL character (`%00`), naming
/// the parameter.
pub fn query_without_nul(query: &str) -> Result<(), ApiError> {
    if !query.contains("%00") && !query.contains('\0') {
        return Ok(());
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    match pairs
        .iter()
        .find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        Some((k, _)) => Err(nul_refused(&k.replace('\0', "\\0"))),
        None => Ok(()),
    }
}

/// A path parameter parsed as an id; a malformed one is a 400 naming the parameter.
pub fn path_id<T: FromStr>(req: &HttpRequest, name: &str) -> Result<T, ApiError> {
    let raw = req.match_info().get(name).unwrap_or_default();
    domain::ids::parse_uuid(raw)
        .ok()
        .and_then(|_| raw.parse().ok())
        .ok_or_else(|| ApiError::bad_request(format!("{name}: '{raw}' is not a valid UUID")))
}

/// A service's id; the parameter is named for the kind (`applicationId`, `helmId`, ...), as
/// clients know it.
pub fn service_id(
    req: &HttpRequest,
    kind: domain::model::ServiceKind,
) -> Result<domain::ids::ServiceId, ApiError> {
    path_id(req, &format!("{}Id", kind.path_segment()))
}

/// `page` and `page_size` from the query string.
pub struct Paging(pub PageRequest);

impl FromRequest for Paging {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let parsed = paging(req.query_string());
        let auth = parsed.is_err().then(|| authentication(req));
        Box::pin(async move {
            if let Some(auth) = auth {
                auth.await?;
            }
            parsed.map(Paging)
        })
    }
}

/// The paging of a deployment history: the public `pageSize` and `startId`, and API.md's
/// `page` and `page_size` (`page_size` and `pageSize` name the same thing). `DEFAULT` items
/// when no size is given: the public description's 20, or API.md's 100 for the older history
/// SPEC.md's endpoint 11 pages as a list.
pub struct HistoryPaging<const DEFAULT: u32 = 20>(pub domain::services::HistoryPaging);

impl<const DEFAULT: u32> FromRequest for HistoryPaging<DEFAULT> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let parsed = history_paging(req.query_string(), DEFAULT);
        let auth = parsed.is_err().then(|| authentication(req));
        Box::pin(async move {
            if let Some(auth) = auth {
                auth.await?;
            }
            parsed.map(HistoryPaging)
        })
    }
}

fn history_paging(
    query: &str,
    default_size: u32,
) -> Result<domain::services::HistoryPaging, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    let get = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let number = |key: &str, min: u32, max: u32| -> Result<Option<u32>, ApiError> {
        get(key)
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|n| n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64)
                    .map(|n| n as u32)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "{key}: must be a whole number from {min} to {max}"
                        ))
                    })
            })
            .transpose()
    };
    let max = domain::pagination::MAX_PAGE_SIZE;
    let page_size = match number("pageSize", 1, max)? {
        Some(n) => n,
        None => number("page_size", 1, max)?.unwrap_or(default_size),
    };
    let page = number("page", 1, u32::MAX / max)?.unwrap_or(1);
    let start_id = get("startId")
        .map(|v| {
            domain::ids::parse_uuid(v)
                .map_err(|_| ApiError::bad_request(format!("startId: '{v}' is not a valid UUID")))
        })
        .transpose()?;
    Ok(domain::services::HistoryPaging {
        page,
        page_size,
        start_id,
    })
}

/// One query parameter (the last if repeated).
pub fn query_value(req: &HttpRequest, name: &str) -> Result<Option<String>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(req.query_string())
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    Ok(pairs
        .into_iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v))
}

/// One query parameter read as a `T`; a value that does not read is refused naming the
/// parameter ("service_id: must be a UUID").
pub fn query_parsed<T: FromStr>(
    req: &HttpRequest,
    name: &str,
    expected: &str,
) -> Result<Option<T>, ApiError> {
    query_value(req, name)?
        .map(|v| {
            v.parse()
                .map_err(|_| ApiError::bad_request(format!("{name}: must be {expected}")))
        })
        .transpose()
}

fn paging(query: &str) -> Result<PageRequest, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    let get = |key: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    Ok(PageRequest::parse(get("page"), get("page_size"))?)
}

/// A delivery as the domain reads it: the headers (lower-case names) and the raw body.
pub(crate) fn delivery(
    headers: &actix_web::http::header::HeaderMap,
    body: &[u8],
) -> domain::services::Delivery {
    let headers = headers
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.as_str().to_ascii_lowercase(),
                v.to_str().ok()?.to_string(),
            ))
        })
        .collect();
    domain::services::Delivery {
        headers,
        body: body.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_token_gets_its_scheme() {
        assert_eq!(authorization_of("cap_abc"), "Token cap_abc");
        assert_eq!(authorization_of("aaa.bbb.ccc"), "Bearer aaa.bbb.ccc");
        assert_eq!(authorization_of("Token cap_abc"), "Token cap_abc");
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
    }

    #[test]
    fn paging_parameters() {
        let p = paging("page=2&page_size=10&other=x").unwrap();
        assert_eq!((p.page(), p.page_size()), (2, 10));
        assert!(paging("page_size=0")
            .unwrap_err()
            .message
            .starts_with("page_size:"));
        assert!(paging("page=x").unwrap_err().message.starts_with("page:"));
    }
}
