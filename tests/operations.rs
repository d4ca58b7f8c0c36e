//! Black-box runs of the binary for what test suites and operators do to Capstan as a whole:
//! a server started from a fixture, seeded ids, faults over real connections, backups and
//! restores while serving, and key rotations that lose nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use harness::*;
use serde_json::{json, Value};
use std::time::Duration;

const CONTROLS: &str = "ops-controls-token-0123";

fn controls_on() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CAPSTAN_CONTROLS", "on"),
        ("CAPSTAN_CONTROLS_TOKEN", CONTROLS),
        ("CAPSTAN_ENGINE_STEP_MS", "50"),
    ]
}

async fn control(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .request(method, format!("{}{path}", server.base))
        .header("Authorization", format!("Token {CONTROLS}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn client(server: &Server, token: &str) -> Client {
    Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token: token.to_string(),
    }
}

const FIXTURE: &str = "organizations:
  - name: Fixture
    tokens: [{name: ci, value: cap_blackbox_fixture_token}]
    clusters: [{name: main, region: eu-west-3, cloud_provider: CLOUDA}]
    projects:
      - name: shop
        environments: [{name: prod}]
";

/// The ids a fresh server hands out for the same calls, in order.
async fn ids_of_one_run(dir: &TempDir, seed: &str) -> Vec<String> {
    let env = [("CAPSTAN_ID_SEED", seed)];
    let fixture = dir.0.join("world.yaml");
    std::fs::write(&fixture, FIXTURE).unwrap();
    let server =
        Server::start_with_args(dir, "sqlite::memory:", &env, &["--seed", "world.yaml"]).await;
    let c = client(&server, "cap_blackbox_fixture_token");
    let org = hierarchy_org(&c).await;
    let mut ids = vec![org.clone()];
    let projects = c.get(&format!("/organization/{org}/project")).await;
    ids.push(projects["results"][0]["id"].as_str().unwrap().to_string());
    let project = c
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "more"}),
        )
        .await;
    ids.push(project.clone());
    ids.push(
        c.create(
            &format!("/project/{project}/environment"),
            json!({"name": "e"}),
        )
        .await,
    );
    server.stop();
    ids
}

#[tokio::test]
async fn two_runs_with_the_same_id_seed_hand_out_the_same_ids() {
    let dir = TempDir::new();
    let first = ids_of_one_run(&dir, "42").await;
    let second = ids_of_one_run(&dir, "42").await;
    assert_eq!(first, second);
    let other = ids_of_one_run(&dir, "43").await;
    assert!(
        first.iter().all(|id| !other.contains(id)),
        "{first:?} {other:?}"
    );
}

/// Records kept or restored hold ids drawn already: the sequences go on past them.
#[tokio::test]
async fn a_seeded_server_reset_with_its_tokens_makes_new_records() {
    let dir = TempDir::new();
    std::fs::write(dir.0.join("world.yaml"), FIXTURE).unwrap();
    let mut env = controls_on();
    env.push(("CAPSTAN_ID_SEED", "7"));
    let server =
        Server::start_with_args(&dir, "sqlite::memory:", &env, &["--seed", "world.yaml"]).await;
    let c = client(&server, "cap_blackbox_fixture_token");
    let org = hierarchy_org(&c).await;
    let post = reqwest::Method::POST;
    let (status, _) = control(
        &server,
        post.clone(),
        "/_capstan/reset",
        Some(json!({"keep_tokens": true})),
    )
    .await;
    assert_eq!(status, 204);
    c.create(
        &format!("/organization/{org}/project"),
        json!({"name": "shop"}),
    )
    .await;
    let (status, _) = control(
        &server,
        post.clone(),
        "/_capstan/snapshots",
        Some(json!({"name": "s"})),
    )
    .await;
    assert_eq!(status, 201);
    let (status, _) = control(&server, post, "/_capstan/snapshots/s/restore", None).await;
    assert_eq!(status, 204);
    c.create(
        &format!("/organization/{org}/project"),
        json!({"name": "more"}),
    )
    .await;
    server.stop();
}

/// SIGTERM lets a held deployment go: a stop never waits on a test suite's release.
#[tokio::test]
async fn a_server_with_a_held_deployment_stops_on_sigterm() {
    let dir = TempDir::new();
    std::fs::write(dir.0.join("world.yaml"), FIXTURE).unwrap();
    let server = Server::start_with_args(
        &dir,
        "sqlite::memory:",
        &controls_on(),
        &["--seed", "world.yaml"],
    )
    .await;
    let c = client(&server, "cap_blackbox_fixture_token");
    let org = hierarchy_org(&c).await;
    let project = c.get(&format!("/organization/{org}/project")).await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let env = c.get(&format!("/project/{project}/environment")).await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let container = container_in(&c, &org, &env, "web").await;
    let (status, _) = control(
        &server,
        reqwest::Method::POST,
        "/_capstan/engine/hold",
        Some(json!({"service_id": container, "state": "DEPLOYING"})),
    )
    .await;
    assert_eq!(status, 204);
    let (status, _) = c
        .call(
            reqwest::Method::POST,
            &format!("/container/{container}/deploy"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 202);
    let status = format!("/container/{container}/status");
    eventually(
        Duration::from_secs(20),
        || "never held".to_string(),
        async || (c.get(&status).await["state"] == "DEPLOYING").then_some(()),
    )
    .await;
    server.stop();
}

#[tokio::test]
async fn a_server_starts_from_a_fixture_in_memory() {
    let dir = TempDir::new();
    std::fs::write(dir.0.join("world.yaml"), FIXTURE).unwrap();
    let server = Server::start_with_args(
        &dir,
        "sqlite::memory:",
        &controls_on(),
        &["--seed", "world.yaml"],
    )
    .await;
    let c = client(&server, "cap_blackbox_fixture_token");
    let org = hierarchy_org(&c).await;
    let projects = c.get(&format!("/organization/{org}/project")).await;
    assert_eq!(projects["results"][0]["name"], "shop");
    // The controls reset it and seed it again, over HTTP only.
    let (status, _) = control(&server, reqwest::Method::POST, "/_capstan/reset", None).await;
    assert_eq!(status, 204);
    let (status, _) = c.call(reqwest::Method::GET, "/organization", None).await;
    assert_eq!(status, 401);
    let res = reqwest::Client::new()
        .post(format!("{}/_capstan/seed", server.base))
        .header("Authorization", format!("Token {CONTROLS}"))
        .header("Content-Type", "application/yaml")
        .body(FIXTURE)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    assert_eq!(hierarchy_org(&c).await.len(), 36);
    server.stop();
}

/// Over a real connection, from a server inside this process (`capstan-testing`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropping_fault_closes_the_connection_without_an_answer() {
    let server = capstan_testing::Capstan::start().await.unwrap();
    let (status, rule) = server
        .control(
            reqwest::Method::POST,
            "/_capstan/faults",
            Some(json!({"method": "GET", "path": "/readyz", "drop": true, "count": 1})),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{rule}");
    let dropped = reqwest::Client::new()
        .get(format!("{}/readyz", server.base_url()))
        .send()
        .await;
    match dropped {
        Err(e) => assert!(!e.is_timeout(), "{e}"),
        Ok(r) => assert!(r.bytes().await.is_err(), "an answer came whole"),
    }
    let again = reqwest::Client::new()
        .get(format!("{}/readyz", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 200, "the rule was spent");
    assert!(again.headers().get("x-capstan-fault").is_none());
}

/// Every byte of a SQLite database's files.
fn database_bytes(dir: &TempDir, name: &str) -> Vec<u8> {
    let mut all = Vec::new();
    for suffix in ["", "-wal"] {
        if let Ok(bytes) = std::fs::read(dir.0.join(format!("{name}{suffix}"))) {
            all.extend(bytes);
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// A container with a registry password and a secret variable; returns (organization, container).
async fn world_with_secrets(c: &Client) -> (String, String) {
    let (org, env) = hierarchy(c).await;
    let registry = c
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "hub", "kind": "DOCKER_HUB", "config": {"username": "bob", "password": "pl41n-registry-pw"}}),
        )
        .await;
    let container = c
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await;
    c.create(
        &format!("/container/{container}/secret"),
        json!({"key": "PASSWORD", "value": "pl41n-secret-value"}),
    )
    .await;
    (org, container)
}

/// The service's secrets read (so they decrypt) and a deployment the engine runs to its end.
async fn secrets_serve(c: &Client, container: &str) {
    let secrets = c.get(&format!("/container/{container}/secret")).await;
    assert_eq!(secrets["results"][0]["key"], "PASSWORD");
    let (status, body) = c
        .call(
            reqwest::Method::POST,
            &format!("/container/{container}/redeploy"),
            Some(json!({})),
        )
        .await;
    assert!(status == 202 || status == 200, "{status} {body}");
    let settled = settle(
        c,
        &format!("/container/{container}/status"),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
}

#[tokio::test]
async fn sqlite_a_key_rotated_while_serving_loses_nothing() {
    let dir = TempDir::new();
    let db = "sqlite://data.db";
    // The key file beside the database, not CAPSTAN_SECRET_KEY.
    let keyless = [("CAPSTAN_SECRET_KEY", ""), ("CAPSTAN_ENGINE_STEP_MS", "50")];
    let server = Server::start_with(&dir, db, None, &keyless).await;
    let out = capstan_with(
        &dir,
        db,
        &["token", "create", "--organization-name", "Rot"],
        &keyless,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c = client(&server, String::from_utf8(out.stdout).unwrap().trim());
    let (_, container) = world_with_secrets(&c).await;
    secrets_serve(&c, &container).await;
    let old_key = std::fs::read_to_string(dir.0.join("data.db.key")).unwrap();

    let out = capstan_with(&dir, db, &["secrets", "rotate-key"], &keyless);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "no key is printed when it is kept in the file"
    );
    let keys = std::fs::read_to_string(dir.0.join("data.db.key")).unwrap();
    let lines: Vec<&str> = keys.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "the new key first, the old kept for reading"
    );
    assert_eq!(lines[1], old_key.trim());

    // What the server that was serving seals from now on, even before it has read anything
    // the rotation resealed, it seals with the new key; it reads the resealed values, and
    // goes on working.
    c.create(
        &format!("/container/{container}/secret"),
        json!({"key": "LATER", "value": "pl41n-later-value"}),
    )
    .await;
    secrets_serve(&c, &container).await;
    server.stop();
    let bytes = database_bytes(&dir, "data.db");
    assert!(!bytes.is_empty());
    for plain in [
        "pl41n-registry-pw",
        "pl41n-secret-value",
        "pl41n-later-value",
    ] {
        assert!(!contains(&bytes, plain), "{plain} is in the database files");
    }
    // The old key can go: nothing is sealed with it any more.
    std::fs::write(dir.0.join("data.db.key"), format!("{}\n", lines[0])).unwrap();
    let server = Server::start_with(&dir, db, None, &keyless).await;
    let c = client(&server, &c.token);
    secrets_serve(&c, &container).await;
    let secrets = c.get(&format!("/container/{container}/secret")).await;
    assert_eq!(secrets["results"].as_array().unwrap().len(), 2, "{secrets}");
    server.stop();
}

#[tokio::test]
async fn postgres_a_key_rotated_between_rolling_restarts_loses_nothing() {
    let Some(raw) = postgres_url().await else {
        return;
    };
    let dir = TempDir::new();
    let new_key = "CAcICAgICAgICAgICAgICAgICAgICAgICAgICAgICAg=";
    let step = ("CAPSTAN_ENGINE_STEP_MS", "50");
    let server = Server::start_with(&dir, &raw, None, &[step]).await;
    let c = client(
        &server,
        &create_token(&dir, &raw, &["--organization-name", "Rot"]),
    );
    let (_, container) = world_with_secrets(&c).await;
    server.stop();
    // The instances learn the new key first, still opening the old one...
    let rolled = [
        step,
        ("CAPSTAN_SECRET_KEY", new_key),
        ("CAPSTAN_SECRET_KEY_PREVIOUS", TEST_KEY),
    ];
    let server = Server::start_with(&dir, &raw, None, &rolled).await;
    let c = client(&server, &c.token);
    secrets_serve(&c, &container).await;
    // ...then every value is resealed while they serve...
    let out = capstan_with(
        &dir,
        &raw,
        &["secrets", "rotate-key", "--new-key", new_key],
        &rolled,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    secrets_serve(&c, &container).await;
    server.stop();
    // ...and the old key can go.
    let server =
        Server::start_with(&dir, &raw, None, &[step, ("CAPSTAN_SECRET_KEY", new_key)]).await;
    let c = client(&server, &c.token);
    secrets_serve(&c, &container).await;
    server.stop();
}

#[tokio::test]
async fn sqlite_a_backup_taken_while_serving_restores_while_serving() {
    let dir = TempDir::new();
    let db = "sqlite://data.db";
    let server = Server::start_with(&dir, db, None, &[("CAPSTAN_ENGINE_STEP_MS", "50")]).await;
    let c = client(
        &server,
        &create_token(&dir, db, &["--organization-name", "Backed"]),
    );
    let (org, container) = world_with_secrets(&c).await;
    let before = c.get(&format!("/container/{container}")).await;

    let out = capstan(&dir, db, &["backup", "--to", "backup.db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, _) = c
        .call(
            reqwest::Method::DELETE,
            &format!("/container/{container}"),
            None,
        )
        .await;
    assert!(status == 202 || status == 204);
    let later = c
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "later"}),
        )
        .await;

    let out = capstan(&dir, db, &["restore", "--from", "backup.db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The serving server answers from the restored state at once.
    assert_eq!(c.get(&format!("/container/{container}")).await, before);
    let (status, _) = c
        .call(reqwest::Method::GET, &format!("/project/{later}"), None)
        .await;
    assert_eq!(status, 404);
    secrets_serve(&c, &container).await;
    let out = capstan(&dir, db, &["restore", "--from", "missing.db"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no backup at missing.db"));
    server.stop();
}

#[tokio::test]
async fn postgres_a_database_restored_from_pg_dump_serves() {
    let Some(raw) = postgres_url().await else {
        return;
    };
    let dir = TempDir::new();
    let step = [("CAPSTAN_ENGINE_STEP_MS", "50")];
    let server = Server::start_with(&dir, &raw, None, &step).await;
    let c = client(
        &server,
        &create_token(&dir, &raw, &["--organization-name", "Dumped"]),
    );
    let (_, container) = world_with_secrets(&c).await;
    let before = c.get(&format!("/container/{container}")).await;
    let dump = dir.0.join("capstan.dump");
    let out = std::process::Command::new("pg_dump")
        .args(["--format=custom", "--file"])
        .arg(&dump)
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.stop();

    let restored = postgres_url().await.unwrap();
    let out = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--dbname"])
        .arg(&restored)
        .arg(&dump)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start_with(&dir, &restored, None, &step).await;
    let c = client(&server, &c.token);
    assert_eq!(c.get(&format!("/container/{container}")).await, before);
    secrets_serve(&c, &container).await;
    server.stop();
}

/// A fresh PostgreSQL database's URL, or none (outside CI) when no server answers.
async fn postgres_url() -> Option<String> {
    match storage::testing::postgres_database().await? {
        storage::DatabaseUrl::Postgres(raw) => Some(raw),
        storage::DatabaseUrl::Sqlite(_) => None,
    }
}

/// API.md: a bad setting stops start-up with one clear line naming it, never a panic, whether
/// it comes from a variable or a flag, and whichever check refuses it (its own value, or how
/// it goes with the others).
#[test]
fn a_bad_setting_stops_start_up_with_one_line_naming_it() {
    for (env, args, line) in [
        (
            vec![("CAPSTAN_MAX_PORTS", "x")],
            vec![],
            "capstan: invalid setting CAPSTAN_MAX_PORTS (--max-ports): 'x' is not a whole \
             number from 1 to 1000",
        ),
        (
            vec![],
            vec!["--docker-firewall", "maybe"],
            "capstan: invalid setting CAPSTAN_DOCKER_FIREWALL (--docker-firewall): 'maybe' is \
             not on or off",
        ),
        (
            vec![("CAPSTAN_CONTROLS", "on")],
            vec![],
            "capstan: invalid setting CAPSTAN_CONTROLS_TOKEN (--controls-token): the controls \
             are on: give them a token (no spaces)",
        ),
    ] {
        let out = std::process::Command::new(bin())
            .env_remove("CAPSTAN_CONTROLS_TOKEN")
            .envs(env)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{line}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("{line}\n"));
        assert!(out.stdout.is_empty());
    }
}
