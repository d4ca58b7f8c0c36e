//! Deployment stages over HTTP: every environment has one, every service is in one, stages are
//! edited and reordered, and an environment's deployment runs them in order; on both backends.

use crate::common;

use common::{App, T};
use serde_json::{json, Value};

http_suite_with_memory!(
    a_new_environment_has_a_default_stage_that_new_services_land_in,
    stages_are_created_edited_reordered_and_deleted_when_empty,
    services_move_between_stages_and_may_be_skipped,
    an_environment_deployment_runs_stage_by_stage,
    a_failure_stops_the_later_stages,
    a_clone_copies_the_stages,
    stages_of_another_organization_are_forbidden,
    statuses_come_stage_by_stage_in_deployment_order,
);

async fn container<S: App>(t: &T<S>, env: &str, name: &str, description: &str) -> String {
    let registry = t.registry().await;
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": name, "registry_id": registry, "image_name": "nginx", "tag": "1",
               "description": description}),
    )
    .await
    .expect(201)
    .id()
}

async fn stages<S: App>(t: &T<S>, env: &str) -> Vec<Value> {
    t.get(&format!("/environment/{env}/deploymentStage"))
        .await
        .expect(200)
        .body["results"]
        .as_array()
        .unwrap()
        .clone()
}

fn names(stages: &[Value]) -> Vec<String> {
    stages
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

fn service_ids(stage: &Value) -> Vec<String> {
    stage["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["service_id"].as_str().unwrap().to_string())
        .collect()
}

async fn a_new_environment_has_a_default_stage_that_new_services_land_in<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let all = stages(&t, &env).await;
    assert_eq!(names(&all), ["DEFAULT"]);
    assert_eq!(all[0]["deployment_order"], 1);
    assert_eq!(all[0]["environment"]["id"], json!(env));
    assert_eq!(all[0]["description"], "", "always a string");
    assert!(all[0]["id"].is_string() && all[0]["created_at"].is_string());
    let c = container(&t, &env, "web", "").await;
    let all = stages(&t, &env).await;
    assert_eq!(service_ids(&all[0]), vec![c.clone()]);
    let member = &all[0]["services"][0];
    assert_eq!(member["service_type"], "CONTAINER");
    assert_eq!(member["is_skipped"], false);
    assert!(member["id"].is_string() && member["created_at"].is_string());
    let mine = t
        .get(&format!("/service/{c}/deploymentStage"))
        .await
        .expect(200);
    assert_eq!(mine.body["id"], all[0]["id"]);
}

async fn stages_are_created_edited_reordered_and_deleted_when_empty<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let path = format!("/environment/{env}/deploymentStage");
    let infra = t
        .post(
            &path,
            json!({"name": "infra", "description": "databases first"}),
        )
        .await
        .expect(201);
    assert_eq!(infra.body["deployment_order"], 2, "a new stage runs last");
    assert_eq!(infra.body["description"], "databases first");
    t.post(&path, json!({"name": "INFRA"}))
        .await
        .expect_error(409, "a deployment stage named 'INFRA' already exists");
    t.post(&path, json!({"description": "x"}))
        .await
        .expect_error(400, "");
    let jobs = t
        .post(&path, json!({"name": "jobs"}))
        .await
        .expect(201)
        .id();
    let infra = infra.id();
    assert_eq!(names(&stages(&t, &env).await), ["DEFAULT", "infra", "jobs"]);

    let moved = t
        .put(
            &format!(
                "/deploymentStage/{infra}/moveBefore/{}",
                stages(&t, &env).await[0]["id"].as_str().unwrap()
            ),
            json!(null),
        )
        .await
        .expect(200);
    assert_eq!(
        names(moved.body["results"].as_array().unwrap()),
        ["infra", "DEFAULT", "jobs"]
    );
    let orders: Vec<i64> = moved.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["deployment_order"].as_i64().unwrap())
        .collect();
    assert_eq!(orders, [1, 2, 3]);
    t.put(
        &format!("/deploymentStage/{jobs}/moveAfter/{infra}"),
        json!({}),
    )
    .await
    .expect(200);
    assert_eq!(names(&stages(&t, &env).await), ["infra", "jobs", "DEFAULT"]);

    let edited = t
        .put(
            &format!("/deploymentStage/{jobs}"),
            json!({"name": "batch", "description": null}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["name"], "batch");
    assert_eq!(edited.body["description"], "");
    assert_eq!(
        t.get(&format!("/deploymentStage/{jobs}"))
            .await
            .expect(200)
            .body["name"],
        "batch"
    );

    let c = container(&t, &env, "web", "").await;
    t.put(&format!("/deploymentStage/{jobs}/service/{c}"), json!(null))
        .await
        .expect(200);
    let refused = t
        .delete(&format!("/deploymentStage/{jobs}"))
        .await
        .expect_error(409, "the deployment stage 'batch' still holds 1 service");
    assert!(refused.body["message"]
        .as_str()
        .unwrap()
        .contains("move it to another stage"));
    t.delete(&format!("/deploymentStage/{infra}"))
        .await
        .expect(204);
    t.get(&format!("/deploymentStage/{infra}"))
        .await
        .expect(404);
    assert_eq!(names(&stages(&t, &env).await), ["batch", "DEFAULT"]);
    t.get(&format!("/deploymentStage/{}", uuid::Uuid::new_v4()))
        .await
        .expect(404);
    t.get("/deploymentStage/not-a-uuid").await.expect(400);
}

async fn services_move_between_stages_and_may_be_skipped<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let (_, _, other_env) = {
        let p = t
            .post(
                &format!("/organization/{}/project", t.org),
                json!({"name": "other"}),
            )
            .await
            .expect(201)
            .id();
        let e = t
            .post(&format!("/project/{p}/environment"), json!({"name": "e2"}))
            .await
            .expect(201)
            .id();
        ((), p, e)
    };
    let a = container(&t, &env, "a", "").await;
    let b = container(&t, &env, "b", "").await;
    let late = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "late"}),
        )
        .await
        .expect(201)
        .id();
    let all = t
        .put(&format!("/deploymentStage/{late}/service/{b}"), json!({}))
        .await
        .expect(200)
        .body;
    let all = all["results"].as_array().unwrap();
    assert_eq!(service_ids(&all[0]), vec![a.clone()]);
    assert_eq!(service_ids(&all[1]), vec![b.clone()]);
    // Skipped: kept in the stage, left out of environment deployments.
    t.put(
        &format!("/deploymentStage/{late}/service/{a}"),
        json!({"is_skipped": true}),
    )
    .await
    .expect(200);
    let mine = t
        .get(&format!("/service/{a}/deploymentStage"))
        .await
        .expect(200);
    assert_eq!(mine.body["id"], json!(late));
    let skipped = mine.body["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["service_id"] == json!(a))
        .unwrap()
        .clone();
    assert_eq!(skipped["is_skipped"], true);
    let deployed = t
        .post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        deployed.body["deployment_requests_count"], 1,
        "{}",
        deployed.text
    );
    t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(
        t.get(&format!("/container/{a}/status")).await.body["state"],
        "READY",
        "a skipped service is not deployed with its environment"
    );
    assert_eq!(
        t.get(&format!("/container/{b}/status")).await.body["state"],
        "DEPLOYED"
    );
    // Unskipped by attaching again.
    t.put(&format!("/deploymentStage/{late}/service/{a}"), json!(null))
        .await
        .expect(200);
    let mine = t
        .get(&format!("/service/{a}/deploymentStage"))
        .await
        .expect(200);
    assert!(mine.body["services"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["is_skipped"] == false));
    // A stage of another environment cannot take the service.
    let foreign = t
        .get(&format!("/environment/{other_env}/deploymentStage"))
        .await
        .body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/deploymentStage/{foreign}/service/{a}"),
        json!({}),
    )
    .await
    .expect_error(400, "serviceId");
    t.put(
        &format!("/deploymentStage/{late}/moveBefore/{foreign}"),
        json!({}),
    )
    .await
    .expect_error(400, "stageId");
    t.put(
        &format!("/deploymentStage/{late}/service/{}", uuid::Uuid::new_v4()),
        json!({}),
    )
    .await
    .expect(404);
}

/// States a service passes through before it starts.
fn waiting(state: &Value) -> bool {
    ["READY", "DEPLOYMENT_QUEUED", "WAITING_RUNNING"].contains(&state.as_str().unwrap())
}

async fn an_environment_deployment_runs_stage_by_stage<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    // Created first, but in the stage that runs second.
    let later = container(&t, &env, "later", "").await;
    let later_too = container(&t, &env, "later-too", "").await;
    let first = container(&t, &env, "first", "").await;
    let stage = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "first"}),
        )
        .await
        .expect(201)
        .id();
    let default = stages(&t, &env).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/deploymentStage/{stage}/moveBefore/{default}"),
        json!({}),
    )
    .await
    .expect(200);
    t.put(
        &format!("/deploymentStage/{stage}/service/{first}"),
        json!({}),
    )
    .await
    .expect(200);
    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let all = t
            .get(&format!("/environment/{env}/statuses"))
            .await
            .expect(200)
            .body;
        let state_of = |id: &str| -> Value {
            all["containers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == json!(id))
                .unwrap()["state"]
                .clone()
        };
        for id in [&later, &later_too] {
            if !waiting(&state_of(id)) {
                assert_eq!(
                    state_of(&first),
                    "DEPLOYED",
                    "a later stage's service started before the earlier stage was done: {all}"
                );
            }
        }
        if all["environment"]["deployment_requests_count"] == 0 {
            assert_eq!(
                all["environment"]["last_deployment_state"], "DEPLOYED",
                "{all}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never settled: {all}");
        actix_rt::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let history = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    let stages_run: Vec<&str> = history["results"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages_run, ["first", "DEFAULT"], "{history}");
    for s in history["results"][0]["stages"].as_array().unwrap() {
        assert_eq!(s["status"], "DONE", "{history}");
    }
}

async fn a_failure_stops_the_later_stages<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let failing = container(&t, &env, "failing", "capstan-fail-deploy").await;
    let after = container(&t, &env, "after", "").await;
    let stage = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "after"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("/deploymentStage/{stage}/service/{after}"),
        json!({}),
    )
    .await
    .expect(200);
    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    let status = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(
        status["last_deployment_state"], "DEPLOYMENT_ERROR",
        "{status}"
    );
    assert_eq!(status["state"], "DEPLOYMENT_ERROR");
    assert_eq!(status["status_details"]["status"], "ERROR");
    let failed = t.get(&format!("/container/{failing}/status")).await.body;
    assert_eq!(failed["state"], "DEPLOYMENT_ERROR");
    let skipped = t.get(&format!("/container/{after}/status")).await.body;
    assert_eq!(skipped["state"], "CANCELED", "{skipped}");
    assert_eq!(skipped["status_details"]["status"], "CANCELED");
    assert!(
        skipped.get("steps").is_none(),
        "it never started: {skipped}"
    );
    let history = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    let stages = history["results"][0]["stages"].as_array().unwrap();
    assert_eq!(stages[0]["status"], "ERROR", "{history}");
    assert_eq!(stages[1]["status"], "SKIPPED", "{history}");
    assert_eq!(history["results"][0]["status"], "DEPLOYMENT_ERROR");
    assert_eq!(history["results"][0]["action_status"], "ERROR");
}

async fn a_clone_copies_the_stages<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = container(&t, &env, "web", "").await;
    let stage = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "first", "description": "d"}),
        )
        .await
        .expect(201)
        .id();
    let default = stages(&t, &env).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/deploymentStage/{stage}/moveBefore/{default}"),
        json!({}),
    )
    .await
    .expect(200);
    t.put(
        &format!("/deploymentStage/{stage}/service/{c}"),
        json!({"is_skipped": true}),
    )
    .await
    .expect(200);
    let clone = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy"}),
        )
        .await
        .expect(202)
        .id();
    let copied = stages(&t, &clone).await;
    assert_eq!(names(&copied), ["first", "DEFAULT"]);
    assert_ne!(copied[0]["id"], json!(stage), "fresh ids");
    assert_eq!(copied[0]["description"], "d");
    assert_eq!(copied[0]["environment"]["id"], json!(clone));
    let member = &copied[0]["services"][0];
    assert_ne!(member["service_id"], json!(c), "the copy of the service");
    assert_eq!(member["is_skipped"], true);
    assert!(copied[1]["services"].as_array().unwrap().is_empty());
}

async fn stages_of_another_organization_are_forbidden<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let stage = stages(&t, &env).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, stranger) = t
        .capstan
        .bootstrap_organization("Other", domain::auth::Role::Admin, "o")
        .await
        .unwrap();
    let stranger = stranger.value;
    for (method, path) in [
        (
            actix_web::http::Method::GET,
            format!("/deploymentStage/{stage}"),
        ),
        (
            actix_web::http::Method::GET,
            format!("/environment/{env}/deploymentStage"),
        ),
        (
            actix_web::http::Method::DELETE,
            format!("/deploymentStage/{stage}"),
        ),
    ] {
        t.call(Some(&stranger), method, &path, None)
            .await
            .expect(403);
    }
}

async fn statuses_come_stage_by_stage_in_deployment_order<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let web = container(&t, &env, "web", "").await;
    let api = container(&t, &env, "api", "").await;
    let data = t
        .post(
            &format!("/environment/{env}/deploymentStage"),
            json!({"name": "data", "description": "first"}),
        )
        .await
        .expect(201)
        .id();
    let default = stages(&t, &env).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    t.put(
        &format!("/deploymentStage/{data}/moveBefore/{default}"),
        json!({}),
    )
    .await
    .expect(200);
    t.put(&format!("/deploymentStage/{data}/service/{api}"), json!({}))
        .await
        .expect(200);
    let staged = t
        .get(&format!("/environment/{env}/statusesWithStages"))
        .await
        .expect(200)
        .body;
    assert_eq!(staged["environment"]["id"], json!(env));
    let stages = staged["stages"].as_array().unwrap();
    let names: Vec<&str> = stages
        .iter()
        .map(|s| s["stage"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["data", "DEFAULT"], "in deployment order");
    assert_eq!(stages[0]["stage"]["description"], "first");
    assert_eq!(stages[0]["containers"][0]["id"], json!(api));
    assert_eq!(stages[0]["containers"].as_array().unwrap().len(), 1);
    assert_eq!(stages[1]["containers"][0]["id"], json!(web));
    assert_eq!(stages[1]["containers"][0]["state"], "READY");
    assert!(stages[1]["applications"].as_array().unwrap().is_empty());
    t.get(&format!(
        "/environment/{}/statusesWithStages",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
}
