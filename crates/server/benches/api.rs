//! Throughput and latency of the built binary, measured from outside over HTTP, on SQLite and
//! (when reachable) PostgreSQL: `cargo bench -p capstan-server --bench api`. Prints one line per
//! scenario; asserts nothing about time. `CAPSTAN_BENCH_SECS` sets each scenario's length
//! (default 5), `CAPSTAN_BENCH_CLIENTS` the concurrent clients (default 16).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../tests/harness.rs"]
mod harness;

use harness::{databases, environment, settle, Client, Server, TempDir};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `call` from `clients` tasks for `secs`, then prints rate and latency percentiles.
async fn scenario<F, Fut>(name: &str, backend: &str, clients: usize, secs: u64, call: F)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = u16> + Send,
{
    let call = Arc::new(call);
    let counter = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let call = call.clone();
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0usize;
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let at = Instant::now();
                let status = call(n).await;
                latencies.push(at.elapsed());
                if status >= 300 {
                    failures += 1;
                }
            }
            (latencies, failures)
        }));
    }
    let mut all = Vec::new();
    let mut failures = 0;
    for t in tasks {
        let (l, f) = t.await.unwrap();
        all.extend(l);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{backend:<10} {name:<28} {:>8.0} req/s  p50 {:>6.2} ms  p95 {:>6.2} ms  p99 {:>6.2} ms  ({} requests, {failures} not 2xx)",
        all.len() as f64 / elapsed,
        pct(0.50),
        pct(0.95),
        pct(0.99),
        all.len(),
    );
}

async fn run(backend: &str, database: &str) {
    let clients = setting("CAPSTAN_BENCH_CLIENTS", 16) as usize;
    let secs = setting("CAPSTAN_BENCH_SECS", 5);
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
    let client = Arc::new(client);
    let mut apps = Vec::new();
    for i in 0..50 {
        apps.push(
            client
                .create(
                    &format!("/environment/{env}/application"),
                    json!({"name": format!("app{i}"),
                           "git_repository": {"url": "https://github.com/acme/api", "branch": "main"}}),
                )
                .await,
        );
    }
    let apps = Arc::new(apps);

    let (c, a) = (client.clone(), apps.clone());
    scenario("GET application", backend, clients, secs, move |n| {
        let (c, id) = (c.clone(), a[n % a.len()].clone());
        async move {
            c.call(reqwest::Method::GET, &format!("/application/{id}"), None)
                .await
                .0
        }
    })
    .await;

    let (c, e) = (client.clone(), env.clone());
    scenario(
        "GET list of 50 applications",
        backend,
        clients,
        secs,
        move |_| {
            let (c, e) = (c.clone(), e.clone());
            async move {
                c.call(
                    reqwest::Method::GET,
                    &format!("/environment/{e}/application?page_size=50"),
                    None,
                )
                .await
                .0
            }
        },
    )
    .await;

    let (c, a) = (client.clone(), apps.clone());
    scenario(
        "POST secret (encrypted)",
        backend,
        clients,
        secs,
        move |n| {
            let (c, id) = (c.clone(), a[n % a.len()].clone());
            async move {
                c.call(
                    reqwest::Method::POST,
                    &format!("/application/{id}/secret"),
                    Some(json!({"key": format!("K{n}"), "value": "v"})),
                )
                .await
                .0
            }
        },
    )
    .await;

    deployments(backend, &client, &env).await;
    server.stop();
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
        "{backend:<10} {:<28} {:>8.1} deployments/s  (100 queued in {queued:.2} s, all done in {elapsed:.2} s)",
        "deploy through the queue",
        services.len() as f64 / elapsed,
    );
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs benchmarks with `--bench` absent: build only, measure nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    run("sqlite", "sqlite://capstan.db").await;
    match storage::testing::postgres_database().await {
        Some(storage::DatabaseUrl::Postgres(url)) => run("postgres", &url).await,
        _ => println!("postgres   skipped: no PostgreSQL at CAPSTAN_TEST_POSTGRES_URL"),
    }
}
