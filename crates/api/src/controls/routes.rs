//! The controls' routes: each maps one request onto the domain, the clock or the fault rules.

use super::faults::{FaultInput, FaultView};
use super::{ControlJson, Operator};
use crate::error::{ApiError, ApiResult};
use crate::extract::path_id;
use crate::openapi::{Body, Doc, Routes};
use crate::routes::{created, no_content, ok};
use actix_web::{HttpRequest, HttpResponse};
use domain::ids::ServiceId;
use domain::model::{ServiceState, StepName};
use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetInput {
    /// Keep the API tokens (with their organizations and members) working.
    #[serde(default)]
    pub keep_tokens: bool,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldInput {
    pub service_id: Option<ServiceId>,
    /// Where the service's next deployment stops: BUILDING, DEPLOYING, EXECUTING, RESTARTING,
    /// STOPPING or DELETING.
    pub state: Option<ServiceState>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseInput {
    pub service_id: Option<ServiceId>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailInput {
    pub service_id: Option<ServiceId>,
    /// The step that fails (BUILD, DEPLOYMENT, EXECUTING, ...).
    pub step: Option<StepName>,
    /// The reason the deployment shows.
    pub message: Option<String>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockInput {
    /// Moves the clock by this many seconds (back, when negative).
    pub advance_seconds: Option<i64>,
    /// Sets the clock (RFC 3339).
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub now: Option<time::OffsetDateTime>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClockView {
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub now: time::OffsetDateTime,
    /// Whether the controls may move it (`CAPSTAN_CLOCK=manual`).
    pub manual: bool,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotInput {
    /// 1 to 40 of a-z, 0-9, _ and -.
    pub name: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SnapshotView {
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: time::OffsetDateTime,
    /// The rows it holds, across every table.
    pub rows: u64,
}

impl From<domain::model::Snapshot> for SnapshotView {
    fn from(s: domain::model::Snapshot) -> Self {
        Self {
            name: s.name.to_string(),
            created_at: s.created_at,
            rows: s.rows,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct SnapshotList {
    pub results: Vec<SnapshotView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FaultList {
    pub results: Vec<FaultView>,
}

fn required<T>(value: Option<T>, field: &str) -> ApiResult<T> {
    value.ok_or_else(|| ApiError::bad_request(format!("{field}: is required")))
}

async fn reset(
    op: Operator,
    ControlJson(input): ControlJson<ResetInput>,
) -> ApiResult<HttpResponse> {
    op.0.capstan.reset(input.keep_tokens).await?;
    op.0.limiter.forget();
    op.controls()?.faults.clear();
    Ok(no_content())
}

async fn save_snapshot(
    op: Operator,
    ControlJson(input): ControlJson<SnapshotInput>,
) -> ApiResult<HttpResponse> {
    let name = required(input.name, "name")?;
    Ok(created(SnapshotView::from(
        op.0.capstan.save_snapshot(&name).await?,
    )))
}

async fn list_snapshots(op: Operator) -> ApiResult<HttpResponse> {
    let results = op.0.capstan.snapshots().await?;
    Ok(ok(SnapshotList {
        results: results.into_iter().map(Into::into).collect(),
    }))
}

async fn restore_snapshot(op: Operator, req: HttpRequest) -> ApiResult<HttpResponse> {
    let name = req.match_info().get("name").unwrap_or_default();
    op.0.capstan.restore_snapshot(name).await?;
    // A suite restoring between tests starts each with its quotas whole, as after a reset.
    op.0.limiter.forget();
    Ok(no_content())
}

async fn delete_snapshot(op: Operator, req: HttpRequest) -> ApiResult<HttpResponse> {
    let name = req.match_info().get("name").unwrap_or_default();
    op.0.capstan.delete_snapshot(name).await?;
    Ok(no_content())
}

/// A body of at most [`super::CONTROL_BODY_LIMIT`] bytes, whatever its type.
async fn text(mut payload: actix_web::web::Payload) -> ApiResult<actix_web::web::BytesMut> {
    use futures_util::StreamExt;
    let mut body = actix_web::web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("body: could not be read: {e}")))?;
        if body.len() + chunk.len() > super::CONTROL_BODY_LIMIT {
            return Err(ApiError::new(
                actix_web::http::StatusCode::PAYLOAD_TOO_LARGE,
                format!("body: larger than {} bytes", super::CONTROL_BODY_LIMIT),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

async fn seed(op: Operator, payload: actix_web::web::Payload) -> ApiResult<HttpResponse> {
    let fixture = super::fixture::parse(&text(payload).await?)?;
    Ok(created(op.0.capstan.seed(&fixture).await?))
}

async fn export(op: Operator, req: HttpRequest) -> ApiResult<HttpResponse> {
    let fixture = op.0.capstan.export().await?;
    let accept = req
        .headers()
        .get(actix_web::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let format = crate::extract::query_value(&req, "format")?;
    if format.as_deref() == Some("yaml") || accept.contains("yaml") {
        return Ok(HttpResponse::Ok()
            .content_type("application/yaml")
            .body(super::fixture::yaml(&fixture)?));
    }
    Ok(ok(fixture))
}

async fn add_fault(
    op: Operator,
    ControlJson(input): ControlJson<FaultInput>,
) -> ApiResult<HttpResponse> {
    Ok(created(op.controls()?.faults.add(input)?))
}

async fn list_faults(op: Operator) -> ApiResult<HttpResponse> {
    let results = op.controls()?.faults.list();
    Ok(ok(FaultList { results }))
}

async fn clear_faults(op: Operator) -> ApiResult<HttpResponse> {
    op.controls()?.faults.clear();
    Ok(no_content())
}

async fn remove_fault(op: Operator, req: HttpRequest) -> ApiResult<HttpResponse> {
    let id = path_id(&req, "id")?;
    if op.controls()?.faults.remove(id) {
        Ok(no_content())
    } else {
        Err(domain::DomainError::NotFound("fault rule").into())
    }
}

async fn hold(op: Operator, ControlJson(input): ControlJson<HoldInput>) -> ApiResult<HttpResponse> {
    let service = required(input.service_id, "service_id")?;
    let state = required(input.state, "state")?;
    op.0.capstan.hold(service, state).await?;
    Ok(no_content())
}

async fn release(
    op: Operator,
    ControlJson(input): ControlJson<ReleaseInput>,
) -> ApiResult<HttpResponse> {
    op.0.capstan
        .release(required(input.service_id, "service_id")?)
        .await?;
    Ok(no_content())
}

async fn fail(op: Operator, ControlJson(input): ControlJson<FailInput>) -> ApiResult<HttpResponse> {
    let service = required(input.service_id, "service_id")?;
    let step = required(input.step, "step")?;
    let message = required(input.message, "message")?;
    op.0.capstan.fail_step(service, step, &message).await?;
    Ok(no_content())
}

async fn clock(op: Operator) -> ApiResult<HttpResponse> {
    Ok(ok(ClockView {
        now: op.0.clock.now(),
        manual: op.controls()?.clock.is_some(),
    }))
}

async fn move_clock(
    op: Operator,
    ControlJson(input): ControlJson<ClockInput>,
) -> ApiResult<HttpResponse> {
    let Some(manual) = &op.controls()?.clock else {
        return Err(ApiError::new(
            actix_web::http::StatusCode::CONFLICT,
            "the clock is the system's: start Capstan with CAPSTAN_CLOCK=manual to move it",
        ));
    };
    match (input.advance_seconds, input.now) {
        (Some(seconds), None) => {
            if !manual.advance(time::Duration::seconds(seconds)) {
                return Err(ApiError::bad_request(
                    "advance_seconds: would take the clock past the dates it can tell",
                ));
            }
        }
        (None, Some(now)) => {
            if !manual.set(now) {
                return Err(ApiError::bad_request(
                    "now: too near the dates the clock can tell (years -9999 to 9999)",
                ));
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "advance_seconds: give either advance_seconds or now",
            ))
        }
    }
    clock(op).await
}

/// The controls, at the root only.
pub fn routes(r: &mut Routes) {
    let done = |summary: &'static str| Doc::answer(summary, 204, None).control();
    r.at("/_capstan/reset")
        .post(
            reset,
            done("Empties everything, in one transaction").optional_body(Body::of::<ResetInput>()),
        )
        .add();
    r.at("/_capstan/snapshots")
        .post(
            save_snapshot,
            Doc::create::<SnapshotView, SnapshotInput>("Saves the whole state under a name")
                .control(),
        )
        .get(
            list_snapshots,
            Doc::get::<SnapshotList>("The saved snapshots").control(),
        )
        .add();
    r.at("/_capstan/snapshots/{name}/restore")
        .post(
            restore_snapshot,
            done("Brings back a snapshot's state, in one transaction"),
        )
        .add();
    r.at("/_capstan/snapshots/{name}")
        .delete(delete_snapshot, done("Removes a snapshot"))
        .add();
    r.at("/_capstan/seed")
        .post(
            seed,
            Doc::create::<domain::model::Seeded, domain::model::Fixture>(
                "Loads a fixture (JSON or YAML) through the use cases",
            )
            .control(),
        )
        .add();
    r.at("/_capstan/export")
        .get(
            export,
            Doc::get::<domain::model::Fixture>(
                "The whole state as a fixture (secret values left out); YAML with ?format=yaml",
            )
            .control(),
        )
        .add();
    r.at("/_capstan/faults")
        .post(
            add_fault,
            Doc::create::<FaultView, FaultInput>("Adds a fault rule").control(),
        )
        .get(
            list_faults,
            Doc::get::<FaultList>("The fault rules").control(),
        )
        .delete(clear_faults, done("Removes every fault rule"))
        .add();
    r.at("/_capstan/faults/{id}")
        .delete(remove_fault, done("Removes a fault rule"))
        .add();
    r.at("/_capstan/engine/hold")
        .post(
            hold,
            done("Holds a service's next deployment at a state").body(Body::of::<HoldInput>()),
        )
        .add();
    r.at("/_capstan/engine/release")
        .post(
            release,
            done("Lets a held deployment go on").body(Body::of::<ReleaseInput>()),
        )
        .add();
    r.at("/_capstan/engine/fail")
        .post(
            fail,
            done("Fails a step of a service's next deployment").body(Body::of::<FailInput>()),
        )
        .add();
    r.at("/_capstan/clock")
        .get(
            clock,
            Doc::get::<ClockView>("The application's time").control(),
        )
        .post(
            move_clock,
            Doc::edit::<ClockView, ClockInput>("Moves the application's time").control(),
        )
        .add();
}
