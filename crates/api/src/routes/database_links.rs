//! The applications linked to a database (`/database/{id}/application`): those that hold its
//! connection variables; the database's credentials and versions, and the configurations an
//! environment offers.

use super::{no_content, ok};
use crate::database_views::{
    CredentialsView, DatabaseConfigurationResponseList, VersionResponseList,
};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{Paged, ServiceView};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};

type St = web::Data<AppState>;
const DATABASE: &str = "databaseId";

pub fn routes(r: &mut Routes) {
    r.at("/database/{databaseId}/masterCredentials")
        .get(
            credentials,
            Doc::get::<CredentialsView>(
                "Where the database is reached in its environment and how to sign in",
            ),
        )
        .add();
    r.at("/database/{databaseId}/version")
        .get(
            versions,
            Doc::get::<VersionResponseList>("The versions of the database's type Capstan runs"),
        )
        .add();
    r.at("/environment/{environmentId}/databaseConfiguration")
        .get(
            configuration,
            Doc::get::<DatabaseConfigurationResponseList>(
                "Each database type with its versions and modes",
            ),
        )
        .add();
    r.at("/database/{databaseId}/application")
        .get(
            list,
            Doc::list::<ServiceView>(
                "List the applications linked to a database (given its connection variables)",
            ),
        )
        .add();
    r.at("/database/{databaseId}/application/{targetApplicationId}")
        .delete(
            unlink,
            Doc::delete(
                "Remove an application's link to a database: its connection variables go, \
                 with the aliases and overrides made of them",
            ),
        )
        .add();
}

async fn list(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let applications = st
        .capstan
        .linked_applications(&p, path_id(&req, DATABASE)?)
        .await?;
    Ok(ok(Paged::from_vec(applications, page, ServiceView::from)))
}

async fn unlink(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .unlink_application(
            &p,
            path_id(&req, DATABASE)?,
            path_id(&req, "targetApplicationId")?,
        )
        .await?;
    Ok(no_content())
}

async fn credentials(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .database_credentials(&p, path_id(&req, DATABASE)?)
        .await?;
    Ok(ok(CredentialsView::from(found)))
}

async fn versions(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .database_versions(&p, path_id(&req, DATABASE)?)
        .await?;
    Ok(ok(VersionResponseList::of(found)))
}

async fn configuration(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .database_configuration(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(DatabaseConfigurationResponseList::of(found)))
}
