#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Each provider adapter against a local fake of its API (wiremock): hooks are read and written
//! as the provider expects, and each failure mode maps to its error.

use capstan_git::HttpGitHosting;
use domain::git::{GitError, GitHosting, RepositoryAccess};
use domain::model::GitProvider;
use domain::outbound_policy::OutboundPolicy;
use domain::secret::Secret;
use serde_json::json;
use std::time::Duration;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn repo(server: &MockServer, provider: GitProvider) -> RepositoryAccess {
    RepositoryAccess {
        provider,
        api_url: server.uri(),
        owner: "acme".into(),
        name: "api".into(),
        token: Some(Secret::new("tok-123")),
    }
}

/// The fakes listen on loopback, which the policy allows only when named.
fn client() -> HttpGitHosting {
    guarded("127.0.0.1")
}

/// A client under `CAPSTAN_OUTBOUND_ALLOW=allow`.
fn guarded(allow: &str) -> HttpGitHosting {
    HttpGitHosting::new(
        Duration::from_millis(500),
        OutboundPolicy::parse(allow).unwrap(),
    )
    .unwrap()
}

const URL: &str = "https://capstan.example/git/webhook/s1";

#[tokio::test]
async fn hosta_hooks_are_github_shaped() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/api/hooks"))
        .and(header("authorization", "Bearer tok-123"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"id": 7, "config": {"url": URL}, "events": ["push"]},
            {"id": 8, "active": false, "config": {"url": URL}, "events": ["push"]}
        ])))
        .mount(&server)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/api/hooks/7"))
        .and(body_partial_json(
            json!({"events": ["push", "pull_request"], "config": {"url": URL, "secret": "s3"}}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    let r = repo(&server, GitProvider::HostA);
    let hooks = client().list_hooks(&r).await.unwrap();
    assert_eq!(hooks[0].id, "7");
    assert_eq!(hooks[0].url, URL);
    assert_eq!(hooks[0].events, ["push"]);
    assert!(hooks[0].active);
    assert!(!hooks[1].active, "a disabled hook");
    client()
        .put_hook(
            &r,
            Some("7"),
            URL,
            &["push", "pull_request"],
            &Secret::new("s3"),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn hostb_hooks_are_gitlab_shaped() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/projects/acme%2Fapi/hooks"))
        .and(header("private-token", "tok-123"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"id": 3, "url": URL, "push_events": true, "merge_requests_events": false},
            {"id": 5, "url": URL, "push_events": true, "alert_status": "disabled"}
        ])))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/projects/acme%2Fapi/hooks"))
        .and(body_partial_json(
            json!({"url": URL, "token": "s3", "push_events": true, "merge_requests_events": true}),
        ))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 4})))
        .expect(1)
        .mount(&server)
        .await;
    let r = repo(&server, GitProvider::HostB);
    let hooks = client().list_hooks(&r).await.unwrap();
    assert_eq!(hooks[0].events, ["push_events"]);
    assert!(hooks[0].active);
    assert!(!hooks[1].active, "a hook switched off after failures");
    client()
        .put_hook(
            &r,
            None,
            URL,
            &["push_events", "merge_requests_events"],
            &Secret::new("s3"),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn hostc_hooks_are_bitbucket_shaped() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repositories/acme/api/hooks"))
        .and(header("authorization", "Bearer tok-123"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"values": [
            {"uuid": "{h-1}", "url": URL, "events": ["repo:push", "pullrequest:created"]},
            {"uuid": "{h-2}", "url": URL, "active": false, "events": ["repo:push"]}
        ]})))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path("/repositories/acme/api/hooks/%7Bh-1%7D"))
        .and(body_partial_json(
            json!({"url": URL, "secret": "s3", "active": true}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({})))
        .expect(1)
        .mount(&server)
        .await;
    let r = repo(&server, GitProvider::HostC);
    let hooks = client().list_hooks(&r).await.unwrap();
    assert_eq!(hooks[0].id, "{h-1}");
    assert_eq!(hooks[0].events, ["repo:push", "pullrequest:created"]);
    assert!(hooks[0].active);
    assert!(!hooks[1].active, "a disabled hook");
    client()
        .put_hook(&r, Some("{h-1}"), URL, &["repo:push"], &Secret::new("s3"))
        .await
        .unwrap();
}

#[tokio::test]
async fn each_failure_mode_maps_to_its_error() {
    for provider in [GitProvider::HostA, GitProvider::HostB, GitProvider::HostC] {
        for (response, expected) in [
            (ResponseTemplate::new(401), GitError::Unauthorized),
            (ResponseTemplate::new(403), GitError::Unauthorized),
            (ResponseTemplate::new(429), GitError::RateLimited),
            (
                ResponseTemplate::new(403).insert_header("x-ratelimit-remaining", "0"),
                GitError::RateLimited,
            ),
            (ResponseTemplate::new(404), GitError::NotFound),
            (
                ResponseTemplate::new(200).set_delay(Duration::from_secs(3)),
                GitError::Unreachable("timed out".into()),
            ),
        ] {
            let server = MockServer::start().await;
            Mock::given(method("GET"))
                .respond_with(response)
                .mount(&server)
                .await;
            let got = client().list_hooks(&repo(&server, provider)).await;
            assert_eq!(got, Err(expected), "{provider:?}");
        }
        // Nobody listens there.
        let down = RepositoryAccess {
            api_url: "http://127.0.0.1:9".into(),
            ..repo(&MockServer::start().await, provider)
        };
        assert!(matches!(
            client().list_hooks(&down).await,
            Err(GitError::Unreachable(_))
        ));
    }
}

fn refused(got: Result<Vec<domain::git::Hook>, GitError>) -> String {
    match got {
        Err(GitError::Refused(why)) => why,
        other => panic!("not refused by the policy: {other:?}"),
    }
}

#[tokio::test]
async fn the_default_policy_refuses_loopback_and_metadata_addresses() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&server)
        .await;
    let by_name = server.uri().replace("127.0.0.1", "localhost");
    for api_url in [
        server.uri(),
        by_name.clone(),
        "http://169.254.169.254/latest/meta-data".to_string(),
        "http://[::1]:9".to_string(),
    ] {
        let r = RepositoryAccess {
            api_url: api_url.clone(),
            ..repo(&server, GitProvider::HostA)
        };
        let why = refused(guarded("").list_hooks(&r).await);
        assert!(why.contains("CAPSTAN_OUTBOUND_ALLOW"), "{api_url}: {why}");
        assert!(!why.contains("tok-123"));
        let put = guarded("")
            .put_hook(&r, None, URL, &["push"], &Secret::new("s"))
            .await;
        assert!(matches!(put, Err(GitError::Refused(_))), "{put:?}");
    }
    let files = RepositoryAccess {
        api_url: "file:///etc".into(),
        ..repo(&server, GitProvider::HostB)
    };
    assert!(refused(guarded("").list_hooks(&files).await).contains("http and https"));
    assert!(server.received_requests().await.unwrap().is_empty());

    // A self-hosted provider the operator names, by name or by network.
    let named = RepositoryAccess {
        api_url: by_name,
        ..repo(&server, GitProvider::HostA)
    };
    assert_eq!(guarded("localhost").list_hooks(&named).await, Ok(vec![]));
    assert_eq!(guarded("127.0.0.0/8").list_hooks(&named).await, Ok(vec![]));
}

#[tokio::test]
async fn a_redirect_to_a_refused_address_is_not_followed() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/api/hooks"))
        .respond_with(
            ResponseTemplate::new(301)
                .insert_header("location", "http://169.254.169.254/latest/meta-data/"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/moved/hooks"))
        .respond_with(
            ResponseTemplate::new(301).insert_header("location", "/repos/acme/api2/hooks"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/acme/api2/hooks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            {"id": 3, "config": {"url": URL}, "events": ["push"]}
        ])))
        .mount(&server)
        .await;
    let why = refused(
        client()
            .list_hooks(&repo(&server, GitProvider::HostA))
            .await,
    );
    assert!(
        why.contains("169.254.169.254") && why.contains("CAPSTAN_OUTBOUND_ALLOW"),
        "{why}"
    );
    // A renamed repository's redirect on the provider itself is followed.
    let moved = RepositoryAccess {
        name: "moved".into(),
        ..repo(&server, GitProvider::HostA)
    };
    let hooks = client().list_hooks(&moved).await.unwrap();
    assert_eq!(hooks[0].id, "3");
}
