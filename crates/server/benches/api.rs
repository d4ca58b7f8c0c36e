//! Throughput of the built binary, measured from outside with wrk (Debian package `wrk`), on
//! SQLite and (when reachable) PostgreSQL: `cargo bench -p capstan-server --bench api`.
//!
//! Each scenario's rate is printed beside its ratio to `GET /healthz` served by the same
//! process in the same run, so runs on different machines compare. Asserts nothing about time.
//! `CAPSTAN_BENCH_SECS` sets each scenario's length (default 5), `CAPSTAN_BENCH_CONNECTIONS`
//! wrk's connections (default 64), `CAPSTAN_BENCH_THREADS` wrk's threads (default 2).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../tests/harness/mod.rs"]
mod harness;
mod measure;

use harness::{databases, environment, hierarchy_org, settle, Client, Server, TempDir};
use measure::{setting, Measured};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

/// One wrk run against `path` of the API, as the test organization's token.
fn wrk(base: &str, token: &str, path: &str, script: Option<&str>) -> Measured {
    measure::wrk(
        &format!("{base}{path}"),
        &[format!("Authorization: Token {token}")],
        script,
    )
}

/// A POST of a new variable per request: keys are unique per wrk thread and request.
const POST_VARIABLE: &str = r#"
wrk.headers["Content-Type"] = "application/json"
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("prefix", "T" .. threads .. "_")
end
local n = 0
request = function()
  n = n + 1
  -- nil headers: wrk's own, with the Authorization given on the command line
  return wrk.format("POST", nil, nil, '{"key": "' .. prefix .. n .. '", "value": "v"}')
end
"#;

async fn run(backend: &str, database: &str) {
    let dir = TempDir::new();
    let server = Server::start_with(
        &dir,
        database,
        None,
        &[
            ("CAPSTAN_RATE_LIMIT_PER_HOUR", "4000000000"),
            ("CAPSTAN_ENGINE_STEP_MS", "0"),
        ],
    )
    .await;
    let (client, env) = environment(&dir, database, &server).await;
    let org = hierarchy_org(&client).await;
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "hub", "kind": "DOCKER_HUB", "config": {"password": "pw"}}),
        )
        .await;
    let mut containers = Vec::new();
    for i in 0..50 {
        containers.push(
            client
                .create(
                    &format!("/environment/{env}/container"),
                    json!({"name": format!("web{i}"), "registry_id": registry,
                           "image_name": "nginx", "tag": "1.27",
                           "ports": [{"internal_port": 80, "publicly_accessible": true}]}),
                )
                .await,
        );
    }
    let one = &containers[0];
    idle(backend, &server.base, database).await;
    // The reference is measured before and after the scenarios; the ratios use the mean, so
    // a machine that speeds up or slows down during the run shows in both.
    let before = wrk(&server.base, &client.token, "/healthz", None);
    let scenarios = [
        ("GET one container", format!("/container/{one}"), None),
        (
            "GET a container's status",
            format!("/container/{one}/status"),
            None,
        ),
        (
            "GET a list of 50 containers",
            format!("/environment/{env}/container?page_size=50"),
            None,
        ),
        (
            "POST a variable (durable)",
            format!("/container/{}/environmentVariable", containers[1]),
            Some(POST_VARIABLE),
        ),
    ];
    let mut measured = Vec::new();
    for (name, path, script) in scenarios {
        measured.push((name, wrk(&server.base, &client.token, &path, script)));
    }
    let after = wrk(&server.base, &client.token, "/healthz", None);
    let healthz = (before.rate + after.rate) / 2.0;
    println!(
        "{backend:<9} {:<30} {:>9.0} req/s  p50 {:>8}  p99 {:>8}  ratio 1.000  (before {:.0}, after {:.0})",
        "GET /healthz", healthz, before.p50, before.p99, before.rate, after.rate
    );
    for (name, m) in measured {
        println!(
            "{backend:<9} {name:<30} {:>9.0} req/s  p50 {:>8}  p99 {:>8}  ratio {:.3}{}",
            m.rate,
            m.p50,
            m.p99,
            m.rate / healthz.max(1.0),
            if m.errors > 0 {
                format!("  ({} answers not 2xx)", m.errors)
            } else {
                String::new()
            }
        );
    }
    deployments(backend, &client, &env).await;
    server.stop();
}

/// How many transactions a second the server makes while nobody asks anything of it: what it
/// costs to keep it running. Counted by the server itself (`capstan_store_connections_lent_total`
/// in /metrics: a unit of work, a claim) and, on PostgreSQL, by the database
/// (`pg_stat_database`), over `CAPSTAN_BENCH_IDLE_SECS` (default 20) once the set-up is over
/// and counted.
async fn idle(backend: &str, base: &str, database: &str) {
    let secs = setting("CAPSTAN_BENCH_IDLE_SECS", 20);
    let http = reqwest::Client::new();
    let lent = || async {
        let text = http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("capstan_store_connections_lent_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .expect("the metric is served")
    };
    let url = storage::DatabaseUrl::parse(database).unwrap();
    // The set-up's last events settle first, and PostgreSQL's count takes in the set-up's
    // transactions: an idle backend reports its statistics up to 10 s after its last one.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let (lent_before, pg_before) = (lent().await, storage::testing::transactions(&url).await);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (lent_after, pg_after) = (lent().await, storage::testing::transactions(&url).await);
    let elapsed = started.elapsed().as_secs_f64();
    // Less the scrape's own read of the queue's depth, and the counting's own transaction.
    let lent_rate = (lent_after - lent_before - 1.0).max(0.0) / elapsed;
    let pg = match (pg_before, pg_after) {
        (Some(b), Some(a)) => format!(
            ", {:.2} transactions/s in pg_stat_database",
            (a - b - 2).max(0) as f64 / elapsed
        ),
        _ => String::new(),
    };
    println!(
        "{backend:<9} {:<30} {lent_rate:>9.2} connections lent/s{pg}  (over {elapsed:.0} s)",
        "idle server"
    );
}

/// 100 deployments over 10 environments through the queue, with instant engine steps.
async fn deployments(backend: &str, client: &Client, env: &str) {
    let services = databases(client, env, 10, 10).await;
    let started = Instant::now();
    for id in &services {
        let (status, _) = client
            .call(
                reqwest::Method::POST,
                &format!("/database/{id}/deploy"),
                None,
            )
            .await;
        assert_eq!(status, 202);
    }
    let queued = started.elapsed().as_secs_f64();
    for id in &services {
        settle(
            client,
            &format!("/database/{id}/status"),
            Duration::from_secs(300),
        )
        .await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{backend:<9} {:<30} {:>9.1} deployments/s  (100 queued in {queued:.2} s, all done in {elapsed:.2} s)",
        "deploy through the queue",
        services.len() as f64 / elapsed,
    );
}

/// How long `capstan serve` on `sqlite::memory:` takes from its start to its first ready
/// `/readyz` (what a test's fixture waits for), empty and from a small fixture: the median and
/// the slowest of `runs` starts.
async fn startup(runs: usize) {
    let dir = TempDir::new();
    std::fs::write(
        dir.0.join("world.yaml"),
        "organizations:\n  - name: Bench\n    tokens: [{name: ci, value: cap_bench_fixture_token}]\n    clusters: [{name: c, region: eu-west-3, cloud_provider: CLOUDA}]\n    projects: [{name: p, environments: [{name: e}]}]\n",
    )
    .unwrap();
    let http = reqwest::Client::new();
    for (label, args) in [("empty", vec![]), ("fixture", vec!["--seed", "world.yaml"])] {
        let mut took = Vec::new();
        for _ in 0..runs {
            let port = harness::free_port();
            let started = Instant::now();
            let mut child = Command::new(harness::bin())
                .arg("serve")
                .args(&args)
                .current_dir(&dir.0)
                .env("CAPSTAN_DATABASE_URL", "sqlite::memory:")
                .env("CAPSTAN_LISTEN", format!("127.0.0.1:{port}"))
                .env("CAPSTAN_LOG", "warn")
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let url = format!("http://127.0.0.1:{port}/readyz");
            loop {
                if let Ok(r) = http.get(&url).send().await {
                    if r.status().is_success() {
                        break;
                    }
                }
                assert!(started.elapsed() < Duration::from_secs(30), "never ready");
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            took.push(started.elapsed());
            let _ = child.kill();
            let _ = child.wait();
        }
        took.sort();
        println!(
            "start-up  sqlite::memory: {label:<8} ready in {:>6.1} ms median, {:>6.1} ms slowest of {runs}",
            took[took.len() / 2].as_secs_f64() * 1000.0,
            took[took.len() - 1].as_secs_f64() * 1000.0,
        );
    }
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs benchmarks with `--bench` absent: build only, measure nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    startup(10).await;
    if !measure::wrk_installed() {
        std::process::exit(1);
    }
    println!(
        "{} cores; wrk -t{} -c{} for {} s per scenario",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        setting("CAPSTAN_BENCH_THREADS", 2),
        setting("CAPSTAN_BENCH_CONNECTIONS", 64),
        setting("CAPSTAN_BENCH_SECS", 5)
    );
    run("sqlite", "sqlite://capstan.db").await;
    match storage::testing::postgres_database().await {
        Some(storage::DatabaseUrl::Postgres(url)) => run("postgres", &url).await,
        _ => println!("postgres  skipped: no PostgreSQL at CAPSTAN_TEST_POSTGRES_URL"),
    }
}
