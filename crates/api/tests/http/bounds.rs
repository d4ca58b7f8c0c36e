//! What one service may ask of the hosts every organization shares, on both backends: replicas,
//! ports, job restarts, the size of a variable and of a service's variables together are
//! refused past the installation's bounds (the defaults here), with a 400 naming the member and
//! the setting, on creation and edit.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    services_past_a_bound_are_refused_naming_the_setting,
    a_variable_past_the_size_bound_is_refused_naming_the_setting,
    a_services_variables_together_are_bounded_across_scopes,
);

fn body_of(registry: &str, kind: &str) -> Value {
    service_bodies(registry)
        .into_iter()
        .find(|(k, _)| *k == kind)
        .unwrap()
        .1
}

async fn services_past_a_bound_are_refused_naming_the_setting<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let path = format!("/environment/{env}/container");
    let with = |member: &str, value: Value| {
        let mut body = body_of(&registry, "container");
        body[member] = value;
        body
    };
    for (member, value) in [
        ("max_running_instances", json!(10_000)),
        ("max_running_instances", json!(1_i64 << 62)),
        ("min_running_instances", json!(21)),
    ] {
        let mut body = with(member, value);
        if member == "min_running_instances" {
            body["max_running_instances"] = json!(21);
        }
        let refused = t.post(&path, body).await.expect_error(400, "");
        assert!(
            refused.text.contains("must be at most 20")
                && refused.text.contains("CAPSTAN_MAX_REPLICAS"),
            "{member}: {}",
            refused.text
        );
    }
    let ports: Vec<Value> = (0..10_000)
        .map(|p| json!({"internal_port": 1024 + p, "publicly_accessible": false}))
        .collect();
    t.post(&path, with("ports", json!(ports)))
        .await
        .expect_error(
            400,
            "ports: must be at most 20 on this installation (CAPSTAN_MAX_PORTS)",
        );
    // Within the bounds: kept; an edit past one is refused the same way.
    let web = t
        .post(&path, with("max_running_instances", json!(20)))
        .await
        .expect(201)
        .id();
    t.put(
        &format!("/container/{web}"),
        with("max_running_instances", json!(21)),
    )
    .await
    .expect_error(400, "max_running_instances: must be at most 20");
    let jobs = format!("/environment/{env}/job");
    let mut job = body_of(&registry, "job");
    job["max_nb_restart"] = json!(1_000_000_000);
    t.post(&jobs, job.clone()).await.expect_error(
        400,
        "max_nb_restart: must be at most 20 on this installation (CAPSTAN_MAX_JOB_RESTARTS)",
    );
    job["max_nb_restart"] = json!(20);
    t.post(&jobs, job).await.expect(201);
}

async fn a_variable_past_the_size_bound_is_refused_naming_the_setting<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let path = format!("/environment/{env}/environmentVariable");
    let big = "x".repeat(200 * 1024);
    let refused = t
        .post(&path, json!({"key": "BIG", "value": big}))
        .await
        .expect_error(400, "value: is 204803 bytes with its key");
    assert!(
        refused.text.contains("(CAPSTAN_MAX_VARIABLE_BYTES)") && !refused.text.contains("xxxx"),
        "names the setting, not the value: {}",
        refused.text
    );
    let secrets = format!("/environment/{env}/secret");
    t.post(&secrets, json!({"key": "BIG", "value": big}))
        .await
        .expect_error(400, "value: is 204803 bytes");
    let fits = "x".repeat(64 * 1024 - 3);
    let id = t
        .post(&path, json!({"key": "FIT", "value": fits}))
        .await
        .expect(201)
        .id();
    t.put(
        &format!("{path}/{id}"),
        json!({"key": "FIT", "value": format!("{fits}x")}),
    )
    .await
    .expect_error(400, "value: is 65537 bytes with its key");
}

/// A service gets the variables of its project, environment and own scope together: a
/// creation or edit in any scope that would give one service more than 1 MiB of them is
/// refused naming the setting; a scope whose services stay within the bound takes it.
async fn a_services_variables_together_are_bounded_across_scopes<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let web = t
        .post(
            &format!("/environment/{env}/container"),
            body_of(&registry, "container"),
        )
        .await
        .expect(201)
        .id();
    let value = "v".repeat(61_500);
    let scopes = [
        format!("/project/{project}/environmentVariable"),
        format!("/environment/{env}/environmentVariable"),
        format!("/container/{web}/environmentVariable"),
    ];
    // 17 variables of 61,500 bytes: within 1 MiB, by less than 3,000 bytes.
    for (n, path) in scopes.iter().enumerate() {
        let count = if n == 2 { 5 } else { 6 };
        for i in 0..count {
            t.post(path, json!({"key": format!("V{n}_{i}"), "value": value}))
                .await
                .expect(201);
        }
    }
    for path in &scopes {
        let refused = t
            .post(path, json!({"key": "ONE_MORE", "value": value}))
            .await
            .expect_error(400, "value: would give a service");
        assert!(
            refused
                .text
                .contains("(CAPSTAN_MAX_SERVICE_VARIABLES_BYTES)")
                && !refused.text.contains("vvvv"),
            "{}",
            refused.text
        );
    }
    // An edit that grows one past the bound is refused as well; one that shrinks it is kept.
    let listed = t
        .get(&format!("/container/{web}/environmentVariable"))
        .await
        .expect(200)
        .body;
    let own = listed["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["key"] == "V2_0")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let edit = format!("/container/{web}/environmentVariable/{own}");
    t.put(&edit, json!({"key": "V2_0", "value": "v".repeat(65_000)}))
        .await
        .expect_error(400, "value: would give a service");
    t.put(&edit, json!({"key": "V2_0", "value": "small"}))
        .await
        .expect(200);
    // Another environment of the project, without services: its own variables are its own.
    let other = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "empty"}),
        )
        .await
        .expect(201)
        .id();
    for i in 0..6 {
        t.post(
            &format!("/environment/{other}/environmentVariable"),
            json!({"key": format!("E{i}"), "value": value}),
        )
        .await
        .expect(201);
    }
}
