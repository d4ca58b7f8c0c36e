//! The organization's resources beyond SPEC.md's endpoints, over HTTP on both backends: cloud
//! credentials of the three providers; lists across the hierarchy; the catalogs; helm
//! repositories.

use crate::common;

use common::{App, T};
use serde_json::{json, Value};

http_suite!(
    credentials_of_each_provider_keep_their_members_and_hide_their_secret,
    the_organization_lists_credentials_of_every_provider,
    credentials_are_refused_with_the_member_at_fault,
    lists_across_the_hierarchy_show_where_each_thing_lives,
    a_registry_lists_the_services_pulling_from_it,
    lists_of_another_organization_are_forbidden,
    the_catalogs_list_providers_and_registry_kinds,
    helm_repositories_are_kept_and_named_by_helm_services,
    a_git_token_goes_to_a_new_address_only_when_given_again,
    a_helm_repository_address_holds_no_credentials,
);

fn ids(v: &Value, member: &str) -> Vec<String> {
    let mut out: Vec<String> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[member].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Two clusters, a project with an environment on each, services of several kinds.
struct World {
    clusters: [String; 2],
    project: String,
    envs: [String; 2],
    app: String,
    db: String,
    job: String,
    container: String,
    registry: String,
}

async fn world<S: App>(t: &T<S>) -> World {
    let (first, project, env) = t.hierarchy().await;
    let second = t
        .post(
            &format!("/organization/{}/cluster", t.org),
            json!({"name": "second", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await
        .expect(201)
        .id();
    let other_env = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "staging", "cluster": second, "mode": "STAGING"}),
        )
        .await
        .expect(201)
        .id();
    let registry = t.registry().await;
    let bodies = common::service_bodies(&registry);
    let body = |kind: &str| bodies.iter().find(|(k, _)| *k == kind).unwrap().1.clone();
    let mut made = vec![];
    for (kind, env) in [
        ("application", &env),
        ("database", &env),
        ("job", &other_env),
        ("container", &other_env),
    ] {
        made.push(
            t.post(&format!("/environment/{env}/{kind}"), body(kind))
                .await
                .expect(201)
                .id(),
        );
    }
    World {
        clusters: [first, second],
        project,
        envs: [env, other_env],
        app: made[0].clone(),
        db: made[1].clone(),
        job: made[2].clone(),
        container: made[3].clone(),
        registry,
    }
}

async fn lists_across_the_hierarchy_show_where_each_thing_lives<S: App>(t: T<S>) {
    let w = world(&t).await;
    let org = t.org.clone();
    let envs = t
        .get(&format!("/organization/{org}/environments"))
        .await
        .expect(200);
    assert_eq!(ids(&envs.body, "id"), sorted(w.envs.to_vec()));
    let staging = envs.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == json!(w.envs[1]))
        .unwrap();
    assert_eq!(staging["mode"], "STAGING");
    assert_eq!(staging["project"]["id"], json!(w.project));
    assert_eq!(staging["organization"]["id"], json!(org));

    let all = t
        .get(&format!("/organization/{org}/services"))
        .await
        .expect(200);
    assert_eq!(
        ids(&all.body, "id"),
        sorted(vec![
            w.app.clone(),
            w.db.clone(),
            w.job.clone(),
            w.container.clone()
        ])
    );
    let job = all.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == json!(w.job))
        .unwrap();
    assert_eq!(
        (&job["service_type"], &job["job_type"], &job["icon_uri"]),
        (&json!("JOB"), &json!("CRON"), &json!("app://capstan/job"))
    );
    assert_eq!(
        (
            &job["environment_name"],
            &job["project_name"],
            &job["cluster_id"]
        ),
        (&json!("staging"), &json!("shop"), &json!(w.clusters[1]))
    );
    for (query, expected) in [
        (format!("environment_id={}", w.envs[0]), vec![&w.app, &w.db]),
        (
            format!("cluster_id={}", w.clusters[1]),
            vec![&w.job, &w.container],
        ),
        (
            format!("project_id={}&cluster_id={}", w.project, w.clusters[0]),
            vec![&w.app, &w.db],
        ),
        (format!("project_id={}", uuid::Uuid::new_v4()), vec![]),
    ] {
        let found = t
            .get(&format!("/organization/{org}/services?{query}"))
            .await
            .expect(200);
        assert_eq!(
            ids(&found.body, "id"),
            sorted(expected.into_iter().cloned().collect()),
            "{query}"
        );
    }
    t.get(&format!("/organization/{org}/services?cluster_id=nope"))
        .await
        .expect_error(400, "cluster_id: must be a UUID");

    let of_env = t
        .get(&format!("/environment/{}/services", w.envs[1]))
        .await
        .expect(200);
    let kinds: Vec<&Value> = of_env.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["service_type"])
        .collect();
    assert_eq!(kinds, [&json!("JOB"), &json!("CONTAINER")]);
    assert_eq!(
        of_env.body["results"][1]["registry"]["id"],
        json!(w.registry),
        "each kind's whole record"
    );

    let on_cluster = t
        .get(&format!("/cluster/{}/environments", w.clusters[0]))
        .await
        .expect(200);
    let results = on_cluster.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(
        (&results[0]["environment_id"], &results[0]["project_name"]),
        (&json!(w.envs[0]), &json!("shop"))
    );
    let mut services: Vec<(String, String)> = results[0]["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["type"].as_str().unwrap().to_string(),
                s["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    services.sort();
    assert_eq!(
        services,
        [
            ("APPLICATION".to_string(), w.app.clone()),
            ("DATABASE".to_string(), w.db.clone())
        ]
    );
}

async fn a_registry_lists_the_services_pulling_from_it<S: App>(t: T<S>) {
    let w = world(&t).await;
    let org = t.org.clone();
    let base = format!("/organization/{org}/containerRegistry/{}", w.registry);
    let users = t
        .get(&format!("{base}/associatedServices"))
        .await
        .expect(200);
    let mut types: Vec<(String, String, String)> = users.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["service_type"].as_str().unwrap().to_string(),
                u["service_id"].as_str().unwrap().to_string(),
                u["environment_name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    types.sort();
    assert_eq!(
        types,
        [
            ("CONTAINER".into(), w.container.clone(), "staging".into()),
            ("CRON".into(), w.job.clone(), "staging".into()),
        ]
    );
    let statuses = t.get(&format!("{base}/container/status")).await.expect(200);
    let results = statuses.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["id"], json!(w.container));
    assert_eq!(results[0]["state"], "READY", "never deployed");
    let unused = t.registry().await;
    let none = t
        .get(&format!(
            "/organization/{org}/containerRegistry/{unused}/associatedServices"
        ))
        .await
        .expect(200);
    assert_eq!(none.body["results"], json!([]));
    t.get(&format!(
        "/organization/{org}/containerRegistry/{}/container/status",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect_error(404, "container registry not found");
}

async fn lists_of_another_organization_are_forbidden<S: App>(t: T<S>) {
    let w = world(&t).await;
    let org = t.org.clone();
    let other = t.other_org_token().await;
    for path in [
        format!("/organization/{org}/environments"),
        format!("/organization/{org}/services"),
        format!("/environment/{}/services", w.envs[0]),
        format!("/cluster/{}/environments", w.clusters[0]),
        format!(
            "/organization/{org}/containerRegistry/{}/associatedServices",
            w.registry
        ),
        format!(
            "/organization/{org}/containerRegistry/{}/container/status",
            w.registry
        ),
    ] {
        let r = t
            .call(Some(&other), actix_web::http::Method::GET, &path, None)
            .await;
        assert_eq!(r.status, 403, "{path}: {}", r.text);
    }
    t.get(&format!("/cluster/{}/environments", uuid::Uuid::new_v4()))
        .await
        .expect_error(404, "cluster not found");
    t.get(&format!("/environment/{}/services", uuid::Uuid::new_v4()))
        .await
        .expect_error(404, "environment not found");
}

async fn the_catalogs_list_providers_and_registry_kinds<S: App>(t: T<S>) {
    let providers = t.get("/cloudProvider").await.expect(200);
    let names = ids(&providers.body, "short_name");
    assert_eq!(names, ["ALTCLOUD", "CLOUDA", "CLOUDC", "ON_PREMISE"]);
    for p in providers.body["results"].as_array().unwrap() {
        let regions = p["regions"].as_array().unwrap();
        assert!(!regions.is_empty(), "{p}");
        assert!(regions[0]["country_code"].is_string());
    }
    let kinds = t.get("/availableContainerRegistry").await.expect(200);
    let all = kinds.body["results"].as_array().unwrap();
    assert_eq!(all.len(), 11);
    let ecr = all.iter().find(|k| k["kind"] == "ECR").unwrap();
    assert_eq!(
        ecr["required_config"],
        json!({"access_key_id": "string", "secret_access_key": "string", "region": "string"})
    );
    assert_eq!(ecr["is_mandatory"], false);
    let r = t
        .call(None, actix_web::http::Method::GET, "/cloudProvider", None)
        .await;
    assert_eq!(r.status, 401);
}

async fn credentials_of_each_provider_keep_their_members_and_hide_their_secret<S: App>(t: T<S>) {
    let org = t.org.clone();
    let cases = [
        (
            "altcloud",
            json!({"name": "scw", "altcloud_access_key": "SCWKEY", "altcloud_secret_key": "s3cret-alt",
                   "altcloud_project_id": "proj-1", "altcloud_organization_id": "org-1"}),
            json!({"object_type": "ALTCLOUD", "name": "scw", "altcloud_access_key": "SCWKEY",
                   "altcloud_project_id": "proj-1", "altcloud_organization_id": "org-1"}),
        ),
        (
            "cloudC",
            json!({"name": "az", "cloudC_subscription_id": "sub-1", "cloudC_tenant_id": "ten-1"}),
            json!({"object_type": "CLOUDC", "name": "az", "cloudC_subscription_id": "sub-1",
                   "cloudC_tenant_id": "ten-1", "cloudC_application_id": "",
                   "cloudC_application_object_id": ""}),
        ),
        (
            "cloudA",
            json!({"type": "CLOUDA_ROLE", "name": "role", "role_arn": "arn:aws:iam::1:role/capstan"}),
            json!({"object_type": "CLOUDA_ROLE", "name": "role",
                   "role_arn": "arn:aws:iam::1:role/capstan"}),
        ),
        (
            "cloudA",
            json!({"type": "AWS_STATIC", "name": "keys", "access_key_id": "AKIA1",
                   "secret_access_key": "s3cret-a"}),
            json!({"object_type": "CLOUDA", "name": "keys", "access_key_id": "AKIA1"}),
        ),
    ];
    for (segment, body, shown) in cases {
        let path = format!("/organization/{org}/{segment}/credentials");
        let created = t.post(&path, body.clone()).await.expect(201);
        let id = created.id();
        let mut expected = shown.clone();
        expected["id"] = json!(id);
        assert_eq!(created.body, expected, "{segment}");
        assert!(!created.text.contains("s3cret"), "{segment}");
        let got = t.get(&format!("{path}/{id}")).await.expect(200);
        assert_eq!(got.body, expected, "{segment}");
        // Another provider's route does not find them.
        let other = if segment == "cloudC" {
            "altcloud"
        } else {
            "cloudC"
        };
        t.get(&format!("/organization/{org}/{other}/credentials/{id}"))
            .await
            .expect_error(404, "credentials not found");
        // An edit without the secret keeps it; a new name is kept.
        let mut edit = body.clone();
        edit["name"] = json!(format!("{}-2", body["name"].as_str().unwrap()));
        for secret in ["altcloud_secret_key", "secret_access_key"] {
            edit.as_object_mut().unwrap().remove(secret);
        }
        let edited = t.put(&format!("{path}/{id}"), edit).await.expect(200);
        assert_eq!(
            edited.body["name"],
            format!("{}-2", body["name"].as_str().unwrap())
        );
        let listed = t.get(&path).await.expect(200);
        let objects: Vec<&Value> = listed.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["object_type"])
            .collect();
        assert!(
            objects.iter().all(|o| match segment {
                "cloudA" => *o == "CLOUDA" || *o == "CLOUDA_ROLE",
                "altcloud" => *o == "ALTCLOUD",
                _ => *o == "CLOUDC",
            }),
            "{segment}: {objects:?}"
        );
    }
    // A role becoming an access key needs the key's secret.
    let path = format!("/organization/{org}/cloudA/credentials");
    let role = t
        .post(
            &path,
            json!({"type": "CLOUDA_ROLE", "name": "r2", "role_arn": "arn:x"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("{path}/{role}"),
        json!({"type": "AWS_STATIC", "name": "r2", "access_key_id": "AKIA9"}),
    )
    .await
    .expect_error(400, "secret_access_key: is required");
    t.delete(&format!("{path}/{role}")).await.expect(204);
    t.get(&format!("{path}/{role}"))
        .await
        .expect_error(404, "credentials not found");
}

async fn the_organization_lists_credentials_of_every_provider<S: App>(t: T<S>) {
    let org = t.org.clone();
    for (segment, body) in [
        (
            "cloudA",
            json!({"name": "a", "access_key_id": "AKIA", "secret_access_key": "s"}),
        ),
        (
            "altcloud",
            json!({"name": "b", "altcloud_access_key": "k", "altcloud_secret_key": "s",
                   "altcloud_project_id": "p", "altcloud_organization_id": "o"}),
        ),
        (
            "cloudC",
            json!({"name": "c", "cloudC_subscription_id": "s", "cloudC_tenant_id": "t"}),
        ),
    ] {
        t.post(&format!("/organization/{org}/{segment}/credentials"), body)
            .await
            .expect(201);
    }
    let all = t
        .get(&format!("/organization/{org}/credentials"))
        .await
        .expect(200);
    let mut kinds: Vec<String> = all.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e["clusters"].is_array());
            e["credential"]["object_type"].as_str().unwrap().to_string()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["ALTCLOUD", "CLOUDA", "CLOUDC"]);
    assert_eq!(all.body["pagination"]["total_count"], 3);
    let page = t
        .get(&format!(
            "/organization/{org}/credentials?page=2&page_size=2"
        ))
        .await
        .expect(200);
    assert_eq!(page.body["results"].as_array().unwrap().len(), 1);
    let other = t.other_org_token().await;
    let r = t
        .call(
            Some(&other),
            actix_web::http::Method::GET,
            &format!("/organization/{org}/credentials"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn credentials_are_refused_with_the_member_at_fault<S: App>(t: T<S>) {
    let org = t.org.clone();
    for (segment, body, message) in [
        (
            "altcloud",
            json!({"name": "b", "altcloud_access_key": "k", "altcloud_project_id": "p",
                   "altcloud_organization_id": "o"}),
            "altcloud_secret_key: is required",
        ),
        (
            "cloudC",
            json!({"name": "c", "cloudC_tenant_id": "t"}),
            "cloudC_subscription_id: is required",
        ),
        (
            "cloudA",
            json!({"type": "EKS_ANYWHERE_VSPHERE_STATIC", "name": "x"}),
            "type: must be AWS_STATIC or CLOUDA_ROLE",
        ),
        (
            "cloudA",
            json!({"type": "CLOUDA_ROLE", "name": "x"}),
            "role_arn: is required",
        ),
    ] {
        t.post(&format!("/organization/{org}/{segment}/credentials"), body)
            .await
            .expect_error(400, message);
    }
}

async fn helm_repositories_are_kept_and_named_by_helm_services<S: App>(t: T<S>) {
    let org = t.org.clone();
    let (_, _, env) = t.hierarchy().await;
    let path = format!("/organization/{org}/helmRepository");
    let created = t
        .post(
            &path,
            json!({"name": "charts", "kind": "HTTPS", "url": "https://charts.acme.example",
                   "skip_tls_verification": false,
                   "config": {"username": "bot", "password": "hunter2-charts"}}),
        )
        .await
        .expect(201);
    let repo = created.id();
    assert_eq!(created.body["config"], json!({"username": "bot"}));
    assert!(!created.text.contains("hunter2-charts"));
    assert_eq!(created.body["associated_services_count"], 0);
    for (body, status, message) in [
        (
            json!({"name": "x", "kind": "OCI_ECR", "url": "https://x.example", "skip_tls_verification": false, "config": {}}),
            400,
            "url: must be an oci:// address for a OCI_ECR repository",
        ),
        (
            json!({"name": "y", "kind": "OCI_GENERIC_CR", "skip_tls_verification": false, "config": {}}),
            400,
            "url: is required for a OCI_GENERIC_CR repository",
        ),
        (
            json!({"name": "CHARTS", "kind": "OCI_GITHUB_CR", "skip_tls_verification": false, "config": {}}),
            409,
            "a helm repository named 'CHARTS' already exists",
        ),
    ] {
        t.post(&path, body).await.expect_error(status, message);
    }
    let helm = |repository: &str| {
        json!({"name": "redis", "source": {"helm_repository": {"repository": repository,
               "chart_name": "redis", "chart_version": "19.0.0"}},
               "arguments": [], "auto_deploy": false, "values_override": {}})
    };
    let service = t
        .post(&format!("/environment/{env}/helm"), helm(&repo))
        .await
        .expect(201);
    assert_eq!(
        service.body["source"]["repository"]["repository"],
        json!({"id": repo, "name": "charts", "url": "https://charts.acme.example",
               "organization_repository": true})
    );
    let helm_id = service.id();
    t.put(
        &format!("{path}/{repo}"),
        json!({"name": "our-charts", "kind": "HTTPS", "url": "https://charts2.acme.example",
               "skip_tls_verification": true, "config": {"username": "bot"}}),
    )
    .await
    .expect(200);
    let shown = t.get(&format!("/helm/{helm_id}")).await.expect(200);
    assert_eq!(
        shown.body["source"]["repository"]["repository"]["name"],
        "our-charts"
    );
    assert_eq!(
        shown.body["source"]["repository"]["repository"]["url"],
        "https://charts2.acme.example"
    );
    let got = t.get(&format!("{path}/{repo}")).await.expect(200);
    assert_eq!(got.body["associated_services_count"], 1);
    assert_eq!(got.body["skip_tls_verification"], true);
    let users = t
        .get(&format!("{path}/{repo}/associatedServices"))
        .await
        .expect(200);
    assert_eq!(users.body["results"][0]["service_id"], json!(helm_id));
    assert_eq!(users.body["results"][0]["service_type"], "HELM");
    // In use: not deleted; unknown or another organization's: refused.
    t.delete(&format!("{path}/{repo}"))
        .await
        .expect_error(409, "the helm repository is still used by helm services");
    t.post(
        &format!("/environment/{env}/helm"),
        helm(&uuid::Uuid::new_v4().to_string()),
    )
    .await
    .expect_error(404, "helm repository not found");
    let other = t.other_org_token().await;
    let theirs = t
        .call(
            Some(&other),
            actix_web::http::Method::GET,
            &format!("{path}/{repo}"),
            None,
        )
        .await;
    assert_eq!(theirs.status, 403, "{}", theirs.text);
    t.delete(&format!("/helm/{helm_id}")).await;
    t.gone(&format!("/helm/{helm_id}")).await;
    t.delete(&format!("{path}/{repo}")).await.expect(204);
    let kinds = t.get("/availableHelmRepository").await.expect(200);
    assert_eq!(kinds.body["results"].as_array().unwrap().len(), 8);
}

/// A DEVOPS token can edit a git token without holding its value: moving where the value is
/// sent (`git_api_url`, `type`) takes the value again.
async fn a_git_token_goes_to_a_new_address_only_when_given_again<S: App>(t: T<S>) {
    let path = format!("/organization/{}/gitToken", t.org);
    let devops = t.token_with_role(domain::auth::Role::Devops).await;
    let made = t
        .post(
            &path,
            json!({"name": "lab", "type": "HOSTB", "token": "glpat-stored",
                   "git_api_url": "https://git.acme.example/api/v4"}),
        )
        .await
        .expect(201);
    let one = format!("{path}/{}", made.id());
    let edit = |body: Value| {
        t.call(
            Some(&devops),
            actix_web::http::Method::PUT,
            &one,
            Some(body),
        )
    };
    for moved in [
        json!({"name": "lab", "type": "HOSTB", "git_api_url": "https://collector.evil.example/api/v4"}),
        json!({"name": "lab", "type": "HOSTB"}),
        json!({"name": "lab", "type": "HOSTA", "git_api_url": "https://git.acme.example/api/v4"}),
    ] {
        edit(moved.clone())
            .await
            .expect_error(400, "token: is required when type or git_api_url changes");
    }
    let kept = t.get(&one).await.expect(200);
    assert_eq!(kept.body["git_api_url"], "https://git.acme.example/api/v4");
    assert_eq!(kept.body["type"], "HOSTB");
    // The same address (a trailing slash is the same place): the stored value stays.
    let renamed = edit(
        json!({"name": "lab-2", "type": "HOSTB", "description": "ours",
                              "git_api_url": "https://git.acme.example/api/v4/"}),
    )
    .await
    .expect(200);
    assert_eq!(renamed.body["name"], "lab-2");
    // Given again, it moves.
    let moved = edit(
        json!({"name": "lab-2", "type": "HOSTB", "token": "glpat-new",
                            "git_api_url": "https://git2.acme.example/api/v4"}),
    )
    .await
    .expect(200);
    assert_eq!(
        moved.body["git_api_url"],
        "https://git2.acme.example/api/v4"
    );
    assert!(!moved.text.contains("glpat"));
    // A token at its provider's public API, edited to name that API: not a move.
    let public = t
        .post(
            &path,
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_stored"}),
        )
        .await
        .expect(201);
    t.call(
        Some(&devops),
        actix_web::http::Method::PUT,
        &format!("{path}/{}", public.id()),
        Some(json!({"name": "gh", "type": "HOSTA", "git_api_url": "https://api.github.com"})),
    )
    .await
    .expect(200);
}

/// Credentials in a helm repository's address would be stored and shown to every member.
async fn a_helm_repository_address_holds_no_credentials<S: App>(t: T<S>) {
    let path = format!("/organization/{}/helmRepository", t.org);
    for (kind, url) in [
        ("HTTPS", "https://bot:hunter2@charts.acme.example"),
        ("HTTPS", "https://token@charts.acme.example/stable"),
        (
            "OCI_GENERIC_CR",
            "oci://bot:hunter2@registry.acme.example/charts",
        ),
    ] {
        let refused = t
            .post(
                &path,
                json!({"name": "charts", "kind": kind, "url": url, "skip_tls_verification": false}),
            )
            .await
            .expect_error(400, "url: must not hold credentials");
        assert!(!refused.text.contains("hunter2"), "{}", refused.text);
    }
    let made = t
        .post(
            &path,
            json!({"name": "charts", "kind": "HTTPS", "url": "https://charts.acme.example",
                   "skip_tls_verification": false, "config": {"username": "bot", "password": "hunter2"}}),
        )
        .await
        .expect(201);
    t.put(
        &format!("{path}/{}", made.id()),
        json!({"name": "charts", "kind": "HTTPS", "url": "https://bot:hunter2@charts.acme.example",
               "skip_tls_verification": false}),
    )
    .await
    .expect_error(400, "url: must not hold credentials");
    let shown = t.get(&format!("{path}/{}", made.id())).await.expect(200);
    assert_eq!(shown.body["url"], "https://charts.acme.example");
}
