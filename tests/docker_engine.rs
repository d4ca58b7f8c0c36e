//! The built binary with the Docker engine, on SQLite and PostgreSQL: real containers and jobs
//! from a local image, reached only through 127.0.0.1 (their published ports). Needs a Docker
//! daemon and `busybox` on the host (CI installs both); without them the tests fail under CI
//! and say why elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod docker_live;
mod harness;

use harness::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

const SECRET: &str = "hunter2-s3cret-of-web";

/// The container's first link, once its engine has reported where it runs.
async fn link_of(client: &Client, id: &str) -> String {
    let path = format!("/container/{id}/link");
    let links = eventually(
        Duration::from_secs(20),
        || "no link".to_string(),
        async || {
            let links = client.get(&path).await;
            links["results"][0]["url"].is_string().then_some(links)
        },
    )
    .await;
    assert_eq!(links["results"][0]["is_default"], true, "{links}");
    assert_eq!(links["results"][0]["internal_port"], 8080, "{links}");
    links["results"][0]["url"].as_str().unwrap().to_string()
}

async fn a_container_and_a_job_run_on_docker(database: Option<&str>) {
    let case = Case::start(database, &[]).await;
    let (client, env, org, registry) = (&case.client, &case.env, &case.org, &case.registry);
    let (cluster, project) = case.cluster_and_project().await;
    let script =
        "mkdir -p /www && env > /www/env.txt && cat /etc/app/config.toml > /www/config.txt \
                  && echo web-started-and-serving && echo token-is-$TOKEN \
                  && exec httpd -f -p 8080 -h /www";
    let web = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "web", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", script],
                "cpu": 250, "memory": 64,
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                "healthchecks": {"readiness_probe": {"type": {"http": {"port": 8080, "path": "/env.txt"}},
                    "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                    "success_threshold": 1, "failure_threshold": 30}},
            }),
        )
        .await;
    post(
        client,
        &format!("/project/{project}/environmentVariable"),
        json!({"key": "FROM_PROJECT", "value": "p-value"}),
    )
    .await;
    post(
        client,
        &format!("/environment/{env}/environmentVariable"),
        json!({"key": "FROM_ENVIRONMENT", "value": "e-value"}),
    )
    .await;
    post(
        client,
        &format!("/container/{web}/secret"),
        json!({"key": "TOKEN", "value": SECRET}),
    )
    .await;
    post(
        client,
        &format!("/container/{web}/environmentVariable"),
        json!({"key": "CONFIG", "value": "answer = 42", "mount_path": "/etc/app/config.toml"}),
    )
    .await;

    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    assert_eq!(containers_of(&web).len(), 1);
    let port = host_port(&web);
    let seen = fetch(port, "/env.txt").await;
    for expected in [
        "FROM_PROJECT=p-value",
        "FROM_ENVIRONMENT=e-value",
        &format!("TOKEN={SECRET}"),
    ] {
        assert!(seen.contains(expected), "{expected} in {seen}");
    }
    assert_eq!(fetch(port, "/config.txt").await.trim(), "answer = 42");
    // Its link answers: what Docker runs is observed and kept, for every instance to read.
    // The link is the router's name for the port, the same across redeploys.
    let url = link_of(client, &web).await;
    assert!(
        url.starts_with(&format!(
            "http://p8080-z{}.{ROUTER_DOMAIN}:",
            web.replace('-', "")
        )),
        "{url}"
    );
    assert!(through_router(&url, "/env.txt")
        .await
        .text()
        .await
        .unwrap()
        .contains("FROM_ENVIRONMENT=e-value"));
    let unknown = url.replacen("p8080", "p9999", 1);
    assert_eq!(through_router_once(&unknown, "/").await.status(), 404);
    let everything = client.get(&format!("/environment/{env}/link")).await;
    assert_eq!(everything["results"][0]["url"], json!(url), "{everything}");
    assert_eq!(everything["results"][0]["service_type"], "CONTAINER");
    let id = containers_of(&web)[0]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let limits = docker(&[
        "inspect",
        "--format",
        "{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}} {{.HostConfig.Privileged}}",
        &id,
    ])
    .unwrap();
    assert_eq!(limits, format!("250000000 {} false", 64 * 1024 * 1024));

    // What it printed is kept, its secret masked; the live API follows it.
    let printed = output_of(client, "container", &web, "token-is-").await;
    assert!(printed.contains("web-started-and-serving"), "{printed}");
    assert!(printed.contains("token-is-********"), "{printed}");
    assert!(!printed.contains(SECRET), "no secret value in the output");
    let header = format!("Token {}", client.token);
    let mut output = live(
        case.base(),
        &format!(
            "/service/logs?organization={org}&cluster={cluster}&project={project}\
             &environment={env}&service={web}&query=serving"
        ),
        Some(&header),
    )
    .await
    .unwrap();
    let line = output.next(Duration::from_secs(10)).await.unwrap();
    assert_eq!(line["message"], "web-started-and-serving", "{line}");
    assert!(line["pod_name"].as_str().unwrap().starts_with("capstan-"));
    assert_eq!(line["version"], TAG);
    assert!(line["created_at"].as_i64().unwrap() > 1_700_000_000_000);
    let mut status = live(
        case.base(),
        &format!("/service/status?organization={org}&cluster={cluster}"),
        Some(&header),
    )
    .await
    .unwrap();
    let running = status
        .until(Duration::from_secs(10), |m| {
            m["environments"][0]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["id"] == web.as_str() && c["state"] == "RUNNING")
        })
        .await;
    let pod = running["environments"][0]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == web.as_str())
        .unwrap()["pods"][0]
        .clone();
    assert_eq!(pod["state"], "RUNNING", "{pod}");
    assert_eq!(
        pod["containers"][0]["image"],
        format!("{IMAGE}:{TAG}"),
        "{pod}"
    );

    // A redeploy under a steady stream of requests drops none: the new container starts
    // beside the old one, on a port of its own, the router switches to it once it is ready,
    // and the old one goes once the router no longer sends it requests.
    let stream = Stream::start(&url, "/env.txt");
    post(client, &format!("/container/{web}/redeploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let streamed = stream.stop().await;
    assert!(
        streamed.failures.is_empty(),
        "{} of {} requests failed: {:?}",
        streamed.failures.len(),
        streamed.answered,
        streamed.failures
    );
    assert_eq!(
        streamed.hosts.len(),
        2,
        "the old container answered, then the new one: {:?}",
        streamed.hosts
    );
    assert_eq!(containers_of(&web).len(), 1, "no duplicate, no orphan");
    assert_ne!(
        containers_of(&web)[0].split(' ').next().unwrap(),
        id,
        "a new container"
    );
    assert_ne!(host_port(&web), port, "on a port of its own");
    let port = host_port(&web);
    assert_eq!(link_of(client, &web).await, url, "and the same name");
    let done = client.get(&format!("/container/{web}/status")).await;
    let steps: Vec<&str> = done["steps"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["step_name"].as_str())
        .collect();
    assert!(
        steps.ends_with(&["DEPLOYMENT", "ROUTER_DEPLOYMENT"]),
        "the router's switch is a step of its own: {done}"
    );
    // The ingress is the router's state: with its one container stopped by hand, the service
    // is still DEPLOYED, but the router has nothing to send its requests to.
    let ingress = format!("/CONTAINER/{web}/ingressDeploymentStatus");
    assert_eq!(client.get(&ingress).await["status"], "DEPLOYED");
    let running = containers_of(&web)[0]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    docker(&["stop", "-t", "1", &running]).unwrap();
    eventually(
        Duration::from_secs(20),
        || "the router still has a replica".to_string(),
        async || (client.get(&ingress).await["status"] == "STOPPED").then_some(()),
    )
    .await;
    assert_eq!(
        client.get(&format!("/container/{web}/status")).await["state"],
        "DEPLOYED"
    );
    post(
        client,
        &format!("/container/{web}/restart-service"),
        json!({}),
    )
    .await;
    settled_in(client, "container", &web, "RESTARTED").await;
    assert!(fetch(port, "/env.txt").await.contains("FROM_PROJECT"));
    post(client, &format!("/container/{web}/stop"), json!({})).await;
    settled_in(client, "container", &web, "STOPPED").await;
    assert!(
        containers_of(&web).iter().all(|c| c.ends_with("exited")),
        "{:?}",
        containers_of(&web)
    );
    // Stopped, its name is still the router's, which says it does not run.
    eventually(
        Duration::from_secs(20),
        || "still routed".to_string(),
        async || (through_router_once(&url, "/env.txt").await.status() == 503).then_some(()),
    )
    .await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    assert_eq!(containers_of(&web).len(), 1, "the stopped one went");
    assert_eq!(through_router(&url, "/env.txt").await.status(), 200);

    // One that exits at start ends in error, with its reason.
    let crash = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "crash", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh", "arguments": ["-c", "echo crashing-now; exit 3"]}),
        )
        .await;
    post(client, &format!("/container/{crash}/deploy"), json!({})).await;
    settled_in(client, "container", &crash, "DEPLOYMENT_ERROR").await;
    let history = client
        .get(&format!("/container/{crash}/deploymentHistory"))
        .await;
    let reason = history["results"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("exited with code 3") && reason.contains("crashing-now"),
        "{reason}"
    );
    assert!(
        containers_of(&crash).is_empty(),
        "a failed workload is not left crash-looping"
    );

    // One that crashes after it was deployed shows ERROR live.
    let late = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "late", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh", "arguments": ["-c", "sleep 3; echo giving-up; exit 5"]}),
        )
        .await;
    post(client, &format!("/container/{late}/deploy"), json!({})).await;
    settled_in(client, "container", &late, "DEPLOYED").await;
    let crashed = status
        .until(Duration::from_secs(60), |m| {
            m["environments"][0]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["id"] == late.as_str() && c["state"] == "ERROR")
        })
        .await;
    assert_eq!(crashed["environments"][0]["state"], "ERROR", "{crashed}");
    let pod = crashed["environments"][0]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == late.as_str())
        .unwrap()["pods"][0]
        .clone();
    assert_eq!(
        pod["containers"][0]["last_terminated_state"]["exit_code"], 5,
        "{pod}"
    );
    delete_asked(client, &format!("/container/{late}")).await;

    // Jobs: one succeeds, one fails; their output is in the deployment log.
    let job = |name: &str, script: &str| {
        json!({"name": name, "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
               "schedule": {"on_start": {"entrypoint": "sh", "arguments": ["-c", script]}},
               "max_nb_restart": 0, "max_duration_seconds": 30})
    };
    let good = client
        .create(
            &format!("/environment/{env}/job"),
            job("good", "echo job-did-its-work"),
        )
        .await;
    let bad = client
        .create(
            &format!("/environment/{env}/job"),
            job("bad", "echo job-gives-up; exit 4"),
        )
        .await;
    post(client, &format!("/job/{good}/deploy"), json!({})).await;
    settled_in(client, "job", &good, "DEPLOYED").await;
    post(client, &format!("/job/{bad}/deploy"), json!({})).await;
    settled_in(client, "job", &bad, "DEPLOYMENT_ERROR").await;
    let history = client.get(&format!("/job/{bad}/deploymentHistory")).await;
    let reason = history["results"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.contains("exited with code 4"), "{reason}");
    // A job's output is its own too; its failed execution is kept until cleaned.
    let printed = output_of(client, "job", &good, "job-did-its-work").await;
    assert!(printed.contains("job-did-its-work"), "{printed}");
    assert_eq!(containers_of(&bad).len(), 1, "the failed execution is kept");
    let cleaned = post(client, &format!("/job/{bad}/cleanFailedJob"), json!({})).await;
    assert_eq!(
        cleaned["clean_kubernetes_jobs"].as_array().unwrap().len(),
        1,
        "{cleaned}"
    );
    assert!(containers_of(&bad).is_empty());
    let none = post(
        client,
        &format!("/environment/{env}/cleanFailedJobs"),
        json!({}),
    )
    .await;
    assert_eq!(
        none,
        json!({"clean_job_ids": [], "clean_kubernetes_jobs": []})
    );

    let logs = client.get(&format!("/environment/{env}/logs")).await;
    let text = logs.to_string();
    assert!(
        text.contains("job-did-its-work"),
        "a job's output is in the log"
    );
    assert!(text.contains("started container"), "{text}");
    assert!(
        !text.contains(SECRET),
        "no secret value in the deployment log"
    );

    // Deleting removes what runs.
    delete_asked(client, &format!("/container/{web}")).await;
    eventually(
        Duration::from_secs(60),
        || "the container stays".to_string(),
        async || (containers_of(&web).is_empty()).then_some(()),
    )
    .await;
    let own = case.own_log();
    let leaks: Vec<&str> = own.lines().filter(|l| l.contains(SECRET)).collect();
    assert!(
        leaks.is_empty(),
        "no secret value in Capstan's own log: {leaks:#?}"
    );
}

/// A case whose custom domains resolving to this machine pass their check, and whose router
/// serves HTTPS with a certificate for `shop.localhost` (its authority's `ca.pem` in the
/// directory returned) at the port returned.
async fn shop_case(database: Option<&str>) -> (Case, TempDir, String) {
    let certificates = TempDir::new();
    test_certificate(&certificates.0, "shop.localhost");
    let tls_port = free_port().to_string();
    let case = Case::start(
        database,
        &[
            ("CAPSTAN_CUSTOM_DOMAIN_TARGET", "127.0.0.1"),
            (
                "CAPSTAN_ROUTER_CERTIFICATES",
                certificates.0.to_str().unwrap(),
            ),
            (
                "CAPSTAN_ROUTER_TLS_LISTEN",
                &format!("127.0.0.1:{tls_port}"),
            ),
        ],
    )
    .await;
    (case, certificates, tls_port)
}

/// A custom domain whose DNS check passes (`*.localhost` names resolve to the machine, the
/// target here) is routed to its service, over HTTP and over HTTPS with a certificate from the
/// router's directory; one whose check fails (`.invalid` names resolve nowhere) is not.
async fn custom_domains_answer_over_http_and_https(database: Option<&str>) {
    let (case, certificates, tls_port) = shop_case(database).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let shop = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "shop", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", "mkdir -p /www && env > /www/env.txt && exec httpd -f -p 8080 -h /www"],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
            }),
        )
        .await;
    for domain in ["shop.localhost", "nowhere.invalid"] {
        post(
            client,
            &format!("/container/{shop}/customDomain"),
            json!({"domain": domain, "generate_certificate": false}),
        )
        .await;
    }
    post(client, &format!("/container/{shop}/deploy"), json!({})).await;
    settled_in(client, "container", &shop, "DEPLOYED").await;
    let link = link_of(client, &shop).await;
    let router_port = link.rsplit(':').next().unwrap();
    let custom = format!("http://shop.localhost:{router_port}");
    let answer = through_router(&custom, "/env.txt").await;
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("HOSTNAME="));
    // Its links list the generated name and the custom domain whose check passes (the
    // user's: not Capstan's domain), not the one whose check fails.
    let links = client.get(&format!("/container/{shop}/link")).await;
    let listed: Vec<(String, bool)> = links["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["url"].as_str().unwrap().to_string(),
                l["is_qovery_domain"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [(link.clone(), true), (custom.clone(), false)],
        "{links}"
    );
    let elsewhere = format!("http://nowhere.invalid:{router_port}");
    assert_eq!(
        through_router_once(&elsewhere, "/env.txt").await.status(),
        404,
        "a domain whose check fails is not routed"
    );
    let checked = client
        .get(&format!("/container/{shop}/checkCustomDomain"))
        .await;
    let results = checked["results"].as_array().unwrap();
    let status_of = |name: &str| {
        results
            .iter()
            .find(|r| r["domain_name"] == name)
            .map(|r| r["status"].clone())
    };
    assert_eq!(
        status_of("shop.localhost"),
        Some(json!("MATCHES_LOAD_BALANCER_HOST")),
        "{checked}"
    );
    assert_eq!(
        status_of("nowhere.invalid"),
        Some(json!("DOMAIN_NOT_CONFIGURED")),
        "{checked}"
    );

    let authority = std::fs::read(certificates.0.join("ca.pem")).unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&authority).unwrap())
        .resolve(
            "shop.localhost",
            std::net::SocketAddr::from(([127, 0, 0, 1], tls_port.parse().unwrap())),
        )
        .build()
        .unwrap();
    let answer = https
        .get(format!("https://shop.localhost:{tls_port}/env.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("HOSTNAME="));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_custom_domains_answer_over_http_and_https() {
    if !docker_ready() {
        return;
    }
    custom_domains_answer_over_http_and_https(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_custom_domains_answer_over_http_and_https() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    custom_domains_answer_over_http_and_https(Some(&url)).await;
}

/// The answer to GET `url` once its handshake succeeds (within `within`: a certificate
/// ordered, or read again after a restart).
async fn answered_over_https(
    https: &reqwest::Client,
    url: &str,
    within: Duration,
    case: &Case,
) -> reqwest::Response {
    let failed = std::cell::RefCell::new(String::new());
    eventually(
        within,
        || {
            let why = failed.borrow();
            format!("no certificate served for {url}: {why}\n{}", case.own_log())
        },
        async || match https.get(url).send().await {
            Ok(answer) => Some(answer),
            Err(e) => {
                *failed.borrow_mut() = e.to_string();
                None
            }
        },
    )
    .await
}

/// With ACME on, a generated name the certificates' directory has no certificate for gets one
/// from the ACME authority (pebble, here), proven over TLS-ALPN-01 on the router's HTTPS
/// listener, and served; after a restart, with the authority gone, the kept order is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_orders_a_certificate_for_a_routed_name_and_keeps_it() {
    if !docker_ready() {
        return;
    }
    let tls_port = free_port();
    let mut pebble = Pebble::start(tls_port).await;
    let certificates = TempDir::new();
    let mut case = Case::start(
        None,
        &[
            (
                "CAPSTAN_ROUTER_CERTIFICATES",
                certificates.0.to_str().unwrap(),
            ),
            (
                "CAPSTAN_ROUTER_TLS_LISTEN",
                &format!("127.0.0.1:{tls_port}"),
            ),
            ("CAPSTAN_ROUTER_ACME", &pebble.directory),
            ("CAPSTAN_ROUTER_ACME_ROOTS", pebble.trust.to_str().unwrap()),
        ],
    )
    .await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let web = httpd(client, env, registry, "web", "ordered").await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let link = link_of(client, &web).await;
    let name = link
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap()
        .to_string();
    let issuer = pebble.issuer().await;
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&issuer).unwrap())
        .resolve(
            &name,
            std::net::SocketAddr::from(([127, 0, 0, 1], tls_port)),
        )
        .build()
        .unwrap();
    let url = format!("https://{name}:{tls_port}/");
    let answer = answered_over_https(&https, &url, Duration::from_secs(90), &case).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap().trim(), "ordered");
    let kept = certificates.0.join("acme");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&kept).unwrap().permissions());
    assert_eq!(
        mode & 0o777,
        0o700,
        "the orders' folder is the owner's only"
    );
    assert!(
        !case.own_log().contains("PRIVATE KEY"),
        "no key reaches the log"
    );

    pebble.stop();
    case.crash();
    case.restart().await;
    // The kept certificate, with the authority gone.
    let answer = answered_over_https(&https, &url, Duration::from_secs(30), &case).await;
    assert_eq!(answer.text().await.unwrap().trim(), "ordered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_container_and_a_job_run_on_docker() {
    if !docker_ready() {
        return;
    }
    a_container_and_a_job_run_on_docker(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_container_and_a_job_run_on_docker() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_container_and_a_job_run_on_docker(Some(&url)).await;
}

/// kill -9 of Capstan with a workload running: it runs on, is found again, and a redeploy
/// replaces it (one set of containers); a container Capstan's labels name for a service that
/// does not exist is removed at start-up.
async fn a_killed_capstan_adopts_what_runs_and_removes_what_is_gone(database: Option<&str>) {
    let mut case = Case::start(database, &[]).await;
    let (env, org, registry) = (case.env.clone(), case.org.clone(), case.registry.clone());
    let client = &case.client;
    let web = httpd(client, &env, &registry, "web", "alive").await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let url = link_of(client, &web).await;
    case.crash();

    assert_eq!(
        fetch(host_port(&web), "/").await.trim(),
        "alive",
        "the workload outlives Capstan"
    );
    let orphan = uuid::Uuid::new_v4();
    // Made as this installation makes its workloads: marked as its own.
    let installation = installation_of(&case.env);
    let stray = docker(&[
        "run",
        "-d",
        "--label",
        &format!("capstan.service={orphan}"),
        "--label",
        &format!("capstan.installation={installation}"),
        "--label",
        &format!("capstan.organization={org}"),
        "--label",
        &format!("capstan.environment={}", uuid::Uuid::new_v4()),
        &format!("{IMAGE}:{TAG}"),
        "sleep",
        "300",
    ])
    .unwrap();
    // As if the stray had been a database: its data's volume goes with it.
    let stray_volume = format!("capstan-data-{}", orphan.simple());
    docker(&[
        "volume",
        "create",
        "--label",
        &format!("capstan.organization={org}"),
        &stray_volume,
    ])
    .unwrap();

    case.restart().await;
    let client = &case.client;
    assert_eq!(
        link_of(client, &web).await,
        url,
        "found again where it runs"
    );
    eventually(
        Duration::from_secs(30),
        || format!("the stray container {stray} stays"),
        async || (containers_of(&orphan.to_string()).is_empty()).then_some(()),
    )
    .await;
    eventually(
        Duration::from_secs(30),
        || format!("the stray volume {stray_volume} stays"),
        async || (docker(&["volume", "inspect", &stray_volume]).is_err()).then_some(()),
    )
    .await;
    post(client, &format!("/container/{web}/redeploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    assert_eq!(containers_of(&web).len(), 1, "one set of containers");

    // Killed during a deployment: the request ends once its claim lapses, leaving one set of
    // containers, and the next deployment replaces it.
    let slow = ready_on_8080(
        client,
        &env,
        &registry,
        "slow",
        "sleep 8; mkdir -p /www && echo late > /www/index.html && exec httpd -f -p 8080 -h /www",
    )
    .await;
    post(client, &format!("/container/{slow}/deploy"), json!({})).await;
    eventually(
        Duration::from_secs(30),
        || "never started".to_string(),
        async || (!(containers_of(&slow).is_empty())).then_some(()),
    )
    .await;
    let status = killed_and_settled(&mut case, &slow).await;
    let client = &case.client;
    assert!(
        status["state"] == "DEPLOYED" || status["state"] == "DEPLOYMENT_ERROR",
        "the cut request ended: {status}"
    );
    // Its final state says what runs: its replica if it ended DEPLOYED, none if in error.
    let expected = usize::from(status["state"] == "DEPLOYED");
    eventually(
        Duration::from_secs(30),
        || format!("{status}: {:?}", containers_of(&slow)),
        async || (containers_of(&slow).len() == expected).then_some(()),
    )
    .await;
    post(client, &format!("/container/{slow}/deploy"), json!({})).await;
    settled_in(client, "container", &slow, "DEPLOYED").await;
    assert_eq!(containers_of(&slow).len(), 1, "one set of containers");
    // Ready means the workload listens (Docker's proxy accepts on the port before it does).
    assert_eq!(fetch(host_port(&slow), "/").await.trim(), "late");
    if status["state"] == "DEPLOYMENT_ERROR" {
        let log = client.get(&format!("/environment/{env}/logs")).await;
        assert!(
            log.to_string().contains("stopped before it finished"),
            "the cut request's log says why it ended: {log}"
        );
    }

    // Killed while a redeploy's new replica warms up beside the old one (the router's
    // rolling switch): the cut request ends in error and leaves the previous set only.
    let previous = container_ids(&slow)[0].clone();
    post(client, &format!("/container/{slow}/redeploy"), json!({})).await;
    eventually(
        Duration::from_secs(30),
        || "no new replica".to_string(),
        async || (containers_of(&slow).len() >= 2).then_some(()),
    )
    .await;
    let status = killed_and_settled(&mut case, &slow).await;
    assert_eq!(status["state"], "DEPLOYMENT_ERROR", "{status}");
    eventually(
        Duration::from_secs(30),
        || {
            let left = container_ids(&slow);
            format!("the previous set only: {left:?} (previous {previous})")
        },
        async || (container_ids(&slow) == [previous.clone()]).then_some(()),
    )
    .await;
    assert_eq!(fetch(host_port(&slow), "/").await.trim(), "late");

    killed_while_the_previous_replica_drains(&mut case).await;
    let client = &case.client;

    delete_asked(client, &format!("/container/{web}")).await;
    eventually(
        Duration::from_secs(60),
        || "the container stays".to_string(),
        async || (containers_of(&web).is_empty()).then_some(()),
    )
    .await;
}

/// A container running `script` (sh -c) that is ready once it listens on its public port 8080.
async fn ready_on_8080(
    client: &Client,
    env: &str,
    registry: &str,
    name: &str,
    script: &str,
) -> String {
    client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": name, "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", script],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                "healthchecks": {"readiness_probe": {"type": {"tcp": {"port": 8080}},
                    "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                    "success_threshold": 1, "failure_threshold": 60}},
            }),
        )
        .await
}

/// Killed while a redeploy's previous replica drains (it ignores SIGTERM, so its stop takes
/// the grace period): the new replica was ready and took the routes, so the request ends
/// DEPLOYED and the new replica alone runs and answers.
async fn killed_while_the_previous_replica_drains(case: &mut Case) {
    let (env, registry) = (case.env.clone(), case.registry.clone());
    let client = &case.client;
    let drain = ready_on_8080(
        client,
        &env,
        &registry,
        "draining",
        "trap '' TERM; mkdir -p /www; hostname > /www/index.html; httpd -f -p 8080 -h /www & wait",
    )
    .await;
    post(client, &format!("/container/{drain}/deploy"), json!({})).await;
    settled_in(client, "container", &drain, "DEPLOYED").await;
    let previous = container_ids(&drain);
    post(client, &format!("/container/{drain}/redeploy"), json!({})).await;
    let retiring = || {
        docker(&[
            "ps",
            "-a",
            "--filter",
            &format!("label=capstan.service={drain}"),
            "--format",
            "{{.Names}}",
        ])
        .unwrap()
        .lines()
        .any(|n| n.ends_with("-retiring"))
    };
    eventually(
        Duration::from_secs(60),
        || format!("never retired: {:?}", containers_of(&drain)),
        async || retiring().then_some(()),
    )
    .await;
    // Past the switch's second settle (3 s): the previous replica's stop has begun.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        container_ids(&drain).contains(&previous[0]),
        "the previous replica drains: {:?}",
        containers_of(&drain)
    );
    let status = killed_and_settled(case, &drain).await;
    assert_eq!(status["state"], "DEPLOYED", "{status}");
    let now = eventually(
        Duration::from_secs(30),
        || {
            let left = containers_of(&drain);
            format!("the new replica alone: {left:?} (previous {previous:?})")
        },
        async || {
            let left = containers_of(&drain);
            let alone = left.len() == 1
                && !left[0].starts_with(&previous[0])
                && left[0].ends_with("running");
            alone.then(|| left[0].split(' ').next().unwrap().to_string())
        },
    )
    .await;
    assert_eq!(fetch(host_port(&drain), "/").await.trim(), now);
    let log = deployment_log(&case.client, &env).await;
    assert!(log.contains("during the router's switch"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_killed_capstan_adopts_what_runs_and_removes_what_is_gone() {
    if !docker_ready() {
        return;
    }
    a_killed_capstan_adopts_what_runs_and_removes_what_is_gone(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_killed_capstan_adopts_what_runs_and_removes_what_is_gone() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_killed_capstan_adopts_what_runs_and_removes_what_is_gone(Some(&url)).await;
}

/// `CAPSTAN_ENGINE=docker` with no daemon stops start-up with one line; `auto` falls back to
/// the simulated engine and says why. Neither needs a daemon.
#[tokio::test]
async fn without_a_daemon_docker_stops_start_up_and_auto_falls_back() {
    let dir = TempDir::new();
    let nowhere = "unix:///nonexistent/capstan-test/docker.sock";
    let out = Command::new(bin())
        .arg("serve")
        .current_dir(&dir.0)
        .env("CAPSTAN_DATABASE_URL", "sqlite::memory:")
        .env("CAPSTAN_SECRET_KEY", TEST_KEY)
        .env("CAPSTAN_LISTEN", format!("127.0.0.1:{}", free_port()))
        .env("CAPSTAN_LOG", "warn")
        .env("CAPSTAN_ENGINE", "docker")
        .env("DOCKER_HOST", nowhere)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("CAPSTAN_ENGINE=docker"), "{stderr}");

    let log = dir.0.join("auto.log");
    let server = Server::start_with(
        &dir,
        "sqlite::memory:",
        Some(&log),
        &[("CAPSTAN_ENGINE", "auto"), ("DOCKER_HOST", nowhere)],
    )
    .await;
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("deployments run on the simulated engine: no Docker daemon answered"),
        "the start-up log says which engine and why: {said}"
    );
    drop(server);
}

/// Exec probes run in the container: DEPLOYED waits for the readiness command to pass, and a
/// replica whose liveness command keeps failing is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_probes_gate_readiness_and_restart_what_is_not_alive() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[]).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    // Ready after 3 s; alive for 4 s after each start, then not.
    let script =
        "echo booting; mkdir -p /tmp; echo ok > /tmp/alive; sleep 3; echo ok > /tmp/ready; \
                  sleep 4; : > /tmp/alive; exec sleep 1000";
    let exec = |command: &str| {
        json!({"type": {"exec": {"command": ["sh", "-c", command]}},
        "initial_delay_seconds": 1, "period_seconds": 1, "timeout_seconds": 2,
        "success_threshold": 1, "failure_threshold": 2})
    };
    let probed = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "probed", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", script],
                "healthchecks": {
                    "readiness_probe": exec("test -s /tmp/ready"),
                    "liveness_probe": exec("test -s /tmp/alive"),
                },
            }),
        )
        .await;
    let asked = std::time::Instant::now();
    post(client, &format!("/container/{probed}/deploy"), json!({})).await;
    settled_in(client, "container", &probed, "DEPLOYED").await;
    assert!(
        asked.elapsed() >= Duration::from_secs(3),
        "DEPLOYED waited for the readiness command"
    );
    // What it makes is marked as this installation's: it acts only on what is.
    let ours = container_ids(&probed)[0].clone();
    let installation = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"capstan.installation\"}}",
        &ours,
    ])
    .unwrap();
    assert!(!installation.trim().is_empty(), "what it makes is marked");
    let booted = |text: &str| text.matches("booting").count();
    eventually(
        Duration::from_secs(40),
        || "never restarted for failing its liveness probe".to_string(),
        async || {
            let printed = output_of(client, "container", &probed, "booting").await;
            (booted(&printed) >= 2).then_some(())
        },
    )
    .await;
    assert_eq!(containers_of(&probed).len(), 1, "restarted, not replaced");

    // A replica of another installation sharing the daemon, its liveness probe failing the
    // same way: not this installation's to probe or restart.
    let liveness = docker(&[
        "inspect",
        "-f",
        "{{index .Config.Labels \"capstan.liveness\"}}",
        &ours,
    ])
    .unwrap();
    let foreign_service = uuid::Uuid::new_v4().to_string();
    let foreign = docker(&[
        "run",
        "-d",
        "--label",
        &format!("capstan.liveness={liveness}"),
        "--label",
        "capstan.installation=another-installation",
        "--label",
        &format!("capstan.service={foreign_service}"),
        "--label",
        &format!("capstan.organization={}", case.org),
        "--label",
        "capstan.role=service",
        &format!("{IMAGE}:{TAG}"),
        "sleep",
        "1000",
    ])
    .unwrap();
    let started_at = |id: &str| docker(&["inspect", "-f", "{{.State.StartedAt}}", id]).unwrap();
    let first_start = started_at(&foreign);
    let ours_before = started_at(&ours);
    // Ours keeps being restarted meanwhile (the prober is at work); the stranger is not.
    eventually(
        Duration::from_secs(40),
        || "the prober stopped".to_string(),
        async || (started_at(&ours) != ours_before).then_some(()),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        started_at(&foreign),
        first_start,
        "another installation's replica was restarted"
    );
    let _ = docker(&["rm", "-f", &foreign]);
    let (status, _) = client
        .call(
            reqwest::Method::DELETE,
            &format!("/container/{probed}"),
            None,
        )
        .await;
    assert!(status == 202 || status == 204, "{status}");
}

/// The reason a container's last deployment gave.
async fn reason_of(client: &Client, id: &str) -> String {
    let history = client
        .get(&format!("/container/{id}/deploymentHistory"))
        .await;
    history["results"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A pull is asked of the daemon only from a registry the outbound policy permits: a loopback
/// registry is refused, naming the setting, until the operator allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_reach_only_registries_the_outbound_policy_permits() {
    if !docker_ready() {
        return;
    }
    for (allow, refused) in [("", true), ("127.0.0.1", false)] {
        let case = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", allow)]).await;
        let (client, env, org) = (&case.client, &case.env, &case.org);
        let registry = client
            .create(
                &format!("/organization/{org}/containerRegistry"),
                json!({"name": "local", "kind": "GENERIC_CR", "url": "http://127.0.0.1:5999",
                       "config": {"username": "u", "password": "registry-secret-pw"}}),
            )
            .await;
        let missing = client
            .create(
                &format!("/environment/{env}/container"),
                json!({"name": "missing", "registry_id": registry,
                       "image_name": "capstan-test/absent", "tag": "1"}),
            )
            .await;
        post(client, &format!("/container/{missing}/deploy"), json!({})).await;
        settled_in(client, "container", &missing, "DEPLOYMENT_ERROR").await;
        let reason = reason_of(client, &missing).await;
        assert!(
            reason.contains("127.0.0.1:5999/capstan-test/absent:1"),
            "{reason}"
        );
        assert_eq!(
            reason.contains("refused by the outbound policy")
                && reason.contains("CAPSTAN_OUTBOUND_ALLOW"),
            refused,
            "{reason}"
        );
        let log = client.get(&format!("/environment/{env}/logs")).await;
        assert!(!log.to_string().contains("registry-secret-pw"));
        // The operator, who may widen the policy, is told too: a warning naming the target
        // and the setting, and never the credentials.
        let own = case.own_log();
        let warned = own.lines().find(|l| {
            l.contains("WARN") && l.contains("an outward call was refused by the outbound policy")
        });
        assert_eq!(warned.is_some(), refused, "{own}");
        if let Some(line) = warned {
            assert!(
                line.contains("127.0.0.1") && line.contains("CAPSTAN_OUTBOUND_ALLOW"),
                "{line}"
            );
        }
        assert!(!own.contains("registry-secret-pw"));
    }
}

/// A lifecycle job runs on its environment's events: `on_start` when the environment deploys,
/// `on_stop` when it stops, `on_delete` when the job goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lifecycle_job_runs_on_its_environments_events() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[]).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let say = |word: &str| json!({"entrypoint": "sh", "arguments": ["-c", format!("echo lifecycle-{word}")]});
    let job = client
        .create(
            &format!("/environment/{env}/job"),
            json!({"name": "hooks",
                   "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
                   "schedule": {"on_start": say("start"), "on_stop": say("stop"),
                                "on_delete": say("delete")},
                   "max_nb_restart": 0, "max_duration_seconds": 30}),
        )
        .await;
    post(client, &format!("/environment/{env}/deploy"), json!({})).await;
    settled_in(client, "job", &job, "DEPLOYED").await;
    let text = deployment_log(client, env).await;
    assert!(text.contains("lifecycle-start"), "{text}");
    assert!(!text.contains("lifecycle-stop"), "{text}");
    post(client, &format!("/environment/{env}/stop"), json!({})).await;
    settled_in(client, "job", &job, "STOPPED").await;
    let text = deployment_log(client, env).await;
    assert!(text.contains("lifecycle-stop"), "{text}");
    assert!(!text.contains("lifecycle-delete"), "{text}");
    delete_asked(client, &format!("/job/{job}")).await;
    eventually(
        Duration::from_secs(60),
        || "on_delete never ran".to_string(),
        async || {
            let text = deployment_log(client, env).await;
            text.contains("lifecycle-delete").then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        || "the job's executions stay".to_string(),
        async || (containers_of(&job).is_empty()).then_some(()),
    )
    .await;
}

/// A cron job's deployment keeps its schedule and runs nothing; at its time (on a clock the
/// test moves through the controls) it runs on Docker, and its output is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_runs_on_docker_at_its_schedule() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(
        None,
        &[
            ("CAPSTAN_CLOCK", "manual"),
            ("CAPSTAN_CONTROLS", "on"),
            ("CAPSTAN_CONTROLS_TOKEN", CONTROLS_TOKEN),
        ],
    )
    .await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let job = client
        .create(
            &format!("/environment/{env}/job"),
            json!({"name": "tick",
                   "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
                   "schedule": {"cronjob": {"scheduled_at": "*/5 * * * *", "timezone": "UTC",
                                            "entrypoint": "sh", "arguments": ["-c", "echo cron-tick"]}},
                   "max_nb_restart": 0, "max_duration_seconds": 30}),
        )
        .await;
    post(client, &format!("/job/{job}/deploy"), json!({})).await;
    settled_in(client, "job", &job, "DEPLOYED").await;
    assert!(
        containers_of(&job).is_empty(),
        "its deployment runs nothing"
    );
    case.advance_clock(300).await;
    let printed = output_of(client, "job", &job, "cron-tick").await;
    assert!(printed.contains("cron-tick"), "{printed}");
    settled_in(client, "job", &job, "DEPLOYED").await;
}

/// Replicas run side by side, each on its own host port, and the router balances over them (on
/// PostgreSQL, a second instance's router too) and leaves out one failing its readiness probe;
/// one stopped by hand shows STOPPED in the live status; a workload that outgrows its memory
/// ends DEPLOYMENT_ERROR, OOM-killed.
async fn replicas_a_stop_by_hand_and_an_oom_kill_are_seen(database: Option<&str>) {
    let case = Case::start(database, &[]).await;
    let (client, env, org, registry) = (&case.client, &case.env, &case.org, &case.registry);
    let (cluster, _) = case.cluster_and_project().await;
    let pair = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "pair", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"],
                "min_running_instances": 2, "max_running_instances": 2,
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                "healthchecks": {"readiness_probe": {"type": {"http": {"port": 8080, "path": "/"}},
                    "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                    "success_threshold": 1, "failure_threshold": 2}},
            }),
        )
        .await;
    post(client, &format!("/container/{pair}/deploy"), json!({})).await;
    settled_in(client, "container", &pair, "DEPLOYED").await;
    let replicas = containers_of(&pair);
    assert_eq!(replicas.len(), 2, "{replicas:?}");
    let mut answers = std::collections::BTreeSet::new();
    for replica in &replicas {
        let id = replica.split(' ').next().unwrap();
        let mapping = docker(&["port", id, "8080/tcp"]).unwrap();
        let port: u16 = mapping
            .lines()
            .next()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        answers.insert(fetch(port, "/").await.trim().to_string());
    }
    assert_eq!(
        answers.len(),
        2,
        "two replicas, each answering: {answers:?}"
    );
    // The router balances requests for the service's name over both; with several instances
    // on one database, every instance's router does.
    let url = link_of(client, &pair).await;
    let second = match database {
        Some(_) => Some(case.another_instance().await),
        None => None,
    };
    let mut urls = vec![url.clone()];
    if let Some((_, port)) = &second {
        let (name, _) = url.rsplit_once(':').unwrap();
        urls.push(format!("{name}:{port}"));
    }
    for url in &urls {
        let balanced = std::cell::RefCell::new(std::collections::BTreeSet::new());
        eventually(
            Duration::from_secs(20),
            || {
                format!(
                    "the router at {url} sent every request to {:?}",
                    balanced.borrow()
                )
            },
            async || {
                let answer = through_router(url, "/").await;
                if answer.status() == 200 {
                    let replica = answer.text().await.unwrap().trim().to_string();
                    balanced.borrow_mut().insert(replica);
                }
                (*balanced.borrow() == answers).then_some(())
            },
        )
        .await;
    }
    // One failing its readiness probe is taken out: every request goes to the other.
    let (sick, well) = (
        replicas[0].split(' ').next().unwrap(),
        replicas[1].split(' ').next().unwrap(),
    );
    let well_name = docker(&["exec", well, "sh", "-c", "cat /www/index.html"]).unwrap();
    docker(&["exec", sick, "sh", "-c", "rm /www/index.html"]).unwrap();
    for url in &urls {
        let mut in_a_row = 0;
        eventually(
            Duration::from_secs(20),
            || format!("the router at {url} still sends the failing replica requests"),
            async || {
                let answer = through_router_once(url, "/").await;
                let ok = answer.status() == 200;
                in_a_row = if ok && answer.text().await.unwrap().trim() == well_name {
                    in_a_row + 1
                } else {
                    0
                };
                (in_a_row >= 10).then_some(())
            },
        )
        .await;
    }
    drop(second);
    docker(&["exec", sick, "sh", "-c", "hostname > /www/index.html"]).unwrap();

    let header = format!("Token {}", client.token);
    let mut status = live(
        case.base(),
        &format!("/service/status?organization={org}&cluster={cluster}"),
        Some(&header),
    )
    .await
    .unwrap();
    let first = replicas[0].split(' ').next().unwrap().to_string();
    docker(&["stop", "-t", "1", &first]).unwrap();
    let seen = status
        .until(Duration::from_secs(30), |m| {
            m["environments"][0]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["id"] == pair.as_str())
                .flat_map(|c| c["pods"].as_array().cloned().unwrap_or_default())
                .any(|p| p["state"] == "STOPPED")
        })
        .await;
    let service = seen["environments"][0]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == pair.as_str())
        .unwrap();
    assert_eq!(service["pods"].as_array().unwrap().len(), 2, "{service}");
    assert_eq!(service["state"], "RUNNING", "one still runs: {service}");

    let greedy = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "greedy", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "memory": 16, "entrypoint": "sh", "arguments": ["-c", "x=$(cat /dev/urandom)"]}),
        )
        .await;
    post(client, &format!("/container/{greedy}/deploy"), json!({})).await;
    settled_in(client, "container", &greedy, "DEPLOYMENT_ERROR").await;
    let reason = reason_of(client, &greedy).await;
    assert!(reason.contains("OOM-killed"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_replicas_a_stop_by_hand_and_an_oom_kill_are_seen() {
    if !docker_ready() {
        return;
    }
    replicas_a_stop_by_hand_and_an_oom_kill_are_seen(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_a_stop_by_hand_and_an_oom_kill_are_seen() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    replicas_a_stop_by_hand_and_an_oom_kill_are_seen(Some(&url)).await;
}

/// A job is tried again up to `max_nb_restart` times and stopped at `max_duration_seconds`; an
/// uninstall removes a service's containers and keeps it, ready to be deployed again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_limits_hold_and_an_uninstall_removes_what_runs() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[]).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let job = |name: &str, script: &str, restarts: i64, seconds: i64| {
        json!({"name": name,
               "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
               "schedule": {"on_start": {"entrypoint": "sh", "arguments": ["-c", script]}},
               "max_nb_restart": restarts, "max_duration_seconds": seconds})
    };
    let stubborn = client
        .create(
            &format!("/environment/{env}/job"),
            job("stubborn", "echo trying; exit 3", 2, 30),
        )
        .await;
    post(client, &format!("/job/{stubborn}/deploy"), json!({})).await;
    settled_in(client, "job", &stubborn, "DEPLOYMENT_ERROR").await;
    let log = deployment_log(client, env).await;
    for attempt in 1..=3 {
        assert!(
            log.contains(&format!("job execution {attempt} exited with code 3")),
            "attempt {attempt}: {log}"
        );
    }
    assert!(!log.contains("job execution 4"), "{log}");
    let slow = client
        .create(
            &format!("/environment/{env}/job"),
            job("slow", "sleep 60", 0, 2),
        )
        .await;
    let asked = std::time::Instant::now();
    post(client, &format!("/job/{slow}/deploy"), json!({})).await;
    settled_in(client, "job", &slow, "DEPLOYMENT_ERROR").await;
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "stopped at its limit"
    );
    let history = client.get(&format!("/job/{slow}/deploymentHistory")).await;
    assert!(
        history.to_string().contains("max_duration_seconds (2 s)"),
        "{history}"
    );

    let web = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh", "arguments": ["-c", "exec sleep 1000"]}),
        )
        .await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    assert_eq!(containers_of(&web).len(), 1);
    post(client, &format!("/container/{web}/uninstall"), json!({})).await;
    eventually(
        Duration::from_secs(30),
        || "uninstalled, yet it runs".to_string(),
        async || (containers_of(&web).is_empty()).then_some(()),
    )
    .await;
    client.get(&format!("/container/{web}")).await;
}

/// Deploys `container`, whose image its registry refuses to pull: the deployment fails so.
async fn pull_refused(client: &Client, container: &str) {
    post(client, &format!("/container/{container}/deploy"), json!({})).await;
    settled_in(client, "container", container, "DEPLOYMENT_ERROR").await;
    let reason = reason_of(client, container).await;
    assert!(reason.contains("could not pull"), "{reason}");
}

/// An image from a registry that asks for credentials is pulled with the registry record's,
/// runs, and the password reaches no log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_is_pulled_with_its_registrys_credentials() {
    if !docker_ready() {
        return;
    }
    const PASSWORD: &str = "pull-s3cret-of-the-registry";
    let registry_server = LocalRegistry::start("puller", PASSWORD).await;
    registry_server.push(&format!("{IMAGE}:{TAG}"), "capstan-test/private:1");
    let host = registry_server.address.clone();
    let image = format!("{host}/capstan-test/private:1");
    let case = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1")]).await;
    let (client, env, org) = (&case.client, &case.env, &case.org);
    let make = |password: &str| {
        json!({"name": format!("private-{}", password.len()), "kind": "GENERIC_CR",
               "url": format!("http://{host}"),
               "config": {"username": "puller", "password": password}})
    };
    let wrong = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            make("nope"),
        )
        .await;
    let right = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            make(PASSWORD),
        )
        .await;
    let container = |registry: &str, name: &str| {
        json!({"name": name, "registry_id": registry, "image_name": "capstan-test/private", "tag": "1",
               "entrypoint": "sh", "arguments": ["-c", "echo private-image-runs; exec sleep 1000"]})
    };
    let refused = client
        .create(
            &format!("/environment/{env}/container"),
            container(&wrong, "refused"),
        )
        .await;
    pull_refused(client, &refused).await;
    let pulled = client
        .create(
            &format!("/environment/{env}/container"),
            container(&right, "pulled"),
        )
        .await;
    post(client, &format!("/container/{pulled}/deploy"), json!({})).await;
    settled_in(client, "container", &pulled, "DEPLOYED").await;
    let printed = output_of(client, "container", &pulled, "private-image-runs").await;
    assert!(printed.contains("private-image-runs"));
    let logs = deployment_log(client, env).await;
    assert!(logs.contains(&format!("pulling image {image}")), "{logs}");
    assert!(!logs.contains(PASSWORD));
    assert!(!case.own_log().contains(PASSWORD));

    // The image is on the host now; that lets no one else run it. The record with the wrong
    // password, and another organization's record of the same registry without one, are
    // refused by the registry at their pull, as before it was there.
    pull_refused(client, &refused).await;
    let them = case.stranger_with_environment("Strangers").await;
    let (stranger, their_org, their_env) = (&them.client, &them.org, &them.env);
    let theirs = stranger
        .create(
            &format!("/organization/{their_org}/containerRegistry"),
            json!({"name": "same", "kind": "GENERIC_CR", "url": format!("http://{host}"),
                   "config": {}}),
        )
        .await;
    let taken = stranger
        .create(
            &format!("/environment/{their_env}/container"),
            container(&theirs, "taken"),
        )
        .await;
    pull_refused(stranger, &taken).await;
    assert!(containers_of(&taken).is_empty());
    // Nor does the check of an image tell them it is on the host: their registry is asked.
    let theirs = &theirs;
    let check = |name: &'static str| async move {
        stranger
            .call(
                reqwest::Method::POST,
                &format!("/environment/{their_env}/checkContainerImage"),
                Some(json!({"registry_id": theirs, "image_name": name, "tag": "1"})),
            )
            .await
    };
    let (on_host, absent) = (
        check("capstan-test/private").await,
        check("capstan-test/none").await,
    );
    assert_eq!(on_host.0, absent.0, "{on_host:?} {absent:?}");
    assert_eq!(
        on_host.1.to_string().replace("private", "none"),
        absent.1.to_string()
    );
    assert!(on_host.0 >= 400, "{on_host:?}");
    let (status, _) = client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{env}/checkContainerImage"),
            Some(json!({"registry_id": right, "image_name": "capstan-test/private", "tag": "1"})),
        )
        .await;
    assert!(
        (200..300).contains(&status),
        "its own organization is answered: {status}"
    );
    let _ = docker(&["rmi", "-f", &image]);
}

/// The installation's own Docker host keeps its workloads from link-local addresses (the
/// metadata service) and from the host's own services: the firewall's rules are in place for
/// the environment's network (judged from the rules, and by a listener of the test's on the
/// host that the workload tries through its gateway); a port not publicly accessible is
/// published on the loopback only, whatever the publish address; and no cluster may name
/// this host's daemon socket, a loopback address or an ssh option.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_reach_neither_link_local_addresses_nor_the_hosts_services() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[("CAPSTAN_DOCKER_PUBLISH_ADDRESS", "127.0.0.2")]).await;
    let (client, env) = (&case.client, &case.env);
    // Nor may an organization point a cluster at this host's daemon or services: no socket
    // (no CAPSTAN_DOCKER_SOCKETS_DIR here), no loopback address (the outbound policy), no
    // option for ssh in the user part.
    for endpoint in [
        "unix:///var/run/docker.sock",
        "tcp://127.0.0.1:2375",
        "ssh://-oProxyCommand=true@example.com",
    ] {
        let (status, body) = client
            .call(
                reqwest::Method::POST,
                &format!("/organization/{}/cluster", case.org),
                Some(json!({"name": "mine", "region": "on-premise",
                            "cloud_provider": "ON_PREMISE",
                            "docker": {"endpoint": endpoint}})),
            )
            .await;
        assert_eq!(status, 400, "{endpoint}: {body}");
    }
    let web = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "web", "registry_id": case.registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", "mkdir -p /www && echo hi > /www/index.html && \
                               (httpd -f -p 9090 -h /www &) && exec httpd -f -p 8080 -h /www"],
                "ports": [{"internal_port": 8080, "publicly_accessible": true},
                          {"internal_port": 9090, "publicly_accessible": false}],
            }),
        )
        .await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let id = container_ids(&web).pop().unwrap();
    let bound = |port: &str| docker(&["port", &id, port]).unwrap();
    assert!(
        bound("8080/tcp").starts_with("127.0.0.2:"),
        "{}",
        bound("8080/tcp")
    );
    assert!(
        bound("9090/tcp").starts_with("127.0.0.1:"),
        "{}",
        bound("9090/tcp")
    );

    let rules = |chain: &str| {
        let out = Command::new("iptables")
            .args(["-w", "-S", chain])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(
        rules("DOCKER-USER").contains("-A DOCKER-USER -i cap+ -j CAPSTAN-FORWARD"),
        "{}",
        rules("DOCKER-USER")
    );
    assert!(rules("CAPSTAN-FORWARD").contains("-A CAPSTAN-FORWARD -d 169.254.0.0/16 -j REJECT"));
    assert!(rules("INPUT").contains("-A INPUT -i cap+ -j CAPSTAN-INPUT"));
    let input = rules("CAPSTAN-INPUT");
    let last = input.lines().last().unwrap_or_default();
    assert!(last.starts_with("-A CAPSTAN-INPUT -j REJECT"), "{input}");
    let network = format!("capstan-env-{}", env.replace('-', ""));
    let bridge = docker(&[
        "network",
        "inspect",
        "--format",
        "{{index .Options \"com.docker.network.bridge.name\"}}",
        &network,
    ])
    .unwrap();
    assert!(bridge.starts_with("cap") && bridge.len() <= 15, "{bridge}");
    let gateway = docker(&[
        "network",
        "inspect",
        "--format",
        "{{(index .IPAM.Config 0).Gateway}}",
        &network,
    ])
    .unwrap();

    // A service of the host, listening on every address: the workload does not reach it
    // through its network's gateway.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let port = port.to_string();
    let tried = docker(&["exec", &id, "busybox", "nc", "-w", "3", &gateway, &port]);
    assert!(tried.is_err(), "{tried:?}");
    assert!(
        listener.accept().is_err(),
        "nothing reached the host's listener through the gateway"
    );
}

/// One request sent as written to the router at `port` (`Connection: close`); the whole answer.
async fn raw_request(port: u16, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the router answered")
        .unwrap();
    String::from_utf8_lossy(&answer).to_string()
}

/// The router, through the built binary, keeps names and headers to their owners: another
/// organization cannot take a service's generated name or the router's domain as a custom
/// domain, and its wildcard does not answer a name a service claims; what a client says of
/// itself (`X-Forwarded-For`, `Forwarded`, `X-Real-IP`) does not reach the workload, `Connection`
/// cannot remove the Host header, two Host headers are refused, and a TLS request whose Host is
/// not the name its handshake asked for answers 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_keeps_names_and_headers_to_their_owners() {
    if !docker_ready() {
        return;
    }
    let (case, certificates, tls_port) = shop_case(None).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    // The workload echoes the request's headers as CGI saw them.
    let script = "mkdir -p /www/cgi-bin && printf '#!/bin/sh\\necho Content-Type: text/plain\\n\
                  echo\\nenv\\n' > /www/cgi-bin/env && busybox chmod +x /www/cgi-bin/env && \
                  echo shop > /www/index.html && exec httpd -f -p 8080 -h /www";
    let shop = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "shop", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", script],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
            }),
        )
        .await;
    post(
        client,
        &format!("/container/{shop}/customDomain"),
        json!({"domain": "shop.localhost", "generate_certificate": false}),
    )
    .await;
    post(client, &format!("/container/{shop}/deploy"), json!({})).await;
    settled_in(client, "container", &shop, "DEPLOYED").await;
    let link = link_of(client, &shop).await;
    let (generated, router_port) = link
        .strip_prefix("http://")
        .unwrap()
        .rsplit_once(':')
        .unwrap();
    let router_port: u16 = router_port.parse().unwrap();
    assert_eq!(
        through_router(&format!("http://shop.localhost:{router_port}"), "/")
            .await
            .status(),
        200
    );

    // Another organization: neither the generated name, nor the router's domain or a
    // wildcard over it; its wildcard over `localhost` does not take `shop.localhost`.
    let them = case.stranger_with_environment("Strangers").await;
    let stranger = &them.client;
    let theirs = httpd(stranger, &them.env, &them.registry, "theirs", "theirs").await;
    for taken in [generated, ROUTER_DOMAIN, &format!("*.{ROUTER_DOMAIN}")] {
        let (status, body) = stranger
            .call(
                reqwest::Method::POST,
                &format!("/container/{theirs}/customDomain"),
                Some(json!({"domain": taken, "generate_certificate": false})),
            )
            .await;
        assert_eq!(status, 400, "{taken}: {body}");
    }
    post(
        stranger,
        &format!("/container/{theirs}/customDomain"),
        json!({"domain": "*.localhost", "generate_certificate": false}),
    )
    .await;
    post(stranger, &format!("/container/{theirs}/deploy"), json!({})).await;
    settled_in(stranger, "container", &theirs, "DEPLOYED").await;
    let unclaimed = format!("http://anything.localhost:{router_port}");
    let answer = through_router(&unclaimed, "/").await;
    assert_eq!(answer.text().await.unwrap().trim(), "theirs");
    for name in ["shop.localhost", generated] {
        let answer = through_router(&format!("http://{name}:{router_port}"), "/").await;
        assert_eq!(answer.text().await.unwrap().trim(), "shop", "{name}");
    }

    // What a client says of itself does not reach the workload; Host stays.
    let echoed = raw_request(
        router_port,
        "GET /cgi-bin/env HTTP/1.1\r\nHost: shop.localhost\r\nConnection: close, Host\r\n\
         X-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\n\r\n",
    )
    .await;
    assert!(echoed.starts_with("HTTP/1.1 200"), "{echoed}");
    assert!(echoed.contains("HTTP_HOST=shop.localhost"), "{echoed}");
    assert!(
        echoed.contains("HTTP_X_FORWARDED_FOR=127.0.0.1"),
        "{echoed}"
    );
    assert!(!echoed.contains("6.6.6.6"), "{echoed}");
    let twice = raw_request(
        router_port,
        "GET / HTTP/1.1\r\nHost: anything.localhost\r\nHost: shop.localhost\r\n\
         Connection: close\r\n\r\n",
    )
    .await;
    assert!(twice.starts_with("HTTP/1.1 400"), "{twice}");

    // Over TLS, the Host must be the name the handshake asked for.
    let authority = std::fs::read(certificates.0.join("ca.pem")).unwrap();
    let https = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&authority).unwrap())
        .resolve(
            "shop.localhost",
            std::net::SocketAddr::from(([127, 0, 0, 1], tls_port.parse().unwrap())),
        )
        .build()
        .unwrap();
    let url = format!("https://shop.localhost:{tls_port}/");
    let answer = https.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let answer = https
        .get(&url)
        .header("host", "anything.localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 421);

    // The router reads its routes every second: their age, a metric, stays small.
    let metrics = reqwest::get(format!("{}/metrics", case.base()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let age: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("capstan_router_routes_age_seconds "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no routes' age in {metrics}"));
    assert!((0.0..5.0).contains(&age), "{age}");
}

/// What holds for every workload, kept tested: never privileged, no new privileges, no added
/// capability, no host path, no Docker socket, a bounded number of processes; each
/// environment on a network of its own, where another environment's workloads are not even
/// names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_is_contained_and_its_environment_apart() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[]).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let project = client.get(&format!("/environment/{env}")).await["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let other_env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "apart"}),
        )
        .await;
    let here = httpd(client, env, registry, "here", "here").await;
    let apart = httpd(client, &other_env, registry, "apart", "apart").await;
    for service in [&here, &apart] {
        post(client, &format!("/container/{service}/deploy"), json!({})).await;
        settled_in(client, "container", service, "DEPLOYED").await;
    }
    let (here_id, apart_id) = (
        container_ids(&here)[0].clone(),
        container_ids(&apart)[0].clone(),
    );
    for id in [&here_id, &apart_id] {
        let seen = docker(&[
            "inspect",
            "--format",
            "{{.HostConfig.Privileged}}|{{json .HostConfig.SecurityOpt}}|{{json .HostConfig.CapAdd}}|\
             {{json .HostConfig.Binds}}|{{range .Mounts}}{{.Type}} {{end}}|{{.HostConfig.PidsLimit}}",
            id,
        ])
        .unwrap();
        assert_eq!(
            seen, "false|[\"no-new-privileges:true\"]|null|null||2048",
            "{seen}"
        );
        let socket = docker(&["exec", id, "busybox", "test", "-e", "/var/run/docker.sock"]);
        assert!(socket.is_err(), "no Docker socket inside");
    }
    // Its own name answers on its network; from another environment's, it is no name at all.
    let name = docker(&["inspect", "--format", "{{.Name}}", &here_id]).unwrap();
    let name = name.trim_start_matches('/');
    let reached = docker(&["exec", &here_id, "busybox", "nc", "-w", "2", name, "8080"]);
    assert!(reached.is_ok(), "{reached:?}");
    let apart_reach = docker(&["exec", &apart_id, "busybox", "nc", "-w", "2", name, "8080"]);
    assert!(apart_reach.is_err(), "{apart_reach:?}");
}

/// Capstan killed (-9) and started again on the same database; the container's status once
/// its cut deployment has ended.
async fn killed_and_settled(case: &mut Case, container: &str) -> Value {
    case.crash();
    case.restart().await;
    settle(
        &case.client,
        &format!("/container/{container}/status"),
        Duration::from_secs(90),
    )
    .await
}

/// Nothing Capstan made outlives what it was made for: a deleted environment's network goes
/// with it, and at start-up reconciliation takes what a gone environment or service left (a
/// network, an image built from git) and replicas of a live service that no live deployment
/// started, that this installation made, and nothing of another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_deleted_environment_or_service_leaves_goes() {
    if !docker_ready() {
        return;
    }
    let mut case = Case::start(None, &[]).await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);
    let project = client.get(&format!("/environment/{env}")).await["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let doomed = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "doomed"}),
        )
        .await;
    let web = httpd(client, &doomed, registry, "web", "web").await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let network = |env: &str| format!("capstan-env-{}", env.replace('-', ""));
    assert!(docker(&["network", "inspect", &network(&doomed)]).is_ok());
    let installation = installation_of(&doomed);
    let (status, _) = client
        .call(
            reqwest::Method::DELETE,
            &format!("/environment/{doomed}"),
            None,
        )
        .await;
    assert!(status == 202 || status == 204, "{status}");
    let gone = async |check: &dyn Fn() -> bool, what: &str| {
        eventually(
            Duration::from_secs(30),
            || format!("{what} stayed"),
            async || check().then_some(()),
        )
        .await
    };
    gone(
        &|| docker(&["network", "inspect", &network(&doomed)]).is_err(),
        "the deleted environment's network",
    )
    .await;
    assert!(containers_of(&web).is_empty());

    // Its service deleted first, an environment is deleted at once: its network goes with it
    // all the same, not at the next reconciliation (a minute later).
    let emptied = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "emptied"}),
        )
        .await;
    let lone = httpd(client, &emptied, registry, "lone", "lone").await;
    post(client, &format!("/container/{lone}/deploy"), json!({})).await;
    settled_in(client, "container", &lone, "DEPLOYED").await;
    for path in [
        format!("/container/{lone}"),
        format!("/environment/{emptied}"),
    ] {
        let (status, _) = client.call(reqwest::Method::DELETE, &path, None).await;
        assert!(status == 202 || status == 204, "{path}: {status}");
        eventually(
            Duration::from_secs(30),
            || format!("{path} stays"),
            async || (client.call(reqwest::Method::GET, &path, None).await.0 == 404).then_some(()),
        )
        .await;
    }
    eventually(
        Duration::from_secs(5),
        || "the network of an environment deleted at once stays".to_string(),
        async || (docker(&["network", "inspect", &network(&emptied)]).is_err()).then_some(()),
    )
    .await;

    // Left while Capstan was down: a network of an environment, an image of a service, that
    // no longer exist; and another installation's network.
    let (lost_env, lost_service) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
    let org = case.org.clone();
    let labels = |installation: &str| {
        [
            format!("capstan.installation={installation}"),
            format!("capstan.organization={org}"),
            format!("capstan.environment={lost_env}"),
        ]
    };
    let make_network = |name: &str, installation: &str| {
        let mut args = vec!["network".to_string(), "create".to_string()];
        for label in labels(installation) {
            args.extend(["--label".to_string(), label]);
        }
        args.push(name.to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&args).unwrap();
    };
    let lost_network = network(&lost_env.to_string());
    let foreign_network = format!("capstan-test-foreign-{}", lost_env.simple());
    make_network(&lost_network, &installation);
    make_network(&foreign_network, "another-installation");
    let image = format!("capstan-build/{}:lost", lost_service.simple());
    let built = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'FROM {IMAGE}:{TAG}\\nLABEL capstan.service={lost_service} \
             capstan.organization={org} capstan.installation={installation}\\n' | \
             docker build -q -t {image} -"
        ))
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    // Replicas of a live service that no live deployment started (a request that does not
    // exist): what a dead instance could not settle. Another installation's stays.
    let kept = httpd(&case.client, &case.env, &case.registry, "kept", "kept").await;
    post(
        &case.client,
        &format!("/container/{kept}/deploy"),
        json!({}),
    )
    .await;
    settled_in(&case.client, "container", &kept, "DEPLOYED").await;
    let live = container_ids(&kept);
    let replica = |installation: &str| {
        let env = &case.env;
        docker(&[
            "run",
            "-d",
            "--label",
            &format!("capstan.service={kept}"),
            "--label",
            &format!("capstan.installation={installation}"),
            "--label",
            &format!("capstan.organization={org}"),
            "--label",
            &format!("capstan.environment={env}"),
            "--label",
            "capstan.role=service",
            "--label",
            &format!("capstan.deployment-request={}", uuid::Uuid::new_v4()),
            &format!("{IMAGE}:{TAG}"),
            "sleep",
            "300",
        ])
        .unwrap()
    };
    let stale = replica(&installation);
    let foreign = replica("another-installation");
    case.crash();
    case.restart().await;
    gone(
        &|| docker(&["inspect", &stale]).is_err(),
        "a replica no live deployment started",
    )
    .await;
    let left = container_ids(&kept);
    assert!(left.contains(&live[0]), "the live replica stays: {left:?}");
    assert!(
        left.iter().any(|id| foreign.starts_with(id.as_str())),
        "another installation's stays: {left:?}"
    );
    let _ = docker(&["rm", "-f", &foreign]);
    gone(
        &|| docker(&["network", "inspect", &lost_network]).is_err(),
        "a gone environment's network",
    )
    .await;
    gone(
        &|| docker(&["image", "inspect", &image]).is_err(),
        "a gone service's built image",
    )
    .await;
    assert!(
        docker(&["network", "inspect", &foreign_network]).is_ok(),
        "another installation's network is not this one's to remove"
    );
    let _ = docker(&["network", "rm", &foreign_network]);
}
