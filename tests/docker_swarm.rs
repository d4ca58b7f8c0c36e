//! A cluster that is a Docker Swarm of three nodes made by the test on this machine (a
//! dockerd per network namespace, on the lab's /24): a container runs as one Swarm service
//! whose two replicas the Swarm spreads over two nodes, reached through the router at their
//! nodes' addresses; a redeploy under a steady stream of requests drops none; a worker lost
//! (its dockerd frozen and its link cut) has its replica run elsewhere while requests succeed
//! again, and the cluster's status shows it down, then back; deleting the container leaves no
//! Swarm service. Only 127.0.0.1 and the lab's own namespaces are reached.

use super::*;

/// The Swarm services of a Capstan service on the lab's manager.
fn swarm_services(lab: &SwarmLab, service: &str) -> Vec<String> {
    let listed = lab
        .docker(
            1,
            &[
                "service",
                "ls",
                "--filter",
                &format!("label=capstan.service={service}"),
                "--format",
                "{{.Name}}",
            ],
        )
        .unwrap();
    listed.lines().map(str::to_string).collect()
}

/// The nodes (their number in the lab) running a task of the Swarm service `name`.
fn nodes_running(lab: &SwarmLab, name: &str) -> Vec<usize> {
    let listed = lab
        .docker(
            1,
            &[
                "service",
                "ps",
                "--filter",
                "desired-state=running",
                "--format",
                "{{.Node}} {{.CurrentState}}",
                name,
            ],
        )
        .unwrap_or_default();
    let mut nodes: Vec<usize> = listed
        .lines()
        .filter(|l| l.contains("Running"))
        .filter_map(|l| l.split(' ').next()?.rsplit("-n").next()?.parse().ok())
        .collect();
    nodes.sort_unstable();
    nodes
}

/// A node's state in the cluster's status, asked at most twice a second (the API's rate limit
/// counts every call).
async fn node_state(client: &Client, org: &str, cluster: &str, address: &str) -> String {
    tokio::time::sleep(Duration::from_millis(400)).await;
    let status = client
        .get(&format!("/organization/{org}/cluster/{cluster}/status"))
        .await;
    status["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["address"] == address)
        .map(|n| n["state"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// The node (its number in the lab) running the Swarm service `name`'s one task, and the
/// task's container there.
fn task_container(lab: &SwarmLab, name: &str) -> (usize, String) {
    let node = *nodes_running(lab, name).first().expect("a running task");
    let filter = format!("label=com.docker.swarm.service.name={name}");
    let listed = lab
        .docker(node, &["ps", "-q", "--filter", &filter])
        .unwrap();
    (
        node,
        listed.lines().next().expect("its container").to_string(),
    )
}

/// `redis-cli` in the Redis database's task container, signed in.
fn redis_on_swarm(lab: &SwarmLab, service: &str, password: &str, args: &[&str]) -> String {
    let names = swarm_services(lab, service);
    assert_eq!(names.len(), 1, "one generation: {names:?}");
    let (node, container) = task_container(lab, &names[0]);
    let auth = format!("REDISCLI_AUTH={password}");
    let mut all = vec!["exec", "-e", &auth, &container, "redis-cli"];
    all.extend_from_slice(args);
    lab.docker(node, &all).unwrap().trim().to_string()
}

/// An environment on a cluster whose host is the lab's manager, naming its workers' own
/// daemons; and the cluster.
async fn environment_on_swarm(case: &Case, lab: &SwarmLab) -> (String, String) {
    let (client, org) = (&case.client, &case.org);
    let socket = |node: usize| format!("unix://{}", lab.socket(node).display());
    let nodes: Vec<Value> = (2..=3)
        .map(|node| json!({"address": lab.address(node), "endpoint": socket(node)}))
        .collect();
    let cluster = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "swarm", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                   "docker": {"endpoint": socket(1), "nodes": nodes}}),
        )
        .await;
    let record = client
        .get(&format!("/organization/{org}/cluster/{cluster}"))
        .await;
    assert_eq!(
        record["docker"]["nodes"][1]["address"],
        lab.address(3),
        "{record}"
    );
    post(
        client,
        &format!("/organization/{org}/cluster/{cluster}/deploy"),
        json!({}),
    )
    .await;
    cluster_becomes(client, org, &cluster, "DEPLOYED").await;
    let (_, project) = case.cluster_and_project().await;
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "on-swarm", "cluster": cluster}),
        )
        .await;
    (env, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_cluster_runs_replicas_over_its_nodes_and_survives_a_lost_worker() {
    if !docker_ready() {
        return;
    }
    let lab = SwarmLab::start(3).await;
    lab.reachable();
    let (redis_image, redis_version) = redis_image();
    for node in 1..=3 {
        lab.load(node, &format!("{IMAGE}:{TAG}"));
        lab.load(node, &redis_image);
    }
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/app");
    let commit = repo.commit(
        "app",
        &[(
            "Dockerfile",
            &format!("FROM {IMAGE}:{TAG}\nCMD [\"sh\", \"-c\", \"echo up; exec sleep 1000\"]\n"),
        )],
    );
    let case = Case::start(
        None,
        &[
            ("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap()),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
            (
                "CAPSTAN_DOCKER_DATABASE_IMAGES",
                "REDIS=capstan-test/redis:{version}",
            ),
        ],
    )
    .await;
    let (client, org, registry) = (&case.client, &case.org, &case.registry);
    let (env, cluster) = environment_on_swarm(&case, &lab).await;
    let script = "mkdir -p /www && echo HOSTNAME=$(hostname) > /www/env.txt \
                  && exec httpd -f -p 8080 -h /www";
    let web = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "web", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", script],
                "cpu": 100, "memory": 32,
                "min_running_instances": 2, "max_running_instances": 2,
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                "healthchecks": {"readiness_probe": {"type": {"http": {"port": 8080, "path": "/env.txt"}},
                    "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                    "success_threshold": 1, "failure_threshold": 30}},
            }),
        )
        .await;
    post(client, &format!("/container/{web}/deploy"), json!({})).await;
    settled_in(client, "container", &web, "DEPLOYED").await;

    // One Swarm service, its two replicas on two nodes; no plain container beside it.
    let services = swarm_services(&lab, &web);
    assert_eq!(services.len(), 1, "{services:?}");
    let placed = nodes_running(&lab, &services[0]);
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_ne!(placed[0], placed[1], "spread over two nodes: {placed:?}");

    // An application built from git on the manager is loaded onto the nodes whose daemons the
    // cluster names, and runs on a node other than the manager.
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "app", "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                   "min_running_instances": 2, "max_running_instances": 2,
                   "cpu": 100, "memory": 32,
                   "git_repository": {"url": server.url("team/app"), "branch": "main",
                                      "root_path": "/"}}),
        )
        .await;
    post(
        client,
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": commit}),
    )
    .await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let app_services = swarm_services(&lab, &app);
    assert_eq!(app_services.len(), 1, "{app_services:?}");
    let placed = nodes_running(&lab, &app_services[0]);
    assert!(
        placed.len() == 2 && placed.iter().any(|n| *n != 1),
        "on a node other than the manager: {placed:?}"
    );
    let log = deployment_log(client, &env).await;
    for node in 2..=3 {
        let loaded = format!("onto the node at {}", lab.address(node));
        assert!(log.contains(&loaded), "{loaded} in {log}");
    }

    // A database runs as one task pinned to a node with its volume there (its configuration,
    // which holds its password, a Swarm secret): its data outlives a redeploy, on the same
    // node; deleted, its volume goes.
    let db = client
        .create(
            &format!("/environment/{env}/database"),
            json!({"name": "data", "type": "REDIS", "version": redis_version,
                   "mode": "CONTAINER", "accessibility": "PRIVATE"}),
        )
        .await;
    post(client, &format!("/database/{db}/deploy"), json!({})).await;
    settled_in(client, "database", &db, "DEPLOYED").await;
    let credentials = client
        .get(&format!("/database/{db}/masterCredentials"))
        .await;
    let password = credentials["password"].as_str().unwrap().to_string();
    assert_eq!(
        redis_on_swarm(&lab, &db, &password, &["SET", "note", "kept"]),
        "OK"
    );
    let pinned = nodes_running(&lab, &swarm_services(&lab, &db)[0]);
    post(client, &format!("/database/{db}/redeploy"), json!({})).await;
    settled_in(client, "database", &db, "DEPLOYED").await;
    assert_eq!(
        redis_on_swarm(&lab, &db, &password, &["GET", "note"]),
        "kept"
    );
    assert_eq!(
        nodes_running(&lab, &swarm_services(&lab, &db)[0]),
        pinned,
        "on the node it is pinned to"
    );
    let log = deployment_log(client, &env).await;
    assert!(!log.contains(&password), "the password is in no log");
    let volume = format!("capstan-data-{}", db.replace('-', ""));
    assert!(lab
        .docker(pinned[0], &["volume", "inspect", &volume])
        .is_ok());
    deleted(client, &format!("/database/{db}")).await;
    assert!(swarm_services(&lab, &db).is_empty());
    assert!(
        lab.docker(pinned[0], &["volume", "inspect", &volume])
            .is_err(),
        "the volume went with the database"
    );
    let secrets = lab.docker(1, &["secret", "ls", "-q"]).unwrap();
    assert!(secrets.trim().is_empty(), "no file secret left: {secrets}");

    // Jobs run to their end as Swarm jobs: one succeeds; one fails at each of its executions,
    // named by its exit code; deleted, neither leaves a Swarm service or an exited container
    // on any node.
    let job = |name: &str, script: &str| {
        json!({"name": name, "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
               "cpu": 100, "memory": 32,
               "schedule": {"on_start": {"entrypoint": "sh", "arguments": ["-c", script]}},
               "max_nb_restart": 1, "max_duration_seconds": 60})
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
    post(client, &format!("/job/{bad}/deploy"), json!({})).await;
    settled_in(client, "job", &good, "DEPLOYED").await;
    settled_in(client, "job", &bad, "DEPLOYMENT_ERROR").await;
    let history = client.get(&format!("/job/{bad}/deploymentHistory")).await;
    let reason = history["results"][0]["reason"].to_string();
    assert!(reason.contains("exited with code 4"), "{reason}");
    let log = deployment_log(client, &env).await;
    assert!(
        log.contains("job execution 2 exited with code 4"),
        "restarted once: {log}"
    );
    // What a task prints is followed on its node, whichever it is.
    let printed = output_of(client, "job", &good, "job-did-its-work").await;
    assert!(printed.contains("job-did-its-work"), "{printed}");
    let printed = output_of(client, "job", &bad, "job-gives-up").await;
    assert!(printed.contains("job-gives-up"), "{printed}");
    let job_services: Vec<String> = [&good, &bad]
        .iter()
        .flat_map(|j| swarm_services(&lab, j))
        .collect();
    assert_eq!(
        job_services.len(),
        2,
        "each run kept until the next: {job_services:?}"
    );
    let cleaned = post(client, &format!("/job/{bad}/cleanFailedJob"), json!({})).await;
    assert_eq!(
        cleaned["clean_kubernetes_jobs"].as_array().map(Vec::len),
        Some(1),
        "{cleaned}"
    );
    assert!(swarm_services(&lab, &bad).is_empty(), "the failed run went");
    deleted(client, &format!("/job/{good}")).await;
    deleted(client, &format!("/job/{bad}")).await;
    for name in &job_services {
        eventually(
            Duration::from_secs(60),
            || format!("{name} left a service or containers"),
            async || {
                let containers: usize = (1..=3)
                    .map(|node| {
                        lab.docker(
                            node,
                            &[
                                "ps",
                                "-aq",
                                "--filter",
                                &format!("label=com.docker.swarm.service.name={name}"),
                            ],
                        )
                        .unwrap_or_default()
                        .lines()
                        .count()
                    })
                    .sum();
                let services = lab
                    .docker(
                        1,
                        &["service", "ls", "-q", "--filter", &format!("name={name}")],
                    )
                    .unwrap_or_default();
                (containers == 0 && services.trim().is_empty()).then_some(())
            },
        )
        .await;
    }

    // Both replicas answer through the router, at their nodes' addresses.
    let url = link_of(client, &web).await;
    let answer = through_router(&url, "/env.txt").await;
    let status = answer.status();
    let body = answer.text().await.unwrap_or_default();
    assert!(
        status == 200 && body.contains("HOSTNAME="),
        "{url}: {status} {body}"
    );
    let stream = Stream::start(&url, "/env.txt");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let streamed = stream.stop().await;
    assert!(streamed.failures.is_empty(), "{:?}", streamed.failures);
    assert_eq!(
        streamed.hosts.len(),
        2,
        "both replicas: {:?}",
        streamed.hosts
    );

    // A redeploy under a steady stream of requests drops none.
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
    let services = swarm_services(&lab, &web);
    assert_eq!(
        services.len(),
        1,
        "the previous generation went: {services:?}"
    );

    // A worker running a replica lost: its replica runs elsewhere, requests succeed again, and
    // the cluster's status shows the node down.
    let placed = nodes_running(&lab, &services[0]);
    let lost = *placed
        .iter()
        .find(|n| **n != 1)
        .expect("a replica on a worker");
    lab.freeze(lost);
    let lost_address = lab.address(lost);
    eventually(
        Duration::from_secs(60),
        || format!("node {lost} never shown down"),
        async || (node_state(client, org, &cluster, &lost_address).await == "DOWN").then_some(()),
    )
    .await;
    eventually(
        Duration::from_secs(60),
        || format!("no replica started elsewhere than node {lost}"),
        async || {
            let now = nodes_running(&lab, &services[0]);
            (now.len() == 2 && !now.contains(&lost)).then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        || "requests through the router still fail".to_string(),
        async || {
            let stream = Stream::start(&url, "/env.txt");
            tokio::time::sleep(Duration::from_secs(2)).await;
            let streamed = stream.stop().await;
            (streamed.failures.is_empty() && streamed.answered > 10).then_some(())
        },
    )
    .await;
    lab.thaw(lost);
    eventually(
        Duration::from_secs(60),
        || format!("node {lost} never shown back"),
        async || (node_state(client, org, &cluster, &lost_address).await == "READY").then_some(()),
    )
    .await;

    // Deleted, nothing of them is left on the Swarm.
    deleted(client, &format!("/container/{web}")).await;
    deleted(client, &format!("/application/{app}")).await;
    for service in [&web, &app] {
        eventually(
            Duration::from_secs(60),
            || format!("Swarm services left: {:?}", swarm_services(&lab, service)),
            async || swarm_services(&lab, service).is_empty().then_some(()),
        )
        .await;
    }

    // The environment deleted, its overlay network goes too: nothing of it is left.
    delete_asked(client, &format!("/environment/{env}")).await;
    let mut gone = false;
    for _ in 0..60 {
        let (status, _) = client
            .call(reqwest::Method::GET, &format!("/environment/{env}"), None)
            .await;
        if status == 404 {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if !gone {
        let state = client.get(&format!("/environment/{env}/status")).await;
        let log = deployment_log(client, &env).await;
        panic!(
            "the environment stays: {state} {}",
            &log[log.len().saturating_sub(3000)..]
        );
    }
    let network = format!("capstan-env-{}", env.replace('-', ""));
    eventually(
        Duration::from_secs(60),
        || format!("the network {network} is left"),
        async || {
            lab.docker(1, &["network", "inspect", &network])
                .is_err()
                .then_some(())
        },
    )
    .await;
    for node in 1..=3 {
        let left = lab
            .docker(
                node,
                &["volume", "ls", "-q", "--filter", "label=capstan.service"],
            )
            .unwrap();
        assert!(left.trim().is_empty(), "node {node} keeps volumes: {left}");
    }
    let services = lab.docker(1, &["service", "ls", "-q"]).unwrap();
    assert!(services.trim().is_empty(), "services left: {services}");
}
