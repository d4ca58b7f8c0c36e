//! A cluster that is a Docker Swarm of three nodes made by the test on this machine (a
//! dockerd per network namespace, on the lab's /24): a container runs as one Swarm service
//! whose two replicas the Swarm spreads over two nodes, reached through the router at their
//! nodes' addresses; a replica failing its liveness probe is replaced; a redeploy under a
//! steady stream of requests drops none; a worker lost (its dockerd frozen and its link cut)
//! has its replica run elsewhere while requests succeed again, and the cluster's status shows
//! it down, then back; the manager lost, the cluster fails naming it, and recovers with it. An
//! application built from git runs on a worker; a database pinned to a node keeps its data
//! across a redeploy, is backed up and restored there, and moved to another node with its
//! data when asked; terraform runs on the node that keeps its state; jobs run to their end,
//! a cron job at its time. The cluster's record says it is a Swarm. Deleting everything leaves no Swarm service, network or volume. Only 127.0.0.1 and the
//! lab's own namespaces are reached.

use super::*;

/// A configuration without providers (terraform's own data source needs no download),
/// reading another configuration's state beside it.
const TF_CONFIGURATION: &str = "variable \"region\" {\n  type = string\n}\n\n\
     data \"terraform_remote_state\" \"other\" {\n  backend = \"local\"\n  \
     config = {\n    path = \"${path.module}/other.tfstate\"\n  }\n}\n\n\
     output \"greeting\" {\n  value = \"hello from ${var.region}\"\n}\n";

/// The state the configuration reads.
const TF_OTHER_STATE: &str = r#"{"version": 4, "terraform_version": "1.0.3", "serial": 1,
  "lineage": "5d9a7ba4-9d55-4e2f-a1d6-3c1b3c1b3c1b",
  "outputs": {"zone": {"value": "eu-west-3a", "type": "string"}}, "resources": []}"#;

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

/// An environment on a cluster whose host is the lab's manager, its `docker` member as given
/// (echoed by the cluster's record); and the cluster.
async fn environment_on_swarm(case: &Case, docker: Value) -> (String, String) {
    let (client, org) = (&case.client, &case.org);
    let cluster = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "swarm", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                   "docker": docker}),
        )
        .await;
    let record = client
        .get(&format!("/organization/{org}/cluster/{cluster}"))
        .await;
    assert_eq!(record["docker"], docker, "{record}");
    assert!(record.get("docker_host_kind").is_none(), "{record}");
    post(
        client,
        &format!("/organization/{org}/cluster/{cluster}/deploy"),
        json!({}),
    )
    .await;
    cluster_becomes(client, org, &cluster, "DEPLOYED").await;
    let record = client
        .get(&format!("/organization/{org}/cluster/{cluster}"))
        .await;
    assert_eq!(record["docker_host_kind"], "DOCKER_SWARM", "{record}");
    let (_, project) = case.cluster_and_project().await;
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "on-swarm", "cluster": cluster}),
        )
        .await;
    (env, cluster)
}

/// The lab's socket of node `node`, as a cluster names it.
fn socket_of(lab: &SwarmLab, node: usize) -> String {
    format!("unix://{}", lab.socket(node).display())
}

/// An application with two replicas built from the repository `team/app` at `commit`,
/// deployed: its id.
async fn deployed_app(client: &Client, env: &str, server: &GitServer, commit: &str) -> String {
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
    app
}

/// Waits until `url`'s requests through the router all succeed again, within `limit`.
async fn router_answers_again(url: &str, limit: Duration, what: &str) {
    eventually(
        limit,
        || format!("requests through the router {what}"),
        async || {
            let stream = Stream::start(url, "/env.txt");
            tokio::time::sleep(Duration::from_secs(2)).await;
            let streamed = stream.stop().await;
            (streamed.failures.is_empty() && streamed.answered > 10).then_some(())
        },
    )
    .await;
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
    // The runner's image is on the manager alone: Capstan loads it onto the node it runs on.
    lab.load(1, &terraform_image());
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let infra = Repository::create(&server, "team/infra");
    let infra_commit = infra.commit(
        "infra",
        &[
            ("infra/main.tf", TF_CONFIGURATION),
            ("infra/other.tfstate", TF_OTHER_STATE),
            ("infra/modules/.gitkeep", ""),
        ],
    );
    let repo = Repository::create(&server, "team/app");
    let commit = repo.commit(
        "app",
        &[(
            "Dockerfile",
            &format!("FROM {IMAGE}:{TAG}\nCMD [\"sh\", \"-c\", \"echo up; exec sleep 1000\"]\n"),
        )],
    );
    let backups = TempDir::new();
    let case = Case::start(
        None,
        &[
            ("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap()),
            ("CAPSTAN_BACKUP_DIR", backups.0.to_str().unwrap()),
            (
                "CAPSTAN_DOCKER_TERRAFORM_IMAGE",
                "capstan-test/terraform:{version}",
            ),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
            (
                "CAPSTAN_DOCKER_DATABASE_IMAGES",
                "REDIS=capstan-test/redis:{version}",
            ),
            ("CAPSTAN_CLOCK", "manual"),
            ("CAPSTAN_CONTROLS", "on"),
            ("CAPSTAN_CONTROLS_TOKEN", CONTROLS_TOKEN),
        ],
    )
    .await;
    let (client, org, registry) = (&case.client, &case.org, &case.registry);
    let nodes: Vec<Value> = (2..=3)
        .map(|node| json!({"address": lab.address(node), "endpoint": socket_of(&lab, node)}))
        .collect();
    let (env, cluster) = environment_on_swarm(
        &case,
        json!({"endpoint": socket_of(&lab, 1), "nodes": nodes}),
    )
    .await;
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

    // A replica that stops answering its liveness probe is stopped by Capstan through its
    // node's daemon, and the Swarm starts another in its place.
    let sick_script = "mkdir -p /www && echo ok > /www/alive.txt; \
                       (sleep 8; rm /www/alive.txt) & exec httpd -f -p 8080 -h /www";
    let sick = client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": "sick", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh", "arguments": ["-c", sick_script],
                "cpu": 100, "memory": 32,
                "min_running_instances": 1, "max_running_instances": 1,
                "ports": [{"internal_port": 8080, "publicly_accessible": false}],
                "healthchecks": {
                    "readiness_probe": {"type": {"http": {"port": 8080, "path": "/alive.txt"}},
                        "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                        "success_threshold": 1, "failure_threshold": 30},
                    "liveness_probe": {"type": {"http": {"port": 8080, "path": "/alive.txt"}},
                        "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                        "success_threshold": 1, "failure_threshold": 2}},
            }),
        )
        .await;
    post(client, &format!("/container/{sick}/deploy"), json!({})).await;
    settled_in(client, "container", &sick, "DEPLOYED").await;
    let sick_service = swarm_services(&lab, &sick).remove(0);
    eventually(
        Duration::from_secs(60),
        || format!("{sick_service}'s task was never replaced"),
        async || {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let tasks = lab
                .docker(1, &["service", "ps", "-q", &sick_service])
                .unwrap_or_default();
            (tasks.lines().count() > 1).then_some(())
        },
    )
    .await;
    deleted(client, &format!("/container/{sick}")).await;

    // An application built from git on the manager is loaded onto the nodes whose daemons the
    // cluster names, and runs on a node other than the manager.
    let app = deployed_app(client, &env, &server, &commit).await;
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
    // A backup is the server's dump, taken in its task's container through its node's daemon;
    // restored there, the data changed since is gone.
    let taken = post(
        client,
        &format!("/database/{db}/backup"),
        json!({"name": "on-swarm"}),
    )
    .await;
    let backup = taken["id"].as_str().unwrap().to_string();
    let listed = eventually(
        Duration::from_secs(60),
        || "the backup never ended".to_string(),
        async || {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let listed = client.get(&format!("/database/{db}/backup")).await;
            (listed["results"][0]["status"]["state"] != "DEPLOYING").then_some(listed)
        },
    )
    .await;
    assert_eq!(
        listed["results"][0]["status"]["state"], "DEPLOYED",
        "{listed}"
    );
    let dump = backups.0.join(format!("{}.dump", backup.replace('-', "")));
    assert!(
        std::fs::read(&dump).unwrap().starts_with(b"REDIS"),
        "an RDB file"
    );
    assert_eq!(
        redis_on_swarm(&lab, &db, &password, &["SET", "note", "changed"]),
        "OK"
    );
    let (status, answer) = client
        .call(
            reqwest::Method::POST,
            &format!("/database/{db}/backup/{backup}/restore"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 204, "{answer}");
    assert_eq!(
        redis_on_swarm(&lab, &db, &password, &["GET", "note"]),
        "kept",
        "restored"
    );
    let log = deployment_log(client, &env).await;
    assert!(!log.contains(&password), "the password is in no log");

    // Moved by an explicit request to another node whose daemon the cluster names, its data
    // goes with it, and the node it left keeps no copy.
    let volume = format!("capstan-data-{}", db.replace('-', ""));
    let from = pinned[0];
    let to = if from == 2 { 3 } else { 2 };
    post(
        client,
        &format!("/database/{db}/move"),
        json!({"node": lab.address(to)}),
    )
    .await;
    settled_in(client, "database", &db, "DEPLOYED").await;
    assert_eq!(
        nodes_running(&lab, &swarm_services(&lab, &db)[0]),
        [to],
        "on the node it moved to"
    );
    assert_eq!(
        redis_on_swarm(&lab, &db, &password, &["GET", "note"]),
        "kept",
        "its data moved with it"
    );
    assert!(
        lab.docker(from, &["volume", "inspect", &volume]).is_err(),
        "the node it left keeps no copy"
    );
    assert!(lab.docker(to, &["volume", "inspect", &volume]).is_ok());
    deleted(client, &format!("/database/{db}")).await;
    assert!(swarm_services(&lab, &db).is_empty());
    assert!(
        lab.docker(to, &["volume", "inspect", &volume]).is_err(),
        "the volume went with the database"
    );
    let secrets = lab.docker(1, &["secret", "ls", "-q"]).unwrap();
    assert!(secrets.trim().is_empty(), "no file secret left: {secrets}");

    // Terraform runs as a one-off Swarm task on the node that keeps its state volume: applied,
    // its output in the deployment log, its state read back; deleted, destroyed and its volume
    // gone from that node.
    let tf = client
        .create(
            &format!("/environment/{env}/terraform"),
            json!({"name": "infra", "auto_deploy_config": {"auto_deploy": false, "terraform_action": "DEFAULT"},
                   "terraform_files_source": {"git_repository": {"url": server.url("team/infra"),
                        "branch": "main", "root_path": "/infra", "git_token_id": null}},
                   "terraform_variables_source": {"tf_var_file_paths": [],
                        "tf_vars": [{"key": "region", "value": "eu-west-3", "secret": false}]},
                   "backend": {"kubernetes": {}}, "engine": "TERRAFORM",
                   "provider_version": {"read_from_terraform_block": false, "explicit_version": "1.0.3"},
                   "timeout_sec": 300,
                   "job_resources": {"cpu_milli": 500, "ram_mib": 256, "gpu": 0, "storage_gib": 1},
                   "use_cluster_credentials": false, "action_extra_arguments": {}}),
        )
        .await;
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": infra_commit}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let log = deployment_log(client, &env).await;
    assert!(log.contains("Apply complete!"), "{log}");
    assert!(log.contains("hello from eu-west-3"), "{log}");
    assert!(log.contains("that keeps its state"), "{log}");
    let resources = client
        .get(&format!("/terraform/{tf}/terraformResources"))
        .await;
    assert_eq!(
        resources["results"][0]["address"], "data.terraform_remote_state.other",
        "{resources}"
    );
    assert!(resources.to_string().contains("eu-west-3a"), "{resources}");
    let state_volume = format!("capstan-tfstate-{}", tf.replace('-', ""));
    let keeping: Vec<usize> = (1..=3)
        .filter(|node| {
            lab.docker(*node, &["volume", "inspect", &state_volume])
                .is_ok()
        })
        .collect();
    assert_eq!(keeping.len(), 1, "one node keeps the state: {keeping:?}");
    assert!(swarm_services(&lab, &tf).is_empty(), "no run outlives it");
    post(client, &format!("/terraform/{tf}/redeploy"), json!({})).await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let log = deployment_log(client, &env).await;
    assert!(
        log.contains("No changes."),
        "the second run found the state the first left: {log}"
    );
    deleted(client, &format!("/terraform/{tf}")).await;
    assert!(
        lab.docker(keeping[0], &["volume", "inspect", &state_volume])
            .is_err(),
        "the state volume went with the service"
    );

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
    // A cron job's deployment runs nothing; at its time Capstan's scheduler runs it as a
    // Swarm job too.
    let cron = client
        .create(
            &format!("/environment/{env}/job"),
            json!({"name": "tick",
                   "source": {"image": {"registry_id": registry, "image_name": IMAGE, "tag": TAG}},
                   "cpu": 100, "memory": 32,
                   "schedule": {"cronjob": {"scheduled_at": "*/5 * * * *", "timezone": "UTC",
                                            "entrypoint": "sh", "arguments": ["-c", "echo cron-tick"]}},
                   "max_nb_restart": 0, "max_duration_seconds": 60}),
        )
        .await;
    for job in [&good, &bad, &cron] {
        post(client, &format!("/job/{job}/deploy"), json!({})).await;
    }
    settled_in(client, "job", &good, "DEPLOYED").await;
    settled_in(client, "job", &bad, "DEPLOYMENT_ERROR").await;
    settled_in(client, "job", &cron, "DEPLOYED").await;
    assert!(
        swarm_services(&lab, &cron).is_empty(),
        "its deployment runs nothing"
    );
    case.advance_clock(300).await;
    let printed = output_of(client, "job", &cron, "cron-tick").await;
    assert!(printed.contains("cron-tick"), "{printed}");
    assert_eq!(swarm_services(&lab, &cron).len(), 1, "a Swarm job ran it");
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
    let job_services: Vec<String> = [&good, &bad, &cron]
        .iter()
        .flat_map(|j| swarm_services(&lab, j))
        .collect();
    assert_eq!(
        job_services.len(),
        3,
        "each run kept until the next: {job_services:?}"
    );
    let cleaned = post(client, &format!("/job/{bad}/cleanFailedJob"), json!({})).await;
    assert_eq!(
        cleaned["clean_kubernetes_jobs"].as_array().map(Vec::len),
        Some(1),
        "{cleaned}"
    );
    assert!(swarm_services(&lab, &bad).is_empty(), "the failed run went");
    for job in [&good, &bad, &cron] {
        deleted(client, &format!("/job/{job}")).await;
    }
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
    // The live cluster status lists the three nodes and the replicas they hold.
    let mut hosts = live(
        case.base(),
        &format!("/cluster/status?organization={org}&cluster={cluster}"),
        Some(&format!("Token {}", client.token)),
    )
    .await
    .unwrap();
    let seen = hosts
        .until(Duration::from_secs(20), |m| {
            let held: u64 = m["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["replicas"].as_u64())
                .sum();
            m["hosts"].as_array().map(Vec::len) == Some(3) && held >= 2
        })
        .await;
    let managers = seen["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["role"] == "MANAGER")
        .count();
    assert_eq!(managers, 1, "{seen}");
    // A shell reaches a replica through its node's daemon, and both replicas' metrics read
    // there too.
    let header = format!("Token {}", client.token);
    let mut shell = live(
        case.base(),
        &format!(
            "/shell/exec?organization={org}&service={web}&command[0]=sh&command[1]=-c\
             &command[2]=echo%20swarm-shell&tty_width=80&tty_height=24"
        ),
        Some(&header),
    )
    .await
    .unwrap();
    let (said, closed) = shell.output_until_closed(Duration::from_secs(20)).await;
    assert!(said.contains("swarm-shell"), "{said:?} {closed:?}");
    assert_eq!(closed, Some((1000, "exit code 0".to_string())));
    let (_, project) = case.cluster_and_project().await;
    let mut metrics = live(
        case.base(),
        &format!(
            "/service/metrics?organization={org}&cluster={cluster}&project={project}\
             &environment={env}&service={web}"
        ),
        Some(&header),
    )
    .await
    .unwrap();
    let read = metrics
        .until(Duration::from_secs(30), |m| {
            m["pods"].as_array().map(Vec::len) == Some(2)
        })
        .await;
    assert!(
        read["pods"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["node"].is_string()),
        "{read}"
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
    router_answers_again(&url, Duration::from_secs(30), "still fail").await;
    lab.thaw(lost);
    eventually(
        Duration::from_secs(60),
        || format!("node {lost} never shown back"),
        async || (node_state(client, org, &cluster, &lost_address).await == "READY").then_some(()),
    )
    .await;

    // The manager lost: the cluster is DEPLOYMENT_ERROR naming it, and a deployment fails
    // naming it; back, the cluster is DEPLOYED again and its replicas still answer.
    lab.freeze(1);
    let manager = lab.socket(1).display().to_string();
    let status = cluster_becomes(client, org, &cluster, "DEPLOYMENT_ERROR").await;
    let reason = status["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&manager), "{status}");
    post(client, &format!("/container/{web}/redeploy"), json!({})).await;
    let (state, history) = deployed(client, &web).await;
    assert_eq!(state, "DEPLOYMENT_ERROR", "{history}");
    assert!(
        history.contains("does not answer") && history.contains(&manager),
        "the reason names the manager: {history}"
    );
    lab.thaw(1);
    cluster_becomes(client, org, &cluster, "DEPLOYED").await;
    router_answers_again(
        &url,
        Duration::from_secs(60),
        "fail after the manager's return",
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

/// An application built from git on a Swarm whose cluster names a registry (served on the
/// lab's network): the manager's daemon pushes the image there, and the worker pulls it from
/// there to run its replica (rather than Capstan loading it through the worker's daemon, which
/// the cluster names for reconciliation: a volume left there by a service that is gone is
/// removed). Its worker then promoted and lost, the Swarm lacks a majority of its managers:
/// the cluster fails until it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swarm_pulls_what_it_built_from_the_registry_its_cluster_names() {
    if !docker_ready() {
        return;
    }
    let mut lab = SwarmLab::pulling(2).await;
    let registry = lab.serve_registry().await;
    for node in 1..=2 {
        lab.load(node, &format!("{IMAGE}:{TAG}"));
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
        ],
    )
    .await;
    let (client, org) = (&case.client, &case.org);
    let docker = json!({"endpoint": socket_of(&lab, 1),
                        "image_registry": format!("{registry}/builds"),
                        "nodes": [{"address": lab.address(2), "endpoint": socket_of(&lab, 2)}]});
    let (env, cluster) = environment_on_swarm(&case, docker).await;
    let app = deployed_app(client, &env, &server, &commit).await;
    let log = deployment_log(client, &env).await;
    assert!(log.contains("pushed image"), "{log}");
    let services = swarm_services(&lab, &app);
    assert_eq!(services.len(), 1, "{services:?}");
    let placed = nodes_running(&lab, &services[0]);
    assert_eq!(placed, [1, 2], "a replica on each node: {placed:?}");
    let pulled = lab
        .docker(2, &["image", "ls", "--format", "{{.Repository}}"])
        .unwrap();
    assert!(
        pulled.contains(&format!("{registry}/builds/capstan-build/")),
        "the worker pulled it from the registry: {pulled}"
    );
    // A volume of Capstan's left on the worker by a service that no longer exists (its
    // deletion missed it) is found there by reconciliation and removed.
    let labels: Value = serde_json::from_str(
        &lab.docker(
            1,
            &[
                "service",
                "inspect",
                "--format",
                "{{json .Spec.Labels}}",
                &services[0],
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let installation = labels["capstan.installation"].as_str().unwrap_or_default();
    let gone = uuid::Uuid::new_v4();
    let stray = format!("capstan-data-{}", gone.simple());
    lab.docker(
        2,
        &[
            "volume",
            "create",
            "--label",
            &format!("capstan.installation={installation}"),
            "--label",
            &format!("capstan.organization={org}"),
            "--label",
            &format!("capstan.service={gone}"),
            &stray,
        ],
    )
    .unwrap();
    deleted(client, &format!("/application/{app}")).await;
    eventually(
        Duration::from_secs(60),
        || format!("Swarm services left: {:?}", swarm_services(&lab, &app)),
        async || swarm_services(&lab, &app).is_empty().then_some(()),
    )
    .await;
    eventually(
        Duration::from_secs(90),
        || format!("the stray volume {stray} stays on the worker"),
        async || {
            tokio::time::sleep(Duration::from_secs(1)).await;
            lab.docker(2, &["volume", "inspect", &stray])
                .is_err()
                .then_some(())
        },
    )
    .await;
    // The worker made a second manager: lost, the Swarm lacks a majority of its managers (two
    // need both; its leader stays, committing nothing), and the manager that still answers
    // no longer counts as the cluster's host.
    let worker = lab
        .docker(2, &["info", "--format", "{{.Swarm.NodeID}}"])
        .unwrap();
    lab.docker(1, &["node", "promote", worker.trim()]).unwrap();
    // A manager once it is a member of the managers' Raft (until then it counts for nothing).
    eventually(
        Duration::from_secs(60),
        || "the worker never became a reachable manager".to_string(),
        async || {
            let reachability = lab
                .docker(
                    1,
                    &[
                        "node",
                        "inspect",
                        worker.trim(),
                        "--format",
                        "{{if .ManagerStatus}}{{.ManagerStatus.Reachability}}{{end}}",
                    ],
                )
                .unwrap_or_default();
            tokio::time::sleep(Duration::from_millis(200)).await;
            (reachability.trim() == "reachable").then_some(())
        },
    )
    .await;
    lab.freeze(2);
    let status = cluster_becomes(client, org, &cluster, "DEPLOYMENT_ERROR").await;
    let reason = status["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("majority of its managers"), "{status}");
    lab.thaw(2);
    cluster_becomes(client, org, &cluster, "DEPLOYED").await;
}
