//! The OpenAPI document against the routes the server really has.

use crate::common;

use actix_web::http::Method;
use common::{App, T};
use std::collections::BTreeSet;

http_suite!(
    document_and_routes_agree,
    the_document_is_served_with_the_specification_members,
    the_document_shows_the_members_the_description_names,
);

fn fill(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            if segment.starts_with('{') {
                uuid::Uuid::new_v4().to_string()
            } else {
                segment.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn document_and_routes_agree<S: App>(t: T<S>) {
    let doc = t
        .call(None, Method::GET, "/openapi.json", None)
        .await
        .expect(200)
        .body;
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|m| ["get", "post", "put", "delete", "patch"].contains(&m.as_str()))
                .map(move |m| (m.to_uppercase(), path.clone()))
        })
        .collect();
    let registered: BTreeSet<(String, String)> = capstan_api::endpoints()
        .iter()
        .map(|e| (e.method.to_string(), e.path.clone()))
        .collect();
    assert_eq!(
        documented, registered,
        "the document lists exactly the registered routes"
    );
    assert!(documented.len() > 50);

    // Every documented operation is served, at the root and (for the API) under /v1: the router
    // neither misses the path nor refuses the method. The stand-in's controls are off here
    // (they answer as unknown paths do); tests/controls.rs calls each of them with them on.
    for (method, path) in documented
        .iter()
        .filter(|(_, p)| !p.starts_with("/_capstan/"))
    {
        let method: Method = method.parse().unwrap();
        let mut targets = vec![fill(path)];
        if !["/healthz", "/readyz", "/openapi.json", "/docs", "/metrics"].contains(&path.as_str()) {
            targets.push(format!("/v1{}", fill(path)));
        }
        for target in targets {
            let r = t.call(Some(&t.token), method.clone(), &target, None).await;
            let message = r.body["message"].as_str().unwrap_or_default();
            assert!(
                r.status != 405 && !message.starts_with("no route"),
                "{method} {target}: {} {}",
                r.status,
                r.text
            );
        }
    }
    // And a path that is not documented is not served.
    t.get("/organization/x/unknown")
        .await
        .expect_error(404, "no route");
}

async fn the_document_is_served_with_the_specification_members<S: App>(t: T<S>) {
    let doc = t
        .call(None, Method::GET, "/openapi.json", None)
        .await
        .expect(200)
        .body;
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.")),
        Some(true)
    );
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["bearerAuth"]["scheme"], "bearer");
    assert_eq!(schemes["ApiKeyAuth"]["in"], "header");
    let required = |schema: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let s = &doc["components"]["schemas"][schema];
        let mut parts = vec![s.clone()];
        parts.extend(s["allOf"].as_array().cloned().unwrap_or_default());
        for part in parts {
            let part = match part["$ref"].as_str() {
                Some(r) => doc["components"]["schemas"][r.rsplit('/').next().unwrap()].clone(),
                None => part,
            };
            for r in part["required"].as_array().cloned().unwrap_or_default() {
                out.insert(r.as_str().unwrap().to_string());
            }
        }
        out
    };
    for (schema, members) in [
        (
            "VariableView",
            &["id", "created_at", "key", "scope", "variable_type"][..],
        ),
        (
            "EnvironmentView",
            &[
                "id",
                "created_at",
                "name",
                "organization",
                "project",
                "cloud_provider",
                "mode",
                "cluster_id",
            ][..],
        ),
        ("CredentialsView", &["id", "name"][..]),
        (
            "AssociatedServiceView",
            &[
                "project_id",
                "project_name",
                "environment_id",
                "environment_name",
                "service_id",
                "service_name",
            ][..],
        ),
        ("Region", &["name", "country_code", "country", "city"][..]),
        ("ErrorBody", &["status", "error", "message"][..]),
    ] {
        let got = required(schema);
        for m in members {
            assert!(
                got.contains(*m),
                "{schema} must require {m}; requires {got:?}"
            );
        }
    }
    // Endpoint 2 answers 201 with a variable; endpoint 4 answers 202.
    let op = &doc["paths"]["/container/{containerId}/environmentVariable"]["post"];
    assert!(op["responses"]["201"]["content"]["application/json"].is_object());
    assert!(
        op["responses"]["400"].is_object()
            && op["responses"]["429"]["headers"]["X-RateLimit-Limit"].is_object()
    );
    assert!(
        doc["paths"]["/environment/{environmentId}/clone"]["post"]["responses"]["202"].is_object()
    );
    let page = t.call(None, Method::GET, "/docs", None).await.expect(200);
    assert!(
        page.text.contains("/openapi.json")
            && !page.text.contains("http://")
            && !page.text.contains("https://"),
        "no CDN"
    );
}

/// The members a schema shows, its parts (`allOf`) and references followed.
fn properties(doc: &serde_json::Value, schema: &serde_json::Value) -> BTreeSet<String> {
    let schema = match schema["$ref"].as_str() {
        Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
        None => schema,
    };
    let mut out: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for key in ["allOf", "oneOf", "anyOf"] {
        for part in schema[key].as_array().cloned().unwrap_or_default() {
            out.extend(properties(doc, &part));
        }
    }
    out
}

async fn the_document_shows_the_members_the_description_names<S: App>(t: T<S>) {
    let doc = t
        .call(None, Method::GET, "/openapi.json", None)
        .await
        .expect(200)
        .body;
    for (schema, members) in [
        ("EnvironmentView", &["last_updated_by"][..]),
        ("OrganizationView", &["owner"][..]),
        (
            "ClusterView",
            &["version", "cpu", "memory", "is_default", "has_access"][..],
        ),
        ("GitTokenView", &["expired_at"][..]),
        ("CustomDomainView", &["validation_domain"][..]),
        (
            "ServiceView",
            &["maximum_cpu", "maximum_memory", "disk_encrypted"][..],
        ),
        (
            "GitRepository",
            &["deployed_commit_contributor", "deployed_commit_tag"][..],
        ),
    ] {
        let shown = properties(&doc, &doc["components"]["schemas"][schema]);
        for m in members {
            assert!(
                shown.contains(*m),
                "{schema} must show {m}; shows {shown:?}"
            );
        }
    }
}
