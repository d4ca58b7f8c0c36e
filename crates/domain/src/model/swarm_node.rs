//! A node of the Docker Swarm a cluster runs on, as its managers see it (a Capstan addition to
//! the cluster's status).

use serde::Serialize;

string_enum!(
    /// What a node does in its Swarm.
    NodeRole {
        Manager => "MANAGER",
        Worker => "WORKER",
    }
);

string_enum!(
    /// Whether the Swarm places tasks on a node: ACTIVE, or PAUSE (no new ones) or DRAIN
    /// (none, and its own moved away), as its operator set it.
    NodeAvailability {
        Active => "ACTIVE",
        Pause => "PAUSE",
        Drain => "DRAIN",
    }
);

string_enum!(
    /// Whether a node answers its managers: READY, or DOWN once its heartbeat lapsed.
    NodeState {
        Ready => "READY",
        Down => "DOWN",
        Disconnected => "DISCONNECTED",
        Unknown => "UNKNOWN",
    }
);

/// One node of a Swarm.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwarmNode {
    /// The Swarm's id of the node.
    pub id: String,
    pub hostname: String,
    /// Where it is reached (its Swarm address: where its host-mode ports answer).
    pub address: String,
    pub role: NodeRole,
    /// The manager that leads the Swarm's managers.
    pub leader: bool,
    pub availability: NodeAvailability,
    pub state: NodeState,
    /// How many tasks the Swarm wants running there now.
    pub tasks: u32,
}

/// One host of a cluster, as the live API's cluster status shows it: the Docker host itself, or
/// each node of the Swarm its host manages, with what it holds against what it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterHost {
    pub name: String,
    /// Where its published ports answer.
    pub address: String,
    /// What it does in its Swarm; none for a plain host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<NodeRole>,
    /// Whether it answers: READY, or DOWN (a plain host not answering; a node whose
    /// heartbeat lapsed), as the Swarm's managers tell it for a node.
    pub state: NodeState,
    /// Capstan's replicas running there.
    pub replicas: u32,
    /// What it has: its cores in millicores, its memory in bytes.
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
    /// What the replicas there may use at most, by their limits.
    pub reserved_cpu_millicores: i64,
    pub reserved_memory_bytes: i64,
}
