//! The deployment operations deployment tools drive: environment statuses as the public CLI and
//! Terraform provider poll them, bulk actions, uninstall, the queue and cancel by request id,
//! histories; on both backends.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{App, T};
use domain::model::{transition, Event, ServiceState};
use serde_json::{json, Value};
use std::collections::HashMap;

http_suite_with_memory!(
    waiters_polling_as_the_cli_and_the_provider_see_known_states_and_no_step_back,
    the_environment_status_follows_its_latest_deployment,
    bulk_actions_act_only_on_the_listed_services,
    an_uninstalled_service_stays_and_deploys_again,
    histories_show_every_action_newest_first_with_paging,
    project_statuses_and_kind_statuses_are_listed_and_paged,
    a_failed_environment_deletion_is_a_deployment_of_its_own_and_can_be_asked_again,
    a_bulk_deployment_of_an_application_never_deployed_needs_a_commit,
    the_deployment_status_of_a_request_answers_its_public_shape,
    the_older_service_history_pages_after_start_id,
);

/// Tests that act while a request waits or runs, on an engine slow enough (a second a step)
/// for a request to arrive then however loaded the machine is.
macro_rules! slow_suite {
    ($($name:ident),* $(,)?) => {
        mod slow {
            async fn setup(
                backend: crate::common::Backend,
            ) -> crate::common::T<impl crate::common::App> {
                let step = std::time::Duration::from_secs(1);
                crate::common::setup_with_step(backend, |s| s, step).await
            }
            mod sqlite {
                $(
                    #[actix_rt::test]
                    async fn $name() {
                        let backend = crate::common::sqlite().await.unwrap();
                        super::super::$name(super::setup(backend).await).await;
                    }
                )*
            }
            mod postgres {
                $(
                    #[actix_rt::test]
                    async fn $name() {
                        let Some(backend) = crate::common::postgres().await else { return };
                        super::super::$name(super::setup(backend).await).await;
                    }
                )*
            }
            mod memory {
                $(
                    #[actix_rt::test]
                    async fn $name() {
                        let backend = crate::common::sqlite_memory().await.unwrap();
                        super::super::$name(super::setup(backend).await).await;
                    }
                )*
            }
        }
    };
}

slow_suite!(
    an_environment_deleted_while_its_service_is_deleted_goes_with_it,
    queued_and_running_requests_are_canceled_by_id,
    one_deployment_has_one_id_from_its_action_to_its_services_queue_cancel_and_histories,
);

/// The environment's deletion joins the deletion of its only service already under way (running
/// or waiting): accepted, and the environment goes with it.
async fn an_environment_deleted_while_its_service_is_deleted_goes_with_it<S: App>(t: T<S>) {
    let (_, project, _) = t.hierarchy().await;
    for waiting in [false, true] {
        let env = t
            .post(
                &format!("/project/{project}/environment"),
                json!({"name": format!("env-{waiting}"), "mode": "DEVELOPMENT"}),
            )
            .await
            .expect(201)
            .id();
        let c = container(&t, &env, "web").await;
        t.post(&format!("/container/{c}/deploy"), json!({}))
            .await
            .expect(202);
        t.settle(&format!("/container/{c}/status")).await;
        if waiting {
            // Its deletion waits behind a restart.
            t.post(&format!("/container/{c}/restart-service"), json!({}))
                .await
                .expect(202);
        }
        t.delete(&format!("/container/{c}")).await.expect(202);
        if !waiting {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while t.get(&format!("/container/{c}/status")).await.body["state"] != "DELETING" {
                assert!(std::time::Instant::now() < deadline);
                actix_rt::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
        t.delete(&format!("/environment/{env}")).await.expect(202);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let got = t.get(&format!("/environment/{env}")).await;
            if got.status == 404 {
                break;
            }
            assert_eq!(got.status, 200, "{}", got.text);
            assert!(
                std::time::Instant::now() < deadline,
                "the environment stayed (waiting: {waiting})"
            );
            actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        t.get(&format!("/container/{c}")).await.expect(404);
    }
}

async fn container<S: App>(t: &T<S>, env: &str, name: &str) -> String {
    let registry = t.registry().await;
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": name, "registry_id": registry, "image_name": "nginx", "tag": "1"}),
    )
    .await
    .expect(201)
    .id()
}

async fn database<S: App>(t: &T<S>, env: &str, name: &str) -> String {
    t.post(
        &format!("/environment/{env}/database"),
        json!({"name": name, "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
    )
    .await
    .expect(201)
    .id()
}

/// What the Terraform provider's environment waiters accept (in progress, then done); anything
/// else is an error to them.
const PROVIDER_STATES: [&str; 22] = [
    "BUILDING",
    "CANCELING",
    "DELETE_QUEUED",
    "DELETING",
    "DEPLOYING",
    "STOPPING",
    "STOP_QUEUED",
    "RESTART_QUEUED",
    "RESTARTING",
    "DEPLOYMENT_QUEUED",
    "QUEUED",
    "READY",
    "DEPLOYMENT_ERROR",
    "DELETE_ERROR",
    "STOP_ERROR",
    "RESTART_ERROR",
    "STOPPED",
    "DELETED",
    "RESTARTED",
    "CANCELED",
    "BUILD_ERROR",
    "DEPLOYED",
];

/// Where the CLI stops waiting on `environment.last_deployment_state`.
fn cli_done(state: &str) -> bool {
    ["DEPLOYED", "RESTARTED", "DELETED", "STOPPED", "CANCELED"].contains(&state)
        || state.ends_with("ERROR")
}

fn state(v: &Value) -> ServiceState {
    serde_json::from_value(v.clone()).unwrap_or_else(|_| panic!("unknown state {v}"))
}

/// Whether one request can move from `a` to `b` (the same request: no new request event).
fn reachable(a: ServiceState, b: ServiceState) -> bool {
    let events = [
        Event::Blocked,
        Event::Started { builds: true },
        Event::Started { builds: false },
        Event::Built,
        Event::Executing,
        Event::Succeeded,
        Event::Failed,
        Event::CancelRequested,
        Event::Canceled,
    ];
    let mut seen = vec![a];
    let mut frontier = vec![a];
    while let Some(s) = frontier.pop() {
        if s == b {
            return true;
        }
        for e in events {
            if let Ok(n) = transition(s, e) {
                if !seen.contains(&n) {
                    seen.push(n);
                    frontier.push(n);
                }
            }
        }
    }
    false
}

/// Where an environment's state is on its way: queued, running, ended.
fn rank(state: &str) -> u8 {
    if state.ends_with("_QUEUED") || state == "QUEUED" {
        0
    } else if state.ends_with("ING") {
        1
    } else {
        2
    }
}

/// Polls as the CLI (`/statuses`, `environment.last_deployment_state`) and the provider
/// (`/environment/{id}/status` and each service's status, `state`) do, until the CLI would
/// stop; fails on any state they do not know and on any step back. Returns the last state.
async fn follow<S: App>(t: &T<S>, env: &str, kinds: &HashMap<String, &str>) -> String {
    let mut last_env: Option<(Value, u8)> = None;
    let mut seen: HashMap<(String, Value), ServiceState> = HashMap::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let all = t
            .get(&format!("/environment/{env}/statuses"))
            .await
            .expect(200)
            .body;
        let mine = t
            .get(&format!("/environment/{env}/status"))
            .await
            .expect(200)
            .body;
        for body in [&all["environment"], &mine] {
            for member in ["state", "last_deployment_state"] {
                let s = body[member].as_str().unwrap();
                assert!(
                    PROVIDER_STATES.contains(&s),
                    "{member} {s} is unknown to the provider: {body}"
                );
            }
            assert_eq!(body["state"], body["last_deployment_state"], "{body}");
            let r = rank(body["state"].as_str().unwrap());
            if let Some((id, before)) = &last_env {
                if *id == body["last_deployment_id"] {
                    assert!(r >= *before, "the environment stepped back: {body}");
                }
            }
            last_env = Some((body["last_deployment_id"].clone(), r));
        }
        for kind in [
            "applications",
            "containers",
            "databases",
            "jobs",
            "helms",
            "terraforms",
        ] {
            assert!(all[kind].is_array(), "{kind} missing: {all}");
        }
        for (id, kind) in kinds {
            let one = t
                .get(&format!("/{kind}/{id}/status"))
                .await
                .expect(200)
                .body;
            let listed = all[format!("{kind}s")]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == json!(id))
                .unwrap()
                .clone();
            for s in [listed, one] {
                let now = state(&s["state"]);
                let request = s["deployment_request_id"].clone();
                if let Some(before) = seen.get(&(id.clone(), request.clone())) {
                    assert!(
                        reachable(*before, now),
                        "{kind} {id} went back from {before} to {now} on one request: {s}"
                    );
                }
                seen.insert((id.clone(), request), now);
            }
        }
        let cli = all["environment"]["last_deployment_state"]
            .as_str()
            .unwrap()
            .to_string();
        if cli_done(&cli) && all["environment"]["deployment_requests_count"] == 0 {
            return cli;
        }
        assert!(std::time::Instant::now() < deadline, "never done: {all}");
        actix_rt::time::sleep(std::time::Duration::from_millis(3)).await;
    }
}

async fn waiters_polling_as_the_cli_and_the_provider_see_known_states_and_no_step_back<S: App>(
    t: T<S>,
) {
    let (_, _, env) = t.hierarchy().await;
    let mut kinds = HashMap::new();
    for name in ["a", "b"] {
        kinds.insert(container(&t, &env, name).await, "container");
    }
    let db = database(&t, &env, "db").await;
    kinds.insert(db.clone(), "database");
    let stage = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "data"}),
        )
        .await
        .expect(201)
        .id();
    t.put(&format!("/deploymentStage/{stage}/service/{db}"), json!({}))
        .await
        .expect(200);
    let deploy = t
        .post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    // The answer is a `Status` too.
    for member in [
        "id",
        "state",
        "service_deployment_status",
        "status_details",
        "is_part_last_deployment",
        "deployment_requests_count",
        "deployment_request_id",
        "last_deployment_state",
    ] {
        assert!(
            deploy.body.get(member).is_some(),
            "{member}: {}",
            deploy.text
        );
    }
    assert_eq!(follow(&t, &env, &kinds).await, "DEPLOYED");
    t.post(&format!("/environment/{env}/stop"), json!({}))
        .await
        .expect(202);
    assert_eq!(follow(&t, &env, &kinds).await, "STOPPED");
    t.post(&format!("/environment/{env}/redeploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(follow(&t, &env, &kinds).await, "DEPLOYED");
    // A restart asked for while a deployment waits: queued behind it, never shown as queued
    // again once it waited.
    let (a, _) = kinds.iter().find(|(_, k)| **k == "container").unwrap();
    t.post(&format!("/container/{a}/redeploy"), json!({}))
        .await
        .expect(202);
    t.post(&format!("/container/{a}/restart-service"), json!({}))
        .await
        .expect(202);
    assert_eq!(follow(&t, &env, &kinds).await, "RESTARTED");
}

async fn the_environment_status_follows_its_latest_deployment<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let never = t
        .get(&format!("/environment/{env}/status"))
        .await
        .expect(200)
        .body;
    assert_eq!(never["id"], json!(env));
    assert_eq!(never["state"], "READY");
    assert_eq!(never["last_deployment_state"], "READY");
    assert_eq!(never["deployment_status"], "NEVER_DEPLOYED");
    assert!(never["last_deployment_date"].is_string(), "{never}");
    assert_eq!(never["last_deployment_id"], json!(null));
    assert_eq!(never["total_deployment_duration_in_seconds"], json!(null));
    // Nothing to act on and nothing ever deployed: refused, rather than a READY that a waiter
    // would poll for ever.
    for action in ["deploy", "stop", "redeploy"] {
        t.post(&format!("/environment/{env}/{action}"), json!({}))
            .await
            .expect_error(409, &format!("the environment has no service to {action}"));
    }
    t.post(&format!("/environment/{env}/service/deploy"), json!({}))
        .await
        .expect_error(400, "body: lists no service");
    let c = container(&t, &env, "web").await;
    let req = TestRequest::default()
        .method(Method::POST)
        .uri(&format!("/environment/{env}/deploy"))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("User-Agent", "terraform-provider-qovery/0.x"))
        .to_request();
    let asked = t.send(req).await.expect(202).body;
    assert_eq!(asked["state"], "DEPLOYMENT_QUEUED", "{asked}");
    assert_eq!(asked["origin"], "TERRAFORM_PROVIDER");
    assert!(asked["triggered_by"]
        .as_str()
        .unwrap()
        .starts_with("token:"));
    assert_eq!(asked["deployment_request_id"], asked["last_deployment_id"]);
    assert_eq!(asked["status_details"]["action"], "DEPLOY");
    let done = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(done["last_deployment_state"], "DEPLOYED");
    assert_eq!(done["last_deployment_id"], asked["last_deployment_id"]);
    assert_eq!(done["deployment_status"], "UP_TO_DATE");
    assert!(
        done["total_deployment_duration_in_seconds"].is_i64(),
        "{done}"
    );
    assert_eq!(done["status_details"]["status"], "SUCCESS");
    // A single service's action is the environment's latest deployment too.
    let restart = t
        .post(&format!("/container/{c}/restart-service"), json!({}))
        .await
        .expect(202)
        .body;
    let env_now = t.get(&format!("/environment/{env}/status")).await.body;
    assert_eq!(
        env_now["last_deployment_id"],
        restart["deployment_request_id"]
    );
    let done = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(done["last_deployment_state"], "RESTARTED");
    let by_request = t
        .get(&format!(
            "/environment/deploymentStatus?deploymentRequestId={}",
            asked["deployment_request_id"].as_str().unwrap()
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(by_request["status"], "DEPLOYED", "{by_request}");
    t.get("/environment/deploymentStatus")
        .await
        .expect_error(400, "deploymentRequestId");
    t.get(&format!(
        "/environment/deploymentStatus?deploymentRequestId={}",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
    t.post(&format!("/environment/{env}/uninstall"), json!({}))
        .await
        .expect(202);
    let gone = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(gone["last_deployment_state"], "DELETED", "{gone}");
    assert_eq!(gone["deployment_status"], "NEVER_DEPLOYED");
    t.get(&format!("/container/{c}")).await.expect(200);
}

async fn queued_and_running_requests_are_canceled_by_id<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let a = container(&t, &env, "a").await;
    let b = container(&t, &env, "b").await;
    t.post(&format!("/container/{a}/deploy"), json!({}))
        .await
        .expect(202);
    let queued = t
        .post(&format!("/container/{b}/deploy"), json!({}))
        .await
        .expect(202)
        .body;
    assert_eq!(
        queued["state"], "WAITING_RUNNING",
        "it waits behind a: {queued}"
    );
    let id = queued["deployment_request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let env_queue = t
        .get(&format!("/environment/{env}/deploymentQueue"))
        .await
        .expect(200)
        .body;
    let entries = env_queue["results"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{env_queue}");
    assert_eq!(entries[1]["identifier"]["deployment_request_id"], json!(id));
    assert_eq!(entries[1]["trigger_action"], "DEPLOY");
    assert_eq!(
        entries[1]["stages"][0]["services"][0]["identifier"]["service_id"],
        json!(b)
    );
    assert_eq!(entries[1]["stages"][0]["status"], "QUEUED");
    let service_queue = t
        .get(&format!("/service/{b}/deploymentQueue"))
        .await
        .expect(200)
        .body;
    assert_eq!(
        service_queue["results"][0]["identifier"]["deployment_request_id"],
        json!(id)
    );
    assert_eq!(
        service_queue["results"][0]["status_details"]["status"],
        "QUEUED"
    );
    assert!(service_queue["results"][0]["icon_uri"].is_string());

    t.post(
        &format!("/deploymentQueue/{id}/cancelDeployment"),
        json!({}),
    )
    .await
    .expect(202);
    let b_done = t.settle(&format!("/container/{b}/status")).await;
    assert_eq!(b_done["state"], "CANCELED", "{b_done}");
    assert!(
        b_done.get("steps").is_none(),
        "a canceled queued request never runs: {b_done}"
    );
    let a_done = t.settle(&format!("/container/{a}/status")).await;
    assert_eq!(a_done["state"], "DEPLOYED");
    t.post(
        &format!("/deploymentQueue/{id}/cancelDeployment"),
        json!({}),
    )
    .await
    .expect_error(409, "the deployment request has already ended");
    t.post(
        &format!("/deploymentQueue/{}/cancelDeployment", uuid::Uuid::new_v4()),
        json!({}),
    )
    .await
    .expect(404);
    assert!(
        t.get(&format!("/service/{b}/deploymentQueue")).await.body["results"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Running: stopped at its next step boundary (here its last step's end).
    let running = t
        .post(&format!("/container/{a}/redeploy"), json!({}))
        .await
        .expect(202)
        .body;
    let id = running["deployment_request_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while t.get(&format!("/container/{a}/status")).await.body["state"] != "DEPLOYING" {
        assert!(std::time::Instant::now() < deadline);
        actix_rt::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    t.post(
        &format!("/deploymentQueue/{id}/cancelDeployment"),
        json!(null),
    )
    .await
    .expect(202);
    let canceled = t.settle(&format!("/container/{a}/status")).await;
    assert_eq!(canceled["state"], "CANCELED", "{canceled}");
    assert_eq!(canceled["status_details"]["status"], "CANCELED");
}

async fn bulk_actions_act_only_on_the_listed_services<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let a = container(&t, &env, "a").await;
    let b = container(&t, &env, "b").await;
    let d = database(&t, &env, "d").await;
    let asked = t
        .post(
            &format!("/environment/{env}/service/deploy"),
            json!({"containers": [{"id": a, "image_tag": "2"}], "databases": [d]}),
        )
        .await
        .expect(202);
    assert_eq!(asked.body["deployment_requests_count"], 2, "{}", asked.text);
    t.settle(&format!("/environment/{env}/status")).await;
    let status = |id: String, kind: &'static str| {
        let t = &t;
        async move { t.get(&format!("/{kind}/{id}/status")).await.body["state"].clone() }
    };
    assert_eq!(status(a.clone(), "container").await, "DEPLOYED");
    assert_eq!(status(b.clone(), "container").await, "READY");
    assert_eq!(status(d.clone(), "database").await, "DEPLOYED");
    assert_eq!(t.get(&format!("/container/{a}")).await.body["tag"], "2");

    t.post(
        &format!("/environment/{env}/service/restart-service"),
        json!({"container_ids": [a]}),
    )
    .await
    .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(status(a.clone(), "container").await, "RESTARTED");
    assert_eq!(status(d.clone(), "database").await, "DEPLOYED");
    t.post(
        &format!("/environment/{env}/service/stop"),
        json!({"database_ids": [d]}),
    )
    .await
    .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(status(d.clone(), "database").await, "STOPPED");
    assert_eq!(status(a.clone(), "container").await, "RESTARTED");
    t.post(
        &format!("/environment/{env}/service/restart-service"),
        json!({"container_ids": [b]}),
    )
    .await
    .expect_error(409, "cannot restart the container 'b'");
    t.post(
        &format!("/environment/{env}/service/stop"),
        json!({"container_ids": [uuid::Uuid::new_v4()]}),
    )
    .await
    .expect_error(400, "container_ids[0]");
    t.post(
        &format!("/environment/{env}/service/stop"),
        json!({"application_ids": [a]}),
    )
    .await
    .expect_error(400, "application_ids[0]");
    t.post(
        &format!("/environment/{env}/service/uninstall"),
        json!({"container_ids": [a]}),
    )
    .await
    .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    let a_now = t.get(&format!("/container/{a}/status")).await.body;
    assert_eq!(a_now["state"], "DELETED");
    assert_eq!(a_now["service_deployment_status"], "NEVER_DEPLOYED");
    t.post(
        &format!("/environment/{env}/service/delete"),
        json!({"container_ids": [b], "database_ids": [d]}),
    )
    .await
    .expect(202);
    t.get(&format!("/container/{b}")).await.expect(404);
    t.gone(&format!("/database/{d}")).await;
    t.get(&format!("/container/{a}")).await.expect(200);
}

async fn an_uninstalled_service_stays_and_deploys_again<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    for (kind, id) in [
        ("container", container(&t, &env, "web").await),
        ("database", database(&t, &env, "db").await),
    ] {
        let status = format!("/{kind}/{id}/status");
        t.post(&format!("/{kind}/{id}/uninstall"), json!({}))
            .await
            .expect(204);
        t.post(&format!("/{kind}/{id}/deploy"), json!({}))
            .await
            .expect(202);
        t.settle(&status).await;
        let asked = t
            .post(&format!("/{kind}/{id}/uninstall"), json!({}))
            .await
            .expect(202)
            .body;
        assert_eq!(asked["state"], "DELETE_QUEUED", "{asked}");
        assert_eq!(asked["status_details"]["action"], "DELETE");
        let done = t.settle(&status).await;
        assert_eq!(done["state"], "DELETED");
        assert_eq!(done["service_deployment_status"], "NEVER_DEPLOYED");
        t.get(&format!("/{kind}/{id}")).await.expect(200);
        t.post(&format!("/{kind}/{id}/restart-service"), json!({}))
            .await
            .expect_error(
                409,
                &format!("cannot restart the {kind}: the service has never been deployed"),
            );
        t.post(&format!("/{kind}/{id}/deploy"), json!({}))
            .await
            .expect(202);
        assert_eq!(t.settle(&status).await["state"], "DEPLOYED");
        let history = t
            .get(&format!("/environment/{env}/deploymentHistoryV2"))
            .await
            .expect(200)
            .body;
        let actions: Vec<&str> = history["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["trigger_action"].as_str().unwrap())
            .take(3)
            .collect();
        assert_eq!(actions, ["DEPLOY", "UNINSTALL", "DEPLOY"], "{history}");
    }
}

async fn histories_show_every_action_newest_first_with_paging<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = container(&t, &env, "web").await;
    let status = format!("/container/{c}/status");
    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    t.post(&format!("/container/{c}/restart-service"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    t.post(&format!("/container/{c}/stop"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;

    let all = t
        .get(&format!("/container/{c}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    assert_eq!(all["page"], 1);
    assert_eq!(all["page_size"], 20);
    let items = all["results"].as_array().unwrap();
    let states: Vec<&str> = items
        .iter()
        .map(|i| i["status"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["STOPPED", "RESTARTED", "DEPLOYED"], "{all}");
    let actions: Vec<&str> = items
        .iter()
        .map(|i| i["status_details"]["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["STOP", "RESTART", "DEPLOY"]);
    let first = &items[2];
    assert_eq!(first["identifier"]["service_id"], json!(c));
    assert_eq!(first["identifier"]["service_type"], "CONTAINER");
    assert_eq!(first["details"]["image_name"], "nginx");
    assert_eq!(first["details"]["tag"], "1");
    assert!(first["auditing_data"]["triggered_by"]
        .as_str()
        .unwrap()
        .starts_with("token:"));
    assert_eq!(first["auditing_data"]["origin"], "API");
    assert!(first["total_duration"].as_str().unwrap().starts_with("PT"));
    let page = t
        .get(&format!("/container/{c}/deploymentHistoryV2?pageSize=1"))
        .await
        .expect(200)
        .body;
    assert_eq!(page["results"].as_array().unwrap().len(), 1);
    assert_eq!(page["results"][0]["status"], "STOPPED");
    let after = page["results"][0]["identifier"]["execution_id"]
        .as_str()
        .unwrap();
    let next = t
        .get(&format!(
            "/container/{c}/deploymentHistoryV2?pageSize=1&startId={after}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(next["results"][0]["status"], "RESTARTED", "{next}");
    let third = t
        .get(&format!(
            "/container/{c}/deploymentHistoryV2?page=3&page_size=1"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(third["results"][0]["status"], "DEPLOYED", "{third}");
    // Paging after an item of an environment-level deployment (its execution_id is the
    // deployment's, not the request's).
    t.post(&format!("/environment/{env}/redeploy"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    let newest = t
        .get(&format!("/container/{c}/deploymentHistoryV2?pageSize=1"))
        .await
        .expect(200)
        .body;
    let execution = newest["results"][0]["identifier"]["execution_id"]
        .as_str()
        .unwrap();
    let next = t
        .get(&format!(
            "/container/{c}/deploymentHistoryV2?pageSize=1&startId={execution}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(next["results"][0]["status"], "STOPPED", "{next}");
    t.get(&format!("/container/{c}/deploymentHistoryV2?pageSize=0"))
        .await
        .expect_error(400, "pageSize");
    t.get(&format!("/container/{c}/deploymentHistoryV2?startId=x"))
        .await
        .expect_error(400, "startId");

    let envs = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    let batches = envs["results"].as_array().unwrap();
    let triggers: Vec<&str> = batches
        .iter()
        .map(|b| b["trigger_action"].as_str().unwrap())
        .collect();
    assert_eq!(triggers, ["DEPLOY", "STOP", "RESTART", "DEPLOY"], "{envs}");
    let deploy = &batches[3];
    assert_eq!(deploy["identifier"]["environment_id"], json!(env));
    assert_eq!(deploy["status"], "DEPLOYED");
    assert_eq!(deploy["action_status"], "SUCCESS");
    assert_eq!(deploy["stages"][0]["name"], "DEFAULT");
    assert_eq!(
        deploy["stages"][0]["services"][0]["identifier"]["name"],
        "web"
    );
    let execution = batches[0]["identifier"]["execution_id"].as_str().unwrap();
    let older = t
        .get(&format!(
            "/environment/{env}/deploymentHistoryV2?pageSize=1&startId={execution}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(older["results"].as_array().unwrap().len(), 1);
    assert_eq!(older["results"][0]["trigger_action"], "STOP", "{older}");
    // A service deleted through the engine: its deletion is in the history after it is gone.
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    t.delete(&format!("/container/{c}")).await.expect(202);
    t.gone(&format!("/container/{c}")).await;
    let latest = t
        .get(&format!(
            "/environment/{env}/deploymentHistoryV2?pageSize=1"
        ))
        .await
        .expect(200)
        .body;
    let deletion = &latest["results"][0];
    assert_eq!(deletion["trigger_action"], "DELETE", "{latest}");
    assert_eq!(deletion["status"], "DELETED");
    assert_eq!(
        deletion["stages"][0]["services"][0]["identifier"]["name"],
        "web"
    );
    assert_eq!(
        deletion["stages"][0]["services"][0]["identifier"]["service_type"],
        "CONTAINER"
    );
    let env_status = t.get(&format!("/environment/{env}/status")).await.body;
    assert_eq!(
        env_status["last_deployment_state"], "DELETED",
        "{env_status}"
    );
    let v1 = t
        .get(&format!("/environment/{env}/deploymentHistory"))
        .await
        .expect(200)
        .body;
    assert_eq!(v1["results"][5]["containers"][0]["name"], "web", "{v1}");
    assert_eq!(v1["results"][5]["status"], "DEPLOYED");
    assert!(v1["results"][0]["id"].is_string() && v1["results"][0]["created_at"].is_string());
}

async fn project_statuses_and_kind_statuses_are_listed_and_paged<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let second = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "second"}),
        )
        .await
        .expect(201)
        .id();
    let listed = t
        .get(&format!("/project/{project}/environment/status"))
        .await
        .expect(200)
        .body;
    let ids: Vec<&Value> = listed["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&json!(env), &json!(second)]);
    assert_eq!(listed["results"][0]["last_deployment_state"], "READY");
    assert_eq!(listed["pagination"]["total_count"], 2);
    let second_page = t
        .get(&format!(
            "/project/{project}/environment/status?page=2&page_size=1"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(
        second_page["results"][0]["id"],
        json!(second),
        "{second_page}"
    );
    t.get(&format!("/project/{project}/environment/status?page=0"))
        .await
        .expect_error(400, "page");
    t.get(&format!(
        "/project/{}/environment/status",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
    container(&t, &env, "a").await;
    container(&t, &env, "b").await;
    let page = t
        .get(&format!(
            "/environment/{env}/container/status?page_size=1&page=2"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(page["results"].as_array().unwrap().len(), 1);
    assert_eq!(page["pagination"]["total_count"], 2, "{page}");
    assert_eq!(page["pagination"]["page"], 2);
    t.get(&format!("/environment/{env}/container/status?page_size=0"))
        .await
        .expect_error(400, "page_size");
}

async fn a_failed_environment_deletion_is_a_deployment_of_its_own_and_can_be_asked_again<S: App>(
    t: T<S>,
) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let stubborn = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "stubborn", "registry_id": registry, "image_name": "nginx", "tag": "1",
                   "description": "capstan-fail-delete"}),
        )
        .await
        .expect(201)
        .id();
    let later = container(&t, &env, "later").await;
    let stage = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "later"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("/deploymentStage/{stage}/service/{later}"),
        json!({}),
    )
    .await
    .expect(200);
    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    t.delete(&format!("/environment/{env}")).await.expect(202);
    // A deletion goes to its end even when an earlier stage's fails.
    t.gone(&format!("/container/{later}")).await;
    let failed = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(failed["last_deployment_state"], "DELETE_ERROR", "{failed}");
    assert_eq!(
        t.get(&format!("/container/{stubborn}/status")).await.body["state"],
        "DELETE_ERROR"
    );
    t.put(
        &format!("/container/{stubborn}"),
        json!({"name": "stubborn", "registry_id": registry, "image_name": "nginx", "tag": "1",
               "description": ""}),
    )
    .await
    .expect(200);
    let again = t
        .delete(&format!("/environment/{env}"))
        .await
        .expect(202)
        .body;
    assert_ne!(
        again["last_deployment_id"], failed["last_deployment_id"],
        "a deployment of its own"
    );
    let history = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    let deletions: Vec<&Value> = history["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["trigger_action"] == "DELETE")
        .collect();
    assert_eq!(deletions.len(), 2, "{history}");
    assert_ne!(
        deletions[0]["identifier"]["execution_id"],
        deletions[1]["identifier"]["execution_id"]
    );
    assert_eq!(deletions[1]["status"], "DELETE_ERROR");
    t.gone(&format!("/environment/{env}")).await;
}

async fn a_bulk_deployment_of_an_application_never_deployed_needs_a_commit<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api.git"}}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/environment/{env}/service/deploy"),
        json!({"applications": [{"application_id": app}]}),
    )
    .await
    .expect_error(400, "applications[0].git_commit_id");
    t.post(
        &format!("/environment/{env}/service/deploy"),
        json!({"helms": [{"chart_version": "1"}]}),
    )
    .await
    .expect_error(400, "helms[0].id: is required");
    t.post(
        &format!("/environment/{env}/service/deploy"),
        json!({"applications": [{"application_id": app, "git_commit_id": "abc123"}]}),
    )
    .await
    .expect(202);
    let done = t.settle(&format!("/application/{app}/status")).await;
    assert_eq!(done["state"], "DEPLOYED");
    // Deployed once, a commit may be left out: the deployed one is deployed again.
    t.post(
        &format!("/environment/{env}/service/deploy"),
        json!({"applications": [{"application_id": app}]}),
    )
    .await
    .expect(202);
    assert_eq!(
        t.settle(&format!("/application/{app}/status")).await["state"],
        "DEPLOYED"
    );
}

/// The `deployment_request_id` of each listed service's status.
async fn shown_requests<S: App>(t: &T<S>, services: &[&str]) -> Vec<Value> {
    let mut ids = Vec::new();
    for s in services {
        ids.push(
            t.get(&format!("/container/{s}/status")).await.body["deployment_request_id"].clone(),
        );
    }
    ids
}

async fn one_deployment_has_one_id_from_its_action_to_its_services_queue_cancel_and_histories<
    S: App,
>(
    t: T<S>,
) {
    let (_, _, env) = t.hierarchy().await;
    let a = container(&t, &env, "a").await;
    let b = container(&t, &env, "b").await;
    // b in a later stage: it waits while a runs, so the cancel finds both a running and a
    // waiting part of the deployment.
    let later = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "later"}),
        )
        .await
        .expect(201)
        .id();
    t.put(&format!("/deploymentStage/{later}/service/{b}"), json!({}))
        .await
        .expect(200);
    let asked = t
        .post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202)
        .body;
    let id = asked["deployment_request_id"].clone();
    assert!(id.is_string(), "{asked}");
    assert_eq!(
        shown_requests(&t, &[&a, &b]).await,
        [id.clone(), id.clone()]
    );
    let statuses = t
        .get(&format!("/environment/{env}/statuses"))
        .await
        .expect(200)
        .body;
    for s in statuses["containers"].as_array().unwrap() {
        assert_eq!(s["deployment_request_id"], id, "{statuses}");
        assert_eq!(s["execution_id"], id, "{statuses}");
    }
    let queue = t
        .get(&format!("/environment/{env}/deploymentQueue"))
        .await
        .expect(200)
        .body;
    assert_eq!(
        queue["results"][0]["identifier"]["deployment_request_id"],
        id
    );
    let service_queue = t
        .get(&format!("/service/{b}/deploymentQueue"))
        .await
        .expect(200)
        .body;
    assert_eq!(
        service_queue["results"][0]["identifier"]["deployment_request_id"],
        id
    );

    t.post(
        &format!("/deploymentQueue/{}/cancelDeployment", id.as_str().unwrap()),
        json!({}),
    )
    .await
    .expect(202);
    let b_done = t.settle(&format!("/container/{b}/status")).await;
    assert_eq!(b_done["state"], "CANCELED", "{b_done}");
    assert_eq!(
        b_done["deployment_request_id"], id,
        "the canceled one shows it"
    );
    let a_done = t.settle(&format!("/container/{a}/status")).await;
    assert_eq!(a_done["deployment_request_id"], id);
    let env_status = t
        .get(&format!("/environment/{env}/status"))
        .await
        .expect(200)
        .body;
    assert_eq!(env_status["deployment_request_id"], id);

    let env_history = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    assert_eq!(env_history["results"][0]["identifier"]["execution_id"], id);
    for s in [&a, &b] {
        let v2 = t
            .get(&format!("/container/{s}/deploymentHistoryV2"))
            .await
            .expect(200)
            .body;
        assert_eq!(v2["results"][0]["identifier"]["execution_id"], id, "{v2}");
    }
    let v1 = t
        .get(&format!("/container/{a}/deploymentHistory"))
        .await
        .expect(200)
        .body;
    assert_eq!(v1["results"][0]["id"], id, "{v1}");

    // A bulk action: one id for the services it carries.
    let bulk = t
        .post(
            &format!("/environment/{env}/service/deploy"),
            json!({"containers": [{"id": a}, {"id": b}]}),
        )
        .await
        .expect(202)
        .body;
    let bulk_id = bulk["deployment_request_id"].clone();
    assert_ne!(bulk_id, id);
    assert_eq!(
        shown_requests(&t, &[&a, &b]).await,
        [bulk_id.clone(), bulk_id.clone()]
    );
    t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(
        shown_requests(&t, &[&a, &b]).await,
        [bulk_id.clone(), bulk_id]
    );
}

async fn the_deployment_status_of_a_request_answers_its_public_shape<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let a = container(&t, &env, "a").await;
    let asked = t
        .post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202)
        .body;
    let id = asked["deployment_request_id"].as_str().unwrap().to_string();
    let running = t
        .get(&format!(
            "/environment/deploymentStatus?deploymentRequestId={id}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(running["deployment_request_id"], json!(id), "{running}");
    assert_eq!(running["environment_id"], json!(env));
    let state = running["status"].as_str().unwrap();
    assert!(
        ["DEPLOYMENT_QUEUED", "DEPLOYING", "DEPLOYED"].contains(&state),
        "{running}"
    );
    t.settle(&format!("/environment/{env}/status")).await;
    let done = t
        .get(&format!(
            "/environment/deploymentStatus?deploymentRequestId={id}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(
        done,
        json!({"deployment_request_id": id, "environment_id": env, "status": "DEPLOYED"})
    );
    // A single service's request is a deployment of its own, asked by either id.
    let restart = t
        .post(&format!("/container/{a}/restart-service"), json!({}))
        .await
        .expect(202)
        .body;
    let restart_id = restart["deployment_request_id"]
        .as_str()
        .unwrap()
        .to_string();
    t.settle(&format!("/container/{a}/status")).await;
    let restarted = t
        .get(&format!(
            "/environment/deploymentStatus?deploymentRequestId={restart_id}"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(restarted["status"], "RESTARTED", "{restarted}");
    assert_eq!(restarted["deployment_request_id"], json!(restart_id));
    t.get(&format!(
        "/environment/deploymentStatus?deploymentRequestId={}",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
}

async fn the_older_service_history_pages_after_start_id<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = container(&t, &env, "web").await;
    let status = format!("/container/{c}/status");
    let mut ids = Vec::new();
    for tag in ["1.1", "1.2", "1.3"] {
        let asked = t
            .post(&format!("/container/{c}/deploy"), json!({"image_tag": tag}))
            .await
            .expect(202)
            .body;
        ids.push(asked["deployment_request_id"].as_str().unwrap().to_string());
        t.settle(&status).await;
    }
    let first = t
        .get(&format!("/container/{c}/deploymentHistory?pageSize=1"))
        .await
        .expect(200)
        .body;
    assert_eq!(first["results"][0]["id"], json!(ids[2]), "{first}");
    assert_eq!(first["results"][0]["tag"], "1.3");
    let next = t
        .get(&format!(
            "/container/{c}/deploymentHistory?startId={}",
            ids[2]
        ))
        .await
        .expect(200)
        .body;
    let tags: Vec<&str> = next["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["tag"].as_str().unwrap())
        .collect();
    assert_eq!(
        tags,
        ["1.2", "1.1"],
        "the given id is not on the page: {next}"
    );
    let last = t
        .get(&format!(
            "/container/{c}/deploymentHistory?startId={}&pageSize=1",
            ids[1]
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(last["results"][0]["id"], json!(ids[0]), "{last}");
    t.get(&format!("/container/{c}/deploymentHistory?startId=nope"))
        .await
        .expect_error(400, "startId");
}
