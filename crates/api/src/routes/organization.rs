//! Organizations, API tokens and roles.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{ApiTokenView, OrganizationView, Paged, RoleView};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::services::{ApiTokenInput, OrganizationUpdate};

type St = web::Data<AppState>;
const ORG: &str = "organizationId";

pub fn routes(r: &mut Routes) {
    r.at("/organization")
        .get(
            list,
            Doc::list::<OrganizationView>("List the organizations of the caller"),
        )
        .post(
            create,
            Doc::create::<OrganizationView, OrganizationUpdate>(
                "Create an organization (signed-in users)",
            ),
        )
        .add();
    r.at("/organization/{organizationId}")
        .get(get, Doc::get::<OrganizationView>("Get an organization"))
        .put(
            update,
            Doc::edit::<OrganizationView, OrganizationUpdate>("Edit an organization"),
        )
        .delete(
            delete,
            Doc::delete("Delete an organization and everything in it"),
        )
        .add();
    r.at("/organization/{organizationId}/apiToken")
        .get(
            list_tokens,
            Doc::list::<ApiTokenView>("List API tokens (never their values)"),
        )
        .post(
            create_token,
            Doc::create::<ApiTokenView, ApiTokenInput>(
                "Create an API token; its value is shown once",
            ),
        )
        .add();
    r.at("/organization/{organizationId}/apiToken/{apiTokenId}")
        .delete(delete_token, Doc::delete("Revoke an API token"))
        .add();
    r.at("/organization/{organizationId}/availableRole")
        .get(
            roles,
            Doc::list::<RoleView>("List the roles tokens and members can have"),
        )
        .add();
}

async fn list(st: St, Auth(p): Auth, Paging(page): Paging) -> ApiResult<HttpResponse> {
    let orgs = st.capstan.list_organizations(&p, page).await?;
    Ok(ok(Paged::from_page(orgs, OrganizationView::from)))
}

/// Organizations are created by signed-in users (JWT), who become their ADMIN, or with
/// `capstan token create`.
async fn create(
    st: St,
    Auth(p): Auth,
    JsonBody(input): JsonBody<OrganizationUpdate>,
) -> ApiResult<HttpResponse> {
    let org = st.capstan.create_organization(&p, input).await?;
    Ok(created(OrganizationView::from(org)))
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
    Ok(ok(Paged::from_vec(roles, page, RoleView::from)))
}
