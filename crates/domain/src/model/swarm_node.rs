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
