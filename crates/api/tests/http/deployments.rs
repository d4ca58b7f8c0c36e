//! Deployments over HTTP: actions answer 202 with the service's status, the simulated engine
//! walks them to a settled state, statuses and histories follow, on both backends.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    deploying_an_application_records_the_commit,
    a_helm_diff_changes_nothing,
    environment_statuses_list_every_application,
    restarting_a_container_needs_a_deployment,
    container_history_shows_what_was_deployed_newest_first,
    every_kind_deploys_redeploys_restarts_stops_and_is_deleted,
    environments_deploy_stop_and_delete_through_the_engine,
    simulated_failures_end_in_the_matching_error_state,
    configuration_changes_make_a_deployed_service_out_of_date,
    links_are_empty_until_an_engine_publishes_ports,
    a_report_counts_only_from_its_services_cluster,
    output_ingress_and_failed_jobs_answer_on_an_engine_that_runs_nothing,
    terraform_versions_and_resources_answer_on_an_engine_that_keeps_no_state,
    terraform_actions_show_as_their_sub_action_trigger_and_audit_words,
);

async fn service<S: App>(t: &T<S>, env: &str, kind: &str) -> String {
    let registry = t.registry().await;
    let body = service_bodies(&registry)
        .into_iter()
        .find(|(k, _)| *k == kind)
        .unwrap()
        .1;
    t.post(&format!("/environment/{env}/{kind}"), body)
        .await
        .expect(201)
        .id()
}

fn assert_status_shape(s: &Value, id: &str) {
    assert_eq!(s["id"], json!(id), "{s}");
    for member in [
        "state",
        "service_deployment_status",
        "is_part_last_deployment",
        "status_details",
        "deployment_request_id",
        "deployment_requests_count",
    ] {
        assert!(s.get(member).is_some(), "{member} missing from {s}");
    }
    assert_eq!(s["status_details"]["sub_action"], "NONE", "{s}");
}

async fn deploying_an_application_records_the_commit<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = service(&t, &env, "application").await;
    t.post(&format!("/application/{app}/deploy"), json!({}))
        .await
        .expect_error(400, "git_commit_id");
    t.call(
        Some(&t.token.clone()),
        actix_web::http::Method::POST,
        &format!("/application/{app}/deploy"),
        None,
    )
    .await
    .expect_error(400, "git_commit_id");

    let accepted = t
        .post(
            &format!("/application/{app}/deploy"),
            json!({"git_commit_id": "4f2a9c1"}),
        )
        .await
        .expect(202);
    assert_status_shape(&accepted.body, &app);
    assert_eq!(accepted.body["service_deployment_status"], "NEVER_DEPLOYED");
    assert_eq!(accepted.body["deployment_requests_count"], 1);
    assert_eq!(accepted.body["status_details"]["action"], "DEPLOY");
    assert!(accepted.body["deployment_request_id"].is_string());

    let done = t.settle(&format!("/application/{app}/status")).await;
    assert_status_shape(&done, &app);
    assert_eq!(done["state"], "DEPLOYED", "{done}");
    assert_eq!(done["service_deployment_status"], "UP_TO_DATE");
    assert_eq!(done["status_details"]["status"], "SUCCESS");
    assert_eq!(done["is_part_last_deployment"], true);
    assert_eq!(
        done["deployment_request_id"],
        accepted.body["deployment_request_id"]
    );
    assert!(done["last_deployment_date"].is_string());
    let steps = &done["steps"];
    assert!(steps["total_duration_sec"].is_i64(), "{done}");
    let names: Vec<&str> = steps["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["step_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["BUILD_QUEUEING", "BUILD", "DEPLOYMENT"],
        "built from git"
    );

    let shown = t.get(&format!("/application/{app}")).await.expect(200);
    assert_eq!(
        shown.body["git_repository"]["deployed_commit_id"],
        "4f2a9c1"
    );
    assert!(shown.body["git_repository"]["deployed_commit_date"].is_string());
}

async fn a_helm_diff_changes_nothing<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let helm = service(&t, &env, "helm").await;
    t.post(
        &format!("/helm/{helm}/redeploy?forceEvent=UPGRADE"),
        json!({}),
    )
    .await
    .expect_error(400, "forceEvent");
    let diff = t
        .post(&format!("/helm/{helm}/redeploy?forceEvent=DIFF"), json!({}))
        .await
        .expect(202);
    assert_status_shape(&diff.body, &helm);
    let done = t.settle(&format!("/helm/{helm}/status")).await;
    assert_eq!(
        done["service_deployment_status"], "NEVER_DEPLOYED",
        "{done}"
    );
    // A diff leaves the status as it was: state, details and request id all describe the
    // request before it (none here).
    assert_eq!(done["state"], "READY", "{done}");
    assert_eq!(done["status_details"]["status"], "NEVER");
    assert_eq!(done["deployment_request_id"], json!(null));

    t.post(&format!("/helm/{helm}/redeploy"), json!({}))
        .await
        .expect(202);
    let done = t.settle(&format!("/helm/{helm}/status")).await;
    assert_eq!(done["state"], "DEPLOYED");
    assert_eq!(done["service_deployment_status"], "UP_TO_DATE");
    let history = t
        .get(&format!("/helm/{helm}/deploymentHistory"))
        .await
        .expect(200);
    let items = history.body["results"].as_array().unwrap();
    assert_eq!(items.len(), 1, "a diff is not a deployment");
    assert_eq!(items[0]["chart_version"], "19.0.0");
}

async fn environment_statuses_list_every_application<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let a = service(&t, &env, "application").await;
    let mut body = service_bodies("unused")[0].1.clone();
    body["name"] = json!("worker");
    let b = t
        .post(&format!("/environment/{env}/application"), body)
        .await
        .expect(201)
        .id();
    service(&t, &env, "database").await;
    t.post(
        &format!("/application/{a}/deploy"),
        json!({"git_commit_id": "abc"}),
    )
    .await
    .expect(202);
    t.settle(&format!("/application/{a}/status")).await;
    let list = t
        .get(&format!("/environment/{env}/application/status"))
        .await
        .expect(200);
    let results = list.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "applications only: {}", list.text);
    let by_id = |id: &str| results.iter().find(|s| s["id"] == json!(id)).unwrap();
    assert_status_shape(by_id(&a), &a);
    assert_eq!(by_id(&a)["state"], "DEPLOYED");
    assert_eq!(by_id(&b)["state"], "READY");
    assert_eq!(by_id(&b)["status_details"]["status"], "NEVER");
    assert!(by_id(&b)["deployment_request_id"].is_null());
    t.get("/environment/00000000-0000-4000-8000-000000000000/application/status")
        .await
        .expect(404);
}

async fn restarting_a_container_needs_a_deployment<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = service(&t, &env, "container").await;
    t.post(&format!("/container/{c}/restart-service"), json!({}))
        .await
        .expect_error(
            409,
            "cannot restart the container: the service has never been deployed",
        );
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    // Asked while the deployment waits: queued behind it, not refused.
    let restart = t
        .call(
            Some(&t.token.clone()),
            actix_web::http::Method::POST,
            &format!("/container/{c}/restart-service"),
            None,
        )
        .await
        .expect(202);
    assert_status_shape(&restart.body, &c);
    // The status describes the request first in line (the deployment), and counts both.
    assert_eq!(restart.body["status_details"]["action"], "DEPLOY");
    assert_eq!(restart.body["deployment_requests_count"], 2);
    let done = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(done["state"], "RESTARTED", "{done}");
    assert_eq!(done["service_deployment_status"], "UP_TO_DATE");
}

async fn container_history_shows_what_was_deployed_newest_first<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = service(&t, &env, "container").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    t.post(
        &format!("/container/{c}/deploy"),
        json!({"image_tag": "1.28"}),
    )
    .await
    .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(
        t.get(&format!("/container/{c}")).await.body["tag"],
        "1.28",
        "a deployed tag becomes the configured one"
    );
    let history = t
        .get(&format!("/container/{c}/deploymentHistory"))
        .await
        .expect(200);
    assert_eq!(history.body["page"], 1);
    assert_eq!(history.body["page_size"], 100);
    let items = history.body["results"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["tag"], "1.28", "newest first");
    assert_eq!(items[1]["tag"], "1.27");
    for item in items {
        assert_eq!(item["name"], "web");
        assert_eq!(item["image_name"], "nginx");
        assert_eq!(item["arguments"], json!(["-g", "daemon off;"]));
        assert_eq!(item["entrypoint"], "/docker-entrypoint.sh");
        assert_eq!(item["status"], "DEPLOYED");
        assert!(item["id"].is_string() && item["created_at"].is_string());
    }
    let second = t
        .get(&format!(
            "/container/{c}/deploymentHistory?page=2&page_size=1"
        ))
        .await
        .expect(200);
    assert_eq!(second.body["results"][0]["tag"], "1.27");
    assert_eq!(second.body["page_size"], 1);
}

async fn every_kind_deploys_redeploys_restarts_stops_and_is_deleted<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    for kind in [
        "application",
        "container",
        "database",
        "job",
        "helm",
        "terraform",
    ] {
        let id = service(&t, &env, kind).await;
        let status = format!("/{kind}/{id}/status");
        let deploy = if kind == "application" {
            json!({"git_commit_id": "c0ffee"})
        } else {
            json!({})
        };
        t.post(&format!("/{kind}/{id}/deploy"), deploy)
            .await
            .expect(202);
        assert_eq!(t.settle(&status).await["state"], "DEPLOYED", "{kind}");
        t.post(&format!("/{kind}/{id}/redeploy"), json!({}))
            .await
            .expect(202);
        assert_eq!(t.settle(&status).await["state"], "DEPLOYED", "{kind}");
        t.post(&format!("/{kind}/{id}/restart-service"), json!({}))
            .await
            .expect(202);
        assert_eq!(t.settle(&status).await["state"], "RESTARTED", "{kind}");
        t.post(&format!("/{kind}/{id}/stop"), json!({}))
            .await
            .expect(202);
        assert_eq!(t.settle(&status).await["state"], "STOPPED", "{kind}");
        t.post(&format!("/{kind}/{id}/restart-service"), json!({}))
            .await
            .expect_error(
                409,
                &format!("cannot restart the {kind}: the service is stopped"),
            );
        let history = t
            .get(&format!("/{kind}/{id}/deploymentHistory"))
            .await
            .expect(200);
        assert_eq!(
            history.body["results"].as_array().unwrap().len(),
            2,
            "{kind}"
        );

        let deleting = t.delete(&format!("/{kind}/{id}")).await.expect(202);
        assert_eq!(
            deleting.body["status_details"]["action"], "DELETE",
            "{kind}"
        );
        t.gone(&format!("/{kind}/{id}")).await;
    }
    // Never deployed: deleted at once.
    let db = service(&t, &env, "database").await;
    t.delete(&format!("/database/{db}")).await.expect(204);
}

async fn environments_deploy_stop_and_delete_through_the_engine<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = service(&t, &env, "container").await;
    let db = service(&t, &env, "database").await;
    let never = t
        .get(&format!("/environment/{env}/status"))
        .await
        .expect(200);
    assert_eq!(never.body["state"], "READY");
    assert_eq!(never.body["service_deployment_status"], "NEVER_DEPLOYED");
    t.post(&format!("/environment/{env}/cancelDeployment"), json!({}))
        .await
        .expect_error(409, "the environment has no deployment to cancel");

    let deploying = t
        .post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(deploying.body["deployment_requests_count"], 2);
    let status = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(status["state"], "DEPLOYED", "{status}");
    assert_eq!(status["last_deployment_state"], "DEPLOYED", "{status}");
    assert_eq!(status["service_deployment_status"], "UP_TO_DATE");
    assert_eq!(status["deployment_status"], "UP_TO_DATE");
    let status = t
        .get(&format!("/environment/{env}/statuses"))
        .await
        .expect(200)
        .body;
    assert_eq!(status["environment"]["state"], "DEPLOYED", "{status}");
    assert_eq!(status["containers"][0]["id"], json!(c));
    assert_eq!(status["databases"][0]["id"], json!(db));
    assert_eq!(status["containers"][0]["is_part_last_deployment"], true);
    assert_eq!(status["databases"][0]["is_part_last_deployment"], true);

    t.post(&format!("/environment/{env}/stop"), json!({}))
        .await
        .expect(202);
    let status = t.settle(&format!("/environment/{env}/status")).await;
    assert_eq!(status["state"], "STOPPED", "{status}");
    let status = t
        .get(&format!("/environment/{env}/statuses"))
        .await
        .expect(200)
        .body;
    assert_eq!(status["containers"][0]["state"], "STOPPED");
    assert_eq!(status["databases"][0]["state"], "STOPPED");

    let deleting = t.delete(&format!("/environment/{env}")).await.expect(202);
    assert!(deleting.body["deployment_requests_count"].as_u64().unwrap() >= 1);
    // No service starts in an environment on its way out (it would go with it unseen).
    let late = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "late", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await;
    assert!(
        late.status == 409 || late.status == 404,
        "refused while the environment is being deleted (or gone): {} {}",
        late.status,
        late.body
    );
    t.gone(&format!("/environment/{env}")).await;
    t.get(&format!("/container/{c}")).await.expect(404);
}

async fn simulated_failures_end_in_the_matching_error_state<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = service(&t, &env, "application").await;
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "capstan-fail-build"}),
    )
    .await
    .expect(202);
    let failed = t.settle(&format!("/application/{app}/status")).await;
    assert_eq!(failed["state"], "BUILD_ERROR", "{failed}");
    assert_eq!(failed["status_details"]["status"], "ERROR");
    assert_eq!(failed["service_deployment_status"], "NEVER_DEPLOYED");

    let c = service(&t, &env, "container").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    let mut body = service_bodies(&t.registry().await)[1].1.clone();
    body["description"] = json!("capstan-fail-deploy capstan-fail-restart");
    t.put(&format!("/container/{c}"), body).await.expect(200);
    t.post(&format!("/container/{c}/restart-service"), json!({}))
        .await
        .expect(202);
    let failed = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(failed["state"], "RESTART_ERROR", "{failed}");
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    let failed = t.settle(&format!("/container/{c}/status")).await;
    assert_eq!(failed["state"], "DEPLOYMENT_ERROR", "{failed}");
    assert_eq!(failed["service_deployment_status"], "OUT_OF_DATE");
}

async fn configuration_changes_make_a_deployed_service_out_of_date<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = service(&t, &env, "container").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    let status = format!("/container/{c}/status");
    let settled = t.settle(&status).await;
    assert_eq!(
        settled["service_deployment_status"], "UP_TO_DATE",
        "{settled}"
    );
    t.post(
        &format!("/container/{c}/environmentVariable"),
        json!({"key": "MODE", "value": "fast"}),
    )
    .await
    .expect(201);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
    t.post(&format!("/container/{c}/redeploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&status).await["service_deployment_status"],
        "UP_TO_DATE"
    );
    t.post(
        &format!("/container/{c}/deploy"),
        json!({"image_tag": "2.0"}),
    )
    .await
    .expect(202);
    let queued = t.get(&status).await.body;
    assert!(
        queued["deployment_requests_count"] == json!(0)
            || queued["service_deployment_status"] == json!("OUT_OF_DATE"),
        "a new tag is a change until deployed: {queued}"
    );
    assert_eq!(
        t.settle(&status).await["service_deployment_status"],
        "UP_TO_DATE"
    );
}

/// The simulated engine publishes nothing: a deployed service has no link, in the public
/// shape; an unknown service or environment, or one of another kind, is not found.
async fn links_are_empty_until_an_engine_publishes_ports<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&format!("/container/{c}/status")).await["state"],
        "DEPLOYED"
    );
    let links = t
        .get(&format!("/container/{c}/link"))
        .await
        .expect(200)
        .body;
    assert_eq!(links, json!({"results": []}));
    let all = t
        .get(&format!("/environment/{env}/link"))
        .await
        .expect(200)
        .body;
    assert_eq!(all, json!({"results": []}));
    t.get(&format!("/application/{c}/link")).await.expect(404);
    let unknown = uuid::Uuid::new_v4();
    t.get(&format!("/container/{unknown}/link"))
        .await
        .expect(404);
    t.get(&format!("/environment/{unknown}/link"))
        .await
        .expect(404);
}

/// What an engine reports of a service counts only when it comes from the host of the
/// service's own cluster: a report tagged by another cluster's host (whose daemon may carry
/// any labels) changes neither its links nor its routes.
async fn a_report_counts_only_from_its_services_cluster<S: App>(t: T<S>) {
    use domain::model::{Endpoint, RunState, RunningState};
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let c = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1",
                   "ports": [{"internal_port": 80, "publicly_accessible": true}]}),
        )
        .await
        .expect(201)
        .id();
    let report = |from: Option<domain::ids::ClusterId>| RunningState {
        service_id: c.parse().unwrap(),
        environment_id: env.parse().unwrap(),
        state: RunState::Running,
        replicas: Vec::new(),
        endpoints: vec![Endpoint {
            internal_port: 80,
            host: "127.0.0.9".into(),
            port: 4242,
        }],
        observed_at: time::OffsetDateTime::now_utc(),
        reported_by: from,
    };
    let path = format!("/container/{c}/link");
    t.capstan
        .record_running(&report(Some(domain::ids::ClusterId::generate())))
        .await
        .unwrap();
    let seen = t.get(&path).await.expect(200).body["results"].clone();
    assert_eq!(seen, json!([]), "another host's report is dropped");
    t.capstan.record_running(&report(None)).await.unwrap();
    let seen = t.get(&path).await.expect(200).body["results"].clone();
    assert_eq!(seen.as_array().map(Vec::len), Some(1), "{seen}");
}

/// The simulated engine runs nothing: no service prints, no failed execution is kept; the
/// answers keep their public shapes, and their rules hold.
async fn output_ingress_and_failed_jobs_answer_on_an_engine_that_runs_nothing<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    let job = service(&t, &env, "job").await;
    t.post(&format!("/container/{c}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/container/{c}/status")).await;
    for (kind, id) in [("container", &c), ("job", &job)] {
        let out = t.get(&format!("/{kind}/{id}/log")).await.expect(200).body;
        assert_eq!(out, json!({"results": []}));
    }
    t.get(&format!("/application/{c}/log")).await.expect(404);
    let ingress = t
        .get(&format!("/CONTAINER/{c}/ingressDeploymentStatus"))
        .await
        .expect(200)
        .body;
    assert_eq!(ingress, json!({"routerId": env, "status": "DEPLOYED"}));
    t.get(&format!("/HELM/{c}/ingressDeploymentStatus"))
        .await
        .expect(404);
    let none = json!({"clean_job_ids": [], "clean_kubernetes_jobs": []});
    let cleaned = t
        .post(
            &format!("/environment/{env}/cleanFailedJobs"),
            json!({"job_ids": [job]}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(cleaned, none);
    let refused = t
        .post(
            &format!("/environment/{env}/cleanFailedJobs"),
            json!({"job_ids": [c]}),
        )
        .await
        .expect(400);
    assert!(refused.text.contains("job_ids"), "{}", refused.text);
    let one = t
        .post(&format!("/job/{job}/cleanFailedJob"), json!({}))
        .await
        .expect(200)
        .body;
    assert_eq!(one, json!({"clean_kubernetes_jobs": []}));
    t.post(&format!("/job/{c}/cleanFailedJob"), json!({}))
        .await
        .expect(404);
}

async fn terraform_versions_and_resources_answer_on_an_engine_that_keeps_no_state<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let versions = t.get("/terraform/availableVersion").await.expect(200).body;
    let engines: Vec<&str> = versions["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["engine"].as_str().unwrap())
        .collect();
    assert!(
        engines.contains(&"OPEN_TOFU") && engines.contains(&"TERRAFORM"),
        "{versions}"
    );
    let tf = service(&t, &env, "terraform").await;
    let resources = t
        .get(&format!("/terraform/{tf}/terraformResources"))
        .await
        .expect(200)
        .body;
    assert_eq!(resources, json!({"results": []}), "no state before a run");
    t.get(&format!(
        "/terraform/{}/terraformResources",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
}

async fn terraform_actions_show_as_their_sub_action_trigger_and_audit_words<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let org = t.org.clone();
    let tf = service(&t, &env, "terraform").await;
    let status = format!("/terraform/{tf}/status");
    for (body, sub_action, trigger) in [
        (json!({}), "TERRAFORM_PLAN_AND_APPLY", "DEPLOY"),
        (json!({"action": "PLAN"}), "TERRAFORM_PLAN_ONLY", "DEPLOY"),
        (
            json!({"action": "FORCE_UNLOCK"}),
            "TERRAFORM_FORCE_UNLOCK_STATE",
            "TERRAFORM_FORCE_UNLOCK",
        ),
        (
            json!({"action": "MIGRATE_STATE"}),
            "TERRAFORM_MIGRATE_STATE",
            "TERRAFORM_MIGRATE_STATE",
        ),
    ] {
        let accepted = t
            .post(&format!("/terraform/{tf}/deploy"), body.clone())
            .await
            .expect(202)
            .body;
        assert_eq!(
            accepted["status_details"]["sub_action"], sub_action,
            "{body}: {accepted}"
        );
        let done = t.settle(&status).await;
        assert_eq!(done["state"], "DEPLOYED", "{body}: {done}");
        assert_eq!(done["status_details"]["sub_action"], sub_action, "{done}");
        let history = t
            .get(&format!("/environment/{env}/deploymentHistoryV2"))
            .await
            .expect(200)
            .body;
        assert_eq!(
            history["results"][0]["trigger_action"], trigger,
            "{body}: {history}"
        );
        let parts = t
            .get(&format!("/terraform/{tf}/deploymentHistoryV2"))
            .await
            .expect(200)
            .body;
        assert_eq!(
            parts["results"][0]["status_details"]["sub_action"], sub_action,
            "{parts}"
        );
        let environment = t
            .get(&format!("/environment/{env}/status"))
            .await
            .expect(200)
            .body;
        assert_eq!(
            environment["status_details"]["sub_action"], sub_action,
            "{environment}"
        );
    }
    t.post(&format!("/terraform/{tf}/stop"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&status).await["status_details"]["sub_action"],
        "NONE"
    );
    t.post(&format!("/terraform/{tf}/uninstall"), json!({}))
        .await
        .expect(202);
    assert_eq!(
        t.settle(&status).await["status_details"]["sub_action"],
        "TERRAFORM_DESTROY"
    );

    // The audit log names an unlock and a migration for what they are.
    let events = t
        .get(&format!("/organization/{org}/events?pageSize=100"))
        .await
        .expect(200)
        .body;
    let words: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["target_id"] == json!(tf))
        .filter_map(|e| e["event_type"].as_str())
        .collect();
    for word in [
        "TRIGGER_TERRAFORM_FORCE_UNLOCK",
        "TERRAFORM_FORCE_UNLOCK_SUCCEEDED",
        "TRIGGER_TERRAFORM_MIGRATE_STATE",
        "TERRAFORM_MIGRATE_STATE_SUCCEEDED",
        "DEPLOY_QUEUED",
        "DEPLOYED",
    ] {
        assert!(words.contains(&word), "{word} missing from {words:?}");
    }
}
