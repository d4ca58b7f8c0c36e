//! What a provider's pull-request deliveries say (a merge request, in HOSTB's words), read by
//! one parser per provider from the payloads each documents; everything else a delivery holds
//! is ignored. Previews follow these events (docs/previews.md).

use crate::model::GitProvider;
use serde_json::Value;

/// The header that names a delivery's event, per provider.
pub fn event_header(provider: GitProvider) -> &'static str {
    match provider {
        GitProvider::HostA => "x-github-event",
        GitProvider::HostB => "x-gitlab-event",
        GitProvider::HostC => "x-event-key",
    }
}

/// What happened to a pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullRequestAction {
    Opened,
    Reopened,
    /// Its head moved (new commits), or, where the provider does not tell, something of it
    /// changed: the head commit says whether there is anything new to deploy.
    Updated,
    /// Closed without a merge.
    Closed,
    Merged,
}

impl PullRequestAction {
    /// Whether the pull request is open after it.
    pub fn leaves_open(self) -> bool {
        matches!(self, Self::Opened | Self::Reopened | Self::Updated)
    }
}

/// A pull request, as an event about it describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    /// Its number in the base repository (HOSTB's `iid`).
    pub number: i64,
    pub title: String,
    /// Its page at the provider.
    pub url: String,
    /// The branch it would merge into.
    pub base_branch: String,
    pub head_branch: String,
    pub head_commit: String,
    /// Whether its head is in another repository than its base (a fork): a fork's code must
    /// not run with the base environment's secrets unless allowed.
    pub from_fork: bool,
}

/// What a delivery says about pull requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullRequestEvent {
    Changed {
        action: PullRequestAction,
        pull_request: PullRequest,
    },
    /// A comment on a pull request: `number`'s, by `author` (the provider's user name).
    Commented {
        number: i64,
        author: String,
        body: String,
    },
}

/// The pull-request event `body` carries, where `event` (the value of the provider's
/// [`event_header`]) names one; `None` for every other event, and for an action previews do
/// not follow (a label, an assignee, a review).
pub fn read(provider: GitProvider, event: &str, body: &Value) -> Option<PullRequestEvent> {
    match provider {
        GitProvider::HostA => host_a(event, body),
        GitProvider::HostB => host_b(event, body),
        GitProvider::HostC => host_c(event, body),
    }
}

fn text(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)?.as_str().map(str::to_string)
}

fn number(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer)?.as_i64()
}

/// HOSTA: `pull_request` (opened, reopened, synchronize, closed with `merged`) and
/// `issue_comment` on an issue that is a pull request.
fn host_a(event: &str, v: &Value) -> Option<PullRequestEvent> {
    match event {
        "pull_request" => {
            let pr = v.get("pull_request")?;
            let action = match v.get("action")?.as_str()? {
                "opened" => PullRequestAction::Opened,
                "reopened" => PullRequestAction::Reopened,
                "synchronize" => PullRequestAction::Updated,
                "closed" if pr.get("merged")?.as_bool()? => PullRequestAction::Merged,
                "closed" => PullRequestAction::Closed,
                _ => return None,
            };
            Some(PullRequestEvent::Changed {
                action,
                pull_request: host_a_pull_request(pr, number(v, "/number"))?,
            })
        }
        "issue_comment" if v.get("action")?.as_str()? == "created" => {
            v.pointer("/issue/pull_request")?;
            Some(PullRequestEvent::Commented {
                number: number(v, "/issue/number")?,
                author: text(v, "/comment/user/login")?,
                body: text(v, "/comment/body")?,
            })
        }
        _ => None,
    }
}

/// HOSTB: `Merge Request Hook` (open, reopen, update, close, merge) and `Note Hook` on a
/// merge request.
fn host_b(event: &str, v: &Value) -> Option<PullRequestEvent> {
    let attributes = v.get("object_attributes")?;
    match event {
        "Merge Request Hook" => {
            let action = match attributes.get("action")?.as_str()? {
                "open" => PullRequestAction::Opened,
                "reopen" => PullRequestAction::Reopened,
                "update" => PullRequestAction::Updated,
                "close" => PullRequestAction::Closed,
                "merge" => PullRequestAction::Merged,
                _ => return None,
            };
            let source = number(attributes, "/source_project_id");
            let target = number(attributes, "/target_project_id");
            Some(PullRequestEvent::Changed {
                action,
                pull_request: PullRequest {
                    number: number(attributes, "/iid")?,
                    title: text(attributes, "/title").unwrap_or_default(),
                    url: text(attributes, "/url")?,
                    base_branch: text(attributes, "/target_branch")?,
                    head_branch: text(attributes, "/source_branch")?,
                    head_commit: text(attributes, "/last_commit/id")?,
                    from_fork: source.is_none() || source != target,
                },
            })
        }
        "Note Hook" if text(attributes, "/noteable_type")? == "MergeRequest" => {
            Some(PullRequestEvent::Commented {
                number: number(v, "/merge_request/iid")?,
                author: text(v, "/user/username")?,
                body: text(attributes, "/note")?,
            })
        }
        _ => None,
    }
}

/// HOSTC: `pullrequest:created`, `updated`, `fulfilled` (merged), `rejected` (declined) and
/// `comment_created`.
fn host_c(event: &str, v: &Value) -> Option<PullRequestEvent> {
    let pr = v.get("pullrequest")?;
    let action = match event {
        "pullrequest:created" => PullRequestAction::Opened,
        "pullrequest:updated" => PullRequestAction::Updated,
        "pullrequest:fulfilled" => PullRequestAction::Merged,
        "pullrequest:rejected" => PullRequestAction::Closed,
        "pullrequest:comment_created" => {
            return Some(PullRequestEvent::Commented {
                number: number(pr, "/id")?,
                author: text(v, "/actor/nickname").or_else(|| text(v, "/actor/username"))?,
                body: text(v, "/comment/content/raw")?,
            })
        }
        _ => return None,
    };
    Some(PullRequestEvent::Changed {
        action,
        pull_request: host_c_pull_request(pr)?,
    })
}

/// A pull request as the provider's API answers it on its own (`GET` of one pull request),
/// for a preview asked for by a comment or the API, which name only its number.
pub fn from_api(provider: GitProvider, v: &Value) -> Option<PullRequest> {
    match provider {
        GitProvider::HostA => host_a_pull_request(v, None),
        GitProvider::HostB => {
            let source = number(v, "/source_project_id");
            let target = number(v, "/target_project_id");
            Some(PullRequest {
                number: number(v, "/iid")?,
                title: text(v, "/title").unwrap_or_default(),
                url: text(v, "/web_url")?,
                base_branch: text(v, "/target_branch")?,
                head_branch: text(v, "/source_branch")?,
                head_commit: text(v, "/sha")?,
                from_fork: source.is_none() || source != target,
            })
        }
        GitProvider::HostC => host_c_pull_request(v),
    }
}

/// HOSTA's pull request object, the same in its events and its API.
fn host_a_pull_request(pr: &Value, number_given: Option<i64>) -> Option<PullRequest> {
    let head_repo = text(pr, "/head/repo/full_name");
    let base_repo = text(pr, "/base/repo/full_name");
    Some(PullRequest {
        number: number_given.or_else(|| number(pr, "/number"))?,
        title: text(pr, "/title").unwrap_or_default(),
        url: text(pr, "/html_url")?,
        base_branch: text(pr, "/base/ref")?,
        head_branch: text(pr, "/head/ref")?,
        head_commit: text(pr, "/head/sha")?,
        // A fork deleted since has no head repository: not the base's.
        from_fork: head_repo.is_none() || head_repo != base_repo,
    })
}

/// HOSTC's pull request object, the same in its events and its API.
fn host_c_pull_request(pr: &Value) -> Option<PullRequest> {
    let head_repo = text(pr, "/source/repository/full_name");
    let base_repo = text(pr, "/destination/repository/full_name");
    Some(PullRequest {
        number: number(pr, "/id")?,
        title: text(pr, "/title").unwrap_or_default(),
        url: text(pr, "/links/html/href")?,
        base_branch: text(pr, "/destination/branch/name")?,
        head_branch: text(pr, "/source/branch/name")?,
        head_commit: text(pr, "/source/commit/hash")?,
        from_fork: head_repo.is_none() || head_repo != base_repo,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn changed(
        provider: GitProvider,
        event: &str,
        body: Value,
    ) -> (PullRequestAction, PullRequest) {
        match read(provider, event, &body) {
            Some(PullRequestEvent::Changed {
                action,
                pull_request,
            }) => (action, pull_request),
            other => panic!("{event}: {other:?}"),
        }
    }

    fn expected(from_fork: bool) -> PullRequest {
        PullRequest {
            number: 7,
            title: "Faster pages".into(),
            url: "https://git.example.com/acme/web/pull/7".into(),
            base_branch: "main".into(),
            head_branch: "faster".into(),
            head_commit: "c0ffee".into(),
            from_fork,
        }
    }

    fn host_a_pr(action: &str, merged: bool, head_repo: &str) -> Value {
        json!({
            "action": action,
            "number": 7,
            "pull_request": {
                "number": 7,
                "title": "Faster pages",
                "html_url": "https://git.example.com/acme/web/pull/7",
                "merged": merged,
                "head": {"ref": "faster", "sha": "c0ffee", "repo": {"full_name": head_repo}},
                "base": {"ref": "main", "sha": "0ld", "repo": {"full_name": "acme/web"}},
                "user": {"login": "ada"}
            },
            "repository": {"full_name": "acme/web"},
            "sender": {"login": "ada"}
        })
    }

    #[test]
    fn host_a_pull_requests_are_read_with_their_merge_and_fork() {
        let a = GitProvider::HostA;
        for (action, merged, want) in [
            ("opened", false, PullRequestAction::Opened),
            ("reopened", false, PullRequestAction::Reopened),
            ("synchronize", false, PullRequestAction::Updated),
            ("closed", false, PullRequestAction::Closed),
            ("closed", true, PullRequestAction::Merged),
        ] {
            let (got, pr) = changed(a, "pull_request", host_a_pr(action, merged, "acme/web"));
            assert_eq!((got, pr), (want, expected(false)), "{action}");
        }
        let (_, fork) = changed(a, "pull_request", host_a_pr("opened", false, "eve/web"));
        assert!(fork.from_fork);
        let labelled = host_a_pr("labeled", false, "acme/web");
        assert_eq!(read(a, "pull_request", &labelled), None, "not followed");
        assert_eq!(read(a, "push", &labelled), None, "another event");
    }

    #[test]
    fn host_a_comments_count_on_pull_requests_only() {
        let comment = |issue: Value| {
            json!({
                "action": "created",
                "issue": issue,
                "comment": {"body": "/capstan preview", "user": {"login": "ada"}},
                "repository": {"full_name": "acme/web"}
            })
        };
        let on_pr = comment(json!({"number": 7, "pull_request": {"url": "x"}}));
        assert_eq!(
            read(GitProvider::HostA, "issue_comment", &on_pr),
            Some(PullRequestEvent::Commented {
                number: 7,
                author: "ada".into(),
                body: "/capstan preview".into()
            })
        );
        let on_issue = comment(json!({"number": 8}));
        assert_eq!(read(GitProvider::HostA, "issue_comment", &on_issue), None);
    }

    fn host_b_mr(action: &str, source_project: i64) -> Value {
        json!({
            "object_kind": "merge_request",
            "user": {"username": "ada"},
            "project": {"id": 1, "path_with_namespace": "acme/web"},
            "object_attributes": {
                "iid": 7,
                "action": action,
                "title": "Faster pages",
                "url": "https://git.example.com/acme/web/pull/7",
                "source_branch": "faster",
                "target_branch": "main",
                "source_project_id": source_project,
                "target_project_id": 1,
                "last_commit": {"id": "c0ffee"}
            }
        })
    }

    #[test]
    fn host_b_merge_requests_are_read_with_their_merge_and_fork() {
        let b = GitProvider::HostB;
        for (action, want) in [
            ("open", PullRequestAction::Opened),
            ("reopen", PullRequestAction::Reopened),
            ("update", PullRequestAction::Updated),
            ("close", PullRequestAction::Closed),
            ("merge", PullRequestAction::Merged),
        ] {
            let (got, pr) = changed(b, "Merge Request Hook", host_b_mr(action, 1));
            assert_eq!((got, pr), (want, expected(false)), "{action}");
        }
        let (_, fork) = changed(b, "Merge Request Hook", host_b_mr("open", 2));
        assert!(fork.from_fork);
        assert_eq!(
            read(b, "Merge Request Hook", &host_b_mr("approved", 1)),
            None
        );
        let note = json!({
            "user": {"username": "ada"},
            "object_attributes": {"note": "/capstan preview", "noteable_type": "MergeRequest"},
            "merge_request": {"iid": 7}
        });
        assert_eq!(
            read(b, "Note Hook", &note),
            Some(PullRequestEvent::Commented {
                number: 7,
                author: "ada".into(),
                body: "/capstan preview".into()
            })
        );
        let on_commit = json!({
            "user": {"username": "ada"},
            "object_attributes": {"note": "/capstan preview", "noteable_type": "Commit"}
        });
        assert_eq!(read(b, "Note Hook", &on_commit), None);
    }

    fn host_c_pr(head_repo: &str) -> Value {
        json!({
            "actor": {"nickname": "ada"},
            "repository": {"full_name": "acme/web"},
            "pullrequest": {
                "id": 7,
                "title": "Faster pages",
                "links": {"html": {"href": "https://git.example.com/acme/web/pull/7"}},
                "source": {
                    "branch": {"name": "faster"},
                    "commit": {"hash": "c0ffee"},
                    "repository": {"full_name": head_repo}
                },
                "destination": {
                    "branch": {"name": "main"},
                    "commit": {"hash": "0ld"},
                    "repository": {"full_name": "acme/web"}
                }
            },
            "comment": {"content": {"raw": "/capstan preview"}}
        })
    }

    #[test]
    fn host_c_pull_requests_are_read_with_their_merge_and_fork() {
        let c = GitProvider::HostC;
        for (event, want) in [
            ("pullrequest:created", PullRequestAction::Opened),
            ("pullrequest:updated", PullRequestAction::Updated),
            ("pullrequest:rejected", PullRequestAction::Closed),
            ("pullrequest:fulfilled", PullRequestAction::Merged),
        ] {
            let (got, pr) = changed(c, event, host_c_pr("acme/web"));
            assert_eq!((got, pr), (want, expected(false)), "{event}");
        }
        let (_, fork) = changed(c, "pullrequest:created", host_c_pr("eve/web"));
        assert!(fork.from_fork);
        assert_eq!(
            read(c, "pullrequest:comment_created", &host_c_pr("acme/web")),
            Some(PullRequestEvent::Commented {
                number: 7,
                author: "ada".into(),
                body: "/capstan preview".into()
            })
        );
        assert_eq!(
            read(c, "pullrequest:approved", &host_c_pr("acme/web")),
            None
        );
        assert_eq!(read(c, "repo:push", &host_c_pr("acme/web")), None);
    }

    #[test]
    fn each_provider_api_answer_for_one_pull_request_is_read() {
        let a = host_a_pr("opened", false, "acme/web")["pull_request"].clone();
        assert_eq!(from_api(GitProvider::HostA, &a), Some(expected(false)));
        let b = json!({
            "iid": 7, "title": "Faster pages", "web_url": "https://git.example.com/acme/web/pull/7",
            "target_branch": "main", "source_branch": "faster", "sha": "c0ffee",
            "source_project_id": 9, "target_project_id": 3
        });
        assert_eq!(from_api(GitProvider::HostB, &b), Some(expected(true)));
        let c = host_c_pr("acme/web")["pullrequest"].clone();
        assert_eq!(from_api(GitProvider::HostC, &c), Some(expected(false)));
        assert_eq!(from_api(GitProvider::HostB, &json!({"iid": 7})), None);
    }

    #[test]
    fn a_payload_missing_what_a_pull_request_needs_is_no_event() {
        let mut body = host_a_pr("opened", false, "acme/web");
        body["pull_request"]["head"]
            .as_object_mut()
            .unwrap()
            .remove("sha");
        assert_eq!(read(GitProvider::HostA, "pull_request", &body), None);
        assert_eq!(
            read(GitProvider::HostB, "Merge Request Hook", &json!([])),
            None
        );
    }
}
