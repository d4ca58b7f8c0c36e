//! Environment clone, the services using a git token, and provider regions.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::views::{AssociatedServiceView, EnvironmentView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::CloudProvider;
use domain::services::CloneInput;

type St = web::Data<AppState>;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/environment/{environmentId}/clone").route(web::post().to(clone)))
        .service(
            web::resource(
                "/organization/{organizationId}/gitToken/{gitTokenId}/associatedServices",
            )
            .route(web::get().to(associated_services)),
        );
    for (segment, provider) in [
        ("altcloud", CloudProvider::AltCloud),
        ("cloudA", CloudProvider::CloudA),
        ("cloudC", CloudProvider::CloudC),
    ] {
        cfg.service(
            web::resource(format!("/{segment}/region"))
                .app_data(web::Data::new(provider))
                .route(web::get().to(regions)),
        );
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
