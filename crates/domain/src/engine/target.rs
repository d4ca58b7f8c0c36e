//! Where a cluster's workloads run, as the engine that runs them reaches it.

use crate::ids::ClusterId;
use crate::model::DockerHost;

/// A cluster's place, one variant per kind of engine with what that engine needs to reach it
/// (a Docker host now; a Swarm and a Kubernetes cluster next: docs/kubernetes.md). Resolved
/// once from the cluster's record (`Capstan::target_of_cluster`); the engines' dispatcher
/// sends each call to the adapter registered for the target's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Docker daemon: the installation's own, or the one an ON_PREMISE cluster names.
    Docker(DockerHost),
}

/// What kind of engine a target needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    Docker,
}

impl TargetKind {
    pub const ALL: &'static [TargetKind] = &[TargetKind::Docker];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Docker => "Docker",
        }
    }
}

impl Target {
    pub fn kind(&self) -> TargetKind {
        match self {
            Target::Docker(_) => TargetKind::Docker,
        }
    }

    pub fn cluster_id(&self) -> ClusterId {
        match self {
            Target::Docker(host) => host.cluster_id,
        }
    }

    /// The target for messages (a Docker host's endpoint).
    pub fn describe(&self) -> String {
        match self {
            Target::Docker(host) => host.describe(),
        }
    }

    /// The target as a message names it ("the Docker host tcp://10.0.0.5:2376").
    pub fn named(&self) -> String {
        match self {
            Target::Docker(host) => format!("the Docker host {}", host.describe()),
        }
    }

    /// The target once its cluster's deployment found who answers there (see
    /// [`crate::model::DaemonIdentity`]): the engine acts there only while the same one does.
    pub fn claimed_by(self, daemon: crate::model::ClaimedDaemon) -> Self {
        match self {
            Target::Docker(mut host) => {
                host.daemon = Some(daemon);
                Target::Docker(host)
            }
        }
    }
}
