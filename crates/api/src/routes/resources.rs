//! The hierarchy and the organization's resources. Two shapes cover them all, so each is
//! generated from one macro:
//! - `owned`: list/create under the organization, get/edit/delete under the organization too
//!   (`/organization/{organizationId}/cluster/{clusterId}`);
//! - `nested`: list/create under a parent, get/edit/delete at the top (`/project/{projectId}`).

use super::{created, no_content, ok, Deleted};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::*;
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::services::*;

type St = web::Data<AppState>;

macro_rules! owned {
    ($module:ident, $path:literal, $id:literal, $input:ty, $update:ty, $view:ty,
     $list:ident, $create:ident, $get:ident, $edit:ident, $delete:ident) => {
        mod $module {
            use super::*;
            const ORG: &str = "organizationId";

            pub fn routes(r: &mut Routes) {
                r.at(concat!("/organization/{organizationId}/", $path))
                    .get(list, Doc::list::<$view>(concat!("List ", $path)))
                    .post(
                        create,
                        Doc::create::<$view, $input>(concat!("Create a ", $path)),
                    )
                    .add();
                r.at(concat!(
                    "/organization/{organizationId}/",
                    $path,
                    "/{",
                    $id,
                    "}"
                ))
                .get(get, Doc::get::<$view>(concat!("Get a ", $path)))
                .put(
                    update,
                    Doc::edit::<$view, $update>(concat!("Edit a ", $path)),
                )
                .delete(delete, Doc::delete(concat!("Delete a ", $path)))
                .add();
            }

            async fn list(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                Paging(page): Paging,
            ) -> ApiResult<HttpResponse> {
                let items = st.capstan.$list(&p, path_id(&req, ORG)?, page).await?;
                Ok(ok(Paged::from_page(items, <$view>::from)))
            }

            async fn create(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                JsonBody(input): JsonBody<$input>,
            ) -> ApiResult<HttpResponse> {
                let item = st.capstan.$create(&p, path_id(&req, ORG)?, input).await?;
                Ok(created(<$view>::from(item)))
            }

            async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
                let item = st
                    .capstan
                    .$get(&p, path_id(&req, ORG)?, path_id(&req, $id)?)
                    .await?;
                Ok(ok(<$view>::from(item)))
            }

            async fn update(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                JsonBody(input): JsonBody<$update>,
            ) -> ApiResult<HttpResponse> {
                let item = st
                    .capstan
                    .$edit(&p, path_id(&req, ORG)?, path_id(&req, $id)?, input)
                    .await?;
                Ok(ok(<$view>::from(item)))
            }

            async fn delete(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
                st.capstan
                    .$delete(&p, path_id(&req, ORG)?, path_id(&req, $id)?)
                    .await?;
                Ok(no_content())
            }
        }
    };
}

macro_rules! nested {
    ($module:ident, $parent_path:literal, $parent:literal, $path:literal, $id:literal, $input:ty, $update:ty, $view:ty,
     $list:ident, $create:ident, $get:ident, $edit:ident, $delete:ident, $delete_doc:expr) => {
        mod $module {
            use super::*;

            pub fn routes(r: &mut Routes) {
                r.at(concat!("/", $parent_path, "/{", $parent, "}/", $path))
                    .get(
                        list,
                        Doc::list::<$view>(concat!("List the ", $path, "s of a ", $parent_path)),
                    )
                    .post(
                        create,
                        Doc::create::<$view, $input>(concat!("Create a ", $path)),
                    )
                    .add();
                r.at(concat!("/", $path, "/{", $id, "}"))
                    .get(get, Doc::get::<$view>(concat!("Get a ", $path)))
                    .put(
                        update,
                        Doc::edit::<$view, $update>(concat!("Edit a ", $path)),
                    )
                    .delete(delete, $delete_doc)
                    .add();
            }

            async fn list(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                Paging(page): Paging,
            ) -> ApiResult<HttpResponse> {
                let items = st.capstan.$list(&p, path_id(&req, $parent)?, page).await?;
                Ok(ok(Paged::from_page(items, <$view>::from)))
            }

            async fn create(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                JsonBody(input): JsonBody<$input>,
            ) -> ApiResult<HttpResponse> {
                let item = st
                    .capstan
                    .$create(&p, path_id(&req, $parent)?, input)
                    .await?;
                Ok(created(<$view>::from(item)))
            }

            async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
                let item = st.capstan.$get(&p, path_id(&req, $id)?).await?;
                Ok(ok(<$view>::from(item)))
            }

            async fn update(
                st: St,
                Auth(p): Auth,
                req: HttpRequest,
                JsonBody(input): JsonBody<$update>,
            ) -> ApiResult<HttpResponse> {
                let item = st.capstan.$edit(&p, path_id(&req, $id)?, input).await?;
                Ok(ok(<$view>::from(item)))
            }

            async fn delete(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
                Ok(st
                    .capstan
                    .$delete(&p, path_id(&req, $id)?)
                    .await?
                    .response())
            }
        }
    };
}

owned!(
    clusters,
    "cluster",
    "clusterId",
    ClusterInput,
    ClusterInput,
    ClusterView,
    list_clusters,
    create_cluster,
    get_cluster,
    update_cluster,
    delete_cluster
);
owned!(
    registries,
    "containerRegistry",
    "containerRegistryId",
    RegistryInput,
    RegistryInput,
    RegistryView,
    list_registries,
    create_registry,
    get_registry,
    update_registry,
    delete_registry
);
owned!(
    helm_repositories,
    "helmRepository",
    "helmRepositoryId",
    HelmRepositoryInput,
    HelmRepositoryInput,
    HelmRepositoryView,
    list_helm_repositories,
    create_helm_repository,
    get_helm_repository,
    update_helm_repository,
    delete_helm_repository
);
owned!(
    git_tokens,
    "gitToken",
    "gitTokenId",
    GitTokenInput,
    GitTokenInput,
    GitTokenView,
    list_git_tokens,
    create_git_token,
    get_git_token,
    update_git_token,
    delete_git_token
);
nested!(
    projects,
    "organization",
    "organizationId",
    "project",
    "projectId",
    ProjectInput,
    ProjectInput,
    ProjectView,
    list_projects,
    create_project,
    get_project,
    update_project,
    delete_project,
    Doc::delete("Delete a project with its environments")
);
nested!(
    environments,
    "project",
    "projectId",
    "environment",
    "environmentId",
    EnvironmentInput,
    EnvironmentUpdate,
    EnvironmentView,
    list_environments,
    create_environment,
    get_environment,
    update_environment,
    delete_environment,
    Doc::delete_or_accept::<EnvironmentStatus>(
        "Delete an environment: 204 at once when none of its services was deployed, else 202 \
         and the engine deletes them first"
    )
);

pub fn routes(r: &mut Routes) {
    clusters::routes(r);
    registries::routes(r);
    helm_repositories::routes(r);
    git_tokens::routes(r);
    projects::routes(r);
    environments::routes(r);
}
