//! Variables and secrets over HTTP (endpoints 2, 3 and 6 and the variable operations), on SQLite
//! and PostgreSQL.

use crate::common;

use common::{App, T};
use domain::model::DeploymentStatus;
use domain::ports::Repo;
use serde_json::{json, Value};

http_suite!(
    container_variable_has_the_creation_members,
    editing_returns_the_edit_form,
    variable_rules_are_enforced,
    secrets_never_show_their_value,
    variables_are_inherited_down_the_hierarchy,
    aliases_point_at_a_variable,
    overrides_replace_a_value_lower_down,
    scoped_operations_take_the_parent_in_the_request,
    changes_mark_deployed_services_out_of_date,
);

/// An environment with a container and an application; returns (project, env, container, app).
async fn setup<S: App>(t: &T<S>) -> (String, String, String, String) {
    let (_, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let container = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
        .expect(201)
        .id();
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await
        .expect(201)
        .id();
    (project, env, container, app)
}

async fn container_variable_has_the_creation_members<S: App>(t: T<S>) {
    let (_, _, container, _) = setup(&t).await;
    let v = t
        .post(
            &format!("/container/{container}/environmentVariable"),
            json!({"key": "PORT", "value": "8080", "description": "port"}),
        )
        .await
        .expect(201)
        .body;
    for member in [
        "id",
        "created_at",
        "key",
        "value",
        "scope",
        "variable_type",
        "service_id",
        "service_name",
        "service_type",
        "owned_by",
    ] {
        assert!(!v[member].is_null(), "missing {member}: {v}");
    }
    assert_eq!(v["scope"], "CONTAINER");
    assert_eq!(v["variable_type"], "VALUE");
    assert_eq!(v["value"], "8080");
    assert_eq!(v["service_id"], json!(container));
    assert_eq!(v["service_name"], "web");
    assert_eq!(v["service_type"], "CONTAINER");
    assert!(
        v.get("is_secret").is_none(),
        "is_secret is only in the edit form"
    );
    assert!(v.get("secret_manager_access_id").is_none());

    let file = t
        .post(&format!("/container/{container}/environmentVariable"), json!({"key": "CONFIG", "value": "a: 1", "mount_path": "/etc/app/config.yaml", "enable_interpolation_in_file": true}))
        .await
        .expect(201)
        .body;
    assert_eq!(file["variable_type"], "FILE");
    assert_eq!(file["mount_path"], "/etc/app/config.yaml");
    assert_eq!(file["enable_interpolation_in_file"], true);

    let list = t
        .get(&format!("/container/{container}/environmentVariable"))
        .await
        .expect(200);
    assert_eq!(list.body["results"].as_array().unwrap().len(), 2);
    assert_eq!(list.body["pagination"]["total_count"], 2);
    // Variables and secrets are kept apart.
    let secrets = t
        .get(&format!("/container/{container}/secret"))
        .await
        .expect(200);
    assert_eq!(secrets.body["results"], json!([]));
}

async fn editing_returns_the_edit_form<S: App>(t: T<S>) {
    let (_, _, container, _) = setup(&t).await;
    let id = t
        .post(
            &format!("/container/{container}/environmentVariable"),
            json!({"key": "A", "value": "1"}),
        )
        .await
        .expect(201)
        .id();
    let edited = t
        .put(
            &format!("/variable/{id}"),
            json!({"key": "B", "value": "2", "description": "d"}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(
        (edited["key"].as_str(), edited["value"].as_str()),
        (Some("B"), Some("2"))
    );
    assert_eq!(edited["is_secret"], false);
    assert!(edited
        .as_object()
        .unwrap()
        .contains_key("secret_manager_access_id"));
    assert!(edited["secret_manager_access_id"].is_null());
    assert_eq!(edited["description"], "d");
    // A value left out is kept.
    let kept = t
        .put(&format!("/variable/{id}"), json!({"key": "B"}))
        .await
        .expect(200)
        .body;
    assert_eq!(kept["value"], "2");
    assert_eq!(kept["description"], "d");
    let cleared = t
        .put(
            &format!("/variable/{id}"),
            json!({"key": "B", "description": null}),
        )
        .await
        .expect(200)
        .body;
    assert!(cleared["description"].is_null());

    let secret = t
        .post(
            &format!("/container/{container}/secret"),
            json!({"key": "TOKEN", "value": "s3cr3t-edit"}),
        )
        .await
        .expect(201)
        .id();
    let edited = t
        .put(
            &format!("/variable/{secret}"),
            json!({"key": "TOKEN", "value": "n3w-s3cr3t"}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["is_secret"], true);
    assert!(edited.body.as_object().unwrap().contains_key("value"));
    assert!(edited.body["value"].is_null());
    assert!(!edited.text.contains("n3w-s3cr3t"));
}

async fn variable_rules_are_enforced<S: App>(t: T<S>) {
    let (_, env, container, _) = setup(&t).await;
    let path = format!("/container/{container}/environmentVariable");
    t.post(&path, json!({"value": "x"}))
        .await
        .expect_error(400, "key: is required");
    t.post(&path, json!({"key": "1BAD"}))
        .await
        .expect_error(400, "key:");
    t.post(&path, json!({"key": "BAD-KEY"}))
        .await
        .expect_error(400, "key:");
    t.post(&path, json!({"key": "D", "description": "é".repeat(256)}))
        .await
        .expect_error(400, "description: must be at most 255 characters");
    t.post(&path, json!({"key": "D", "description": "é".repeat(255)}))
        .await
        .expect(201);
    t.post(&path, json!({"key": "F", "mount_path": "relative/path"}))
        .await
        .expect_error(400, "mount_path:");
    t.post(&path, json!({"key": "D"}))
        .await
        .expect_error(409, "a variable with key 'D' already exists");
    // Keys are case-sensitive.
    t.post(&path, json!({"key": "d"})).await.expect(201);
    // A secret may not take a key a variable holds in the same parent.
    t.post(
        &format!("/container/{container}/secret"),
        json!({"key": "D", "value": "x"}),
    )
    .await
    .expect(409);

    let id = t.post(&path, json!({"key": "E"})).await.expect(201).id();
    t.put(&format!("/variable/{id}"), json!({"value": "x"}))
        .await
        .expect_error(400, "key: is required");
    t.put(
        &format!("/variable/{id}"),
        json!({"key": "E", "description": "x".repeat(256)}),
    )
    .await
    .expect_error(400, "description:");
    t.put(&format!("/variable/{id}"), json!({"key": "D"}))
        .await
        .expect(409);
    t.put(
        &format!("/variable/{}", uuid::Uuid::new_v4()),
        json!({"key": "E"}),
    )
    .await
    .expect(404);
    t.put("/variable/not-a-uuid", json!({"key": "E"}))
        .await
        .expect_error(400, "variableId:");

    t.post(
        &format!("/container/{}/environmentVariable", uuid::Uuid::new_v4()),
        json!({"key": "X"}),
    )
    .await
    .expect(404);
    let (_, other) = t
        .capstan
        .bootstrap_organization("Other", domain::auth::Role::Admin, "o")
        .await
        .unwrap();
    t.call(
        Some(&other.value),
        actix_web::http::Method::POST,
        &path,
        Some(json!({"key": "X"})),
    )
    .await
    .expect(403);
    t.call(
        Some(&other.value),
        actix_web::http::Method::PUT,
        &format!("/variable/{id}"),
        Some(json!({"key": "X"})),
    )
    .await
    .expect(403);

    let db = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/database/{db}/environmentVariable"),
        json!({"key": "X"}),
    )
    .await
    .expect(400);
    t.delete(&format!("/variable/{id}")).await.expect(204);
    t.delete(&format!("/variable/{id}")).await.expect(404);
}

async fn secrets_never_show_their_value<S: App>(t: T<S>) {
    let (project, env, _, app) = setup(&t).await;
    let created = t
        .post(
            &format!("/application/{app}/secret"),
            json!({"key": "DB_PASSWORD", "value": "pl41nt3xt-app", "description": "db"}),
        )
        .await
        .expect(201);
    assert!(created.body.get("value").is_none());
    t.post(
        &format!("/environment/{env}/secret"),
        json!({"key": "ENV_SECRET", "value": "pl41nt3xt-env"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/project/{project}/secret"),
        json!({"key": "PROJECT_SECRET", "value": "pl41nt3xt-project"}),
    )
    .await
    .expect(201);
    let list = t
        .get(&format!("/application/{app}/secret"))
        .await
        .expect(200);
    let results = list.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{}", list.text);
    for s in results {
        for member in ["id", "created_at", "updated_at", "key", "owned_by"] {
            assert!(!s[member].is_null(), "missing {member}: {s}");
        }
        assert!(s.get("value").is_none());
    }
    let app_secret = results.iter().find(|s| s["key"] == "DB_PASSWORD").unwrap();
    assert_eq!(app_secret["service_id"], json!(app));
    assert_eq!(app_secret["service_name"], "api");
    assert_eq!(app_secret["description"], "db");
    let mut scopes: Vec<&str> = results
        .iter()
        .map(|s| s["scope"].as_str().unwrap())
        .collect();
    scopes.sort();
    assert_eq!(scopes, ["APPLICATION", "ENVIRONMENT", "PROJECT"]);
    let mut seen = list.text.clone();
    seen.push_str(
        &t.get(&format!("/variable?parent_id={app}&scope=APPLICATION"))
            .await
            .expect(200)
            .text,
    );
    seen.push_str(
        &t.get(&format!("/application/{app}/environmentVariable"))
            .await
            .expect(200)
            .text,
    );
    for secret in ["pl41nt3xt-app", "pl41nt3xt-env", "pl41nt3xt-project"] {
        assert!(!seen.contains(secret), "{secret} leaked");
    }
}

async fn variables_are_inherited_down_the_hierarchy<S: App>(t: T<S>) {
    let (project, env, container, app) = setup(&t).await;
    t.post(
        &format!("/project/{project}/environmentVariable"),
        json!({"key": "P", "value": "p"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/environment/{env}/environmentVariable"),
        json!({"key": "E", "value": "e"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/container/{container}/environmentVariable"),
        json!({"key": "C", "value": "c"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/application/{app}/environmentVariable"),
        json!({"key": "A", "value": "a"}),
    )
    .await
    .expect(201);
    let keys = |v: &Value| {
        let mut k: Vec<String> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["key"].as_str().unwrap().to_string())
            .collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(
            &t.get(&format!("/container/{container}/environmentVariable"))
                .await
                .expect(200)
                .body
        ),
        ["C", "E", "P"]
    );
    assert_eq!(
        keys(
            &t.get(&format!("/application/{app}/environmentVariable"))
                .await
                .expect(200)
                .body
        ),
        ["A", "E", "P"]
    );
    assert_eq!(
        keys(
            &t.get(&format!("/environment/{env}/environmentVariable"))
                .await
                .expect(200)
                .body
        ),
        ["E", "P"]
    );
    assert_eq!(
        keys(
            &t.get(&format!("/project/{project}/environmentVariable"))
                .await
                .expect(200)
                .body
        ),
        ["P"]
    );
    let project_var = t
        .get(&format!("/project/{project}/environmentVariable"))
        .await
        .body["results"][0]
        .clone();
    assert_eq!(project_var["scope"], "PROJECT");
    assert_eq!(project_var["owned_by"], "shop");
    let page = t
        .get(&format!(
            "/container/{container}/environmentVariable?page=2&page_size=2"
        ))
        .await
        .expect(200);
    assert_eq!(page.body["pagination"]["total_count"], 3);
    assert_eq!(page.body["results"].as_array().unwrap().len(), 1);
}

async fn aliases_point_at_a_variable<S: App>(t: T<S>) {
    let (project, env, container, _) = setup(&t).await;
    let target = t
        .post(
            &format!("/project/{project}/environmentVariable"),
            json!({"key": "DATABASE_URL", "value": "postgres://x"}),
        )
        .await
        .expect(201)
        .id();
    let alias = t
        .post(
            &format!("/variable/{target}/alias"),
            json!({"key": "DB", "alias_scope": "CONTAINER", "alias_parent_id": container}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(alias["variable_type"], "ALIAS");
    assert_eq!(alias["scope"], "CONTAINER");
    assert_eq!(alias["aliased_variable"]["id"], json!(target));
    assert_eq!(alias["aliased_variable"]["key"], "DATABASE_URL");
    assert_eq!(alias["value"], "postgres://x");
    let alias_id = alias["id"].as_str().unwrap().to_string();
    t.put(
        &format!("/variable/{alias_id}"),
        json!({"key": "DB", "value": "other"}),
    )
    .await
    .expect_error(400, "value:");
    t.put(&format!("/variable/{alias_id}"), json!({"key": "DB2"}))
        .await
        .expect(200);
    // Without a scope, the alias sits beside its variable.
    let beside = t
        .post(
            &format!("/variable/{target}/alias"),
            json!({"key": "DB_URL"}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(beside["scope"], "PROJECT");
    t.post(
        &format!("/variable/{target}/alias"),
        json!({"key": "DB_URL"}),
    )
    .await
    .expect(409);
    // Not above its variable, and not of an alias.
    let env_var = t
        .post(
            &format!("/environment/{env}/environmentVariable"),
            json!({"key": "ENV_ONLY", "value": "x"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/variable/{env_var}/alias"),
        json!({"key": "UP", "alias_scope": "PROJECT", "alias_parent_id": project}),
    )
    .await
    .expect_error(400, "alias_parent_id:");
    t.post(&format!("/variable/{alias_id}/alias"), json!({"key": "AA"}))
        .await
        .expect(400);
    t.post(
        &format!("/variable/{target}/alias"),
        json!({"key": "bad key"}),
    )
    .await
    .expect_error(400, "key:");
    // Deleting the variable takes its aliases with it.
    t.delete(&format!("/variable/{target}")).await.expect(204);
    t.put(&format!("/variable/{alias_id}"), json!({"key": "DB3"}))
        .await
        .expect(404);
}

async fn overrides_replace_a_value_lower_down<S: App>(t: T<S>) {
    let (project, env, container, _) = setup(&t).await;
    let target = t
        .post(
            &format!("/project/{project}/environmentVariable"),
            json!({"key": "LOG_LEVEL", "value": "info"}),
        )
        .await
        .expect(201)
        .id();
    let o = t
        .post(
            &format!("/variable/{target}/override"),
            json!({"value": "debug", "override_scope": "ENVIRONMENT", "override_parent_id": env}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(o["variable_type"], "OVERRIDE");
    assert_eq!(o["key"], "LOG_LEVEL");
    assert_eq!(o["value"], "debug");
    assert_eq!(o["scope"], "ENVIRONMENT");
    assert_eq!(o["overridden_variable"]["id"], json!(target));
    assert_eq!(o["overridden_variable"]["value"], "info");
    let id = o["id"].as_str().unwrap().to_string();
    t.put(&format!("/variable/{id}"), json!({"key": "OTHER"}))
        .await
        .expect_error(400, "key:");
    let edited = t
        .put(
            &format!("/variable/{id}"),
            json!({"key": "LOG_LEVEL", "value": "warn"}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["value"], "warn");
    t.post(
        &format!("/variable/{target}/override"),
        json!({"value": "x", "override_scope": "PROJECT", "override_parent_id": project}),
    )
    .await
    .expect_error(400, "override_scope:");
    // The generic route takes the value, the scope and the parent.
    for (body, message) in [
        (
            json!({"override_scope": "CONTAINER", "override_parent_id": container}),
            "value: is required",
        ),
        (
            json!({"value": "x", "override_parent_id": container}),
            "override_scope: is required",
        ),
        (
            json!({"value": "x", "override_scope": "CONTAINER"}),
            "override_parent_id: is required",
        ),
    ] {
        t.post(&format!("/variable/{target}/override"), body)
            .await
            .expect_error(400, message);
    }
    t.post(
        &format!("/variable/{target}/override"),
        json!({"value": "x", "override_scope": "CONTAINER", "override_parent_id": container}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/variable/{target}/override"),
        json!({"value": "x", "override_scope": "CONTAINER", "override_parent_id": container}),
    )
    .await
    .expect(409);
    t.post(
        &format!("/variable/{target}/override"),
        json!({"value": "x"}),
    )
    .await
    .expect_error(400, "override_scope: is required");
    t.post(
        &format!("/variable/{target}/override"),
        json!({"value": "x", "override_scope": "APPLICATION", "override_parent_id": container}),
    )
    .await
    .expect_error(400, "override_scope:");
}

async fn scoped_operations_take_the_parent_in_the_request<S: App>(t: T<S>) {
    let (_, env, container, _) = setup(&t).await;
    let created = t
        .post("/variable", json!({"key": "S", "value": "v", "is_secret": true, "variable_scope": "ENVIRONMENT", "variable_parent_id": env}))
        .await
        .expect(201)
        .body;
    assert_eq!(created["is_secret"], true);
    assert!(created["value"].is_null());
    t.post("/variable", json!({"key": "V", "value": "v", "variable_scope": "CONTAINER", "variable_parent_id": container})).await.expect(201);
    t.post(
        "/variable",
        json!({"key": "V", "variable_scope": "BUILT_IN", "variable_parent_id": container}),
    )
    .await
    .expect(400);
    t.post(
        "/variable",
        json!({"key": "V", "variable_scope": "NOPE", "variable_parent_id": container}),
    )
    .await
    .expect_error(400, "variable_scope:");
    let listed = t
        .get(&format!("/variable?parent_id={container}&scope=CONTAINER"))
        .await
        .expect(200);
    let keys: Vec<&str> = listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["S", "V"]);
    assert!(listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v.get("is_secret").is_some()));
    t.get("/variable?scope=CONTAINER")
        .await
        .expect_error(400, "parent_id: is required");
    t.get(&format!("/variable?parent_id={container}"))
        .await
        .expect_error(400, "scope: is required");
    t.get(&format!("/variable?parent_id={container}&scope=HELM"))
        .await
        .expect(400);
}

async fn changes_mark_deployed_services_out_of_date<S: App>(t: T<S>) {
    let (project, _, container, app) = setup(&t).await;
    // No deployment engine yet: mark both services deployed through the store.
    let store = t.capstan.store().clone();
    for id in [&container, &app] {
        let mut s: domain::model::Service =
            Repo::get(&mut *store.read().await.unwrap(), id.parse().unwrap())
                .await
                .unwrap()
                .unwrap();
        s.deployment_status = DeploymentStatus::UpToDate;
        Repo::update(&mut *store.read().await.unwrap(), &s)
            .await
            .unwrap();
    }
    let status = |id: String| {
        let store = store.clone();
        async move {
            let s: domain::model::Service =
                Repo::get(&mut *store.read().await.unwrap(), id.parse().unwrap())
                    .await
                    .unwrap()
                    .unwrap();
            s.deployment_status
        }
    };
    t.post(
        &format!("/container/{container}/environmentVariable"),
        json!({"key": "ONLY_WEB", "value": "1"}),
    )
    .await
    .expect(201);
    assert_eq!(status(container.clone()).await, DeploymentStatus::OutOfDate);
    assert_eq!(
        status(app.clone()).await,
        DeploymentStatus::UpToDate,
        "another service is not reached"
    );
    let id = t
        .post(
            &format!("/project/{project}/secret"),
            json!({"key": "SHARED", "value": "x"}),
        )
        .await
        .expect(201)
        .id();
    assert_eq!(status(app.clone()).await, DeploymentStatus::OutOfDate);
    let mut s: domain::model::Service =
        Repo::get(&mut *store.read().await.unwrap(), app.parse().unwrap())
            .await
            .unwrap()
            .unwrap();
    s.deployment_status = DeploymentStatus::UpToDate;
    Repo::update(&mut *store.read().await.unwrap(), &s)
        .await
        .unwrap();
    t.put(
        &format!("/variable/{id}"),
        json!({"key": "SHARED", "value": "y"}),
    )
    .await
    .expect(200);
    assert_eq!(status(app.clone()).await, DeploymentStatus::OutOfDate);
    t.delete(&format!("/variable/{id}")).await.expect(204);

    // A service never deployed stays so.
    let env2 = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "fresh"}),
        )
        .await
        .expect(201)
        .id();
    let registry = t
        .get(&format!("/organization/{}/containerRegistry", t.org))
        .await
        .body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let fresh = t
        .post(
            &format!("/environment/{env2}/container"),
            json!({"name": "new", "registry_id": registry, "image_name": "x", "tag": "1"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/project/{project}/environmentVariable"),
        json!({"key": "AGAIN", "value": "1"}),
    )
    .await
    .expect(201);
    assert_eq!(status(fresh).await, DeploymentStatus::NeverDeployed);
}
