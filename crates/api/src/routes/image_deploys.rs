//! Organization-wide deployments of a new image tag (`/organization/{id}/container/deploy`,
//! `/organization/{id}/job/deploy`) and previews of it (`/organization/{id}/container/preview`).

use super::accepted;
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, Auth, JsonBody};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{ServiceKind, ServiceStatus};
use domain::services::ImageDeployInput;
use serde::Serialize;

type St = web::Data<AppState>;

/// The first deployment's status (the public answer), and every deployment queued.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ImageDeployView {
    #[serde(flatten)]
    pub first: ServiceStatus,
    pub statuses: Vec<ServiceStatus>,
}

pub fn routes(r: &mut Routes) {
    for (segment, kind) in [
        ("container", ServiceKind::Container),
        ("job", ServiceKind::Job),
    ] {
        r.at(format!("/organization/{{organizationId}}/{segment}/deploy"))
            .data(kind)
            .post(
                deploy,
                Doc::answer(
                    format!(
                        "Deploy a new tag to every {segment} of the organization running the \
                         image at another tag with auto-deploy on (none: 404)"
                    ),
                    202,
                    Some(Body::of::<ImageDeployView>()),
                )
                .body(Body::of::<ImageDeployInput>()),
            )
            .add();
    }
    r.at("/organization/{organizationId}/container/preview")
        .post(
            preview,
            Doc::answer(
                "Deploy a new tag in a PREVIEW copy of every environment whose containers run \
                 the image at another tag with auto-preview on (none: 404)",
                202,
                Some(Body::of::<ImageDeployView>()),
            )
            .body(Body::of::<ImageDeployInput>()),
        )
        .add();
}

async fn deploy(
    st: St,
    kind: web::Data<ServiceKind>,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ImageDeployInput>,
) -> ApiResult<HttpResponse> {
    let statuses = st
        .capstan
        .deploy_image(&p, path_id(&req, "organizationId")?, **kind, input)
        .await?;
    answer(statuses)
}

async fn preview(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ImageDeployInput>,
) -> ApiResult<HttpResponse> {
    let statuses = st
        .capstan
        .preview_image(&p, path_id(&req, "organizationId")?, input)
        .await?;
    answer(statuses)
}

fn answer(statuses: Vec<ServiceStatus>) -> ApiResult<HttpResponse> {
    // The domain answers at least one status (none matched is its 404).
    let first = statuses.first().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no deployment was queued",
        )
    })?;
    Ok(accepted(ImageDeployView { first, statuses }))
}
