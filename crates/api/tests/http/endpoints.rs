//! The specification's endpoints 1, 4, 5, 12, 13 and 14 over HTTP, on SQLite and PostgreSQL.

use crate::common;

use common::{App, T};
use domain::model::{DeploymentStatus, Service, Variable};
use domain::ports::Repo;
use serde_json::{json, Value};

http_suite!(
    clone_copies_configuration_variables_and_secrets_but_no_deployment_state,
    clone_rules,
    git_token_lists_the_services_using_it,
    regions_are_listed_per_provider,
    registries_show_their_cluster_and_usage,
    helms_to_update_are_the_out_of_date_ones,
);

fn results(v: &Value) -> &Vec<Value> {
    v["results"].as_array().unwrap()
}

async fn clone_copies_configuration_variables_and_secrets_but_no_deployment_state<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let container = t
        .post(&format!("/environment/{env}/container"), json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1.27", "ports": [{"internal_port": 80}]}))
        .await
        .expect(201)
        .body;
    let container_id = container["id"].as_str().unwrap().to_string();
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await
        .expect(201)
        .id();
    let project_var = t
        .post(
            &format!("/project/{project}/environmentVariable"),
            json!({"key": "P", "value": "p"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/environment/{env}/environmentVariable"),
        json!({"key": "E", "value": "e"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/environment/{env}/secret"),
        json!({"key": "E_SECRET", "value": "env-s3cr3t"}),
    )
    .await
    .expect(201);
    let c_var = t
        .post(
            &format!("/container/{container_id}/environmentVariable"),
            json!({"key": "C", "value": "c"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/container/{container_id}/secret"),
        json!({"key": "C_SECRET", "value": "web-s3cr3t"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/variable/{c_var}/alias"),
        json!({"key": "C_ALIAS"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/variable/{project_var}/override"),
        json!({"value": "p2", "override_scope": "ENVIRONMENT", "override_parent_id": env}),
    )
    .await
    .expect(201);
    // The application was deployed (no engine yet: through the store).
    let store = t.capstan.store().clone();
    let mut deployed: Service = Repo::get(&mut *store.read().await.unwrap(), app.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    deployed.deployment_status = DeploymentStatus::UpToDate;
    deployed.spec.git_repositories_mut()[0].deployed_commit_id = Some("abc123".into());
    Repo::update(&mut *store.read().await.unwrap(), &deployed)
        .await
        .unwrap();

    let clone = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "prod-copy", "mode": "STAGING"}),
        )
        .await
        .expect(202);
    for member in [
        "id",
        "created_at",
        "name",
        "organization",
        "project",
        "cloud_provider",
        "mode",
        "cluster_id",
    ] {
        assert!(
            !clone.body[member].is_null(),
            "missing {member}: {}",
            clone.text
        );
    }
    assert_eq!(clone.body["name"], "prod-copy");
    assert_eq!(clone.body["mode"], "STAGING");
    assert_eq!(clone.body["project"]["id"], json!(project));
    let new_env = clone.id();
    assert_ne!(new_env, env);
    t.get(&format!("/environment/{new_env}")).await.expect(200);

    let containers = t
        .get(&format!("/environment/{new_env}/container"))
        .await
        .expect(200)
        .body;
    let copy = &results(&containers)[0];
    assert_ne!(copy["id"], container["id"]);
    for member in ["name", "image_name", "tag", "registry_id", "cpu", "memory"] {
        assert_eq!(copy[member], container[member], "{member}");
    }
    assert_eq!(copy["environment"]["id"], json!(new_env));
    let apps = t
        .get(&format!("/environment/{new_env}/application"))
        .await
        .expect(200)
        .body;
    let app_copy = &results(&apps)[0];
    assert!(
        app_copy["git_repository"]
            .get("deployed_commit_id")
            .is_none(),
        "{app_copy}"
    );
    let app_copy: Service = Repo::get(
        &mut *store.read().await.unwrap(),
        app_copy["id"].as_str().unwrap().parse().unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(app_copy.deployment_status, DeploymentStatus::NeverDeployed);

    let copy_id = copy["id"].as_str().unwrap();
    let vars = t
        .get(&format!("/container/{copy_id}/environmentVariable"))
        .await
        .expect(200)
        .body;
    let mut keys: Vec<(String, String)> = results(&vars)
        .iter()
        .map(|v| {
            (
                v["key"].as_str().unwrap().to_string(),
                v["variable_type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    keys.sort();
    let expected: Vec<(String, String)> = [
        ("C", "VALUE"),
        ("C_ALIAS", "ALIAS"),
        ("E", "VALUE"),
        ("P", "OVERRIDE"),
        ("P", "VALUE"),
    ]
    .iter()
    .map(|(k, t)| (k.to_string(), t.to_string()))
    .collect();
    assert_eq!(keys, expected);
    let alias = results(&vars)
        .iter()
        .find(|v| v["key"] == "C_ALIAS")
        .unwrap();
    let c_copy = results(&vars).iter().find(|v| v["key"] == "C").unwrap();
    assert_eq!(
        alias["aliased_variable"]["id"], c_copy["id"],
        "the alias follows its copied target"
    );
    assert_ne!(c_copy["id"], json!(c_var));
    let over = results(&vars)
        .iter()
        .find(|v| v["variable_type"] == "OVERRIDE")
        .unwrap();
    assert_eq!(
        over["overridden_variable"]["id"],
        json!(project_var),
        "same project: still the project variable"
    );
    assert_eq!(over["scope"], "ENVIRONMENT");

    let secrets = t
        .get(&format!("/container/{copy_id}/secret"))
        .await
        .expect(200)
        .body;
    let secret = results(&secrets)
        .iter()
        .find(|s| s["key"] == "C_SECRET")
        .unwrap();
    let stored: Variable = Repo::get(
        &mut *store.read().await.unwrap(),
        secret["id"].as_str().unwrap().parse().unwrap(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        stored.value.unwrap().expose(),
        "web-s3cr3t",
        "secret values are copied"
    );
    assert!(results(&secrets).iter().any(|s| s["key"] == "E_SECRET"));

    // The source is untouched.
    let source_vars = t
        .get(&format!("/container/{container_id}/environmentVariable"))
        .await
        .expect(200)
        .body;
    assert_eq!(results(&source_vars).len(), 5);
}

async fn clone_rules<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let project_var = t
        .post(
            &format!("/project/{project}/environmentVariable"),
            json!({"key": "P", "value": "p"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/variable/{project_var}/override"),
        json!({"value": "p2", "override_scope": "ENVIRONMENT", "override_parent_id": env}),
    )
    .await
    .expect(201);
    t.post(&format!("/environment/{env}/clone"), json!({}))
        .await
        .expect_error(400, "name: is required");
    t.post(
        &format!("/environment/{env}/clone"),
        json!({"name": "PROD"}),
    )
    .await
    .expect_error(409, "an environment named 'PROD' already exists");
    t.post(
        &format!("/environment/{env}/clone"),
        json!({"name": "x", "mode": "NOPE"}),
    )
    .await
    .expect_error(400, "mode:");
    t.post(
        &format!("/environment/{env}/clone"),
        json!({"name": "x", "cluster_id": uuid::Uuid::new_v4()}),
    )
    .await
    .expect(404);
    t.post(
        &format!("/environment/{}/clone", uuid::Uuid::new_v4()),
        json!({"name": "x"}),
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
        &format!("/environment/{env}/clone"),
        Some(json!({"name": "x"})),
    )
    .await
    .expect(403);

    // Into another project: the mode is kept, overrides of the old project's variables are not.
    let second = t
        .post(
            &format!("/organization/{}/project", t.org),
            json!({"name": "second"}),
        )
        .await
        .expect(201)
        .id();
    let moved = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "prod", "project_id": second, "apply_deployment_rule": true}),
        )
        .await
        .expect(202);
    assert_eq!(moved.body["project"]["id"], json!(second));
    assert_eq!(moved.body["mode"], "PRODUCTION");
    let vars = t
        .get(&format!("/environment/{}/environmentVariable", moved.id()))
        .await
        .expect(200)
        .body;
    assert_eq!(results(&vars).len(), 0, "{vars}");
}

async fn git_token_lists_the_services_using_it<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let org = t.org.clone();
    let token = t
        .post(
            &format!("/organization/{org}/gitToken"),
            json!({"name": "gh", "type": "HOSTA", "token": "x"}),
        )
        .await
        .expect(201)
        .id();
    let unused = t
        .post(
            &format!("/organization/{org}/gitToken"),
            json!({"name": "gl", "type": "HOSTB", "token": "y"}),
        )
        .await
        .expect(201)
        .id();
    let git = json!({"url": "https://github.com/acme/repo", "git_token_id": token});
    t.post(
        &format!("/environment/{env}/application"),
        json!({"name": "app", "git_repository": git}),
    )
    .await
    .expect(201);
    t.post(&format!("/environment/{env}/helm"), json!({"name": "chart", "source": {"git_repository": git}, "arguments": [], "auto_deploy": false, "values_override": {}}))
        .await
        .expect(201);
    t.post(&format!("/environment/{env}/job"), json!({"name": "cron", "schedule": {"cronjob": {"scheduled_at": "@daily"}}, "source": {"docker": {"git_repository": git}}}))
        .await
        .expect(201);
    t.post(
        &format!("/environment/{env}/terraform"),
        json!({"name": "infra", "terraform_files_source": {"git_repository": git}}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/environment/{env}/application"),
        json!({"name": "public", "git_repository": {"url": "https://github.com/acme/public"}}),
    )
    .await
    .expect(201);

    let listed = t
        .get(&format!(
            "/organization/{org}/gitToken/{token}/associatedServices"
        ))
        .await
        .expect(200)
        .body;
    let items = results(&listed);
    assert_eq!(items.len(), 4);
    for item in items {
        for member in [
            "project_id",
            "project_name",
            "environment_id",
            "environment_name",
            "service_id",
            "service_name",
            "service_type",
        ] {
            assert!(!item[member].is_null(), "missing {member}: {item}");
        }
        assert_eq!(item["project_name"], "shop");
        assert_eq!(item["environment_name"], "prod");
    }
    let mut types: Vec<&str> = items
        .iter()
        .map(|i| i["service_type"].as_str().unwrap())
        .collect();
    types.sort();
    assert_eq!(types, ["APPLICATION", "CRON", "HELM", "TERRAFORM"]);
    let empty = t
        .get(&format!(
            "/organization/{org}/gitToken/{unused}/associatedServices"
        ))
        .await
        .expect(200)
        .body;
    assert_eq!(results(&empty).len(), 0);
    t.get(&format!(
        "/organization/{org}/gitToken/{}/associatedServices",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
    let (other_org, other) = t
        .capstan
        .bootstrap_organization("Other", domain::auth::Role::Admin, "o")
        .await
        .unwrap();
    t.call(
        Some(&other.value),
        actix_web::http::Method::GET,
        &format!("/organization/{org}/gitToken/{token}/associatedServices"),
        None,
    )
    .await
    .expect(403);
    t.get(&format!(
        "/organization/{}/gitToken/{token}/associatedServices",
        other_org.id
    ))
    .await
    .expect(403);
}

async fn regions_are_listed_per_provider<S: App>(t: T<S>) {
    let alt = t.get("/altcloud/region").await.expect(200).body;
    let par = results(&alt)
        .iter()
        .find(|r| r["name"] == "fr-par")
        .unwrap();
    assert_eq!(
        par,
        &json!({"name": "fr-par", "country_code": "FR", "country": "France", "city": "Paris", "arm_supported": true, "zones": ["fr-par-1", "fr-par-2", "fr-par-3"]})
    );
    let a = t.get("/v1/cloudA/region").await.expect(200).body;
    assert!(results(&a)
        .iter()
        .any(|r| r["name"] == "us-east-2" && r["city"] == "Ohio"));
    let c = t.get("/cloudC/region").await.expect(200).body;
    assert!(results(&c).iter().any(|r| r["name"] == "westeurope"));
    assert!(a["pagination"]["total_count"].as_u64().unwrap() > 10);
    let paged = t.get("/cloudA/region?page_size=2").await.expect(200).body;
    assert_eq!(results(&paged).len(), 2);
    t.call(None, actix_web::http::Method::GET, "/altcloud/region", None)
        .await
        .expect(401);
}

async fn registries_show_their_cluster_and_usage<S: App>(t: T<S>) {
    let (cluster, _, env) = t.hierarchy().await;
    let org = t.org.clone();
    let reg = t
        .post(&format!("/organization/{org}/containerRegistry"), json!({"name": "ecr", "kind": "ECR", "url": "https://123.dkr.ecr.eu-west-3.amazonaws.com", "cluster_id": cluster, "description": "d",
            "config": {"access_key_id": "AKIA", "secret_access_key": "s", "region": "eu-west-3"}}))
        .await
        .expect(201)
        .body;
    assert_eq!(reg["cluster"], json!({"id": cluster, "name": "main"}));
    assert_eq!(
        reg["config"],
        json!({"access_key_id": "AKIA", "region": "eu-west-3"})
    );
    let id = reg["id"].as_str().unwrap().to_string();
    for i in 0..2 {
        t.post(
            &format!("/environment/{env}/container"),
            json!({"name": format!("c{i}"), "registry_id": id, "image_name": "x", "tag": "1"}),
        )
        .await
        .expect(201);
    }
    let list = t
        .get(&format!("/organization/{org}/containerRegistry"))
        .await
        .expect(200)
        .body;
    let listed = results(&list)
        .iter()
        .find(|r| r["id"] == json!(id))
        .unwrap();
    for member in [
        "id",
        "created_at",
        "updated_at",
        "name",
        "description",
        "url",
        "cluster",
        "associated_services_count",
        "config",
    ] {
        assert!(!listed[member].is_null(), "missing {member}: {listed}");
    }
    assert_eq!(listed["associated_services_count"], 2);
    t.post(
        &format!("/organization/{org}/containerRegistry"),
        json!({"name": "generic", "kind": "GENERIC_CR"}),
    )
    .await
    .expect_error(400, "url:");
    t.post(
        &format!("/organization/{org}/containerRegistry"),
        json!({"name": "x", "kind": "QUAY"}),
    )
    .await
    .expect_error(400, "kind:");
    // Editing keeps secret members that are not sent again.
    let edited = t
        .put(&format!("/organization/{org}/containerRegistry/{id}"), json!({"name": "ecr2", "kind": "ECR", "url": "https://123.dkr.ecr.eu-west-3.amazonaws.com", "config": {"region": "eu-west-1"}}))
        .await
        .expect(200)
        .body;
    assert_eq!(edited["config"], json!({"region": "eu-west-1"}));
    assert!(edited.get("cluster").is_none());
}

async fn helms_to_update_are_the_out_of_date_ones<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let body = |name: &str| {
        json!({"name": name, "source": {"helm_repository": {"repository": "https://c.io", "chart_name": "x", "chart_version": "1"}},
        "arguments": [], "auto_deploy": false, "values_override": {}})
    };
    let stale = t
        .post(&format!("/environment/{env}/helm"), body("stale"))
        .await
        .expect(201)
        .id();
    t.post(&format!("/environment/{env}/helm"), body("fresh"))
        .await
        .expect(201);
    let store = t.capstan.store().clone();
    let mut s: Service = Repo::get(&mut *store.read().await.unwrap(), stale.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    s.deployment_status = DeploymentStatus::OutOfDate;
    Repo::update(&mut *store.read().await.unwrap(), &s)
        .await
        .unwrap();
    let all = t
        .get(&format!("/environment/{env}/helm?toUpdate=false"))
        .await
        .expect(200)
        .body;
    assert_eq!(results(&all).len(), 2);
    let to_update = t
        .get(&format!("/environment/{env}/helm?toUpdate=true"))
        .await
        .expect(200)
        .body;
    assert_eq!(results(&to_update).len(), 1);
    assert_eq!(to_update["results"][0]["id"], json!(stale));
    assert_eq!(to_update["pagination"]["total_count"], 1);
    t.get(&format!("/environment/{env}/helm?toUpdate=maybe"))
        .await
        .expect_error(400, "toUpdate:");
}
