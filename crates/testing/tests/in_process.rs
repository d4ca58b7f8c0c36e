//! A server inside the test process: started from a fixture, controlled over HTTP, reset
//! between tests, and stopped when dropped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_testing::Capstan;
use serde_json::{json, Value};

async fn get(capstan: &Capstan, token: &str, path: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .get(format!("{}{path}", capstan.base_url()))
        .header("Authorization", format!("Token {token}"))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_in_the_test_process_serves_its_fixture_and_stops_on_drop() {
    let capstan = Capstan::builder()
        .fixture("organizations:\n  - name: Acme\n    tokens: [{name: ci, value: cap_in_process_token}]\n    projects: [{name: shop}]\n")
        .start()
        .await
        .unwrap();
    assert_eq!(capstan.admin_token(), "cap_in_process_token");
    let (status, orgs) = get(&capstan, capstan.admin_token(), "/organization").await;
    assert_eq!(status, 200);
    let org = orgs["results"][0]["id"].as_str().unwrap().to_string();
    let (_, projects) = get(
        &capstan,
        capstan.admin_token(),
        &format!("/organization/{org}/project"),
    )
    .await;
    assert_eq!(projects["results"][0]["name"], "shop");

    // A fault, then a reset back to the fixture, which also clears the fault.
    let (status, _) = capstan
        .control(
            reqwest::Method::POST,
            "/_capstan/faults",
            Some(json!({"path": "/organization", "status": 503})),
        )
        .await
        .unwrap();
    assert_eq!(status, 201);
    assert_eq!(
        get(&capstan, capstan.admin_token(), "/organization")
            .await
            .0,
        503
    );
    capstan.reset_to_fixture().await.unwrap();
    let (status, orgs) = get(&capstan, capstan.admin_token(), "/organization").await;
    assert_eq!(status, 200);
    assert_eq!(orgs["results"].as_array().unwrap().len(), 1);

    let base = capstan.base_url().to_string();
    drop(capstan);
    assert!(
        reqwest::Client::new()
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_err(),
        "the server stopped with its handle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_of_one_process_keep_their_own_worlds() {
    let (a, b) = (
        Capstan::start().await.unwrap(),
        Capstan::start().await.unwrap(),
    );
    assert_ne!(a.base_url(), b.base_url());
    assert_eq!(get(&a, a.admin_token(), "/organization").await.0, 200);
    assert_eq!(get(&b, a.admin_token(), "/organization").await.0, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_fixture_fails_the_start_with_its_reason() {
    let refused = Capstan::builder()
        .fixture("organizations:\n  - name: A\n    projcts: []\n")
        .start()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("organizations[0].projcts"), "{refused}");
}
