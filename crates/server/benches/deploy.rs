//! From a deploy request to the service's first 200, beside `docker run` of the same image to
//! its first 200, in one run: `cargo bench -p capstan-server --bench deploy`. Needs a Docker
//! daemon (and busybox-static, from which the image is made). Each side runs
//! `CAPSTAN_BENCH_ROUNDS` times (default 5), alternating; the medians and their ratio are
//! printed. Asserts nothing about time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../tests/harness/mod.rs"]
mod harness;

use harness::{
    docker, docker_ready, environment, hierarchy_org, Client, Server, TempDir, IMAGE, TAG,
};
use serde_json::json;
use std::time::{Duration, Instant};

/// What the workload runs: a page served on 8080.
const SCRIPT: &str = "mkdir -p /www && echo up > /www/index.html && exec httpd -f -p 8080 -h /www";
const PATIENCE: Duration = Duration::from_secs(120);

/// Waits for the first 200 from `url`.
async fn first_200(http: &reqwest::Client, url: &str, since: Instant) {
    loop {
        if let Ok(r) = http.get(url).send().await {
            if r.status() == 200 {
                return;
            }
        }
        assert!(since.elapsed() < PATIENCE, "{url} never answered 200");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One deployment through Capstan: from the request to the link's first 200.
async fn through_capstan(client: &Client, env: &str, registry: &str, round: usize) -> Duration {
    let id = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": format!("bench-{round}"), "registry_id": registry,
                "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", SCRIPT],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                "healthchecks": {"readiness_probe": {"type": {"http": {"port": 8080, "path": "/"}},
                    "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                    "success_threshold": 1, "failure_threshold": 60}},
            }),
        )
        .await;
    let started = Instant::now();
    let (status, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/container/{id}/deploy"),
            None,
        )
        .await;
    assert_eq!(status, 202);
    let url = loop {
        let links = client.get(&format!("/container/{id}/link")).await;
        if let Some(url) = links["results"][0]["url"].as_str() {
            break url.to_string();
        }
        assert!(started.elapsed() < PATIENCE, "no link");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    first_200(&client.http, &url, started).await;
    let took = started.elapsed();
    // Removed once ready, so the next round starts from the same place.
    client.get(&format!("/container/{id}/status?wait=60")).await;
    client
        .call(reqwest::Method::DELETE, &format!("/container/{id}"), None)
        .await;
    took
}

/// One `docker run` of the same image: from the command to the first 200.
async fn with_docker_run(http: &reqwest::Client) -> Duration {
    let image = format!("{IMAGE}:{TAG}");
    let started = Instant::now();
    let id = docker(&[
        "run",
        "-d",
        "-p",
        "127.0.0.1::8080",
        &image,
        "sh",
        "-c",
        SCRIPT,
    ])
    .unwrap();
    let port = docker(&["port", &id, "8080/tcp"]).unwrap();
    let port = port
        .lines()
        .next()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    first_200(http, &format!("http://127.0.0.1:{port}/"), started).await;
    let took = started.elapsed();
    docker(&["rm", "-f", &id]).unwrap();
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    if !docker_ready() {
        return;
    }
    let rounds: usize = std::env::var("CAPSTAN_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("bench.db").display());
    // The link is the published port's: this measures deployments, not the router.
    let server = Server::start_with(
        &dir,
        &database,
        None,
        &[
            ("CAPSTAN_ENGINE", "docker"),
            ("CAPSTAN_HOST_IMAGES", "capstan-test/"),
            ("CAPSTAN_ROUTER_LISTEN", "off"),
        ],
    )
    .await;
    let (client, env) = environment(&dir, &database, &server).await;
    let org = hierarchy_org(&client).await;
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "hub", "kind": "DOCKER_HUB", "url": "https://docker.io", "config": {}}),
        )
        .await;
    let http = reqwest::Client::new();
    let (mut capstan, mut plain) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        capstan.push(through_capstan(&client, &env, &registry, round).await);
        plain.push(with_docker_run(&http).await);
    }
    let (c, d) = (median(capstan.clone()), median(plain.clone()));
    println!("deploy to first 200, {rounds} rounds each, alternating (medians):");
    println!(
        "  through Capstan: {:>8.1} ms   {capstan:?}",
        c.as_secs_f64() * 1e3
    );
    println!(
        "  docker run:      {:>8.1} ms   {plain:?}",
        d.as_secs_f64() * 1e3
    );
    println!(
        "  ratio (Capstan / docker run): {:.2}",
        c.as_secs_f64() / d.as_secs_f64()
    );
    harness::docker_cleanup(&org);
    server.stop();
}
