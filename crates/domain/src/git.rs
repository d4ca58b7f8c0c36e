//! The git provider port: repository hooks on HOSTA (GitHub-compatible), HOSTB (GitLab-
//! compatible) and HOSTC (Bitbucket-compatible) providers, and what a service's webhook must be.

use crate::model::GitProvider;
pub use crate::model::WebhookState;
use crate::secret::Secret;
use async_trait::async_trait;
use serde::Serialize;

/// A repository on a provider, with the credentials to manage its hooks.
#[derive(Debug, Clone)]
pub struct RepositoryAccess {
    pub provider: GitProvider,
    /// The API's base URL: the git token's `git_api_url`, else the provider's public API.
    pub api_url: String,
    pub owner: String,
    pub name: String,
    /// None for a public repository without a token: hooks cannot be read then.
    pub token: Option<Secret>,
}

/// A repository hook, as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub id: String,
    pub url: String,
    /// The events it is subscribed to, in the provider's own names.
    pub events: Vec<String>,
}

/// Why the provider could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    #[error("the git provider refused the token (401/403)")]
    Unauthorized,
    #[error("the git provider's rate limit was reached")]
    RateLimited,
    #[error("the repository was not found on the git provider")]
    NotFound,
    #[error("the git provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the git provider answered unexpectedly: {0}")]
    Unexpected(String),
}

#[async_trait]
pub trait GitHosting: Send + Sync {
    async fn list_hooks(&self, repo: &RepositoryAccess) -> Result<Vec<Hook>, GitError>;
    /// Creates a hook, or replaces `existing` (its id), with these events and signing secret.
    async fn put_hook(
        &self,
        repo: &RepositoryAccess,
        existing: Option<&str>,
        url: &str,
        events: &[&str],
        secret: &Secret,
    ) -> Result<(), GitError>;
}

/// The events a service's hook must carry, per provider (docs/git.md).
pub fn required_events(provider: GitProvider) -> &'static [&'static str] {
    match provider {
        GitProvider::HostA => &["push", "pull_request"],
        GitProvider::HostB => &["push_events", "merge_requests_events"],
        GitProvider::HostC => &["repo:push", "pullrequest:created", "pullrequest:updated"],
    }
}

/// The public API of each provider, when the token names none.
pub fn default_api_url(provider: GitProvider) -> &'static str {
    match provider {
        GitProvider::HostA => "https://api.github.com",
        GitProvider::HostB => "https://gitlab.com/api/v4",
        GitProvider::HostC => "https://api.bitbucket.org/2.0",
    }
}

/// Endpoint 15's answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WebhookStatus {
    pub status: WebhookState,
    pub provider: GitProvider,
    /// Present only when `status` is MISCONFIGURED.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_events: Option<Vec<String>>,
}

/// The status of the hook aimed at `receiver` among `hooks` (or the provider's failure).
pub fn webhook_status(
    provider: GitProvider,
    receiver: &str,
    hooks: Result<Vec<Hook>, GitError>,
) -> WebhookStatus {
    let unable = WebhookStatus {
        status: WebhookState::UnableToVerify,
        provider,
        missing_events: None,
    };
    let Ok(hooks) = hooks else { return unable };
    let Some(hook) = hooks.iter().find(|h| same_url(&h.url, receiver)) else {
        return WebhookStatus {
            status: WebhookState::NotConfigured,
            provider,
            missing_events: None,
        };
    };
    let missing: Vec<String> = required_events(provider)
        .iter()
        .filter(|e| !hook.events.iter().any(|h| h == *e))
        .map(|e| e.to_string())
        .collect();
    if missing.is_empty() {
        WebhookStatus {
            status: WebhookState::Active,
            provider,
            missing_events: None,
        }
    } else {
        WebhookStatus {
            status: WebhookState::Misconfigured,
            provider,
            missing_events: Some(missing),
        }
    }
}

fn same_url(a: &str, b: &str) -> bool {
    a.trim_end_matches('/')
        .eq_ignore_ascii_case(b.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(url: &str, events: &[&str]) -> Hook {
        Hook {
            id: "1".into(),
            url: url.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn the_hook_aimed_at_the_receiver_decides() {
        let me = "https://capstan.example/git/webhook/s1";
        let p = GitProvider::HostA;
        let s = |hooks| webhook_status(p, me, hooks).status;
        assert_eq!(s(Ok(vec![])), WebhookState::NotConfigured);
        assert_eq!(
            s(Ok(vec![hook(
                "https://other.example/x",
                &["push", "pull_request"]
            )])),
            WebhookState::NotConfigured
        );
        assert_eq!(
            s(Ok(vec![hook(me, &["push", "pull_request", "issues"])])),
            WebhookState::Active
        );
        let partial = webhook_status(p, me, Ok(vec![hook(&format!("{me}/"), &["push"])]));
        assert_eq!(partial.status, WebhookState::Misconfigured);
        assert_eq!(partial.missing_events, Some(vec!["pull_request".into()]));
        for e in [
            GitError::Unauthorized,
            GitError::RateLimited,
            GitError::Unreachable("t".into()),
        ] {
            assert_eq!(s(Err(e)), WebhookState::UnableToVerify);
        }
    }
}
