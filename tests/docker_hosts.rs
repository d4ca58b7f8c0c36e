//! Clusters that are Docker hosts, with the built binary and two Docker daemons on this
//! machine: the one the tests share, and a second one the test starts (its own socket, bridge
//! and a TLS listener), reached through its socket, over TCP with TLS and over SSH. Each
//! environment's workload runs on its cluster's daemon, seen through each daemon; the second
//! daemon frozen (answering nothing), its cluster's status and its deployments say so while the
//! first cluster deploys on; back, its cluster recovers. A daemon restarting under Capstan is
//! followed again, a build and a pull that fill their daemon's disk fail naming it, and a
//! two-node Swarm
//! is one daemon to claim (each node a dockerd in a network namespace of its own), and a
//! three-node Swarm runs replicas over its nodes (`docker_swarm`, in this binary to spare a
//! link). Only 127.0.0.1 and the lab's own namespaces are reached.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod docker_swarm;
mod git_http;
mod harness;

use git_http::{GitServer, Repository};
use harness::*;
use serde_json::{json, Value};
use std::time::Duration;

/// The service's containers on a daemon (`docker` runs its CLI there).
fn on_daemon(docker: impl Fn(&[&str]) -> Result<String, String>, service: &str) -> Vec<String> {
    docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=capstan.service={service}"),
    ])
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect()
}

/// The port on 127.0.0.1 the daemon published the container's 8080 on.
fn published(docker: impl Fn(&[&str]) -> Result<String, String>, container: &str) -> u16 {
    let mapping = docker(&["port", container, "8080/tcp"]).unwrap();
    let first = mapping.lines().next().unwrap();
    first.rsplit(':').next().unwrap().parse().unwrap()
}

/// The container's first link, once its engine has reported where it runs.
async fn link_of(client: &Client, id: &str) -> String {
    let path = format!("/container/{id}/link");
    eventually(
        Duration::from_secs(20),
        || format!("no link for {id}"),
        async || {
            let links = client.get(&path).await;
            links["results"][0]["url"].as_str().map(str::to_string)
        },
    )
    .await
}

/// What `path` answers once its `member` is `want` (within 60 s: the hosts are pinged every
/// 5 s, and a ping may take 5 s more).
async fn member_becomes(client: &Client, path: &str, member: &str, want: Value) -> Value {
    let seen = std::cell::RefCell::new(Value::Null);
    eventually(
        Duration::from_secs(60),
        || format!("{path}: {member} is not {want}: {}", seen.borrow()),
        async || {
            let answer = client.get(path).await;
            let there = answer[member] == want;
            *seen.borrow_mut() = answer.clone();
            there.then_some(answer)
        },
    )
    .await
}

/// The cluster's status, once it is `want`.
async fn cluster_becomes(client: &Client, org: &str, cluster: &str, want: &str) -> Value {
    let path = format!("/organization/{org}/cluster/{cluster}/status");
    member_becomes(client, &path, "status", json!(want)).await
}

/// Waits for the cluster record's `has_access` to be `want`.
async fn access_becomes(client: &Client, org: &str, cluster: &str, want: bool) {
    let path = format!("/organization/{org}/cluster/{cluster}");
    member_becomes(client, &path, "has_access", json!(want)).await;
}

async fn ready(client: &Client, org: &str, cluster: &str) -> bool {
    client
        .get(&format!("/organization/{org}/cluster/{cluster}/isReady"))
        .await["is_ready"]
        == true
}

/// The state a service's deployment ended in, and the reason it gave.
async fn deployed(client: &Client, id: &str) -> (String, String) {
    let status = settle(
        client,
        &format!("/container/{id}/status?wait=30"),
        Duration::from_secs(120),
    )
    .await;
    let history = client
        .get(&format!("/container/{id}/deploymentHistoryV2"))
        .await;
    (
        status["state"].as_str().unwrap_or_default().to_string(),
        history.to_string(),
    )
}

async fn two_clusters_run_their_environments_on_their_own_daemons(database: Option<&str>) {
    let mut second = SecondDaemon::start().await;
    // As an operator would: organizations may name the sockets of one directory, and the
    // loopback (where this test's daemon and sshd listen) is opened to the outbound policy.
    let sockets = second.socket.parent().unwrap().to_path_buf();
    let case = Case::start(
        database,
        &[
            ("CAPSTAN_DOCKER_SOCKETS_DIR", sockets.to_str().unwrap()),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    let (client, org, registry) = (&case.client, &case.org, &case.registry);
    let (first_cluster, project) = case.cluster_and_project().await;

    // A cluster on the second daemon's socket, and one on its TLS listener.
    let on_socket = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({
                "name": "second", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                "docker": {"endpoint": format!("unix://{}", second.socket.display())},
            }),
        )
        .await;
    let (ca, certificate, key) = second.client_tls();
    let credentials = client
        .call(
            reqwest::Method::POST,
            &format!("/organization/{org}/onPremise/credentials"),
            Some(json!({"name": "second-tls",
                        "docker_tls": {"ca": ca, "certificate": certificate, "key": key}})),
        )
        .await;
    assert_eq!(credentials.0, 201, "{}", credentials.1);
    assert_eq!(credentials.1["object_type"], "OTHER");
    assert!(
        !credentials.1.to_string().contains("PRIVATE KEY"),
        "the key is never answered: {}",
        credentials.1
    );
    let over_tls = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({
                "name": "second-tls", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                "docker": {"endpoint": format!("tcp://{}", second.tcp)},
                "cloud_provider_credentials": {
                    "cloud_provider": "ON_PREMISE", "region": "on-premise",
                    "credentials": {"id": credentials.1["id"], "name": "second-tls"}},
            }),
        )
        .await;
    let env_for = |name: &'static str, cluster: String| {
        let project = project.clone();
        async move {
            client
                .create(
                    &format!("/project/{project}/environment"),
                    json!({"name": name, "cluster": cluster}),
                )
                .await
        }
    };
    let second_env = env_for("on-second", on_socket.clone()).await;
    let tls_env = env_for("over-tls", over_tls.clone()).await;
    // And one reached over SSH: a tunnel to the daemon's socket, the host's key pinned; a
    // cluster pinning another key is never let through to it.
    let ssh = SshServer::start().await;
    let endpoint = format!(
        "ssh://{}@127.0.0.1:{}{}",
        ssh.user,
        ssh.port,
        second.socket.display()
    );
    let ssh_cluster = |name: &'static str, host_key: String| {
        let (client_key, endpoint) = (ssh.client_key.clone(), endpoint.clone());
        async move {
            let credentials = client
                .create(
                    &format!("/organization/{org}/onPremise/credentials"),
                    json!({"name": name, "ssh_private_key": client_key,
                           "ssh_host_key": host_key}),
                )
                .await;
            client
                .create(
                    &format!("/organization/{org}/cluster"),
                    json!({
                        "name": name, "region": "on-premise", "cloud_provider": "ON_PREMISE",
                        "docker": {"endpoint": endpoint},
                        "cloud_provider_credentials": {
                            "cloud_provider": "ON_PREMISE", "region": "on-premise",
                            "credentials": {"id": credentials, "name": name}},
                    }),
                )
                .await
        }
    };
    let over_ssh = ssh_cluster("second-ssh", ssh.host_key.clone()).await;
    let impostor = ssh_cluster("impostor-ssh", ssh.other_key.clone()).await;
    post(
        client,
        &format!("/organization/{org}/cluster/{impostor}/deploy"),
        json!({}),
    )
    .await;
    cluster_becomes(client, org, &impostor, "DEPLOYMENT_ERROR").await;
    assert!(!ready(client, org, &impostor).await);
    let ssh_env = env_for("over-ssh", over_ssh.clone()).await;
    for cluster in [&on_socket, &over_tls, &over_ssh] {
        post(
            client,
            &format!("/organization/{org}/cluster/{cluster}/deploy"),
            json!({}),
        )
        .await;
        cluster_becomes(client, org, cluster, "DEPLOYED").await;
        assert!(ready(client, org, cluster).await);
        let record = client
            .get(&format!("/organization/{org}/cluster/{cluster}"))
            .await;
        assert_eq!(record["docker_host_kind"], "DOCKER_HOST", "{record}");
    }
    // A daemon is one organization's: another's cluster on it is refused at its deployment,
    // and so is a cluster on the installation's own daemon, by whatever path it is reached.
    let (stranger, their_org) = case.stranger("Strangers").await;
    let theirs = stranger
        .create(
            &format!("/organization/{their_org}/cluster"),
            json!({"name": "taken", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                   "docker": {"endpoint": format!("unix://{}", second.socket.display())}}),
        )
        .await;
    post(
        &stranger,
        &format!("/organization/{their_org}/cluster/{theirs}/deploy"),
        json!({}),
    )
    .await;
    let refused = cluster_becomes(&stranger, &their_org, &theirs, "DEPLOYMENT_ERROR").await;
    assert!(
        refused
            .to_string()
            .contains("another organization's clusters run on"),
        "{refused}"
    );
    let own_socket = sockets.join("own.sock");
    let main_socket = std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(str::to_string))
        .unwrap_or_else(|| "/var/run/docker.sock".into());
    std::os::unix::fs::symlink(&main_socket, &own_socket).unwrap();
    let own = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "own", "region": "on-premise", "cloud_provider": "ON_PREMISE",
                   "docker": {"endpoint": format!("unix://{}", own_socket.display())}}),
        )
        .await;
    post(
        client,
        &format!("/organization/{org}/cluster/{own}/deploy"),
        json!({}),
    )
    .await;
    let refused = cluster_becomes(client, org, &own, "DEPLOYMENT_ERROR").await;
    assert!(
        refused
            .to_string()
            .contains("the Docker daemon this installation itself uses"),
        "{refused}"
    );
    // Deploying a cluster readied its host for its environments: their networks.
    for env in [&second_env, &tls_env, &ssh_env] {
        let networks = second
            .docker(&[
                "network",
                "ls",
                "-q",
                "--filter",
                &format!("label=capstan.environment={env}"),
            ])
            .unwrap();
        assert_eq!(networks.lines().count(), 1, "{env}'s network on its host");
    }
    let logged = client
        .get(&format!("/organization/{org}/cluster/{over_tls}/logs"))
        .await;
    let steps: Vec<&str> = logged["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        ["Create", "ValidateSystemRequirements", "Created"],
        "{logged}"
    );
    assert!(
        logged.to_string().contains("Docker 2"),
        "what answered is in the log: {logged}"
    );
    let first = httpd(client, &case.env, registry, "first", "first").await;
    let on_second = httpd(client, &second_env, registry, "second", "second").await;
    let through_tls = httpd(client, &tls_env, registry, "tls", "tls").await;
    let through_ssh = httpd(client, &ssh_env, registry, "ssh", "ssh").await;
    let all = [&first, &on_second, &through_tls, &through_ssh];
    for id in all {
        post(client, &format!("/container/{id}/deploy"), json!({})).await;
    }
    for id in all {
        settled_in(client, "container", id, "DEPLOYED").await;
        // Its link is known as its deployment ends, whichever host runs it.
        let links = client.get(&format!("/container/{id}/link")).await;
        assert_eq!(
            links["results"].as_array().map(Vec::len),
            Some(1),
            "{links}"
        );
    }
    // Each workload on its own daemon, and only there.
    let second_docker = |args: &[&str]| second.docker(args);
    assert_eq!(on_daemon(docker, &first).len(), 1);
    assert!(on_daemon(second_docker, &first).is_empty());
    for id in [&on_second, &through_tls, &through_ssh] {
        assert!(on_daemon(docker, id).is_empty(), "not on the first daemon");
        assert_eq!(on_daemon(second_docker, id).len(), 1, "on the second");
    }
    let container = &on_daemon(second_docker, &on_second)[0];
    assert_eq!(
        fetch(published(second_docker, container), "/").await.trim(),
        "second"
    );
    // The router reaches every host's published ports.
    let link = link_of(client, &on_second).await;
    let answer = through_router(&link, "/").await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap().trim(), "second");
    // What runs there is observed there.
    let running = client.get(&format!("/container/{on_second}/status")).await;
    assert_eq!(running["state"], "DEPLOYED", "{running}");

    // The second daemon stops answering: its clusters say so, their deployments fail naming
    // it, and the first cluster deploys on.
    access_becomes(client, org, &on_socket, true).await;
    second.freeze();
    access_becomes(client, org, &on_socket, false).await;
    let status = cluster_becomes(client, org, &on_socket, "DEPLOYMENT_ERROR").await;
    assert_eq!(status["is_deployed"], false);
    let reason = status["failure_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&second.socket.display().to_string()),
        "{status}"
    );
    assert!(!ready(client, org, &on_socket).await);
    cluster_becomes(client, org, &first_cluster, "READY").await;
    access_becomes(client, org, &first_cluster, true).await;
    post(client, &format!("/container/{on_second}/deploy"), json!({})).await;
    let (state, history) = deployed(client, &on_second).await;
    assert_eq!(state, "DEPLOYMENT_ERROR", "{history}");
    assert!(
        history.contains("does not answer")
            && history.contains(&second.socket.display().to_string()),
        "the reason names the host: {history}"
    );
    post(client, &format!("/container/{first}/redeploy"), json!({})).await;
    settled_in(client, "container", &first, "DEPLOYED").await;

    // Back: the cluster recovers, and its environment deploys again.
    second.thaw();
    cluster_becomes(client, org, &on_socket, "DEPLOYED").await;
    access_becomes(client, org, &on_socket, true).await;
    assert!(ready(client, org, &on_socket).await);
    post(client, &format!("/container/{on_second}/deploy"), json!({})).await;
    settled_in(client, "container", &on_second, "DEPLOYED").await;
    assert_eq!(on_daemon(|args| second.docker(args), &on_second).len(), 1);

    // Nothing of the credentials' key is answered, nor logged.
    let shown = client
        .get(&format!("/organization/{org}/onPremise/credentials"))
        .await;
    assert!(!shown.to_string().contains("PRIVATE KEY"), "{shown}");
    drop(ssh);
    assert!(!case.own_log().contains("PRIVATE KEY"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_two_clusters_run_their_environments_on_their_own_daemons() {
    if !docker_ready() {
        return;
    }
    two_clusters_run_their_environments_on_their_own_daemons(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_clusters_run_their_environments_on_their_own_daemons() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    two_clusters_run_their_environments_on_their_own_daemons(Some(&url)).await;
}

/// A cluster of `org` named `name` on the Docker socket `socket`, asked to deploy; its id.
async fn deployed_on(client: &Client, org: &str, name: &str, socket: &std::path::Path) -> String {
    let cluster = client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": name, "region": "on-premise", "cloud_provider": "ON_PREMISE",
                   "docker": {"endpoint": format!("unix://{}", socket.display())}}),
        )
        .await;
    post(
        client,
        &format!("/organization/{org}/cluster/{cluster}/deploy"),
        json!({}),
    )
    .await;
    cluster
}

/// An environment of the case's project on a cluster named `name`, deployed on the Docker
/// socket `socket`.
async fn environment_on(case: &Case, name: &str, socket: &std::path::Path) -> String {
    let (client, org) = (&case.client, &case.org);
    let cluster = deployed_on(client, org, name, socket).await;
    cluster_becomes(client, org, &cluster, "DEPLOYED").await;
    let (_, project) = case.cluster_and_project().await;
    client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": format!("on-{name}"), "cluster": cluster}),
        )
        .await
}

/// A Swarm is one daemon to claim: once one organization's cluster is deployed on its manager,
/// another organization's cluster on its worker is refused at its deployment, while a second
/// cluster of the first organization on that worker is deployed.
async fn a_swarms_nodes_are_one_daemon_to_claim(database: Option<&str>) {
    let lab = SwarmLab::start(2).await;
    let case = Case::start(
        database,
        &[("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap())],
    )
    .await;
    let (client, org) = (&case.client, &case.org);
    let manager = deployed_on(client, org, "manager", &lab.socket(1)).await;
    let status = cluster_becomes(client, org, &manager, "DEPLOYED").await;
    // The cluster's status lists the Swarm's nodes; its log says what its host is.
    let nodes = status["nodes"].as_array().expect("the Swarm's nodes");
    assert_eq!(nodes.len(), 2, "{status}");
    let roles: Vec<&str> = nodes.iter().map(|n| n["role"].as_str().unwrap()).collect();
    assert!(
        roles.contains(&"MANAGER") && roles.contains(&"WORKER"),
        "{status}"
    );
    for node in nodes {
        assert_eq!(node["state"], "READY", "{status}");
        assert_eq!(node["availability"], "ACTIVE", "{status}");
        assert!(
            node["address"].as_str().unwrap().starts_with("10.213.250."),
            "{status}"
        );
    }
    assert_eq!(nodes.iter().filter(|n| n["leader"] == true).count(), 1);
    let logs = client
        .get(&format!("/organization/{org}/cluster/{manager}/logs"))
        .await
        .to_string();
    assert!(logs.contains("a manager of a Swarm of 2 nodes"), "{logs}");
    let them = case.stranger_with_environment("Strangers").await;
    let worker = deployed_on(&them.client, &them.org, "worker", &lab.socket(2)).await;
    let refused = cluster_becomes(&them.client, &them.org, &worker, "DEPLOYMENT_ERROR").await;
    assert!(
        refused
            .to_string()
            .contains("another organization's clusters run on"),
        "{refused}"
    );
    let own_worker = deployed_on(client, org, "own-worker", &lab.socket(2)).await;
    let status = cluster_becomes(client, org, &own_worker, "DEPLOYED").await;
    assert!(
        status.get("nodes").is_none(),
        "a worker knows no nodes: {status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_swarms_nodes_are_one_daemon_to_claim() {
    if !docker_ready() {
        return;
    }
    a_swarms_nodes_are_one_daemon_to_claim(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_swarms_nodes_are_one_daemon_to_claim() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_swarms_nodes_are_one_daemon_to_claim(Some(&url)).await;
}

/// The Docker daemon restarting under Capstan (a dockerd of the test's own, in a network
/// namespace of its own, never the machine's main daemon): the workload comes back with it,
/// Capstan's reports and output followers reconnect (the service is seen running again and
/// what it prints after the restart is kept), and the next deployment leaves one container.
/// A deployment under way then ends naming the cause, leaving nothing running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restarting_under_capstan_is_followed_again() {
    if !docker_ready() {
        return;
    }
    let mut lab = SwarmLab::daemons(1).await;
    lab.load(1, &format!("{IMAGE}:{TAG}"));
    let case = Case::start(
        None,
        &[("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap())],
    )
    .await;
    let (client, registry) = (&case.client, &case.registry);
    let env = environment_on(&case, "restarting", &lab.socket(1)).await;
    let ticker = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "ticker", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh",
                   "arguments": ["-c", "echo started-; while true; do echo tick; sleep 1; done"]}),
        )
        .await;
    post(client, &format!("/container/{ticker}/deploy"), json!({})).await;
    settled_in(client, "container", &ticker, "DEPLOYED").await;
    let started = |printed: &str| printed.matches("started-").count();
    let printed = output_of(client, "container", &ticker, "started-").await;
    assert_eq!(started(&printed), 1, "{printed}");

    lab.restart(1).await;
    // Back with the daemon (its restart policy), seen running, its new output kept.
    let seen = std::cell::RefCell::new(String::new());
    eventually(
        Duration::from_secs(60),
        || {
            format!(
                "not followed again after the daemon's restart: {}",
                seen.borrow()
            )
        },
        async || {
            let printed = output_of(client, "container", &ticker, "started-").await;
            let running = client.get(&format!("/container/{ticker}/status")).await;
            let followed = started(&printed) >= 2 && running["state"] == "DEPLOYED";
            *seen.borrow_mut() = format!("{running} {printed}");
            followed.then_some(())
        },
    )
    .await;
    post(client, &format!("/container/{ticker}/redeploy"), json!({})).await;
    settled_in(client, "container", &ticker, "DEPLOYED").await;
    assert_eq!(on_daemon(|args| lab.docker(1, args), &ticker).len(), 1);

    // A deployment under way when the daemon restarts (a job running its command): it ends
    // with a reason naming what happened; nothing of it is left running, and the next one runs.
    let job = client
        .create(
            &format!("/environment/{env}/job"),
            json!({"name": "long", "source": {"image": {"registry_id": registry,
                       "image_name": IMAGE, "tag": TAG}},
                   "schedule": {"on_start": {"entrypoint": "sh",
                                             "arguments": ["-c", "trap 'exit 143' TERM; sleep 20 & wait"]}}}),
        )
        .await;
    post(client, &format!("/job/{job}/deploy"), json!({})).await;
    eventually(
        Duration::from_secs(60),
        || "never started".to_string(),
        async || (!(on_daemon(|args| lab.docker(1, args), &job).is_empty())).then_some(()),
    )
    .await;
    lab.restart(1).await;
    let status = settle(
        client,
        &format!("/job/{job}/status"),
        Duration::from_secs(120),
    )
    .await;
    let history = client
        .get(&format!("/job/{job}/deploymentHistoryV2"))
        .await
        .to_string();
    assert_eq!(status["state"], "DEPLOYMENT_ERROR", "{history}");
    assert!(
        history.contains("its Docker daemon stopping or restarting"),
        "{history}"
    );
    assert!(on_daemon(|args| lab.docker(1, args), &job).is_empty());
    post(client, &format!("/job/{job}/deploy"), json!({})).await;
    settled_in(client, "job", &job, "DEPLOYED").await;
}

/// A lab daemon behind a socket of the test's (made at the path given, in front of the
/// daemon's), a case whose cluster names that socket, and a container `sleeper` in the
/// cluster's environment, not deployed yet. Dropped in that order: the case first.
struct Behind {
    case: Case,
    env: String,
    sleeper: String,
    socket: std::path::PathBuf,
    _sockets: TempDir,
    lab: SwarmLab,
}

async fn sleeper_behind(
    name: &str,
    socket: impl FnOnce(&std::path::Path, std::path::PathBuf),
) -> Behind {
    let lab = SwarmLab::daemons(1).await;
    lab.load(1, &format!("{IMAGE}:{TAG}"));
    let sockets = TempDir::new();
    let at = sockets.0.join(format!("{name}.sock"));
    socket(&at, lab.socket(1));
    let case = Case::start(
        None,
        &[("CAPSTAN_DOCKER_SOCKETS_DIR", sockets.0.to_str().unwrap())],
    )
    .await;
    let env = environment_on(&case, name, &at).await;
    let sleeper = case
        .client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "sleeper", "registry_id": case.registry, "image_name": IMAGE,
                   "tag": TAG, "entrypoint": "sleep", "arguments": ["1000"]}),
        )
        .await;
    Behind {
        case,
        env,
        sleeper,
        socket: at,
        _sockets: sockets,
        lab,
    }
}

/// A daemon that answers slowly (a socket in front of it holding each call): a step waits
/// within its timeouts and the deployment ends DEPLOYED; one slower than the timeouts fails
/// naming the host that did not answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_daemon_is_waited_for_within_the_timeouts_and_then_named() {
    if !docker_ready() {
        return;
    }
    let delay = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(200));
    let behind = sleeper_behind("slow", |at, daemon| slow_socket(at, daemon, delay.clone())).await;
    let (client, sleeper, lab, slow) = (
        &behind.case.client,
        &behind.sleeper,
        &behind.lab,
        &behind.socket,
    );
    post(client, &format!("/container/{sleeper}/deploy"), json!({})).await;
    settled_in(client, "container", sleeper, "DEPLOYED").await;
    assert_eq!(on_daemon(|args| lab.docker(1, args), sleeper).len(), 1);

    // Slower than the timeouts: the redeploy fails, naming the host.
    delay.store(60_000, std::sync::atomic::Ordering::Relaxed);
    post(client, &format!("/container/{sleeper}/redeploy"), json!({})).await;
    let (state, reason) = deployed(client, sleeper).await;
    assert_eq!(state, "DEPLOYMENT_ERROR", "{reason}");
    assert!(reason.contains(&slow.display().to_string()), "{reason}");
}

/// A daemon that drops one call (a container's creation) and then answers: the step runs
/// again after a second and the deployment ends DEPLOYED, its log saying why it ran twice. A
/// failure that would recur (the workload exits at once) fails at the first run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_daemon_drops_is_made_again_and_a_workloads_own_failure_is_not() {
    if !docker_ready() {
        return;
    }
    let refusals = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let behind = sleeper_behind("refusing", |at, daemon| {
        refusing_socket(at, daemon, refusals.clone())
    })
    .await;
    let (client, registry) = (&behind.case.client, &behind.case.registry);
    let (env, sleeper, lab) = (&behind.env, &behind.sleeper, &behind.lab);
    refusals.store(1, std::sync::atomic::Ordering::SeqCst);
    post(client, &format!("/container/{sleeper}/deploy"), json!({})).await;
    let (state, history) = deployed(client, sleeper).await;
    assert_eq!(state, "DEPLOYED", "{history}");
    assert_eq!(refusals.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(on_daemon(|args| lab.docker(1, args), sleeper).len(), 1);
    let log = deployment_log(client, env).await;
    assert!(
        log.contains("the connection to the Docker daemon failed")
            && log.contains("this may pass, so the step runs again in 1 s (retry 1 of 3)"),
        "{log}"
    );
    assert!(!log.contains("retry 2 of 3"), "{log}");

    let quitter = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "quitter", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh", "arguments": ["-c", "echo giving up; exit 3"]}),
        )
        .await;
    post(client, &format!("/container/{quitter}/deploy"), json!({})).await;
    let (state, history) = deployed(client, &quitter).await;
    assert_eq!(state, "DEPLOYMENT_ERROR", "{history}");
    assert!(history.contains("exited with code 3"), "{history}");
    let log: Vec<Value> = serde_json::from_str(&deployment_log(client, env).await).unwrap();
    let lines = |holding: &str| {
        log.iter()
            .filter(|l| {
                l["message"]["safe_message"]
                    .as_str()
                    .is_some_and(|m| m.contains(holding))
            })
            .count()
    };
    assert_eq!(
        lines("runs again"),
        1,
        "only the sleeper's dropped call: {log:?}"
    );
    assert_eq!(
        lines("started container"),
        2,
        "the sleeper's second run and the quitter's only one: {log:?}"
    );
}

/// A build that runs its daemon out of space (a daemon whose data root is a small tmpfs) ends
/// BUILD_ERROR naming the cause and leaves no image of its own, tagged or dangling; what ran
/// before still runs, and once the space is back the next deployment succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_that_fills_its_daemons_disk_fails_naming_it() {
    if !docker_ready() {
        return;
    }
    let lab = SwarmLab::small(1, "128m").await;
    lab.load(1, &format!("{IMAGE}:{TAG}"));
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/big");
    let dockerfile = |run: &str| {
        format!(
            "FROM {IMAGE}:{TAG}\nRUN {run}\nCMD [\"sh\", \"-c\", \"echo up; exec sleep 1000\"]\n"
        )
    };
    let small = repo.commit(
        "small",
        &[("Dockerfile", &dockerfile("echo small > /small"))],
    );
    let case = Case::start(
        None,
        &[
            ("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap()),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    let client = &case.client;
    let env = environment_on(&case, "small-disk", &lab.socket(1)).await;
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "big", "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                   "git_repository": {"url": server.url("team/big"), "branch": "main",
                                      "root_path": "/"}}),
        )
        .await;
    let deploy = |commit: String| {
        let path = format!("/application/{app}/deploy");
        async move { post(client, &path, json!({"git_commit_id": commit})).await }
    };
    deploy(small.clone()).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let running = on_daemon(|args| lab.docker(1, args), &app);
    let images = |filter: &str| {
        lab.docker(1, &["images", "-q", "--filter", filter])
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let dangling_before = images("dangling=true");

    let big = repo.commit(
        "big",
        &[(
            "Dockerfile",
            &dockerfile("dd if=/dev/zero of=/big bs=1M count=400"),
        )],
    );
    deploy(big.clone()).await;
    settled_in(client, "application", &app, "BUILD_ERROR").await;
    let history = client
        .get(&format!("/application/{app}/deploymentHistoryV2"))
        .await
        .to_string();
    assert!(history.contains("No space left on device"), "{history}");
    assert!(
        !history.contains("\\u001b"),
        "no terminal escapes: {history}"
    );
    let reference = format!("capstan-build/{}:{big}", app.replace('-', ""));
    assert!(lab.docker(1, &["image", "inspect", &reference]).is_err());
    assert_eq!(
        images("dangling=true"),
        dangling_before,
        "no dangling image"
    );
    assert_eq!(on_daemon(|args| lab.docker(1, args), &app), running);

    let fits = repo.commit("fits", &[("Dockerfile", &dockerfile("echo fits > /fits"))]);
    deploy(fits).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(on_daemon(|args| lab.docker(1, args), &app).len(), 1);
}

/// A pull that runs out of space on its daemon (a 128 MB tmpfs data root, a 200 MB layer) ends
/// DEPLOYMENT_ERROR naming the cause and leaves no image of its own; the next deployment, of an
/// image that fits, runs. The registry is served inside the node's namespace at 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_that_fills_its_daemons_disk_fails_naming_it() {
    if !docker_ready() {
        return;
    }
    const PASSWORD: &str = "pull-s3cret-small-disk";
    let lab = SwarmLab::small(1, "128m").await;
    let registry = LocalRegistry::start("puller", PASSWORD).await;
    let big = format!("capstan-test/too-big:{}", std::process::id());
    let mut build = std::process::Command::new("docker")
        .args(["build", "-q", "-t", &big, "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let dockerfile =
            format!("FROM {IMAGE}:{TAG}\nRUN dd if=/dev/zero of=/big bs=1M count=200\n");
        build
            .stdin
            .take()
            .unwrap()
            .write_all(dockerfile.as_bytes())
            .unwrap();
    }
    assert!(build.wait().unwrap().success(), "the big image builds");
    registry.push(&big, "team/big:1");
    registry.push(&format!("{IMAGE}:{TAG}"), "team/small:1");
    let _ = docker(&["rmi", &big]);
    let _served = registry.served_in(&lab, 1).await;

    let case = Case::start(
        None,
        &[
            ("CAPSTAN_DOCKER_SOCKETS_DIR", lab.dir().to_str().unwrap()),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    let (client, org) = (&case.client, &case.org);
    let env = environment_on(&case, "small-disk", &lab.socket(1)).await;
    let host = &registry.address;
    let registry_id = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "lab", "kind": "GENERIC_CR", "url": format!("http://{host}"),
                   "config": {"username": "puller", "password": PASSWORD}}),
        )
        .await;
    let container = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "big", "registry_id": registry_id, "image_name": "team/big",
                   "tag": "1", "entrypoint": "sh",
                   "arguments": ["-c", "echo up; exec sleep 1000"]}),
        )
        .await;
    let images = |filter: &str| {
        lab.docker(1, &["images", "-q", "--filter", filter])
            .unwrap()
    };
    let dangling_before = images("dangling=true");
    post(client, &format!("/container/{container}/deploy"), json!({})).await;
    settled_in(client, "container", &container, "DEPLOYMENT_ERROR").await;
    let history = client
        .get(&format!("/container/{container}/deploymentHistoryV2"))
        .await
        .to_string();
    assert!(
        history.to_lowercase().contains("no space left on device"),
        "{history}"
    );
    assert!(!history.contains(PASSWORD));
    assert_eq!(
        images(&format!("reference={host}/team/big")),
        "",
        "no image of the failed pull"
    );
    assert_eq!(
        images("dangling=true"),
        dangling_before,
        "no dangling image"
    );
    assert!(on_daemon(|args| lab.docker(1, args), &container).is_empty());

    let (status, answer) = client
        .call(
            reqwest::Method::PUT,
            &format!("/container/{container}"),
            Some(
                json!({"name": "big", "registry_id": registry_id, "image_name": "team/small",
                        "tag": "1", "entrypoint": "sh",
                        "arguments": ["-c", "echo up; exec sleep 1000"]}),
            ),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    post(client, &format!("/container/{container}/deploy"), json!({})).await;
    settled_in(client, "container", &container, "DEPLOYED").await;
    assert_eq!(on_daemon(|args| lab.docker(1, args), &container).len(), 1);
    assert!(!case.own_log().contains(PASSWORD));
}
