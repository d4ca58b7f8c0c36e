//! Organization webhooks on both backends: their records, and the deliveries a deployment
//! makes to a local receiver: signed both ways, retried after 500s, logged, filtered.

use crate::common;

use base64::Engine as _;
use common::{App, T};
use domain::auth::Role;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::time::Duration;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

http_suite!(
    webhooks_are_kept_and_their_secret_never_shown,
    a_deployment_is_delivered_signed_and_retried_after_failures,
    webhooks_hear_only_what_they_subscribed_to,
    failures_and_cancels_are_delivered,
    a_delivery_that_keeps_failing_is_given_up
);

const SECRET: &str = "receiver-shared-secret";

fn hook_body(url: &str) -> Value {
    json!({
        "kind": "STANDARD",
        "target_url": url,
        "target_secret": SECRET,
        "description": "deployments to the receiver",
        "enabled": true,
        "events": ["DEPLOYMENT_STARTED", "DEPLOYMENT_SUCCESSFUL", "DEPLOYMENT_FAILURE", "DEPLOYMENT_CANCELLED"],
        "project_names_filter": ["SHO*"],
        "environment_types_filter": ["PRODUCTION"]
    })
}

/// The requests `server` received once `enough` says so (at most 15 s).
async fn received(server: &MockServer, enough: impl Fn(&[Request]) -> bool) -> Vec<Request> {
    let seen = std::cell::RefCell::new(Vec::new());
    common::eventually(
        Duration::from_secs(15),
        || {
            let got = seen.borrow();
            let bodies: Vec<Value> = got.iter().map(body).collect();
            format!("the receiver got {} requests: {bodies:?}", got.len())
        },
        async || {
            let got = server.received_requests().await.unwrap();
            let done = enough(&got);
            *seen.borrow_mut() = got.clone();
            done.then_some(got)
        },
    )
    .await
}

fn body(r: &Request) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn header<'a>(r: &'a Request, name: &str) -> &'a str {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

fn types(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .map(|r| body(r)["type"].as_str().unwrap().to_string())
        .collect()
}

/// The Standard Webhooks check a receiver makes, written from the specification.
fn verify(r: &Request) {
    let id = header(r, "webhook-id");
    let timestamp = header(r, "webhook-timestamp");
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(&r.body);
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    let signatures: Vec<&str> = header(r, "webhook-signature").split(' ').collect();
    assert!(
        signatures.contains(&format!("v1,{expected}").as_str()),
        "{signatures:?}"
    );
    assert_eq!(header(r, "qovery-signature"), SECRET);
    let age = time::OffsetDateTime::now_utc().unix_timestamp() - timestamp.parse::<i64>().unwrap();
    assert!(
        (0..60).contains(&age),
        "timestamp {timestamp} is {age} s old"
    );
}

async fn webhooks_are_kept_and_their_secret_never_shown<S: App>(t: T<S>) {
    let org = t.org.clone();
    let path = format!("/organization/{org}/webhook");
    let made = t
        .post(&path, hook_body("https://hooks.example.com/in"))
        .await
        .expect(201);
    assert!(!made.text.contains(SECRET), "{}", made.text);
    assert_eq!(made.body["target_secret_set"], true);
    assert_eq!(made.body["kind"], "STANDARD");
    assert_eq!(made.body["project_names_filter"], json!(["SHO*"]));
    assert_eq!(made.body["environment_types_filter"], json!(["PRODUCTION"]));
    let id = made.id();
    let one = t.get(&format!("{path}/{id}")).await.expect(200);
    assert_eq!(one.body, made.body);
    let listed = t.get(&path).await.expect(200);
    assert_eq!(listed.body["results"], json!([made.body]));
    // An edit without a secret keeps it, as long as the secret goes where it went; a new
    // address takes the secret again (given by someone who has it); an empty one removes it.
    let mut edit = hook_body("https://hooks.example.com/in");
    edit.as_object_mut().unwrap().remove("target_secret");
    edit["kind"] = json!("SLACK");
    edit["enabled"] = json!(false);
    let edited = t
        .put(&format!("{path}/{id}"), edit.clone())
        .await
        .expect(200);
    assert_eq!(edited.body["target_secret_set"], true);
    assert_eq!(edited.body["kind"], "SLACK");
    assert_eq!(edited.body["enabled"], false);
    edit["target_url"] = json!("https://collector.evil.example/in");
    t.put(&format!("{path}/{id}"), edit.clone())
        .await
        .expect_error(400, "target_secret: is required when target_url changes");
    let kept = t.get(&format!("{path}/{id}")).await.expect(200);
    assert_eq!(kept.body["target_url"], "https://hooks.example.com/in");
    edit["target_url"] = json!("https://hooks.example.com/other");
    edit["target_secret"] = json!(SECRET);
    let moved = t
        .put(&format!("{path}/{id}"), edit.clone())
        .await
        .expect(200);
    assert_eq!(moved.body["target_secret_set"], true);
    assert_eq!(moved.body["target_url"], "https://hooks.example.com/other");
    edit["target_secret"] = json!("");
    let cleared = t.put(&format!("{path}/{id}"), edit).await.expect(200);
    assert_eq!(cleared.body["target_secret_set"], false);
    // What a request must hold.
    for (change, field) in [
        (json!({"target_url": "ftp://x"}), "target_url"),
        (
            json!({"target_url": "https://u:p@hooks.example.com"}),
            "target_url",
        ),
        (json!({"events": []}), "events"),
        (json!({"events": ["DEPLOYMENT_MAYBE"]}), "events"),
        (json!({"kind": "EMAIL"}), "kind"),
        (
            json!({"project_names_filter": [" "]}),
            "project_names_filter[0]",
        ),
        (
            json!({"environment_types_filter": ["NOPE"]}),
            "environment_types_filter",
        ),
    ] {
        let mut b = hook_body("https://hooks.example.com/in");
        for (k, v) in change.as_object().unwrap() {
            b[k] = v.clone();
        }
        t.post(&path, b).await.expect_error(400, field);
    }
    // Roles: VIEWER reads, DEVOPS does not manage webhooks (ADMIN does).
    let viewer = t.token_with_role(Role::Viewer).await;
    let devops = t.token_with_role(Role::Devops).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::GET,
            &format!("{path}/{id}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    for token in [&viewer, &devops] {
        let r = t
            .call(
                Some(token),
                actix_web::http::Method::POST,
                &path,
                Some(hook_body("https://hooks.example.com/in")),
            )
            .await;
        assert_eq!(r.status, 403, "{}", r.text);
        let r = t
            .call(
                Some(token),
                actix_web::http::Method::DELETE,
                &format!("{path}/{id}"),
                None,
            )
            .await;
        assert_eq!(r.status, 403, "{}", r.text);
    }
    t.get(&format!("{path}/{}", uuid::Uuid::new_v4()))
        .await
        .expect_error(404, "webhook");
    t.get(&format!("{path}/not-an-id"))
        .await
        .expect_error(400, "webhookId");
    t.get(&format!("{path}/{id}/event")).await.expect(200);
    t.delete(&format!("{path}/{id}")).await.expect(204);
    t.get(&format!("{path}/{id}")).await.expect(404);
    t.get(&format!("{path}/{id}/event")).await.expect(404);
}

async fn a_deployment_is_delivered_signed_and_retried_after_failures<S: App>(t: T<S>) {
    let server = MockServer::start().await;
    // The receiver fails twice, then takes everything.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("down for a moment"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_string("thanks"))
        .mount(&server)
        .await;
    let org = t.org.clone();
    let hook = t
        .post(
            &format!("/organization/{org}/webhook"),
            hook_body(&server.uri()),
        )
        .await
        .expect(201)
        .id();
    let (_, project, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    let deployed = t
        .post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let request_id = deployed.body["deployment_request_id"].clone();
    t.settle(&format!("/container/{container}/status")).await;
    // Two failed attempts, then both events, each once delivered.
    let got = received(&server, |r| {
        let ok: Vec<_> = r.iter().skip(2).collect();
        ok.len() >= 2
    })
    .await;
    actix_rt::time::sleep(Duration::from_millis(500)).await;
    let got_now = server.received_requests().await.unwrap();
    assert_eq!(got_now.len(), got.len(), "nothing sent after it was taken");
    for r in &got {
        verify(r);
        assert_eq!(header(r, "content-type"), "application/json");
    }
    let delivered = &got[2..];
    let mut seen = types(delivered);
    seen.sort();
    assert_eq!(seen, ["DEPLOYMENT_STARTED", "DEPLOYMENT_SUCCESSFUL"]);
    // A retry carries the id of its delivery: the receiver drops what it has.
    let ids: std::collections::HashSet<&str> =
        got.iter().map(|r| header(r, "webhook-id")).collect();
    assert_eq!(ids.len(), 2, "two deliveries, whatever their attempts");
    for r in delivered {
        let b = body(r);
        assert_eq!(b["id"], header(r, "webhook-id"));
        assert_eq!(b["project_id"], project);
        assert_eq!(b["project_name"], "shop");
        assert_eq!(b["environment_id"], env);
        assert_eq!(b["environment_type"], "PRODUCTION");
        assert_eq!(b["service_id"], container);
        assert_eq!(b["service_name"], "web");
        assert_eq!(b["service_type"], "CONTAINER");
        assert_eq!(b["action"], "DEPLOY");
        assert_eq!(b["deployment_request_id"], request_id, "{b}");
        assert!(b["triggered_by"].as_str().unwrap().starts_with("token:"));
    }
    // The delivery log: every attempt, with what came back.
    let log = t
        .get(&format!("/organization/{org}/webhook/{hook}/event"))
        .await
        .expect(200);
    let attempts = log.body["results"].as_array().unwrap();
    assert_eq!(attempts.len(), 4, "{}", log.text);
    let codes: Vec<i64> = attempts
        .iter()
        .map(|a| a["target_response_status_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes.iter().filter(|c| **c == 500).count(), 2, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 2, "{codes:?}");
    for a in attempts {
        assert_eq!(a["kind"], "STANDARD");
        assert_eq!(
            a["target_url_used"].as_str().unwrap().trim_end_matches('/'),
            server.uri()
        );
        assert!(a["request"]["type"].is_string());
        assert_eq!(a["request"]["type"], a["matched_event"]);
        assert!(a["duration_ms"].as_i64().unwrap() >= 0);
        let body = a["target_response_body"].as_str().unwrap();
        assert!(body == "thanks" || body == "down for a moment", "{body}");
        assert!(!a.to_string().contains(SECRET));
    }
    // Paged as every list is (API.md).
    let page = t
        .get(&format!(
            "/organization/{org}/webhook/{hook}/event?page=2&page_size=3"
        ))
        .await
        .expect(200);
    assert_eq!(page.body["results"].as_array().unwrap().len(), 1);
    assert_eq!(page.body["pagination"]["total_count"], 4);
    let retried: Vec<&Value> = attempts.iter().filter(|a| a["attempt"] == 2).collect();
    assert!(!retried.is_empty(), "{}", log.text);
    let metrics = t
        .call(None, actix_web::http::Method::GET, "/metrics", None)
        .await;
    assert!(
        metrics
            .text
            .contains("capstan_webhook_deliveries_total{outcome=\"delivered\"} 2"),
        "{}",
        metrics.text
    );
    assert!(
        metrics
            .text
            .contains("capstan_webhook_deliveries_total{outcome=\"retrying\"} 2"),
        "{}",
        metrics.text
    );
}

async fn webhooks_hear_only_what_they_subscribed_to<S: App>(t: T<S>) {
    let org = t.org.clone();
    let path = format!("/organization/{org}/webhook");
    let hearing = MockServer::start().await;
    let deaf = MockServer::start().await;
    for server in [&hearing, &deaf] {
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(204))
            .mount(server)
            .await;
    }
    let mut only_success = hook_body(&hearing.uri());
    only_success["events"] = json!(["DEPLOYMENT_SUCCESSFUL"]);
    only_success["project_names_filter"] = json!(["s?op", "other"]);
    only_success["environment_types_filter"] = json!([]);
    t.post(&path, only_success).await.expect(201);
    let mut other_project = hook_body(&deaf.uri());
    other_project["project_names_filter"] = json!(["billing*"]);
    t.post(&path, other_project).await.expect(201);
    let mut other_mode = hook_body(&deaf.uri());
    other_mode["environment_types_filter"] = json!(["DEVELOPMENT", "PREVIEW"]);
    t.post(&path, other_mode).await.expect(201);
    let mut disabled = hook_body(&deaf.uri());
    disabled["enabled"] = json!(false);
    t.post(&path, disabled).await.expect(201);
    let (_, _, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let got = received(&hearing, |r| !r.is_empty()).await;
    assert_eq!(types(&got), ["DEPLOYMENT_SUCCESSFUL"]);
    // The deaf receivers' deliveries would have been routed with the same events.
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    assert!(deaf.received_requests().await.unwrap().is_empty());
    assert_eq!(hearing.received_requests().await.unwrap().len(), 1);
}

async fn failures_and_cancels_are_delivered<S: App>(t: T<S>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let org = t.org.clone();
    let mut hook = hook_body(&server.uri());
    hook["events"] = json!(["DEPLOYMENT_FAILURE", "DEPLOYMENT_CANCELLED"]);
    t.post(&format!("/organization/{org}/webhook"), hook)
        .await
        .expect(201);
    let (_, _, env) = t.hierarchy().await;
    let failing = t.container(&env, "failing").await;
    t.post(
        &format!("/container/{failing}/deploy"),
        json!({"image_tag": "capstan-fail-deploy"}),
    )
    .await
    .expect(202);
    // Waits behind the failing one (one request runs per environment), and is canceled.
    let waiting = t.container(&env, "waiting").await;
    let queued = t
        .post(&format!("/container/{waiting}/deploy"), json!({}))
        .await
        .expect(202);
    let request = queued.body["deployment_request_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.post(
        &format!("/deploymentQueue/{request}/cancelDeployment"),
        json!({}),
    )
    .await
    .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    let got = received(&server, |r| r.len() >= 2).await;
    let mut seen: Vec<(String, String)> = got
        .iter()
        .map(|r| {
            let b = body(r);
            (
                b["type"].as_str().unwrap().into(),
                b["service_name"].as_str().unwrap().into(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("DEPLOYMENT_CANCELLED".to_string(), "waiting".to_string()),
            ("DEPLOYMENT_FAILURE".to_string(), "failing".to_string())
        ]
    );
    let failure = got
        .iter()
        .map(body)
        .find(|b| b["type"] == "DEPLOYMENT_FAILURE")
        .unwrap();
    assert_eq!(failure["status"], "ERROR");
    assert!(
        failure["message"].as_str().unwrap().contains("fail"),
        "{failure}"
    );
}

async fn a_delivery_that_keeps_failing_is_given_up<S: App>(t: T<S>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let org = t.org.clone();
    let mut only_success = hook_body(&server.uri());
    only_success["events"] = json!(["DEPLOYMENT_SUCCESSFUL"]);
    let hook = t
        .post(&format!("/organization/{org}/webhook"), only_success)
        .await
        .expect(201)
        .id();
    let (_, _, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    // Retried for at most 3 s (the harness's policy), then left.
    let metrics_say_failed = || async {
        let m = t
            .call(None, actix_web::http::Method::GET, "/metrics", None)
            .await;
        m.text
            .contains("capstan_webhook_deliveries_total{outcome=\"failed\"} 1")
    };
    common::eventually(
        Duration::from_secs(15),
        || "the delivery was never given up".to_string(),
        async || metrics_say_failed().await.then_some(()),
    )
    .await;
    let tried = server.received_requests().await.unwrap().len();
    assert!(tried >= 3, "retried: {tried} attempts");
    actix_rt::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        tried,
        "nothing sent once given up"
    );
    let log = t
        .get(&format!("/organization/{org}/webhook/{hook}/event"))
        .await
        .expect(200);
    let attempts = log.body["results"].as_array().unwrap();
    assert_eq!(attempts.len(), tried);
    assert!(attempts
        .iter()
        .all(|a| a["target_response_status_code"] == 503));
}
