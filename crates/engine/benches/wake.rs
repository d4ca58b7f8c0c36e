//! How soon an idle worker starts a deployment once it is queued: on the instance that queued
//! it (woken in-process), and on another instance sharing the PostgreSQL database (woken by
//! notification). `cargo bench -p capstan-engine --bench wake`; prints the median and the
//! slowest of `CAPSTAN_BENCH_WAKES` (default 30) deployments. Asserts nothing about time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capstan_engine::{Engines, PoolSettings, SimulatedEngine, WorkerPool};
use domain::auth::{Principal, Role};
use domain::clock::SystemClock;
use domain::ids::{EnvironmentId, ServiceId};
use domain::model::{DeploymentAction, ServiceKind, ServiceState};
use domain::services::{Capstan, DeployInput};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn organization(capstan: &Capstan) -> (Principal, EnvironmentId) {
    let name = format!("Bench {}", next_number());
    let (org, token) = capstan
        .bootstrap_organization(&name, Role::Admin, "t")
        .await
        .unwrap();
    let p = capstan.authenticate_api_token(&token.value).await.unwrap();
    let cluster = json!({"name": "c", "region": "r", "cloud_provider": "CLOUDA"});
    capstan
        .create_cluster(&p, org.id, serde_json::from_value(cluster).unwrap())
        .await
        .unwrap();
    let project = capstan
        .create_project(
            &p,
            org.id,
            serde_json::from_value(json!({"name": "p"})).unwrap(),
        )
        .await
        .unwrap();
    let env = capstan
        .create_environment(
            &p,
            project.project.id,
            serde_json::from_value(json!({"name": "e"})).unwrap(),
        )
        .await
        .unwrap()
        .environment
        .id;
    (p, env)
}

/// Queues `runs` deployments one after another through `queuing` and times each from its
/// acknowledgement to its claim, as `store` shows it.
async fn wakes(queuing: &Capstan, store: &dyn domain::ports::Store, runs: usize) -> Vec<Duration> {
    let (p, env) = organization(queuing).await;
    let mut took = Vec::new();
    for i in 0..runs {
        let service: ServiceId = queuing
            .create_service(
                &p,
                env,
                ServiceKind::Database,
                &json!({"name": format!("db{i}"), "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
            )
            .await
            .unwrap()
            .id;
        // Idle workers wait for a change, not for a poll.
        tokio::time::sleep(Duration::from_millis(200)).await;
        queuing
            .service_action(
                &p,
                ServiceKind::Database,
                service,
                DeploymentAction::Deploy,
                DeployInput::default(),
            )
            .await
            .unwrap();
        let asked = Instant::now();
        loop {
            let depth = store.queue_depth().await.unwrap();
            if depth.queued == 0 {
                break;
            }
            assert!(asked.elapsed() < Duration::from_secs(60), "never started");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        took.push(asked.elapsed());
        loop {
            let s = queuing
                .service_status(&p, ServiceKind::Database, service)
                .await
                .unwrap();
            if s.state == ServiceState::Deployed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    took
}

/// A name no earlier organization of this run has.
fn next_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn print(label: &str, mut took: Vec<Duration>) {
    took.sort();
    println!(
        "{label:<44} median {:>7.2} ms, slowest {:>7.2} ms of {}",
        took[took.len() / 2].as_secs_f64() * 1000.0,
        took[took.len() - 1].as_secs_f64() * 1000.0,
        took.len()
    );
}

fn pool(capstan: Capstan) -> WorkerPool {
    let step = Duration::ZERO;
    WorkerPool::start(
        capstan,
        Arc::new(Engines::every_kind(Arc::new(SimulatedEngine::new(step)))),
        PoolSettings { workers: 2, step },
    )
}

#[tokio::main]
async fn main() {
    // `cargo test --benches` runs benchmarks with `--bench` absent: build only, measure nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let runs = std::env::var("CAPSTAN_BENCH_WAKES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let (db, _url, _file) = storage::testing::sqlite().await;
    let db = Arc::new(db);
    let capstan = Capstan::new(db.clone(), Arc::new(SystemClock));
    let workers = pool(capstan.clone());
    print(
        "sqlite    queued and started here",
        wakes(&capstan, &*db, runs).await,
    );
    workers.shutdown().await;

    let Some((db, url)) = storage::testing::postgres().await else {
        println!("postgres  skipped: no PostgreSQL at CAPSTAN_TEST_POSTGRES_URL");
        return;
    };
    let db = Arc::new(db);
    let capstan = Capstan::new(db.clone(), Arc::new(SystemClock));
    let workers = pool(capstan.clone());
    print(
        "postgres  queued and started here",
        wakes(&capstan, &*db, runs).await,
    );
    workers.shutdown().await;
    // Another instance on the same database runs the workers; this one only queues.
    let other = Arc::new(
        storage::Db::connect(&url, 4, &storage::testing::TEST_KEY)
            .await
            .unwrap(),
    );
    let workers = pool(Capstan::new(other, Arc::new(SystemClock)));
    print(
        "postgres  queued here, started by another",
        wakes(&capstan, &*db, runs).await,
    );
    workers.shutdown().await;
}
