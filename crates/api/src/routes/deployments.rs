//! Deployment actions, statuses, queues and histories: one set of handlers for the six kinds,
//! the environment-level actions, and the bulk actions on chosen services of an environment.
//! Actions answer 202: the request is queued, its status follows.

use super::{accepted, ok, Deleted};
use crate::deployment_views::*;
use crate::error::{ApiError, ApiResult};
use crate::extract::{
    path_id, query_value, service_id, Auth, HistoryPaging, JsonBody, OptionalJson, Paging,
};
use crate::openapi::{Body, Doc, Query, Routes};
use crate::views::{HistoryPage, Paged};
use crate::waiting::{Wait, MAX_WAIT_SECONDS};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{DeploymentAction, ServiceKind, ServiceStatus};
use domain::services::{Chosen, DeployInput, EnvironmentStatus, EnvironmentStatuses, Selection};
use serde::Deserialize;
use uuid::Uuid;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

fn env_id(req: &HttpRequest) -> ApiResult<domain::ids::EnvironmentId> {
    path_id(req, "environmentId")
}

/// The `forceEvent` query of a helm redeploy: DIFF or nothing.
#[derive(serde::Deserialize, utoipa::ToSchema)]
pub enum HelmForceEvent {
    #[serde(rename = "DIFF")]
    Diff,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct ApplicationToDeploy {
    #[serde(deserialize_with = "domain::ids::strict_uuid")]
    pub application_id: Uuid,
    #[serde(default)]
    pub git_commit_id: Option<String>,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct ServiceToDeploy {
    /// Required (the description leaves it optional for some kinds; a deployment names its
    /// service all the same).
    #[serde(default, deserialize_with = "domain::ids::strict_uuid_option")]
    pub id: Option<Uuid>,
    #[serde(default)]
    pub git_commit_id: Option<String>,
    #[serde(default)]
    pub image_tag: Option<String>,
    #[serde(default)]
    pub chart_version: Option<String>,
}

/// What `POST /environment/{id}/service/deploy` deploys: only the services listed.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct DeployAllRequest {
    #[serde(default)]
    pub applications: Vec<ApplicationToDeploy>,
    #[serde(default)]
    pub containers: Vec<ServiceToDeploy>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub databases: Vec<Uuid>,
    #[serde(default)]
    pub helms: Vec<ServiceToDeploy>,
    #[serde(default)]
    pub jobs: Vec<ServiceToDeploy>,
    #[serde(default)]
    pub terraforms: Vec<ServiceToDeploy>,
}

/// The services a bulk action acts on, by kind.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct ServiceIdsRequest {
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub application_ids: Vec<Uuid>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub container_ids: Vec<Uuid>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub database_ids: Vec<Uuid>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub helm_ids: Vec<Uuid>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub job_ids: Vec<Uuid>,
    #[serde(default, deserialize_with = "domain::ids::strict_uuids")]
    pub terraform_ids: Vec<Uuid>,
}

fn chosen(field: String, kind: ServiceKind, id: Uuid, input: DeployInput) -> Chosen {
    Chosen {
        field,
        kind,
        id: id.into(),
        input,
    }
}

impl DeployAllRequest {
    fn chosen(self) -> ApiResult<Vec<Chosen>> {
        let mut out = Vec::new();
        for (i, a) in self.applications.into_iter().enumerate() {
            let input = DeployInput {
                git_commit_id: a.git_commit_id,
                ..Default::default()
            };
            out.push(chosen(
                format!("applications[{i}].application_id"),
                ServiceKind::Application,
                a.application_id,
                input,
            ));
        }
        for (i, id) in self.databases.into_iter().enumerate() {
            out.push(chosen(
                format!("databases[{i}]"),
                ServiceKind::Database,
                id,
                DeployInput::default(),
            ));
        }
        for (list, kind, name) in [
            (self.containers, ServiceKind::Container, "containers"),
            (self.helms, ServiceKind::Helm, "helms"),
            (self.jobs, ServiceKind::Job, "jobs"),
            (self.terraforms, ServiceKind::Terraform, "terraforms"),
        ] {
            for (i, s) in list.into_iter().enumerate() {
                let field = format!("{name}[{i}].id");
                let id =
                    s.id.ok_or_else(|| ApiError::bad_request(format!("{field}: is required")))?;
                let input = DeployInput {
                    git_commit_id: s.git_commit_id,
                    image_tag: s.image_tag,
                    chart_version: s.chart_version,
                    ..Default::default()
                };
                out.push(chosen(field, kind, id, input));
            }
        }
        Ok(out)
    }
}

impl ServiceIdsRequest {
    fn chosen(self) -> Vec<Chosen> {
        let mut out = Vec::new();
        for (list, kind, name) in [
            (
                self.application_ids,
                ServiceKind::Application,
                "application_ids",
            ),
            (self.container_ids, ServiceKind::Container, "container_ids"),
            (self.database_ids, ServiceKind::Database, "database_ids"),
            (self.helm_ids, ServiceKind::Helm, "helm_ids"),
            (self.job_ids, ServiceKind::Job, "job_ids"),
            (self.terraform_ids, ServiceKind::Terraform, "terraform_ids"),
        ] {
            for (i, id) in list.into_iter().enumerate() {
                out.push(chosen(
                    format!("{name}[{i}]"),
                    kind,
                    id,
                    DeployInput::default(),
                ));
            }
        }
        out
    }
}

/// Paths that must be matched before `/environment/{environmentId}`.
pub fn fixed_routes(r: &mut Routes) {
    r.at("/environment/deploymentStatus")
        .get(
            deployment_request_status,
            Doc::get::<EnvDeploymentStatus>(
                "The status of one deployment request (its id, or its deployment's)",
            )
            .query(Query::uuid("deploymentRequestId", true)),
        )
        .add();
}

pub fn routes(r: &mut Routes) {
    for kind in ServiceKind::ALL {
        kind_routes(r, *kind);
    }
    environment_routes(r);
    r.at("/project/{projectId}/environment/status")
        .get(
            project_statuses,
            Doc::list::<EnvironmentStatus>("The status of each environment of a project"),
        )
        .add();
    r.at("/service/{serviceId}/deploymentQueue")
        .get(
            service_queue,
            Doc::get::<QueuedServiceRequestList>("A service's requests that wait or run"),
        )
        .add();
    r.at("/deploymentQueue/{deploymentRequestId}/cancelDeployment")
        .post(
            cancel_request,
            Doc::answer(
                "Cancel a deployment request: what waits never runs, what runs stops at its next step",
                202,
                Some(Body::of::<EnvironmentStatus>()),
            ),
        )
        .add();
}

fn kind_routes(r: &mut Routes, kind: ServiceKind) {
    let seg = kind.path_segment();
    let status = || Body::of::<ServiceStatus>();
    let action = |verb: &str| Doc::answer(format!("{verb} a {seg}"), 202, Some(status()));
    let deploy_body = Body::of::<DeployInput>();
    let deploy = if kind == ServiceKind::Application {
        action("Deploy (git_commit_id required)").body(deploy_body)
    } else {
        action("Deploy").optional_body(deploy_body)
    };
    let mut redeploy = action("Redeploy");
    if kind == ServiceKind::Helm {
        redeploy = redeploy.query(Query::of::<HelmForceEvent>("forceEvent", false));
    }
    let base = format!("/{seg}/{{{seg}Id}}");
    r.at(format!("{base}/deploy"))
        .data(kind)
        .post(deploy_service, deploy)
        .add();
    r.at(format!("{base}/redeploy"))
        .data(kind)
        .post(redeploy_service, redeploy)
        .add();
    r.at(format!("{base}/restart-service"))
        .data(kind)
        .post(restart_service, action("Restart"))
        .add();
    r.at(format!("{base}/stop"))
        .data(kind)
        .post(stop_service, action("Stop"))
        .add();
    r.at(format!("{base}/uninstall"))
        .data(kind)
        .post(
            uninstall_service,
            Doc::delete_or_accept::<ServiceStatus>(format!(
                "Uninstall a {seg}: remove it from its cluster, keep its configuration \
                 (204 when it was never deployed)"
            )),
        )
        .add();
    r.at(format!("{base}/status"))
        .data(kind)
        .get(
            service_status,
            Doc::get::<ServiceStatus>(format!(
                "The deployment status of a {seg}; with `wait`, once nothing waits or runs"
            ))
            .query(wait_query()),
        )
        .add();
    r.at(format!("{base}/deploymentHistory"))
        .data(kind)
        .get(
            history,
            history_doc::<HistoryPage>(format!("The deployments of a {seg}, newest first")),
        )
        .add();
    r.at(format!("{base}/deploymentHistoryV2"))
        .data(kind)
        .get(
            history_v2,
            history_doc::<ServiceHistoryPage>(format!(
                "Everything asked of a {seg} (deployments, restarts, stops, deletions), newest first"
            )),
        )
        .add();
    r.at(format!("/environment/{{environmentId}}/{seg}/status"))
        .data(kind)
        .get(
            kind_statuses,
            Doc::list::<ServiceStatus>(format!(
                "The deployment statuses of an environment's {seg} services"
            )),
        )
        .add();
}

/// `?wait=SECONDS` (0 to 60): answer once the state is settled, or when the time is up.
fn wait_query() -> Query {
    Query::integer("wait", 0, Some(MAX_WAIT_SECONDS as i64))
}

fn history_doc<T: utoipa::ToSchema>(summary: String) -> Doc {
    Doc::get::<T>(summary)
        .query(Query::integer(
            "pageSize",
            1,
            Some(domain::pagination::MAX_PAGE_SIZE.into()),
        ))
        .query(Query::uuid("startId", false))
        .paged()
}

fn environment_routes(r: &mut Routes) {
    let env_action = |summary: &str| {
        Doc::answer(
            summary.to_string(),
            202,
            Some(Body::of::<EnvironmentStatus>()),
        )
    };
    r.at("/environment/{environmentId}/deploy")
        .post(
            deploy_environment,
            env_action("Deploy every service of an environment, stage by stage"),
        )
        .add();
    r.at("/environment/{environmentId}/redeploy")
        .post(
            redeploy_environment,
            env_action("Redeploy every service of an environment, stage by stage"),
        )
        .add();
    r.at("/environment/{environmentId}/stop")
        .post(
            stop_environment,
            env_action("Stop every running service of an environment"),
        )
        .add();
    r.at("/environment/{environmentId}/uninstall")
        .post(
            uninstall_environment,
            env_action(
                "Uninstall every deployed service of an environment (the configuration stays)",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/cancelDeployment")
        .post(
            cancel_environment,
            env_action("Cancel what waits or runs in an environment (deletions excepted)"),
        )
        .add();
    r.at("/environment/{environmentId}/service/deploy")
        .post(
            deploy_services,
            env_action("Deploy the services listed, as one deployment")
                .body(Body::of::<DeployAllRequest>()),
        )
        .add();
    for (verb, summary) in [
        ("restart-service", "Restart the services listed"),
        ("stop", "Stop the services listed"),
        (
            "uninstall",
            "Uninstall the services listed (their configuration stays)",
        ),
        (
            "delete",
            "Delete the services listed (those never deployed at once)",
        ),
    ] {
        r.at(format!("/environment/{{environmentId}}/service/{verb}"))
            .data(verb)
            .post(
                act_on_services,
                env_action(summary).body(Body::of::<ServiceIdsRequest>()),
            )
            .add();
    }
    r.at("/environment/{environmentId}/status")
        .get(
            environment_status,
            Doc::get::<EnvironmentStatus>(
                "The deployment status of an environment; with `wait`, once nothing waits or runs",
            )
            .query(wait_query()),
        )
        .add();
    r.at("/environment/{environmentId}/statuses")
        .get(
            environment_statuses,
            Doc::get::<EnvironmentStatuses>(
                "The status of an environment and of each of its services, by kind; with \
                 `wait`, once nothing waits or runs in the environment",
            )
            .query(wait_query()),
        )
        .add();
    r.at("/environment/{environmentId}/statusesWithStages")
        .get(
            environment_statuses_with_stages,
            Doc::get::<crate::stage_views::StatusesWithStages>(
                "The status of an environment and of each of its services, stage by stage in \
                 deployment order",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/deploymentQueue")
        .get(
            environment_queue,
            Doc::get::<QueuedDeploymentList>(
                "What waits or runs in an environment, one entry per deployment, stage by stage",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/deploymentHistoryV2")
        .get(
            environment_history_v2,
            history_doc::<EnvironmentHistoryPage>(
                "An environment's deployments, newest first, stage by stage".into(),
            ),
        )
        .add();
    r.at("/environment/{environmentId}/deploymentHistory")
        .get(
            environment_history_v1,
            history_doc::<EnvironmentHistoryPageV1>(
                "An environment's deployments, newest first, services by kind".into(),
            ),
        )
        .add();
}

async fn act(
    st: &St,
    p: &domain::auth::Principal,
    req: &HttpRequest,
    kind: ServiceKind,
    action: DeploymentAction,
    input: DeployInput,
) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .service_action(p, kind, service_id(req, kind)?, action, input)
        .await?;
    Ok(accepted(status))
}

async fn deploy_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    OptionalJson(input): OptionalJson<DeployInput>,
) -> ApiResult<HttpResponse> {
    act(&st, &p, &req, **kind, DeploymentAction::Deploy, input).await
}

async fn redeploy_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let action = match (**kind, query_value(&req, "forceEvent")?.as_deref()) {
        (ServiceKind::Helm, Some("DIFF")) => DeploymentAction::Diff,
        (ServiceKind::Helm, Some(_)) => {
            return Err(ApiError::bad_request("forceEvent: must be DIFF"));
        }
        _ => DeploymentAction::Redeploy,
    };
    act(&st, &p, &req, **kind, action, DeployInput::default()).await
}

async fn restart_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let input = DeployInput::default();
    act(&st, &p, &req, **kind, DeploymentAction::Restart, input).await
}

async fn stop_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let input = DeployInput::default();
    act(&st, &p, &req, **kind, DeploymentAction::Stop, input).await
}

async fn uninstall_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let done = st
        .capstan
        .uninstall_service(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(done.response())
}

async fn service_status(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    wait: Wait,
) -> ApiResult<HttpResponse> {
    let id = service_id(&req, **kind)?;
    let status = wait
        .until(
            st.capstan.changes(),
            || st.capstan.service_status(&p, **kind, id),
            |s| s.deployment_requests_count == 0,
        )
        .await?;
    Ok(ok(status))
}

async fn history(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    HistoryPaging(paging): HistoryPaging<{ domain::pagination::DEFAULT_PAGE_SIZE }>,
) -> ApiResult<HttpResponse> {
    let page = st
        .capstan
        .deployment_history(&p, **kind, service_id(&req, **kind)?, paging)
        .await?;
    Ok(ok(HistoryPage::from_page(page, **kind)))
}

async fn history_v2(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    HistoryPaging(paging): HistoryPaging,
) -> ApiResult<HttpResponse> {
    let page = st
        .capstan
        .service_history(&p, **kind, service_id(&req, **kind)?, paging)
        .await?;
    Ok(ok(ServiceHistoryPage::of(page, |e| {
        HistoryService::from(&e)
    })))
}

async fn kind_statuses(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let statuses = st
        .capstan
        .kind_statuses(&p, env_id(&req)?, **kind, page)
        .await?;
    Ok(ok(Paged::from_page(statuses, |s| s)))
}

async fn environment_action(
    st: &St,
    p: &domain::auth::Principal,
    req: &HttpRequest,
    action: DeploymentAction,
    selection: Selection,
) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .environment_action(p, env_id(req)?, action, selection)
        .await?;
    Ok(accepted(status))
}

async fn deploy_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    environment_action(&st, &p, &req, DeploymentAction::Deploy, Selection::All).await
}

async fn redeploy_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    environment_action(&st, &p, &req, DeploymentAction::Redeploy, Selection::All).await
}

async fn stop_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    environment_action(&st, &p, &req, DeploymentAction::Stop, Selection::All).await
}

async fn uninstall_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    environment_action(&st, &p, &req, DeploymentAction::Uninstall, Selection::All).await
}

async fn deploy_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<DeployAllRequest>,
) -> ApiResult<HttpResponse> {
    let selection = Selection::Only(body.chosen()?);
    environment_action(&st, &p, &req, DeploymentAction::Deploy, selection).await
}

async fn act_on_services(
    st: St,
    verb: web::Data<&'static str>,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<ServiceIdsRequest>,
) -> ApiResult<HttpResponse> {
    let chosen = body.chosen();
    let action = match **verb {
        "restart-service" => DeploymentAction::Restart,
        "stop" => DeploymentAction::Stop,
        "uninstall" => DeploymentAction::Uninstall,
        _ => {
            let status = st
                .capstan
                .delete_services(&p, env_id(&req)?, chosen)
                .await?;
            return Ok(accepted(status));
        }
    };
    environment_action(&st, &p, &req, action, Selection::Only(chosen)).await
}

async fn cancel_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .cancel_environment_deployment(&p, env_id(&req)?)
        .await?;
    Ok(accepted(status))
}

async fn environment_status(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    wait: Wait,
) -> ApiResult<HttpResponse> {
    let id = env_id(&req)?;
    let status = wait
        .until(
            st.capstan.changes(),
            || st.capstan.environment_status(&p, id),
            |s| s.deployment_requests_count == 0,
        )
        .await?;
    Ok(ok(status))
}

async fn environment_statuses_with_stages(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let staged = st
        .capstan
        .environment_statuses_with_stages(&p, env_id(&req)?)
        .await?;
    Ok(ok(crate::stage_views::StatusesWithStages::of(staged)))
}

async fn environment_statuses(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    wait: Wait,
) -> ApiResult<HttpResponse> {
    let id = env_id(&req)?;
    let statuses = wait
        .until(
            st.capstan.changes(),
            || st.capstan.environment_statuses(&p, id),
            |s| s.environment.deployment_requests_count == 0,
        )
        .await?;
    Ok(ok(statuses))
}

async fn project_statuses(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let statuses = st
        .capstan
        .project_environment_statuses(&p, path_id(&req, "projectId")?, page)
        .await?;
    Ok(ok(Paged::from_page(statuses, |s| s)))
}

async fn environment_queue(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let queue = st.capstan.environment_queue(&p, env_id(&req)?).await?;
    Ok(ok(QueuedDeploymentList {
        results: queue.into_iter().map(Into::into).collect(),
    }))
}

async fn service_queue(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let queue = st
        .capstan
        .service_queue(&p, path_id(&req, "serviceId")?)
        .await?;
    Ok(ok(QueuedServiceRequestList {
        results: queue.into_iter().map(Into::into).collect(),
    }))
}

async fn cancel_request(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let id: Uuid = path_id(&req, "deploymentRequestId")?;
    st.capstan.cancel_deployment_request(&p, id).await?;
    let status = st.capstan.deployment_request_status(&p, id).await?;
    Ok(accepted(status))
}

async fn deployment_request_status(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let raw = query_value(&req, "deploymentRequestId")?
        .ok_or_else(|| ApiError::bad_request("deploymentRequestId: is required"))?;
    let id = domain::ids::parse_uuid(&raw).map_err(|_| {
        ApiError::bad_request(format!("deploymentRequestId: '{raw}' is not a valid UUID"))
    })?;
    let status = st.capstan.deployment_request_status(&p, id).await?;
    Ok(ok(EnvDeploymentStatus::from(status)))
}

async fn environment_history_v2(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    HistoryPaging(paging): HistoryPaging,
) -> ApiResult<HttpResponse> {
    let page = st
        .capstan
        .environment_history(&p, env_id(&req)?, paging)
        .await?;
    let now = time::OffsetDateTime::now_utc();
    Ok(ok(EnvironmentHistoryPage::of(page, |b| {
        EnvironmentHistoryItem::of(b, now)
    })))
}

async fn environment_history_v1(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    HistoryPaging(paging): HistoryPaging,
) -> ApiResult<HttpResponse> {
    let page = st
        .capstan
        .environment_history(&p, env_id(&req)?, paging)
        .await?;
    Ok(ok(EnvironmentHistoryPageV1::of(
        page,
        EnvironmentHistoryV1::from,
    )))
}
