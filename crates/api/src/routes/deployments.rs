//! Deployment actions, statuses and histories: one set of handlers for the six kinds, plus the
//! environment-level actions. Actions answer 202: the request is queued, its status follows.

use super::{accepted, ok};
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, query_value, Auth, OptionalJson, Paging};
use crate::openapi::{Body, Doc, Query, Routes};
use crate::views::{HistoryPage, StatusList};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{DeploymentAction, ServiceKind, ServiceStatus};
use domain::services::{DeployInput, EnvironmentStatus};

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

fn service_id(req: &HttpRequest, kind: ServiceKind) -> ApiResult<domain::ids::ServiceId> {
    path_id(req, &format!("{}Id", kind.path_segment()))
}

/// The `forceEvent` query of a helm redeploy: DIFF or nothing.
#[derive(serde::Deserialize, utoipa::ToSchema)]
pub enum HelmForceEvent {
    #[serde(rename = "DIFF")]
    Diff,
}

pub fn routes(r: &mut Routes) {
    for kind in ServiceKind::ALL {
        let seg = kind.path_segment();
        let status = || Body::of::<ServiceStatus>();
        let action = |verb: &str| Doc::answer(format!("{verb} a {seg}"), 202, Some(status()));
        let deploy_body = Body::of::<DeployInput>();
        let deploy = if *kind == ServiceKind::Application {
            action("Deploy (git_commit_id required)").body(deploy_body)
        } else {
            action("Deploy").optional_body(deploy_body)
        };
        let mut redeploy = action("Redeploy");
        if *kind == ServiceKind::Helm {
            redeploy = redeploy.query(Query::of::<HelmForceEvent>("forceEvent", false));
        }
        r.at(format!("/{seg}/{{{seg}Id}}/deploy"))
            .data(*kind)
            .post(deploy_service, deploy)
            .add();
        r.at(format!("/{seg}/{{{seg}Id}}/redeploy"))
            .data(*kind)
            .post(redeploy_service, redeploy)
            .add();
        r.at(format!("/{seg}/{{{seg}Id}}/restart-service"))
            .data(*kind)
            .post(restart_service, action("Restart"))
            .add();
        r.at(format!("/{seg}/{{{seg}Id}}/stop"))
            .data(*kind)
            .post(stop_service, action("Stop"))
            .add();
        r.at(format!("/{seg}/{{{seg}Id}}/status"))
            .data(*kind)
            .get(
                service_status,
                Doc::get::<ServiceStatus>(format!("The deployment status of a {seg}")),
            )
            .add();
        r.at(format!("/{seg}/{{{seg}Id}}/deploymentHistory"))
            .data(*kind)
            .get(
                history,
                Doc::get::<HistoryPage>(format!("The deployments of a {seg}, newest first"))
                    .paged(),
            )
            .add();
        r.at(format!("/environment/{{environmentId}}/{seg}/status"))
            .data(*kind)
            .get(
                kind_statuses,
                Doc::get::<StatusList>(format!(
                    "The deployment statuses of an environment's {seg} services"
                )),
            )
            .add();
    }
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
            env_action("Deploy every service of an environment"),
        )
        .add();
    r.at("/environment/{environmentId}/stop")
        .post(
            stop_environment,
            env_action("Stop every running service of an environment"),
        )
        .add();
    r.at("/environment/{environmentId}/cancelDeployment")
        .post(
            cancel_environment,
            env_action("Cancel what waits or runs in an environment (deletions excepted)"),
        )
        .add();
    r.at("/environment/{environmentId}/status")
        .get(
            environment_status,
            Doc::get::<EnvironmentStatus>("The deployment status of an environment"),
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
    act(
        &st,
        &p,
        &req,
        **kind,
        DeploymentAction::Restart,
        DeployInput::default(),
    )
    .await
}

async fn stop_service(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    act(
        &st,
        &p,
        &req,
        **kind,
        DeploymentAction::Stop,
        DeployInput::default(),
    )
    .await
}

async fn service_status(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .service_status(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(status))
}

async fn history(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let page = st
        .capstan
        .deployment_history(&p, **kind, service_id(&req, **kind)?, page)
        .await?;
    Ok(ok(HistoryPage::from_page(page)))
}

async fn kind_statuses(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let results = st
        .capstan
        .kind_statuses(&p, path_id(&req, "environmentId")?, **kind)
        .await?;
    Ok(ok(StatusList { results }))
}

async fn deploy_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .deploy_environment(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(accepted(status))
}

async fn stop_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .stop_environment(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(accepted(status))
}

async fn cancel_environment(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .cancel_environment_deployment(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(accepted(status))
}

async fn environment_status(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .environment_status(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(status))
}
