//! Links between databases and applications over HTTP, on both backends: the connection
//! variables an application gets from each database of its environment, listing and removing a
//! link, and what environment clone and deletion do to them.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    applications_and_databases_are_linked_whichever_comes_first,
    connection_variables_are_built_in_and_keep_their_secrets,
    unlinking_removes_the_variables_and_their_aliases,
    links_follow_an_environment_clone_and_go_with_the_database,
    a_database_has_credentials_versions_and_configurations,
    backups_are_taken_listed_restored_and_deleted,
    a_deployed_database_is_moved_by_a_redeploy_that_names_its_node,
    a_database_made_before_credentials_were_kept_gets_its_links_password,
);

async fn create<S: App>(t: &T<S>, env: &str, kind: &str, name: &str) -> String {
    let mut body = service_bodies("unused")
        .into_iter()
        .find(|(k, _)| *k == kind)
        .unwrap()
        .1;
    body["name"] = json!(name);
    t.post(&format!("/environment/{env}/{kind}"), body)
        .await
        .expect(201)
        .id()
}

async fn linked<S: App>(t: &T<S>, database: &str) -> Vec<String> {
    let r = t
        .get(&format!("/database/{database}/application"))
        .await
        .expect(200);
    r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_string())
        .collect()
}

/// The BUILT_IN variables (and secrets) an application holds, by key; each says in `list` which
/// list answered it.
async fn built_in<S: App>(t: &T<S>, app: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for list in ["environmentVariable", "secret"] {
        let r = t
            .get(&format!("/application/{app}/{list}"))
            .await
            .expect(200);
        out.extend(
            r.body["results"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v["scope"] == "BUILT_IN")
                .map(|v| {
                    let mut v = v.clone();
                    v["list"] = json!(list);
                    v
                }),
        );
    }
    out.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
    out
}

fn prefix(database: &str) -> String {
    format!(
        "CAPSTAN_POSTGRESQL_Z{}_",
        database.replace('-', "")[..8].to_uppercase()
    )
}

async fn applications_and_databases_are_linked_whichever_comes_first<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let before = create(&t, &env, "application", "before").await;
    let db = create(&t, &env, "database", "db").await;
    let after = create(&t, &env, "application", "after").await;
    // Other kinds hold no connection.
    let registry = t.registry().await;
    let mut body = service_bodies(&registry)[1].1.clone();
    body["name"] = json!("web");
    let container = t
        .post(&format!("/environment/{env}/container"), body)
        .await
        .expect(201)
        .id();
    assert_eq!(linked(&t, &db).await, [before.clone(), after.clone()]);
    for app in [&before, &after] {
        let keys: Vec<String> = built_in(&t, app)
            .await
            .iter()
            .map(|v| v["key"].as_str().unwrap().to_string())
            .collect();
        let p = prefix(&db);
        let mut expected: Vec<String> = [
            "DATABASE_URL",
            "DEFAULT_DATABASE_NAME",
            "HOST",
            "LOGIN",
            "PASSWORD",
            "PORT",
        ]
        .iter()
        .map(|k| format!("{p}{k}"))
        .collect();
        expected.sort();
        assert_eq!(keys, expected, "{app}");
    }
    let theirs = t
        .get(&format!("/container/{container}/environmentVariable"))
        .await
        .expect(200);
    assert!(theirs.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["scope"] != "BUILT_IN"));
    // A database of another environment is not linked.
    let other_env = t
        .post(
            &format!("/project/{}/environment", {
                t.get(&format!("/environment/{env}")).await.body["project"]["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            }),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    let there = create(&t, &other_env, "application", "there").await;
    let elsewhere = create(&t, &other_env, "database", "db2").await;
    assert_eq!(linked(&t, &elsewhere).await, [there]);
    assert_eq!(built_in(&t, &before).await.len(), 6);
    // Unknown database, a service of another kind, another organization.
    t.get(&format!("/database/{}/application", uuid::Uuid::new_v4()))
        .await
        .expect(404);
    t.get(&format!("/database/{before}/application"))
        .await
        .expect(404);
    let stranger = t.other_org_token().await;
    let r = t
        .call(
            Some(&stranger),
            actix_web::http::Method::GET,
            &format!("/database/{db}/application"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn connection_variables_are_built_in_and_keep_their_secrets<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let a = create(&t, &env, "application", "a").await;
    let b = create(&t, &env, "application", "b").await;
    let vars = built_in(&t, &a).await;
    let p = prefix(&db);
    let by_key = |key: &str| -> Value {
        vars.iter()
            .find(|v| v["key"] == format!("{p}{key}"))
            .cloned()
            .unwrap()
    };
    assert_eq!(by_key("PORT")["value"], "5432");
    assert_eq!(by_key("LOGIN")["value"], "superuser");
    assert_eq!(by_key("DEFAULT_DATABASE_NAME")["value"], "postgres");
    assert!(by_key("HOST")["value"]
        .as_str()
        .unwrap()
        .ends_with("-postgresql"));
    for v in &vars {
        assert_eq!(v["variable_type"], "BUILT_IN", "{v}");
        assert_eq!(v["service_id"], a, "{v}");
    }
    for secret in ["PASSWORD", "DATABASE_URL"] {
        let v = by_key(secret);
        assert_eq!(v["list"], "secret", "{v}");
        assert!(
            v.get("value").is_none(),
            "a secret's value is never answered: {v}"
        );
    }
    for plain in ["HOST", "PORT", "LOGIN", "DEFAULT_DATABASE_NAME"] {
        assert_eq!(by_key(plain)["list"], "environmentVariable");
    }
    // Not to be edited nor deleted by clients.
    let host = by_key("HOST")["id"].as_str().unwrap().to_string();
    t.put(
        &format!("/application/{a}/environmentVariable/{host}"),
        json!({"key": format!("{p}HOST"), "value": "elsewhere"}),
    )
    .await
    .expect_error(400, "variable_type");
    t.delete(&format!("/variable/{host}"))
        .await
        .expect_error(400, "variable_type");
    t.delete(&format!("/application/{a}/environmentVariable/{host}"))
        .await
        .expect_error(400, "variable_type");
    // Every link of a database carries its one password.
    let password = |vars: Vec<Value>| {
        vars.into_iter()
            .find(|v| v["key"] == format!("{p}PASSWORD"))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (pa, pb) = (
        password(built_in(&t, &a).await),
        password(built_in(&t, &b).await),
    );
    let store = t.capstan.store().clone();
    let value = |id: String| {
        let store = store.clone();
        async move {
            use domain::ports::Repo;
            let mut unit = store.read().await.unwrap();
            let v: domain::model::Variable = Repo::get(&mut *unit, id.parse().unwrap())
                .await
                .unwrap()
                .unwrap();
            v.value.unwrap().expose().to_string()
        }
    };
    let (va, vb) = (value(pa).await, value(pb).await);
    assert_eq!(va, vb);
    assert_eq!(va.len(), 32);
    assert!(va.chars().all(|c| c.is_ascii_alphanumeric()));
}

async fn unlinking_removes_the_variables_and_their_aliases<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let app = create(&t, &env, "application", "app").await;
    let kept = create(&t, &env, "application", "kept").await;
    let host = built_in(&t, &app)
        .await
        .into_iter()
        .find(|v| v["key"] == format!("{}HOST", prefix(&db)))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let alias = t
        .post(
            &format!("/application/{app}/environmentVariable/{host}/alias"),
            json!({"key": "DB_HOST"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "4f2a9c1"}),
    )
    .await
    .expect(202);
    let status = format!("/application/{app}/status");
    assert_eq!(
        t.settle(&status).await["service_deployment_status"],
        "UP_TO_DATE"
    );

    t.delete(&format!("/database/{db}/application/{app}"))
        .await
        .expect(204);
    assert!(built_in(&t, &app).await.is_empty());
    t.get(&format!("/variable/{alias}")).await.expect(404);
    assert_eq!(linked(&t, &db).await, [kept.as_str()]);
    assert_eq!(built_in(&t, &kept).await.len(), 6);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
    // Once removed, a link is not there to remove; nor is one to a service that is not linked.
    t.delete(&format!("/database/{db}/application/{app}"))
        .await
        .expect(404);
    t.delete(&format!("/database/{db}/application/{db}"))
        .await
        .expect(404);
    t.delete(&format!(
        "/database/{db}/application/{}",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
    // Editing the application does not bring the link back.
    let mut body = service_bodies("unused")[0].1.clone();
    body["name"] = json!("app");
    body["description"] = json!("edited");
    t.put(&format!("/application/{app}"), body)
        .await
        .expect(200);
    assert!(built_in(&t, &app).await.is_empty());
}

async fn links_follow_an_environment_clone_and_go_with_the_database<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let app = create(&t, &env, "application", "app").await;
    let unlinked = create(&t, &env, "application", "unlinked").await;
    t.delete(&format!("/database/{db}/application/{unlinked}"))
        .await
        .expect(204);
    let copy = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy"}),
        )
        .await
        .expect(202)
        .id();
    let services = t
        .get(&format!("/environment/{copy}/services"))
        .await
        .expect(200);
    let id_of = |name: &str| -> String {
        services.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (db2, app2) = (id_of("db"), id_of("app"));
    assert_eq!(linked(&t, &db2).await, [app2.as_str()]);
    let copied = built_in(&t, &app2).await;
    assert_eq!(copied.len(), 6);
    assert!(
        copied
            .iter()
            .all(|v| v["key"].as_str().unwrap().starts_with(&prefix(&db2))),
        "the copy reaches the copied database, never the source's: {copied:?}"
    );
    let host = |vars: &[Value], db: &str| {
        vars.iter()
            .find(|v| v["key"] == format!("{}HOST", prefix(db)))
            .unwrap()["value"]
            .clone()
    };
    assert_ne!(host(&copied, &db2), host(&built_in(&t, &app).await, &db));
    // What was unlinked stays unlinked in the copy.
    assert!(built_in(&t, &id_of("unlinked")).await.is_empty());
    // The original is untouched; deleting its database takes its links along, and its
    // deployed application no longer runs what is configured.
    assert_eq!(linked(&t, &db).await, [app.as_str()]);
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "4f2a9c1"}),
    )
    .await
    .expect(202);
    let status = format!("/application/{app}/status");
    t.settle(&status).await;
    t.delete(&format!("/database/{db}")).await.expect(204);
    t.gone(&format!("/database/{db}")).await;
    assert!(built_in(&t, &app).await.is_empty());
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
    assert_eq!(built_in(&t, &app2).await.len(), 6);
}

async fn a_database_has_credentials_versions_and_configurations<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let app = create(&t, &env, "application", "app").await;
    let credentials = t
        .get(&format!("/database/{db}/masterCredentials"))
        .await
        .expect(200)
        .body;
    let vars = built_in(&t, &app).await;
    let value = |suffix: &str| {
        vars.iter()
            .find(|v| v["key"] == format!("{}{suffix}", prefix(&db)))
            .map(|v| v["value"].clone())
            .unwrap()
    };
    assert_eq!(credentials["host"], value("HOST"), "{credentials}");
    assert_eq!(
        credentials["port"].to_string(),
        value("PORT").as_str().unwrap()
    );
    assert_eq!(credentials["login"], value("LOGIN"));
    let password = credentials["password"].as_str().unwrap();
    assert_eq!(password.len(), 32, "{credentials}");
    assert_eq!(
        linked(&t, &db).await,
        std::slice::from_ref(&app),
        "its own password is no link"
    );
    // Each database has its own.
    let other = create(&t, &env, "database", "other").await;
    let again = t
        .get(&format!("/database/{other}/masterCredentials"))
        .await
        .expect(200)
        .body;
    assert_ne!(again["password"], password);

    let versions = t
        .get(&format!("/database/{db}/version"))
        .await
        .expect(200)
        .body;
    let names: Vec<&str> = versions["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"16"), "{versions}");
    let configuration = t
        .get(&format!("/environment/{env}/databaseConfiguration"))
        .await
        .expect(200)
        .body;
    let types: Vec<&str> = configuration["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["database_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["POSTGRESQL", "MYSQL", "MONGODB", "REDIS"]);
    assert_eq!(
        configuration["results"][0]["version"][0]["supported_mode"],
        "CONTAINER"
    );
    t.get(&format!("/database/{app}/masterCredentials"))
        .await
        .expect(404);
}

/// The backup `id` of `db` once it has ended, as the listing shows it.
async fn ended<S: App>(t: &T<S>, db: &str, id: &str) -> Value {
    let path = format!("/database/{db}/backup");
    common::eventually(
        common::WITHIN,
        || format!("the backup {id} never ended"),
        async || {
            let listed = t.get(&path).await.expect(200).body;
            let found = listed["results"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["id"] == id)
                .cloned()
                .unwrap_or_else(|| panic!("{id} is listed: {listed}"));
            (found["status"]["state"] != "DEPLOYING").then_some(found)
        },
    )
    .await
}

/// Moving a database (Capstan's addition) is a redeploy that names the node it goes to, kept
/// in its deployment's record; a database never deployed has nowhere to move from, and a
/// container has no such route.
async fn a_deployed_database_is_moved_by_a_redeploy_that_names_its_node<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let to = json!({"node": "10.213.250.12"});
    t.post(&format!("/database/{db}/move"), to.clone())
        .await
        .expect_error(409, "the database was never deployed");
    t.post(&format!("/database/{db}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/database/{db}/status")).await;
    t.post(&format!("/database/{db}/move"), json!({"node": " "}))
        .await
        .expect_error(400, "node: must not be empty");
    let moving = t
        .post(&format!("/database/{db}/move"), to)
        .await
        .expect(202);
    assert_eq!(moving.body["state"], "DEPLOYMENT_QUEUED", "{}", moving.text);
    t.settle(&format!("/database/{db}/status")).await;
    let history = t
        .get(&format!("/database/{db}/deploymentHistory"))
        .await
        .expect(200)
        .body;
    assert_eq!(history["results"][0]["status"], "DEPLOYED", "{history}");
    t.post(&format!("/container/{db}/move"), json!({"node": "x"}))
        .await
        .expect(404);
}

/// The stand-in's backups live as the public API shows them: taken in the background to
/// DEPLOYED (or DEPLOYMENT_ERROR when the database asks its dumps to fail), listed newest
/// first a page at a time, restored only when done, and deleted.
async fn backups_are_taken_listed_restored_and_deleted<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "db").await;
    let body = json!({"name": "nightly", "message": "before the migration"});
    t.post(&format!("/database/{db}/backup"), body.clone())
        .await
        .expect_error(409, "the database was never deployed");
    t.post(&format!("/database/{db}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/database/{db}/status")).await;
    let taken = t
        .post(&format!("/database/{db}/backup"), body)
        .await
        .expect(201);
    assert_eq!(taken.body["name"], "nightly", "{}", taken.text);
    let done = taken.id();
    let first = ended(&t, &db, &done).await;
    assert_eq!(first["status"]["state"], "DEPLOYED", "{first}");
    assert!(first["size_bytes"].as_i64().unwrap() > 0, "{first}");

    // A database that asks its dumps to fail: the backup ends in error, saying why.
    let mut edit = service_bodies("unused")
        .into_iter()
        .find(|(k, _)| *k == "database")
        .unwrap()
        .1;
    edit["name"] = json!("db");
    edit["description"] = json!("dumps fail: capstan-fail-backup");
    t.put(&format!("/database/{db}"), edit).await.expect(200);
    let broken = t
        .post(
            &format!("/database/{db}/backup"),
            json!({"name": "broken", "message": "asked to fail"}),
        )
        .await
        .expect(201)
        .id();
    let failed = ended(&t, &db, &broken).await;
    let status = &failed["status"];
    assert_eq!(status["state"], "DEPLOYMENT_ERROR", "{failed}");
    assert_eq!(status["status_details"]["status"], "ERROR");
    assert_eq!(
        status["message"],
        "simulated backup failure (asked for with capstan-fail-backup)"
    );

    let first_page = t
        .get(&format!("/database/{db}/backup?page=1&page_size=1"))
        .await
        .expect(200)
        .body;
    assert_eq!(
        first_page["results"][0]["id"],
        broken.as_str(),
        "{first_page}"
    );
    assert_eq!(first_page["page_size"], 1);
    let second = t
        .get(&format!("/database/{db}/backup?page=2&page_size=1"))
        .await
        .expect(200)
        .body;
    assert_eq!(second["results"][0]["id"], done.as_str(), "{second}");
    t.post(
        &format!("/database/{db}/backup/{broken}/restore"),
        json!({}),
    )
    .await
    .expect_error(409, "the backup is FAILED: only a DONE backup restores");
    t.post(&format!("/database/{db}/backup/{done}/restore"), json!({}))
        .await
        .expect(204);
    for backup in [&done, &broken] {
        t.delete(&format!("/database/{db}/backup/{backup}"))
            .await
            .expect(204);
    }
    t.delete(&format!("/database/{db}/backup/{done}"))
        .await
        .expect(404);
    let listed = t
        .get(&format!("/database/{db}/backup"))
        .await
        .expect(200)
        .body;
    assert_eq!(listed["results"], json!([]));
}

async fn a_database_made_before_credentials_were_kept_gets_its_links_password<S: App>(t: T<S>) {
    use domain::ports::Repo;
    let (_, _, env) = t.hierarchy().await;
    let db = create(&t, &env, "database", "old").await;
    let app = create(&t, &env, "application", "app").await;
    let id = domain::ids::ServiceId(db.parse().unwrap());
    // What a database made by an earlier version holds: its links, no password of its own.
    let mut tx = t.capstan.store().write().await.unwrap();
    let linked = tx.database_link_variables(id).await.unwrap();
    let own = linked.iter().find(|v| v.service_id == Some(id)).unwrap();
    Repo::<domain::model::Variable>::delete(&mut *tx, own.id)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    t.get(&format!("/database/{db}/masterCredentials"))
        .await
        .expect_error(409, "the database has no credentials yet");
    t.post(&format!("/database/{db}/deploy"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/database/{db}/status")).await;
    let credentials = t
        .get(&format!("/database/{db}/masterCredentials"))
        .await
        .expect(200)
        .body;
    let mut tx = t.capstan.store().read().await.unwrap();
    let links = tx.database_link_variables(id).await.unwrap();
    let app_password = links
        .iter()
        .find(|v| {
            v.service_id.map(|s| s.to_string()) == Some(app.clone())
                && v.key.as_str().ends_with("_PASSWORD")
        })
        .and_then(|v| v.value.clone())
        .unwrap();
    assert_eq!(
        credentials["password"],
        app_password.expose(),
        "its links' password, which its applications hold"
    );
}
