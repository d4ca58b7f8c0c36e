//! The HTTP contract, through the production app factory, on SQLite and PostgreSQL.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{service_bodies, App, T};
use domain::auth::Role;
use serde_json::json;

http_suite!(
    hierarchy_round_trip,
    every_service_kind_round_trips,
    helm_has_the_members_of_the_specification,
    v1_prefix_and_root_answer_alike,
    errors_are_json_with_request_ids,
    validation_names_the_field,
    authentication_is_required,
    other_organizations_are_forbidden_and_unknown_ids_not_found,
    pagination_is_uniform,
    names_are_unique_case_insensitively,
    secrets_are_never_returned,
    referenced_resources_cannot_be_deleted_and_parents_cascade,
    api_tokens_are_shown_once_and_revoked_at_once,
    roles_are_enforced,
    environment_needs_a_cluster,
    service_references_must_exist_in_the_organization,
    organization_can_be_read_edited_and_deleted,
    health_endpoints_answer,
);

async fn hierarchy_round_trip<S: App>(t: T<S>) {
    let org = t.org.clone();
    let cluster = t
        .post(
            &format!("/organization/{org}/cluster"),
            json!({"name": "main", "region": "us-east-2", "cloud_provider": "CLOUDA"}),
        )
        .await
        .expect(201);
    assert_eq!(cluster.body["cloud_provider"], "CLOUDA");
    let cluster_id = cluster.id();

    let project = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "shop", "description": "d"}),
        )
        .await
        .expect(201);
    assert_eq!(project.body["organization"]["id"], json!(org));
    let project_id = project.id();

    // Without `cluster`, the organization's first cluster is used; mode defaults to DEVELOPMENT.
    let env = t
        .post(
            &format!("/project/{project_id}/environment"),
            json!({"name": "Prod"}),
        )
        .await
        .expect(201);
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
            !env.body[member].is_null(),
            "environment lacks {member}: {}",
            env.text
        );
    }
    assert_eq!(env.body["cluster_id"], json!(cluster_id));
    assert_eq!(env.body["cluster_name"], "main");
    assert_eq!(
        env.body["cloud_provider"],
        json!({"provider": "CLOUDA", "cluster": "us-east-2"})
    );
    assert_eq!(env.body["mode"], "DEVELOPMENT");
    assert_eq!(env.body["project"]["id"], json!(project_id));
    let env_id = env.id();

    let edited = t
        .put(
            &format!("/environment/{env_id}"),
            json!({"mode": "STAGING"}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["mode"], "STAGING");
    assert_eq!(edited.body["name"], "Prod");
    t.put(
        &format!("/environment/{env_id}"),
        json!({"mode": "PREVIEW"}),
    )
    .await
    .expect_error(400, "mode: must be one of DEVELOPMENT, PRODUCTION, STAGING");
    let got = t.get(&format!("/environment/{env_id}")).await.expect(200);
    assert_eq!(got.body, edited.body);

    let list = t
        .get(&format!("/project/{project_id}/environment"))
        .await
        .expect(200);
    assert_eq!(list.body["results"].as_array().unwrap().len(), 1);

    let renamed = t
        .put(&format!("/project/{project_id}"), json!({"name": "Shop 2"}))
        .await
        .expect(200);
    assert_eq!(renamed.body["name"], "Shop 2");
    assert!(renamed.body["description"].is_null());

    t.delete(&format!("/environment/{env_id}"))
        .await
        .expect(204);
    t.get(&format!("/environment/{env_id}"))
        .await
        .expect_error(404, "environment not found");
}

async fn every_service_kind_round_trips<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    for (kind, body) in service_bodies(&registry) {
        let created = t
            .post(&format!("/environment/{env}/{kind}"), body.clone())
            .await
            .expect(201);
        assert_eq!(created.body["environment"]["id"], json!(env), "{kind}");
        assert_eq!(created.body["service_type"], json!(kind.to_uppercase()));
        assert!(created.body["created_at"].is_string());
        let id = created.id();

        let got = t.get(&format!("/{kind}/{id}")).await.expect(200);
        assert_eq!(got.body, created.body, "{kind}");
        let list = t
            .get(&format!("/environment/{env}/{kind}"))
            .await
            .expect(200);
        assert_eq!(list.body["results"], json!([created.body]), "{kind}");
        assert_eq!(list.body["pagination"]["total_count"], 1);

        let mut edit = body.clone();
        edit["name"] = json!(format!("{kind}-renamed"));
        let edited = t.put(&format!("/{kind}/{id}"), edit).await.expect(200);
        assert_eq!(edited.body["name"], json!(format!("{kind}-renamed")));
        assert_eq!(edited.body["created_at"], created.body["created_at"]);

        // A service is reached only under its own kind.
        let other = if kind == "helm" { "container" } else { "helm" };
        t.get(&format!("/{other}/{id}")).await.expect(404);

        t.delete(&format!("/{kind}/{id}")).await.expect(204);
        t.get(&format!("/{kind}/{id}")).await.expect(404);
    }
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            service_bodies(&registry)[0].1.clone(),
        )
        .await
        .expect(201);
    let repo = &app.body["git_repository"];
    assert_eq!(
        (repo["owner"].as_str(), repo["name"].as_str()),
        (Some("acme"), Some("api"))
    );
    assert_eq!(repo["provider"], "HOSTA");
    assert_eq!(repo["has_access"], true);
    let container = t
        .post(
            &format!("/environment/{env}/container"),
            service_bodies(&registry)[1].1.clone(),
        )
        .await
        .expect(201);
    assert_eq!(container.body["arguments"], json!(["-g", "daemon off;"]));
    assert_eq!(container.body["entrypoint"], "/docker-entrypoint.sh");
}

async fn helm_has_the_members_of_the_specification<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let token = t
        .post(
            &format!("/organization/{}/gitToken", t.org),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_helm_secret"}),
        )
        .await
        .expect(201)
        .id();
    let body = json!({
        "name": "chart",
        "description": "my chart",
        "source": {"git_repository": {"url": "https://github.com/acme/charts", "branch": "main", "root_path": "/charts/app", "git_token_id": token}},
        "arguments": ["--wait"],
        "allow_cluster_wide_resources": true,
        "timeout_sec": 300,
        "auto_deploy": true,
        "auto_preview": false,
        "values_override": {
            "set": [["image.tag", "1.0"]],
            "set_string": [["a", "b"]],
            "set_json": [["c", "{\"d\": 1}"]],
            "file": {"raw": {"values": [{"name": "values.yaml", "content": "replicas: 2"}]},
                     "git": {"git_repository": {"url": "https://github.com/acme/values"}, "paths": ["/values.yaml"]}}
        },
        "ports": [{"internal_port": 80, "external_port": 443, "service_name": "web", "namespace": "default", "is_default": true}]
    });
    let h = t
        .post(&format!("/environment/{env}/helm"), body)
        .await
        .expect(201)
        .body;
    for member in [
        "id",
        "created_at",
        "updated_at",
        "environment",
        "name",
        "description",
        "icon_uri",
        "auto_preview",
        "auto_deploy",
        "source",
        "arguments",
        "allow_cluster_wide_resources",
        "timeout_sec",
        "values_override",
        "ports",
    ] {
        assert!(!h[member].is_null(), "helm lacks {member}: {h}");
    }
    let repo = &h["source"]["git"]["git_repository"];
    for member in [
        "owner",
        "url",
        "name",
        "has_access",
        "branch",
        "root_path",
        "git_token_id",
        "git_token_name",
    ] {
        assert!(
            !repo[member].is_null(),
            "git repository lacks {member}: {repo}"
        );
    }
    assert_eq!(repo["git_token_name"], "gh");
    assert_eq!(repo["root_path"], "/charts/app");
    assert_eq!(h["values_override"]["set"], json!([["image.tag", "1.0"]]));
    assert_eq!(
        h["values_override"]["file"]["raw"]["values"][0]["name"],
        "values.yaml"
    );
    assert_eq!(
        h["values_override"]["file"]["git"]["paths"],
        json!(["/values.yaml"])
    );
    let port = &h["ports"][0];
    for member in [
        "id",
        "port_type",
        "internal_port",
        "external_port",
        "protocol",
        "service_name",
        "name",
        "namespace",
        "is_default",
    ] {
        if member != "name" {
            assert!(!port[member].is_null(), "port lacks {member}: {port}");
        }
    }
    assert_eq!(port["protocol"], "HTTP");
    assert_eq!(port["port_type"], "SERVICE_NAME");
    let list = t.get(&format!("/environment/{env}/helm")).await.expect(200);
    assert_eq!(list.body["results"][0], h);
    // A git token in use cannot be deleted.
    t.delete(&format!("/organization/{}/gitToken/{token}", t.org))
        .await
        .expect_error(409, "");
    let tokens = t
        .get(&format!("/organization/{}/gitToken", t.org))
        .await
        .expect(200);
    assert_eq!(tokens.body["results"][0]["associated_services_count"], 1);
}

async fn v1_prefix_and_root_answer_alike<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let v1 = t.get(&format!("/v1/environment/{env}")).await.expect(200);
    let root = t.get(&format!("/environment/{env}")).await.expect(200);
    assert_eq!(v1.body, root.body);
    let created = t
        .post(
            &format!("/v1/project/{project}/environment"),
            json!({"name": "staging"}),
        )
        .await
        .expect(201);
    t.get(&format!("/environment/{}", created.id()))
        .await
        .expect(200);
    t.get("/v1/nothing-here")
        .await
        .expect_error(404, "no route");
}

async fn errors_are_json_with_request_ids<S: App>(t: T<S>) {
    let (_, project, _) = t.hierarchy().await;
    let not_found = t
        .get("/no/such/route")
        .await
        .expect_error(404, "no route for GET /no/such/route");
    assert!(not_found.headers.contains_key("x-request-id"));
    let ok = t.get("/organization").await.expect(200);
    assert!(ok.headers.contains_key("x-request-id"));

    t.call(Some(&t.token), Method::PATCH, "/organization", None)
        .await
        .expect_error(405, "method PATCH");

    let path = format!("/project/{project}/environment");
    let req = TestRequest::post()
        .uri(&path)
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Content-Type", "text/plain"))
        .set_payload("{\"name\": \"x\"}")
        .to_request();
    t.send(req)
        .await
        .expect_error(415, "Content-Type must be application/json");

    let req = TestRequest::post()
        .uri(&path)
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Content-Type", "application/json"))
        .set_payload("{\"name\": ")
        .to_request();
    t.send(req).await.expect_error(400, "body: malformed JSON");

    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let req = TestRequest::post()
        .uri(&path)
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Content-Type", "application/json"))
        .set_payload(big)
        .to_request();
    t.send(req).await.expect_error(413, "body:");

    // A client's own request id is echoed.
    let req = TestRequest::get()
        .uri("/organization")
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("X-Request-Id", "trace-123"))
        .to_request();
    let echoed = t.send(req).await.expect(200);
    assert_eq!(echoed.headers.get("x-request-id").unwrap(), "trace-123");
}

async fn validation_names_the_field<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let org = t.org.clone();
    t.post(&format!("/project/{project}/environment"), json!({}))
        .await
        .expect_error(400, "name: is required");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "x", "mode": "NOPE"}),
    )
    .await
    .expect_error(400, "mode: unknown variant `NOPE`, expected one of");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "x", "mode": "PREVIEW"}),
    )
    .await
    .expect_error(400, "mode: must be one of DEVELOPMENT, PRODUCTION, STAGING");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "x", "cluster": "not-a-uuid"}),
    )
    .await
    .expect_error(400, "cluster:");
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "p", "description": "é".repeat(256)}),
    )
    .await
    .expect_error(400, "description: must be at most 255 characters");
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "p", "description": "é".repeat(255)}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "  "}),
    )
    .await
    .expect_error(400, "name: must not be empty");
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": "c", "image_name": "nginx", "tag": "1"}),
    )
    .await
    .expect_error(400, "registry_id: is required");
    t.post(&format!("/environment/{env}/application"), json!({"name": "a", "git_repository": {"url": "https://github.com/x/y"}, "ports": [{"internal_port": 70000}]}))
        .await
        .expect_error(400, "ports[0].internal_port: must be between 1 and 65535");
    t.post(
        &format!("/environment/{env}/database"),
        json!({"name": "d", "type": "ORACLE", "version": "1", "mode": "CONTAINER"}),
    )
    .await
    .expect_error(400, "type: unknown variant `ORACLE`");
    t.post(
        &format!("/organization/{org}/cluster"),
        json!({"name": "c", "region": "r", "cloud_provider": "AWS"}),
    )
    .await
    .expect_error(400, "cloud_provider:");
    t.get("/project/not-a-uuid")
        .await
        .expect_error(400, "projectId: 'not-a-uuid' is not a valid UUID");
    t.get("/application/123")
        .await
        .expect_error(400, "applicationId:");
    // Unknown members are ignored.
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "rich", "unknown_member": [1, 2]}),
    )
    .await
    .expect(201);
}

async fn authentication_is_required<S: App>(t: T<S>) {
    t.call(None, Method::GET, "/organization", None)
        .await
        .expect_error(401, "Authorization header is missing");
    t.call(Some("cap_wrong"), Method::GET, "/organization", None)
        .await
        .expect_error(401, "invalid API token");
    for header in [
        "Bearer abc.def.ghi",
        "Basic dXNlcjpwdw==",
        "Token",
        "garbage",
    ] {
        let req = TestRequest::get()
            .uri("/organization")
            .insert_header(("Authorization", header))
            .to_request();
        t.send(req).await.expect(401);
    }
    // Bad credentials are a 401 whatever else is wrong with the request.
    let (_, project, _) = t.hierarchy().await;
    t.call(Some("cap_wrong"), Method::GET, "/organization?page=0", None)
        .await
        .expect_error(401, "invalid API token");
    let req = TestRequest::post()
        .uri(&format!("/project/{project}/environment"))
        .insert_header(("Authorization", "Token cap_wrong"))
        .insert_header(("Content-Type", "text/plain"))
        .set_payload("{")
        .to_request();
    t.send(req).await.expect(401);
    let req = TestRequest::post()
        .uri(&format!("/project/{project}/environment"))
        .insert_header(("Content-Type", "application/json"))
        .set_payload("{not json")
        .to_request();
    t.send(req).await.expect(401);
    // The scheme word is case-insensitive.
    let req = TestRequest::get()
        .uri("/organization")
        .insert_header(("Authorization", format!("token {}", t.token)))
        .to_request();
    t.send(req).await.expect(200);
}

async fn other_organizations_are_forbidden_and_unknown_ids_not_found<S: App>(t: T<S>) {
    let (cluster, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let (other_org, other) = t
        .capstan
        .bootstrap_organization("Other", Role::Admin, "o")
        .await
        .unwrap();
    let other = Some(other.value);
    let org = t.org.clone();
    // Lists are checked on their parent whether it has children or not (an empty one is read,
    // a full one is known by its children).
    let empty_env = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "empty"}),
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
    for path in [
        format!("/organization/{org}"),
        format!("/organization/{org}/project"),
        format!("/organization/{org}/cluster/{cluster}"),
        format!("/organization/{org}/containerRegistry/{registry}"),
        format!("/project/{project}"),
        format!("/project/{project}/environment"),
        format!("/environment/{env}"),
        format!("/environment/{env}/container"),
        format!("/environment/{empty_env}/container"),
        format!("/environment/{env}/application"),
        format!("/container/{container}/status"),
    ] {
        t.call(other.as_deref(), Method::GET, &path, None)
            .await
            .expect_error(403, "");
    }
    assert_eq!(
        t.get(&format!("/environment/{env}/container"))
            .await
            .expect(200)
            .body["results"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    t.call(
        other.as_deref(),
        Method::DELETE,
        &format!("/project/{project}"),
        None,
    )
    .await
    .expect(403);
    // A record of this organization addressed under another organization's path.
    t.get(&format!("/organization/{}/cluster/{cluster}", other_org.id))
        .await
        .expect(403);
    let unknown = uuid::Uuid::new_v4();
    t.get(&format!("/project/{unknown}"))
        .await
        .expect_error(404, "project not found");
    t.get(&format!("/organization/{unknown}")).await.expect(404);
    t.get(&format!("/environment/{unknown}/container"))
        .await
        .expect_error(404, "environment not found");
    t.get(&format!("/project/{unknown}/environment"))
        .await
        .expect_error(404, "project not found");
    t.get(&format!("/container/{unknown}/status"))
        .await
        .expect(404);
    // A service is found under its own kind only.
    t.get(&format!("/application/{container}/status"))
        .await
        .expect_error(404, "application not found");
    t.get(&format!("/container/{container}/status"))
        .await
        .expect(200);
    t.get(&format!("/container/{unknown}")).await.expect(404);
    t.get(&format!("/organization/{org}/cloudA/credentials/{unknown}"))
        .await
        .expect(404);
}

async fn pagination_is_uniform<S: App>(t: T<S>) {
    let org = t.org.clone();
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            t.post(
                &format!("/organization/{org}/project"),
                json!({"name": format!("p{i}")}),
            )
            .await
            .expect(201)
            .id(),
        );
    }
    let all = t
        .get(&format!("/organization/{org}/project"))
        .await
        .expect(200);
    assert_eq!(
        all.body["pagination"],
        json!({"page": 1, "page_size": 100, "total_count": 5, "total_pages": 1})
    );
    let got: Vec<&str> = all.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        got,
        ids.iter().map(String::as_str).collect::<Vec<_>>(),
        "creation order"
    );

    let second = t
        .get(&format!(
            "/v1/organization/{org}/project?page=2&page_size=2"
        ))
        .await
        .expect(200);
    assert_eq!(
        second.body["pagination"],
        json!({"page": 2, "page_size": 2, "total_count": 5, "total_pages": 3})
    );
    assert_eq!(second.body["results"][0]["id"], json!(ids[2]));
    let past = t
        .get(&format!("/organization/{org}/project?page=9&page_size=2"))
        .await
        .expect(200);
    assert_eq!(past.body["results"], json!([]));
    assert_eq!(past.body["pagination"]["total_count"], 5);
    for (query, param) in [
        ("page=0", "page"),
        ("page=x", "page"),
        ("page_size=0", "page_size"),
        ("page_size=1001", "page_size"),
        ("page_size=-3", "page_size"),
    ] {
        t.get(&format!("/organization/{org}/project?{query}"))
            .await
            .expect_error(400, &format!("{param}:"));
    }
    t.get(&format!("/organization/{org}/project?page_size=1000"))
        .await
        .expect(200);
    for path in [
        "/organization".to_string(),
        format!("/organization/{org}/apiToken"),
        format!("/organization/{org}/availableRole"),
        format!("/organization/{org}/gitToken"),
    ] {
        let r = t.get(&path).await.expect(200);
        assert!(
            r.body["results"].is_array() && r.body["pagination"]["total_count"].is_number(),
            "{path}: {}",
            r.text
        );
    }
}

async fn names_are_unique_case_insensitively<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let org = t.org.clone();
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "SHOP"}),
    )
    .await
    .expect_error(409, "a project named 'SHOP' already exists");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "PROD"}),
    )
    .await
    .expect_error(409, "");
    let other_project = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "other"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/project/{other_project}/environment"),
        json!({"name": "prod"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/environment/{env}/database"),
        json!({"name": "Cache", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/environment/{env}/database"),
        json!({"name": "cache", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
    )
    .await
    .expect(409);
    let second = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "second"}),
        )
        .await
        .expect(201)
        .id();
    t.put(&format!("/project/{second}"), json!({"name": "Shop"}))
        .await
        .expect(409);
}

async fn secrets_are_never_returned<S: App>(t: T<S>) {
    let org = t.org.clone();
    let creds = t
        .post(
            &format!("/organization/{org}/cloudA/credentials"),
            json!({"name": "aws", "access_key_id": "AKIA1", "secret_access_key": "s3cr3t-creds"}),
        )
        .await
        .expect(201);
    assert_eq!(
        creds.body,
        json!({"id": creds.id(), "name": "aws", "access_key_id": "AKIA1", "object_type": "CLOUDA"})
    );
    let creds_id = creds.id();
    let registry = t.registry().await;
    let git = t
        .post(
            &format!("/organization/{org}/gitToken"),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_s3cr3t_git", "workspace": "acme"}),
        )
        .await
        .expect(201);
    assert_eq!(git.body["type"], "HOSTA");
    let git_id = git.id();
    let edited = t
        .put(
            &format!("/organization/{org}/cloudA/credentials/{creds_id}"),
            json!({"name": "aws2", "access_key_id": "AKIA2"}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["name"], "aws2");
    let mut seen = String::new();
    for path in [
        format!("/organization/{org}/cloudA/credentials"),
        format!("/organization/{org}/cloudA/credentials/{creds_id}"),
        format!("/organization/{org}/containerRegistry"),
        format!("/organization/{org}/containerRegistry/{registry}"),
        format!("/organization/{org}/gitToken"),
        format!("/organization/{org}/gitToken/{git_id}"),
    ] {
        seen.push_str(&t.get(&path).await.expect(200).text);
    }
    seen.push_str(&git.text);
    for secret in [
        "s3cr3t-creds",
        "hunter2-registry",
        "ghp_s3cr3t_git",
        "password",
        "secret_access_key",
        "\"token\"",
    ] {
        assert!(!seen.contains(secret), "{secret} leaked");
    }
    let reg = t
        .get(&format!("/organization/{org}/containerRegistry/{registry}"))
        .await
        .expect(200);
    assert_eq!(reg.body["config"], json!({"username": "bob"}));
    assert_eq!(reg.body["associated_services_count"], 0);
}

async fn referenced_resources_cannot_be_deleted_and_parents_cascade<S: App>(t: T<S>) {
    let (cluster, project, env) = t.hierarchy().await;
    let org = t.org.clone();
    let registry = t.registry().await;
    let container = t
        .post(
            &format!("/environment/{env}/container"),
            service_bodies(&registry)[1].1.clone(),
        )
        .await
        .expect(201)
        .id();
    t.delete(&format!("/organization/{org}/cluster/{cluster}"))
        .await
        .expect_error(409, "the cluster is still used by environments");
    t.delete(&format!("/organization/{org}/containerRegistry/{registry}"))
        .await
        .expect_error(409, "the container registry is still used");
    let reg = t
        .get(&format!("/organization/{org}/containerRegistry"))
        .await
        .expect(200);
    assert_eq!(reg.body["results"][0]["associated_services_count"], 1);

    t.delete(&format!("/project/{project}")).await.expect(204);
    t.get(&format!("/environment/{env}")).await.expect(404);
    t.get(&format!("/container/{container}")).await.expect(404);
    t.delete(&format!("/organization/{org}/containerRegistry/{registry}"))
        .await
        .expect(204);
    t.delete(&format!("/organization/{org}/cluster/{cluster}"))
        .await
        .expect(204);
    t.delete(&format!("/organization/{org}/cluster/{cluster}"))
        .await
        .expect(404);
}

async fn api_tokens_are_shown_once_and_revoked_at_once<S: App>(t: T<S>) {
    let org = t.org.clone();
    let roles = t
        .get(&format!("/organization/{org}/availableRole"))
        .await
        .expect(200);
    let names: Vec<&str> = roles.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ADMIN", "DEVOPS", "VIEWER", "BILLING_MANAGER"]);
    let viewer_role = roles.body["results"][2]["id"].as_str().unwrap().to_string();
    assert_eq!(viewer_role, Role::Viewer.id().to_string());

    let created = t
        .post(
            &format!("/organization/{org}/apiToken"),
            json!({"name": "ci", "description": "pipeline", "role_id": viewer_role}),
        )
        .await
        .expect(201);
    let value = created.body["token"].as_str().unwrap().to_string();
    assert!(value.len() >= 43);
    assert_eq!(created.body["role_name"], "VIEWER");
    let id = created.id();

    let list = t
        .get(&format!("/organization/{org}/apiToken"))
        .await
        .expect(200);
    assert!(!list.text.contains(&value));
    assert!(list.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t.get("token").is_none()));

    t.call(Some(&value), Method::GET, "/organization", None)
        .await
        .expect(200);
    t.delete(&format!("/organization/{org}/apiToken/{id}"))
        .await
        .expect(204);
    t.call(Some(&value), Method::GET, "/organization", None)
        .await
        .expect_error(401, "");

    t.post(
        &format!("/organization/{org}/apiToken"),
        json!({"name": "x", "role_id": uuid::Uuid::new_v4()}),
    )
    .await
    .expect_error(400, "role_id:");
    t.post(
        &format!("/organization/{org}/apiToken"),
        json!({"name": "x"}),
    )
    .await
    .expect_error(400, "role_id: is required");
}

async fn roles_are_enforced<S: App>(t: T<S>) {
    let (_, project, _) = t.hierarchy().await;
    let org = t.org.clone();
    let viewer = Some(t.token_with_role(Role::Viewer).await);
    let devops = Some(t.token_with_role(Role::Devops).await);
    let billing = Some(t.token_with_role(Role::BillingManager).await);
    let new_project = json!({"name": "by-role"});
    t.call(
        viewer.as_deref(),
        Method::GET,
        &format!("/project/{project}"),
        None,
    )
    .await
    .expect(200);
    t.call(
        viewer.as_deref(),
        Method::POST,
        &format!("/organization/{org}/project"),
        Some(new_project.clone()),
    )
    .await
    .expect(403);
    t.call(
        devops.as_deref(),
        Method::POST,
        &format!("/organization/{org}/project"),
        Some(new_project),
    )
    .await
    .expect(201);
    t.call(
        devops.as_deref(),
        Method::POST,
        &format!("/organization/{org}/apiToken"),
        Some(json!({"name": "x", "role_id": Role::Admin.id()})),
    )
    .await
    .expect(403);
    t.call(
        devops.as_deref(),
        Method::PUT,
        &format!("/organization/{org}"),
        Some(json!({"name": "x"})),
    )
    .await
    .expect(403);
    t.call(
        billing.as_deref(),
        Method::GET,
        &format!("/organization/{org}"),
        None,
    )
    .await
    .expect(200);
    t.call(
        billing.as_deref(),
        Method::GET,
        &format!("/project/{project}"),
        None,
    )
    .await
    .expect(403);
}

async fn environment_needs_a_cluster<S: App>(t: T<S>) {
    let project = t
        .post(
            &format!("/organization/{}/project", t.org),
            json!({"name": "p"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "e"}),
    )
    .await
    .expect_error(400, "cluster:");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "e", "cluster": uuid::Uuid::new_v4()}),
    )
    .await
    .expect_error(404, "cluster not found");
}

async fn service_references_must_exist_in_the_organization<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let unknown = uuid::Uuid::new_v4().to_string();
    t.post(
        &format!("/environment/{env}/container"),
        service_bodies(&unknown)[1].1.clone(),
    )
    .await
    .expect_error(404, "container registry not found");
    let (other_org, _) = t
        .capstan
        .bootstrap_organization("Other", Role::Admin, "o")
        .await
        .unwrap();
    let other_registry = t
        .capstan
        .create_registry(
            &domain::auth::Principal {
                subject: domain::auth::Subject::User("someone".into()),
                memberships: vec![(other_org.id, Role::Admin)],
                origin: domain::model::Origin::Api,
                user_agent: None,
            },
            other_org.id,
            serde_json::from_value(json!({"name": "r", "kind": "DOCKER_HUB"})).unwrap(),
        )
        .await
        .unwrap();
    t.post(
        &format!("/environment/{env}/container"),
        service_bodies(&other_registry.registry.id.to_string())[1]
            .1
            .clone(),
    )
    .await
    .expect(403);
    t.post(&format!("/environment/{env}/application"), json!({"name": "a", "git_repository": {"url": "https://github.com/a/b", "git_token_id": unknown}}))
        .await
        .expect_error(404, "git token not found");
}

async fn organization_can_be_read_edited_and_deleted<S: App>(t: T<S>) {
    let org = t.org.clone();
    let got = t.get(&format!("/organization/{org}")).await.expect(200);
    assert_eq!(got.body["name"], "Acme");
    let edited = t
        .put(
            &format!("/organization/{org}"),
            json!({"name": "Acme Corp", "description": "d", "plan": "TEAM"}),
        )
        .await
        .expect(200);
    assert_eq!(
        (edited.body["name"].as_str(), edited.body["plan"].as_str()),
        (Some("Acme Corp"), Some("TEAM"))
    );
    t.post("/organization", json!({"name": "new"}))
        .await
        .expect(403);
    t.hierarchy().await;
    t.delete(&format!("/organization/{org}")).await.expect(204);
    // The token went with its organization.
    t.get("/organization").await.expect(401);
}

async fn health_endpoints_answer<S: App>(t: T<S>) {
    t.call(None, Method::GET, "/healthz", None)
        .await
        .expect(200);
    let ready = t.call(None, Method::GET, "/readyz", None).await.expect(200);
    assert_eq!(ready.body["status"], "ready");
}
