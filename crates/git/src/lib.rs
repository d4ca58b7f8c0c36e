//! The git provider adapters over each provider's REST API: repository hooks, and what
//! previews ask of pull requests (comments, commit statuses, the pull request itself, who may
//! write). HOSTA speaks a GitHub-compatible API, HOSTB a GitLab-compatible one, HOSTC a
//! Bitbucket-compatible one.

mod checkout;

pub use checkout::GitCheckouts;

use async_trait::async_trait;
use domain::git::{
    CommitState, CommitStatus, GitError, GitHosting, Hook, RepositoryAccess, STATUS_CONTEXT,
};
use domain::model::GitProvider;
use domain::outbound_policy::OutboundPolicy;
use domain::pull_requests::{self, PullRequest};
use domain::secret::Secret;
use outbound::{GuardedClient, Redirects};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

/// Providers redirect a renamed repository's API paths; more hops than this is a loop.
const MOST_REDIRECTS: usize = 5;

/// The flags of a HOSTB hook, which stand for its events.
const HOSTB_EVENTS: [&str; 6] = [
    "push_events",
    "merge_requests_events",
    "tag_push_events",
    "issues_events",
    "note_events",
    "pipeline_events",
];

pub struct HttpGitHosting {
    client: GuardedClient,
}

impl HttpGitHosting {
    /// Short timeouts: a status must answer even when the provider does not. A git token's
    /// `git_api_url` is any user's to write, so the provider is reached only where `policy`
    /// permits (a self-hosted provider on a private network is named in the allow list).
    pub fn new(timeout: Duration, policy: OutboundPolicy) -> Result<Self, String> {
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("capstan/", env!("CARGO_PKG_VERSION")));
        let client = GuardedClient::new(builder, policy, Redirects::Checked(MOST_REDIRECTS))?;
        Ok(Self { client })
    }

    /// The repository's address in the provider's API.
    fn repository_url(repo: &RepositoryAccess) -> String {
        let base = repo.api_url.trim_end_matches('/');
        match repo.provider {
            GitProvider::HostA => format!("{base}/repos/{}/{}", repo.owner, repo.name),
            GitProvider::HostB => {
                let project: String = url::form_urlencoded::byte_serialize(
                    format!("{}/{}", repo.owner, repo.name).as_bytes(),
                )
                .collect();
                format!("{base}/projects/{project}")
            }
            GitProvider::HostC => {
                format!("{base}/repositories/{}/{}", repo.owner, repo.name)
            }
        }
    }

    fn hooks_url(repo: &RepositoryAccess) -> String {
        format!("{}/hooks", Self::repository_url(repo))
    }

    /// Where pull request `number`'s comments are (`existing`: one of them).
    fn comments_url(repo: &RepositoryAccess, number: i64, existing: Option<&str>) -> String {
        let at = Self::repository_url(repo);
        let one = existing.map(|id| format!("/{id}")).unwrap_or_default();
        match repo.provider {
            GitProvider::HostA => match existing {
                Some(id) => format!("{at}/issues/comments/{id}"),
                None => format!("{at}/issues/{number}/comments"),
            },
            GitProvider::HostB => format!("{at}/merge_requests/{number}/notes{one}"),
            GitProvider::HostC => format!("{at}/pullrequests/{number}/comments{one}"),
        }
    }

    fn request(
        &self,
        method: Method,
        url: &str,
        repo: &RepositoryAccess,
    ) -> Result<RequestBuilder, GitError> {
        let req = self
            .client
            .request(method, url)
            .map_err(|refused| GitError::Refused(refused.to_string()))?;
        let Some(token) = &repo.token else {
            return Ok(req);
        };
        Ok(match repo.provider {
            GitProvider::HostA => req
                .bearer_auth(token.expose())
                .header("Accept", "application/vnd.github+json"),
            GitProvider::HostB => req.header("PRIVATE-TOKEN", token.expose()),
            GitProvider::HostC => req.bearer_auth(token.expose()),
        })
    }

    async fn send(&self, req: RequestBuilder) -> Result<Value, GitError> {
        let res = req.send().await.map_err(|e| {
            if let Some(refused) = outbound::refusal(&e) {
                GitError::Refused(refused.to_string())
            } else if e.is_timeout() {
                GitError::Unreachable("timed out".into())
            } else {
                GitError::Unreachable("connection failed".into())
            }
        })?;
        let status = res.status();
        let exhausted = res
            .headers()
            .get("x-ratelimit-remaining")
            .is_some_and(|v| v.as_bytes() == b"0");
        match status {
            s if s.is_success() => {
                let text = res
                    .text()
                    .await
                    .map_err(|_| GitError::Unreachable("body cut off".into()))?;
                if text.trim().is_empty() {
                    return Ok(Value::Null);
                }
                serde_json::from_str(&text)
                    .map_err(|_| GitError::Unexpected("a body that is not JSON".into()))
            }
            StatusCode::TOO_MANY_REQUESTS => Err(GitError::RateLimited),
            StatusCode::FORBIDDEN if exhausted => Err(GitError::RateLimited),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(GitError::Unauthorized),
            StatusCode::NOT_FOUND => Err(GitError::NotFound),
            s => Err(GitError::Unexpected(format!("status {}", s.as_u16()))),
        }
    }
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A hook's on/off member; absent means on.
fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(true)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The provider's hooks, in the domain's terms.
fn parse_hooks(provider: GitProvider, body: &Value) -> Result<Vec<Hook>, GitError> {
    let list = match provider {
        GitProvider::HostC => body.get("values"),
        _ => Some(body),
    }
    .and_then(Value::as_array)
    .ok_or_else(|| GitError::Unexpected("a hook list that is not a list".into()))?;
    Ok(list
        .iter()
        .filter_map(|h| {
            Some(match provider {
                GitProvider::HostA => Hook {
                    id: text(h, "id")?,
                    url: h.get("config")?.get("url")?.as_str()?.to_string(),
                    events: strings(h.get("events")),
                    active: flag(h, "active"),
                },
                GitProvider::HostB => Hook {
                    id: text(h, "id")?,
                    url: text(h, "url")?,
                    events: HOSTB_EVENTS
                        .iter()
                        .filter(|e| h.get(**e).and_then(Value::as_bool) == Some(true))
                        .map(|e| e.to_string())
                        .collect(),
                    // GitLab-compatible hooks are switched off after failing deliveries.
                    active: !matches!(
                        h.get("alert_status").and_then(Value::as_str),
                        Some("disabled" | "temporarily_disabled")
                    ),
                },
                GitProvider::HostC => Hook {
                    id: text(h, "uuid")?,
                    url: text(h, "url")?,
                    events: strings(h.get("events")),
                    active: flag(h, "active"),
                },
            })
        })
        .collect())
}

fn hook_body(provider: GitProvider, url: &str, events: &[&str], secret: &Secret) -> Value {
    match provider {
        GitProvider::HostA => json!({
            "name": "web",
            "active": true,
            "events": events,
            "config": {"url": url, "content_type": "json", "secret": secret.expose(), "insecure_ssl": "0"},
        }),
        GitProvider::HostB => {
            let mut body =
                json!({"url": url, "token": secret.expose(), "enable_ssl_verification": true});
            for flag in HOSTB_EVENTS {
                body[flag] = json!(events.contains(&flag));
            }
            body
        }
        GitProvider::HostC => json!({
            "description": "capstan",
            "url": url,
            "active": true,
            "events": events,
            "secret": secret.expose(),
        }),
    }
}

#[async_trait]
impl GitHosting for HttpGitHosting {
    async fn list_hooks(&self, repo: &RepositoryAccess) -> Result<Vec<Hook>, GitError> {
        let url = Self::hooks_url(repo);
        let url = match repo.provider {
            GitProvider::HostC => format!("{url}?pagelen=100"),
            _ => format!("{url}?per_page=100"),
        };
        let body = self.send(self.request(Method::GET, &url, repo)?).await?;
        parse_hooks(repo.provider, &body)
    }

    async fn put_hook(
        &self,
        repo: &RepositoryAccess,
        existing: Option<&str>,
        url: &str,
        events: &[&str],
        secret: &Secret,
    ) -> Result<(), GitError> {
        let hooks = Self::hooks_url(repo);
        let body = hook_body(repo.provider, url, events, secret);
        let req = match (existing, repo.provider) {
            (None, _) => self.request(Method::POST, &hooks, repo)?,
            (Some(id), GitProvider::HostA) => {
                self.request(Method::PATCH, &format!("{hooks}/{id}"), repo)?
            }
            (Some(id), _) => self.request(Method::PUT, &format!("{hooks}/{id}"), repo)?,
        };
        self.send(req.json(&body)).await.map(|_| ())
    }

    async fn put_comment(
        &self,
        repo: &RepositoryAccess,
        number: i64,
        existing: Option<&str>,
        body: &str,
    ) -> Result<String, GitError> {
        let url = Self::comments_url(repo, number, existing);
        let method = match (existing, repo.provider) {
            (None, _) => Method::POST,
            (Some(_), GitProvider::HostA) => Method::PATCH,
            (Some(_), _) => Method::PUT,
        };
        let payload = match repo.provider {
            GitProvider::HostC => json!({"content": {"raw": body}}),
            _ => json!({"body": body}),
        };
        let answer = self
            .send(self.request(method, &url, repo)?.json(&payload))
            .await?;
        text(&answer, "id")
            .or_else(|| existing.map(str::to_string))
            .ok_or_else(|| GitError::Unexpected("a comment without an id".into()))
    }

    async fn set_commit_status(
        &self,
        repo: &RepositoryAccess,
        commit: &str,
        status: &CommitStatus,
    ) -> Result<(), GitError> {
        let at = Self::repository_url(repo);
        let (url, payload) = match repo.provider {
            GitProvider::HostA => (
                format!("{at}/statuses/{commit}"),
                json!({
                    "state": match status.state {
                        CommitState::Pending => "pending",
                        CommitState::Success => "success",
                        CommitState::Failure => "failure",
                    },
                    "target_url": status.target_url,
                    "description": status.description,
                    "context": STATUS_CONTEXT,
                }),
            ),
            GitProvider::HostB => (
                format!("{at}/statuses/{commit}"),
                json!({
                    "state": match status.state {
                        CommitState::Pending => "running",
                        CommitState::Success => "success",
                        CommitState::Failure => "failed",
                    },
                    "target_url": status.target_url,
                    "description": status.description,
                    "name": STATUS_CONTEXT,
                }),
            ),
            GitProvider::HostC => (
                format!("{at}/commit/{commit}/statuses/build"),
                json!({
                    "state": match status.state {
                        CommitState::Pending => "INPROGRESS",
                        CommitState::Success => "SUCCESSFUL",
                        CommitState::Failure => "FAILED",
                    },
                    "key": STATUS_CONTEXT,
                    "url": status.target_url,
                    "description": status.description,
                }),
            ),
        };
        self.send(self.request(Method::POST, &url, repo)?.json(&payload))
            .await
            .map(|_| ())
    }

    async fn pull_request(
        &self,
        repo: &RepositoryAccess,
        number: i64,
    ) -> Result<PullRequest, GitError> {
        let at = Self::repository_url(repo);
        let url = match repo.provider {
            GitProvider::HostA => format!("{at}/pulls/{number}"),
            GitProvider::HostB => format!("{at}/merge_requests/{number}"),
            GitProvider::HostC => format!("{at}/pullrequests/{number}"),
        };
        let answer = self.send(self.request(Method::GET, &url, repo)?).await?;
        pull_requests::from_api(repo.provider, &answer)
            .ok_or_else(|| GitError::Unexpected("a pull request without its head".into()))
    }

    async fn may_write(&self, repo: &RepositoryAccess, user: &str) -> Result<bool, GitError> {
        let at = Self::repository_url(repo);
        let escaped: String = url::form_urlencoded::byte_serialize(user.as_bytes()).collect();
        match repo.provider {
            GitProvider::HostA => {
                let url = format!("{at}/collaborators/{escaped}/permission");
                match self.send(self.request(Method::GET, &url, repo)?).await {
                    Ok(answer) => Ok(matches!(
                        answer.get("permission").and_then(Value::as_str),
                        Some("admin" | "maintain" | "write")
                    )),
                    // Not a collaborator at all.
                    Err(GitError::NotFound) => Ok(false),
                    Err(e) => Err(e),
                }
            }
            GitProvider::HostB => {
                let url = format!("{at}/members/all?query={escaped}");
                let answer = self.send(self.request(Method::GET, &url, repo)?).await?;
                // Developers (30) and above push; the query matches by prefix, so the name is
                // compared whole.
                Ok(answer.as_array().is_some_and(|members| {
                    members.iter().any(|m| {
                        m.get("username").and_then(Value::as_str) == Some(user)
                            && m.get("access_level").and_then(Value::as_i64) >= Some(30)
                    })
                }))
            }
            GitProvider::HostC => {
                let filter: String = url::form_urlencoded::byte_serialize(
                    format!("user.nickname=\"{user}\"").as_bytes(),
                )
                .collect();
                let base = repo.api_url.trim_end_matches('/');
                let url = format!(
                    "{base}/workspaces/{}/permissions/repositories/{}?q={filter}",
                    repo.owner, repo.name
                );
                let answer = self.send(self.request(Method::GET, &url, repo)?).await?;
                Ok(answer
                    .get("values")
                    .and_then(Value::as_array)
                    .is_some_and(|grants| {
                        grants.iter().any(|g| {
                            g.pointer("/user/nickname").and_then(Value::as_str) == Some(user)
                                && matches!(
                                    g.get("permission").and_then(Value::as_str),
                                    Some("write" | "admin")
                                )
                        })
                    }))
            }
        }
    }
}
