//! Environment clone, the services using a git token, and provider regions.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Routes};
use crate::views::{AssociatedServiceView, EnvironmentView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::CloudProvider;
use domain::services::CloneInput;

type St = web::Data<AppState>;

pub fn routes(r: &mut Routes) {
    r.at("/environment/{environmentId}/clone")
        .post(
            clone,
            Doc::answer(
                "Clone an environment (configuration, variables and secrets; no deployment state)",
                202,
                Some(Body::of::<EnvironmentView>()),
            )
            .body(Body::of::<CloneInput>()),
        )
        .add();
    r.at("/organization/{organizationId}/gitToken/{gitTokenId}/associatedServices")
        .get(
            associated_services,
            Doc::list::<AssociatedServiceView>("List the services using a git token"),
        )
        .add();
    for (segment, provider) in [
        ("altcloud", CloudProvider::AltCloud),
        ("cloudA", CloudProvider::CloudA),
        ("cloudC", CloudProvider::CloudC),
    ] {
        r.at(format!("/{segment}/region"))
            .data(provider)
            .get(
                regions,
                Doc::list::<domain::model::Region>(format!("List the regions of {segment}")),
            )
            .add();
    }
}

/// 202: the clone is requested (and, here, already written).
async fn clone(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<CloneInput>,
) -> ApiResult<HttpResponse> {
    let env = st
        .capstan
        .clone_environment(&p, path_id(&req, "environmentId")?, input)
        .await?;
    Ok(HttpResponse::Accepted().json(EnvironmentView::from(env)))
}

async fn associated_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let services = st
        .capstan
        .git_token_services(
            &p,
            path_id(&req, "organizationId")?,
            path_id(&req, "gitTokenId")?,
            page,
        )
        .await?;
    Ok(ok(Paged::from_page(services, AssociatedServiceView::from)))
}

async fn regions(
    st: St,
    provider: web::Data<CloudProvider>,
    Auth(p): Auth,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    Ok(ok(Paged::from_page(
        st.capstan.regions(&p, **provider, page),
        |r| r,
    )))
}
