//! The organization's event log: the audit log (`GET /organization/{id}/events`, paged by
//! time tokens as the public API has it) and the live stream (`/events/stream`, Server-Sent
//! Events resumable by `Last-Event-ID`).

use super::ok;
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, Auth};
use crate::openapi::{Body, Doc, Query, Routes};
use crate::AppState;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::auth::Principal;
use domain::changes::Change;
use domain::ids::OrganizationId;
use domain::model::{
    DeploymentChange, EventFilter, EventType, OrgEvent, Origin, StreamFilter, SubTargetType,
    TargetLevel, TargetType,
};
use domain::services::{AuditCursor, AuditPage};
use serde::Serialize;
use std::str::FromStr;
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

type St = web::Data<AppState>;
const ORG: &str = "organizationId";
/// The public default page size of the audit log.
const DEFAULT_PAGE_SIZE: u32 = 10;
const MAX_PAGE_SIZE: u32 = 100;
/// How long a stream may stay silent before it sends a comment (so proxies keep the
/// connection). Between, it waits for events to be given positions (`Change::Sequenced`).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The public `OrganizationEventResponse`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EventView {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub timestamp: OffsetDateTime,
    pub event_type: Option<EventType>,
    pub target_id: Option<Uuid>,
    pub target_name: String,
    pub target_type: TargetType,
    pub sub_target_type: Option<SubTargetType>,
    pub change: String,
    pub origin: Origin,
    pub triggered_by: String,
    pub project_id: Option<Uuid>,
    pub project_name: String,
    pub environment_id: Option<Uuid>,
    pub environment_name: String,
    pub user_agent: Option<String>,
    pub original_change: Option<String>,
}

impl From<&OrgEvent> for EventView {
    fn from(e: &OrgEvent) -> Self {
        Self {
            id: e.id.0,
            timestamp: e.created_at,
            event_type: e.event_type,
            target_id: e.target_id,
            target_name: e.target_name.clone(),
            target_type: e.target_type,
            sub_target_type: e.sub_target_type,
            change: e.change.clone(),
            origin: e.origin,
            triggered_by: e.triggered_by.clone(),
            project_id: e.project_id.map(|p| p.0),
            project_name: e.project_name.clone(),
            environment_id: e.environment_id.map(|e| e.0),
            environment_name: e.environment_name.clone(),
            user_agent: e.user_agent.clone(),
            original_change: None,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EventLinks {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The public `OrganizationEventResponseList`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EventListView {
    pub links: EventLinks,
    pub organization_max_limit_reached: bool,
    pub events: Vec<EventView>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct TargetView {
    pub id: Uuid,
    pub name: String,
}

/// The public `OrganizationEventTargetResponseList`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TargetListView {
    pub targets: Vec<TargetView>,
}

/// An event as the stream sends it: the audit log's members, its stream position, and how
/// the deployment changed when it is about one.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StreamEventView {
    pub position: i64,
    #[serde(flatten)]
    pub event: EventView,
    pub service_id: Option<Uuid>,
    #[schema(value_type = Option<Object>)]
    pub deployment: Option<DeploymentChange>,
}

pub fn routes(r: &mut Routes) {
    let mut log = Doc::get::<EventListView>(
        "The organization's audit log, newest first: every write through the API and how \
         deployments ended, with who, what, on which resource, when and from where",
    )
    .query(Query::integer("pageSize", 1, Some(MAX_PAGE_SIZE.into())));
    for name in [
        "fromTimestamp",
        "toTimestamp",
        "continueToken",
        "stepBackToken",
        "triggeredBy",
        "serviceProjectId",
        "serviceEnvironmentId",
    ] {
        log = log.query(Query::of::<String>(name, false));
    }
    log = log
        .query(Query::of::<EventType>("eventType", false))
        .query(Query::of::<TargetType>("targetType", false))
        .query(Query::uuid("targetId", false))
        .query(Query::of::<SubTargetType>("subTargetType", false))
        .query(Query::of::<Origin>("origin", false));
    r.at("/organization/{organizationId}/events")
        .get(audit_log, log)
        .add();
    let mut targets = Doc::get::<TargetListView>(
        "The resources the organization's audit events are about, each once, most recent \
         first; with targetLevelToFetch, the projects or environments they happened in",
    );
    for name in ["fromTimestamp", "toTimestamp", "triggeredBy"] {
        targets = targets.query(Query::of::<String>(name, false));
    }
    targets = targets
        .query(Query::of::<EventType>("eventType", false))
        .query(Query::of::<TargetType>("targetType", false))
        .query(Query::of::<Origin>("origin", false))
        .query(Query::uuid("projectId", false))
        .query(Query::uuid("environmentId", false))
        .query(Query::of::<TargetLevel>("targetLevelToFetch", false));
    r.at("/organization/{organizationId}/targets")
        .get(targets_of, targets)
        .add();
    r.at("/organization/{organizationId}/events/stream")
        .get(
            stream,
            Doc::answer(
                "A live stream of the organization's events (Server-Sent Events): deployment \
                 progress and audit events as they happen, in order. Each message's `id` is its \
                 stream position: send it back as `Last-Event-ID` (or `?last_event_id=`) to \
                 resume where the stream stopped. Filter with `project_id`, `environment_id`, \
                 `service_id`.",
                200,
                Some(Body::text("text/event-stream")),
            )
            .query(Query::uuid("project_id", false))
            .query(Query::uuid("environment_id", false))
            .query(Query::uuid("service_id", false))
            .query(Query::integer("last_event_id", 0, None)),
        )
        .add();
}

/// The query string's pairs; a malformed one is 400.
fn pairs(req: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(req.query_string())
        .map_err(|_| ApiError::bad_request("query: malformed query string"))
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// An id among the parameters, in the hyphenated form only.
fn uuid_param<T: From<Uuid>>(
    pairs: &[(String, String)],
    name: &str,
) -> Result<Option<T>, ApiError> {
    param(pairs, name)
        .map(|raw| {
            domain::ids::parse_uuid(raw)
                .map(T::from)
                .map_err(|_| ApiError::bad_request(format!("{name}: '{raw}' is not a valid UUID")))
        })
        .transpose()
}

/// A stream position: a whole number from 0.
fn position(raw: &str, name: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
        ApiError::bad_request(format!("{name}: '{raw}' is not an event id of this stream"))
    })
}

fn enumerated<T: FromStr<Err = String>>(
    pairs: &[(String, String)],
    name: &str,
) -> Result<Option<T>, ApiError> {
    param(pairs, name)
        .map(|raw| {
            raw.parse()
                .map_err(|e: String| ApiError::bad_request(format!("{name}: {e}")))
        })
        .transpose()
}

/// A time as the public API writes it (nanoseconds since 1970), or RFC 3339.
fn instant(pairs: &[(String, String)], name: &str) -> Result<Option<OffsetDateTime>, ApiError> {
    let Some(raw) = param(pairs, name) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::bad_request(format!(
            "{name}: '{raw}' is not a timestamp (nanoseconds since 1970, or RFC 3339)"
        ))
    };
    let t = match raw.parse::<i128>() {
        Ok(nanos) => OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| bad())?,
        Err(_) => OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
            .map_err(|_| bad())?,
    };
    Ok(Some(t))
}

fn token(t: OffsetDateTime) -> String {
    t.unix_timestamp_nanos().to_string()
}

/// The address of the same list with `name` set to `value` (and the other token dropped):
/// under the operator's public URL, else relative.
fn link(
    base: Option<&str>,
    req: &HttpRequest,
    pairs: &[(String, String)],
    name: &str,
    value: String,
) -> String {
    let mut kept: Vec<(&str, &str)> = pairs
        .iter()
        .filter(|(k, _)| k != "continueToken" && k != "stepBackToken")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    kept.push((name, &value));
    let query = serde_urlencoded::to_string(&kept).unwrap_or_default();
    format!("{}{}?{query}", base.unwrap_or_default(), req.path())
}

async fn audit_log(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let org: OrganizationId = path_id(&req, ORG)?;
    let q = pairs(&req)?;
    let page_size = match param(&q, "pageSize") {
        None => DEFAULT_PAGE_SIZE,
        Some(raw) => raw
            .parse::<f64>()
            .ok()
            .filter(|n| n.fract() == 0.0 && (1.0..=f64::from(MAX_PAGE_SIZE)).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "pageSize: must be a whole number from 1 to {MAX_PAGE_SIZE}, not '{raw}'"
                ))
            })?,
    };
    let target_id: Option<Uuid> = uuid_param(&q, "targetId")?;
    let target_type: Option<TargetType> = enumerated(&q, "targetType")?;
    if target_id.is_some() && target_type.is_none() {
        return Err(ApiError::bad_request(
            "targetId: must be given with targetType",
        ));
    }
    let filter = EventFilter {
        from: instant(&q, "fromTimestamp")?,
        to: instant(&q, "toTimestamp")?,
        event_type: enumerated(&q, "eventType")?,
        target_type,
        target_id,
        sub_target_type: enumerated(&q, "subTargetType")?,
        triggered_by: param(&q, "triggeredBy").map(str::to_string),
        origin: enumerated(&q, "origin")?,
        project_id: uuid_param(&q, "serviceProjectId")?,
        environment_id: uuid_param(&q, "serviceEnvironmentId")?,
    };
    let cursor = match (instant(&q, "continueToken")?, instant(&q, "stepBackToken")?) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "continueToken: give continueToken or stepBackToken, not both",
            ))
        }
        (Some(t), None) => AuditCursor::Before(t),
        (None, Some(t)) => AuditCursor::After(t),
        (None, None) => AuditCursor::Newest,
    };
    let page: AuditPage = st
        .capstan
        .audit_log(&p, org, &filter, cursor, page_size)
        .await?;
    let base = st.links_base.as_deref();
    Ok(ok(EventListView {
        links: EventLinks {
            previous: page
                .previous
                .map(|t| link(base, &req, &q, "stepBackToken", token(t))),
            next: page
                .next
                .map(|t| link(base, &req, &q, "continueToken", token(t))),
        },
        organization_max_limit_reached: false,
        events: page.events.iter().map(EventView::from).collect(),
    }))
}

async fn targets_of(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let org: OrganizationId = path_id(&req, ORG)?;
    let q = pairs(&req)?;
    let filter = EventFilter {
        from: instant(&q, "fromTimestamp")?,
        to: instant(&q, "toTimestamp")?,
        event_type: enumerated(&q, "eventType")?,
        target_type: enumerated(&q, "targetType")?,
        triggered_by: param(&q, "triggeredBy").map(str::to_string),
        origin: enumerated(&q, "origin")?,
        project_id: uuid_param(&q, "projectId")?,
        environment_id: uuid_param(&q, "environmentId")?,
        ..EventFilter::default()
    };
    let level: Option<TargetLevel> = enumerated(&q, "targetLevelToFetch")?;
    let found = st.capstan.event_targets(&p, org, &filter, level).await?;
    Ok(ok(TargetListView {
        targets: found
            .into_iter()
            .map(|(id, name)| TargetView { id, name })
            .collect(),
    }))
}

/// One Server-Sent Events message.
fn message(e: &OrgEvent) -> web::Bytes {
    let kind = if e.deployment.is_some() {
        "deployment"
    } else {
        "audit"
    };
    let position = e.position.unwrap_or_default();
    let view = StreamEventView {
        position,
        event: EventView::from(e),
        service_id: e.service_id.map(|s| s.0),
        deployment: e.deployment.clone(),
    };
    let data = serde_json::to_string(&view).unwrap_or_default();
    web::Bytes::from(format!("id: {position}\nevent: {kind}\ndata: {data}\n\n"))
}

/// Where the stream starts: after the position the client last saw, or after the last one
/// now (a new subscriber hears what happens from now on).
async fn start(
    st: &St,
    p: &Principal,
    org: OrganizationId,
    req: &HttpRequest,
    q: &[(String, String)],
) -> ApiResult<i64> {
    let header = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let given = match header {
        Some(raw) => Some(position(raw, "Last-Event-ID")?),
        None => param(q, "last_event_id")
            .map(|raw| position(raw, "last_event_id"))
            .transpose()?,
    };
    match given {
        Some(position) => {
            // Checks the organization and the principal's access, as a new subscriber's
            // start does.
            st.capstan.last_event_position(p, org).await?;
            Ok(position)
        }
        None => Ok(st.capstan.last_event_position(p, org).await?),
    }
}

async fn stream(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let org: OrganizationId = path_id(&req, ORG)?;
    let q = pairs(&req)?;
    let filter = StreamFilter {
        project_id: uuid_param(&q, "project_id")?,
        environment_id: uuid_param(&q, "environment_id")?,
        service_id: uuid_param(&q, "service_id")?,
    };
    let after = start(&st, &p, org, &req, &q).await?;
    let capstan = st.capstan.clone();
    let stopping = st.stopping.clone();
    // A comment first: the client knows it is connected before any event comes.
    let opening = futures_util::stream::once(async {
        Ok::<_, actix_web::Error>(web::Bytes::from_static(b": connected\n\n"))
    });
    let state = (capstan, p, after, tokio::time::Instant::now());
    let events = futures_util::stream::unfold(state, move |(capstan, p, mut after, mut said)| {
        let mut stopping = stopping.clone();
        async move {
            loop {
                if stopping.as_ref().is_some_and(|s| *s.borrow()) {
                    return None;
                }
                // Made before the read, so events sequenced after it wake the stream.
                let rung = capstan.changes().listen(Change::Sequenced);
                let found = match capstan.events_after(&p, org, after).await {
                    Ok(found) => found,
                    // The principal lost its access, or the organization is gone: the stream
                    // ends (the client may reconnect and hear why).
                    Err(e) => {
                        tracing::debug!(error = %e, "an event stream ended");
                        return None;
                    }
                };
                if let Some(last) = found.last() {
                    after = last.position.unwrap_or(after);
                }
                let mut chunk = Vec::new();
                for e in found.iter().filter(|e| filter.admits(e)) {
                    chunk.extend_from_slice(&message(e));
                }
                if !chunk.is_empty() {
                    drop(rung);
                    said = tokio::time::Instant::now();
                    return Some((Ok(web::Bytes::from(chunk)), (capstan, p, after, said)));
                }
                // Silent for a while, whether nothing happened or only what the filter leaves
                // out: a comment keeps proxies from closing the connection.
                if said.elapsed() >= KEEP_ALIVE {
                    drop(rung);
                    said = tokio::time::Instant::now();
                    let ping = web::Bytes::from_static(b": keep-alive\n\n");
                    return Some((Ok(ping), (capstan, p, after, said)));
                }
                if found.is_empty() {
                    let stop = async {
                        match stopping.as_mut() {
                            // A sender gone (the server is going) ends the stream too.
                            Some(s) => drop(s.changed().await),
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = rung => {}
                        _ = tokio::time::sleep(KEEP_ALIVE.saturating_sub(said.elapsed())) => {}
                        _ = stop => return None,
                    }
                }
            }
        }
    });
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        // Compressed, the messages would wait in the encoder's buffer.
        .insert_header((header::CONTENT_ENCODING, "identity"))
        .insert_header(("x-accel-buffering", "no"))
        .streaming(futures_util::StreamExt::chain(opening, events)))
}
