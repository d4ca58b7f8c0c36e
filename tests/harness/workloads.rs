//! What the tests ask of deployed workloads: their containers and ports, through the router,
//! their output and logs, their deletion.

use super::*;

pub async fn post(client: &Client, path: &str, body: Value) -> Value {
    let (status, answer) = client.call(reqwest::Method::POST, path, Some(body)).await;
    assert!(
        (200..300).contains(&status),
        "POST {path}: {status} {answer}"
    );
    answer
}

/// A container of the test image serving `page` at `/` on its public port 8080; its id.
pub async fn httpd(client: &Client, env: &str, registry: &str, name: &str, page: &str) -> String {
    client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": name, "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", format!("mkdir -p /www && echo {page} > /www/index.html && exec httpd -f -p 8080 -h /www")],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
            }),
        )
        .await
}

/// The containers Capstan runs for a service, by Docker's own account.
/// The installation whose engine made the environment's network (the label everything it
/// makes carries), for objects a test makes by hand as that installation would.
pub fn installation_of(environment: &str) -> String {
    let network = docker(&[
        "network",
        "ls",
        "-q",
        "--filter",
        &format!("label=capstan.environment={environment}"),
    ])
    .unwrap();
    let network = network.lines().next().expect("the environment's network");
    docker(&[
        "network",
        "inspect",
        "-f",
        "{{index .Labels \"capstan.installation\"}}",
        network,
    ])
    .unwrap()
    .trim()
    .to_string()
}

pub fn containers_of(service: &str) -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=capstan.service={service}"),
        "--format",
        "{{.ID}} {{.State}}",
    ])
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect()
}

/// The host port on 127.0.0.1 where the service's first replica publishes its port 8080.
pub fn host_port(service: &str) -> u16 {
    let id = containers_of(service)[0]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let mapping = docker(&["port", &id, "8080/tcp"]).unwrap();
    let first = mapping.lines().next().unwrap();
    assert!(
        first.starts_with("127.0.0.1:"),
        "published on loopback: {first}"
    );
    first.rsplit(':').next().unwrap().parse().unwrap()
}

/// GET `path` of a link the router serves (`http://NAME:PORT`): sent to 127.0.0.1 at its port,
/// the name as the Host header (no resolver is asked for `*.localhost`).
pub async fn through_router_once(link: &str, path: &str) -> reqwest::Response {
    let rest = link.strip_prefix("http://").expect("an http link");
    let (host, port) = rest.rsplit_once(':').expect("a link with its port");
    reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("host", host)
        .send()
        .await
        .unwrap()
}

/// The same, once the router routes the name to a replica: it reads its routes every second,
/// so a link (or a redeployed replica) can be out before it does.
pub async fn through_router(link: &str, path: &str) -> reqwest::Response {
    let started = Instant::now();
    loop {
        let answer = through_router_once(link, path).await;
        let routed = ![404, 502, 503].contains(&answer.status().as_u16());
        if routed || started.elapsed() > Duration::from_secs(10) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn fetch(port: u16, path: &str) -> String {
    let url = format!("http://127.0.0.1:{port}{path}");
    reqwest::get(&url).await.unwrap().text().await.unwrap()
}

/// The lines a service printed, once one holds `holding`.
pub async fn output_of(client: &Client, kind: &str, id: &str, holding: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let lines = client.get(&format!("/{kind}/{id}/log")).await;
        let text = lines["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        if text.contains(holding) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no line holding {holding}: {lines}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asks for `path`'s deletion, which must be taken (202: under way; 204: done).
pub async fn delete_asked(client: &Client, path: &str) {
    let (status, body) = client.call(reqwest::Method::DELETE, path, None).await;
    assert!(
        status == 202 || status == 204,
        "DELETE {path}: {status} {body}"
    );
}

/// Deletes `path` and waits until it answers 404.
pub async fn deleted(client: &Client, path: &str) {
    delete_asked(client, path).await;
    let started = Instant::now();
    loop {
        let (status, body) = client.call(reqwest::Method::GET, path, None).await;
        if status == 404 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{path} stays: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The service's status once settled; a state other than `want` fails with the reason its
/// last request gave.
pub async fn settled_in(client: &Client, kind: &str, id: &str, want: &str) {
    // Waited for on the server: a deployment's steps can take a while, and polling them
    // would spend the organization's rate limit.
    let path = format!("/{kind}/{id}/status?wait=30");
    let status = settle(client, &path, Duration::from_secs(120)).await;
    if status["state"] != want {
        let history = client
            .get(&format!("/{kind}/{id}/deploymentHistoryV2"))
            .await;
        panic!(
            "{kind} {id} is {} where {want} was expected: {history}",
            status["state"]
        );
    }
}

/// The environment's deployment log, as text.
pub async fn deployment_log(client: &Client, env: &str) -> String {
    client
        .get(&format!("/environment/{env}/logs"))
        .await
        .to_string()
}
