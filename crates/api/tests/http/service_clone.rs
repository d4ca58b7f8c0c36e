//! Service clone over HTTP, on both backends: every kind, into the same or another environment,
//! with what is copied, renamed, relinked or left behind.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    every_kind_is_cloned_never_deployed,
    a_clone_carries_configuration_and_stays_unique,
    clones_are_checked,
);

async fn every_kind_is_cloned_never_deployed<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let other = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    let registry = t.registry().await;
    for (kind, body) in service_bodies(&registry) {
        let id = t
            .post(&format!("/environment/{env}/{kind}"), body.clone())
            .await
            .expect(201)
            .id();
        t.post(
            &format!("/{kind}/{id}/deploy"),
            json!({"git_commit_id": "4f2a9c1"}),
        )
        .await
        .expect(202);
        // The source is deployed: what the copies do not take.
        let deployed = t.settle(&format!("/{kind}/{id}/status")).await;
        assert_eq!(
            deployed["service_deployment_status"], "UP_TO_DATE",
            "{deployed}"
        );
        for (target, name) in [
            (&env, format!("{kind}-copy")),
            (&other, body["name"].as_str().unwrap().to_string()),
        ] {
            let copy = t
                .post(
                    &format!("/{kind}/{id}/clone"),
                    json!({"name": name, "environment_id": target}),
                )
                .await
                .expect(202);
            assert_ne!(copy.id(), id);
            assert_eq!(copy.body["name"], name);
            assert_eq!(copy.body["environment"]["id"], target.as_str());
            let status = t
                .get(&format!("/{kind}/{}/status", copy.id()))
                .await
                .expect(200);
            assert_eq!(
                status.body["service_deployment_status"], "NEVER_DEPLOYED",
                "{kind}"
            );
            let original = t.get(&format!("/{kind}/{id}")).await.body;
            for member in ["description", "icon_uri", "auto_deploy", "cpu", "memory"] {
                assert_eq!(copy.body[member], original[member], "{kind} {member}");
            }
            if let Some(repo) = copy.body.get("git_repository") {
                assert!(repo["deployed_commit_id"].is_null(), "{kind}: {repo}");
            }
        }
    }
}

fn keys(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["key"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

async fn a_clone_carries_configuration_and_stays_unique<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let other = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            service_bodies("")[0].1.clone(),
        )
        .await
        .expect(201)
        .id();
    let path = |p: &str| format!("/application/{app}/{p}");
    t.put(
        &path("advancedSettings"),
        json!({"build.timeout_max_sec": 900}),
    )
    .await
    .expect(201);
    t.post(
        &path("environmentVariable"),
        json!({"key": "MODE", "value": "fast"}),
    )
    .await
    .expect(201);
    t.post(&path("secret"), json!({"key": "TOKEN", "value": "hunter2"}))
        .await
        .expect(201);
    let env_var = t
        .post(
            &format!("/environment/{env}/environmentVariable"),
            json!({"key": "REGION", "value": "eu"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &path(&format!("environmentVariable/{env_var}/alias")),
        json!({"key": "MY_REGION"}),
    )
    .await
    .expect(201);
    t.post(
        &path("deploymentRestriction"),
        json!({"mode": "MATCH", "type": "PATH", "value": "api/"}),
    )
    .await
    .expect(201);
    t.post(
        &path("customDomain"),
        json!({"domain": "api.acme.com", "generate_certificate": true}),
    )
    .await
    .expect(201);
    let db = t
        .post(
            &format!("/environment/{other}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await
        .expect(201)
        .id();

    // Into the same environment: the alias of the environment's variable is kept.
    let same = t
        .post(
            &path("clone"),
            json!({"name": "api-2", "environment_id": env}),
        )
        .await
        .expect(202)
        .id();
    let vars = t
        .get(&format!("/application/{same}/environmentVariable"))
        .await
        .expect(200);
    let own: Vec<String> = keys(&vars.body)
        .into_iter()
        .filter(|k| ["MODE", "MY_REGION"].contains(&k.as_str()))
        .collect();
    assert_eq!(own, ["MODE", "MY_REGION"]);
    let secrets = t
        .get(&format!("/application/{same}/secret"))
        .await
        .expect(200);
    assert_eq!(keys(&secrets.body), ["TOKEN"]);
    // Into another environment: the alias of the source environment's variable is left
    // behind, and the copy is linked to the databases there.
    let moved = t
        .post(
            &path("clone"),
            json!({"name": "api", "environment_id": other}),
        )
        .await
        .expect(202)
        .id();
    let vars = t
        .get(&format!("/application/{moved}/environmentVariable"))
        .await
        .expect(200);
    let found = keys(&vars.body);
    assert!(found.contains(&"MODE".to_string()), "{found:?}");
    assert!(!found.contains(&"MY_REGION".to_string()), "{found:?}");
    assert!(
        found.iter().any(|k| k.starts_with("CAPSTAN_REDIS_")),
        "linked to the database of its new environment: {found:?}"
    );
    let linked = t
        .get(&format!("/database/{db}/application"))
        .await
        .expect(200);
    assert_eq!(linked.body["results"][0]["id"], moved.as_str());
    for copy in [&same, &moved] {
        let settings = t
            .get(&format!("/application/{copy}/advancedSettings"))
            .await
            .expect(200);
        assert_eq!(settings.body["build.timeout_max_sec"], 900);
        let restrictions = t
            .get(&format!("/application/{copy}/deploymentRestriction"))
            .await
            .expect(200);
        assert_eq!(restrictions.body["results"][0]["value"], "api/");
        let domains = t
            .get(&format!("/application/{copy}/customDomain"))
            .await
            .expect(200);
        let short = &copy.replace('-', "")[..8];
        assert_eq!(
            domains.body["results"][0]["domain"],
            format!("api-{short}.acme.com")
        );
    }
}

async fn clones_are_checked<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            service_bodies("")[0].1.clone(),
        )
        .await
        .expect(201)
        .id();
    let path = format!("/application/{app}/clone");
    t.post(&path, json!({"name": "api", "environment_id": env}))
        .await
        .expect_error(409, "a service named 'api' already exists");
    t.post(&path, json!({"name": "copy"}))
        .await
        .expect_error(400, "environment_id");
    t.post(&path, json!({"name": " ", "environment_id": env}))
        .await
        .expect_error(400, "name:");
    t.post(
        &path,
        json!({"name": "copy", "environment_id": uuid::Uuid::new_v4()}),
    )
    .await
    .expect(404);
    t.post(
        &format!("/container/{app}/clone"),
        json!({"name": "copy", "environment_id": env}),
    )
    .await
    .expect(404);
    // Into an environment of another organization: refused.
    let (_, their_env) = t.other_org_environment().await;
    t.post(&path, json!({"name": "copy", "environment_id": their_env}))
        .await
        .expect(403);
    let viewer = t.token_with_role(domain::auth::Role::Viewer).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::POST,
            &path,
            Some(json!({"name": "copy", "environment_id": env})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}
