//! What services are made from, checked and read before or after they are: a Dockerfile's
//! arguments, files and directories of a repository, a branch's commits and authors, whether
//! an image can be run.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, service_id, Auth, JsonBody};
use crate::openapi::{Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::git::CommitInfo;
use domain::ids::ContainerRegistryId;
use domain::model::{GitRepository, GitRepositoryInput, ServiceKind};
use domain::services::Contributor;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

#[derive(Deserialize, ToSchema)]
pub struct DockerfileCheckRequest {
    pub git_repository: GitRepositoryInput,
    /// From the repository's root_path.
    pub dockerfile_path: String,
}

#[derive(Serialize, ToSchema)]
pub struct DockerfileCheckResponse {
    pub git_repository: GitRepository,
    pub dockerfile_path: String,
    /// The ARG names it declares.
    pub arg: Vec<String>,
    /// The images its stages start from.
    pub repositories: Vec<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct GitFileCheckRequest {
    pub git_repository: GitRepositoryInput,
    /// From the repository's root_path.
    pub files: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct GitFileCheckResponse {
    /// The files found (all those asked for).
    pub files: Vec<String>,
}

#[derive(Deserialize, ToSchema)]
pub struct ContainerImageCheckRequest {
    pub registry_id: Uuid,
    pub image_name: String,
    pub tag: String,
}

#[derive(Serialize, ToSchema)]
pub struct ContainerImageCheckResponse {
    pub image_name: String,
    pub tag: String,
}

#[derive(Serialize, ToSchema)]
pub struct DirectoryList {
    pub results: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct CommitView {
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub git_commit_id: String,
    /// Tags are not fetched: always empty.
    pub tag: String,
    pub message: String,
    pub author_name: String,
}

#[derive(Serialize, ToSchema)]
pub struct CommitResponseList {
    pub results: Vec<CommitView>,
}

impl From<CommitInfo> for CommitView {
    fn from(c: CommitInfo) -> Self {
        Self {
            created_at: c.at,
            git_commit_id: c.id,
            tag: String::new(),
            message: c.message,
            author_name: c.author_name,
        }
    }
}

/// An author of commits, as the public API's User: a name, an address.
#[derive(Serialize, ToSchema)]
pub struct ContributorView {
    pub first_name: String,
    pub last_name: String,
    pub email: String,
}

#[derive(Serialize, ToSchema)]
pub struct UserResponseList {
    pub results: Vec<ContributorView>,
}

impl From<Contributor> for ContributorView {
    fn from(c: Contributor) -> Self {
        Self {
            first_name: c.name,
            last_name: String::new(),
            email: c.email,
        }
    }
}

pub fn routes(r: &mut Routes) {
    r.at("/environment/{environmentId}/checkDockerfile")
        .post(
            check_dockerfile,
            Doc::edit::<DockerfileCheckResponse, DockerfileCheckRequest>(
                "Read the Dockerfile of a repository's branch: its ARGs and base images",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/checkGitFile")
        .post(
            check_git_file,
            Doc::edit::<GitFileCheckResponse, GitFileCheckRequest>(
                "Check that files exist on a repository's branch",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/checkContainerImage")
        .post(
            check_container_image,
            Doc::edit::<ContainerImageCheckResponse, ContainerImageCheckRequest>(
                "Check that an image can be run: on the engine's host, or in its registry",
            ),
        )
        .add();
    r.at("/organization/{organizationId}/listDirectoriesFromGitRepository")
        .post(
            list_directories,
            Doc::edit::<DirectoryList, GitRepositoryInput>(
                "The directories right under a repository's root_path on its branch",
            ),
        )
        .add();
    for kind in [
        ServiceKind::Application,
        ServiceKind::Job,
        ServiceKind::Helm,
        ServiceKind::Terraform,
    ] {
        let seg = kind.path_segment();
        r.at(format!("/{seg}/{{{seg}Id}}/commit"))
            .data(kind)
            .get(
                commits,
                Doc::get::<CommitResponseList>(format!(
                    "The last 100 commits of the {seg}'s branch, newest first"
                )),
            )
            .add();
    }
    r.at("/application/{applicationId}/contributor")
        .get(
            contributors,
            Doc::get::<UserResponseList>("The authors of the application's last 100 commits"),
        )
        .add();
}

async fn check_dockerfile(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<DockerfileCheckRequest>,
) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .check_dockerfile(
            &p,
            path_id(&req, "environmentId")?,
            input.git_repository,
            input.dockerfile_path,
        )
        .await?;
    Ok(ok(DockerfileCheckResponse {
        git_repository: found.git_repository,
        dockerfile_path: found.dockerfile_path,
        arg: found.args,
        repositories: found.repositories,
    }))
}

async fn check_git_file(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<GitFileCheckRequest>,
) -> ApiResult<HttpResponse> {
    let files = st
        .capstan
        .check_git_files(
            &p,
            path_id(&req, "environmentId")?,
            input.git_repository,
            input.files,
        )
        .await?;
    Ok(ok(GitFileCheckResponse { files }))
}

async fn check_container_image(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ContainerImageCheckRequest>,
) -> ApiResult<HttpResponse> {
    st.capstan
        .check_container_image(
            &p,
            path_id(&req, "environmentId")?,
            ContainerRegistryId(input.registry_id),
            &input.image_name,
            &input.tag,
        )
        .await?;
    Ok(ok(ContainerImageCheckResponse {
        image_name: input.image_name,
        tag: input.tag,
    }))
}

async fn list_directories(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<GitRepositoryInput>,
) -> ApiResult<HttpResponse> {
    let results = st
        .capstan
        .list_git_directories(&p, path_id(&req, "organizationId")?, input)
        .await?;
    Ok(ok(DirectoryList { results }))
}

async fn commits(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let kind = **kind;
    let commits = st
        .capstan
        .service_commits(&p, kind, service_id(&req, kind)?)
        .await?;
    Ok(ok(CommitResponseList {
        results: commits.into_iter().map(CommitView::from).collect(),
    }))
}

async fn contributors(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .service_contributors(
            &p,
            ServiceKind::Application,
            service_id(&req, ServiceKind::Application)?,
        )
        .await?;
    Ok(ok(UserResponseList {
        results: found.into_iter().map(ContributorView::from).collect(),
    }))
}
