//! Stored forms that several kinds hold: ports, volumes, health probes, git repositories and
//! the registry summary of an image.

use super::form::{number, Form, Text};
use domain::ids::{ContainerRegistryId, GitTokenId};
use domain::model::{
    ExecProbe, GitProvider, GitRepository, GrpcProbe, Healthchecks, HttpProbe, Port, PortProtocol,
    Probe, ProbeType, RegistryKind, RegistrySummary, ServiceSelector, StorageType, TcpProbe,
    Volume,
};
use time::OffsetDateTime;
use uuid::Uuid;

stored!(StoredSelector => ServiceSelector {
    key: String,
    value: String,
});

stored!(StoredPort => Port {
    id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    internal_port: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    external_port: Option<i64>,
    publicly_accessible: bool,
    protocol: Text<PortProtocol>,
    is_default: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    port_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    service_selectors: Option<Vec<StoredSelector>>,
});

/// Volumes stored before they had ids get one when read.
fn fresh_volume_id() -> Uuid {
    domain::ids::fresh("Volume")
}

stored!(StoredVolume => Volume {
    #[serde(default = "fresh_volume_id")]
    id: Uuid,
    #[serde(rename = "type")]
    storage_type: Text<StorageType>,
    size: i64,
    mount_point: String,
});

stored!(StoredExecProbe => ExecProbe {
    command: Vec<String>,
});

stored!(StoredGrpcProbe => GrpcProbe {
    port: i64,
    #[serde(default)]
    service: Option<String>,
});

fn root() -> String {
    "/".into()
}

fn http() -> String {
    "HTTP".into()
}

stored!(StoredHttpProbe => HttpProbe {
    port: i64,
    #[serde(default = "root")]
    path: String,
    #[serde(default = "http")]
    scheme: String,
});

stored!(StoredTcpProbe => TcpProbe {
    port: i64,
    #[serde(default)]
    host: Option<String>,
});

stored!(
    #[derive(Default)]
    StoredProbeType => ProbeType {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exec: Option<StoredExecProbe>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grpc: Option<StoredGrpcProbe>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http: Option<StoredHttpProbe>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tcp: Option<StoredTcpProbe>,
    }
);

stored!(StoredProbe => Probe {
    #[serde(rename = "type", default)]
    probe_type: StoredProbeType,
    #[serde(default = "number::<30>")]
    initial_delay_seconds: i64,
    #[serde(default = "number::<10>")]
    period_seconds: i64,
    #[serde(default = "number::<5>")]
    timeout_seconds: i64,
    #[serde(default = "number::<1>")]
    success_threshold: i64,
    #[serde(default = "number::<9>")]
    failure_threshold: i64,
});

stored!(
    #[derive(Default)]
    StoredHealthchecks => Healthchecks {
        #[serde(default)]
        readiness_probe: Option<StoredProbe>,
        #[serde(default)]
        liveness_probe: Option<StoredProbe>,
    }
);

stored!(StoredGitRepository => GitRepository {
    provider: Text<GitProvider>,
    owner: String,
    name: String,
    url: String,
    branch: String,
    root_path: String,
    #[serde(default)]
    has_access: bool,
    git_token_id: Option<Text<GitTokenId>>,
    #[serde(default)]
    git_token_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deployed_commit_id: Option<String>,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    deployed_commit_date: Option<OffsetDateTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deployed_commit_contributor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deployed_commit_tag: Option<String>,
});

stored!(StoredRegistrySummary => RegistrySummary {
    id: Text<ContainerRegistryId>,
    name: String,
    url: String,
    kind: Text<RegistryKind>,
});
