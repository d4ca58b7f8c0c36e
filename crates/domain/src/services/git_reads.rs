//! What the API reads of git repositories: a Dockerfile's arguments and base images, whether
//! files exist, a directory's subdirectories, a branch's commits and their authors. Each read
//! fetches the repository through the outbound policy, with the git token named (which must
//! be the organization's), in no unit: the unit that checks access ends before git is asked.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::dockerfile;
use crate::error::{DomainError, DomainResult};
use crate::git::{Checkouts, CommitInfo, GitError, Tree};
use crate::ids::{EnvironmentId, GitTokenId, OrganizationId, ServiceId};
use crate::model::{
    Environment, GitAccess, GitRepository, GitRepositoryInput, GitToken, Organization, Service,
    ServiceKind,
};
use crate::ports::{Repo, Unit};
use std::sync::Arc;

/// The commits a listing shows (the public API's "last 100").
pub const COMMITS_LISTED: usize = 100;

/// What `checkDockerfile` found.
#[derive(Debug, Clone)]
pub struct DockerfileCheck {
    /// The repository as validated.
    pub git_repository: GitRepository,
    pub dockerfile_path: String,
    pub args: Vec<String>,
    pub repositories: Vec<String>,
}

/// An author of a branch's commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contributor {
    pub name: String,
    pub email: String,
}

fn refused(e: GitError) -> DomainError {
    match e {
        GitError::Refused(why) => DomainError::invalid("git_repository.url", why),
        GitError::NotFound => DomainError::invalid(
            "git_repository",
            "the repository or its branch was not found",
        ),
        GitError::Unauthorized => DomainError::invalid(
            "git_repository.git_token_id",
            "the git provider refused the token (or the repository needs one)",
        ),
        e => DomainError::Upstream(e.to_string()),
    }
}

/// `path` under the repository's `root_path`.
fn under(root: &str, path: &str) -> String {
    format!(
        "{}/{}",
        root.trim_matches('/'),
        path.trim_start_matches('/')
    )
    .trim_start_matches('/')
    .to_string()
}

impl Capstan {
    fn checkouts(&self) -> DomainResult<&Arc<dyn Checkouts>> {
        self.checkouts
            .as_ref()
            .ok_or_else(|| DomainError::Unavailable("this Capstan reads no git repository".into()))
    }

    /// How to fetch `repo` for `organization`: its token, when named, must be the
    /// organization's.
    async fn git_access_of(
        &self,
        tx: &mut Unit,
        organization: OrganizationId,
        repo: &GitRepository,
    ) -> DomainResult<GitAccess> {
        let token = match repo.git_token_id {
            Some(id) => Some(self.token_of(tx, organization, id).await?),
            None => None,
        };
        Ok(GitAccess {
            url: repo.url.clone(),
            provider: repo.provider,
            token: token.map(|t| t.token),
        })
    }

    async fn token_of(
        &self,
        tx: &mut Unit,
        organization: OrganizationId,
        id: GitTokenId,
    ) -> DomainResult<GitToken> {
        Repo::<GitToken>::get(tx, id)
            .await?
            .filter(|t| t.organization_id == organization)
            .ok_or_else(|| DomainError::invalid("git_repository.git_token_id", "no such git token"))
    }

    /// The repository a request names, and how to fetch it, once the caller may read
    /// `environment`.
    async fn requested_repository(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        input: GitRepositoryInput,
    ) -> DomainResult<(GitRepository, GitAccess)> {
        let repo = input.into_repository("git_repository")?;
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let env: Environment = self.load(tx, p, environment, Action::Read).await?;
        let access = self.git_access_of(tx, env.organization_id, &repo).await?;
        Ok((repo, access))
    }

    async fn tree_of(&self, access: &GitAccess, branch: &str) -> DomainResult<Box<dyn Tree>> {
        self.checkouts()?
            .tree(access, branch)
            .await
            .map_err(refused)
    }

    /// `POST /environment/{id}/checkDockerfile`: the Dockerfile at `dockerfile_path` (from
    /// the root path) on the branch, with the arguments it declares and the images it starts
    /// from. No Dockerfile there: 400.
    pub async fn check_dockerfile(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        input: GitRepositoryInput,
        dockerfile_path: String,
    ) -> DomainResult<DockerfileCheck> {
        let (repo, access) = self.requested_repository(p, environment, input).await?;
        let tree = self.tree_of(&access, &repo.branch).await?;
        let at = under(&repo.root_path, &dockerfile_path);
        let text = tree
            .file(&at)
            .map(|bytes| String::from_utf8_lossy(&bytes).to_string())
            .ok_or_else(|| {
                DomainError::invalid(
                    "dockerfile_path",
                    format!("no Dockerfile at {at} on the branch {}", repo.branch),
                )
            })?;
        Ok(DockerfileCheck {
            git_repository: repo,
            dockerfile_path,
            args: dockerfile::declared_args(&text).into_iter().collect(),
            repositories: dockerfile::base_images(&text),
        })
    }

    /// `POST /environment/{id}/checkGitFile`: every file named exists (from the root path)
    /// on the branch; the first missing one is a 400 naming it.
    pub async fn check_git_files(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        input: GitRepositoryInput,
        files: Vec<String>,
    ) -> DomainResult<Vec<String>> {
        let (repo, access) = self.requested_repository(p, environment, input).await?;
        let tree = self.tree_of(&access, &repo.branch).await?;
        for (i, file) in files.iter().enumerate() {
            if tree.file(&under(&repo.root_path, file)).is_none() {
                return Err(DomainError::invalid(
                    format!("files[{i}]"),
                    format!("no file {file} on the branch {}", repo.branch),
                ));
            }
        }
        Ok(files)
    }

    /// `POST /organization/{id}/listDirectoriesFromGitRepository`: the directories right
    /// under the root path on the branch.
    pub async fn list_git_directories(
        &self,
        p: &Principal,
        organization: OrganizationId,
        input: GitRepositoryInput,
    ) -> DomainResult<Vec<String>> {
        let repo = input.into_repository("git_repository")?;
        let access = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let _: Organization = self.load(tx, p, organization, Action::Read).await?;
            self.git_access_of(tx, organization, &repo).await?
        };
        let tree = self.tree_of(&access, &repo.branch).await?;
        tree.directories(&repo.root_path).ok_or_else(|| {
            DomainError::invalid(
                "root_path",
                format!(
                    "{} is not a directory on the branch {}",
                    repo.root_path, repo.branch
                ),
            )
        })
    }

    /// The newest commits of a service's branch (`/{kind}/{id}/commit`).
    pub async fn service_commits(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Vec<CommitInfo>> {
        let (repo, access) = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let service: Service = self.load_service(tx, p, kind, id, Action::Read).await?;
            let repo = super::webhooks::git_source(&service)?;
            let access = self
                .git_access_of(tx, service.organization_id, &repo)
                .await?;
            (repo, access)
        };
        self.checkouts()?
            .commits(&access, &repo.branch, COMMITS_LISTED)
            .await
            .map_err(refused)
    }

    /// The authors of a service's newest commits, each once, most recent first.
    pub async fn service_contributors(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Vec<Contributor>> {
        let mut out: Vec<Contributor> = Vec::new();
        for commit in self.service_commits(p, kind, id).await? {
            let author = Contributor {
                name: commit.author_name,
                email: commit.author_email,
            };
            if !out.contains(&author) {
                out.push(author);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_under_the_root_path() {
        assert_eq!(under("/", "Dockerfile"), "Dockerfile");
        assert_eq!(under("/app", "Dockerfile"), "app/Dockerfile");
        assert_eq!(
            under("/app/", "/docker/Dockerfile"),
            "app/docker/Dockerfile"
        );
    }
}
