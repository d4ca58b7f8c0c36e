use super::{read, write};
use domain::model::*;
use serde_json::{json, Value};

/// Specs as the binary of aca6ffe stored them, one of each form its API made (the
/// application's repository also with the members a push writes).
const STORED_BY_ACA6FFE: &str = include_str!("stored_by_aca6ffe.json");

#[test]
fn specs_stored_before_read_back_and_are_written_as_they_were() {
    let records: Vec<Value> = serde_json::from_str(STORED_BY_ACA6FFE).unwrap();
    assert_eq!(records.len(), 11);
    for record in records {
        let kind: ServiceKind = record["kind"].as_str().unwrap().parse().unwrap();
        let stored = &record["spec"];
        let spec = read(kind, &stored.to_string()).unwrap();
        assert_eq!(spec.kind(), kind);
        let written: Value = serde_json::from_str(&write(&spec).unwrap()).unwrap();
        assert_eq!(&written, stored, "{kind}");
    }
}

#[test]
fn stored_members_reach_the_spec() {
    let records: Vec<Value> = serde_json::from_str(STORED_BY_ACA6FFE).unwrap();
    let specs: Vec<ServiceSpec> = records
        .iter()
        .map(|r| {
            let kind = r["kind"].as_str().unwrap().parse().unwrap();
            read(kind, &r["spec"].to_string()).unwrap()
        })
        .collect();
    let ServiceSpec::Application(app) = &specs[0] else {
        panic!("{:?}", specs[0])
    };
    let repo = &app.git_repository;
    assert_eq!(repo.provider, GitProvider::HostA);
    assert_eq!(repo.deployed_commit_id.as_deref(), Some("4f2a9c1"));
    assert_eq!(repo.deployed_commit_tag.as_deref(), Some("v1.4.0"));
    assert!(repo.deployed_commit_date.is_some() && repo.git_token_id.is_some());
    assert_eq!(app.build_mode, BuildMode::Docker);
    let runtime = &app.runtime;
    assert_eq!(
        (runtime.ports[1].protocol, runtime.storage[0].storage_type),
        (PortProtocol::Grpc, StorageType::FastSsd)
    );
    assert_eq!(runtime.workload.cpu_architecture, CpuArchitecture::Arm64);
    let readiness = runtime.workload.healthchecks.readiness_probe.as_ref();
    assert_eq!(
        readiness
            .and_then(|p| p.probe_type.http.as_ref())
            .map(|h| h.path.as_str()),
        Some("/ready")
    );
    let infra = specs
        .iter()
        .find_map(|s| match s {
            ServiceSpec::Terraform(t)
                if t.terraform_files_source.git.git_repository.name == "infra" =>
            {
                Some(t)
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(infra.backend, TerraformBackend::UserProvided {});
    assert_eq!(infra.engine, TerraformEngine::OpenTofu);
    assert_eq!(infra.action_extra_arguments["plan"], ["-parallelism=4"]);
    let helm_repositories: Vec<Option<uuid::Uuid>> = specs
        .iter()
        .filter(|s| s.kind() == ServiceKind::Helm)
        .map(|s| s.helm_repository_id().map(|id| id.0))
        .collect();
    assert_eq!(helm_repositories.iter().filter(|r| r.is_some()).count(), 1);
}

#[test]
fn stored_form_round_trips_for_every_kind() {
    let reg = uuid::Uuid::new_v4();
    let bodies = [
        (
            ServiceKind::Application,
            json!({"name": "a", "git_repository": {"url": "https://github.com/o/r"}}),
        ),
        (
            ServiceKind::Container,
            json!({"name": "c", "registry_id": reg, "image_name": "nginx", "tag": "1.27",
            "entrypoint": "/bin/sh", "arguments": ["-c", "run"], "cpu": 250,
            "ports": [{"internal_port": 80, "publicly_accessible": true}]}),
        ),
        (
            ServiceKind::Database,
            json!({"name": "d", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"}),
        ),
        (
            ServiceKind::Job,
            json!({"name": "j", "schedule": {"cronjob": {"scheduled_at": "*/5 * * * *"}},
            "source": {"image": {"image_name": "busybox", "tag": "1", "registry_id": reg}}}),
        ),
        (
            ServiceKind::Helm,
            json!({"name": "h", "source": {"helm_repository": {"repository": "https://charts.example.com", "chart_name": "redis", "chart_version": "1.0.0"}},
            "arguments": [], "auto_deploy": false, "values_override": {"set": [["a", "b"]]}}),
        ),
        (
            ServiceKind::Terraform,
            json!({"name": "t", "terraform_files_source": {"git_repository": {"url": "https://gitlab.com/o/infra"}}}),
        ),
    ];
    for (kind, body) in bodies {
        let draft = ServiceDraft::parse(kind, &body, None).unwrap();
        assert_eq!(draft.spec.kind(), kind);
        let stored = write(&draft.spec).unwrap();
        assert_eq!(read(kind, &stored).unwrap(), draft.spec);
    }
}

#[test]
fn records_stored_before_their_members_existed_read_back_with_defaults() {
    let repo = json!({"provider": "HOSTB", "owner": "o", "name": "infra",
        "url": "https://gitlab.com/o/infra", "branch": "main", "root_path": "/",
        "git_token_id": null});
    let old = json!({"terraform_files_source": {"git_repository": repo}, "auto_deploy": true,
        "timeout_sec": 1800, "engine": "TERRAFORM",
        "terraform_variables_source": {"tf_var_file_paths": [], "tf_vars": []}});
    let spec = read(ServiceKind::Terraform, &old.to_string()).unwrap();
    let ServiceSpec::Terraform(t) = &spec else {
        panic!("{spec:?}")
    };
    assert_eq!(t.terraform_files_source.git.git_repository.name, "infra");
    assert_eq!(t.icon_uri, "app://capstan/terraform");
    assert_eq!(t.backend, TerraformBackend::Kubernetes {});
    let shown = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        shown["terraform_files_source"]["git"]["git_repository"]["url"],
        "https://gitlab.com/o/infra"
    );
    // Every kind as stored before this session's members existed.
    let reg = uuid::Uuid::new_v4();
    let old_job = json!({"job_type": "CRON", "schedule": {"cronjob": {"scheduled_at": "0 * * * *",
        "timezone": "Etc/UTC", "arguments": []}},
        "source": {"image": {"image_name": "busybox", "tag": "1", "registry_id": reg}},
        "auto_deploy": false, "max_nb_restart": 0, "max_duration_seconds": 300, "cpu": 500,
        "memory": 512});
    let job = read(ServiceKind::Job, &old_job.to_string()).unwrap();
    let shown = serde_json::to_value(&job).unwrap();
    assert_eq!(shown["icon_uri"], "app://capstan/job");
    assert_eq!(
        (&shown["gpu"], &shown["auto_preview"]),
        (&json!(0), &json!(false))
    );
    let runtime = json!({"ports": [], "arguments": [], "auto_deploy": false, "cpu": 500,
        "memory": 512, "min_running_instances": 1, "max_running_instances": 1});
    let mut old_container = runtime.clone();
    for (k, v) in [
        ("registry_id", json!(reg)),
        ("image_name", json!("nginx")),
        ("tag", json!("1")),
    ] {
        old_container[k] = v;
    }
    let container = read(ServiceKind::Container, &old_container.to_string()).unwrap();
    assert_eq!(container.icon_uri(), "app://capstan/container");
    assert_eq!(container.registry_summary(), None, "filled on read");
    let mut old_app = runtime;
    old_app["git_repository"] = json!({"provider": "HOSTA", "owner": "o", "name": "r",
        "url": "https://github.com/o/r", "branch": "main", "root_path": "/", "git_token_id": null});
    old_app["build_mode"] = json!("DOCKER");
    let app = read(ServiceKind::Application, &old_app.to_string()).unwrap();
    assert_eq!(app.icon_uri(), "app://capstan/application");
    let old_helm = json!({"auto_preview": false, "auto_deploy": false, "arguments": [],
        "allow_cluster_wide_resources": false, "timeout_sec": 600, "ports": [],
        "values_override": {"set": [], "set_string": [], "set_json": [], "file": null},
        "source": {"repository": {"chart_name": "redis", "chart_version": "1",
            "repository": {"id": reg, "name": "x", "url": "https://charts.example.com"}}}});
    let helm = read(ServiceKind::Helm, &old_helm.to_string()).unwrap();
    assert_eq!(helm.icon_uri(), "app://capstan/helm");
    assert_eq!(helm.helm_repository_id(), None, "an address given inline");
    let old_db = json!({"type": "REDIS", "version": "7", "mode": "CONTAINER",
        "accessibility": "PRIVATE", "cpu": 250, "memory": 256, "storage": 10});
    let db = read(ServiceKind::Database, &old_db.to_string()).unwrap();
    assert_eq!(
        serde_json::to_value(&db).unwrap()["icon_uri"],
        "app://capstan/database"
    );
}
