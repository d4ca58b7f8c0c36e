//! Requests per second through the router to a workload, beside the same workload reached at
//! its published port directly, in one run, as a ratio; and through Caddy's reverse proxy
//! (Debian's `caddy`, when installed) to the same port, the alternative docs/architecture.md
//! weighs: `cargo bench -p capstan-server --bench router`. Needs a Docker daemon, busybox-static
//! and wrk. Each way is measured `CAPSTAN_BENCH_ROUNDS` times (default 2), in turn; the mean
//! rates and their ratios to the direct one are printed. Asserts nothing about time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../tests/harness/mod.rs"]
mod harness;
mod measure;

use harness::{
    docker_cleanup, docker_ready, environment, free_port, hierarchy_org, host_port, settle, Server,
    TempDir, IMAGE, TAG,
};
use measure::{setting, wrk, wrk_installed, Measured};
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The workload: a small page served on 8080.
const SCRIPT: &str =
    "mkdir -p /www && echo served-by-the-workload > /www/index.html && exec httpd -f -p 8080 -h /www";

/// Caddy's reverse proxy on 127.0.0.1:`from` to 127.0.0.1:`to` (plain HTTP, no admin
/// endpoint), once it listens; none without Caddy.
fn caddy(dir: &TempDir, from: u16, to: u16) -> Option<Child> {
    Command::new("caddy").arg("version").output().ok()?;
    let config = dir.0.join("Caddyfile");
    let text = format!(
        "{{\n\tadmin off\n\tauto_https off\n}}\nhttp://:{from} {{\n\tbind 127.0.0.1\n\treverse_proxy 127.0.0.1:{to}\n}}\n"
    );
    std::fs::write(&config, text).unwrap();
    let child = Command::new("caddy")
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&config)
        .env("HOME", &dir.0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", from)).is_err() {
        if started.elapsed() > Duration::from_secs(10) {
            println!("caddy did not listen: left out");
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child)
}

fn line(name: &str, runs: &[Measured], direct: f64) {
    let rate = runs.iter().map(|m| m.rate).sum::<f64>() / runs.len() as f64;
    let errors: u64 = runs.iter().map(|m| m.errors).sum();
    let last = runs.last().unwrap();
    println!(
        "  {name:<22} {rate:>10.0} req/s   p50 {:>9}   p99 {:>9}   ratio {:>5.2}   non-2xx {errors}",
        last.p50,
        last.p99,
        rate / direct
    );
}

#[tokio::main]
async fn main() {
    if !docker_ready() || !wrk_installed() {
        std::process::exit(1);
    }
    let rounds = setting("CAPSTAN_BENCH_ROUNDS", 2).max(1);
    let dir = TempDir::new();
    let database = format!("sqlite://{}", dir.0.join("bench.db").display());
    let router_port = free_port();
    let server = Server::start_with(
        &dir,
        &database,
        None,
        &[
            ("CAPSTAN_ENGINE", "docker"),
            ("CAPSTAN_HOST_IMAGES", "capstan-test/"),
            ("CAPSTAN_LOG", "warn"),
            ("CAPSTAN_ROUTER_LISTEN", &format!("127.0.0.1:{router_port}")),
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
    let id = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "bench", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", SCRIPT],
                "cpu": 1000, "memory": 256,
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
            }),
        )
        .await;
    client
        .call(
            reqwest::Method::POST,
            &format!("/container/{id}/deploy"),
            None,
        )
        .await;
    let done = settle(
        &client,
        &format!("/container/{id}/status"),
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(done["state"], "DEPLOYED", "{done}");
    let link = loop {
        let links = client.get(&format!("/container/{id}/link")).await;
        if let Some(url) = links["results"][0]["url"].as_str() {
            break url.to_string();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let name = link
        .strip_prefix("http://")
        .and_then(|rest| rest.rsplit_once(':'))
        .map(|(name, _)| name.to_string())
        .unwrap();
    let published = host_port(&id);
    // The router reads its routes every second: let it.
    let routed = format!("http://127.0.0.1:{router_port}/");
    let host = format!("Host: {name}");
    let started = Instant::now();
    while status_through(&routed, &name).await != 200 {
        assert!(started.elapsed() < Duration::from_secs(20), "never routed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let caddy_port = free_port();
    let mut proxy = caddy(&dir, caddy_port, published);
    let (mut direct, mut router, mut through_caddy) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        direct.push(wrk(&format!("http://127.0.0.1:{published}/"), &[], None));
        router.push(wrk(&routed, std::slice::from_ref(&host), None));
        if proxy.is_some() {
            through_caddy.push(wrk(&format!("http://127.0.0.1:{caddy_port}/"), &[], None));
        }
    }
    let base = direct.iter().map(|m| m.rate).sum::<f64>() / direct.len() as f64;
    println!(
        "GET / of a busybox httpd container, wrk {} threads, {} connections, {} s, {rounds} round(s) each, in turn:",
        setting("CAPSTAN_BENCH_THREADS", 2),
        setting("CAPSTAN_BENCH_CONNECTIONS", 64),
        setting("CAPSTAN_BENCH_SECS", 5)
    );
    line("published port", &direct, base);
    line("Capstan's router", &router, base);
    if !through_caddy.is_empty() {
        line("Caddy reverse-proxy", &through_caddy, base);
    }
    if let Some(child) = proxy.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
    docker_cleanup(&org);
    server.stop();
}

/// One request through the router, its status.
async fn status_through(url: &str, host: &str) -> u16 {
    reqwest::Client::new()
        .get(url)
        .header("host", host)
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}
