//! Clusters: where environments run. Besides their configuration they carry the state of the
//! engine's work on them (deploy, stop), which the engine's workers move along.

use super::{CloudProvider, DeploymentStatus, Record};
use crate::error::DomainError;
use crate::ids::{ClusterId, CredentialsId, MetadataGroupId, OrganizationId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub id: ClusterId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub description: Option<String>,
    pub region: String,
    pub cloud_provider: CloudProvider,
    pub spec: ClusterSpec,
    /// The advanced settings set on it (the others have their default).
    pub advanced_settings: Map<String, Value>,
    pub run: ClusterRun,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for Cluster {
    type Id = ClusterId;
    type Parent = OrganizationId;
    const KIND: &'static str = "cluster";
    fn id(&self) -> ClusterId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

string_enum!(KubernetesMode {
    Managed => "MANAGED",
    SelfManaged => "SELF_MANAGED",
    PartiallyManaged => "PARTIALLY_MANAGED",
});

/// The credentials a cluster is reached with, as the public request names them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredentialsRef {
    pub id: CredentialsId,
    #[serde(default)]
    pub name: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterCredentialsRef {
    pub cloud_provider: CloudProvider,
    pub credentials: CredentialsRef,
    pub region: String,
}

/// The nodes and machines of a cluster, as sent (with the public description's defaults).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusterSpec {
    #[serde(default = "one")]
    pub min_running_nodes: i64,
    #[serde(default = "one")]
    pub max_running_nodes: i64,
    #[serde(default = "twenty")]
    pub disk_size: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_iops: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default = "managed")]
    pub kubernetes: KubernetesMode,
    #[serde(default)]
    pub production: bool,
    #[serde(default)]
    pub ssh_keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_provider_credentials: Option<ClusterCredentialsRef>,
    /// The labels groups whose labels the cluster's own resources carry.
    #[serde(default)]
    pub labels_groups: Vec<GroupRef>,
    /// The Docker daemon an ON_PREMISE cluster runs its environments' workloads on (Capstan's
    /// addition); none: the daemon Capstan itself uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<super::DockerEndpointSpec>,
}

/// A labels group a cluster names (`{"id": ...}`, as the public description has it).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRef {
    pub id: MetadataGroupId,
}

fn one() -> i64 {
    1
}
fn twenty() -> i64 {
    20
}
fn managed() -> KubernetesMode {
    KubernetesMode::Managed
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self {
            min_running_nodes: one(),
            max_running_nodes: one(),
            disk_size: twenty(),
            disk_iops: None,
            disk_throughput: None,
            instance_type: None,
            kubernetes: managed(),
            production: false,
            ssh_keys: vec![],
            cloud_provider_credentials: None,
            labels_groups: vec![],
            docker: None,
        }
    }
}

impl ClusterSpec {
    pub fn validate(self) -> Result<Self, DomainError> {
        if self.min_running_nodes < 1 {
            return Err(DomainError::invalid(
                "min_running_nodes",
                "must be at least 1",
            ));
        }
        if self.max_running_nodes < self.min_running_nodes {
            return Err(DomainError::invalid(
                "max_running_nodes",
                "must be at least min_running_nodes",
            ));
        }
        if self.disk_size < 1 {
            return Err(DomainError::invalid("disk_size", "must be at least 1 (GB)"));
        }
        if let Some(iops) = self.disk_iops {
            if !(3000..=16000).contains(&iops) {
                return Err(DomainError::invalid(
                    "disk_iops",
                    "must be between 3000 and 16000",
                ));
            }
        }
        if let Some(t) = self.disk_throughput {
            if !(125..=1000).contains(&t) {
                return Err(DomainError::invalid(
                    "disk_throughput",
                    "must be between 125 and 1000",
                ));
            }
        }
        let mut seen = Vec::with_capacity(self.labels_groups.len());
        let mut spec = self;
        spec.labels_groups.retain(|g| {
            let first = !seen.contains(&g.id);
            seen.push(g.id);
            first
        });
        Ok(spec)
    }
}

string_enum!(
    /// Where the engine's work on a cluster stands (the public `ClusterStateEnum` values it
    /// uses). A cluster created and never deployed is READY.
    ClusterState {
        Ready => "READY",
        DeploymentQueued => "DEPLOYMENT_QUEUED",
        Deploying => "DEPLOYING",
        Deployed => "DEPLOYED",
        DeploymentError => "DEPLOYMENT_ERROR",
        StopQueued => "STOP_QUEUED",
        Stopping => "STOPPING",
        Stopped => "STOPPED",
        StopError => "STOP_ERROR",
    }
);

/// What the engine does to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterAction {
    Deploy,
    Stop,
}

impl ClusterState {
    /// Queued or running: another action must wait for it.
    pub fn busy(self) -> bool {
        matches!(
            self,
            Self::DeploymentQueued | Self::Deploying | Self::StopQueued | Self::Stopping
        )
    }

    /// The action a queued or running state carries out.
    pub fn action(self) -> Option<ClusterAction> {
        match self {
            Self::DeploymentQueued | Self::Deploying => Some(ClusterAction::Deploy),
            Self::StopQueued | Self::Stopping => Some(ClusterAction::Stop),
            _ => None,
        }
    }
}

/// The engine's work on a cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterRun {
    pub state: ClusterState,
    pub deployment_status: DeploymentStatus,
    /// Why the last action failed.
    pub reason: Option<String>,
    pub queued_at: Option<OffsetDateTime>,
    pub last_deployment_date: Option<OffsetDateTime>,
    pub last_execution_id: Option<String>,
    /// The worker running the action, and until when its claim holds.
    pub claimed_by: Option<String>,
    pub lease_until: Option<OffsetDateTime>,
}

impl Default for ClusterRun {
    fn default() -> Self {
        Self {
            state: ClusterState::Ready,
            deployment_status: DeploymentStatus::NeverDeployed,
            reason: None,
            queued_at: None,
            last_deployment_date: None,
            last_execution_id: None,
            claimed_by: None,
            lease_until: None,
        }
    }
}

/// The Kubernetes version the engine runs clusters at: the simulated engine has one for all,
/// and no newer one to offer (the status's `next_k8s_available_version` is null).
pub const KUBERNETES_VERSION: &str = "1.31";

impl Cluster {
    /// What its nodes give together at most, scaled out to `max_running_nodes`: (millicores,
    /// MB). Each node is sized for the largest workload a service may ask for
    /// (`MAXIMUM_CPU`, `MAXIMUM_MEMORY`), the installation-wide maxima that services show.
    pub fn capacity(&self) -> (i64, i64) {
        let nodes = self.spec.max_running_nodes;
        (
            super::MAXIMUM_CPU.saturating_mul(nodes),
            super::MAXIMUM_MEMORY.saturating_mul(nodes),
        )
    }

    /// Running there: deployed, and not being stopped.
    pub fn is_deployed(&self) -> bool {
        matches!(
            self.run.state,
            ClusterState::Deployed
                | ClusterState::StopQueued
                | ClusterState::Stopping
                | ClusterState::StopError
        )
    }

    /// Queues `action`; refused while another is queued or running, and a stop of a cluster
    /// that is not deployed.
    pub fn queue(&mut self, action: ClusterAction, now: OffsetDateTime) -> Result<(), DomainError> {
        if self.run.state.busy() {
            return Err(DomainError::state(format!(
                "the cluster is {}: wait for it to end",
                self.run.state.as_str().to_lowercase().replace('_', " ")
            )));
        }
        let state = match action {
            ClusterAction::Deploy => ClusterState::DeploymentQueued,
            ClusterAction::Stop if self.run.state == ClusterState::Deployed => {
                ClusterState::StopQueued
            }
            ClusterAction::Stop => {
                return Err(DomainError::state(
                    "the cluster is not deployed: nothing to stop",
                ))
            }
        };
        self.run.state = state;
        self.run.reason = None;
        self.run.queued_at = Some(now);
        self.run.last_execution_id = Some(crate::ids::fresh("ExecutionId").to_string());
        Ok(())
    }

    /// Records the end of the running action.
    pub fn finish(&mut self, outcome: Result<(), String>, now: OffsetDateTime) {
        let action = self.run.state.action();
        self.run.state = match (action, &outcome) {
            (Some(ClusterAction::Deploy), Ok(())) => ClusterState::Deployed,
            (Some(ClusterAction::Deploy), Err(_)) => ClusterState::DeploymentError,
            (Some(ClusterAction::Stop), Ok(())) => ClusterState::Stopped,
            (Some(ClusterAction::Stop), Err(_)) => ClusterState::StopError,
            (None, _) => self.run.state,
        };
        if action == Some(ClusterAction::Deploy) && outcome.is_ok() {
            self.run.deployment_status = DeploymentStatus::UpToDate;
            self.run.last_deployment_date = Some(now);
        }
        self.run.reason = outcome.err();
        self.run.claimed_by = None;
        self.run.lease_until = None;
    }

    /// A configuration change: a deployed cluster no longer runs what is configured.
    pub fn mark_changed(&mut self) {
        if self.run.deployment_status == DeploymentStatus::UpToDate {
            self.run.deployment_status = DeploymentStatus::OutOfDate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        Cluster {
            id: ClusterId::generate(),
            organization_id: OrganizationId::generate(),
            name: super::super::Name::parse("name", "c").unwrap(),
            description: None,
            region: "r".into(),
            cloud_provider: CloudProvider::CloudA,
            spec: ClusterSpec::default(),
            advanced_settings: Map::new(),
            run: ClusterRun::default(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn deploy_and_stop_move_through_their_states() {
        let mut c = cluster();
        let now = OffsetDateTime::UNIX_EPOCH;
        assert!(c.queue(ClusterAction::Stop, now).is_err(), "not deployed");
        c.queue(ClusterAction::Deploy, now).unwrap();
        assert_eq!(c.run.state, ClusterState::DeploymentQueued);
        assert!(c.queue(ClusterAction::Deploy, now).is_err(), "busy");
        c.run.state = ClusterState::Deploying;
        c.finish(Ok(()), now);
        assert_eq!(c.run.state, ClusterState::Deployed);
        assert_eq!(c.run.deployment_status, DeploymentStatus::UpToDate);
        assert!(c.is_deployed());
        c.mark_changed();
        assert_eq!(c.run.deployment_status, DeploymentStatus::OutOfDate);
        c.queue(ClusterAction::Stop, now).unwrap();
        c.run.state = ClusterState::Stopping;
        c.finish(Err("no".into()), now);
        assert_eq!(c.run.state, ClusterState::StopError);
        assert_eq!(c.run.reason.as_deref(), Some("no"));
    }

    #[test]
    fn specs_are_checked() {
        let spec = |v: Value| serde_json::from_value::<ClusterSpec>(v).unwrap().validate();
        assert!(spec(serde_json::json!({"min_running_nodes": 2, "max_running_nodes": 3})).is_ok());
        for (v, field) in [
            (
                serde_json::json!({"min_running_nodes": 0}),
                "min_running_nodes",
            ),
            (
                serde_json::json!({"min_running_nodes": 3, "max_running_nodes": 2}),
                "max_running_nodes",
            ),
            (serde_json::json!({"disk_iops": 10}), "disk_iops"),
        ] {
            let err = spec(v).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }
}
