//! Variables and secrets through the routes of their parents (`/{scope}/{id}/environmentVariable/
//! {variableId}`, `.../secret/{secretId}`, their alias and override) and imports, on SQLite and
//! PostgreSQL: one implementation under every route, the rules of the variable operations hold.

use crate::common;

use common::{App, T};
use domain::auth::Role;
use serde_json::{json, Value};

http_suite!(
    a_parent_edits_and_deletes_only_its_own_variables_of_the_route_kind,
    aliases_and_overrides_go_where_the_route_says,
    imports_are_all_or_nothing_and_overwrite_only_when_told,
    imports_name_what_is_wrong,
    viewers_cannot_write_through_parent_routes,
);

/// A project, an environment, an application and a container; returns their ids.
async fn setup<S: App>(t: &T<S>) -> (String, String, String, String) {
    let (_, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await
        .expect(201)
        .id();
    let container = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
        .expect(201)
        .id();
    (project, env, app, container)
}

async fn variable<S: App>(t: &T<S>, parent: &str, segment: &str, key: &str, value: &str) -> String {
    t.post(
        &format!("{parent}/{segment}"),
        json!({"key": key, "value": value}),
    )
    .await
    .expect(201)
    .id()
}

async fn a_parent_edits_and_deletes_only_its_own_variables_of_the_route_kind<S: App>(t: T<S>) {
    let (_, env, app, container) = setup(&t).await;
    let app_path = format!("/application/{app}");
    let var = variable(&t, &app_path, "environmentVariable", "LEVEL", "info").await;
    let secret = variable(&t, &app_path, "secret", "TOKEN", "hunter2-route").await;

    let edited = t
        .put(
            &format!("{app_path}/environmentVariable/{var}"),
            json!({"key": "LOG_LEVEL", "value": "debug", "mount_path": null}),
        )
        .await
        .expect(200);
    assert_eq!(
        (&edited.body["key"], &edited.body["value"]),
        (&json!("LOG_LEVEL"), &json!("debug"))
    );
    assert_eq!(edited.body["scope"], "APPLICATION");
    let shown = t.get(&format!("/variable/{var}")).await.expect(200);
    assert_eq!(shown.body["value"], "debug");

    let edited = t
        .put(
            &format!("{app_path}/secret/{secret}"),
            json!({"key": "API_TOKEN", "value": "hunter3-route"}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["key"], "API_TOKEN");
    assert!(!edited.text.contains("hunter3-route") && edited.body.get("value").is_none());

    // Another parent, or the other kind of route, does not find them.
    for (path, noun) in [
        (
            format!("/container/{container}/environmentVariable/{var}"),
            "variable",
        ),
        (
            format!("/environment/{env}/environmentVariable/{var}"),
            "variable",
        ),
        (
            format!("/container/{app}/environmentVariable/{var}"),
            "variable",
        ),
        (format!("{app_path}/secret/{var}"), "secret"),
        (
            format!("{app_path}/environmentVariable/{secret}"),
            "variable",
        ),
    ] {
        t.put(&path, json!({"key": "X", "value": "y"}))
            .await
            .expect_error(404, &format!("{noun} not found"));
        t.delete(&path)
            .await
            .expect_error(404, &format!("{noun} not found"));
    }
    // The rules of the variable operations hold here too.
    t.put(
        &format!("{app_path}/environmentVariable/{var}"),
        json!({"key": "1BAD"}),
    )
    .await
    .expect_error(400, "key: must start with a letter");
    t.put(
        &format!("{app_path}/environmentVariable/{var}"),
        json!({"key": "LOG_LEVEL", "mount_path": "/etc/level"}),
    )
    .await
    .expect_error(400, "mount_path: only a file variable");

    t.delete(&format!("{app_path}/environmentVariable/{var}"))
        .await
        .expect(204);
    t.delete(&format!("{app_path}/secret/{secret}"))
        .await
        .expect(204);
    t.get(&format!("/variable/{var}"))
        .await
        .expect_error(404, "variable not found");
    let left = t.get(&format!("{app_path}/secret")).await.expect(200);
    assert_eq!(left.body["pagination"]["total_count"], 0, "{}", left.text);
}

async fn aliases_and_overrides_go_where_the_route_says<S: App>(t: T<S>) {
    let (project, env, app, _) = setup(&t).await;
    let project_path = format!("/project/{project}");
    let url = variable(&t, &project_path, "environmentVariable", "DB_URL", "pg://a").await;
    let password = variable(&t, &project_path, "secret", "DB_PASSWORD", "hunter2-db").await;

    let alias = t
        .post(
            &format!("/application/{app}/environmentVariable/{url}/alias"),
            json!({"key": "DATABASE_URL"}),
        )
        .await
        .expect(201);
    assert_eq!(alias.body["scope"], "APPLICATION");
    assert_eq!(alias.body["variable_type"], "ALIAS");
    assert_eq!(alias.body["aliased_variable"]["id"], json!(url));
    assert_eq!(
        alias.body["value"], "pg://a",
        "an alias shows what it stands for"
    );

    let over = t
        .post(
            &format!("/environment/{env}/secret/{password}/override"),
            json!({"value": "hunter3-db"}),
        )
        .await
        .expect(201);
    assert_eq!(over.body["scope"], "ENVIRONMENT");
    assert_eq!(over.body["variable_type"], "OVERRIDE");
    assert_eq!(over.body["overridden_secret"]["id"], json!(password));
    assert!(!over.text.contains("hunter3-db") && !over.text.contains("hunter2-db"));

    // A secret is not found through a variable route, nor a variable through a secret route.
    t.post(
        &format!("/application/{app}/environmentVariable/{password}/alias"),
        json!({"key": "PW"}),
    )
    .await
    .expect_error(404, "variable not found");
    t.post(
        &format!("/application/{app}/secret/{url}/override"),
        json!({"value": "x"}),
    )
    .await
    .expect_error(404, "secret not found");
    // Nothing is above a project, and an alias of a key already there is a conflict.
    t.post(
        &format!("{project_path}/environmentVariable/{url}/override"),
        json!({"value": "x"}),
    )
    .await
    .expect_error(400, "override_scope: an override must be at a lower scope");
    t.post(
        &format!("/application/{app}/environmentVariable/{url}/alias"),
        json!({"key": "DATABASE_URL"}),
    )
    .await
    .expect_error(
        409,
        "a variable with key 'DATABASE_URL' already exists in this application",
    );
    // A variable of another environment is not visible here.
    let other = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    let theirs = variable(
        &t,
        &format!("/environment/{other}"),
        "environmentVariable",
        "THEIRS",
        "1",
    )
    .await;
    t.post(
        &format!("/application/{app}/environmentVariable/{theirs}/override"),
        json!({"value": "2"}),
    )
    .await
    .expect_error(400, "override_scope:");
}

fn imported(v: &Value) -> Vec<(String, String, bool, Option<String>)> {
    v["successful_imported_variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["scope"].as_str().unwrap().to_string(),
                i["is_secret"].as_bool().unwrap(),
                i["value"].as_str().map(String::from),
            )
        })
        .collect()
}

/// The keys and values a parent shows (variables only; secrets show no value).
async fn values<S: App>(t: &T<S>, path: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = t.get(path).await.expect(200).body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["key"].as_str().unwrap().to_string(),
                v["scope"].as_str().unwrap().to_string(),
                v["value"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn imports_are_all_or_nothing_and_overwrite_only_when_told<S: App>(t: T<S>) {
    let (project, env, app, _) = setup(&t).await;
    let path = format!("/application/{app}/environmentVariable/import");
    let vars = json!([
        {"name": "REGION", "value": "eu", "scope": "PROJECT", "is_secret": false},
        {"name": "LEVEL", "value": "info", "scope": "ENVIRONMENT", "is_secret": false},
        {"name": "API_KEY", "value": "hunter2-import", "scope": "APPLICATION", "is_secret": true},
    ]);
    let done = t
        .post(&path, json!({"overwrite": false, "vars": vars}))
        .await
        .expect(201);
    assert_eq!(done.body["total_variables_to_import"], 3);
    assert_eq!(
        imported(&done.body),
        [
            ("REGION".into(), "PROJECT".into(), false, Some("eu".into())),
            (
                "LEVEL".into(),
                "ENVIRONMENT".into(),
                false,
                Some("info".into())
            ),
            ("API_KEY".into(), "APPLICATION".into(), true, None),
        ]
    );
    assert!(!done.text.contains("hunter2-import"));
    let before = values(&t, &format!("/application/{app}/environmentVariable")).await;
    assert_eq!(
        before,
        [
            ("LEVEL".into(), "ENVIRONMENT".into(), "info".into()),
            ("REGION".into(), "PROJECT".into(), "eu".into()),
        ]
    );
    let secrets = t
        .get(&format!("/application/{app}/secret"))
        .await
        .expect(200);
    assert_eq!(secrets.body["results"][0]["key"], "API_KEY");

    // A key taken, without overwrite: nothing of the import is written.
    let again = json!([
        {"name": "NEW_ONE", "value": "1", "scope": "ENVIRONMENT", "is_secret": false},
        {"name": "LEVEL", "value": "debug", "scope": "ENVIRONMENT", "is_secret": false},
    ]);
    t.post(&path, json!({"overwrite": false, "vars": again.clone()}))
        .await
        .expect_error(
            409,
            "a variable with key 'LEVEL' already exists in this environment (send overwrite: true",
        );
    assert_eq!(
        values(&t, &format!("/environment/{env}/environmentVariable")).await,
        before
            .iter()
            .filter(|v| v.0 == "LEVEL" || v.0 == "REGION")
            .cloned()
            .collect::<Vec<_>>()
    );
    // With overwrite, the value is replaced and the new key added.
    t.post(&path, json!({"overwrite": true, "vars": again}))
        .await
        .expect(201);
    assert_eq!(
        values(&t, &format!("/environment/{env}/environmentVariable")).await,
        [
            ("LEVEL".into(), "ENVIRONMENT".into(), "debug".into()),
            ("NEW_ONE".into(), "ENVIRONMENT".into(), "1".into()),
            ("REGION".into(), "PROJECT".into(), "eu".into()),
        ]
    );
    // The same through /variable/import, naming the service in the query.
    t.post(
        &format!("/variable/import?service_id={app}&service_type=APPLICATION"),
        json!({"overwrite": true, "vars": [{"name": "REGION", "value": "us", "scope": "PROJECT", "is_secret": false}]}),
    )
    .await
    .expect(201);
    let region = values(&t, &format!("/project/{project}/environmentVariable")).await;
    assert_eq!(region, [("REGION".into(), "PROJECT".into(), "us".into())]);
}

async fn imports_name_what_is_wrong<S: App>(t: T<S>) {
    let (_, _, app, container) = setup(&t).await;
    let path = format!("/application/{app}/environmentVariable/import");
    let one = |name: &str, scope: &str, secret: bool| json!({"name": name, "value": "v", "scope": scope, "is_secret": secret});
    for (vars, status, message) in [
        (
            json!([one("A", "CONTAINER", false)]),
            400,
            "vars[0].scope: must be PROJECT, ENVIRONMENT or APPLICATION",
        ),
        (
            json!([one("OK", "PROJECT", false), one("9LIVES", "PROJECT", false)]),
            400,
            "vars[1].name: must start with a letter",
        ),
        (
            json!([
                one("TWICE", "ENVIRONMENT", false),
                one("TWICE", "ENVIRONMENT", true)
            ]),
            400,
            "vars[1].name: TWICE is imported twice at scope ENVIRONMENT",
        ),
        (json!([one("A", "BUILT_IN", false)]), 400, "vars[0].scope"),
    ] {
        t.post(&path, json!({"overwrite": true, "vars": vars}))
            .await
            .expect_error(status, message);
    }
    t.post(&path, json!({"vars": []}))
        .await
        .expect_error(400, "overwrite: is required");
    // A secret does not replace a variable, nor the other way round.
    t.post(
        &path,
        json!({"overwrite": false, "vars": [one("SHARED", "APPLICATION", false)]}),
    )
    .await
    .expect(201);
    t.post(
        &path,
        json!({"overwrite": true, "vars": [one("SHARED", "APPLICATION", true)]}),
    )
    .await
    .expect_error(
        409,
        "vars[0]: SHARED exists as a variable; a secret cannot replace it",
    );
    // The kind the route or the query names must be the service's.
    t.post(
        &format!("/container/{app}/environmentVariable/import"),
        json!({"overwrite": true, "vars": []}),
    )
    .await
    .expect_error(404, "container not found");
    t.post(
        &format!("/variable/import?service_id={container}&service_type=JOB"),
        json!({"overwrite": true, "vars": []}),
    )
    .await
    .expect_error(404, "job not found");
    t.post("/variable/import", json!({"overwrite": true, "vars": []}))
        .await
        .expect_error(400, "service_id: is required");
}

async fn viewers_cannot_write_through_parent_routes<S: App>(t: T<S>) {
    let (_, _, app, _) = setup(&t).await;
    let app_path = format!("/application/{app}");
    let var = variable(&t, &app_path, "environmentVariable", "LEVEL", "info").await;
    let viewer = t.token_with_role(Role::Viewer).await;
    for (method, path, body) in [
        (
            actix_web::http::Method::PUT,
            format!("{app_path}/environmentVariable/{var}"),
            json!({"key": "LEVEL", "value": "x"}),
        ),
        (
            actix_web::http::Method::DELETE,
            format!("{app_path}/environmentVariable/{var}"),
            json!(null),
        ),
        (
            actix_web::http::Method::POST,
            format!("{app_path}/environmentVariable/{var}/alias"),
            json!({"key": "OTHER"}),
        ),
        (
            actix_web::http::Method::POST,
            format!("{app_path}/environmentVariable/import"),
            json!({"overwrite": true, "vars": []}),
        ),
    ] {
        let r = t.call(Some(&viewer), method, &path, Some(body)).await;
        assert_eq!(r.status, 403, "{path}: {}", r.text);
    }
}
