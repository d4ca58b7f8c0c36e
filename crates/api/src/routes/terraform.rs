//! What the API reads of terraform services: the versions the installation runs, and the
//! resources a service's state holds.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{service_id, Auth};
use crate::openapi::{Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{ServiceKind, TerraformEngine, TerraformResource};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

type St = web::Data<AppState>;

#[derive(Serialize, ToSchema)]
pub struct TerraformVersionResponse {
    pub engine: TerraformEngine,
    pub version: String,
}

#[derive(Serialize, ToSchema)]
pub struct TerraformVersionResponseList {
    pub results: Vec<TerraformVersionResponse>,
}

/// The public `TerraformResourceResponse`: a resource of the state, as read now.
#[derive(Serialize, ToSchema)]
pub struct TerraformResourceResponse {
    #[serde(flatten)]
    pub resource: TerraformResource,
    #[serde(with = "time::serde::rfc3339")]
    pub extracted_at: OffsetDateTime,
}

#[derive(Serialize, ToSchema)]
pub struct TerraformResourcesResponse {
    pub results: Vec<TerraformResourceResponse>,
}

/// Literal paths: registered before `/terraform/{terraformId}` would take them.
pub fn routes(r: &mut Routes) {
    r.at("/terraform/availableVersion")
        .get(
            versions,
            Doc::get::<TerraformVersionResponseList>(
                "The terraform engines and versions this installation runs",
            ),
        )
        .add();
    r.at("/terraform/{terraformId}/terraformResources")
        .get(
            resources,
            Doc::get::<TerraformResourcesResponse>(
                "The resources the terraform service's state holds, read now",
            ),
        )
        .add();
}

async fn versions(st: St, Auth(p): Auth) -> ApiResult<HttpResponse> {
    let results = st
        .capstan
        .terraform_versions(&p)
        .into_iter()
        .map(|(engine, version)| TerraformVersionResponse { engine, version })
        .collect();
    Ok(ok(TerraformVersionResponseList { results }))
}

async fn resources(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .terraform_resources(&p, service_id(&req, ServiceKind::Terraform)?)
        .await?;
    let now = OffsetDateTime::now_utc();
    let results = found
        .into_iter()
        .map(|resource| TerraformResourceResponse {
            resource,
            extracted_at: now,
        })
        .collect();
    Ok(ok(TerraformResourcesResponse { results }))
}
