//! What users reach for once a workload runs on Docker, through the live API: a shell in it
//! (the public CLI's parameter names and framing, and the live API's own), its pods (a restart
//! by its liveness probe counted and told), its metrics (memory growing against its limit);
//! each shell in the audit log, never what was typed; a VIEWER refused a shell; the cluster's
//! status (its host, what it holds).

use super::*;

/// The query every live endpoint of a service's takes.
fn scope(case: &Case, cluster: &str, project: &str) -> String {
    format!(
        "organization={}&cluster={cluster}&project={project}&environment={}",
        case.org, case.env
    )
}

async fn shells_pods_and_metrics(database: Option<&str>) {
    let case = Case::start(database, &[("CAPSTAN_METRICS_REPLICAS", "on")]).await;
    let (client, env, org, registry) = (&case.client, &case.env, &case.org, &case.registry);
    let (cluster, project) = case.cluster_and_project().await;
    let probe = json!({"type": {"exec": {"command": ["sh", "-c", "test -e /tmp/alive"]}},
                       "initial_delay_seconds": 1, "period_seconds": 1, "timeout_seconds": 2,
                       "success_threshold": 1, "failure_threshold": 2});
    let web = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "shelled", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "cpu": 500, "memory": 64,
                   "entrypoint": "sh", "arguments": ["-c", "mkdir -p /tmp; touch /tmp/alive; exec sleep 100000"],
                   "healthchecks": {"liveness_probe": probe}}),
        )
        .await;
    post(
        client,
        &format!("/container/{web}/environmentVariable"),
        json!({"key": "GREETING", "value": "file-says-hello", "mount_path": "/etc/app/greeting"}),
    )
    .await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;
    let header = format!("Token {}", client.token);
    let scope = scope(&case, &cluster, &project);
    let wait = Duration::from_secs(20);

    // The public CLI's names and framing: typed input as binary frames, the terminal sized
    // as asked, the exit code in the close reason.
    let mut shell = live(
        case.base(),
        &format!("/shell/exec?{scope}&service={web}&command[0]=sh&tty_width=100&tty_height=30"),
        Some(&header),
    )
    .await
    .unwrap();
    shell.send(b"echo hel''lo-shell\n").await;
    shell.output_until(wait, "hello-shell").await;
    shell.send(b"cat /etc/app/greeting\n").await;
    shell.output_until(wait, "file-says-hello").await;
    shell.send(b"stty size\n").await;
    shell.output_until(wait, "30 100").await;
    shell.send(b"exit 3\n").await;
    let (_, closed) = shell.output_until_closed(wait).await;
    assert_eq!(closed, Some((1000, "exit code 3".to_string())));

    // Piped input ends with one 0x04 frame, as the CLI sends it.
    let mut piped = live(
        case.base(),
        &format!("/shell/exec?{scope}&service={web}&command[0]=sh&tty_width=80&tty_height=24"),
        Some(&header),
    )
    .await
    .unwrap();
    piped.send(b"echo piped-$((6*7))\n").await;
    piped.send(&[4]).await;
    let (seen, closed) = piped.output_until_closed(wait).await;
    assert!(seen.contains("piped-42"), "{seen:?}");
    assert_eq!(closed, Some((1000, "exit code 0".to_string())));

    // The live API's own names: `application`, `command` repeated, camelCase sizes.
    let mut named = live(
        case.base(),
        &format!(
            "/shell/exec?organization={org}&cluster={cluster}&application={web}\
             &command=sh&command=-c&command=echo%20named-%24((3*2))&ttyWidth=80&ttyHeight=24"
        ),
        Some(&header),
    )
    .await
    .unwrap();
    let (seen, closed) = named.output_until_closed(wait).await;
    assert!(seen.contains("named-6"), "{seen:?}");
    assert_eq!(closed, Some((1000, "exit code 0".to_string())));

    // A DEVOPS member may open one (as whoever may deploy the service).
    let devops = format!("Token {}", case.token_with_role("DEVOPS").await);
    let mut theirs = live(
        case.base(),
        &format!(
            "/shell/exec?{scope}&service={web}&command[0]=sh&command[1]=-c&command[2]=exit%205"
        ),
        Some(&devops),
    )
    .await
    .unwrap();
    let (_, closed) = theirs.output_until_closed(wait).await;
    assert_eq!(closed, Some((1000, "exit code 5".to_string())));

    // Refusals close with 1008, which the CLI takes as final: a VIEWER, no credential, a
    // replica that does not run.
    let viewer = format!("Token {}", case.token_with_role("VIEWER").await);
    for (who, path) in [
        (
            Some(viewer.as_str()),
            format!("/shell/exec?{scope}&service={web}"),
        ),
        (None, format!("/shell/exec?{scope}&service={web}")),
        (
            Some(header.as_str()),
            format!("/shell/exec?{scope}&service={web}&pod_name=nothing-of-it"),
        ),
    ] {
        let mut refused = live(case.base(), &path, who).await.unwrap();
        let closed = refused.closed(wait).await;
        assert_eq!(
            closed.as_ref().map(|c| c.0),
            Some(1008),
            "{path}: {closed:?}"
        );
    }

    // Each shell is in the audit log, opened and closed with how it ended; what was typed
    // never is.
    let events = client
        .get(&format!("/organization/{org}/events?pageSize=100"))
        .await;
    let shells: Vec<String> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event_type"] == "SHELL")
        .map(|e| e["change"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        shells.iter().filter(|c| c.contains("opened in")).count(),
        4,
        "{shells:?}"
    );
    assert!(
        shells
            .iter()
            .any(|c| c.contains("closed in") && c.contains("exit code 3")),
        "{shells:?}"
    );
    let kept = events.to_string();
    assert!(
        !kept.contains("lo-shell") && !kept.contains("stty"),
        "nothing typed is kept: {events}"
    );

    // Pods: a replica restarted by its failing liveness probe counts the restart and tells
    // why.
    let mut pods = live(
        case.base(),
        &format!("/service/pods?{scope}&service={web}"),
        Some(&header),
    )
    .await
    .unwrap();
    let first = pods.next(wait).await.expect("the pods at once");
    assert_eq!(first["pods"][0]["restart_count"], 0, "{first}");
    let container = container_ids(&web)[0].clone();
    docker(&["exec", &container, "/bin/sh", "-c", "rm /tmp/alive"]).unwrap();
    let restarted = pods
        .until(Duration::from_secs(60), |m| {
            m["pods"][0]["restart_count"].as_i64() >= Some(1)
                && m["pods"][0]["last_events"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| e["reason"] == "Unhealthy"))
        })
        .await;
    assert_eq!(restarted["service_id"], web.as_str(), "{restarted}");
    let status = client.get(&format!("/container/{web}/status")).await;
    assert_eq!(status["state"], "DEPLOYED", "{status}");

    // Metrics: memory filled in the replica shows, against its 64 MB limit.
    let mut metrics = live(
        case.base(),
        &format!("/service/metrics?{scope}&service={web}&serviceType=CONTAINER"),
        Some(&header),
    )
    .await
    .unwrap();
    let first = metrics
        .until(wait, |m| {
            m["pods"].as_array().is_some_and(|p| !p.is_empty())
        })
        .await;
    let pod = &first["pods"][0];
    assert_eq!(pod["memory"]["limit_bytes"], 64 << 20, "{first}");
    assert_eq!(pod["cpu"]["limit_millicores"], 500.0, "{first}");
    let before = pod["memory"]["used_bytes"].as_u64().unwrap();
    assert!(before < 24 << 20, "{first}");
    docker(&[
        "exec",
        &container,
        "/bin/sh",
        "-c",
        "dd if=/dev/zero of=/dev/shm/fill bs=1M count=32",
    ])
    .unwrap();
    let grown = metrics
        .until(Duration::from_secs(30), |m| {
            m["pods"][0]["memory"]["used_bytes"].as_u64() > Some(30 << 20)
        })
        .await;
    let percent = grown["pods"][0]["memory"]["percent"].as_f64().unwrap();
    assert!((45.0..=100.0).contains(&percent), "{grown}");

    // With CAPSTAN_METRICS_REPLICAS, a scrape of /metrics reads the replica too.
    let scraped = client
        .http
        .get(format!("{}/metrics", case.base()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = |name: &str| {
        scraped
            .lines()
            .find(|l| {
                l.starts_with(&format!("{name}{{")) && l.contains(&format!("service=\"{web}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
    };
    assert_eq!(
        series("capstan_replica_memory_limit_bytes").as_deref(),
        Some("67108864"),
        "{scraped}"
    );
    assert_eq!(
        series("capstan_replica_cpu_limit_millicores").as_deref(),
        Some("500")
    );
    let used: f64 = series("capstan_replica_memory_bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or_default();
    assert!(used > f64::from(30 << 20), "{scraped}");

    // The cluster's status: its one host, answering, holding the replica and what its limits
    // reserve, against what the host has.
    let mut hosts = live(
        case.base(),
        &format!("/cluster/status?organization={org}&cluster={cluster}"),
        Some(&header),
    )
    .await
    .unwrap();
    let seen = hosts.next(wait).await.expect("the cluster's hosts at once");
    assert_eq!(seen["hosts"].as_array().map(Vec::len), Some(1), "{seen}");
    let host = &seen["hosts"][0];
    assert_eq!(host["state"], "READY", "{seen}");
    assert!(host["replicas"].as_u64() >= Some(1), "{seen}");
    assert!(
        host["reserved_memory_bytes"].as_i64() >= Some(64 << 20),
        "{seen}"
    );
    assert!(
        host["reserved_cpu_millicores"].as_i64() >= Some(500),
        "{seen}"
    );
    assert!(host["cpu_millicores"].as_i64() >= Some(1000), "{seen}");
    assert!(
        host["memory_bytes"].as_i64() > host["reserved_memory_bytes"].as_i64(),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_shells_pods_and_metrics_of_a_running_container() {
    if !docker_ready() {
        return;
    }
    shells_pods_and_metrics(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_shells_pods_and_metrics_of_a_running_container() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    shells_pods_and_metrics(Some(&url)).await;
}
