//! The live API's messages, with the members its published client declares (times in Unix
//! milliseconds).

use domain::model::{Replica, RunState, ServiceKind};
use domain::services::{LiveEnvironment, LiveService};
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;

fn millis(t: Option<OffsetDateTime>) -> i64 {
    t.map_or(0, |t| {
        i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
    })
}

/// `ServiceStatusDto`.
#[derive(Serialize, PartialEq)]
pub struct ServiceStatus {
    pub environments: Vec<EnvironmentStatus>,
}

/// `EnvironmentStatusDto`.
#[derive(Serialize, PartialEq)]
pub struct EnvironmentStatus {
    pub id: String,
    pub project_id: String,
    pub state: RunState,
    pub applications: Vec<ApplicationStatus>,
    pub containers: Vec<ApplicationStatus>,
    pub databases: Vec<DatabaseStatus>,
    pub jobs: Vec<ApplicationStatus>,
    pub helms: Vec<ApplicationStatus>,
    /// Terraform services have no workload status of their own yet: always empty.
    pub terraform: Vec<serde_json::Value>,
    pub argocd_apps: Vec<serde_json::Value>,
    pub agentic_workflows: Vec<ApplicationStatus>,
}

/// `ApplicationStatusDto`.
#[derive(Serialize, PartialEq)]
pub struct ApplicationStatus {
    pub id: String,
    pub state: RunState,
    pub pods: Vec<PodStatus>,
    pub certificates: Vec<serde_json::Value>,
    pub scaled_object: Option<serde_json::Value>,
}

/// `DatabaseStatusDto`.
#[derive(Serialize, PartialEq)]
pub struct DatabaseStatus {
    pub id: String,
    pub state: RunState,
    pub pods: Vec<PodStatus>,
}

/// `PodStatusDto`: a replica.
#[derive(Serialize, PartialEq)]
pub struct PodStatus {
    pub name: String,
    pub state: RunState,
    pub state_message: String,
    pub state_reason: String,
    pub restart_count: i64,
    pub started_at: i64,
    pub service_version: String,
    pub containers: Vec<ContainerStatus>,
    pub last_events: Vec<PodEvent>,
    /// The node it runs on, on a Swarm cluster (a Capstan addition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// `PodKubernetesEventDto`: something that happened to a replica.
#[derive(Serialize, PartialEq)]
pub struct PodEvent {
    pub created_at: i64,
    pub reason: domain::model::ReplicaEventReason,
    pub message: String,
    /// Kubernetes' event type: every event a replica keeps is a warning.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// `ContainerStatusDto`.
#[derive(Serialize, PartialEq)]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    pub restart_count: i64,
    pub current_state: Option<ContainerState>,
    pub last_terminated_state: Option<ContainerTerminated>,
}

/// `ContainerStateDto`.
#[derive(Serialize, PartialEq)]
pub struct ContainerState {
    pub state: RunState,
    pub started_at: i64,
    pub state_message: Option<String>,
    pub state_reason: Option<String>,
}

/// `ContainerStateTerminatedDto`.
#[derive(Serialize, PartialEq)]
pub struct ContainerTerminated {
    pub exit_code: i64,
    pub exit_code_message: String,
    pub finished_at: i64,
    pub message: String,
    pub reason: String,
    pub signal: i64,
    pub started_at: i64,
}

/// The signal a conventional exit code tells of (128 + n), or 0.
fn signal_of(code: i64) -> i64 {
    if (129..=159).contains(&code) {
        code - 128
    } else {
        0
    }
}

fn pod(r: &Replica, version: &str) -> PodStatus {
    let terminated = r.exit_code.map(|code| ContainerTerminated {
        exit_code: code,
        exit_code_message: r.message.clone().unwrap_or_default(),
        finished_at: millis(r.finished_at),
        message: r.message.clone().unwrap_or_default(),
        reason: r.reason.clone().unwrap_or_default(),
        signal: signal_of(code),
        started_at: millis(r.started_at),
    });
    PodStatus {
        name: r.name.clone(),
        state: r.state,
        state_message: r.message.clone().unwrap_or_default(),
        state_reason: r.reason.clone().unwrap_or_default(),
        restart_count: r.restart_count,
        started_at: millis(r.started_at),
        service_version: version.to_string(),
        containers: vec![ContainerStatus {
            name: r.name.clone(),
            image: r.image.clone(),
            restart_count: r.restart_count,
            current_state: Some(ContainerState {
                state: r.state,
                started_at: millis(r.started_at),
                state_message: r.message.clone(),
                state_reason: r.reason.clone(),
            }),
            last_terminated_state: terminated,
        }],
        last_events: r
            .events
            .iter()
            .map(|e| PodEvent {
                created_at: millis(Some(e.at)),
                reason: e.reason,
                message: e.message.clone(),
                kind: "Warning",
            })
            .collect(),
        node: r.node.clone(),
    }
}

fn pods(s: &LiveService) -> Vec<PodStatus> {
    let version = s.version.clone().unwrap_or_default();
    s.replicas.iter().map(|r| pod(r, &version)).collect()
}

fn application(s: &LiveService) -> ApplicationStatus {
    ApplicationStatus {
        id: s.id.0.to_string(),
        state: s.state,
        pods: pods(s),
        certificates: Vec::new(),
        scaled_object: None,
    }
}

/// `/service/pods`' message (Capstan's shape, the live API's client declaring none): one
/// service's state and its replicas as `PodStatusDto`s.
#[derive(Serialize, PartialEq)]
pub struct ServicePods {
    pub service_id: String,
    pub state: RunState,
    pub pods: Vec<PodStatus>,
}

impl ServicePods {
    pub fn of(s: &LiveService) -> Self {
        Self {
            service_id: s.id.0.to_string(),
            state: s.state,
            pods: pods(s),
        }
    }
}

/// `/service/metrics`' message (Capstan's shape): one reading of what each running replica
/// of a service consumes against its limits.
#[derive(Serialize)]
pub struct ServiceMetrics {
    pub service_id: String,
    /// When it was read.
    pub created_at: i64,
    pub pods: Vec<PodMetrics>,
    /// Why nothing could be read this time, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Serialize)]
pub struct PodMetrics {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub cpu: CpuMetrics,
    pub memory: MemoryMetrics,
    pub storage: Vec<VolumeMetrics>,
}

#[derive(Serialize)]
pub struct CpuMetrics {
    pub used_millicores: f64,
    pub limit_millicores: Option<f64>,
    /// Of the limit, when there is one.
    pub percent: Option<f64>,
}

#[derive(Serialize)]
pub struct MemoryMetrics {
    pub used_bytes: u64,
    pub limit_bytes: Option<u64>,
    pub percent: Option<f64>,
}

#[derive(Serialize)]
pub struct VolumeMetrics {
    pub volume: String,
    pub used_bytes: u64,
}

impl ServiceMetrics {
    pub fn of(service: domain::ids::ServiceId, sample: &domain::services::UsageSample) -> Self {
        Self {
            service_id: service.0.to_string(),
            created_at: millis(Some(sample.at)),
            error: sample.failure.clone(),
            pods: sample
                .replicas
                .iter()
                .map(|r| PodMetrics {
                    name: r.replica.clone(),
                    node: r.node.clone(),
                    cpu: CpuMetrics {
                        used_millicores: r.cpu_millicores,
                        limit_millicores: r.cpu_limit_millicores,
                        percent: r.cpu_percent(),
                    },
                    memory: MemoryMetrics {
                        used_bytes: r.memory_bytes,
                        limit_bytes: r.memory_limit_bytes,
                        percent: r.memory_percent(),
                    },
                    storage: r
                        .storage
                        .iter()
                        .map(|(volume, used)| VolumeMetrics {
                            volume: volume.clone(),
                            used_bytes: *used,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `/cluster/status`' message (Capstan's shape): the cluster's state and its hosts (the
/// Docker host, or each node of its Swarm) with what each holds against what it has.
#[derive(Serialize, PartialEq)]
pub struct ClusterHosts {
    pub cluster_id: String,
    pub status: domain::model::ClusterState,
    pub hosts: Vec<domain::model::ClusterHost>,
    /// Why its hosts cannot be told now (its host does not answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ClusterHosts {
    pub fn of(
        cluster: &domain::model::Cluster,
        hosts: Result<Vec<domain::model::ClusterHost>, String>,
    ) -> Self {
        let (hosts, error) = match hosts {
            Ok(hosts) => (hosts, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        Self {
            cluster_id: cluster.id.0.to_string(),
            status: cluster.run.state,
            hosts,
            error,
        }
    }
}

impl ServiceStatus {
    pub fn of(environments: &[LiveEnvironment]) -> Self {
        Self {
            environments: environments.iter().map(EnvironmentStatus::of).collect(),
        }
    }
}

impl EnvironmentStatus {
    fn of(env: &LiveEnvironment) -> Self {
        let of_kind = |kind: ServiceKind| -> Vec<ApplicationStatus> {
            env.services
                .iter()
                .filter(|s| s.kind == kind)
                .map(application)
                .collect()
        };
        Self {
            id: env.id.0.to_string(),
            project_id: env.project_id.0.to_string(),
            state: env.state,
            applications: of_kind(ServiceKind::Application),
            containers: of_kind(ServiceKind::Container),
            databases: env
                .services
                .iter()
                .filter(|s| s.kind == ServiceKind::Database)
                .map(|s| DatabaseStatus {
                    id: s.id.0.to_string(),
                    state: s.state,
                    pods: pods(s),
                })
                .collect(),
            jobs: of_kind(ServiceKind::Job),
            helms: of_kind(ServiceKind::Helm),
            terraform: Vec::new(),
            argocd_apps: Vec::new(),
            agentic_workflows: Vec::new(),
        }
    }
}

/// `ServiceLogResponseDto`: one line a replica printed.
#[derive(Serialize)]
pub struct ServiceLog {
    pub created_at: i64,
    pub message: String,
    pub pod_name: String,
    pub container_name: String,
    pub version: String,
    pub severity_text: &'static str,
    pub from_kube: bool,
    pub labels: BTreeMap<String, String>,
}

impl From<domain::model::OutputLine> for ServiceLog {
    fn from(l: domain::model::OutputLine) -> Self {
        Self {
            created_at: millis(Some(l.at)),
            severity_text: match l.stream {
                domain::model::OutputStream::Stdout => "INFO",
                domain::model::OutputStream::Stderr => "ERROR",
            },
            container_name: l.replica.clone(),
            pod_name: l.replica,
            version: l.version,
            message: l.message,
            from_kube: false,
            labels: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_by_signal_names_it() {
        assert_eq!(signal_of(137), 9);
        assert_eq!(signal_of(143), 15);
        assert_eq!(signal_of(1), 0);
        assert_eq!(signal_of(0), 0);
    }
}
