//! Endpoint 15, webhook repair and the push receiver, against a local GitHub-compatible fake.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{App, T};
use domain::auth::Role;
use domain::outbound_policy::OutboundPolicy;
use domain::services::GitIntegration;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::sync::Arc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PUBLIC: &str = "https://capstan.example";

/// The git integration of most tests: its fake provider listens on loopback, named in the
/// policy as an operator would name a self-hosted provider.
fn integration(ttl_seconds: i64) -> GitIntegration {
    integration_under(ttl_seconds, common::loopback_allowed())
}

fn integration_under(ttl_seconds: i64, policy: OutboundPolicy) -> GitIntegration {
    GitIntegration::new(
        Arc::new(git::HttpGitHosting::new(std::time::Duration::from_millis(500), policy).unwrap()),
        PUBLIC,
        domain::secret::Secret::new("test-signing-key"),
        time::Duration::seconds(ttl_seconds),
    )
}

macro_rules! with_git {
    ($group:ident, $integration:expr; $($name:ident),* $(,)?) => {
        mod $group {
            mod sqlite {
                $(
                    #[actix_rt::test]
                    async fn $name() {
                        let b = crate::common::sqlite().await.unwrap().map(|c| c.with_git($integration));
                        super::super::$name(crate::common::setup(b).await).await;
                    }
                )*
            }
            mod postgres {
                $(
                    #[actix_rt::test]
                    async fn $name() {
                        let Some(b) = crate::common::postgres().await else { return };
                        let b = b.map(|c| c.with_git($integration));
                        super::super::$name(crate::common::setup(b).await).await;
                    }
                )*
            }
        }
    };
}

with_git!(default_policy, crate::webhooks::integration_under(0, domain::outbound_policy::OutboundPolicy::default());
    a_git_api_url_on_a_refused_address_is_never_called,
);

with_git!(loopback_named, crate::webhooks::integration(0);
    status_follows_the_hook_on_the_provider,
    a_signed_push_deploys_and_an_unsigned_one_does_not,
    restrictions_decide_which_pushes_deploy,
    hostb_job_on_a_self_hosted_instance,
    hostc_terraform_service,
    hosta_helm_chart_from_git,
    pushes_name_the_deployed_commit_s_author_and_tag,
);

/// A git token aimed at the fake, and an application using it; returns the application's id.
async fn application<S: App>(t: &T<S>, fake: &MockServer) -> String {
    let env = t.hierarchy().await.2;
    let token = t
        .post(
            &format!("/organization/{}/gitToken", t.org),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_secret", "git_api_url": fake.uri()}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/environment/{env}/application"),
        json!({"name": "api", "auto_deploy": true,
               "git_repository": {"url": "https://github.com/acme/api", "branch": "main", "git_token_id": token}}),
    )
    .await
    .expect(201)
    .id()
}

async fn hooks(fake: &MockServer, hooks: Value) {
    fake.reset().await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/api/hooks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(hooks))
        .mount(fake)
        .await;
}

async fn status_follows_the_hook_on_the_provider<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    let app = application(&t, &fake).await;
    let path_of = format!("/service/{app}/gitWebhookStatus");
    let receiver = format!("{PUBLIC}/git/webhook/{app}");

    hooks(
        &fake,
        json!([{"id": 1, "config": {"url": "https://elsewhere.example"}, "events": ["push"]}]),
    )
    .await;
    let s = t.get(&path_of).await.expect(200);
    assert_eq!(
        s.body,
        json!({"status": "NOT_CONFIGURED", "provider": "HOSTA"})
    );

    // Sync creates the hook with the required events and a signing secret.
    hooks(&fake, json!([])).await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/api/hooks"))
        .and(wiremock::matchers::body_partial_json(
            json!({"events": ["push", "pull_request", "issue_comment"], "config": {"url": receiver}}),
        ))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 9})))
        .expect(1)
        .mount(&fake)
        .await;
    t.post(&format!("/service/{app}/gitWebhook/sync"), json!({}))
        .await
        .expect(200);
    let created = fake.received_requests().await.unwrap();
    let post = created
        .iter()
        .find(|r| r.method.as_str() == "POST")
        .unwrap();
    let sent: Value = serde_json::from_slice(&post.body).unwrap();
    assert!(sent["config"]["secret"].as_str().unwrap().len() >= 32);
    assert_eq!(
        post.headers.get("authorization").unwrap().to_str().unwrap(),
        "Bearer ghp_secret"
    );

    hooks(
        &fake,
        json!([{"id": 9, "config": {"url": receiver},
                "events": ["push", "pull_request", "issue_comment"]}]),
    )
    .await;
    let s = t.get(&path_of).await.expect(200);
    assert_eq!(s.body, json!({"status": "ACTIVE", "provider": "HOSTA"}));

    hooks(
        &fake,
        json!([{"id": 9, "config": {"url": receiver}, "events": ["push"]}]),
    )
    .await;
    let s = t.get(&path_of).await.expect(200);
    assert_eq!(
        s.body,
        json!({"status": "MISCONFIGURED", "provider": "HOSTA",
               "missing_events": ["pull_request", "issue_comment"]})
    );

    for status in [401, 403, 429, 500] {
        fake.reset().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(status))
            .mount(&fake)
            .await;
        let s = t.get(&path_of).await.expect(200);
        assert_eq!(s.body["status"], "UNABLE_TO_VERIFY", "{status}");
        assert!(s.body.get("missing_events").is_none());
    }
    drop(fake);
    let s = t.get(&path_of).await.expect(200);
    assert_eq!(s.body["status"], "UNABLE_TO_VERIFY", "provider down");

    // No git source: 400. No such service: 404.
    let env = t.get(&format!("/application/{app}")).await.body["environment"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let db = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await
        .expect(201)
        .id();
    t.get(&format!("/service/{db}/gitWebhookStatus"))
        .await
        .expect_error(
            400,
            "serviceId: the service is not built from a git repository",
        );
    t.get("/service/00000000-0000-4000-8000-000000000000/gitWebhookStatus")
        .await
        .expect(404);
}

/// Any VIEWER can read a status, which calls the token's `git_api_url`: under the default
/// policy a loopback or metadata address is not called, and a repair says which setting
/// would allow it.
async fn a_git_api_url_on_a_refused_address_is_never_called<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    hooks(&fake, json!([])).await;
    let app = application(&t, &fake).await;
    let viewer = t.token_with_role(Role::Viewer).await;
    let status = t
        .call(
            Some(&viewer),
            Method::GET,
            &format!("/service/{app}/gitWebhookStatus"),
            None,
        )
        .await
        .expect(200);
    assert_eq!(status.body["status"], "UNABLE_TO_VERIFY");
    let repair = t
        .post(&format!("/service/{app}/gitWebhook/sync"), json!({}))
        .await
        .expect_error(400, "git_api_url: ");
    assert!(
        repair.text.contains("CAPSTAN_OUTBOUND_ALLOW"),
        "{}",
        repair.text
    );
    assert!(
        fake.received_requests().await.unwrap().is_empty(),
        "the loopback fake was never called"
    );

    // The token moved to the metadata address (given again, as a move requires).
    let tokens = format!("/organization/{}/gitToken", t.org);
    let token = t.get(&tokens).await.expect(200).body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("{tokens}/{token}"),
        json!({"name": "gh", "type": "HOSTA", "token": "ghp_other",
               "git_api_url": "http://169.254.169.254/latest/meta-data"}),
    )
    .await
    .expect(200);
    let repair = t
        .post(&format!("/service/{app}/gitWebhook/sync"), json!({}))
        .await
        .expect_error(400, "git_api_url: ");
    assert!(repair.text.contains("169.254.169.254"), "{}", repair.text);
    assert!(!repair.text.contains("ghp_other"));
}

fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    format!(
        "sha256={}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

async fn a_signed_push_deploys_and_an_unsigned_one_does_not<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    let app = application(&t, &fake).await;
    let secret = integration(0).secret_for(app.parse().unwrap());
    let push = |branch: &str, commit: &str| {
        serde_json::to_vec(&json!({"ref": format!("refs/heads/{branch}"), "after": commit}))
            .unwrap()
    };
    let deliver = |body: Vec<u8>, signature: Option<String>, delivery: &str| {
        let mut req = TestRequest::default()
            .method(Method::POST)
            .uri(&format!("/git/webhook/{app}"))
            .insert_header(("Content-Type", "application/json"))
            .insert_header(("X-GitHub-Event", "push"))
            .insert_header(("X-GitHub-Delivery", delivery.to_string()));
        if let Some(sig) = signature {
            req = req.insert_header(("X-Hub-Signature-256", sig));
        }
        t.send(req.set_payload(body).to_request())
    };
    let body = push("main", "c0ffee1");
    deliver(body.clone(), None, "d-0")
        .await
        .expect_error(401, "the delivery's signature does not verify");
    deliver(body.clone(), Some(sign("wrong", &body)), "d-0")
        .await
        .expect(401);
    let status = t.get(&format!("/application/{app}/status")).await.body;
    assert_eq!(status["deployment_requests_count"], 0, "nothing deployed");

    let queued = deliver(body.clone(), Some(sign(secret.expose(), &body)), "d-1")
        .await
        .expect(202);
    assert_eq!(queued.body["result"], "DEPLOYMENT_QUEUED");
    let again = deliver(body.clone(), Some(sign(secret.expose(), &body)), "d-1")
        .await
        .expect(200);
    assert_eq!(
        again.body["result"], "IGNORED",
        "the same delivery deploys once"
    );
    // A signed event other than a push (the provider's ping) is acknowledged and ignored.
    let ping = TestRequest::default()
        .method(Method::POST)
        .uri(&format!("/git/webhook/{app}"))
        .insert_header(("X-GitHub-Event", "ping"))
        .insert_header(("X-GitHub-Delivery", "d-ping"))
        .insert_header(("X-Hub-Signature-256", sign(secret.expose(), &body)))
        .set_payload(body.clone())
        .to_request();
    let ignored = t.send(ping).await.expect(200);
    assert_eq!(ignored.body["result"], "IGNORED");
    assert_eq!(
        ignored.body["reason"],
        "neither a push nor a pull-request event"
    );
    let other = push("feature", "bad");
    let ignored = deliver(other.clone(), Some(sign(secret.expose(), &other)), "d-2")
        .await
        .expect(200);
    assert!(ignored.body["reason"].as_str().unwrap().contains("feature"));

    let done = t.settle(&format!("/application/{app}/status")).await;
    assert_eq!(done["state"], "DEPLOYED");
    let shown = t.get(&format!("/application/{app}")).await.body;
    assert_eq!(shown["git_repository"]["deployed_commit_id"], "c0ffee1");
    let history = t
        .get(&format!("/application/{app}/deploymentHistory"))
        .await
        .body;
    assert_eq!(history["results"].as_array().unwrap().len(), 1);
}

async fn restrictions_decide_which_pushes_deploy<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    let app = application(&t, &fake).await;
    let secret = integration(0).secret_for(app.parse().unwrap());
    let restrictions = format!("/application/{app}/deploymentRestriction");
    t.post(
        &restrictions,
        json!({"mode": "MATCH", "type": "PATH", "value": "api/"}),
    )
    .await
    .expect(201);
    t.post(
        &restrictions,
        json!({"mode": "EXCLUDE", "type": "PATH", "value": "api/docs"}),
    )
    .await
    .expect(201);
    let deliver = |changed: Vec<&str>, delivery: &str| {
        let body = serde_json::to_vec(&json!({
            "ref": "refs/heads/main", "after": format!("c0{delivery}"),
            "commits": [{"id": "1", "added": [], "modified": changed, "removed": []}]
        }))
        .unwrap();
        let req = TestRequest::default()
            .method(Method::POST)
            .uri(&format!("/git/webhook/{app}"))
            .insert_header(("Content-Type", "application/json"))
            .insert_header(("X-GitHub-Event", "push"))
            .insert_header(("X-GitHub-Delivery", delivery.to_string()))
            .insert_header(("X-Hub-Signature-256", sign(secret.expose(), &body)))
            .set_payload(body)
            .to_request();
        t.send(req)
    };
    for (changed, delivery) in [
        (vec!["web/index.html"], "d1"),
        (vec!["api/docs/guide.md", "README.md"], "d2"),
    ] {
        let ignored = deliver(changed, delivery).await.expect(200);
        assert_eq!(ignored.body["result"], "IGNORED");
        assert_eq!(
            ignored.body["reason"],
            "no changed path passes the service's deployment restrictions"
        );
    }
    let status = format!("/application/{app}/status");
    assert_eq!(t.get(&status).await.body["deployment_requests_count"], 0);
    deliver(vec!["api/docs/guide.md", "api/src/main.rs"], "d3")
        .await
        .expect(202);
    t.settle(&status).await;
    let shown = t.get(&format!("/application/{app}")).await.body;
    assert_eq!(shown["git_repository"]["deployed_commit_id"], "c0d3");
}

/// What Capstan knows of the deployed commit comes from pushes: the author of the commit a
/// branch push deployed, and a tag pushed on that commit; a commit deployed by id alone has
/// neither (nothing names them).
async fn pushes_name_the_deployed_commit_s_author_and_tag<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    let app = application(&t, &fake).await;
    let secret = integration(0).secret_for(app.parse().unwrap());
    let deliver = |body: Value, delivery: &str| {
        let body = serde_json::to_vec(&body).unwrap();
        let req = TestRequest::default()
            .method(Method::POST)
            .uri(&format!("/git/webhook/{app}"))
            .insert_header(("Content-Type", "application/json"))
            .insert_header(("X-GitHub-Event", "push"))
            .insert_header(("X-GitHub-Delivery", delivery.to_string()))
            .insert_header(("X-Hub-Signature-256", sign(secret.expose(), &body)))
            .set_payload(body)
            .to_request();
        t.send(req)
    };
    let status = format!("/application/{app}/status");
    let repository =
        || async { t.get(&format!("/application/{app}")).await.body["git_repository"].clone() };

    deliver(
        json!({"ref": "refs/heads/main", "after": "c0ffee1",
               "head_commit": {"id": "c0ffee1", "author": {"name": "Ada Lovelace"}}}),
        "d-1",
    )
    .await
    .expect(202);
    t.settle(&status).await;
    let repo = repository().await;
    assert_eq!(repo["deployed_commit_id"], "c0ffee1");
    assert_eq!(repo["deployed_commit_contributor"], "Ada Lovelace");
    assert!(repo.get("deployed_commit_tag").is_none(), "{repo}");

    let other = deliver(json!({"ref": "refs/tags/v9", "after": "0ther"}), "d-2")
        .await
        .expect(200);
    assert_eq!(other.body["result"], "IGNORED", "{}", other.text);
    let tagged = deliver(
        json!({"ref": "refs/tags/v1.0.1", "after": "7a9", "head_commit": {"id": "c0ffee1"}}),
        "d-3",
    )
    .await
    .expect(200);
    assert_eq!(tagged.body["result"], "RECORDED", "{}", tagged.text);
    let repo = repository().await;
    assert_eq!(repo["deployed_commit_tag"], "v1.0.1");
    assert_eq!(repo["deployed_commit_contributor"], "Ada Lovelace");
    assert_eq!(
        t.get(&status).await.body["deployment_requests_count"],
        0,
        "a tag deploys nothing"
    );

    // Deployed again, the commit keeps what was known of it; another commit starts afresh.
    t.post(&format!("/application/{app}/redeploy"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    assert_eq!(repository().await["deployed_commit_tag"], "v1.0.1");
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "d00d"}),
    )
    .await
    .expect(202);
    t.settle(&status).await;
    let repo = repository().await;
    assert_eq!(repo["deployed_commit_id"], "d00d");
    assert!(repo.get("deployed_commit_contributor").is_none(), "{repo}");
    assert!(repo.get("deployed_commit_tag").is_none(), "{repo}");
}

#[actix_rt::test]
async fn a_status_is_reused_briefly_then_asked_again() {
    let b = common::sqlite()
        .await
        .unwrap()
        .map(|c| c.with_git(integration(60)));
    let t = common::setup(b).await;
    let fake = MockServer::start().await;
    let app = application(&t, &fake).await;
    hooks(&fake, json!([])).await;
    for _ in 0..3 {
        let s = t
            .get(&format!("/service/{app}/gitWebhookStatus"))
            .await
            .expect(200);
        assert_eq!(s.body["status"], "NOT_CONFIGURED");
    }
    assert_eq!(
        fake.received_requests().await.unwrap().len(),
        1,
        "one provider call"
    );
}

/// A delivery's headers and JSON body.
type Signed = (Vec<(&'static str, String)>, Value);

/// One provider's side of the loop, as the fake serves it and the receiver is sent it.
struct Case {
    token_type: &'static str,
    kind: &'static str,
    /// The create body, given the git repository member.
    body: fn(Value) -> Value,
    repo_url: &'static str,
    hooks_path: &'static str,
    /// The provider's hook listing with these events aimed at `url`.
    listing: fn(&str, &[&str]) -> Value,
    required: &'static [&'static str],
    /// A signed push of `commit` to main: headers and body.
    push: fn(&str, &str, &str) -> Signed,
}

/// NOT_CONFIGURED -> sync -> ACTIVE -> MISCONFIGURED, then a signed push deploys its commit
/// and an unsigned one is refused.
async fn provider_loop<S: App>(t: T<S>, case: Case) {
    let fake = MockServer::start().await;
    let env = t.hierarchy().await.2;
    let token = t
        .post(
            &format!("/organization/{}/gitToken", t.org),
            json!({"name": "git", "type": case.token_type, "token": "tok-1", "git_api_url": fake.uri()}),
        )
        .await
        .expect(201)
        .id();
    let git = json!({"url": case.repo_url, "branch": "main", "git_token_id": token});
    let id = t
        .post(
            &format!("/environment/{env}/{}", case.kind),
            (case.body)(git),
        )
        .await
        .expect(201)
        .id();
    let status_path = format!("/service/{id}/gitWebhookStatus");
    let receiver = format!("{PUBLIC}/git/webhook/{id}");
    let listing = |events: &[&str]| (case.listing)(&receiver, events);
    let serve = |body: Value| {
        let fake = &fake;
        async move {
            fake.reset().await;
            Mock::given(method("GET"))
                .and(path(case.hooks_path))
                .respond_with(ResponseTemplate::new(200).set_body_json(body))
                .mount(fake)
                .await;
        }
    };

    // A hook aimed elsewhere, even with every event, is not the service's.
    serve((case.listing)(
        "https://elsewhere.example/hook",
        case.required,
    ))
    .await;
    let s = t.get(&status_path).await.expect(200).body;
    assert_eq!(
        s,
        json!({"status": "NOT_CONFIGURED", "provider": case.token_type})
    );

    serve((case.listing)(
        "https://elsewhere.example/hook",
        case.required,
    ))
    .await;
    Mock::given(method("POST"))
        .and(path(case.hooks_path))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1, "uuid": "{1}"})))
        .expect(1)
        .mount(&fake)
        .await;
    t.post(&format!("/service/{id}/gitWebhook/sync"), json!({}))
        .await
        .expect(200);
    let sent = fake.received_requests().await.unwrap();
    let created = sent.iter().find(|r| r.method.as_str() == "POST").unwrap();
    let created = String::from_utf8_lossy(&created.body).to_string();
    assert!(created.contains(&receiver), "{created}");

    serve(listing(case.required)).await;
    let s = t.get(&status_path).await.expect(200).body;
    assert_eq!(s, json!({"status": "ACTIVE", "provider": case.token_type}));

    let (last, rest) = case.required.split_last().unwrap();
    serve(listing(rest)).await;
    let s = t.get(&status_path).await.expect(200).body;
    assert_eq!(
        s,
        json!({"status": "MISCONFIGURED", "provider": case.token_type, "missing_events": [last]})
    );

    let secret = integration(0).secret_for(id.parse().unwrap());
    let deliver = |headers: Vec<(&'static str, String)>, body: &Value| {
        let mut req = TestRequest::default()
            .method(Method::POST)
            .uri(&format!("/git/webhook/{id}"))
            .insert_header(("Content-Type", "application/json"));
        for h in headers {
            req = req.insert_header(h);
        }
        t.send(
            req.set_payload(serde_json::to_vec(body).unwrap())
                .to_request(),
        )
    };
    let (headers, body) = (case.push)("wrong-secret", "d-1", "c0ffee2");
    deliver(headers, &body).await.expect(401);
    let (headers, body) = (case.push)(secret.expose(), "d-1", "c0ffee2");
    let queued = deliver(headers.clone(), &body).await.expect(202);
    assert_eq!(queued.body["result"], "DEPLOYMENT_QUEUED");
    deliver(headers, &body).await.expect(200);
    let done = t.settle(&format!("/{}/{id}/status", case.kind)).await;
    assert_eq!(done["state"], "DEPLOYED");
    let history = t
        .get(&format!("/{}/{id}/deploymentHistory", case.kind))
        .await
        .body;
    assert_eq!(
        history["results"].as_array().unwrap().len(),
        1,
        "deployed once"
    );
    let shown = t.get(&format!("/{}/{id}", case.kind)).await.body;
    assert!(
        shown.to_string().contains("c0ffee2"),
        "the pushed commit is the deployed one: {shown}"
    );
}

fn hub_signature(secret: &str, body: &Value) -> String {
    sign(secret, &serde_json::to_vec(body).unwrap())
}

async fn hostb_job_on_a_self_hosted_instance<S: App>(t: T<S>) {
    provider_loop(
        t,
        Case {
            token_type: "HOSTB",
            kind: "job",
            body: |git| {
                json!({"name": "cron", "auto_deploy": true,
                       "schedule": {"cronjob": {"scheduled_at": "@daily"}},
                       "source": {"docker": {"git_repository": git}}})
            },
            // No "gitlab" in the host: the token's type decides the provider.
            repo_url: "https://git.acme.internal/acme/api",
            hooks_path: "/projects/acme%2Fapi/hooks",
            listing: |url, events| {
                let mut hook = json!({"id": 3, "url": url});
                for e in [
                    "push_events",
                    "merge_requests_events",
                    "note_events",
                    "tag_push_events",
                ] {
                    hook[e] = json!(events.contains(&e));
                }
                json!([hook])
            },
            required: &["push_events", "merge_requests_events", "note_events"],
            push: |secret, delivery, commit| {
                (
                    vec![
                        ("X-Gitlab-Token", secret.to_string()),
                        ("X-Gitlab-Event", "Push Hook".to_string()),
                        ("X-Gitlab-Event-UUID", delivery.to_string()),
                    ],
                    json!({"object_kind": "push", "ref": "refs/heads/main", "checkout_sha": commit}),
                )
            },
        },
    )
    .await;
}

async fn hostc_terraform_service<S: App>(t: T<S>) {
    provider_loop(
        t,
        Case {
            token_type: "HOSTC",
            kind: "terraform",
            body: |git| {
                json!({"name": "infra", "auto_deploy": true,
                       "terraform_files_source": {"git_repository": git}})
            },
            repo_url: "https://bitbucket.org/acme/api",
            hooks_path: "/repositories/acme/api/hooks",
            listing: |url, events| json!({"values": [{"uuid": "{h-1}", "url": url, "events": events}]}),
            required: &[
                "repo:push",
                "pullrequest:created",
                "pullrequest:updated",
                "pullrequest:fulfilled",
                "pullrequest:rejected",
                "pullrequest:comment_created",
            ],
            push: |secret, delivery, commit| {
                let body = json!({"push": {"changes": [
                    {"new": {"type": "branch", "name": "main", "target": {"hash": commit}}}
                ]}});
                (
                    vec![
                        ("X-Hub-Signature", hub_signature(secret, &body)),
                        ("X-Event-Key", "repo:push".to_string()),
                        ("X-Request-UUID", delivery.to_string()),
                    ],
                    body,
                )
            },
        },
    )
    .await;
}

async fn hosta_helm_chart_from_git<S: App>(t: T<S>) {
    provider_loop(
        t,
        Case {
            token_type: "HOSTA",
            kind: "helm",
            body: |git| {
                json!({"name": "chart", "source": {"git_repository": git}, "arguments": [],
                       "auto_deploy": true, "values_override": {}})
            },
            repo_url: "https://github.com/acme/charts",
            hooks_path: "/repos/acme/charts/hooks",
            listing: |url, events| json!([{"id": 9, "config": {"url": url}, "events": events}]),
            required: &["push", "pull_request", "issue_comment"],
            push: |secret, delivery, commit| {
                let body = json!({"ref": "refs/heads/main", "after": commit});
                (
                    vec![
                        ("X-Hub-Signature-256", hub_signature(secret, &body)),
                        ("X-GitHub-Event", "push".to_string()),
                        ("X-GitHub-Delivery", delivery.to_string()),
                    ],
                    body,
                )
            },
        },
    )
    .await;
}
