//! Black-box tests of the built `capstan` binary: its CLI, its settings, and the API it serves,
//! across a restart, on SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use harness::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

/// Creates the whole hierarchy through the API, restarts the server, and finds it all again.
async fn hierarchy_survives_a_restart(database: &str) {
    let dir = TempDir::new();
    let token = create_token(&dir, database, &["--organization-name", "Acme"]);
    let server = Server::start(&dir, database).await;
    let client = Client {
        http: reqwest::Client::new(),
        base: format!("{}/v1", server.base),
        token,
    };
    let orgs = client.get("/organization").await;
    let org = orgs["results"][0]["id"].as_str().unwrap().to_string();
    client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await;
    let project = client
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "shop"}),
        )
        .await;
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "prod"}),
        )
        .await;
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "hub", "kind": "DOCKER_HUB", "config": {"password": "pw"}}),
        )
        .await;
    let container = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1.27"}),
        )
        .await;
    let before: Vec<Value> = futures_collect(
        &client,
        &[
            format!("/project/{project}"),
            format!("/environment/{env}"),
            format!("/container/{container}"),
            format!("/organization/{org}/containerRegistry/{registry}"),
            format!("/environment/{env}/container"),
        ],
    )
    .await;
    server.stop();

    let server = Server::start(&dir, database).await;
    let v1 = Client {
        http: reqwest::Client::new(),
        base: format!("{}/v1", server.base),
        token: client.token.clone(),
    };
    let root = Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token: client.token.clone(),
    };
    let paths = [
        format!("/project/{project}"),
        format!("/environment/{env}"),
        format!("/container/{container}"),
        format!("/organization/{org}/containerRegistry/{registry}"),
        format!("/environment/{env}/container"),
    ];
    let after_v1 = futures_collect(&v1, &paths).await;
    let after_root = futures_collect(&root, &paths).await;
    assert_eq!(before, after_v1);
    assert_eq!(after_v1, after_root);
    server.stop();

    // A further token for the same organization works against the same data.
    let second = create_token(
        &dir,
        database,
        &[
            "--organization-id",
            &org,
            "--role",
            "VIEWER",
            "--name",
            "ro",
        ],
    );
    let server = Server::start(&dir, database).await;
    let viewer = Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token: second,
    };
    viewer.get(&format!("/project/{project}")).await;
    let (status, _) = viewer
        .call(
            reqwest::Method::DELETE,
            &format!("/project/{project}"),
            None,
        )
        .await;
    assert_eq!(status, 403);
    server.stop();
}

async fn futures_collect(client: &Client, paths: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for p in paths {
        out.push(client.get(p).await);
    }
    out
}

#[tokio::test]
async fn sqlite_hierarchy_survives_a_restart() {
    let dir = TempDir::new();
    let path = dir.0.join("data.db");
    hierarchy_survives_a_restart(&format!("sqlite://{}", path.display())).await;
}

#[tokio::test]
async fn postgres_hierarchy_survives_a_restart() {
    let Some(url) = storage::testing::postgres_database().await else {
        return;
    };
    let storage::DatabaseUrl::Postgres(url) = url else {
        unreachable!()
    };
    hierarchy_survives_a_restart(&url).await;
}

#[tokio::test]
async fn the_default_database_is_a_sqlite_file_in_the_working_directory() {
    let dir = TempDir::new();
    let out = Command::new(BIN)
        .args(["token", "create", "--organization-name", "Acme"])
        .current_dir(&dir.0)
        .env_remove("CAPSTAN_DATABASE_URL")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.0.join("capstan.db").is_file());
}

#[test]
fn a_bad_setting_stops_start_up_with_one_line() {
    let dir = TempDir::new();
    for (var, value) in [
        ("CAPSTAN_LISTEN", "not-an-address"),
        ("CAPSTAN_DATABASE_URL", "mysql://db"),
        ("CAPSTAN_RATE_LIMIT_PER_HOUR", "many"),
        ("CAPSTAN_ENGINE", "kubernetes"),
        ("CAPSTAN_SECRET_KEY", "short"),
        ("CAPSTAN_REQUEST_TIMEOUT_SECS", "0"),
        ("CAPSTAN_CORS_ORIGINS", "*"),
        ("CAPSTAN_JWT_PUBLIC_KEY_FILE", "Cargo.toml"),
        ("CAPSTAN_JWT_HS256_SECRET", "too-short"),
        ("CAPSTAN_PUBLIC_URL", "capstan.example"),
    ] {
        let out = Command::new(BIN)
            .arg("serve")
            .current_dir(&dir.0)
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim().lines().count(), 1, "{var}: {stderr}");
        assert!(stderr.contains(var), "{stderr}");
        assert!(!stderr.contains("panicked"));
    }
    // A flag wins over its variable.
    let out = Command::new(BIN)
        .args(["migrate", "--database-url", "sqlite://flag.db"])
        .current_dir(&dir.0)
        .env("CAPSTAN_DATABASE_URL", "mysql://bad")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.0.join("flag.db").is_file());
}

#[test]
fn token_create_rejects_bad_input_cleanly() {
    let dir = TempDir::new();
    let db = format!("sqlite://{}", dir.0.join("t.db").display());
    for args in [
        vec![
            "token",
            "create",
            "--organization-name",
            "A",
            "--role",
            "OWNER",
        ],
        vec!["token", "create", "--organization-id", "nope"],
        vec![
            "token",
            "create",
            "--organization-id",
            "7e57ca95-0000-4000-8000-000000000009",
        ],
    ] {
        let out = capstan(&dir, &db, &args);
        assert!(!out.status.success(), "{args:?}");
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let out = capstan(&dir, &db, &["token", "create"]);
    assert!(!out.status.success(), "an organization must be named");
}

/// After secrets are written, neither the log, nor the database files, nor any response hold them.
#[tokio::test]
async fn secrets_stay_out_of_logs_files_and_responses() {
    let dir = TempDir::new();
    let db_path = dir.0.join("secrets.db");
    let database = format!("sqlite://{}", db_path.display());
    let token = create_token(&dir, &database, &["--organization-name", "Acme"]);
    let log = dir.0.join("server.log");
    let server = Server::start_logging(&dir, &database, Some(&log)).await;
    let client = Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token: token.clone(),
    };
    let (org, env) = hierarchy(&client).await;
    let secrets = [
        "v4r-s3cr3t-value",
        "gh-t0k3n-value",
        "cr3ds-s3cr3t-value",
        "r3g-p4ssw0rd-value",
        "n3w-s3cr3t-value",
    ];
    let mut responses = String::new();
    let post = |path: String, body: Value| {
        let client = &client;
        async move {
            let res = client
                .http
                .post(format!("{}{path}", client.base))
                .header("Authorization", format!("Token {}", client.token))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(res.status().is_success(), "{path}");
            res.text().await.unwrap()
        }
    };
    let created = post(
        format!("/environment/{env}/secret"),
        json!({"key": "K", "value": secrets[0]}),
    )
    .await;
    responses.push_str(&created);
    responses.push_str(
        &post(
            format!("/organization/{org}/gitToken"),
            json!({"name": "g", "type": "HOSTA", "token": secrets[1]}),
        )
        .await,
    );
    responses.push_str(
        &post(
            format!("/organization/{org}/cloudA/credentials"),
            json!({"name": "a", "access_key_id": "AK", "secret_access_key": secrets[2]}),
        )
        .await,
    );
    responses.push_str(
        &post(
            format!("/organization/{org}/containerRegistry"),
            json!({"name": "r", "kind": "DOCKER_HUB", "config": {"password": secrets[3]}}),
        )
        .await,
    );
    let id = serde_json::from_str::<Value>(&created).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, edited) = client
        .call(
            reqwest::Method::PUT,
            &format!("/variable/{id}"),
            Some(json!({"key": "K", "value": secrets[4]})),
        )
        .await;
    assert_eq!(status, 200);
    responses.push_str(&edited.to_string());
    // A request that fails validation with a secret in it does not echo it either.
    let (status, bad) = client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{env}/secret"),
            Some(json!({"key": "bad key", "value": secrets[0]})),
        )
        .await;
    assert_eq!(status, 400);
    responses.push_str(&bad.to_string());
    // A token created through the API, with an Idempotency-Key: its one showing is kept (for
    // a replay) only encrypted.
    let issued: Value = client
        .http
        .post(format!("{}/organization/{org}/apiToken", client.base))
        .header("Authorization", format!("Token {}", client.token))
        .header("Idempotency-Key", "issue-once")
        .json(&json!({"name": "ci", "role_id": "7e57ca95-0000-4000-8000-000000000002"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let issued = issued["token"]
        .as_str()
        .expect("the token is shown once")
        .to_string();
    for path in [
        format!("/environment/{env}/secret"),
        format!("/organization/{org}/gitToken"),
        format!("/organization/{org}/cloudA/credentials"),
        format!("/organization/{org}/containerRegistry"),
    ] {
        responses.push_str(&client.get(&path).await.to_string());
    }
    server.stop();

    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.contains("POST"),
        "the log was written at debug level"
    );
    let mut at_rest = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        if let Ok(bytes) = std::fs::read(format!("{}{suffix}", db_path.display())) {
            at_rest.extend(bytes);
        }
    }
    let at_rest = String::from_utf8_lossy(&at_rest);
    assert!(!log_text.contains(&issued), "an issued token is in the log");
    assert!(
        !at_rest.contains(&issued),
        "an issued token is in the database files"
    );
    for secret in secrets.iter().copied().chain([token.as_str()]) {
        assert!(!log_text.contains(secret), "{secret} is in the log");
        assert!(
            !at_rest.contains(secret),
            "{secret} is in the database files"
        );
        assert!(!responses.contains(secret), "{secret} is in a response");
    }
}

/// Polls a status until nothing waits or runs for the service.
/// Kills the server while an application builds, starts it again, and finds the build ended in
/// BUILD_ERROR with a reason and the deployment queued behind it done: nothing stuck, nothing lost.
async fn a_crash_mid_deployment_leaves_nothing_stuck(database: &str) {
    let dir = TempDir::new();
    let slow = [("CAPSTAN_ENGINE_STEP_MS", "1500")];
    let server = Server::start_with(&dir, database, None, &slow).await;
    let (mut client, env) = environment(&dir, database, &server).await;
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await;
    let db = client
        .create(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await;
    let (status, body) = client
        .call(
            reqwest::Method::POST,
            &format!("/application/{app}/deploy"),
            Some(json!({"git_commit_id": "abc123"})),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/database/{db}/deploy"),
            None,
        )
        .await;
    assert_eq!(status, 202);
    let status = format!("/application/{app}/status");
    eventually(
        Duration::from_secs(20),
        || "never built".to_string(),
        async || (client.get(&status).await["state"] == "BUILDING").then_some(()),
    )
    .await;
    server.crash();

    let server =
        Server::start_with(&dir, database, None, &[("CAPSTAN_ENGINE_STEP_MS", "50")]).await;
    client.base = server.base.clone();
    // The dead process's lease (10 s) must run out first; the reaper looks once a lease.
    let app_status = settle(
        &client,
        &format!("/application/{app}/status"),
        Duration::from_secs(40),
    )
    .await;
    assert_eq!(app_status["state"], "BUILD_ERROR", "{app_status}");
    assert_eq!(app_status["status_details"]["status"], "ERROR");
    let history = client
        .get(&format!("/application/{app}/deploymentHistory"))
        .await;
    let reason = history["results"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("stopped before it finished"), "{history}");
    let db_status = settle(
        &client,
        &format!("/database/{db}/status"),
        Duration::from_secs(40),
    )
    .await;
    assert_eq!(
        db_status["state"], "DEPLOYED",
        "the queued request is not lost"
    );
    server.stop();
}

#[tokio::test]
async fn sqlite_a_crash_mid_deployment_leaves_nothing_stuck() {
    let dir = TempDir::new();
    let path = dir.0.join("crash.db");
    a_crash_mid_deployment_leaves_nothing_stuck(&format!("sqlite://{}", path.display())).await;
}

#[tokio::test]
async fn postgres_a_crash_mid_deployment_leaves_nothing_stuck() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_crash_mid_deployment_leaves_nothing_stuck(&url).await;
}

/// Two server processes on one PostgreSQL database share the queue: both run requests, each
/// request runs once, and one environment runs one request at a time.
#[tokio::test]
async fn two_processes_share_one_queue_without_running_a_request_twice() {
    let Some(url) = storage::testing::postgres_database().await else {
        return;
    };
    let storage::DatabaseUrl::Postgres(raw) = &url else {
        unreachable!()
    };
    let dir = TempDir::new();
    let step = [("CAPSTAN_ENGINE_STEP_MS", "100")];
    let one = Server::start_with(&dir, raw, None, &step).await;
    let two = Server::start_with(&dir, raw, None, &step).await;
    let (first, env) = environment(&dir, raw, &one).await;
    let second = Client {
        http: reqwest::Client::new(),
        base: two.base.clone(),
        token: first.token.clone(),
    };
    let services = databases(&first, &env, 6, 3).await;
    for (i, id) in services.iter().enumerate() {
        let client = if i % 2 == 0 { &first } else { &second };
        let (status, body) = client
            .call(
                reqwest::Method::POST,
                &format!("/database/{id}/deploy"),
                None,
            )
            .await;
        assert_eq!(status, 202, "{body}");
    }
    for id in &services {
        let status = settle(
            &first,
            &format!("/database/{id}/status"),
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(status["state"], "DEPLOYED", "{status}");
        let history = second
            .get(&format!("/database/{id}/deploymentHistory"))
            .await;
        assert_eq!(history["results"].as_array().unwrap().len(), 1);
    }
    let db = storage::open(&url, 2, &base64_key()).await.unwrap();
    let claimers = storage::testing::raw_column(&db, "deployment_requests", "claimed_by").await;
    let steps = storage::testing::raw_column(&db, "deployment_requests", "steps").await;
    assert_eq!(claimers.len(), services.len());
    let processes: std::collections::HashSet<String> = claimers
        .iter()
        .map(|c| c.as_deref().unwrap().split('-').next().unwrap().to_string())
        .collect();
    assert_eq!(
        processes.len(),
        2,
        "both processes ran requests: {claimers:?}"
    );
    for s in steps {
        let s: Value = serde_json::from_str(&s.unwrap()).unwrap();
        assert_eq!(
            s.as_array().unwrap().len(),
            1,
            "each request ran its one step once: {s}"
        );
    }
    one.stop();
    two.stop();
}

fn base64_key() -> [u8; 32] {
    [7u8; 32]
}

/// With CAPSTAN_RATE_LIMIT_PER_HOUR=5 and two processes on one PostgreSQL database, a token's
/// sixth request is refused whichever process gets it; another token is unaffected.
#[tokio::test]
async fn two_processes_share_one_rate_limit() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    let dir = TempDir::new();
    let five = [("CAPSTAN_RATE_LIMIT_PER_HOUR", "5")];
    let one = Server::start_with(&dir, &url, None, &five).await;
    let two = Server::start_with(&dir, &url, None, &five).await;
    let token = create_token(&dir, &url, &["--organization-name", "Limited"]);
    let other = create_token(&dir, &url, &["--organization-name", "Other"]);
    let http = reqwest::Client::new();
    let get = |base: &str, token: &str| {
        http.get(format!("{base}/organization"))
            .header("Authorization", format!("Token {token}"))
            .send()
    };
    for (i, base) in [&one.base, &two.base, &one.base, &two.base, &one.base]
        .into_iter()
        .enumerate()
    {
        let r = get(base, &token).await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(
            r.headers()["x-ratelimit-remaining"],
            (4 - i).to_string().as_str()
        );
    }
    let refused = get(&two.base, &token).await.unwrap();
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["status"], 429);
    assert_eq!(get(&one.base, &token).await.unwrap().status().as_u16(), 429);
    assert_eq!(get(&two.base, &other).await.unwrap().status().as_u16(), 200);
    one.stop();
    two.stop();
}

/// Two processes on one PostgreSQL database both remember tokens they have seen; a token
/// deleted through one is refused by the other on its very next request.
#[tokio::test]
async fn a_token_deleted_on_one_process_is_refused_by_the_other_at_once() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    let dir = TempDir::new();
    let one = Server::start(&dir, &url).await;
    let two = Server::start(&dir, &url).await;
    let admin = create_token(&dir, &url, &["--organization-name", "Revoking"]);
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, base: &str, path: &str, token: &str| {
        http.request(method, format!("{base}{path}"))
            .header("Authorization", format!("Token {token}"))
            .send()
    };
    let orgs: Value = call(reqwest::Method::GET, &one.base, "/organization", &admin)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let org = orgs["results"][0]["id"].as_str().unwrap().to_string();
    for round in 0..10 {
        let name = format!("victim{round}");
        let victim = create_token(&dir, &url, &["--organization-id", &org, "--name", &name]);
        // Seen (and remembered) by both processes.
        for base in [&one.base, &two.base, &one.base, &two.base] {
            let r = call(reqwest::Method::GET, base, "/organization", &victim).await;
            assert_eq!(r.unwrap().status().as_u16(), 200);
        }
        let tokens: Value = call(
            reqwest::Method::GET,
            &one.base,
            &format!("/organization/{org}/apiToken"),
            &admin,
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        let id = tokens["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name.as_str())
            .and_then(|t| t["id"].as_str())
            .unwrap()
            .to_string();
        let deleted = call(
            reqwest::Method::DELETE,
            &one.base,
            &format!("/organization/{org}/apiToken/{id}"),
            &admin,
        )
        .await
        .unwrap();
        assert_eq!(deleted.status().as_u16(), 204);
        for base in [&two.base, &one.base] {
            let r = call(reqwest::Method::GET, base, "/organization", &victim).await;
            assert_eq!(r.unwrap().status().as_u16(), 401, "round {round}");
        }
    }
    one.stop();
    two.stop();
}

/// A JWT user creates an organization over HTTP; `capstan member add` gives another user a role
/// in it, which that user's next request carries.
#[tokio::test]
async fn users_sign_in_with_jwts_and_members_are_added_from_the_command_line() {
    use jsonwebtoken::{encode, EncodingKey, Header};
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("jwt.db").display());
    let secret = "a-shared-secret-of-at-least-32-bytes!!";
    let server = Server::start_with(
        &dir,
        &database,
        None,
        &[("CAPSTAN_JWT_HS256_SECRET", secret)],
    )
    .await;
    let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 600;
    let jwt = |sub: &str| {
        encode(
            &Header::default(),
            &json!({"sub": sub, "exp": exp}),
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    };
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String, who: String, body: Option<Value>| {
        let mut req = http
            .request(method, format!("{}{path}", server.base))
            .header("Authorization", format!("Bearer {who}"));
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send()
    };
    let created = call(
        reqwest::Method::POST,
        "/organization".into(),
        jwt("ada"),
        Some(json!({"name": "Ada's"})),
    )
    .await
    .unwrap();
    assert_eq!(created.status().as_u16(), 201);
    let org = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let bob_reads = || {
        call(
            reqwest::Method::GET,
            format!("/organization/{org}/project"),
            jwt("bob"),
            None,
        )
    };
    assert_eq!(bob_reads().await.unwrap().status().as_u16(), 403);
    let out = capstan(
        &dir,
        &database,
        &[
            "member",
            "add",
            "--organization-id",
            &org,
            "--user-id",
            "bob",
            "--role",
            "VIEWER",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(bob_reads().await.unwrap().status().as_u16(), 200);
    let bad = capstan(
        &dir,
        &database,
        &[
            "member",
            "add",
            "--organization-id",
            "nope",
            "--user-id",
            "x",
        ],
    );
    assert!(!bad.status.success());
    assert_eq!(
        String::from_utf8_lossy(&bad.stderr).trim().lines().count(),
        1
    );
    server.stop();
}

/// Two processes behind one public address: a hook synced through one verifies deliveries
/// received by the other, and one delivery sent to both deploys once.
#[tokio::test]
async fn a_webhook_synced_on_one_instance_deploys_once_through_either() {
    use hmac::{Hmac, Mac};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let Some(url) = storage::testing::postgres_database().await else {
        return;
    };
    let storage::DatabaseUrl::Postgres(raw) = &url else {
        unreachable!()
    };
    let dir = TempDir::new();
    // The fake provider listens on loopback: named, as a self-hosted provider would be.
    let settings = [
        ("CAPSTAN_ENGINE_STEP_MS", "20"),
        ("CAPSTAN_PUBLIC_URL", "https://capstan.example/"),
        ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
    ];
    let log = dir.0.join("one.log");
    let one = Server::start_with(&dir, raw, Some(&log), &settings).await;
    let two = Server::start_with(&dir, raw, None, &settings).await;
    let (first, env) = environment(&dir, raw, &one).await;
    let org = first.get("/organization").await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let fake = MockServer::start().await;
    let token = first
        .create(
            &format!("/organization/{org}/gitToken"),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_blackbox_value", "git_api_url": fake.uri()}),
        )
        .await;
    let app = first
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "auto_deploy": true,
                   "git_repository": {"url": "https://github.com/acme/api", "branch": "main", "git_token_id": token}}),
        )
        .await;

    Mock::given(method("GET"))
        .and(path("/repos/acme/api/hooks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .up_to_n_times(1)
        .mount(&fake)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/acme/api/hooks"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1})))
        .mount(&fake)
        .await;
    let (status, _) = first
        .call(
            reqwest::Method::POST,
            &format!("/service/{app}/gitWebhook/sync"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200);
    let requests = fake.received_requests().await.unwrap();
    let created: Value = serde_json::from_slice(
        &requests
            .iter()
            .find(|r| r.method.as_str() == "POST")
            .unwrap()
            .body,
    )
    .unwrap();
    let receiver = created["config"]["url"].as_str().unwrap().to_string();
    assert_eq!(
        receiver,
        format!("https://capstan.example/git/webhook/{app}")
    );
    let secret = created["config"]["secret"].as_str().unwrap().to_string();

    // The other instance sees the same hook as ACTIVE.
    Mock::given(method("GET"))
        .and(path("/repos/acme/api/hooks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!([{"id": 1, "config": {"url": receiver}, "events": created["events"]}]),
        ))
        .mount(&fake)
        .await;
    let second = Client {
        http: reqwest::Client::new(),
        base: two.base.clone(),
        token: first.token.clone(),
    };
    let status = second
        .get(&format!("/service/{app}/gitWebhookStatus"))
        .await;
    assert_eq!(status, json!({"status": "ACTIVE", "provider": "HOSTA"}));

    let body = serde_json::to_vec(&json!({"ref": "refs/heads/main", "after": "feed42"})).unwrap();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&body);
    let signature: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let deliver = |base: String| {
        let body = body.clone();
        let signature = signature.clone();
        let app = app.clone();
        async move {
            reqwest::Client::new()
                .post(format!("{base}/git/webhook/{app}"))
                .header("Content-Type", "application/json")
                .header("X-GitHub-Event", "push")
                .header("X-GitHub-Delivery", "delivery-7")
                .header("X-Hub-Signature-256", format!("sha256={signature}"))
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let (a, b) = tokio::join!(deliver(one.base.clone()), deliver(two.base.clone()));
    let mut answers = [a, b];
    answers.sort_unstable();
    assert_eq!(
        answers,
        [200, 202],
        "one instance deploys, the other ignores"
    );

    let status = settle(
        &second,
        &format!("/application/{app}/status"),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(status["state"], "DEPLOYED", "{status}");
    let history = first
        .get(&format!("/application/{app}/deploymentHistory"))
        .await;
    assert_eq!(history["results"].as_array().unwrap().len(), 1, "{history}");
    let shown = second.get(&format!("/application/{app}")).await;
    assert_eq!(shown["git_repository"]["deployed_commit_id"], "feed42");

    one.stop();
    two.stop();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.is_empty());
    assert!(!logged.contains("ghp_blackbox_value"), "token value logged");
    assert!(!logged.contains(&secret), "signing secret logged");
}

/// The binary checks custom domains with the system's resolver: names under `localhost`
/// resolve to the loopback address and names under `invalid` do not exist (RFC 6761), so this
/// needs no network.
#[tokio::test]
async fn custom_domains_are_resolved_for_real() {
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("domains.db").display());
    let server = Server::start_with(
        &dir,
        &database,
        None,
        &[("CAPSTAN_CUSTOM_DOMAIN_TARGET", "127.0.0.1")],
    )
    .await;
    let (client, env) = environment(&dir, &database, &server).await;
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "web", "git_repository": {"url": "https://github.com/acme/web"}}),
        )
        .await;
    for (domain, state) in [
        ("shop.localhost", "POINTS_AT_TARGET"),
        ("shop.invalid", "NOT_FOUND"),
    ] {
        let path = format!("/application/{app}/customDomain");
        let id = client
            .create(
                &path,
                json!({"domain": domain, "generate_certificate": true}),
            )
            .await;
        let status = client.get(&format!("{path}/{id}/status")).await;
        assert_eq!(status["dns_check"]["state"], state, "{domain}: {status}");
        assert_eq!(status["validation_domain"], "127.0.0.1");
    }
    server.stop();
}

/// The sample of `series` (`name{labels}`) in a Prometheus text answer; 0 when absent.
async fn metric(server: &Server, series: &str) -> f64 {
    let text = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// A deployment asked for through one instance is waited for (`?wait=`) through another, and
/// the instances' metrics count it once between them.
async fn a_client_waits_on_one_instance_for_a_deployment(database: &str, instances: usize) {
    let dir = TempDir::new();
    let step = [("CAPSTAN_ENGINE_STEP_MS", "100")];
    let mut servers = Vec::new();
    for _ in 0..instances {
        servers.push(Server::start_with(&dir, database, None, &step).await);
    }
    let (client, env) = environment(&dir, database, &servers[0]).await;
    let org = hierarchy_org(&client).await;
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "hub", "kind": "DOCKER_HUB", "config": {}}),
        )
        .await;
    let container = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await;
    let (status, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/container/{container}/deploy"),
            None,
        )
        .await;
    assert_eq!(status, 202);
    let waiter = Client {
        http: reqwest::Client::new(),
        base: servers[instances - 1].base.clone(),
        token: client.token.clone(),
    };
    let settled = waiter
        .get(&format!("/container/{container}/status?wait=30"))
        .await;
    assert_eq!(settled["deployment_requests_count"], 0, "{settled}");
    assert_eq!(settled["state"], "DEPLOYED");
    let env_status = waiter
        .get(&format!("/environment/{env}/statuses?wait=30"))
        .await;
    assert_eq!(env_status["environment"]["state"], "DEPLOYED");

    let series = "capstan_deployments_finished_total{action=\"DEPLOY\",status=\"SUCCESS\"}";
    let mut finished = 0.0;
    for server in &servers {
        finished += metric(server, series).await;
        assert_eq!(
            metric(server, "capstan_deployment_queue_depth{status=\"QUEUED\"}").await,
            0.0
        );
    }
    assert_eq!(
        finished, 1.0,
        "one deployment, counted by the instance that ran it"
    );
    for server in servers {
        server.stop();
    }
}

#[tokio::test]
async fn sqlite_a_client_waits_for_a_deployment() {
    let dir = TempDir::new();
    let path = dir.0.join("data.db");
    a_client_waits_on_one_instance_for_a_deployment(&format!("sqlite://{}", path.display()), 1)
        .await;
}

#[tokio::test]
async fn postgres_a_client_waits_on_one_instance_for_a_deployment_another_runs() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_client_waits_on_one_instance_for_a_deployment(&url, 2).await;
}

/// Settings for servers that send webhooks to a receiver on this machine, quickly.
const WEBHOOKS: [(&str, &str); 3] = [
    ("CAPSTAN_ENGINE_STEP_MS", "50"),
    ("CAPSTAN_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("CAPSTAN_WEBHOOK_RETRY_BASE_MS", "200"),
];

fn hook(url: &str) -> Value {
    json!({
        "kind": "STANDARD",
        "target_url": url,
        "target_secret": "blackbox-secret",
        "events": ["DEPLOYMENT_STARTED", "DEPLOYMENT_SUCCESSFUL"]
    })
}

/// The bodies `server` received that `keep` keeps, once `enough` says so (at most 30 s).
async fn deliveries(
    server: &wiremock::MockServer,
    keep: impl Fn(&wiremock::Request) -> bool,
    enough: impl Fn(&[Value]) -> bool,
) -> Vec<(String, Value)> {
    let seen = std::cell::RefCell::new(Vec::new());
    eventually(
        Duration::from_secs(30),
        || format!("received: {:#?}", seen.borrow()),
        async || {
            let got: Vec<(String, Value)> = server
                .received_requests()
                .await
                .unwrap()
                .iter()
                .filter(|r| keep(r))
                .map(|r| {
                    (
                        r.headers["webhook-id"].to_str().unwrap().to_string(),
                        serde_json::from_slice(&r.body).unwrap(),
                    )
                })
                .collect();
            let bodies: Vec<Value> = got.iter().map(|(_, b)| b.clone()).collect();
            let done = enough(&bodies);
            *seen.borrow_mut() = bodies;
            done.then_some(got)
        },
    )
    .await
}

fn has(bodies: &[Value], kind: &str, service: &str) -> bool {
    bodies
        .iter()
        .any(|b| b["type"] == kind && b["service_id"] == service)
}

/// The deployment's events are committed with it: a server killed while its deliveries still
/// fail sends them once it is back, with the same delivery ids.
async fn webhook_deliveries_survive_a_kill_9(database: &str) {
    let dir = TempDir::new();
    let receiver = wiremock::MockServer::start().await;
    // Down at first: nothing is mounted, every attempt gets a 404.
    let server = Server::start_with(&dir, database, None, &WEBHOOKS).await;
    let (client, env) = environment(&dir, database, &server).await;
    let org = hierarchy_org(&client).await;
    client
        .create(
            &format!("/organization/{org}/webhook"),
            hook(&receiver.uri()),
        )
        .await;
    let container = container_in(&client, &org, &env, "web").await;
    let (status, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/container/{container}/deploy"),
            None,
        )
        .await;
    assert_eq!(status, 202);
    settle(
        &client,
        &format!("/container/{container}/status"),
        Duration::from_secs(30),
    )
    .await;
    let failed = deliveries(
        &receiver,
        |_| true,
        |b| has(b, "DEPLOYMENT_SUCCESSFUL", &container),
    )
    .await;
    server.crash();
    let restarted_at = receiver.received_requests().await.unwrap().len();
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let server = Server::start_with(&dir, database, None, &WEBHOOKS).await;
    let after = std::sync::atomic::AtomicUsize::new(0);
    let delivered = deliveries(
        &receiver,
        |_| after.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= restarted_at,
        |b| has(b, "DEPLOYMENT_STARTED", &container) && has(b, "DEPLOYMENT_SUCCESSFUL", &container),
    )
    .await;
    let before: std::collections::HashSet<&str> =
        failed.iter().map(|(id, _)| id.as_str()).collect();
    for (id, body) in &delivered {
        assert!(
            before.contains(id.as_str()),
            "{id} was not attempted before: {body}"
        );
    }
    // The audit log, read through the new process, tells of the deployment too.
    let client = Client {
        base: server.base.clone(),
        ..client
    };
    let log = client
        .get(&format!("/organization/{org}/events?pageSize=100"))
        .await;
    assert!(
        log["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event_type"] == "DEPLOYED" && e["target_id"] == container.as_str()),
        "{log}"
    );
    server.stop();
}

#[tokio::test]
async fn sqlite_webhook_deliveries_survive_a_kill_9() {
    let dir = TempDir::new();
    let path = dir.0.join("data.db");
    webhook_deliveries_survive_a_kill_9(&format!("sqlite://{}", path.display())).await;
}

#[tokio::test]
async fn postgres_webhook_deliveries_survive_a_kill_9() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    webhook_deliveries_survive_a_kill_9(&url).await;
}

/// The events an SSE body has carried so far, as (id, data).
fn stream_events(text: &str) -> Vec<(i64, Value)> {
    text.split("\n\n")
        .filter(|m| m.contains("data: "))
        .filter_map(|m| {
            let id = m
                .lines()
                .find_map(|l| l.strip_prefix("id: "))?
                .parse()
                .ok()?;
            let data = m.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((id, serde_json::from_str(data).ok()?))
        })
        .collect()
}

/// Two instances share one PostgreSQL database: each event is delivered once between them,
/// and a client streaming from one sees what the other did.
#[tokio::test]
async fn postgres_two_instances_deliver_each_event_once_and_stream_each_others_events() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    let dir = TempDir::new();
    let receiver = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&receiver)
        .await;
    let a = Server::start_with(&dir, &url, None, &WEBHOOKS).await;
    let b = Server::start_with(&dir, &url, None, &WEBHOOKS).await;
    let (client, _) = environment(&dir, &url, &a).await;
    let org = hierarchy_org(&client).await;
    let on_b = Client {
        http: reqwest::Client::new(),
        base: b.base.clone(),
        token: client.token.clone(),
    };
    client
        .create(
            &format!("/organization/{org}/webhook"),
            hook(&receiver.uri()),
        )
        .await;
    let mut stream = on_b
        .http
        .get(format!("{}/organization/{org}/events/stream", b.base))
        .header("Authorization", format!("Token {}", client.token))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    // Four environments, one container each, deployed half through each instance.
    let project = client
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "fleet"}),
        )
        .await;
    let mut containers = Vec::new();
    for i in 0..4 {
        let env = client
            .create(
                &format!("/project/{project}/environment"),
                json!({"name": format!("e{i}")}),
            )
            .await;
        let container = container_in(&client, &org, &env, &format!("web{i}")).await;
        let via = if i % 2 == 0 { &client } else { &on_b };
        let (status, _) = via
            .call(
                reqwest::Method::POST,
                &format!("/container/{container}/deploy"),
                None,
            )
            .await;
        assert_eq!(status, 202);
        containers.push(container);
    }
    for c in &containers {
        settle(
            &client,
            &format!("/container/{c}/status"),
            Duration::from_secs(30),
        )
        .await;
    }
    let got = deliveries(
        &receiver,
        |_| true,
        |b| {
            containers
                .iter()
                .all(|c| has(b, "DEPLOYMENT_STARTED", c) && has(b, "DEPLOYMENT_SUCCESSFUL", c))
        },
    )
    .await;
    // Time for a second sender to repeat anything it should not have.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let all = deliveries(&receiver, |_| true, |_| true).await;
    assert_eq!(all.len(), got.len(), "nothing more came");
    assert_eq!(all.len(), 8, "{all:#?}");
    let ids: std::collections::HashSet<&str> = all.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 8, "each delivery once");
    // Instance B's stream carried every deployment, whichever instance ran it, in order.
    let text = std::cell::RefCell::new(String::new());
    let events = eventually(
        Duration::from_secs(30),
        || format!("the stream carried: {}", text.borrow()),
        async || {
            let events = stream_events(&text.borrow());
            let done = containers.iter().all(|c| {
                events
                    .iter()
                    .any(|(_, e)| e["event_type"] == "DEPLOYED" && e["service_id"] == c.as_str())
            });
            if done {
                return Some(events);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk())
                .await
                .expect("a chunk in time")
                .unwrap()
                .expect("the stream stays open");
            text.borrow_mut()
                .push_str(std::str::from_utf8(&chunk).unwrap());
            None
        },
    )
    .await;
    let positions: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    drop(stream);
    a.stop();
    b.stop();
}

/// An open event stream does not hold up a graceful stop.
#[tokio::test]
async fn an_open_event_stream_ends_when_the_server_stops() {
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("data.db").display());
    let server = Server::start(&dir, &database).await;
    let (client, _) = environment(&dir, &database, &server).await;
    let org = hierarchy_org(&client).await;
    let mut stream = client
        .http
        .get(format!("{}/organization/{org}/events/stream", server.base))
        .header("Authorization", format!("Token {}", client.token))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = stream.chunk().await.unwrap().unwrap();
    assert!(std::str::from_utf8(&first)
        .unwrap()
        .starts_with(": connected"));
    let asked = Instant::now();
    server.stop();
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the stop waited {:?} on the stream",
        asked.elapsed()
    );
    // The stream ended cleanly: whatever was left, then its end.
    while let Ok(Some(_)) = stream.chunk().await {}
}

/// A client reuses a connection it left idle for longer than the servers of some frameworks keep
/// one (actix-web's default is 5 s): the server must not close it first, or a request sent at the
/// moment it does fails half sent (seen as the soak's flake: an incomplete message on a POST).
#[tokio::test]
async fn an_idle_connection_is_kept_longer_than_clients_keep_theirs() {
    use tokio::io::AsyncWriteExt;
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("data.db").display());
    let server = Server::start(&dir, &database).await;
    let address = server.base.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n");
    for round in 0..2 {
        if round == 1 {
            tokio::time::sleep(Duration::from_secs(7)).await;
        }
        socket.write_all(request.as_bytes()).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), one_answer(&mut socket))
            .await
            .expect("an answer within 10 s");
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "round {round}: the server answered {answer:?} on the reused connection"
        );
    }
}

/// One whole HTTP/1.1 answer with a `content-length` (what is read so far if the peer closes).
async fn one_answer(socket: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut read = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&read).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")?
                        .trim()
                        .parse()
                        .ok()
                })
                .unwrap_or(0usize);
            if body.len() >= length {
                return text;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return text,
            Ok(n) => read.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The live API, on `instances` instances sharing `database`: sockets opened on the last one
/// hear of a deployment run by whichever instance takes it.
async fn the_live_api_follows_a_deployment(database: &str, instances: usize) {
    let dir = TempDir::new();
    let step = [
        ("CAPSTAN_ENGINE_STEP_MS", "100"),
        ("CAPSTAN_LIVE_SOCKETS_PER_TOKEN", "4"),
    ];
    let mut servers = Vec::new();
    for _ in 0..instances {
        servers.push(Server::start_with(&dir, database, None, &step).await);
    }
    let (client, env) = environment(&dir, database, &servers[0]).await;
    let org = hierarchy_org(&client).await;
    let details = client.get(&format!("/environment/{env}")).await;
    let cluster = details["cluster_id"].as_str().unwrap().to_string();
    let project = details["project"]["id"].as_str().unwrap().to_string();
    let container = container_in(&client, &org, &env, "web").await;
    let base = &servers[instances - 1].base;
    let header = format!("Token {}", client.token);
    let status_path = format!("/service/status?organization={org}&cluster={cluster}");

    // Refusals answer the handshake as REST would.
    assert_eq!(live(base, &status_path, None).await.err().unwrap().0, 401);
    let (code, body) = live(base, &status_path, Some("Token nope"))
        .await
        .err()
        .unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("nope"), "{body}");
    let (code, body) = live(
        base,
        &format!("/service/status?cluster={cluster}"),
        Some(&header),
    )
    .await
    .err()
    .unwrap();
    assert_eq!((code, body.contains("organization")), (400, true), "{body}");
    let stranger = create_token(&dir, database, &["--organization-name", "Strangers"]);
    let (code, _) = live(base, &status_path, Some(&format!("Token {stranger}")))
        .await
        .err()
        .unwrap();
    assert_eq!(code, 403);

    // The current state at once: never deployed, nothing runs.
    let mut status = live(base, &status_path, Some(&header)).await.unwrap();
    let first = status.next(Duration::from_secs(10)).await.unwrap();
    let envs = first["environments"].as_array().unwrap();
    assert_eq!(envs.len(), 1, "{first}");
    assert_eq!(envs[0]["id"], env.as_str());
    assert_eq!(envs[0]["project_id"], project.as_str());
    assert_eq!(envs[0]["containers"][0]["id"], container.as_str());
    assert_eq!(envs[0]["containers"][0]["state"], "STOPPED");
    for member in ["applications", "databases", "jobs", "helms", "terraform"] {
        assert!(envs[0][member].is_array(), "{member} in {first}");
    }
    // Browsers pass the token as a query parameter.
    let mut by_param = live(base, &format!("{status_path}&token={}", client.token), None)
        .await
        .unwrap();
    assert_eq!(by_param.next(Duration::from_secs(10)).await.unwrap(), first);
    let mut staged = live(
        base,
        &format!("/deployment/status?organization={org}&project={project}&environment={env}"),
        Some(&header),
    )
    .await
    .unwrap();
    let before = staged.next(Duration::from_secs(10)).await.unwrap();
    assert!(before["stages"].is_array(), "{before}");
    let mut logs = live(
        base,
        &format!("/deployment/logs?organization={org}&project={project}&environment={env}"),
        Some(&header),
    )
    .await
    .unwrap();

    let (code, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/container/{container}/deploy"),
            None,
        )
        .await;
    assert_eq!(code, 202);
    let running = status
        .until(Duration::from_secs(30), |m| {
            m["environments"][0]["containers"][0]["state"] == "RUNNING"
        })
        .await;
    assert_eq!(running["environments"][0]["state"], "RUNNING");
    staged
        .until(Duration::from_secs(30), |m| {
            m["environment"]["state"] == "DEPLOYED"
        })
        .await;
    let line = logs
        .until(Duration::from_secs(30), |m| {
            m["details"]["transmitter"]["id"] == container.as_str()
        })
        .await;
    assert_eq!(
        line["details"]["transmitter"]["type"], "Container",
        "{line}"
    );
    assert!(line["message"]["safe_message"].is_string(), "{line}");

    // The token holds four sockets here, the cap: a fifth is refused, naming the setting.
    let (code, body) = live(base, &status_path, Some(&header))
        .await
        .err()
        .expect("a fifth socket is refused");
    assert_eq!(code, 429, "{body}");
    assert!(body.contains("CAPSTAN_LIVE_SOCKETS_PER_TOKEN"), "{body}");
    drop(by_param);
    let mut again = live(base, &status_path, Some(&header))
        .await
        .expect("a closed socket gives its seat back");
    again.next(Duration::from_secs(10)).await.unwrap();

    // A socket ends within seconds of its token's deletion, on another instance too.
    let name = "live-victim";
    let victim = create_token(&dir, database, &["--organization-id", &org, "--name", name]);
    let mut watched = live(base, &status_path, Some(&format!("Token {victim}")))
        .await
        .unwrap();
    watched.next(Duration::from_secs(10)).await.unwrap();
    let tokens = client.get(&format!("/organization/{org}/apiToken")).await;
    let id = tokens["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .and_then(|t| t["id"].as_str())
        .unwrap()
        .to_string();
    let (code, _) = client
        .call(
            reqwest::Method::DELETE,
            &format!("/organization/{org}/apiToken/{id}"),
            None,
        )
        .await;
    assert_eq!(code, 204);
    let deleted = Instant::now();
    let (code, reason) = watched
        .closed(Duration::from_secs(10))
        .await
        .expect("the socket is closed by the server");
    assert_eq!(code, 1008, "{reason}");
    assert!(
        deleted.elapsed() < Duration::from_secs(5),
        "closed {:?} after the deletion",
        deleted.elapsed()
    );
    assert!(!reason.contains(&victim), "{reason}");
    for server in servers {
        server.stop();
    }
}

#[tokio::test]
async fn sqlite_the_live_api_follows_a_deployment() {
    let dir = TempDir::new();
    let path = dir.0.join("data.db");
    the_live_api_follows_a_deployment(&format!("sqlite://{}", path.display()), 1).await;
}

#[tokio::test]
async fn postgres_the_live_api_on_one_instance_follows_a_deployment_another_runs() {
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    the_live_api_follows_a_deployment(&url, 2).await;
}

/// A filesystem of the test's own (a small tmpfs), unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(at: std::path::PathBuf, size: &str) -> SmallDisk {
        std::fs::create_dir_all(&at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .status()
            .unwrap();
        assert!(mounted.success(), "mounting a tmpfs needs root, as CI has");
        SmallDisk(at)
    }

    /// Fills what is left of it; the file that holds the space.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let filler = self.0.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        for chunk in [1 << 20, 4096, 512] {
            let bytes = vec![0u8; chunk];
            while file
                .write_all(&bytes)
                .and_then(|()| file.sync_all())
                .is_ok()
            {}
        }
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// SQLite on a full filesystem: writes are refused with a 503 that says why, reads go on, and
/// once space is freed writes are taken again; nothing acknowledged is lost, across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_on_a_full_disk_refuses_writes_and_keeps_what_it_acknowledged() {
    let dir = TempDir::new();
    let disk = SmallDisk::mount(dir.0.join("disk"), "16m");
    let database = format!("sqlite://{}", disk.0.join("data.db").display());
    let token = create_token(&dir, &database, &["--organization-name", "Full"]);
    let server = Server::start(&dir, &database).await;
    let client = Client {
        http: reqwest::Client::new(),
        base: format!("{}/v1", server.base),
        token,
    };
    let org = hierarchy_org(&client).await;
    let filler = disk.fill();

    let mut kept = Vec::new();
    let refused = loop {
        assert!(kept.len() < 5000, "never refused");
        let (status, body) = client
            .call(
                reqwest::Method::POST,
                &format!("/organization/{org}/project"),
                Some(json!({"name": format!("p{}", kept.len())})),
            )
            .await;
        match status {
            201 => kept.push(body["id"].as_str().unwrap().to_string()),
            503 => break body,
            other => panic!("{other}: {body}"),
        }
    };
    assert!(
        refused.to_string().contains("the database's disk is full"),
        "{refused}"
    );
    let listed = client.get(&format!("/organization/{org}/project")).await;
    assert!(listed["results"].is_array(), "reads go on: {listed}");

    std::fs::remove_file(&filler).unwrap();
    let after = client
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "after"}),
        )
        .await;
    kept.push(after);
    server.stop();

    let server = Server::start(&dir, &database).await;
    let client = Client {
        base: format!("{}/v1", server.base),
        ..client
    };
    for id in &kept {
        client.get(&format!("/project/{id}")).await;
    }
}
