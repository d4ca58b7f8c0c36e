//! Organizations, API tokens and roles.

use super::{created, no_content, ok};
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::views::{ApiTokenView, OrganizationView, Paged, RoleView};
use crate::AppState;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::pagination::Page;
use domain::services::{ApiTokenInput, OrganizationUpdate};

type St = web::Data<AppState>;
const ORG: &str = "organizationId";

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/organization")
            .route(web::get().to(list))
            .route(web::post().to(create)),
    )
    .service(
        web::resource("/organization/{organizationId}")
            .route(web::get().to(get))
            .route(web::put().to(update))
            .route(web::delete().to(delete)),
    )
    .service(
        web::resource("/organization/{organizationId}/apiToken")
            .route(web::get().to(list_tokens))
            .route(web::post().to(create_token)),
    )
    .service(
        web::resource("/organization/{organizationId}/apiToken/{apiTokenId}")
            .route(web::delete().to(delete_token)),
    )
    .service(
        web::resource("/organization/{organizationId}/availableRole").route(web::get().to(roles)),
    );
}

async fn list(st: St, Auth(p): Auth, Paging(page): Paging) -> ApiResult<HttpResponse> {
    let orgs = st.capstan.list_organizations(&p, page).await?;
    Ok(ok(Paged::from_page(orgs, OrganizationView::from)))
}

/// Organizations are created by signed-in users (JWT) or with `capstan token create`.
async fn create(_: Auth) -> ApiResult<HttpResponse> {
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "API tokens cannot create organizations; a signed-in user (Bearer JWT) or `capstan token create` can",
    ))
}

async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let org = st.capstan.get_organization(&p, path_id(&req, ORG)?).await?;
    Ok(ok(OrganizationView::from(org)))
}

async fn update(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<OrganizationUpdate>,
) -> ApiResult<HttpResponse> {
    let org = st
        .capstan
        .update_organization(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(ok(OrganizationView::from(org)))
}

async fn delete(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_organization(&p, path_id(&req, ORG)?)
        .await?;
    Ok(no_content())
}

async fn list_tokens(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let tokens = st
        .capstan
        .list_api_tokens(&p, path_id(&req, ORG)?, page)
        .await?;
    Ok(ok(Paged::from_page(tokens, ApiTokenView::from)))
}

async fn create_token(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ApiTokenInput>,
) -> ApiResult<HttpResponse> {
    let token = st
        .capstan
        .create_api_token(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(created(ApiTokenView::from(token)))
}

async fn delete_token(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_api_token(&p, path_id(&req, ORG)?, path_id(&req, "apiTokenId")?)
        .await?;
    Ok(no_content())
}

async fn roles(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let roles = st.capstan.available_roles(&p, path_id(&req, ORG)?).await?;
    Ok(ok(Paged::from_page(
        Page::from_vec(roles, page),
        RoleView::from,
    )))
}
