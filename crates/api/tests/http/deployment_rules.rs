//! Deployment rules over HTTP, on both backends: project rules (CRUD, order, checks), what a
//! new or cloned environment takes from them, the environment's rule, and the scheduler that
//! starts and stops an environment at its rule's hours (on a clock the test moves).

use crate::common;

use common::{App, T};
use domain::clock::ManualClock;
use serde_json::{json, Value};
use std::sync::Arc;
use time::macros::datetime;

http_suite!(
    project_rules_are_kept_ordered_and_checked,
    a_matching_rule_shapes_new_and_cloned_environments,
    the_environment_rule_is_read_and_set,
);

/// Runs each test on both backends with a clock it moves.
macro_rules! with_clock {
    ($($name:ident),* $(,)?) => {
        mod clocked_sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let clock = super::clock();
                    let b = crate::common::sqlite().await.unwrap().map(super::on(&clock));
                    super::$name(crate::common::setup(b).await, clock).await;
                }
            )*
        }
        mod clocked_postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(b) = crate::common::postgres().await else { return };
                    let clock = super::clock();
                    super::$name(crate::common::setup(b.map(super::on(&clock))).await, clock).await;
                }
            )*
        }
    };
}

with_clock!(
    a_rule_stops_and_starts_an_environment_at_its_hours,
    a_cron_job_runs_at_its_schedule_once_until_stopped,
);

/// Monday 2026-11-23, 18:00 UTC: an hour before the rules' stop.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(datetime!(2026-11-23 18:00 UTC)))
}

fn on(
    clock: &Arc<ManualClock>,
) -> impl FnOnce(domain::services::Capstan) -> domain::services::Capstan {
    let clock = clock.clone();
    move |c| domain::services::Capstan::new(c.store().clone(), clock)
}

fn rule(name: &str, cluster: &str, wildcard: &str) -> Value {
    json!({
        "name": name,
        "description": "office hours",
        "mode": "DEVELOPMENT",
        "cluster_id": cluster,
        "auto_stop": true,
        "timezone": "Europe/Paris",
        "start_time": "1970-01-01T08:00:00.000Z",
        "stop_time": "1970-01-01T19:00:00.000Z",
        "weekdays": ["MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY"],
        "wildcard": wildcard,
    })
}

fn names(list: &Value) -> Vec<String> {
    list["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect()
}

async fn project_rules_are_kept_ordered_and_checked<S: App>(t: T<S>) {
    let (cluster, project, _) = t.hierarchy().await;
    let path = format!("/project/{project}/deploymentRule");
    let first = t
        .post(&path, rule("previews", &cluster, "pr-*"))
        .await
        .expect(201);
    assert_eq!(first.body["priority_index"], 0);
    assert_eq!(first.body["mode"], "DEVELOPMENT");
    assert_eq!(first.body["cluster_id"], json!(cluster));
    assert_eq!(first.body["auto_stop"], true);
    assert_eq!(first.body["timezone"], "Europe/Paris");
    assert_eq!(first.body["start_time"], "1970-01-01T08:00:00Z");
    assert_eq!(first.body["stop_time"], "1970-01-01T19:00:00Z");
    assert_eq!(first.body["weekdays"].as_array().unwrap().len(), 5);
    assert_eq!(first.body["wildcard"], "pr-*");
    assert_eq!(first.body["description"], "office hours");
    let first = first.id();
    let second = t
        .post(&path, rule("features", &cluster, "feat-*"))
        .await
        .expect(201);
    assert_eq!(second.body["priority_index"], 1);
    let second = second.id();
    let third = t
        .post(&path, rule("all", &cluster, ""))
        .await
        .expect(201)
        .id();
    assert_eq!(
        names(&t.get(&path).await.expect(200).body),
        ["previews", "features", "all"]
    );
    // Paged as every list (API.md), in priority order.
    let second_page = t
        .get(&format!("{path}?page=2&page_size=1"))
        .await
        .expect(200);
    assert_eq!(names(&second_page.body), ["features"]);
    assert_eq!(second_page.body["pagination"]["total_count"], 3);
    assert_eq!(second_page.body["pagination"]["total_pages"], 3);
    t.get(&format!("{path}?page_size=0"))
        .await
        .expect_error(400, "page_size");
    t.get("/project/not-a-uuid/deploymentRule")
        .await
        .expect_error(400, "projectId:");
    t.get(&format!("{path}/not-a-uuid"))
        .await
        .expect_error(400, "deploymentRuleId:");
    t.put(
        "/environment/not-a-uuid/deploymentRule/x",
        json!({"timezone": "UTC", "start_time": "08:00", "stop_time": "19:00", "weekdays": []}),
    )
    .await
    .expect_error(400, "environmentId:");
    t.post(&path, rule("PREVIEWS", &cluster, "x"))
        .await
        .expect_error(409, "a deployment rule named 'PREVIEWS' already exists");

    // Order: every rule once, the first applies first.
    let ordered = t
        .put(
            &format!("{path}/order"),
            json!({"project_deployment_rule_ids_in_order": [third, first, second]}),
        )
        .await
        .expect(200);
    assert_eq!(names(&ordered.body), ["all", "previews", "features"]);
    let listed = t.get(&path).await.expect(200).body;
    assert_eq!(names(&listed), ["all", "previews", "features"]);
    assert_eq!(listed["results"][2]["priority_index"], 2);
    t.put(
        &format!("{path}/order"),
        json!({"project_deployment_rule_ids_in_order": [third, first]}),
    )
    .await
    .expect_error(400, "project_deployment_rule_ids_in_order: must list every");
    t.put(
        &format!("{path}/order"),
        json!({"project_deployment_rule_ids_in_order": [third, first, first]}),
    )
    .await
    .expect_error(400, "project_deployment_rule_ids_in_order[2]: names no");

    // Edit keeps the place; get answers what was set.
    let mut edited = rule("features", &cluster, "feature-*");
    edited["auto_stop"] = json!(false);
    edited["mode"] = json!("STAGING");
    let e = t.put(&format!("{path}/{second}"), edited).await.expect(200);
    assert_eq!(e.body["wildcard"], "feature-*");
    assert_eq!(e.body["priority_index"], 2);
    let got = t.get(&format!("{path}/{second}")).await.expect(200);
    assert_eq!(got.body["mode"], "STAGING");
    assert_eq!(got.body["auto_stop"], false);

    // Checks name the member at fault.
    let mut bad = rule("bad", &cluster, "");
    bad["timezone"] = json!("Mars/Olympus");
    t.post(&path, bad).await.expect_error(400, "timezone:");
    let mut bad = rule("bad", &cluster, "");
    bad["start_time"] = json!("eight o'clock");
    t.post(&path, bad).await.expect_error(400, "start_time:");
    let mut bad = rule("bad", &cluster, "");
    bad["weekdays"] = json!(["FUNDAY"]);
    t.post(&path, bad).await.expect_error(400, "weekdays[0]:");
    let mut bad = rule("bad", &cluster, "");
    bad["mode"] = json!("PLAYGROUND");
    t.post(&path, bad).await.expect_error(400, "mode:");
    t.post(&path, rule("bad", &uuid::Uuid::new_v4().to_string(), ""))
        .await
        .expect(404);

    // Another organization sees none of it.
    let other = t.other_org_token().await;
    t.call(Some(&other), actix_web::http::Method::GET, &path, None)
        .await
        .expect(403);
    t.get(&format!(
        "/project/{project}/deploymentRule/{}",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);

    // A cluster a rule targets stays; a deleted rule leaves no gap.
    t.delete(&format!("/organization/{}/cluster/{cluster}", t.org))
        .await
        .expect_error(409, "the cluster is still used by");
    t.delete(&format!("{path}/{first}")).await.expect(204);
    t.delete(&format!("{path}/{first}")).await.expect(404);
    let listed = t.get(&path).await.expect(200).body;
    assert_eq!(names(&listed), ["all", "features"]);
    assert_eq!(listed["results"][1]["priority_index"], 1);
}

async fn env_rule<S: App>(t: &T<S>, env: &str) -> Value {
    t.get(&format!("/environment/{env}/deploymentRule"))
        .await
        .expect(200)
        .body
}

async fn a_matching_rule_shapes_new_and_cloned_environments<S: App>(t: T<S>) {
    let (main, project, source) = t.hierarchy().await;
    let other_cluster = t
        .post(
            &format!("/organization/{}/cluster", t.org),
            json!({"name": "previews", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await
        .expect(201)
        .id();
    let path = format!("/project/{project}/deploymentRule");
    t.post(&path, rule("features", &other_cluster, "feat-*"))
        .await
        .expect(201);
    let mut staging = rule("staging", &main, "stag?");
    staging["mode"] = json!("STAGING");
    staging["timezone"] = json!("America/New_York");
    t.post(&path, staging).await.expect(201);

    // A new environment whose name matches takes the rule's cluster, mode and hours.
    let feat = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "Feat-login"}),
        )
        .await
        .expect(201);
    assert_eq!(feat.body["mode"], "DEVELOPMENT");
    assert_eq!(
        feat.body["cluster_id"],
        json!(other_cluster),
        "{}",
        feat.text
    );
    let taken = env_rule(&t, &feat.id()).await;
    assert_eq!(taken["auto_stop"], true);
    assert_eq!(taken["timezone"], "Europe/Paris");
    assert_eq!(taken["id"], json!(feat.id()));
    // What the request names wins over the rule.
    let explicit = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "stage", "mode": "PRODUCTION", "cluster": main}),
        )
        .await
        .expect(201);
    assert_eq!(explicit.body["mode"], "PRODUCTION");
    assert_eq!(explicit.body["cluster_id"], json!(main));
    assert_eq!(
        env_rule(&t, &explicit.id()).await["timezone"],
        "America/New_York"
    );
    // No rule matches: office hours that do nothing.
    let plain = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "hotfix"}),
        )
        .await
        .expect(201);
    assert_eq!(plain.body["mode"], "DEVELOPMENT");
    let none = env_rule(&t, &plain.id()).await;
    assert_eq!(none["auto_stop"], false);
    assert_eq!(none["timezone"], "UTC");

    // A clone takes the rule only when asked; otherwise it keeps its source's hours.
    t.put(
        &format!("/environment/{source}/deploymentRule/{source}"),
        json!({"auto_stop": true, "timezone": "Asia/Tokyo", "start_time": "09:00", "stop_time": "18:00", "weekdays": ["MONDAY"]}),
    )
    .await
    .expect(200);
    let kept = t
        .post(
            &format!("/environment/{source}/clone"),
            json!({"name": "feat-kept"}),
        )
        .await
        .expect(202);
    assert_eq!(kept.body["mode"], "PRODUCTION");
    assert_eq!(kept.body["cluster_id"], json!(main));
    let kept_rule = env_rule(&t, &kept.id()).await;
    assert_eq!(kept_rule["timezone"], "Asia/Tokyo");
    assert_eq!(kept_rule["start_time"], "1970-01-01T09:00:00Z");
    let applied = t
        .post(
            &format!("/environment/{source}/clone"),
            json!({"name": "feat-applied", "apply_deployment_rule": true}),
        )
        .await
        .expect(202);
    assert_eq!(applied.body["mode"], "DEVELOPMENT");
    assert_eq!(applied.body["cluster_id"], json!(other_cluster));
    assert_eq!(
        env_rule(&t, &applied.id()).await["timezone"],
        "Europe/Paris"
    );
}

async fn the_environment_rule_is_read_and_set<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let default = env_rule(&t, &env).await;
    assert_eq!(default["id"], json!(env));
    assert_eq!(default["auto_stop"], false);
    assert_eq!(default["on_demand_preview"], false);
    assert_eq!(default["auto_preview"], false);
    assert_eq!(default["start_time"], "1970-01-01T08:00:00Z");
    assert_eq!(default["stop_time"], "1970-01-01T19:00:00Z");
    assert!(default["created_at"].is_string());
    let path = format!("/environment/{env}/deploymentRule/{env}");
    let body = json!({
        "on_demand_preview": true,
        "auto_preview": true,
        "auto_stop": true,
        "timezone": "Europe/Berlin",
        "start_time": "2026-11-24T07:30:00+01:00",
        "stop_time": "1970-01-01T20:15:00.000Z",
        "weekdays": ["SATURDAY", "SUNDAY"],
    });
    let set = t.put(&path, body.clone()).await.expect(200);
    assert_eq!(set.body["start_time"], "1970-01-01T07:30:00Z");
    assert_eq!(set.body["stop_time"], "1970-01-01T20:15:00Z");
    assert_eq!(set.body["weekdays"], json!(["SATURDAY", "SUNDAY"]));
    assert_eq!(set.body["on_demand_preview"], true);
    let read = env_rule(&t, &env).await;
    assert_eq!(read["timezone"], "Europe/Berlin");
    assert_eq!(read["auto_preview"], true);
    // Set again: an edit, the creation time kept.
    let again = t.put(&path, body.clone()).await.expect(200);
    assert_eq!(again.body["created_at"], set.body["created_at"]);

    t.put(
        &format!("/environment/{env}/deploymentRule/{}", uuid::Uuid::new_v4()),
        body.clone(),
    )
    .await
    .expect_error(404, "deployment rule not found");
    let mut bad = body.clone();
    bad["stop_time"] = bad["start_time"].clone();
    t.put(&path, bad).await.expect_error(400, "stop_time:");
    let mut bad = body.clone();
    bad["weekdays"] = json!([]);
    t.put(&path, bad).await.expect_error(400, "weekdays:");
    let viewer = t.token_with_role(domain::auth::Role::Viewer).await;
    t.call(
        Some(&viewer),
        actix_web::http::Method::PUT,
        &path,
        Some(body),
    )
    .await
    .expect(403);
}

/// The environment's status once nothing waits or runs.
async fn settled<S: App>(t: &T<S>, env: &str) -> Value {
    t.settle(&format!("/environment/{env}/status")).await
}

/// Waits until the environment's state is `state` (the scheduler acts within a few polls).
async fn reaches<S: App>(t: &T<S>, env: &str, state: &str) {
    let path = format!("/environment/{env}/status");
    let seen = std::cell::RefCell::new(Value::Null);
    common::eventually(
        common::WITHIN,
        || format!("the environment never became {state}: {}", seen.borrow()),
        async || {
            let status = t.get(&path).await.expect(200).body;
            let there = status["state"] == state && status["deployment_requests_count"] == 0;
            *seen.borrow_mut() = status;
            there.then_some(())
        },
    )
    .await
}

async fn a_rule_stops_and_starts_an_environment_at_its_hours<S: App>(
    t: T<S>,
    clock: Arc<ManualClock>,
) {
    let (_, _, env) = t.hierarchy().await;
    for name in ["web", "worker"] {
        t.container(&env, name).await;
    }
    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(settled(&t, &env).await["state"], "DEPLOYED");

    // Monday 18:00 UTC; the rule stops at 19:00 and starts at 08:00 on weekdays.
    t.put(
        &format!("/environment/{env}/deploymentRule/{env}"),
        json!({"auto_stop": true, "timezone": "UTC", "start_time": "08:00", "stop_time": "19:00",
               "weekdays": ["MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY"]}),
    )
    .await
    .expect(200);
    // Before the hour nothing is due, whoever asks.
    assert_eq!(t.capstan.run_due_rules().await.unwrap().taken, 0);
    assert_eq!(settled(&t, &env).await["state"], "DEPLOYED");

    // At the hour the environment stops, once, whoever of several schedulers takes it.
    clock.set(datetime!(2026-11-23 19:00:01 UTC));
    // (The harness's own scheduler runs too: the history below shows the one stop.)
    let (a, b) = futures_util::join!(t.capstan.run_due_rules(), t.capstan.run_due_rules());
    assert!(a.unwrap().failed.is_empty() && b.unwrap().failed.is_empty());
    reaches(&t, &env, "STOPPED").await;
    let history = history_actions(&t, &env).await;
    assert_eq!(
        history,
        [
            ("STOP".to_string(), "QOVERY_INTERNAL".to_string()),
            ("DEPLOY".to_string(), "API".to_string())
        ]
    );

    // Tuesday 08:00: started again, with what it ran.
    clock.set(datetime!(2026-11-24 08:00:01 UTC));
    reaches(&t, &env, "DEPLOYED").await;
    let statuses = t
        .get(&format!("/environment/{env}/statuses"))
        .await
        .expect(200)
        .body;
    let containers = statuses["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 2, "{statuses}");
    for c in containers {
        assert_eq!(c["state"], "DEPLOYED", "{statuses}");
    }

    // Saturday is not a weekday of the rule: Friday's stop holds through the weekend.
    clock.set(datetime!(2026-11-27 19:00:01 UTC));
    reaches(&t, &env, "STOPPED").await;
    clock.set(datetime!(2026-11-28 08:00:01 UTC));
    assert_eq!(t.capstan.run_due_rules().await.unwrap().taken, 0);
    assert_eq!(settled(&t, &env).await["state"], "STOPPED");
}

/// (trigger action, origin) of each deployment of the environment, newest first.
async fn history_actions<S: App>(t: &T<S>, env: &str) -> Vec<(String, String)> {
    let history = t
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    history["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["trigger_action"].as_str().unwrap_or_default().to_string(),
                h["auditing_data"]["origin"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// The job's requests, newest first: "ACTION by ORIGIN".
async fn job_history<S: App>(t: &T<S>, job: &str) -> Vec<String> {
    let history = t
        .get(&format!("/job/{job}/deploymentHistoryV2"))
        .await
        .expect(200)
        .body;
    history["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{} by {}",
                h["status_details"]["action"].as_str().unwrap_or_default(),
                h["auditing_data"]["origin"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

async fn a_cron_job_runs_at_its_schedule_once_until_stopped<S: App>(
    t: T<S>,
    clock: Arc<ManualClock>,
) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let body = |expression: &str, zone: &str| {
        json!({"name": "tick",
               "source": {"image": {"registry_id": registry, "image_name": "busybox", "tag": "1"}},
               "schedule": {"cronjob": {"scheduled_at": expression, "timezone": zone,
                                        "entrypoint": "sh", "arguments": ["-c", "date"]}}})
    };
    // What cannot be scheduled is refused at the member at fault.
    let bad = t
        .post(
            &format!("/environment/{env}/job"),
            body("61 * * * *", "UTC"),
        )
        .await
        .expect(400);
    assert!(
        bad.text.contains("schedule.cronjob.scheduled_at"),
        "{}",
        bad.text
    );
    let never = t
        .post(
            &format!("/environment/{env}/job"),
            body("0 0 31 2 *", "UTC"),
        )
        .await
        .expect(400);
    assert!(never.text.contains("no date"), "{}", never.text);
    let bad = t
        .post(
            &format!("/environment/{env}/job"),
            body("*/5 * * * *", "Mars/Olympus"),
        )
        .await
        .expect(400);
    assert!(
        bad.text.contains("schedule.cronjob.timezone"),
        "{}",
        bad.text
    );
    let job = t
        .post(
            &format!("/environment/{env}/job"),
            body("*/5 * * * *", "UTC"),
        )
        .await
        .expect(201)
        .id();
    let status = format!("/job/{job}/status");
    // Monday 18:00: deployed, it keeps its schedule and runs at 18:05.
    t.post(&format!("/job/{job}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(t.settle(&status).await["state"], "DEPLOYED");
    assert_eq!(t.capstan.run_due_cron_jobs().await.unwrap().queued, 0);
    clock.set(datetime!(2026-11-23 18:05:01 UTC));
    // Once, whoever of several schedulers takes the turn.
    let (a, b) = futures_util::join!(t.capstan.run_due_cron_jobs(), t.capstan.run_due_cron_jobs());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.failed.is_empty() && b.failed.is_empty());
    assert!(a.queued + b.queued <= 1, "one run");
    common::eventually(
        common::WITHIN,
        || "the run never came".to_string(),
        async || (job_history(&t, &job).await.len() >= 2).then_some(()),
    )
    .await;
    assert_eq!(t.settle(&status).await["state"], "DEPLOYED");
    assert_eq!(
        job_history(&t, &job).await,
        ["DEPLOY by QOVERY_INTERNAL", "DEPLOY by API"],
        "the run came from the scheduler"
    );
    assert_eq!(
        t.capstan.run_due_cron_jobs().await.unwrap().next_turn,
        Some(datetime!(2026-11-23 18:10 UTC)),
        "the next time"
    );
    // Stopped, it runs no more.
    t.post(&format!("/job/{job}/stop"), json!({}))
        .await
        .expect(202);
    assert_eq!(t.settle(&status).await["state"], "STOPPED");
    clock.set(datetime!(2026-11-23 18:10:01 UTC));
    let pass = t.capstan.run_due_cron_jobs().await.unwrap();
    assert_eq!((pass.queued, pass.next_turn), (0, None));
    assert_eq!(
        job_history(&t, &job).await,
        ["STOP by API", "DEPLOY by QOVERY_INTERNAL", "DEPLOY by API"]
    );
}
