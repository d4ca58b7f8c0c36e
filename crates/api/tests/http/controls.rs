//! The stand-in's controls over HTTP, on both databases: their gate and token, reset, fault
//! rules, engine holds and failures, and the manual clock.

use crate::common;

use actix_web::http::Method;
use capstan_api::controls::Controls;
use capstan_api::limits::RateLimiter;
use common::{App, Backend, T};
use domain::clock::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;

const CONTROLS_TOKEN: &str = "controls-token-for-tests";

/// The app with its controls on, its clock manual, and `per_hour` requests a principal.
async fn controlled(backend: Backend, per_hour: u32) -> T<impl common::App> {
    let clock = Arc::new(ManualClock::default());
    let backend = backend.map(|c| c.with_clock(clock.clone()));
    common::setup_with(backend, move |s| {
        s.with_clock(clock.clone())
            .with_limiter(RateLimiter::local(per_hour))
            .with_controls(Controls::new(CONTROLS_TOKEN).with_clock(clock))
    })
    .await
}

macro_rules! controls_suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let backend = crate::common::sqlite().await.unwrap();
                    super::$name(super::controlled(backend, 1_000_000).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(backend) = crate::common::postgres().await else { return };
                    super::$name(super::controlled(backend, 1_000_000).await).await;
                }
            )*
        }
        mod memory {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let backend = crate::common::sqlite_memory().await.unwrap();
                    super::$name(super::controlled(backend, 1_000_000).await).await;
                }
            )*
        }
    };
}

controls_suite!(
    controls_answer_only_their_own_token,
    a_reset_empties_everything_or_keeps_the_tokens,
    a_reset_during_a_running_deployment_leaves_nothing_running,
    a_fault_rule_applies_only_where_it_matches,
    fault_rules_are_listed_removed_and_checked,
    a_held_deployment_resumes_on_release,
    a_failed_step_fails_the_next_deployment_once,
    a_deployment_log_names_its_steps_and_masks_the_services_secrets,
    engine_controls_check_what_they_are_given,
    the_manual_clock_dates_records,
    a_restored_snapshot_answers_exactly_as_before,
    snapshots_are_listed_removed_and_checked,
    a_seeded_world_serves_and_its_export_reproduces_it,
    a_bad_fixture_is_refused_naming_the_record,
    every_documented_control_is_served_at_the_root_only,
    a_deployment_rule_acts_when_the_clock_is_moved_past_its_hour,
    a_deployment_can_be_held_before_its_first_step,
    a_fixture_may_use_the_api_s_own_words,
);

mod off {
    use super::*;
    http_suite!(controls_are_not_found_when_off);
}

/// The rule that touched an answer.
fn fault_of(r: &common::Resp) -> Option<&str> {
    r.headers
        .get("x-capstan-fault")
        .and_then(|v| v.to_str().ok())
}

async fn control<S: App>(
    t: &T<S>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> common::Resp {
    t.call(Some(CONTROLS_TOKEN), method, path, body).await
}

async fn a_deployment_rule_acts_when_the_clock_is_moved_past_its_hour<S: App>(t: T<S>) {
    // A Monday at noon; the rule stops the environment at 19:00 on weekdays.
    control(
        &t,
        Method::POST,
        "/_capstan/clock",
        Some(json!({"now": "2031-06-02T12:00:00Z"})),
    )
    .await
    .expect(200);
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    t.put(
        &format!("/environment/{env}/deploymentRule/{env}"),
        json!({"auto_stop": true, "timezone": "UTC", "start_time": "08:00", "stop_time": "19:00",
               "weekdays": ["MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY"]}),
    )
    .await
    .expect(200);
    control(
        &t,
        Method::POST,
        "/_capstan/clock",
        Some(json!({"advance_seconds": 7 * 3600 + 1})),
    )
    .await
    .expect(200);
    // The server's own scheduler sees the hour pass.
    wait_for_state(&t, &format!("/container/{c}/status"), "STOPPED").await;
}

async fn every_documented_control_is_served_at_the_root_only<S: App>(t: T<S>) {
    let doc = t
        .call(None, Method::GET, "/openapi.json", None)
        .await
        .expect(200)
        .body;
    let mut controls = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(rest) = path.strip_prefix("/_capstan/") else {
            continue;
        };
        for (method, operation) in item.as_object().unwrap() {
            assert_eq!(operation["tags"], json!(["controls"]), "{method} {path}");
            let method: Method = method.to_uppercase().parse().unwrap();
            let filled = format!(
                "/_capstan/{}",
                rest.replace("{id}", &uuid::Uuid::new_v4().to_string())
                    .replace("{name}", "absent")
            );
            let served = control(&t, method.clone(), &filled, None).await;
            let message = served.body["message"].as_str().unwrap_or_default();
            assert!(
                served.status != 405 && !message.starts_with("no route"),
                "{method} {filled}: {}",
                served.text
            );
            control(&t, method.clone(), &format!("/v1{filled}"), None)
                .await
                .expect_error(404, "no route");
            controls += 1;
        }
    }
    assert!(controls >= 14, "{controls} controls documented");
}

async fn controls_are_not_found_when_off<S: App>(t: T<S>) {
    for (method, path) in [
        (Method::POST, "/_capstan/reset"),
        (Method::GET, "/_capstan/reset"),
        (Method::GET, "/_capstan/faults"),
        (Method::POST, "/_capstan/engine/hold"),
        (Method::GET, "/_capstan/clock"),
        (Method::PUT, "/_capstan/clock"),
    ] {
        t.call(Some(&t.token.clone()), method, path, Some(json!({})))
            .await
            .expect_error(404, "no route for");
    }
    t.get(&format!("/organization/{}", t.org)).await.expect(200);
}

async fn controls_answer_only_their_own_token<S: App>(t: T<S>) {
    let admin = t.token.clone();
    for token in [Some(admin.as_str()), None, Some("controls-token-for-test")] {
        t.call(token, Method::POST, "/_capstan/reset", None)
            .await
            .expect_error(401, "the controls take");
    }
    t.get(&format!("/organization/{}", t.org)).await.expect(200);
    t.call(
        Some(CONTROLS_TOKEN),
        Method::GET,
        &format!("/organization/{}", t.org),
        None,
    )
    .await
    .expect(401);
    let bearer = actix_web::test::TestRequest::post()
        .uri("/_capstan/reset")
        .insert_header(("Authorization", format!("Bearer {CONTROLS_TOKEN}")))
        .to_request();
    t.send(bearer).await.expect(204);
    control(
        &t,
        Method::POST,
        "/_capstan/reset",
        Some(json!({"keep_tokenz": true})),
    )
    .await
    .expect_error(400, "keep_tokenz: unknown field");
}

async fn a_reset_empties_everything_or_keeps_the_tokens<S: App>(t: T<S>) {
    let (cluster, project, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    t.post(
        &format!("/container/{c}/environmentVariable"),
        json!({"key": "A", "value": "1"}),
    )
    .await
    .expect(201);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;

    control(
        &t,
        Method::POST,
        "/_capstan/reset",
        Some(json!({"keep_tokens": true})),
    )
    .await
    .expect(204);
    let org = t.org.clone();
    t.get(&format!("/organization/{org}")).await.expect(200);
    let projects = t
        .get(&format!("/organization/{org}/project"))
        .await
        .expect(200);
    assert_eq!(projects.body["results"], json!([]), "{}", projects.text);
    let clusters = t
        .get(&format!("/organization/{org}/cluster"))
        .await
        .expect(200);
    assert_eq!(clusters.body["results"], json!([]), "{}", clusters.text);
    for gone in [
        format!("/organization/{org}/cluster/{cluster}"),
        format!("/project/{project}"),
        format!("/environment/{env}"),
        format!("/container/{c}"),
    ] {
        t.get(&gone).await.expect(404);
    }
    let events = t
        .get(&format!("/organization/{org}/events"))
        .await
        .expect(200);
    assert_eq!(events.body["events"], json!([]), "{}", events.text);
    // The organization works as a new one: the same names can be taken again.
    let (_, _, env) = t.hierarchy().await;
    t.container(&env, "web").await;

    // Without keep_tokens, nothing is left: the token is unknown.
    control(&t, Method::POST, "/_capstan/reset", None)
        .await
        .expect(204);
    t.get(&format!("/organization/{org}"))
        .await
        .expect_error(401, "");
    t.get("/organization").await.expect(401);
}

async fn a_reset_during_a_running_deployment_leaves_nothing_running<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    held_at_deploying(&t, &c, "deploy").await;
    assert_eq!(t.capstan.queue_depth().await.unwrap().running, 1);

    control(
        &t,
        Method::POST,
        "/_capstan/reset",
        Some(json!({"keep_tokens": true})),
    )
    .await
    .expect(204);
    // The held worker finds its claim gone and writes nothing back, now or later.
    for _ in 0..3 {
        let depth = t.capstan.queue_depth().await.unwrap();
        assert_eq!((depth.queued, depth.running), (0, 0));
        t.get(&format!("/container/{c}/status")).await.expect(404);
        actix_rt::time::sleep(std::time::Duration::from_millis(600)).await;
    }
    // The engine is free for new work.
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
}

/// Holds the container's next deployment at DEPLOYING, asks for `action`, and waits for it
/// to be held there.
async fn held_at_deploying<S: App>(t: &T<S>, c: &str, action: &str) {
    control(
        t,
        Method::POST,
        "/_capstan/engine/hold",
        Some(json!({"service_id": c, "state": "DEPLOYING"})),
    )
    .await
    .expect(204);
    t.post(&format!("/container/{c}/{action}"), json!({}))
        .await
        .expect(202);
    wait_for_state(t, &format!("/container/{c}/status"), "DEPLOYING").await;
}

async fn wait_for_state<S: App>(t: &T<S>, status_path: &str, state: &str) {
    let seen = std::cell::RefCell::new(String::new());
    common::eventually(
        common::WITHIN,
        || format!("never reached {state}: {}", seen.borrow()),
        async || {
            let status = t.get(status_path).await.expect(200);
            let there = status.body["state"] == state;
            *seen.borrow_mut() = status.text;
            there.then_some(())
        },
    )
    .await
}

/// What a client sees of the world `hierarchy` and a deployed container make.
async fn answers<S: App>(t: &T<S>, paths: &[String]) -> Vec<Value> {
    let mut seen = Vec::new();
    for path in paths {
        seen.push(t.get(path).await.body);
    }
    seen
}

async fn a_restored_snapshot_answers_exactly_as_before<S: App>(t: T<S>) {
    let org = t.org.clone();
    let (cluster, project, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    t.post(
        &format!("/container/{c}/environmentVariable"),
        json!({"key": "A", "value": "1"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/container/{c}/secret"),
        json!({"key": "PASSWORD", "value": "hunter2-snap"}),
    )
    .await
    .expect(201);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    let paths = [
        format!("/organization/{org}"),
        format!("/organization/{org}/cluster/{cluster}"),
        format!("/organization/{org}/project"),
        format!("/project/{project}/environment"),
        format!("/environment/{env}/container"),
        format!("/container/{c}"),
        format!("/container/{c}/environmentVariable"),
        format!("/container/{c}/secret"),
        format!("/container/{c}/status"),
        format!("/container/{c}/deploymentHistory"),
        format!("/organization/{org}/events"),
        format!("/organization/{org}/apiToken"),
    ];
    let before = answers(&t, &paths).await;
    assert_eq!(before[5]["name"], "web", "real answers: {before:?}");
    assert_eq!(before[8]["state"], "DEPLOYED");
    let saved = control(
        &t,
        Method::POST,
        "/_capstan/snapshots",
        Some(json!({"name": "s1"})),
    )
    .await
    .expect(201);
    assert_eq!(saved.body["name"], "s1");
    assert!(saved.body["rows"].as_u64().unwrap() > 10, "{}", saved.text);

    // Everything changes: a project goes, another comes, the token goes with a reset.
    t.delete(&format!("/project/{project}")).await;
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "later"}),
    )
    .await
    .expect(201);
    control(&t, Method::POST, "/_capstan/reset", None)
        .await
        .expect(204);
    t.get(&format!("/organization/{org}")).await.expect(401);

    control(&t, Method::POST, "/_capstan/snapshots/s1/restore", None)
        .await
        .expect(204);
    assert_eq!(answers(&t, &paths).await, before);
    // And it works on: the restored world takes new changes and deployments.
    t.post(&format!("/container/{c}/redeploy"), json!({}))
        .await
        .expect(202);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
}

async fn snapshots_are_listed_removed_and_checked<S: App>(t: T<S>) {
    for name in ["first", "second"] {
        control(
            &t,
            Method::POST,
            "/_capstan/snapshots",
            Some(json!({"name": name})),
        )
        .await
        .expect(201);
    }
    control(
        &t,
        Method::POST,
        "/_capstan/snapshots",
        Some(json!({"name": "first"})),
    )
    .await
    .expect_error(409, "a snapshot named 'first' already exists");
    for bad in [
        json!({}),
        json!({"name": "Not OK"}),
        json!({"name": "../etc"}),
    ] {
        control(&t, Method::POST, "/_capstan/snapshots", Some(bad))
            .await
            .expect_error(400, "name:");
    }
    let listed = control(&t, Method::GET, "/_capstan/snapshots", None)
        .await
        .expect(200);
    let names: Vec<&str> = listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "second"]);
    assert!(listed.body["results"][0]["created_at"].is_string());
    control(&t, Method::DELETE, "/_capstan/snapshots/first", None)
        .await
        .expect(204);
    for (method, path) in [
        (Method::DELETE, "/_capstan/snapshots/first"),
        (Method::POST, "/_capstan/snapshots/first/restore"),
    ] {
        control(&t, method, path, None)
            .await
            .expect_error(404, "snapshot not found");
    }
    let listed = control(&t, Method::GET, "/_capstan/snapshots", None)
        .await
        .expect(200);
    assert_eq!(listed.body["results"].as_array().unwrap().len(), 1);
}

const FIXTURE: &str = r#"
organizations:
  - name: Seeded
    description: from a fixture
    tokens:
      - name: ci
        value: cap_fixture_admin_token_1
      - name: reader
        role: VIEWER
    container_registries:
      - name: hub
        kind: DOCKER_HUB
        config: {username: bob, password: hunter2-fixture}
    clusters:
      - name: main
        region: eu-west-3
        cloud_provider: CLOUDA
    projects:
      - name: shop
        variables:
          - {key: REGION, value: eu}
        environments:
          - name: prod
            mode: PRODUCTION
            cluster: main
            variables:
              - {key: DB_PASSWORD, value: hunter2-env-secret, secret: true}
            services:
              - kind: CONTAINER
                name: web
                registry: hub
                image_name: nginx
                tag: "1.27"
                variables:
                  - {key: PORT, value: "8080"}
                  - {key: NGINX_CONF, value: "listen 80;", mount_path: /etc/nginx/site.conf, enable_interpolation_in_file: true}
              - kind: JOB
                name: cron
                schedule: {cronjob: {scheduled_at: "0 * * * *"}}
                source: {image: {image_name: busybox, tag: "1", registry: hub}}
              - kind: APPLICATION
                name: api
                git_repository: {url: "https://github.com/acme/api.git", branch: main}
                ports: [{internal_port: 8080}]
              - kind: DATABASE
                name: db
                type: POSTGRESQL
                version: "16"
                mode: CONTAINER
              - kind: HELM
                name: redis
                source: {helm_repository: {repository: "https://charts.example.com", chart_name: redis, chart_version: "19.0.0"}}
                arguments: []
                auto_deploy: false
                values_override: {}
              - kind: TERRAFORM
                name: infra
                terraform_files_source: {git_repository: {url: "https://gitlab.com/acme/infra"}}
"#;

async fn seed<S: App>(t: &T<S>, fixture: &str) -> common::Resp {
    let req = actix_web::test::TestRequest::post()
        .uri("/_capstan/seed")
        .insert_header(("Authorization", format!("Token {CONTROLS_TOKEN}")))
        .insert_header(("Content-Type", "application/yaml"))
        .set_payload(fixture.to_string())
        .to_request();
    t.send(req).await
}

async fn a_seeded_world_serves_and_its_export_reproduces_it<S: App>(t: T<S>) {
    let seeded = seed(&t, FIXTURE).await.expect(201);
    let org = &seeded.body["organizations"][0];
    assert_eq!(org["name"], "Seeded");
    assert_eq!(org["tokens"][0]["value"], "cap_fixture_admin_token_1");
    let reader = org["tokens"][1]["value"].as_str().unwrap().to_string();
    let org_id = org["id"].as_str().unwrap().to_string();

    // The fixture's token works, with its role; the world is there.
    let fixed = "cap_fixture_admin_token_1";
    let call = |token: &str, path: String| {
        let token = token.to_string();
        let t = &t;
        async move { t.call(Some(&token), Method::GET, &path, None).await }
    };
    let projects = call(fixed, format!("/organization/{org_id}/project"))
        .await
        .expect(200);
    assert_eq!(projects.body["results"][0]["name"], "shop");
    let project = projects.body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let envs = call(&reader, format!("/project/{project}/environment"))
        .await
        .expect(200);
    let env = envs.body["results"][0]["id"].as_str().unwrap().to_string();
    let containers = call(fixed, format!("/environment/{env}/container"))
        .await
        .expect(200);
    let web = &containers.body["results"][0];
    assert_eq!(
        (web["name"].as_str(), web["tag"].as_str()),
        (Some("web"), Some("1.27"))
    );
    assert_eq!(web["registry"]["name"], "hub");
    let web = web["id"].as_str().unwrap().to_string();
    // The seed's answer names what it made, with the ids the API shows.
    let made = &org["projects"][0];
    assert_eq!(
        (made["id"].as_str(), &made["name"]),
        (Some(project.as_str()), &json!("shop"))
    );
    let made = &made["environments"][0];
    assert_eq!(
        (made["id"].as_str(), &made["name"]),
        (Some(env.as_str()), &json!("prod"))
    );
    assert_eq!(
        made["services"][0],
        json!({"id": web, "name": "web", "kind": "CONTAINER"})
    );
    let kinds = [
        "container",
        "job",
        "application",
        "database",
        "helm",
        "terraform",
    ];
    assert_eq!(made["services"].as_array().unwrap().len(), kinds.len());
    for (service, kind) in made["services"].as_array().unwrap().iter().zip(kinds) {
        assert_eq!(service["kind"], kind.to_uppercase());
        let shown = call(
            fixed,
            format!("/{kind}/{}", service["id"].as_str().unwrap()),
        )
        .await
        .expect(200);
        assert_eq!(shown.body["name"], service["name"]);
    }
    for (path, member, name) in [
        ("containerRegistry", "container_registries", "hub"),
        ("cluster", "clusters", "main"),
    ] {
        let listed = call(fixed, format!("/organization/{org_id}/{path}"))
            .await
            .expect(200);
        assert_eq!(
            org[member],
            json!([{"id": listed.body["results"][0]["id"], "name": name}])
        );
    }
    let vars = call(fixed, format!("/container/{web}/environmentVariable"))
        .await
        .expect(200);
    let keys: Vec<&str> = vars.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["key"].as_str().unwrap())
        .collect();
    assert!(
        keys.contains(&"PORT") && keys.contains(&"REGION"),
        "{keys:?}"
    );
    t.call(
        Some(fixed),
        Method::POST,
        &format!("/container/{web}/deploy"),
        Some(json!({})),
    )
    .await
    .expect(202);
    t.call(
        Some(&reader),
        Method::POST,
        &format!("/container/{web}/deploy"),
        Some(json!({})),
    )
    .await
    .expect(403);

    // A record a fixture cannot describe (a git token) is left out of the export.
    let git_token = t
        .call(
            Some(fixed),
            Method::POST,
            &format!("/organization/{org_id}/gitToken"),
            Some(json!({"name": "gh", "type": "HOSTA", "token": "ghp_export_secret"})),
        )
        .await
        .expect(201)
        .id();
    t.call(
        Some(fixed),
        Method::POST,
        &format!("/environment/{env}/application"),
        Some(json!({
            "name": "private",
            "git_repository": {"url": "https://github.com/acme/private.git", "branch": "main", "git_token_id": git_token},
            "ports": [{"internal_port": 80}]
        })),
    )
    .await
    .expect(201);

    let first = control(&t, Method::GET, "/_capstan/export", None)
        .await
        .expect(200);
    assert!(!first.text.contains(&git_token), "{}", first.text);
    let text = first.text.clone();
    for secret in [
        "hunter2-fixture",
        "hunter2-env-secret",
        "cap_fixture_admin_token_1",
        "ghp_export_secret",
    ] {
        assert!(
            !text.contains(secret),
            "the export shows a secret value: {text}"
        );
    }
    let exported = first.body["organizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "Seeded")
        .unwrap()
        .clone();
    assert_eq!(
        exported["tokens"],
        json!([{"name": "ci", "role": "ADMIN"}, {"name": "reader", "role": "VIEWER"}])
    );
    let env = &exported["projects"][0]["environments"][0];
    assert_eq!(env["cluster"], "main");
    assert_eq!(
        env["variables"],
        json!([{"key": "DB_PASSWORD", "secret": true}])
    );
    assert_eq!(env["services"][0]["registry"], "hub");
    assert_eq!(
        env["services"][0]["variables"],
        json!([
            {"key": "PORT", "value": "8080"},
            {"key": "NGINX_CONF", "value": "listen 80;", "mount_path": "/etc/nginx/site.conf", "enable_interpolation_in_file": true},
        ])
    );
    assert_eq!(env["services"][1]["source"]["image"]["registry"], "hub");

    // Seeded into an empty server, the export makes the same world.
    control(&t, Method::POST, "/_capstan/reset", None)
        .await
        .expect(204);
    let req = actix_web::test::TestRequest::post()
        .uri("/_capstan/seed")
        .insert_header(("Authorization", format!("Token {CONTROLS_TOKEN}")))
        .set_json(&first.body)
        .to_request();
    t.send(req).await.expect(201);
    let second = control(&t, Method::GET, "/_capstan/export", None)
        .await
        .expect(200);
    assert_eq!(second.body, first.body);
    let yaml = control(&t, Method::GET, "/_capstan/export?format=yaml", None)
        .await
        .expect(200);
    assert!(yaml.text.contains("name: Seeded"), "{}", yaml.text);
}

/// The API's own words for what a fixture calls otherwise: `api_tokens` and `token`,
/// `registries`, a service's `type`, and `secrets` lists beside `variables`.
async fn a_fixture_may_use_the_api_s_own_words<S: App>(t: T<S>) {
    let fixture = json!({"organizations": [{
        "name": "Worded",
        "api_tokens": [{"name": "ci", "token": "cap_worded_fixture_token"}],
        "registries": [{"name": "hub", "kind": "DOCKER_HUB"}],
        "clusters": [{"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA"}],
        "projects": [{"name": "shop", "environments": [{
            "name": "prod",
            "secrets": [{"key": "ENV_SECRET", "value": "hunter2-worded-env"}],
            "services": [{
                "type": "CONTAINER", "name": "web", "registry": "hub", "image_name": "nginx", "tag": "1",
                "secrets": [{"key": "API_KEY", "value": "hunter2-worded"}]
            }]
        }]}]
    }]});
    let req = actix_web::test::TestRequest::post()
        .uri("/_capstan/seed")
        .insert_header(("Authorization", format!("Token {CONTROLS_TOKEN}")))
        .set_json(&fixture)
        .to_request();
    let seeded = t.send(req).await.expect(201);
    assert_eq!(
        seeded.body["organizations"][0]["tokens"][0]["value"],
        "cap_worded_fixture_token"
    );
    let token = "cap_worded_fixture_token";
    let org = seeded.body["organizations"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = &t;
    let get = |path: String| async move {
        t.call(Some(token), Method::GET, &path, None)
            .await
            .expect(200)
            .body
    };
    let project = get(format!("/organization/{org}/project")).await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let env = get(format!("/project/{project}/environment")).await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let web = get(format!("/environment/{env}/container")).await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let secrets = get(format!("/container/{web}/secret")).await;
    let mut keys: Vec<&str> = secrets["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["API_KEY", "ENV_SECRET"], "{secrets}");
    let exported = control(t, Method::GET, "/_capstan/export", None)
        .await
        .expect(200);
    assert!(!exported.text.contains("hunter2-worded"));
}

async fn a_bad_fixture_is_refused_naming_the_record<S: App>(t: T<S>) {
    for (fixture, prefix) in [
        (
            "organizations:
  - name: A
    projcts: []
",
            "organizations[0].projcts:",
        ),
        (
            "organizations: 3
",
            "organizations:",
        ),
        (
            "organizations:
  - name: A
    tokens: [{name: t, value: 'two words'}]
",
            "organizations[0].tokens[0].value:",
        ),
        (
            "organizations:
  - name: A
    tokens: [{name: t, role: KING}]
",
            "organizations[0].tokens[0].role:",
        ),
        (
            "organizations:
  - name: B
    clusters: [{name: c, region: eu-west-3, cloud_provider: CLOUDA}]
    projects:
      - name: p
        environments:
          - name: e
            services:
              - {kind: CONTAINER, name: w, registry: nope, image_name: x, tag: '1'}
",
            "organizations[0].projects[0].environments[0].services[0].registry:",
        ),
        (
            "organizations:
  - name: C
    projects:
      - name: p
        environments:
          - {name: e, cluster: ghost}
",
            "organizations[0].projects[0].environments[0].cluster:",
        ),
    ] {
        seed(&t, fixture).await.expect_error(400, prefix);
    }
    t.call(None, Method::POST, "/_capstan/seed", None)
        .await
        .expect(401);
}

async fn add_fault<S: App>(t: &T<S>, rule: Value) -> String {
    control(t, Method::POST, "/_capstan/faults", Some(rule))
        .await
        .expect(201)
        .id()
}

async fn a_fault_rule_applies_only_where_it_matches<S: App>(t: T<S>) {
    let org = t.org.clone();
    let teapot = add_fault(
        &t,
        json!({"method": "GET", "path": "/organization/*", "status": 418, "body": {"custom": true}}),
    )
    .await;
    let faulted = t.get(&format!("/organization/{org}")).await.expect(418);
    assert_eq!(faulted.body, json!({"custom": true}));
    assert_eq!(fault_of(&faulted), Some(teapot.as_str()));
    // The same operation spelled under /v1 is the same operation: faulted too.
    let spelled = t.get(&format!("/v1/organization/{org}")).await.expect(418);
    assert_eq!(fault_of(&spelled), Some(teapot.as_str()));
    // Another method, a longer path: the real answers, unmarked.
    for r in [
        t.post(
            &format!("/organization/{org}/project"),
            json!({"name": "p"}),
        )
        .await
        .expect(201),
        t.get(&format!("/organization/{org}/project"))
            .await
            .expect(200),
        t.get(&format!("/v1/organization/{org}/project"))
            .await
            .expect(200),
    ] {
        assert_eq!(fault_of(&r), None);
    }
    control(
        &t,
        Method::DELETE,
        &format!("/_capstan/faults/{teapot}"),
        None,
    )
    .await
    .expect(204);
    t.get(&format!("/organization/{org}")).await.expect(200);

    // An organization's rule: its tokens' calls only.
    let other = t.other_org_token().await;
    let other_org = t
        .call(Some(&other), Method::GET, "/organization", None)
        .await
        .expect(200)
        .body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let rule = add_fault(
        &t,
        json!({"path": "/**", "organization_id": other_org, "status": 503}),
    )
    .await;
    t.get(&format!("/organization/{org}/project"))
        .await
        .expect(200);
    let refused = t
        .call(
            Some(&other),
            Method::GET,
            &format!("/organization/{other_org}/project"),
            None,
        )
        .await
        .expect_error(503, "fault injected by rule");
    assert_eq!(fault_of(&refused), Some(rule.as_str()));
    control(&t, Method::DELETE, "/_capstan/faults", None)
        .await
        .expect(204);

    // A token's rule, twice, after a wait: the real answer comes late, marked.
    let slow = add_fault(
        &t,
        json!({"path": "/organization/**", "token": t.token, "latency_ms": 150, "count": 2}),
    )
    .await;
    t.call(
        Some(&other),
        Method::GET,
        &format!("/organization/{other_org}/project"),
        None,
    )
    .await
    .expect(200);
    for _ in 0..2 {
        let began = std::time::Instant::now();
        let r = t
            .get(&format!("/organization/{org}/project"))
            .await
            .expect(200);
        assert!(began.elapsed() >= std::time::Duration::from_millis(150));
        assert_eq!(fault_of(&r), Some(slow.as_str()));
        assert_eq!(r.body["results"][0]["name"], "p");
    }
    let r = t
        .get(&format!("/organization/{org}/project"))
        .await
        .expect(200);
    assert!(
        !r.headers.contains_key("x-capstan-fault"),
        "spent after its count"
    );
}

async fn fault_rules_are_listed_removed_and_checked<S: App>(t: T<S>) {
    let org = t.org.clone();
    let rule = add_fault(
        &t,
        json!({"path": "/organization/*", "status": 500, "probability": 1, "count": 3}),
    )
    .await;
    t.get(&format!("/organization/{org}"))
        .await
        .expect_error(500, "fault injected");
    let listed = control(&t, Method::GET, "/_capstan/faults", None)
        .await
        .expect(200);
    let rules = listed.body["results"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0]["id"], rule.as_str());
    assert_eq!(rules[0]["faulted"], 1);
    assert_eq!(rules[0]["remaining"], 2);
    assert_eq!(rules[0]["token_set"], false);
    control(
        &t,
        Method::DELETE,
        &format!("/_capstan/faults/{rule}"),
        None,
    )
    .await
    .expect(204);
    control(
        &t,
        Method::DELETE,
        &format!("/_capstan/faults/{rule}"),
        None,
    )
    .await
    .expect_error(404, "fault rule not found");
    control(&t, Method::DELETE, "/_capstan/faults/nope", None)
        .await
        .expect_error(400, "id:");
    for (rule, field) in [
        (json!({"status": 500}), "path:"),
        (json!({"path": "/x"}), "status:"),
        (json!({"path": "/x", "status": 42}), "status:"),
        (json!({"path": "/x", "drop": true, "status": 500}), "drop:"),
        (
            json!({"path": "/x", "status": 500, "probability": 2}),
            "probability:",
        ),
        (json!({"path": "/_capstan/*", "status": 500}), "path:"),
        (
            json!({"path": "/x", "latency_ms": 999999999}),
            "latency_ms:",
        ),
    ] {
        control(&t, Method::POST, "/_capstan/faults", Some(rule))
            .await
            .expect_error(400, field);
    }
    // A rule over every path leaves the controls reachable: they are how it is removed.
    add_fault(&t, json!({"path": "/**", "status": 503})).await;
    t.get("/organization")
        .await
        .expect_error(503, "fault injected");
    control(&t, Method::GET, "/_capstan/faults", None)
        .await
        .expect(200);
    control(&t, Method::DELETE, "/_capstan/faults", None)
        .await
        .expect(204);
    t.get("/organization").await.expect(200);
    // A reset forgets the rules with everything else.
    add_fault(&t, json!({"path": "/organization", "status": 502})).await;
    control(
        &t,
        Method::POST,
        "/_capstan/reset",
        Some(json!({"keep_tokens": true})),
    )
    .await
    .expect(204);
    let listed = control(&t, Method::GET, "/_capstan/faults", None)
        .await
        .expect(200);
    assert_eq!(listed.body["results"], json!([]));
    t.get("/organization").await.expect(200);
}

async fn a_held_deployment_resumes_on_release<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    held_at_deploying(&t, &c, "deploy").await;
    // Many steps' time later, it is still there.
    actix_rt::time::sleep(common::STEP * 20).await;
    let status = t.get(&format!("/container/{c}/status")).await.expect(200);
    assert_eq!(status.body["state"], "DEPLOYING", "{}", status.text);
    control(
        &t,
        Method::POST,
        "/_capstan/engine/release",
        Some(json!({"service_id": c})),
    )
    .await
    .expect(204);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
    control(
        &t,
        Method::POST,
        "/_capstan/engine/release",
        Some(json!({"service_id": c})),
    )
    .await
    .expect_error(404, "hold not found");

    // A held deployment can still be canceled.
    held_at_deploying(&t, &c, "redeploy").await;
    t.post(&format!("/environment/{env}/cancelDeployment"), json!({}))
        .await
        .expect(202);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "CANCELED", "{settled}");
}

/// Holds the container's next deployment at its queued state and asks for it.
async fn held_queued<S: App>(t: &T<S>, c: &str) {
    control(
        t,
        Method::POST,
        "/_capstan/engine/hold",
        Some(json!({"service_id": c, "state": "DEPLOYMENT_QUEUED"})),
    )
    .await
    .expect(204);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
}

/// Waits until a worker has taken a request, then long enough for steps it should not run,
/// and answers the container's state then.
async fn state_once_taken<S: App>(t: &T<S>, c: &str) -> Value {
    common::eventually(
        common::WITHIN,
        || "never taken".to_string(),
        async || (t.capstan.queue_depth().await.unwrap().running > 0).then_some(()),
    )
    .await;
    actix_rt::time::sleep(common::STEP * 20).await;
    t.get(&format!("/container/{c}/status"))
        .await
        .expect(200)
        .body["state"]
        .clone()
}

/// Releases the container's hold and waits for its deployment to end DEPLOYED.
async fn released_and_deployed<S: App>(t: &T<S>, c: &str) {
    control(
        t,
        Method::POST,
        "/_capstan/engine/release",
        Some(json!({"service_id": c})),
    )
    .await
    .expect(204);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
}

async fn a_deployment_can_be_held_before_its_first_step<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    held_queued(&t, &c).await;
    // Taken by a worker, which waits before its first step.
    assert_eq!(state_once_taken(&t, &c).await, "DEPLOYMENT_QUEUED");
    // A deployment that waits its turn behind another is held all the same once taken.
    let api = t.container(&env, "api").await;
    held_queued(&t, &api).await;
    let status = t.get(&format!("/container/{api}/status")).await.expect(200);
    assert_eq!(status.body["state"], "WAITING_RUNNING", "{}", status.text);
    released_and_deployed(&t, &c).await;
    assert_eq!(state_once_taken(&t, &api).await, "WAITING_RUNNING", "held");
    released_and_deployed(&t, &api).await;
}

async fn a_failed_step_fails_the_next_deployment_once<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    control(
        &t,
        Method::POST,
        "/_capstan/engine/fail",
        Some(json!({"service_id": c, "step": "DEPLOYMENT", "message": "the disk is full"})),
    )
    .await
    .expect(204);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    let failed = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(failed["state"], "DEPLOYMENT_ERROR", "{failed}");
    let history = t
        .get(&format!("/container/{c}/deploymentHistory"))
        .await
        .expect(200);
    assert_eq!(history.body["results"][0]["reason"], "the disk is full");
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    let settled = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "only once: {settled}");
}

async fn a_deployment_log_names_its_steps_and_masks_the_services_secrets<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    let secret = "s3cr3t-value-of-web";
    t.post(
        &format!("/container/{c}/secret"),
        json!({"key": "DB_PASSWORD", "value": secret}),
    )
    .await
    .expect(201);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&format!("/container/{c}/status")).await["state"],
        "DEPLOYED"
    );
    control(
        &t,
        Method::POST,
        "/_capstan/engine/fail",
        Some(json!({
            "service_id": c,
            "step": "DEPLOYMENT",
            "message": format!("connecting with {secret}: OOM-killed"),
        })),
    )
    .await
    .expect(204);
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&format!("/container/{c}/status")).await["state"],
        "DEPLOYMENT_ERROR"
    );
    let history = t
        .get(&format!("/container/{c}/deploymentHistory"))
        .await
        .expect(200);
    assert_eq!(
        history.body["results"][0]["reason"], "connecting with ********: OOM-killed",
        "the reason is masked as the log is"
    );

    let logs = t.get(&format!("/environment/{env}/logs")).await.expect(200);
    assert!(!logs.text.contains(secret), "{}", logs.text);
    let lines = logs.body.as_array().unwrap();
    let first = &lines[0];
    assert_eq!(first["type"], "info", "{first}");
    assert_eq!(first["details"]["transmitter"]["id"], json!(c));
    assert_eq!(first["details"]["transmitter"]["name"], "web");
    assert_eq!(first["details"]["transmitter"]["type"], "Container");
    assert_eq!(first["details"]["stage"]["step"], "DEPLOYMENT");
    assert!(first["error"].is_null());
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(
        last["message"]["safe_message"],
        "connecting with ********: OOM-killed"
    );
    assert_eq!(last["error"]["tag"], "DEPLOYMENT_ERROR");
    assert!(
        last["error"]["hint_message"]
            .as_str()
            .is_some_and(|h| h.contains("memory")),
        "{last}"
    );
    assert_ne!(
        first["details"]["execution_id"], last["details"]["execution_id"],
        "two deployments, each its own"
    );

    let v1 = t.get(&format!("/environment/{env}/log")).await.expect(200);
    let results = v1.body["results"].as_array().unwrap();
    assert_eq!(results.len(), lines.len());
    assert_eq!(results.last().unwrap()["state"], "DEPLOYMENT_ERROR");
    assert_eq!(results.last().unwrap()["scope"]["name"], "web");
    assert!(!v1.text.contains(secret));
    let elsewhere = uuid::Uuid::new_v4();
    t.get(&format!("/environment/{elsewhere}/logs"))
        .await
        .expect(404);
}

async fn engine_controls_check_what_they_are_given<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    let unknown = uuid::Uuid::new_v4().to_string();
    for (path, body, status, prefix) in [
        (
            "/_capstan/engine/hold",
            json!({"service_id": c, "state": "DEPLOYED"}),
            400,
            "state: must be one of DEPLOYMENT_QUEUED",
        ),
        (
            "/_capstan/engine/hold",
            json!({"service_id": c, "state": "NAPPING"}),
            400,
            "state:",
        ),
        (
            "/_capstan/engine/hold",
            json!({"service_id": c, "state": "BUILDING"}),
            400,
            "state: this CONTAINER's deployments never reach BUILDING",
        ),
        (
            "/_capstan/engine/hold",
            json!({"service_id": c, "state": "EXECUTING"}),
            400,
            "state: this CONTAINER's deployments never reach EXECUTING",
        ),
        (
            "/_capstan/engine/hold",
            json!({"state": "DEPLOYING"}),
            400,
            "service_id: is required",
        ),
        (
            "/_capstan/engine/hold",
            json!({"service_id": unknown, "state": "DEPLOYING"}),
            404,
            "service not found",
        ),
        (
            "/_capstan/engine/fail",
            json!({"service_id": c, "step": "DEPLOYMENT"}),
            400,
            "message: is required",
        ),
        (
            "/_capstan/engine/fail",
            json!({"service_id": c, "step": "NAP", "message": "x"}),
            400,
            "step:",
        ),
        (
            "/_capstan/engine/fail",
            json!({"service_id": c, "step": "BUILD", "message": " "}),
            400,
            "message:",
        ),
        (
            "/_capstan/engine/fail",
            json!({"service_id": c, "step": "BUILD", "message": "x"}),
            400,
            "step: this CONTAINER runs DEPLOYMENT, never BUILD",
        ),
        (
            "/_capstan/engine/release",
            json!({"service_id": unknown}),
            404,
            "hold not found",
        ),
    ] {
        control(&t, Method::POST, path, Some(body))
            .await
            .expect_error(status, prefix);
    }
    // What a service built from git reaches, it is held at and failed in.
    let (_, application) = &common::service_bodies("")[0];
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            application.clone(),
        )
        .await
        .expect(201)
        .id();
    for (path, body) in [
        (
            "/_capstan/engine/hold",
            json!({"service_id": app, "state": "BUILDING"}),
        ),
        (
            "/_capstan/engine/fail",
            json!({"service_id": app, "step": "BUILD", "message": "no compiler"}),
        ),
    ] {
        control(&t, Method::POST, path, Some(body))
            .await
            .expect(204);
    }
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "4f2a9c1"}),
    )
    .await
    .expect(202);
    let status = format!("/application/{app}/status");
    wait_for_state(&t, &status, "BUILDING").await;
    control(
        &t,
        Method::POST,
        "/_capstan/engine/release",
        Some(json!({"service_id": app})),
    )
    .await
    .expect(204);
    let failed = t.settle(&status).await;
    assert_eq!(failed["state"], "BUILD_ERROR", "{failed}");
}

async fn the_manual_clock_dates_records<S: App>(t: T<S>) {
    let set = control(
        &t,
        Method::POST,
        "/_capstan/clock",
        Some(json!({"now": "2030-01-01T00:00:00Z"})),
    )
    .await
    .expect(200);
    assert!(
        set.body["now"]
            .as_str()
            .unwrap()
            .starts_with("2030-01-01T00:00:0"),
        "{}",
        set.text
    );
    assert_eq!(set.body["manual"], true);
    let org = t.org.clone();
    let first = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "one"}),
        )
        .await
        .expect(201);
    assert!(
        first.body["created_at"]
            .as_str()
            .unwrap()
            .starts_with("2030-01-01"),
        "{}",
        first.text
    );
    control(
        &t,
        Method::POST,
        "/_capstan/clock",
        Some(json!({"advance_seconds": 86400})),
    )
    .await
    .expect(200);
    let second = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "two"}),
        )
        .await
        .expect(201);
    assert!(
        second.body["created_at"]
            .as_str()
            .unwrap()
            .starts_with("2030-01-02"),
        "{}",
        second.text
    );
    let read = control(&t, Method::GET, "/_capstan/clock", None)
        .await
        .expect(200);
    assert!(read.body["now"].as_str().unwrap().starts_with("2030-01-02"));
    for body in [
        json!({}),
        json!({"advance_seconds": 1, "now": "2030-01-01T00:00:00Z"}),
        json!({"now": "yesterday"}),
        json!({"advance_seconds": i64::MAX}),
        json!({"advance_seconds": 400_000_000_000i64}),
        json!({"now": "9999-06-01T00:00:00Z"}),
    ] {
        control(&t, Method::POST, "/_capstan/clock", Some(body))
            .await
            .expect(400);
    }
}

mod rate_limits {
    use super::*;

    /// A moved clock refills quotas: the hour a client waited for passes at once.
    async fn the_clock_moves_rate_limits<S: App>(t: T<S>) {
        let org = t.org.clone();
        for _ in 0..3 {
            t.get(&format!("/organization/{org}")).await.expect(200);
        }
        t.get(&format!("/organization/{org}")).await.expect(429);
        control(
            &t,
            Method::POST,
            "/_capstan/clock",
            Some(json!({"advance_seconds": 3600})),
        )
        .await
        .expect(200);
        t.get(&format!("/organization/{org}")).await.expect(200);
        // Spent again, then the clock set years back: the quota is whole, not years away.
        for _ in 0..2 {
            t.get(&format!("/organization/{org}")).await.expect(200);
        }
        t.get(&format!("/organization/{org}")).await.expect(429);
        control(
            &t,
            Method::POST,
            "/_capstan/clock",
            Some(json!({"now": "2020-01-01T00:00:00Z"})),
        )
        .await
        .expect(200);
        for _ in 0..3 {
            t.get(&format!("/organization/{org}")).await.expect(200);
        }
    }

    /// A suite restoring between tests starts each with its quotas whole.
    async fn a_restore_gives_quotas_back<S: App>(t: T<S>) {
        let org = t.org.clone();
        control(
            &t,
            Method::POST,
            "/_capstan/snapshots",
            Some(json!({"name": "quota"})),
        )
        .await
        .expect(201);
        for _ in 0..3 {
            t.get(&format!("/organization/{org}")).await.expect(200);
        }
        t.get(&format!("/organization/{org}")).await.expect(429);
        control(&t, Method::POST, "/_capstan/snapshots/quota/restore", None)
            .await
            .expect(204);
        for _ in 0..3 {
            t.get(&format!("/organization/{org}")).await.expect(200);
        }
    }

    /// The controls are not metered, but guessing their token is.
    async fn wrong_controls_tokens_are_metered<S: App>(t: T<S>) {
        for _ in 0..3 {
            t.call(
                Some("not-the-controls-token"),
                Method::POST,
                "/_capstan/reset",
                None,
            )
            .await
            .expect_error(401, "the controls take");
        }
        t.call(
            Some("not-the-controls-token"),
            Method::POST,
            "/_capstan/reset",
            None,
        )
        .await
        .expect_error(429, "too many attempts");
        for _ in 0..5 {
            control(&t, Method::GET, "/_capstan/faults", None)
                .await
                .expect(200);
        }
    }

    #[actix_rt::test]
    async fn sqlite() {
        let backend = crate::common::sqlite().await.unwrap();
        the_clock_moves_rate_limits(controlled(backend, 3).await).await;
        let backend = crate::common::sqlite().await.unwrap();
        wrong_controls_tokens_are_metered(controlled(backend, 3).await).await;
        let backend = crate::common::sqlite().await.unwrap();
        a_restore_gives_quotas_back(controlled(backend, 3).await).await;
    }

    #[actix_rt::test]
    async fn postgres() {
        let Some(backend) = crate::common::postgres().await else {
            return;
        };
        the_clock_moves_rate_limits(controlled(backend, 3).await).await;
        let Some(backend) = crate::common::postgres().await else {
            return;
        };
        wrong_controls_tokens_are_metered(controlled(backend, 3).await).await;
        let Some(backend) = crate::common::postgres().await else {
            return;
        };
        a_restore_gives_quotas_back(controlled(backend, 3).await).await;
    }
}

mod system_clock {
    use super::*;

    #[actix_rt::test]
    async fn the_system_clock_cannot_be_moved() {
        let backend = crate::common::sqlite().await.unwrap();
        let t =
            common::setup_with(backend, |s| s.with_controls(Controls::new(CONTROLS_TOKEN))).await;
        let read = control(&t, Method::GET, "/_capstan/clock", None)
            .await
            .expect(200);
        assert_eq!(read.body["manual"], false);
        control(
            &t,
            Method::POST,
            "/_capstan/clock",
            Some(json!({"advance_seconds": 5})),
        )
        .await
        .expect_error(409, "the clock is the system's");
    }
}
