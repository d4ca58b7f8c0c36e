#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Endpoint 15, webhook repair and the push receiver, against a local GitHub-compatible fake.

mod common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{App, T};
use domain::services::GitIntegration;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::sync::Arc;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const PUBLIC: &str = "https://capstan.example";

fn integration(ttl_seconds: i64) -> GitIntegration {
    GitIntegration::new(
        Arc::new(git::HttpGitHosting::new(std::time::Duration::from_millis(500)).unwrap()),
        PUBLIC,
        domain::secret::Secret::new("test-signing-key"),
        time::Duration::seconds(ttl_seconds),
    )
}

macro_rules! with_git {
    ($ttl:expr; $($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let b = crate::common::sqlite().await.unwrap().map(|c| c.with_git(super::integration($ttl)));
                    super::$name(crate::common::setup(b).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(b) = crate::common::postgres().await else { return };
                    let b = b.map(|c| c.with_git(super::integration($ttl)));
                    super::$name(crate::common::setup(b).await).await;
                }
            )*
        }
    };
}

with_git!(0;
    status_follows_the_hook_on_the_provider,
    a_signed_push_deploys_and_an_unsigned_one_does_not,
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
            json!({"events": ["push", "pull_request"], "config": {"url": receiver}}),
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
        json!([{"id": 9, "config": {"url": receiver}, "events": ["push", "pull_request"]}]),
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
        json!({"status": "MISCONFIGURED", "provider": "HOSTA", "missing_events": ["pull_request"]})
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
