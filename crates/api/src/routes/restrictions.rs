//! Deployment restrictions of the services a push deploys
//! (`/{kind}/{id}/deploymentRestriction`).

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, service_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{base, Base, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{
    DeploymentRestriction, RestrictionInput, RestrictionMode, RestrictionType, ServiceKind,
};
use domain::services::RESTRICTED_KINDS;
use serde::Serialize;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;
const ID: &str = "deploymentRestrictionId";

#[derive(Serialize, utoipa::ToSchema)]
pub struct RestrictionView {
    #[serde(flatten)]
    pub base: Base,
    pub mode: RestrictionMode,
    #[serde(rename = "type")]
    pub restriction_type: RestrictionType,
    pub value: String,
}

impl From<DeploymentRestriction> for RestrictionView {
    fn from(r: DeploymentRestriction) -> Self {
        Self {
            base: base(r.id.0, r.created_at, r.updated_at),
            mode: r.mode,
            restriction_type: r.restriction_type,
            value: r.value,
        }
    }
}

pub fn routes(r: &mut Routes) {
    for kind in RESTRICTED_KINDS {
        let segment = kind.path_segment();
        r.at(format!("/{segment}/{{{segment}Id}}/deploymentRestriction"))
            .data(kind)
            .get(
                list,
                Doc::list::<RestrictionView>(format!(
                    "The deployment restrictions of a {segment}, oldest first"
                )),
            )
            .post(
                create,
                Doc::create::<RestrictionView, RestrictionInput>(
                    "Add a restriction: which changed paths of a push deploy the service",
                ),
            )
            .add();
        r.at(format!(
            "/{segment}/{{{segment}Id}}/deploymentRestriction/{{deploymentRestrictionId}}"
        ))
        .data(kind)
        .put(
            edit,
            Doc::edit::<RestrictionView, RestrictionInput>("Edit a deployment restriction"),
        )
        .delete(remove, Doc::delete("Remove a deployment restriction"))
        .add();
    }
}

async fn list(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .list_restrictions(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(Paged::from_vec(all, page, RestrictionView::from)))
}

async fn create(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<RestrictionInput>,
) -> ApiResult<HttpResponse> {
    let r = st
        .capstan
        .create_restriction(&p, **kind, service_id(&req, **kind)?, input)
        .await?;
    Ok(created(RestrictionView::from(r)))
}

async fn edit(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<RestrictionInput>,
) -> ApiResult<HttpResponse> {
    let r = st
        .capstan
        .edit_restriction(
            &p,
            **kind,
            service_id(&req, **kind)?,
            path_id(&req, ID)?,
            input,
        )
        .await?;
    Ok(ok(RestrictionView::from(r)))
}

async fn remove(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_restriction(&p, **kind, service_id(&req, **kind)?, path_id(&req, ID)?)
        .await?;
    Ok(no_content())
}
