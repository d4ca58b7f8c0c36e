//! Deployment stages: an environment's deployment runs them in order.

use super::{created, no_content, ok};
use crate::deployment_views::{StageList, StageView};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, OptionalJson};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::Placement;
use domain::services::StageInput;
use serde::Deserialize;

type St = web::Data<AppState>;

/// The optional body of attaching a service to a stage.
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub struct AttachInput {
    /// True: the service stays in the stage but is left out of environment-level deployments;
    /// false or absent: moved to the stage and no longer skipped.
    #[serde(default)]
    pub is_skipped: bool,
}

pub fn routes(r: &mut Routes) {
    r.at("/environment/{environmentId}/deploymentStage")
        .get(
            list,
            Doc::get::<StageList>("An environment's deployment stages, in deployment order"),
        )
        .post(
            create,
            Doc::create::<StageView, StageInput>("Create a deployment stage, run last"),
        )
        .add();
    r.at("/deploymentStage/{deploymentStageId}")
        .get(
            get,
            Doc::get::<StageView>("A deployment stage and its services"),
        )
        .put(
            edit,
            Doc::edit::<StageView, StageInput>("Rename or describe a deployment stage"),
        )
        .delete(
            delete,
            Doc::delete("Delete a deployment stage that holds no service (409 otherwise)"),
        )
        .add();
    for (verb, placement) in [
        ("moveBefore", Placement::Before),
        ("moveAfter", Placement::After),
    ] {
        r.at(format!(
            "/deploymentStage/{{deploymentStageId}}/{verb}/{{stageId}}"
        ))
        .data(placement)
        .put(
            move_stage,
            Doc::get::<StageList>(format!(
                "Move a deployment stage {} another; answers every stage",
                if placement == Placement::Before {
                    "before"
                } else {
                    "after"
                }
            )),
        )
        .add();
    }
    r.at("/deploymentStage/{deploymentStageId}/service/{serviceId}")
        .put(
            attach,
            Doc::get::<StageList>("Put a service in a deployment stage; answers every stage")
                .optional_body(Body::of::<AttachInput>()),
        )
        .add();
    r.at("/service/{serviceId}/deploymentStage")
        .get(
            service_stage,
            Doc::get::<StageView>("The deployment stage a service is in"),
        )
        .add();
}

fn stage_id(req: &HttpRequest) -> ApiResult<domain::ids::DeploymentStageId> {
    path_id(req, "deploymentStageId")
}

async fn list(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let stages = st
        .capstan
        .list_stages(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(StageList::of(stages)))
}

async fn create(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<StageInput>,
) -> ApiResult<HttpResponse> {
    let stage = st
        .capstan
        .create_stage(&p, path_id(&req, "environmentId")?, input)
        .await?;
    Ok(created(StageView::from(stage)))
}

async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let stage = st.capstan.get_stage(&p, stage_id(&req)?).await?;
    Ok(ok(StageView::from(stage)))
}

async fn edit(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<StageInput>,
) -> ApiResult<HttpResponse> {
    let stage = st.capstan.edit_stage(&p, stage_id(&req)?, input).await?;
    Ok(ok(StageView::from(stage)))
}

async fn delete(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan.delete_stage(&p, stage_id(&req)?).await?;
    Ok(no_content())
}

async fn move_stage(
    st: St,
    placement: web::Data<Placement>,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let stages = st
        .capstan
        .move_stage(&p, stage_id(&req)?, path_id(&req, "stageId")?, **placement)
        .await?;
    Ok(ok(StageList::of(stages)))
}

async fn attach(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    OptionalJson(input): OptionalJson<AttachInput>,
) -> ApiResult<HttpResponse> {
    let stages = st
        .capstan
        .attach_service_to_stage(
            &p,
            stage_id(&req)?,
            path_id(&req, "serviceId")?,
            input.is_skipped,
        )
        .await?;
    Ok(ok(StageList::of(stages)))
}

async fn service_stage(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let stage = st
        .capstan
        .service_stage(&p, path_id(&req, "serviceId")?)
        .await?;
    Ok(ok(StageView::from(stage)))
}
