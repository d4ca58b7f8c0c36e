//! Fault rules: answers a test suite asks for in place of (or before) the real ones, matched
//! by method, path glob, organization and token. Kept by this process: a suite faults the
//! instance it calls.

use crate::error::{error_response, ApiError};
use crate::AppState;
use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::http::{header, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use domain::ids::OrganizationId;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use uuid::Uuid;

pub const FAULT_HEADER: HeaderName = HeaderName::from_static("x-capstan-fault");

/// The longest latency a rule may add.
const MAX_LATENCY_MS: u64 = 120_000;

/// A fault rule as a test suite asks for it.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultInput {
    /// The method it applies to (default: any).
    pub method: Option<String>,
    /// A glob of the paths it applies to: `*` matches within one segment, `**` across
    /// segments (`/v1/organization/*`, `/v1/**`).
    pub path: String,
    /// Only requests about this organization (in their path) or made with its tokens.
    pub organization_id: Option<OrganizationId>,
    /// Only requests made with this API token (kept as a hash, never shown).
    pub token: Option<String>,
    /// Answer this status instead of the real answer.
    pub status: Option<u16>,
    /// The JSON body of that answer (default: the API's error body).
    pub body: Option<serde_json::Value>,
    /// Wait this long first (then answer `status`, drop, or go on to the real answer).
    pub latency_ms: Option<u64>,
    /// Close the connection without an answer.
    pub drop: Option<bool>,
    /// The chance a matching request is faulted (default 1).
    pub probability: Option<f64>,
    /// Fault this many requests, then retire (default: until removed).
    pub count: Option<u64>,
}

/// A fault rule as the controls show it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FaultView {
    pub id: Uuid,
    pub method: Option<String>,
    pub path: String,
    pub organization_id: Option<OrganizationId>,
    /// Whether the rule is for one token.
    pub token_set: bool,
    pub status: Option<u16>,
    pub body: Option<serde_json::Value>,
    pub latency_ms: u64,
    pub drop: bool,
    pub probability: f64,
    /// Faults left before the rule retires; none: until removed.
    pub remaining: Option<u64>,
    /// Requests faulted so far.
    pub faulted: u64,
}

struct Rule {
    view: FaultView,
    method: Option<Method>,
    path: glob::Pattern,
    token_hash: Option<String>,
}

/// What a matched rule does to one request.
#[derive(Debug, Clone)]
struct Fault {
    id: Uuid,
    latency_ms: u64,
    drop: bool,
    answer: Option<(StatusCode, Option<serde_json::Value>)>,
}

#[derive(Default)]
pub struct Faults {
    rules: Mutex<Vec<Rule>>,
}

fn invalid(field: &str, message: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("{field}: {message}"))
}

impl Faults {
    fn with<R>(&self, f: impl FnOnce(&mut Vec<Rule>) -> R) -> R {
        f(&mut self.rules.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Adds a rule; the checks name the member at fault.
    pub fn add(&self, input: FaultInput) -> Result<FaultView, ApiError> {
        let method = match input.method.as_deref().map(str::trim) {
            None | Some("*") | Some("") => None,
            Some(m) => Some(
                Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| invalid("method", format!("'{m}' is not an HTTP method")))?,
            ),
        };
        if !input.path.starts_with('/') {
            return Err(invalid("path", "must start with /"));
        }
        if input.path.starts_with("/_capstan") {
            return Err(invalid("path", "the controls cannot be faulted"));
        }
        let path = glob::Pattern::new(&input.path).map_err(|e| invalid("path", e))?;
        let status = match input.status {
            None => None,
            Some(s) => Some(
                StatusCode::from_u16(s)
                    .ok()
                    .filter(|s| s.as_u16() >= 200)
                    .ok_or_else(|| invalid("status", "must be an HTTP status from 200 to 999"))?,
            ),
        };
        if input.body.is_some() && status.is_none() {
            return Err(invalid(
                "body",
                "is the body of `status`, which is not given",
            ));
        }
        let latency_ms = input.latency_ms.unwrap_or(0);
        if latency_ms > MAX_LATENCY_MS {
            return Err(invalid(
                "latency_ms",
                format!("must be at most {MAX_LATENCY_MS}"),
            ));
        }
        let drop = input.drop.unwrap_or(false);
        if drop && status.is_some() {
            return Err(invalid("drop", "a dropped connection has no status"));
        }
        if !drop && status.is_none() && latency_ms == 0 {
            return Err(invalid(
                "status",
                "a rule needs status, latency_ms or drop: what to do",
            ));
        }
        let probability = input.probability.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&probability) {
            return Err(invalid("probability", "must be from 0 to 1"));
        }
        if input.count == Some(0) {
            return Err(invalid("count", "must be at least 1"));
        }
        let token = input.token.as_deref().map(str::trim);
        if token.is_some_and(str::is_empty) {
            return Err(invalid("token", "must not be empty"));
        }
        let view = FaultView {
            id: Uuid::new_v4(),
            method: method.as_ref().map(|m| m.to_string()),
            path: input.path,
            organization_id: input.organization_id,
            token_set: token.is_some(),
            status: status.map(|s| s.as_u16()),
            body: input.body,
            latency_ms,
            drop,
            probability,
            remaining: input.count,
            faulted: 0,
        };
        let rule = Rule {
            view: view.clone(),
            method,
            path,
            token_hash: token.map(domain::auth::hash_token),
        };
        self.with(|rules| rules.push(rule));
        Ok(view)
    }

    pub fn list(&self) -> Vec<FaultView> {
        self.with(|rules| rules.iter().map(|r| r.view.clone()).collect())
    }

    /// Removes a rule; false when there is none with this id.
    pub fn remove(&self, id: Uuid) -> bool {
        self.with(|rules| {
            let before = rules.len();
            rules.retain(|r| r.view.id != id);
            rules.len() < before
        })
    }

    pub fn clear(&self) {
        self.with(Vec::clear);
    }

    /// Whether any rule could apply to `method` and `paths` (before anything costly is
    /// known), and whether one of those needs the caller.
    fn may_apply(&self, method: &Method, paths: &Spellings) -> Option<bool> {
        self.with(|rules| {
            let mut matching = rules
                .iter()
                .filter(|r| r.applies_to(method, paths))
                .peekable();
            matching.peek()?;
            Some(matching.any(|r| r.view.organization_id.is_some() || r.token_hash.is_some()))
        })
    }

    /// The fault for this request, if a rule takes it (spending one of its count).
    fn take(&self, request: &Seen) -> Option<Fault> {
        self.with(|rules| {
            let at = rules.iter().position(|r| {
                r.applies_to(&request.method, &request.paths)
                    && r.concerns(request)
                    && (r.view.probability >= 1.0 || rand::random::<f64>() < r.view.probability)
            })?;
            let rule = &mut rules[at];
            rule.view.faulted += 1;
            let fault = Fault {
                id: rule.view.id,
                latency_ms: rule.view.latency_ms,
                drop: rule.view.drop,
                answer: rule.view.status.and_then(|s| {
                    StatusCode::from_u16(s)
                        .ok()
                        .map(|s| (s, rule.view.body.clone()))
                }),
            };
            if let Some(left) = rule.view.remaining.as_mut() {
                *left -= 1;
                if *left == 0 {
                    rules.remove(at);
                }
            }
            Some(fault)
        })
    }
}

/// What a rule may look at of a request.
struct Seen {
    method: Method,
    paths: Spellings,
    token_hash: Option<String>,
    organizations: Vec<OrganizationId>,
}

/// A request's path as asked, and its other spelling: every operation answers under `/v1`
/// and at the root alike, so a rule written for one form takes requests made in the other (a
/// client whose base URL has no `/v1` is faulted by `/v1/organization/*`). Made once per
/// request, whatever the number of rules.
type Spellings = [String; 2];

fn spellings(path: &str) -> Spellings {
    let other = match path.strip_prefix("/v1") {
        Some("") => "/".to_string(),
        Some(rest) if rest.starts_with('/') => rest.to_string(),
        _ => format!("/v1{path}"),
    };
    [path.to_string(), other]
}

impl Rule {
    fn applies_to(&self, method: &Method, paths: &Spellings) -> bool {
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.method.as_ref().is_none_or(|m| m == method)
            && paths.iter().any(|p| self.path.matches_with(p, options))
    }

    fn concerns(&self, request: &Seen) -> bool {
        let token = self
            .token_hash
            .as_ref()
            .is_none_or(|h| request.token_hash.as_ref() == Some(h));
        let organization = self.view.organization_id.is_none_or(|o| {
            request.organizations.contains(&o) || request.paths[0].contains(&o.to_string())
        });
        token && organization
    }
}

/// Applies the first rule that takes the request: waits, drops the connection, or answers in
/// place of the API; every answer a rule touched carries `X-Capstan-Fault: <rule id>`.
pub async fn inject(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let Some(controls) = state.as_ref().and_then(|s| s.controls.as_ref()) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    // The controls stay reachable whatever the rules say: they are how rules are removed.
    if req.path().starts_with("/_capstan/") {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let paths = spellings(req.path());
    let Some(needs_caller) = controls.faults.may_apply(req.method(), &paths) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    let mut seen = Seen {
        method: req.method().clone(),
        paths,
        token_hash: None,
        organizations: Vec::new(),
    };
    if needs_caller {
        seen.token_hash = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .map(|(_, credentials)| domain::auth::hash_token(credentials.trim()));
        if let Ok(p) = crate::extract::authentication(req.request()).await {
            seen.organizations = p.organizations();
        }
    }
    let Some(fault) = controls.faults.take(&seen) else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    if fault.latency_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(fault.latency_ms)).await;
    }
    let mut res = if fault.drop {
        req.into_response(dropped())
    } else if let Some((status, body)) = fault.answer {
        req.into_response(answer(status, body, fault.id))
    } else {
        next.call(req).await?.map_into_boxed_body()
    };
    if let Ok(v) = HeaderValue::from_str(&fault.id.to_string()) {
        res.headers_mut().insert(FAULT_HEADER, v);
    }
    Ok(res)
}

/// Marks an answer a fault rule gave in place of the API's: it goes out as asked.
#[derive(Debug, Clone, Copy)]
pub struct Answered;

fn answer(status: StatusCode, body: Option<serde_json::Value>, rule: Uuid) -> HttpResponse {
    let mut res = match body {
        Some(body) => HttpResponse::build(status).json(body),
        None => error_response(status, &format!("fault injected by rule {rule}")),
    };
    res.extensions_mut().insert(Answered);
    res
}

/// An answer whose body fails before its first byte: the server closes the connection, and
/// the client sees it closed with no complete answer.
fn dropped() -> HttpResponse {
    let failing = futures_util::stream::once(async {
        Err::<web::Bytes, _>(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "dropped by a fault rule",
        ))
    });
    HttpResponse::Ok()
        .insert_header((header::CONNECTION, "close"))
        .streaming(failing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: &str) -> FaultInput {
        FaultInput {
            path: path.into(),
            status: Some(503),
            ..Default::default()
        }
    }

    fn seen(method: Method, path: &str) -> Seen {
        Seen {
            method,
            paths: spellings(path),
            token_hash: None,
            organizations: Vec::new(),
        }
    }

    #[test]
    fn a_glob_star_stays_in_its_segment_and_two_cross_them() {
        let faults = Faults::default();
        faults.add(rule("/v1/organization/*")).unwrap();
        assert!(faults
            .take(&seen(Method::GET, "/v1/organization/abc"))
            .is_some());
        assert!(faults
            .take(&seen(Method::GET, "/v1/organization/abc/project"))
            .is_none());
        assert!(faults.take(&seen(Method::GET, "/v1/project/abc")).is_none());
        faults.clear();
        faults.add(rule("/v1/**")).unwrap();
        assert!(faults
            .take(&seen(Method::GET, "/v1/organization/abc/project"))
            .is_some());
    }

    #[test]
    fn a_rule_takes_both_spellings_of_an_api_path() {
        let faults = Faults::default();
        faults.add(rule("/v1/organization/*")).unwrap();
        assert!(faults
            .take(&seen(Method::GET, "/organization/abc"))
            .is_some());
        assert!(faults
            .take(&seen(Method::GET, "/v1organization/abc"))
            .is_none());
        faults.clear();
        faults.add(rule("/organization/*")).unwrap();
        assert!(faults
            .take(&seen(Method::GET, "/v1/organization/abc"))
            .is_some());
        assert!(faults
            .take(&seen(Method::GET, "/organization/abc"))
            .is_some());
        assert!(faults.take(&seen(Method::GET, "/project/abc")).is_none());
        assert_eq!(spellings("/v1")[1], "/");
        assert_eq!(spellings("/v1/x")[1], "/x");
        assert_eq!(spellings("/v10/x")[1], "/v1/v10/x");
    }

    #[test]
    fn a_count_retires_the_rule_and_method_token_and_organization_narrow_it() {
        let faults = Faults::default();
        let org = OrganizationId::generate();
        let view = faults
            .add(FaultInput {
                method: Some("post".into()),
                count: Some(2),
                organization_id: Some(org),
                token: Some("tok".into()),
                ..rule("/v1/**")
            })
            .unwrap();
        assert_eq!(view.method.as_deref(), Some("POST"));
        assert!(view.token_set);
        let mut hit = seen(Method::POST, "/v1/project/x");
        assert!(
            faults.take(&hit).is_none(),
            "neither token nor organization"
        );
        hit.token_hash = Some(domain::auth::hash_token("tok"));
        assert!(faults.take(&hit).is_none(), "not the organization");
        hit.organizations = vec![org];
        assert!(faults.take(&seen(Method::GET, "/v1/project/x")).is_none());
        assert_eq!(faults.take(&hit).map(|f| f.id), Some(view.id));
        assert_eq!(faults.list()[0].remaining, Some(1));
        assert!(faults.take(&hit).is_some());
        assert!(faults.take(&hit).is_none(), "retired after its count");
        assert!(faults.list().is_empty());
    }

    #[test]
    fn bad_rules_are_refused_naming_the_member() {
        let faults = Faults::default();
        let refused = |input: FaultInput| faults.add(input).unwrap_err().message;
        assert!(refused(rule("v1")).starts_with("path:"));
        assert!(refused(rule("/_capstan/reset")).starts_with("path:"));
        assert!(refused(rule("/v1/[")).starts_with("path:"));
        assert!(refused(FaultInput {
            status: None,
            ..rule("/v1")
        })
        .starts_with("status:"));
        assert!(refused(FaultInput {
            status: Some(99),
            ..rule("/v1")
        })
        .starts_with("status:"));
        assert!(refused(FaultInput {
            probability: Some(1.5),
            ..rule("/v1")
        })
        .starts_with("probability:"));
        assert!(refused(FaultInput {
            drop: Some(true),
            ..rule("/v1")
        })
        .starts_with("drop:"));
        assert!(refused(FaultInput {
            method: Some("NOT A METHOD".into()),
            ..rule("/v1")
        })
        .starts_with("method:"));
        assert!(refused(FaultInput {
            count: Some(0),
            ..rule("/v1")
        })
        .starts_with("count:"));
    }

    #[test]
    fn probability_zero_never_faults() {
        let faults = Faults::default();
        faults
            .add(FaultInput {
                probability: Some(0.0),
                ..rule("/**")
            })
            .unwrap();
        for _ in 0..100 {
            assert!(faults.take(&seen(Method::GET, "/healthz")).is_none());
        }
    }
}
