//! The public live API over WebSockets: `/service/status`, `/service/pods`,
//! `/service/metrics`, `/service/logs`, `/deployment/logs`, `/deployment/status`,
//! `/cluster/status` and `/shell/exec` (a terminal, in `shell`). A socket gets the current
//! state at once, then a message each time it changes. Each instance serves its own sockets;
//! it hears of changes made by the others as it hears of its own (running states and log
//! lines ring changes that cross instances), so an idle socket costs no read, but for those
//! whose state lives outside the store: metrics (each reading, shared by every socket of the
//! service) and a cluster's hosts (looked at every few seconds).

mod feeds;
mod messages;
mod shell;
pub mod sockets;

use crate::error::{ApiError, ApiResult};
use crate::extract::{principal_of, query_value, Credential, LiveAuth};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{CloseCode, CloseReason, Message};
use feeds::Feed;
use futures_util::{FutureExt, StreamExt};
use std::time::Duration;
use uuid::Uuid;

type St = web::Data<AppState>;

/// How often a socket is pinged (so proxies keep it open).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/service/status", web::get().to(service_status))
        .route("/service/logs", web::get().to(service_logs))
        .route("/service/pods", web::get().to(service_pods))
        .route("/service/metrics", web::get().to(service_metrics))
        .route("/shell/exec", web::get().to(shell::shell_exec))
        .route("/cluster/status", web::get().to(cluster_status))
        .route("/deployment/logs", web::get().to(deployment_logs))
        .route("/deployment/status", web::get().to(deployment_status));
}

/// A query parameter the live API requires, as a UUID.
fn required(req: &HttpRequest, name: &str) -> ApiResult<Uuid> {
    optional(req, name)?.ok_or_else(|| ApiError::bad_request(format!("{name}: is required")))
}

/// The service a socket of one service's is about, once the scope every such endpoint
/// requires is there.
fn service_in_scope(req: &HttpRequest) -> ApiResult<domain::ids::ServiceId> {
    for name in ["organization", "cluster", "project", "environment"] {
        required(req, name)?;
    }
    Ok(required(req, "service")?.into())
}

/// A query parameter the live API may have, as a UUID ("or null": empty and `null` are none).
fn optional(req: &HttpRequest, name: &str) -> ApiResult<Option<Uuid>> {
    feeds::given(query_value(req, name)?)
        .map(|v| {
            domain::ids::parse_uuid(&v)
                .map_err(|_| ApiError::bad_request(format!("{name}: '{v}' is not a valid UUID")))
        })
        .transpose()
}

async fn service_status(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let feed = feeds::Status::new(
        p,
        required(&req, "organization")?.into(),
        domain::services::LiveScope {
            cluster: Some(required(&req, "cluster")?.into()),
            project: optional(&req, "project")?.map(Into::into),
            environment: optional(&req, "environment")?.map(Into::into),
        },
    );
    open(st, &req, body, credential, feed).await
}

async fn service_logs(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let feed = feeds::ServiceLogs::new(
        p,
        service_in_scope(&req)?,
        &feeds::LogFilter {
            pod_name: query_value(&req, "podName")?,
            deployment_id: optional(&req, "deploymentId")?,
            query: query_value(&req, "query")?,
            start: query_value(&req, "start")?,
            limit: query_value(&req, "limit")?,
        },
    )?;
    open(st, &req, body, credential, feed).await
}

async fn service_pods(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let feed = feeds::Pods::new(p, service_in_scope(&req)?);
    open(st, &req, body, credential, feed).await
}

async fn service_metrics(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let feed = feeds::Metrics::new(p, service_in_scope(&req)?);
    open(st, &req, body, credential, feed).await
}

async fn cluster_status(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let feed = feeds::ClusterStatus::new(
        p,
        required(&req, "organization")?.into(),
        required(&req, "cluster")?.into(),
    );
    open(st, &req, body, credential, feed).await
}

async fn deployment_logs(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    required(&req, "organization")?;
    required(&req, "project")?;
    let feed = feeds::DeploymentLogs::new(
        p,
        required(&req, "environment")?.into(),
        optional(&req, "version")?,
    );
    open(st, &req, body, credential, feed).await
}

async fn deployment_status(
    st: St,
    LiveAuth(p, credential): LiveAuth,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    required(&req, "organization")?;
    required(&req, "project")?;
    let environment = required(&req, "environment")?;
    let feed = feeds::DeploymentStatus::new(p, environment.into());
    open(st, &req, body, credential, feed).await
}

/// Checks the feed's first read (so a bad id or a missing right answers as on REST, before
/// the upgrade), then upgrades and serves the socket.
async fn open<F: Feed + 'static>(
    st: St,
    req: &HttpRequest,
    body: web::Payload,
    credential: Credential,
    mut feed: F,
) -> ApiResult<HttpResponse> {
    let seat = st.live_sockets.take(credential.expose())?;
    let capstan = st.capstan.clone();
    // Read before the upgrade so that a refusal answers as REST does; the socket's loop reads
    // again once it listens (the feed sends nothing twice), so nothing between is missed.
    let first = feed.next(&capstan).await?;
    let (response, session, stream) = actix_ws::handle(req, body)
        .map_err(|e| ApiError::bad_request(format!("not a WebSocket request: {e}")))?;
    let stopping = st.stopping.clone();
    let held = Held {
        state: st.into_inner(),
        credential,
        _seat: seat,
    };
    actix_web::rt::spawn(serve(capstan, session, stream, feed, first, stopping, held));
    Ok(response)
}

/// What an open socket holds on to: its credential, checked again every [`RECHECK`] (a token
/// deleted, a role lowered or a JWT expired on any instance ends it), and its seat among the
/// sockets its credential may open.
struct Held {
    state: std::sync::Arc<AppState>,
    credential: Credential,
    _seat: sockets::Seat,
}

/// How often an open socket's credential is checked again.
const RECHECK: Duration = Duration::from_secs(1);

async fn serve<F: Feed>(
    capstan: domain::services::Capstan,
    mut session: actix_ws::Session,
    mut stream: actix_ws::MessageStream,
    mut feed: F,
    first: Vec<String>,
    mut stopping: Option<tokio::sync::watch::Receiver<bool>>,
    held: Held,
) {
    let mut pending = first;
    let start = tokio::time::Instant::now();
    let mut recheck = tokio::time::interval_at(start + RECHECK, RECHECK);
    // Its own clock: the rechecks would otherwise start the wait for a ping again each time.
    let mut keep_alive = tokio::time::interval_at(start + KEEP_ALIVE, KEEP_ALIVE);
    loop {
        // Listening before the read: a change committed after it wakes the socket.
        let changes = capstan.changes();
        let rungs: Vec<_> = F::CHANGES
            .iter()
            .map(|c| Box::pin(changes.listen(*c)))
            .collect();
        let mut rung: futures_util::future::BoxFuture<'_, ()> = if rungs.is_empty() {
            Box::pin(std::future::pending())
        } else {
            Box::pin(futures_util::future::select_all(rungs).map(drop))
        };
        match feed.next(&capstan).await {
            Ok(messages) => pending.extend(messages),
            Err(e) => return close_for(session, &e).await,
        }
        let mut woken = feed
            .woken()
            .unwrap_or_else(|| Box::pin(std::future::pending()));
        for message in pending.drain(..) {
            if session.text(message).await.is_err() {
                return;
            }
        }
        // Waits for a change, answering pings and keeping the socket alive meanwhile.
        loop {
            let stop = async {
                match stopping.as_mut() {
                    Some(s) => drop(s.changed().await),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut rung => break,
                () = &mut woken => break,
                message = stream.next() => match message {
                    Some(Ok(Message::Ping(bytes))) => {
                        if session.pong(&bytes).await.is_err() {
                            return;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        let _ = session.close(None).await;
                        return;
                    }
                    Some(Ok(_)) => {}
                },
                _ = recheck.tick() => {
                    match principal_of(&held.state, held.credential.expose()).await {
                        // Unchanged rights: nothing to read again.
                        Ok(now) if now.memberships == feed.principal().memberships => {}
                        Ok(now) => {
                            let was = feed.principal();
                            *was = domain::auth::Principal {
                                origin: was.origin,
                                user_agent: was.user_agent.take(),
                                ..now
                            };
                            // Read again as the principal now is: a right lost ends it.
                            break;
                        }
                        // The store failing for a moment is not the credential's fault.
                        Err(e) if e.status.is_server_error() => {
                            tracing::debug!(error = %e.message, "a live socket's credential could not be checked again");
                        }
                        Err(e) => return close_for(session, &e).await,
                    }
                }
                _ = keep_alive.tick() => {
                    if session.ping(b"").await.is_err() {
                        return;
                    }
                }
                _ = stop => {
                    let reason = CloseReason { code: CloseCode::Away, description: None };
                    let _ = session.close(Some(reason)).await;
                    return;
                }
            }
        }
    }
}

/// Ends a socket whose read failed, saying why: the caller lost its access or what it watched
/// is gone (1008), it holds too many sockets (1013, to try again later), or the store failed
/// (1011). The reason is the REST error's message, which names no secret.
async fn close_for(session: actix_ws::Session, e: &ApiError) {
    let code = if e.status.is_server_error() {
        CloseCode::Error
    } else if e.status == actix_web::http::StatusCode::TOO_MANY_REQUESTS {
        CloseCode::Again
    } else {
        CloseCode::Policy
    };
    let reason = CloseReason {
        code,
        description: Some(e.message.chars().take(120).collect()),
    };
    let _ = session.close(Some(reason)).await;
}
