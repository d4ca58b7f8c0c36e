//! A cluster's life: statuses, readiness, deploy and stop, advanced settings.

use super::{accepted, created, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, query_parsed, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Query, Routes};
use crate::views::{ClusterLogView, ClusterStatusView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ClusterAction;
use serde::Serialize;

type St = web::Data<AppState>;
const ORG: &str = "organizationId";
const CLUSTER: &str = "clusterId";

#[derive(Serialize, utoipa::ToSchema)]
pub struct ReadinessView {
    pub is_ready: bool,
}

/// Literal paths that `/organization/{organizationId}/cluster/{clusterId}` would otherwise take.
pub fn fixed_routes(r: &mut Routes) {
    r.at("/organization/{organizationId}/cluster/status")
        .get(
            statuses,
            Doc::list::<ClusterStatusView>("List the statuses of the organization's clusters"),
        )
        .add();
}

pub fn routes(r: &mut Routes) {
    let base = "/organization/{organizationId}/cluster/{clusterId}";
    r.at(format!("{base}/status"))
        .get(
            status,
            Doc::get::<ClusterStatusView>("Get a cluster's status"),
        )
        .add();
    r.at(format!("{base}/isReady"))
        .get(
            is_ready,
            Doc::get::<ReadinessView>("Whether the cluster is deployed and takes deployments"),
        )
        .add();
    r.at(format!("{base}/deploy"))
        .post(
            deploy,
            Doc::answer(
                "Deploy the cluster through the engine (409 while an action is queued or running)",
                201,
                Some(Body::of::<ClusterStatusView>()),
            )
            .query(Query::of::<bool>("dry_run", false)),
        )
        .add();
    r.at(format!("{base}/stop"))
        .post(
            stop,
            Doc::answer(
                "Stop the deployed cluster through the engine",
                202,
                Some(Body::of::<ClusterStatusView>()),
            ),
        )
        .add();
    r.at(format!("{base}/logs"))
        .get(
            logs,
            Doc::list::<ClusterLogView>(
                "What Capstan did on the cluster (deploying and stopping it, reaching its host), oldest first",
            ),
        )
        .add();
    r.at("/cluster/{clusterId}/logs")
        .get(
            log_text,
            Doc::get::<ClusterLogText>(
                "The cluster's log as text, a line each; `endpoint` and `query` (the public API's \
                 log store passthrough) are accepted and not used",
            )
            .query(Query::of::<String>("endpoint", false))
            .query(Query::of::<String>("query", false)),
        )
        .add();
    r.at(format!("{base}/advancedSettings"))
        .get(
            settings,
            Doc::answer(
                "Every advanced setting of the cluster, with its value",
                200,
                Some(Body::of::<serde_json::Value>()),
            ),
        )
        .put(
            edit_settings,
            Doc::answer(
                "Set advanced settings (each checked; those not sent keep their value)",
                201,
                Some(Body::of::<serde_json::Value>()),
            )
            .body(Body::of::<serde_json::Value>()),
        )
        .add();
}

async fn logs(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let lines = st
        .capstan
        .cluster_logs(&p, Some(path_id(&req, ORG)?), path_id(&req, CLUSTER)?)
        .await?;
    Ok(ok(Paged::from_vec(lines, page, ClusterLogView::from)))
}

/// `GET /cluster/{id}/logs`: the public `ClusterLogsResponse`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterLogText {
    pub response: String,
}

async fn log_text(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let lines = st
        .capstan
        .cluster_logs(&p, None, path_id(&req, CLUSTER)?)
        .await?;
    let response = lines
        .iter()
        .map(|l| {
            let at =
                l.at.format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default();
            format!("{at} {} [{}] {}", l.level, l.step, l.message)
        })
        .collect::<Vec<_>>()
        .join("\n");
    Ok(ok(ClusterLogText { response }))
}

async fn statuses(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st.capstan.cluster_statuses(&p, path_id(&req, ORG)?).await?;
    Ok(ok(Paged::from_vec(all, page, ClusterStatusView::from)))
}

async fn status(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let (cluster, nodes) = st
        .capstan
        .cluster_status_with_nodes(&p, path_id(&req, ORG)?, path_id(&req, CLUSTER)?)
        .await?;
    Ok(ok(ClusterStatusView {
        nodes,
        ..ClusterStatusView::from(cluster)
    }))
}

async fn is_ready(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let cluster = st
        .capstan
        .cluster_status(&p, path_id(&req, ORG)?, path_id(&req, CLUSTER)?)
        .await?;
    Ok(ok(ReadinessView {
        is_ready: cluster.run.state == domain::model::ClusterState::Deployed,
    }))
}

async fn deploy(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let cluster = st
        .capstan
        .cluster_action(
            &p,
            path_id(&req, ORG)?,
            path_id(&req, CLUSTER)?,
            ClusterAction::Deploy,
            query_parsed(&req, "dry_run", "true or false")?.unwrap_or(false),
        )
        .await?;
    Ok(created(ClusterStatusView::from(cluster)))
}

async fn stop(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let cluster = st
        .capstan
        .cluster_action(
            &p,
            path_id(&req, ORG)?,
            path_id(&req, CLUSTER)?,
            ClusterAction::Stop,
            false,
        )
        .await?;
    Ok(accepted(ClusterStatusView::from(cluster)))
}

async fn settings(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .cluster_advanced_settings(&p, path_id(&req, ORG)?, path_id(&req, CLUSTER)?)
        .await?;
    Ok(ok(all))
}

async fn edit_settings(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(sent): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .edit_cluster_advanced_settings(&p, path_id(&req, ORG)?, path_id(&req, CLUSTER)?, &sent)
        .await?;
    Ok(created(all))
}
