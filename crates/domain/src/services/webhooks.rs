//! Git webhooks of services: their status on the provider (endpoint 15), their repair, and the
//! receiver of what they deliver (pushes; pull requests' events, for previews).

use super::{Capstan, DeployInput};
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::git::*;
use crate::ids::ServiceId;
use crate::model::{
    push_deploys, DeploymentAction, GitProvider, GitRepository, GitToken, Service, ServiceSpec,
};
use crate::ports::{IdempotencyClaim, Repo, Scope, Unit};
use crate::pull_requests::{self, PullRequestEvent};
use crate::secret::Secret;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use time::{Duration, OffsetDateTime};

/// What the git integration needs: the provider adapters, where this server is reached, and
/// the key the per-service signing secrets derive from.
#[derive(Clone)]
pub struct GitIntegration {
    pub hosting: Arc<dyn GitHosting>,
    /// The server's public address (`CAPSTAN_PUBLIC_URL`), without a trailing slash.
    pub public_url: String,
    pub signing_key: Secret,
    /// How long a status is reused for a service (a provider's rate limit is easy to reach).
    pub cache_ttl: Duration,
    cache: Arc<Mutex<HashMap<ServiceId, (OffsetDateTime, WebhookStatus)>>>,
}

impl GitIntegration {
    pub fn new(
        hosting: Arc<dyn GitHosting>,
        public_url: &str,
        signing_key: Secret,
        cache_ttl: Duration,
    ) -> Self {
        Self {
            hosting,
            public_url: public_url.trim_end_matches('/').to_string(),
            signing_key,
            cache_ttl,
            cache: Arc::default(),
        }
    }

    /// Where the provider delivers the service's events.
    pub fn receiver_url(&self, service: ServiceId) -> String {
        format!("{}{}", self.public_url, receiver_path(service))
    }

    /// The service's signing secret: derived, so nothing more is stored.
    pub fn secret_for(&self, service: ServiceId) -> Secret {
        Secret::new(crate::hex::encode(&hmac(
            self.signing_key.expose().as_bytes(),
            service.to_string().as_bytes(),
        )))
    }
}

fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| {
        // HMAC takes keys of any length; this branch is unreachable.
        <Hmac<Sha256> as Mac>::new_from_slice(b"").unwrap_or_else(|_| unreachable!())
    });
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

fn digest(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    Sha256::digest(bytes).to_vec()
}

/// A delivery as it arrived: the headers that matter (lower-case names) and the raw body.
pub struct Delivery {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// What the receiver did with a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    Deployed(crate::ids::DeploymentRequestId),
    /// A tag pushed on the deployed commit, now its `deployed_commit_tag`.
    Recorded(String),
    /// A pull-request event acted on the pull request's preview environment.
    Preview(super::Previewed),
    Ignored(String),
}

/// What kind of reference a push moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moved {
    Branch,
    Tag,
}

impl Delivery {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// Checks the provider's signature scheme with `secret`.
    fn verify(&self, provider: GitProvider, secret: &Secret) -> bool {
        use subtle::ConstantTimeEq;
        let signed = |header: &str| {
            let Some(given) = self.header(header).and_then(|v| v.strip_prefix("sha256=")) else {
                return false;
            };
            let expected = crate::hex::encode(&hmac(secret.expose().as_bytes(), &self.body));
            given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
        };
        match provider {
            GitProvider::HostA => signed("x-hub-signature-256"),
            GitProvider::HostC => signed("x-hub-signature"),
            GitProvider::HostB => self.header("x-gitlab-token").is_some_and(|t| {
                t.len() == secret.expose().len()
                    && bool::from(t.as_bytes().ct_eq(secret.expose().as_bytes()))
            }),
        }
    }

    /// The delivery's id and whether it is a push. Without the provider's delivery header,
    /// the body's digest stands in: a redelivery repeats the body, a new push never does.
    fn identity(&self, provider: GitProvider) -> (String, bool) {
        let (id, push) = match provider {
            GitProvider::HostA => (
                self.header("x-github-delivery"),
                self.header("x-github-event") == Some("push"),
            ),
            GitProvider::HostB => (
                self.header("x-gitlab-event-uuid"),
                matches!(
                    self.header("x-gitlab-event"),
                    Some("Push Hook" | "Tag Push Hook")
                ),
            ),
            // Not X-Hook-UUID: it names the hook, the same for every delivery.
            GitProvider::HostC => (
                self.header("x-request-uuid"),
                self.header("x-event-key") == Some("repo:push"),
            ),
        };
        let id = id.map_or_else(
            || format!("sha256:{}", crate::hex::encode(&digest(&self.body))),
            str::to_string,
        );
        (id, push)
    }

    /// The paths a push changed (added, modified or removed by any of its commits), when the
    /// provider's payload lists them (HOSTA and HOSTB do; HOSTC does not).
    fn changed_paths(&self, provider: GitProvider) -> Option<Vec<String>> {
        if provider == GitProvider::HostC {
            return None;
        }
        let v: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        let mut paths: Vec<String> = v
            .get("commits")?
            .as_array()?
            .iter()
            .flat_map(|c| ["added", "modified", "removed"].map(|k| c.get(k)))
            .flatten()
            .filter_map(|list| list.as_array())
            .flatten()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect();
        paths.sort();
        paths.dedup();
        Some(paths)
    }

    /// The branch and commit a push moved, from the provider's payload.
    fn pushed(&self, provider: GitProvider) -> Option<(String, String)> {
        self.moved(provider)
            .filter(|(kind, ..)| *kind == Moved::Branch)
            .map(|(_, branch, commit)| (branch, commit))
    }

    /// The tag a push created or moved and the commit it names.
    fn tagged(&self, provider: GitProvider) -> Option<(String, String)> {
        self.moved(provider)
            .filter(|(kind, ..)| *kind == Moved::Tag)
            .map(|(_, tag, commit)| (tag, commit))
    }

    /// The reference a push moved (a branch or a tag), its name and the commit it names now;
    /// nothing for a deleted reference.
    fn moved(&self, provider: GitProvider) -> Option<(Moved, String, String)> {
        let v: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        match provider {
            GitProvider::HostA | GitProvider::HostB => {
                let reference = v.get("ref")?.as_str()?;
                let (kind, name) = match reference.strip_prefix("refs/heads/") {
                    Some(branch) => (Moved::Branch, branch),
                    None => (Moved::Tag, reference.strip_prefix("refs/tags/")?),
                };
                // An annotated tag's `after` is the tag object: its commit is the head commit.
                let commit = text(v.get("checkout_sha"))
                    .or_else(|| match kind {
                        Moved::Tag => text(v.pointer("/head_commit/id")),
                        Moved::Branch => None,
                    })
                    .or_else(|| text(v.get("after")))?;
                // A deleted reference "moves" to the zero commit.
                if commit.bytes().all(|b| b == b'0') {
                    return None;
                }
                Some((kind, name.to_string(), commit.to_string()))
            }
            GitProvider::HostC => {
                let change = v.pointer("/push/changes/0/new")?;
                let kind = match change.get("type")?.as_str()? {
                    "branch" => Moved::Branch,
                    "tag" => Moved::Tag,
                    _ => return None,
                };
                Some((
                    kind,
                    change.get("name")?.as_str()?.to_string(),
                    change.get("target")?.get("hash")?.as_str()?.to_string(),
                ))
            }
        }
    }

    /// Who wrote `commit`, as the push describes it: HOSTA its head commit, HOSTB each commit
    /// it brings, HOSTC the commit its change points at.
    fn author(&self, provider: GitProvider, commit: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_slice(&self.body).ok()?;
        let is_commit =
            |c: &&serde_json::Value| c.get("id").and_then(|i| i.as_str()) == Some(commit);
        let name = match provider {
            GitProvider::HostA => v
                .get("head_commit")
                .filter(is_commit)?
                .pointer("/author/name"),
            GitProvider::HostB => v
                .get("commits")?
                .as_array()?
                .iter()
                .find(is_commit)?
                .pointer("/author/name"),
            GitProvider::HostC => {
                let author = v.pointer("/push/changes/0/new/target/author")?;
                author
                    .pointer("/user/display_name")
                    .or_else(|| author.get("raw"))
            }
        }?
        .as_str()?;
        // HOSTC's raw author is `Name <address>`: the name is enough.
        let name = name.split(" <").next().unwrap_or(name).trim();
        (!name.is_empty()).then(|| name.to_string())
    }
}

fn text(v: Option<&serde_json::Value>) -> Option<&str> {
    v.and_then(serde_json::Value::as_str)
}

fn auto_deploy(spec: &ServiceSpec) -> bool {
    match spec {
        ServiceSpec::Application(a) => a.runtime.auto_deploy,
        ServiceSpec::Job(j) => j.auto_deploy,
        ServiceSpec::Helm(h) => h.auto_deploy,
        ServiceSpec::Terraform(t) => t.auto_deploy,
        ServiceSpec::Container(c) => c.runtime.auto_deploy,
        ServiceSpec::Database(_) => false,
    }
}

pub(super) fn git_source(service: &Service) -> DomainResult<GitRepository> {
    service
        .spec
        .git_repositories()
        .first()
        .map(|r| (*r).clone())
        .ok_or_else(|| {
            DomainError::invalid(
                "serviceId",
                "the service is not built from a git repository",
            )
        })
}

pub(super) fn unavailable(e: GitError) -> DomainError {
    match e {
        // Not the provider's failure: the address needs the operator's allow list.
        GitError::Refused(why) => DomainError::invalid("git_api_url", why),
        e => DomainError::Upstream(e.to_string()),
    }
}

impl Capstan {
    pub(super) fn git(&self) -> DomainResult<&GitIntegration> {
        self.git
            .as_ref()
            .ok_or_else(|| DomainError::Unavailable("the git integration is not configured".into()))
    }

    /// The service (checked for `action`), its git source and how to reach it; read in a unit
    /// that ends before any call to the provider.
    async fn git_access(
        &self,
        p: &Principal,
        id: ServiceId,
        action: Action,
    ) -> DomainResult<(GitRepository, RepositoryAccess)> {
        let mut tx = self.reading().await?;
        let service: Service = self.load(&mut *tx, p, id, action).await?;
        let repo = git_source(&service)?;
        let access = self.repository_access(&mut *tx, &repo).await?;
        Ok((repo, access))
    }

    pub(super) async fn repository_access(
        &self,
        tx: &mut Unit,
        repo: &GitRepository,
    ) -> DomainResult<RepositoryAccess> {
        let token = match repo.git_token_id {
            Some(id) => Repo::<GitToken>::get(tx, id).await?,
            None => None,
        };
        Ok(RepositoryAccess {
            provider: repo.provider,
            api_url: token
                .as_ref()
                .and_then(|t| t.git_api_url.clone())
                .unwrap_or_else(|| default_api_url(repo.provider).to_string())
                .trim_end_matches('/')
                .to_string(),
            owner: repo.owner.clone(),
            name: repo.name.clone(),
            token: token.map(|t| t.token),
        })
    }

    /// Endpoint 15: whether the service's webhook is set up on its git provider.
    pub async fn git_webhook_status(
        &self,
        p: &Principal,
        id: ServiceId,
    ) -> DomainResult<WebhookStatus> {
        let (repo, access) = self.git_access(p, id, Action::Read).await?;
        let git = self.git()?;
        let now = self.now();
        if let Ok(cache) = git.cache.lock() {
            if let Some((at, status)) = cache.get(&id) {
                if now - *at < git.cache_ttl {
                    return Ok(status.clone());
                }
            }
        }
        let hooks = git.hosting.list_hooks(&access).await;
        let status = webhook_status(repo.provider, &git.receiver_url(id), hooks);
        if let Ok(mut cache) = git.cache.lock() {
            cache.retain(|_, (at, _)| now - *at < git.cache_ttl);
            cache.insert(id, (now, status.clone()));
        }
        Ok(status)
    }

    /// Creates or repairs the service's hook with the required events and its signing secret.
    pub async fn sync_git_webhook(
        &self,
        p: &Principal,
        id: ServiceId,
    ) -> DomainResult<WebhookStatus> {
        let (repo, access) = self.git_access(p, id, Action::Write).await?;
        let git = self.git()?;
        let receiver = git.receiver_url(id);
        let hooks = git.hosting.list_hooks(&access).await.map_err(unavailable)?;
        let existing = hooks
            .iter()
            .find(|h| aims_at(&h.url, &receiver))
            .map(|h| h.id.clone());
        git.hosting
            .put_hook(
                &access,
                existing.as_deref(),
                &receiver,
                required_events(repo.provider),
                &git.secret_for(id),
            )
            .await
            .map_err(unavailable)?;
        if let Ok(mut cache) = git.cache.lock() {
            cache.remove(&id);
        }
        let hooks = git.hosting.list_hooks(&access).await;
        Ok(webhook_status(repo.provider, &receiver, hooks))
    }

    /// The service a delivery names and its git source, when the delivery is signed with the
    /// service's secret; none for an unknown service, one without a git source, or a missing
    /// or wrong signature.
    async fn signed_source(
        &self,
        id: ServiceId,
        delivery: &Delivery,
    ) -> DomainResult<Option<(Service, GitRepository)>> {
        let git = self.git()?;
        let service = Repo::<Service>::get(&mut *self.reading().await?, id).await?;
        let Some(service) = service else {
            return Ok(None);
        };
        let Ok(repo) = git_source(&service) else {
            return Ok(None);
        };
        Ok(delivery
            .verify(repo.provider, &git.secret_for(id))
            .then_some((service, repo)))
    }

    /// Whether a delivery carries the service's signature, in any provider's scheme. The secret
    /// derives from the id alone, so nothing is read: telling a provider's pushes from
    /// forgeries (to meter them apart) costs a flood of forgeries no query. Only the holder of
    /// the signing key can sign for an id, so a made-up id never passes.
    pub fn git_delivery_signed(&self, id: ServiceId, delivery: &Delivery) -> bool {
        let Some(git) = &self.git else { return false };
        let secret = git.secret_for(id);
        GitProvider::ALL
            .iter()
            .any(|provider| delivery.verify(*provider, &secret))
    }

    /// A delivery from the provider: verified (401 when the signature is wrong or missing),
    /// then a push on the service's branch with auto-deploy on queues a deployment of that
    /// commit, and a pull request's event acts on its preview (docs/previews.md). The same
    /// delivery twice acts once.
    pub async fn receive_git_delivery(
        &self,
        id: ServiceId,
        delivery: Delivery,
    ) -> DomainResult<Received> {
        // An unknown service and a bad signature look the same to the sender.
        let Some((service, repo)) = self.signed_source(id, &delivery).await? else {
            return Err(DomainError::Unauthenticated(
                "the delivery's signature does not verify".into(),
            ));
        };
        let (delivery_id, is_push) = delivery.identity(repo.provider);
        if !is_push {
            return self
                .receive_pull_request_event(&service, &repo, &delivery, &delivery_id)
                .await;
        }
        if let Some((tag, commit)) = delivery.tagged(repo.provider) {
            return self.record_tag(id, tag, &commit).await;
        }
        let Some((branch, commit)) = delivery.pushed(repo.provider) else {
            return Ok(Received::Ignored("a push without a branch head".into()));
        };
        if branch != repo.branch {
            return Ok(Received::Ignored(format!(
                "a push to {branch}, not to the service's branch"
            )));
        }
        if !auto_deploy(&service.spec) {
            return Ok(Received::Ignored("auto_deploy is off".into()));
        }
        if let Some(changed) = delivery.changed_paths(repo.provider) {
            let restrictions = self
                .children_of::<crate::model::DeploymentRestriction>(&mut *self.reading().await?, id)
                .await?;
            if !push_deploys(&restrictions, &changed) {
                return Ok(Received::Ignored(
                    "no changed path passes the service's deployment restrictions".into(),
                ));
            }
        }
        let system = super::previews::git_principal(repo.provider, &service);
        let queued = self.once_per_delivery(id, &delivery_id, "push", async {
            self.service_action(
                &system,
                service.kind(),
                id,
                DeploymentAction::Deploy,
                DeployInput {
                    git_commit_author: delivery.author(repo.provider, &commit),
                    git_commit_id: Some(commit.clone()),
                    ..Default::default()
                },
            )
            .await
        });
        let Some(status) = queued.await? else {
            return Ok(Received::Ignored(
                "this delivery was already received".into(),
            ));
        };
        status
            .deployment_request_id
            .map(Received::Deployed)
            .ok_or_else(|| DomainError::Internal("the deployment was not queued".into()))
    }

    /// Does `work` once per delivery of the service's: a delivery received before answers
    /// `None` and does nothing; a failure lets the provider's redelivery try again.
    async fn once_per_delivery<T>(
        &self,
        service: ServiceId,
        delivery_id: &str,
        kind: &str,
        work: impl std::future::Future<Output = DomainResult<T>>,
    ) -> DomainResult<Option<T>> {
        let now = self.now();
        let key = format!("webhook:{service}");
        let claim = self
            .store
            .claim_idempotency_key(&key, delivery_id, kind, now, now - Duration::days(1))
            .await?;
        if claim != IdempotencyClaim::Claimed {
            return Ok(None);
        }
        let done = match work.await {
            Ok(done) => done,
            Err(e) => {
                self.store
                    .release_idempotency_key(&key, delivery_id)
                    .await?;
                return Err(e);
            }
        };
        let answer = crate::ports::StoredResponse {
            status: 200,
            body: String::new(),
        };
        self.store
            .save_idempotent_response(&key, delivery_id, &answer)
            .await?;
        Ok(Some(done))
    }
}

impl Capstan {
    /// A delivery that is not a push: a pull request's event drives its preview, once per
    /// delivery; anything else is ignored.
    async fn receive_pull_request_event(
        &self,
        service: &Service,
        repo: &GitRepository,
        delivery: &Delivery,
        delivery_id: &str,
    ) -> DomainResult<Received> {
        let event = delivery
            .header(pull_requests::event_header(repo.provider))
            .unwrap_or_default();
        let body: serde_json::Value =
            serde_json::from_slice(&delivery.body).unwrap_or(serde_json::Value::Null);
        let Some(event) = pull_requests::read(repo.provider, event, &body) else {
            return Ok(Received::Ignored(
                "neither a push nor a pull-request event".into(),
            ));
        };
        let done = self.once_per_delivery(service.id, delivery_id, "pull_request", async {
            match event {
                PullRequestEvent::Changed {
                    action,
                    pull_request,
                } => {
                    self.pull_request_changed(service, repo, action, pull_request)
                        .await
                }
                PullRequestEvent::Commented {
                    number,
                    author,
                    body,
                } => {
                    self.pull_request_commented(service, repo, number, &author, &body)
                        .await
                }
            }
        });
        Ok(match done.await? {
            None => Received::Ignored("this delivery was already received".into()),
            Some(super::Previewed::Ignored(why)) => Received::Ignored(why),
            Some(done) => Received::Preview(done),
        })
    }

    /// A tag pushed on the deployed commit becomes its `deployed_commit_tag`; a tag of any
    /// other commit (one not deployed yet included) is not kept.
    async fn record_tag(&self, id: ServiceId, tag: String, commit: &str) -> DomainResult<Received> {
        self.in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
            let mut service = Repo::<Service>::get(tx, id)
                .await?
                .ok_or(DomainError::NotFound("service"))?;
            let Some(repo) = service.spec.git_repositories_mut().into_iter().next() else {
                return Ok(Received::Ignored(
                    "the service has no git repository".into(),
                ));
            };
            if repo.deployed_commit_id.as_deref() != Some(commit) {
                return Ok(Received::Ignored(format!(
                    "the tag {tag} does not name the deployed commit"
                )));
            }
            if repo.deployed_commit_tag.as_deref() != Some(tag.as_str()) {
                // Deployment state, as the worker records it: the configuration is unchanged.
                repo.deployed_commit_tag = Some(tag.clone());
                Repo::<Service>::update(tx, &service).await?;
            }
            Ok(Received::Recorded(format!(
                "the deployed commit is tagged {tag}"
            )))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(headers: &[(&str, &str)], body: serde_json::Value) -> Delivery {
        Delivery {
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }

    fn signature(secret: &Secret, body: &serde_json::Value) -> String {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        format!(
            "sha256={}",
            crate::hex::encode(&hmac(secret.expose().as_bytes(), &bytes))
        )
    }

    #[test]
    fn each_provider_signs_names_and_describes_pushes_its_own_way() {
        let secret = Secret::new("s3cret");
        let wrong = Secret::new("other");
        let hub = serde_json::json!({"ref": "refs/heads/main", "after": "abc"});
        let a = delivery(
            &[
                ("x-hub-signature-256", &signature(&secret, &hub)),
                ("x-github-event", "push"),
                ("x-github-delivery", "d1"),
            ],
            hub.clone(),
        );
        assert!(a.verify(GitProvider::HostA, &secret));
        assert!(!a.verify(GitProvider::HostA, &wrong));
        assert_eq!(a.identity(GitProvider::HostA), ("d1".into(), true));
        assert_eq!(
            a.pushed(GitProvider::HostA),
            Some(("main".into(), "abc".into()))
        );

        let lab =
            serde_json::json!({"ref": "refs/heads/main", "after": "x", "checkout_sha": "def"});
        let b = delivery(
            &[
                ("x-gitlab-token", "s3cret"),
                ("x-gitlab-event", "Push Hook"),
                ("x-gitlab-event-uuid", "d2"),
            ],
            lab,
        );
        assert!(b.verify(GitProvider::HostB, &secret));
        assert!(!b.verify(GitProvider::HostB, &wrong));
        assert_eq!(b.identity(GitProvider::HostB), ("d2".into(), true));
        assert_eq!(
            b.pushed(GitProvider::HostB),
            Some(("main".into(), "def".into()))
        );

        let bucket = serde_json::json!({"push": {"changes": [
            {"new": {"type": "branch", "name": "main", "target": {"hash": "123"}}}
        ]}});
        let c = delivery(
            &[
                ("x-hub-signature", &signature(&secret, &bucket)),
                ("x-event-key", "repo:push"),
                ("x-request-uuid", "d3"),
            ],
            bucket,
        );
        assert!(c.verify(GitProvider::HostC, &secret));
        assert!(
            !c.verify(GitProvider::HostA, &secret),
            "each provider its header"
        );
        assert_eq!(c.identity(GitProvider::HostC), ("d3".into(), true));
        assert_eq!(
            c.pushed(GitProvider::HostC),
            Some(("main".into(), "123".into()))
        );

        let hook_only = |body: serde_json::Value| {
            delivery(&[("x-event-key", "repo:push"), ("x-hook-uuid", "h1")], body)
                .identity(GitProvider::HostC)
                .0
        };
        let one = serde_json::json!({"push": {"changes": []}, "n": 1});
        let two = serde_json::json!({"push": {"changes": []}, "n": 2});
        assert_eq!(
            hook_only(one.clone()),
            hook_only(one.clone()),
            "a redelivery"
        );
        assert_ne!(
            hook_only(one),
            hook_only(two),
            "the hook's id is not the delivery's"
        );

        let unsigned = delivery(&[("x-github-event", "push")], hub);
        assert!(!unsigned.verify(GitProvider::HostA, &secret));
        let tag = delivery(
            &[],
            serde_json::json!({"ref": "refs/tags/v1", "after": "abc"}),
        );
        assert_eq!(
            tag.pushed(GitProvider::HostA),
            None,
            "a tag is not a branch"
        );
        let deleted = delivery(
            &[],
            serde_json::json!({"ref": "refs/heads/main", "after": "0000000000000000000000000000000000000000"}),
        );
        assert_eq!(deleted.pushed(GitProvider::HostA), None, "a deleted branch");
        let without_after = delivery(
            &[],
            serde_json::json!({"ref": "refs/heads/main", "checkout_sha": "def"}),
        );
        assert_eq!(
            without_after.pushed(GitProvider::HostB),
            Some(("main".into(), "def".into()))
        );
    }

    #[test]
    fn pushes_name_tags_and_the_authors_of_their_commits() {
        let hub = delivery(
            &[],
            serde_json::json!({"ref": "refs/heads/main", "after": "abc",
                "head_commit": {"id": "abc", "author": {"name": "Ada"}}}),
        );
        assert_eq!(hub.author(GitProvider::HostA, "abc"), Some("Ada".into()));
        assert_eq!(hub.author(GitProvider::HostA, "other"), None);
        assert_eq!(hub.tagged(GitProvider::HostA), None);
        // An annotated tag: `after` is the tag object, the head commit is what it names.
        let hub_tag = delivery(
            &[],
            serde_json::json!({"ref": "refs/tags/v1", "after": "t0", "head_commit": {"id": "abc"}}),
        );
        assert_eq!(
            hub_tag.tagged(GitProvider::HostA),
            Some(("v1".into(), "abc".into()))
        );
        assert_eq!(hub_tag.pushed(GitProvider::HostA), None);

        let lab = delivery(
            &[("x-gitlab-event", "Tag Push Hook")],
            serde_json::json!({"ref": "refs/tags/v2", "after": "t1", "checkout_sha": "def"}),
        );
        assert!(lab.identity(GitProvider::HostB).1, "a tag push is a push");
        assert_eq!(
            lab.tagged(GitProvider::HostB),
            Some(("v2".into(), "def".into()))
        );
        let lab_push = delivery(
            &[],
            serde_json::json!({"ref": "refs/heads/main", "checkout_sha": "def", "commits": [
                {"id": "abc", "author": {"name": "Grace"}},
                {"id": "def", "author": {"name": "Linus"}}]}),
        );
        assert_eq!(
            lab_push.author(GitProvider::HostB, "def"),
            Some("Linus".into())
        );
        let lab_deleted = delivery(
            &[],
            serde_json::json!({"ref": "refs/tags/v2", "after": "0000000", "checkout_sha": null}),
        );
        assert_eq!(
            lab_deleted.tagged(GitProvider::HostB),
            None,
            "a deleted tag"
        );

        let bucket = |kind: &str, author: serde_json::Value| {
            delivery(
                &[],
                serde_json::json!({"push": {"changes": [{"new": {"type": kind, "name": "v3",
                    "target": {"hash": "123", "author": author}}}]}}),
            )
        };
        assert_eq!(
            bucket("tag", serde_json::json!({})).tagged(GitProvider::HostC),
            Some(("v3".into(), "123".into()))
        );
        assert_eq!(
            bucket(
                "branch",
                serde_json::json!({"raw": "Ken Thompson <ken@example.com>"})
            )
            .author(GitProvider::HostC, "123"),
            Some("Ken Thompson".into())
        );
        assert_eq!(
            bucket(
                "branch",
                serde_json::json!({"raw": "k <k@x>", "user": {"display_name": "Ken"}})
            )
            .author(GitProvider::HostC, "123"),
            Some("Ken".into())
        );
    }
}
