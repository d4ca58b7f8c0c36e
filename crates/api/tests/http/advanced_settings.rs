//! The advanced settings of services over HTTP, on both backends: every key with its default,
//! edits checked key by key, kept through an environment clone, and acting on deployment state.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    every_kind_has_its_keys_with_defaults,
    edits_are_checked_and_kept,
    a_change_makes_a_deployed_service_out_of_date,
    settings_follow_an_environment_clone,
    network_is_the_sticky_session_setting,
);

/// (kind, its name in the defaults' route, how many keys, one key with its default as JSON).
const KINDS: [(&str, &str, usize, &str, &str); 5] = [
    (
        "application",
        "Application",
        47,
        "build.timeout_max_sec",
        "1800",
    ),
    (
        "container",
        "Container",
        41,
        "network.ingress.proxy_request_buffering",
        r#""on""#,
    ),
    (
        "job",
        "Job",
        14,
        "cronjob.concurrency_policy",
        r#""Forbid""#,
    ),
    (
        "helm",
        "Helm",
        29,
        "deployment.custom_domain_check_enabled",
        "true",
    ),
    (
        "terraform",
        "Terraform",
        9,
        "build.ephemeral_storage_in_gib",
        "20",
    ),
];

async fn services<S: App>(t: &T<S>, env: &str) -> Vec<(String, String)> {
    let registry = t.registry().await;
    let mut out = Vec::new();
    for (kind, body) in service_bodies(&registry) {
        let id = t
            .post(&format!("/environment/{env}/{kind}"), body)
            .await
            .expect(201)
            .id();
        out.push((kind.to_string(), id));
    }
    out
}

async fn every_kind_has_its_keys_with_defaults<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let ids = services(&t, &env).await;
    for (kind, title, count, key, default) in KINDS {
        let defaults = t
            .get(&format!("/default{title}AdvancedSettings"))
            .await
            .expect(200);
        let map = defaults.body.as_object().unwrap();
        assert_eq!(map.len(), count, "{kind}: {}", defaults.text);
        let default: Value = serde_json::from_str(default).unwrap();
        assert_eq!(map[key], default, "{kind}");
        let id = &ids.iter().find(|(k, _)| k == kind).unwrap().1;
        let own = t
            .get(&format!("/{kind}/{id}/advancedSettings"))
            .await
            .expect(200);
        assert_eq!(
            own.body, defaults.body,
            "{kind}: a new service has the defaults"
        );
    }
    let db = &ids.iter().find(|(k, _)| k == "database").unwrap().1;
    t.get(&format!("/database/{db}/advancedSettings"))
        .await
        .expect(404);
    // A service of another kind under this kind's route is not found.
    let helm = &ids.iter().find(|(k, _)| k == "helm").unwrap().1;
    t.get(&format!("/application/{helm}/advancedSettings"))
        .await
        .expect(404);
    let stranger = t.other_org_token().await;
    let r = t
        .call(
            Some(&stranger),
            actix_web::http::Method::GET,
            &format!("/helm/{helm}/advancedSettings"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn edits_are_checked_and_kept<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let ids = services(&t, &env).await;
    let app = &ids[0].1;
    let path = format!("/application/{app}/advancedSettings");
    let edited = t
        .put(
            &path,
            json!({"build.timeout_max_sec": 600, "deployment.antiaffinity.pod": "Requirred",
                   "deployment.affinity.node.required": {"pool": "gpu"},
                   "deployment.lifecycle.pre_stop_exec_command": ["sh", "-c", "sleep 5"],
                   "hpa.memory.average_utilization_percent": 80}),
        )
        .await
        .expect(201);
    assert_eq!(edited.body["build.timeout_max_sec"], 600);
    assert_eq!(edited.body["network.ingress.enable_cors"], false);
    assert_eq!(edited.body.as_object().unwrap().len(), 47);
    // A later edit keeps what it does not name; null goes back where null is allowed.
    t.put(
        &path,
        json!({"network.ingress.enable_cors": true, "hpa.memory.average_utilization_percent": null}),
    )
    .await
    .expect(201);
    let shown = t.get(&path).await.expect(200).body;
    assert_eq!(shown["build.timeout_max_sec"], 600);
    assert_eq!(shown["deployment.antiaffinity.pod"], "Requirred");
    assert_eq!(
        shown["deployment.affinity.node.required"],
        json!({"pool": "gpu"})
    );
    assert_eq!(shown["network.ingress.enable_cors"], true);
    assert!(shown["hpa.memory.average_utilization_percent"].is_null());
    for (sent, message) in [
        (
            json!({"build.nope": 1}),
            "build.nope: is not an advanced setting",
        ),
        (
            json!({"build.timeout_max_sec": "600"}),
            "build.timeout_max_sec: must be an integer",
        ),
        (
            json!({"build.timeout_max_sec": 0}),
            "build.timeout_max_sec: must be at least 1",
        ),
        (
            json!({"deployment.update_strategy.rolling_update.max_surge_percent": 101}),
            "deployment.update_strategy.rolling_update.max_surge_percent: must be at most 100",
        ),
        (
            json!({"deployment.update_strategy.type": "Blue"}),
            "deployment.update_strategy.type: must be one of RollingUpdate, Recreate",
        ),
        (
            json!({"build.timeout_max_sec": null}),
            "build.timeout_max_sec: must be an integer",
        ),
        // A key of another kind.
        (
            json!({"cronjob.concurrency_policy": "Allow"}),
            "cronjob.concurrency_policy: is not",
        ),
    ] {
        t.put(&path, sent).await.expect_error(400, message);
    }
    assert_eq!(
        t.get(&path).await.body,
        shown,
        "a refused edit changes nothing"
    );
    let job = &ids.iter().find(|(k, _)| k == "job").unwrap().1;
    t.put(
        &format!("/job/{job}/advancedSettings"),
        json!({"cronjob.concurrency_policy": "Allow"}),
    )
    .await
    .expect(201);
    assert_eq!(
        t.get(&format!("/job/{job}/advancedSettings")).await.body["cronjob.concurrency_policy"],
        "Allow"
    );
}

async fn a_change_makes_a_deployed_service_out_of_date<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let ids = services(&t, &env).await;
    let container = &ids.iter().find(|(k, _)| k == "container").unwrap().1;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let status = format!("/container/{container}/status");
    assert_eq!(
        t.settle(&status).await["service_deployment_status"],
        "UP_TO_DATE"
    );
    let path = format!("/container/{container}/advancedSettings");
    // Sending a value it already has changes nothing.
    t.put(&path, json!({"network.ingress.proxy_buffering": "on"}))
        .await
        .expect(201);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "UP_TO_DATE"
    );
    t.put(&path, json!({"network.ingress.proxy_buffering": "off"}))
        .await
        .expect(201);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
}

async fn settings_follow_an_environment_clone<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let ids = services(&t, &env).await;
    let terraform = &ids.iter().find(|(k, _)| k == "terraform").unwrap().1;
    t.put(
        &format!("/terraform/{terraform}/advancedSettings"),
        json!({"build.ram_max_in_gib": 16}),
    )
    .await
    .expect(201);
    let copy = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy"}),
        )
        .await
        .expect(202)
        .id();
    let listed = t
        .get(&format!("/environment/{copy}/terraform"))
        .await
        .expect(200);
    let copied = listed.body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(&copied, terraform);
    let shown = t
        .get(&format!("/terraform/{copied}/advancedSettings"))
        .await
        .expect(200);
    assert_eq!(shown.body["build.ram_max_in_gib"], 16);
}

/// `network` reads and sets sticky sessions, which are the advanced setting the router reads.
async fn network_is_the_sticky_session_setting<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let all = services(&t, &env).await;
    for (kind, id) in all
        .iter()
        .filter(|(k, _)| k == "application" || k == "container")
    {
        let path = format!("/{kind}/{id}/network");
        assert_eq!(
            t.get(&path).await.expect(200).body,
            json!({"sticky_session": false})
        );
        let set = t
            .put(&path, json!({"sticky_session": true}))
            .await
            .expect(201);
        assert_eq!(set.body, json!({"sticky_session": true}));
        let settings = t
            .get(&format!("/{kind}/{id}/advancedSettings"))
            .await
            .expect(200);
        assert_eq!(settings.body["network.ingress.enable_sticky_session"], true);
        let kept = t.put(&path, json!({})).await.expect(201);
        assert_eq!(
            kept.body,
            json!({"sticky_session": true}),
            "unsent: unchanged"
        );
        t.put(&path, json!({"sticky_session": "yes"}))
            .await
            .expect(400);
        t.put(&path, json!({"sticky_session": false}))
            .await
            .expect(201);
        assert_eq!(t.get(&path).await.expect(200).body["sticky_session"], false);
    }
    let (_, job) = all.iter().find(|(k, _)| k == "job").unwrap();
    t.get(&format!("/job/{job}/network")).await.expect(404);
}
