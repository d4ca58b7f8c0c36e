//! Input that must be refused plainly, on both backends: NUL characters, ids in other
//! spellings, page numbers past any page, negative stream positions, bulk actions on nothing;
//! HEAD on reads; links built from the operator's address, never the request's headers; the
//! cap on an organization's API tokens; a git provider's failure told to the client.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{App, T};
use serde_json::json;
use std::time::Duration;

http_suite!(
    nul_characters_are_refused_naming_the_field,
    ids_are_read_in_their_hyphenated_form_only,
    a_page_number_past_any_page_is_refused,
    a_negative_stream_position_is_refused,
    head_answers_as_get_does,
    a_bulk_deletion_that_lists_no_service_is_refused,
    audit_links_never_come_from_the_request_headers,
    a_build_mode_other_than_docker_is_refused,
);

async fn a_build_mode_other_than_docker_is_refused<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let body = |mode: &str| {
        json!({"name": "api", "build_mode": mode,
               "git_repository": {"url": "https://github.com/acme/api"}})
    };
    let refused = t
        .post(
            &format!("/environment/{env}/application"),
            body("BUILDPACKS"),
        )
        .await
        .expect_error(400, "build_mode");
    assert!(refused.text.contains("DOCKER"), "{}", refused.text);
    t.post(&format!("/environment/{env}/application"), body("DOCKER"))
        .await
        .expect(201);
}

/// Suites on an app set up differently: a low token cap, a public URL, a failing git provider.
macro_rules! adjusted_suite {
    ($module:ident, $test:ident, $backend:expr, $app:expr) => {
        mod $module {
            #[actix_rt::test]
            async fn sqlite() {
                let backend = crate::common::sqlite().await.unwrap().map($backend);
                super::$test(crate::common::setup_with(backend, $app).await).await;
            }

            #[actix_rt::test]
            async fn postgres() {
                let Some(backend) = crate::common::postgres().await else {
                    return;
                };
                super::$test(crate::common::setup_with(backend.map($backend), $app).await).await;
            }
        }
    };
}

adjusted_suite!(
    capped,
    an_organization_holds_at_most_its_cap_of_api_tokens,
    |c| c.with_max_api_tokens(3),
    |s| s
);
adjusted_suite!(
    public_url,
    audit_links_start_with_the_public_url_when_one_is_set,
    |c| c,
    |s| s.with_links_base("https://capstan.example/")
);
adjusted_suite!(
    failing_provider,
    a_failed_webhook_repair_says_why,
    |c| c.with_git(domain::services::GitIntegration::new(
        std::sync::Arc::new(
            git::HttpGitHosting::new(
                std::time::Duration::from_millis(500),
                crate::common::loopback_allowed()
            )
            .unwrap()
        ),
        "https://capstan.example",
        domain::secret::Secret::new("test-signing-key"),
        time::Duration::seconds(0),
    )),
    |s| s
);

async fn nul_characters_are_refused_naming_the_field<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let org = t.org.clone();
    t.post(
        &format!("/organization/{org}/project"),
        json!({"name": "a\u{0}b"}),
    )
    .await
    .expect_error(400, "name: must not contain a NUL character");
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "dev", "mode": "DEVELOPMENT", "description": "x\u{0}"}),
    )
    .await
    .expect_error(400, "description: must not contain a NUL character");
    t.post(
        &format!("/environment/{env}/environmentVariable"),
        json!({"key": "K", "value": "v\u{0}v"}),
    )
    .await
    .expect_error(400, "value: must not contain a NUL character");
    let registry = t.registry().await;
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1",
               "ports": [{"internal_port": 80, "name": "p\u{0}"}]}),
    )
    .await
    .expect_error(400, "ports[0].name: must not contain a NUL character");
    // In a query: a filter.
    t.get(&format!("/organization/{org}/events?triggeredBy=a%00b"))
        .await
        .expect_error(400, "triggeredBy: must not contain a NUL character");
    t.get(&format!("/organization/{org}/events?triggeredBy=ab"))
        .await
        .expect(200);
    // Nothing of it was kept.
    let projects = t.get(&format!("/organization/{org}/project")).await.body;
    assert_eq!(
        projects["results"].as_array().unwrap().len(),
        1,
        "{projects}"
    );
}

async fn ids_are_read_in_their_hyphenated_form_only<S: App>(t: T<S>) {
    let (cluster, project, env) = t.hierarchy().await;
    let bare = project.replace('-', "");
    for other in [
        format!("{{{project}}}"),
        format!("urn:uuid:{project}"),
        bare,
        project.to_uppercase().replace('-', ""),
    ] {
        t.get(&format!("/project/{other}"))
            .await
            .expect_error(400, "projectId:");
    }
    t.get(&format!("/project/{}", project.to_uppercase()))
        .await
        .expect(200);
    t.get(&format!("/project/{project}")).await.expect(200);
    // In a body: a typed reference and a plain list of ids.
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "braced", "mode": "DEVELOPMENT", "cluster": format!("{{{cluster}}}")}),
    )
    .await
    .expect_error(400, "cluster");
    let c = t.container(&env, "web").await;
    t.post(
        &format!("/environment/{env}/service/stop"),
        json!({"container_ids": [format!("urn:uuid:{c}")]}),
    )
    .await
    .expect_error(400, "container_ids");
    let variable = t
        .post(
            &format!("/environment/{env}/environmentVariable"),
            json!({"key": "K", "value": "v"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("/environment/{env}/environmentVariable/{variable}"),
        json!({"key": "K", "secret_manager_access_id": format!("{{{project}}}")}),
    )
    .await
    .expect_error(400, "secret_manager_access_id");
    // In a query.
    t.get(&format!(
        "/organization/{}/events?targetType=PROJECT&targetId={{{project}}}",
        t.org
    ))
    .await
    .expect_error(400, "targetId");
}

async fn a_page_number_past_any_page_is_refused<S: App>(t: T<S>) {
    let org = t.org.clone();
    t.get(&format!("/organization/{org}/project?page=4294967296"))
        .await
        .expect_error(400, "page: must be an integer between 1 and 4294967295");
    t.get(&format!(
        "/organization/{org}/project?page=99999999999999999999999"
    ))
    .await
    .expect_error(400, "page:");
    let last = t
        .get(&format!("/organization/{org}/project?page=4294967295"))
        .await
        .expect(200);
    assert!(last.body["results"].as_array().unwrap().is_empty());
}

async fn a_negative_stream_position_is_refused<S: App>(t: T<S>) {
    let org = t.org.clone();
    // Accepted, the stream would never end: the time limit makes that a failure, not a hang.
    for query in ["last_event_id=-1", "last_event_id=abc"] {
        let answer = actix_rt::time::timeout(
            Duration::from_secs(10),
            t.get(&format!("/organization/{org}/events/stream?{query}")),
        )
        .await
        .expect("a bad position is answered at once");
        answer.expect_error(400, "last_event_id:");
    }
    let req = TestRequest::default()
        .method(Method::GET)
        .uri(&format!("/organization/{org}/events/stream"))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Last-Event-ID", "-5"))
        .to_request();
    let answer = actix_rt::time::timeout(Duration::from_secs(10), t.send(req))
        .await
        .expect("a bad position is answered at once");
    answer.expect_error(400, "Last-Event-ID:");
}

async fn head_answers_as_get_does<S: App>(t: T<S>) {
    let org = t.org.clone();
    for path in [
        format!("/organization/{org}"),
        format!("/v1/organization/{org}/project"),
    ] {
        let head = t
            .call(Some(&t.token.clone()), Method::HEAD, &path, None)
            .await;
        assert_eq!(head.status, 200, "{path}: {}", head.text);
        assert!(head.headers.contains_key("x-request-id"));
        assert!(head.headers.contains_key("x-ratelimit-limit"));
    }
    // Without credentials, as GET: 401.
    let anonymous = t
        .call(None, Method::HEAD, &format!("/organization/{org}"), None)
        .await;
    assert_eq!(anonymous.status, 401);
    // A route with no GET has no HEAD either.
    let head = t
        .call(
            Some(&t.token.clone()),
            Method::HEAD,
            &format!("/organization/{org}/apiToken/{}/x", uuid::Uuid::new_v4()),
            None,
        )
        .await;
    assert_eq!(head.status, 404);
    let (_, _, env) = t.hierarchy().await;
    let head = t
        .call(
            Some(&t.token.clone()),
            Method::HEAD,
            &format!("/environment/{env}/deploy"),
            None,
        )
        .await;
    assert_eq!(head.status, 405, "{}", head.text);
}

async fn a_bulk_deletion_that_lists_no_service_is_refused<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let c = t.container(&env, "web").await;
    for verb in ["delete", "stop", "restart-service", "uninstall"] {
        t.post(&format!("/environment/{env}/service/{verb}"), json!({}))
            .await
            .expect_error(400, "body: lists no service");
    }
    t.get(&format!("/container/{c}")).await.expect(200);
}

/// Three audit events, then the first page of one event, its next link asked for with
/// forged host and scheme headers.
async fn next_link<S: App>(t: &T<S>) -> String {
    let org = t.org.clone();
    for name in ["p1", "p2", "p3"] {
        t.post(
            &format!("/organization/{org}/project"),
            json!({ "name": name }),
        )
        .await
        .expect(201);
    }
    let req = TestRequest::default()
        .method(Method::GET)
        .uri(&format!("/organization/{org}/events?pageSize=1"))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Host", "evil.example"))
        .insert_header(("X-Forwarded-Host", "evil.example"))
        .insert_header(("X-Forwarded-Proto", "javascript"))
        .insert_header(("Forwarded", "host=evil.example;proto=javascript"))
        .to_request();
    let page = t.send(req).await.expect(200);
    page.body["links"]["next"].as_str().unwrap().to_string()
}

async fn audit_links_never_come_from_the_request_headers<S: App>(t: T<S>) {
    let next = next_link(&t).await;
    assert!(
        !next.contains("evil") && !next.contains("javascript"),
        "{next}"
    );
    assert!(
        next.starts_with(&format!("/organization/{}/events?", t.org)),
        "relative without a public URL: {next}"
    );
    assert!(next.contains("continueToken="), "{next}");
    t.get(&next).await.expect(200);
}

async fn audit_links_start_with_the_public_url_when_one_is_set<S: App>(t: T<S>) {
    let next = next_link(&t).await;
    assert!(
        next.starts_with(&format!(
            "https://capstan.example/organization/{}/events?",
            t.org
        )),
        "{next}"
    );
}

async fn an_organization_holds_at_most_its_cap_of_api_tokens<S: App>(t: T<S>) {
    let org = t.org.clone();
    let path = format!("/organization/{org}/apiToken");
    let role = domain::auth::Role::Viewer.id().to_string();
    let body = |name: &str| json!({"name": name, "role_id": role});
    // The suite's own token is the first of three.
    let second = t.post(&path, body("two")).await.expect(201).id();
    t.post(&path, body("three")).await.expect(201);
    t.post(&path, body("four"))
        .await
        .expect_error(409, "the organization already holds 3 API tokens");
    t.delete(&format!("{path}/{second}")).await.expect(204);
    t.post(&path, body("four")).await.expect(201);
}

async fn a_failed_webhook_repair_says_why<S: App>(t: T<S>) {
    let fake = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(500))
        .mount(&fake)
        .await;
    let (_, _, env) = t.hierarchy().await;
    let token = t
        .post(
            &format!("/organization/{}/gitToken", t.org),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_secret", "git_api_url": fake.uri()}),
        )
        .await
        .expect(201)
        .id();
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {
                "url": "https://github.com/acme/api", "branch": "main", "git_token_id": token}}),
        )
        .await
        .expect(201)
        .id();
    let failed = t
        .post(&format!("/service/{app}/gitWebhook/sync"), json!({}))
        .await
        .expect_error(503, "the git provider answered unexpectedly");
    assert!(!failed.text.contains("ghp_secret"), "{}", failed.text);
}
