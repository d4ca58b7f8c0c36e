//! The git provider port: repository hooks on HOSTA (GitHub-compatible), HOSTB (GitLab-
//! compatible) and HOSTC (Bitbucket-compatible) providers, and what a service's webhook must be.

pub use crate::model::WebhookState;
use crate::model::{GitAccess, GitProvider};
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
    /// False when the provider holds the hook but does not deliver (disabled).
    pub active: bool,
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
    /// The outbound policy refuses the provider's address (the text names the setting).
    #[error("the git provider's address is not called: {0}")]
    Refused(String),
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
    /// Writes a comment on pull request `number`, or edits `existing` (its id); answers the
    /// comment's id.
    async fn put_comment(
        &self,
        repo: &RepositoryAccess,
        number: i64,
        existing: Option<&str>,
        body: &str,
    ) -> Result<String, GitError>;
    /// Sets Capstan's status of `commit`.
    async fn set_commit_status(
        &self,
        repo: &RepositoryAccess,
        commit: &str,
        status: &CommitStatus,
    ) -> Result<(), GitError>;
    /// Pull request `number` as it is now.
    async fn pull_request(
        &self,
        repo: &RepositoryAccess,
        number: i64,
    ) -> Result<crate::pull_requests::PullRequest, GitError>;
    /// Whether the provider's user `user` (a login, a user name, a nickname) may write to the
    /// repository.
    async fn may_write(&self, repo: &RepositoryAccess, user: &str) -> Result<bool, GitError>;
}

/// Where a commit stands, as Capstan tells the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitState {
    Pending,
    Success,
    Failure,
}

/// A commit status: its state, the page it links to and a line saying what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitStatus {
    pub state: CommitState,
    pub target_url: Option<String>,
    pub description: String,
}

/// The name a commit status goes by at the provider.
pub const STATUS_CONTEXT: &str = "capstan/preview";

/// A repository's files at one revision, as fetched.
pub trait Tree: Send + Sync {
    /// The content of the file at `path` (from the repository's root), when it is one inside
    /// the repository.
    fn file(&self, path: &str) -> Option<Vec<u8>>;
    /// The names of the directories right under `path`, sorted; `None` when `path` is no
    /// directory of the repository.
    fn directories(&self, path: &str) -> Option<Vec<String>>;
}

/// One commit of a branch's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    pub id: String,
    pub author_name: String,
    pub author_email: String,
    pub at: time::OffsetDateTime,
    /// Its message's first line.
    pub message: String,
}

/// What fetches a repository's files at a revision: engines build from them, and the API
/// reads them (a Dockerfile's arguments, a directory listing, a branch's commits).
#[async_trait]
pub trait Checkouts: Send + Sync {
    /// `revision`'s files, fetched into a directory of their own that goes with the tree.
    async fn tree(&self, source: &GitAccess, revision: &str) -> Result<Box<dyn Tree>, GitError>;

    /// The newest `limit` commits of `branch`, newest first.
    async fn commits(
        &self,
        source: &GitAccess,
        branch: &str,
        limit: usize,
    ) -> Result<Vec<CommitInfo>, GitError>;

    /// Fetches `revision` (a commit, or a branch for its newest commit) of `source` into
    /// `into`, an empty directory; the full id of the commit checked out. Only addresses the
    /// outbound policy permits are reached; `Err` never quotes the token.
    async fn checkout(
        &self,
        source: &GitAccess,
        revision: &str,
        into: &std::path::Path,
    ) -> Result<String, GitError>;
}

/// The events a service's hook must carry, per provider (docs/git.md): pushes, and what
/// previews follow (a pull request's opening, updates, close and merge, and the comments that
/// ask for an on-demand preview).
pub fn required_events(provider: GitProvider) -> &'static [&'static str] {
    match provider {
        GitProvider::HostA => &["push", "pull_request", "issue_comment"],
        GitProvider::HostB => &["push_events", "merge_requests_events", "note_events"],
        GitProvider::HostC => &[
            "repo:push",
            "pullrequest:created",
            "pullrequest:updated",
            "pullrequest:fulfilled",
            "pullrequest:rejected",
            "pullrequest:comment_created",
        ],
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
    // Several hooks may aim at the receiver: the one closest to complete speaks for them. A
    // disabled hook delivers nothing, so it lacks every event.
    let missing_of = |hook: &Hook| -> Vec<String> {
        required_events(provider)
            .iter()
            .filter(|e| !hook.active || !hook.events.iter().any(|h| h == *e || h == "*"))
            .map(|e| e.to_string())
            .collect()
    };
    let Some(missing) = hooks
        .iter()
        .filter(|h| aims_at(&h.url, receiver))
        .map(missing_of)
        .min_by_key(Vec::len)
    else {
        return WebhookStatus {
            status: WebhookState::NotConfigured,
            provider,
            missing_events: None,
        };
    };
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

/// Whether a hook's target is the receiver: providers may add a slash or change case, and the
/// receiver is served under /v1 too, so a hook aimed there delivers as well.
///
/// The receiver's path, `RECEIVER_PREFIX` then the service's id: the route, the address given
/// to providers and the rate limiter's key all come from here.
pub const RECEIVER_PREFIX: &str = "/git/webhook/";

/// The route of the receiver, as the HTTP layer registers it.
pub fn receiver_route() -> String {
    receiver_path("{serviceId}")
}

/// The receiver's path for `service`.
pub fn receiver_path(service: impl std::fmt::Display) -> String {
    format!("{RECEIVER_PREFIX}{service}")
}

/// The service a receiver path names (without any /v1 prefix).
pub fn receiver_service(path: &str) -> Option<&str> {
    path.strip_prefix(RECEIVER_PREFIX)
        .map(|s| s.trim_end_matches('/'))
}

pub fn aims_at(url: &str, receiver: &str) -> bool {
    let same = |a: &str, b: &str| {
        a.trim_end_matches('/')
            .eq_ignore_ascii_case(b.trim_end_matches('/'))
    };
    same(url, receiver)
        || same(
            url,
            &receiver.replacen(RECEIVER_PREFIX, &format!("/v1{RECEIVER_PREFIX}"), 1),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(url: &str, events: &[&str]) -> Hook {
        Hook {
            id: "1".into(),
            url: url.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            active: true,
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
            s(Ok(vec![hook(
                me,
                &["push", "pull_request", "issue_comment", "issues"]
            )])),
            WebhookState::Active
        );
        let partial = webhook_status(p, me, Ok(vec![hook(&format!("{me}/"), &["push"])]));
        assert_eq!(partial.status, WebhookState::Misconfigured);
        assert_eq!(
            partial.missing_events,
            Some(vec!["pull_request".into(), "issue_comment".into()])
        );
        let both = webhook_status(
            p,
            me,
            Ok(vec![
                hook(me, &["push"]),
                hook(me, &["push", "pull_request", "issue_comment"]),
            ]),
        );
        assert_eq!(both.status, WebhookState::Active, "the complete one counts");
        assert_eq!(
            s(Ok(vec![hook(me, &["*"])])),
            WebhookState::Active,
            "a hook sending every event"
        );
        assert_eq!(
            s(Ok(vec![hook(
                "https://capstan.example/v1/git/webhook/s1",
                &["push", "pull_request", "issue_comment"]
            )])),
            WebhookState::Active,
            "the receiver under /v1"
        );
        let disabled = Hook {
            active: false,
            ..hook(me, &["push", "pull_request"])
        };
        let off = webhook_status(p, me, Ok(vec![disabled]));
        assert_eq!(off.status, WebhookState::Misconfigured);
        assert_eq!(
            off.missing_events,
            Some(vec![
                "push".into(),
                "pull_request".into(),
                "issue_comment".into()
            ])
        );
        for e in [
            GitError::Unauthorized,
            GitError::RateLimited,
            GitError::Unreachable("t".into()),
        ] {
            assert_eq!(s(Err(e)), WebhookState::UnableToVerify);
        }
    }
}
