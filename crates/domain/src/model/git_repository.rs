use super::GitProvider;
use crate::error::DomainError;
use crate::ids::GitTokenId;
use crate::validate;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A git repository as a client sends it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Deserialize)]
pub struct GitRepositoryInput {
    pub url: String,
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub root_path: Option<String>,
    #[serde(default)]
    pub git_token_id: Option<GitTokenId>,
    #[serde(default)]
    pub provider: Option<GitProvider>,
}

/// A git repository as validated and shown: owner and name are derived from the URL, the
/// `deployed_commit_*` members are written by deployments, `has_access` and `git_token_name`
/// are resolved from the organization's git tokens each time the record is read.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GitRepository {
    pub provider: GitProvider,
    pub owner: String,
    pub name: String,
    pub url: String,
    pub branch: String,
    pub root_path: String,
    #[serde(default)]
    pub has_access: bool,
    pub git_token_id: Option<GitTokenId>,
    #[serde(default)]
    pub git_token_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_commit_id: Option<String>,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub deployed_commit_date: Option<OffsetDateTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_commit_contributor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_commit_tag: Option<String>,
}

impl GitRepositoryInput {
    /// Validates the input; `field` is the member path used in error messages.
    pub fn into_repository(self, field: &str) -> Result<GitRepository, DomainError> {
        let url_field = format!("{field}.url");
        let parsed = validate::http_url(&url_field, &self.url)?;
        let segments: Vec<&str> = parsed
            .path_segments()
            .map(|s| s.filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        if segments.len() < 2 {
            return Err(DomainError::invalid(
                url_field,
                "must name a repository, like https://host/owner/name",
            ));
        }
        let (last, owners) = segments.split_last().ok_or_else(|| {
            DomainError::invalid(format!("{field}.url"), "must name a repository")
        })?;
        let name = last.trim_end_matches(".git").to_string();
        let owner = owners.join("/");
        let host = parsed.host_str().unwrap_or_default().to_ascii_lowercase();
        let provider = self.provider.unwrap_or(if host.contains("gitlab") {
            GitProvider::HostB
        } else if host.contains("bitbucket") {
            GitProvider::HostC
        } else {
            GitProvider::HostA
        });
        let branch = match self.branch {
            Some(b) if b.trim().is_empty() => {
                return Err(DomainError::invalid(
                    format!("{field}.branch"),
                    "must not be empty",
                ))
            }
            Some(b) => b,
            None => "main".to_string(),
        };
        let root_path = match self.root_path {
            None => "/".to_string(),
            Some(p) if p.starts_with('/') => p,
            Some(p) if p.is_empty() => "/".to_string(),
            Some(p) => format!("/{p}"),
        };
        Ok(GitRepository {
            provider,
            owner,
            name,
            url: self.url.trim().to_string(),
            branch,
            root_path,
            has_access: true,
            git_token_id: self.git_token_id,
            git_token_name: None,
            deployed_commit_id: None,
            deployed_commit_date: None,
            deployed_commit_contributor: None,
            deployed_commit_tag: None,
        })
    }
}

impl GitRepository {
    /// Forgets what was deployed (a copy of the service was never deployed).
    pub fn clear_deployment_state(&mut self) {
        self.deployed_commit_id = None;
        self.deployed_commit_date = None;
        self.deployed_commit_contributor = None;
        self.deployed_commit_tag = None;
    }

    /// Keeps what was deployed from the previous version of the same repository.
    pub fn carry_deployment_state(&mut self, previous: &GitRepository) {
        self.deployed_commit_id = previous.deployed_commit_id.clone();
        self.deployed_commit_date = previous.deployed_commit_date;
        self.deployed_commit_contributor = previous.deployed_commit_contributor.clone();
        self.deployed_commit_tag = previous.deployed_commit_tag.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(url: &str) -> GitRepositoryInput {
        GitRepositoryInput {
            url: url.into(),
            branch: None,
            root_path: None,
            git_token_id: None,
            provider: None,
        }
    }

    #[test]
    fn derives_owner_name_and_provider() {
        let r = input("https://github.com/acme/shop.git")
            .into_repository("git_repository")
            .unwrap();
        assert_eq!((r.owner.as_str(), r.name.as_str()), ("acme", "shop"));
        assert_eq!(r.provider, GitProvider::HostA);
        assert_eq!((r.branch.as_str(), r.root_path.as_str()), ("main", "/"));
        let g = input("https://gitlab.com/group/sub/app")
            .into_repository("x")
            .unwrap();
        assert_eq!(
            (g.owner.as_str(), g.provider),
            ("group/sub", GitProvider::HostB)
        );
    }

    #[test]
    fn rejects_urls_without_a_repository() {
        let err = input("https://github.com/acme")
            .into_repository("git_repository")
            .unwrap_err();
        assert!(err.to_string().starts_with("git_repository.url:"));
        assert!(input("not a url").into_repository("r").is_err());
    }
}
