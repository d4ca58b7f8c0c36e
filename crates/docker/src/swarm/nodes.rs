//! The Swarm a daemon is a node of, as its managers see it: whether the daemon manages one,
//! and its nodes (address, role, availability, state, what they hold) for the cluster's status.

use crate::engine::DockerEngine;
use crate::errors::said;
use bollard::models::{
    LocalNodeState, Node, NodeSpecAvailabilityEnum, NodeSpecRoleEnum, SwarmInfo, TaskState,
};
use bollard::query_parameters::ListTasksOptions;
use domain::engine::EngineError;
use domain::model::{NodeAvailability, NodeRole, NodeState, SwarmNode};
use std::collections::HashMap;

/// What a daemon is in its Swarm, for the cluster's log; none when it is in none.
fn swarm_part(swarm: Option<&SwarmInfo>) -> Option<String> {
    let swarm = swarm.filter(|s| s.local_node_state == Some(LocalNodeState::ACTIVE))?;
    Some(if swarm.control_available == Some(true) {
        format!(
            "a manager of a Swarm of {} nodes ({} managers)",
            swarm.nodes.unwrap_or(0),
            swarm.managers.unwrap_or(0)
        )
    } else {
        "a worker of a Swarm (its nodes are seen through a manager)".to_string()
    })
}

pub(crate) fn role_of(role: Option<NodeSpecRoleEnum>) -> NodeRole {
    match role {
        Some(NodeSpecRoleEnum::MANAGER) => NodeRole::Manager,
        _ => NodeRole::Worker,
    }
}

pub(crate) fn state_of(state: Option<bollard::models::NodeState>) -> NodeState {
    match state {
        Some(bollard::models::NodeState::READY) => NodeState::Ready,
        Some(bollard::models::NodeState::DOWN) => NodeState::Down,
        Some(bollard::models::NodeState::DISCONNECTED) => NodeState::Disconnected,
        _ => NodeState::Unknown,
    }
}

/// A node as the cluster's status shows it, with the tasks the Swarm wants running there.
fn node_of(node: Node, tasks: &HashMap<String, u32>) -> Option<SwarmNode> {
    let id = node.id?;
    let spec = node.spec.unwrap_or_default();
    let status = node.status.unwrap_or_default();
    Some(SwarmNode {
        tasks: tasks.get(&id).copied().unwrap_or(0),
        hostname: node
            .description
            .and_then(|d| d.hostname)
            .unwrap_or_default(),
        address: status.addr.unwrap_or_default(),
        role: role_of(spec.role),
        leader: node.manager_status.and_then(|m| m.leader).unwrap_or(false),
        availability: match spec.availability {
            Some(NodeSpecAvailabilityEnum::PAUSE) => NodeAvailability::Pause,
            Some(NodeSpecAvailabilityEnum::DRAIN) => NodeAvailability::Drain,
            _ => NodeAvailability::Active,
        },
        state: state_of(status.state),
        id,
    })
}

/// Why the Swarm of `nodes` cannot act: a majority of its managers is unreachable or down
/// (its leader, when it keeps one, commits nothing then); none when it can.
pub(crate) fn lost_quorum(nodes: &[Node]) -> Option<String> {
    let managers: Vec<&Node> = nodes
        .iter()
        .filter(|n| n.manager_status.is_some())
        .collect();
    let reachable = managers
        .iter()
        .filter(|n| {
            let status = n.manager_status.as_ref();
            let down =
                n.status.as_ref().and_then(|s| s.state) == Some(bollard::models::NodeState::DOWN);
            status.and_then(|m| m.reachability) == Some(bollard::models::Reachability::REACHABLE)
                && !down
        })
        .count();
    (!managers.is_empty() && reachable * 2 <= managers.len()).then(|| {
        format!(
            "its Swarm lost a majority of its managers: {reachable} of {} answer",
            managers.len()
        )
    })
}

/// Whether the daemon manages an active Swarm.
fn manages(info: &bollard::models::SystemInfo) -> bool {
    info.swarm.as_ref().is_some_and(|s| {
        s.local_node_state == Some(LocalNodeState::ACTIVE) && s.control_available == Some(true)
    })
}

/// The address in its Swarm of the node whose daemon `docker` is.
pub(crate) async fn own_address(docker: &bollard::Docker) -> Option<String> {
    let info = docker.info().await.ok()?;
    info.swarm?.node_addr.filter(|a| !a.is_empty())
}

impl DockerEngine {
    /// Probes the liveness of the tasks on every node whose daemon Capstan reaches (the
    /// manager's own among them), at the node's address; a task that fails is stopped, and
    /// the Swarm starts another in its place. Tasks on other nodes are not probed.
    pub(crate) fn keep_tasks_alive(
        &self,
        reports: &tokio::sync::mpsc::Sender<domain::model::RunningState>,
    ) {
        let (scope, reports) = (self.scope(), reports.clone());
        let probe = move |docker: bollard::Docker, address: String| {
            crate::liveness::watch(
                docker,
                crate::probe::Reach {
                    published: address,
                    loopback: false,
                },
                crate::liveness::Failing::Stop,
                scope.clone(),
                reports.clone(),
            )
        };
        for node in &self.nodes {
            tokio::spawn(probe(node.docker.clone(), node.address.clone()));
        }
        let manager = self.docker.clone();
        tokio::spawn(async move {
            if let Some(address) = own_address(&manager).await {
                probe(manager, address).await;
            }
        });
    }

    /// The Swarm's id of the node whose daemon this is.
    pub(crate) async fn own_node_id(&self) -> Result<String, EngineError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| said("could not ask the daemon what it is", e))?;
        info.swarm
            .and_then(|s| s.node_id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| "the Docker host is no longer a node of a Swarm".into())
    }

    /// Whether the daemon manages a Swarm now (not when it cannot be asked).
    pub(crate) async fn manages_swarm(&self) -> bool {
        self.docker.info().await.is_ok_and(|info| manages(&info))
    }

    /// What the daemon is in its Swarm ("a manager of a Swarm of 3 nodes"), when it is in one.
    pub(crate) async fn swarm_role(&self) -> Option<String> {
        let info = self.docker.info().await.ok()?;
        swarm_part(info.swarm.as_ref())
    }

    /// The nodes of the Swarm the daemon manages, by id; none when it manages none (a plain
    /// host, or a worker: only managers know the nodes).
    pub(crate) async fn swarm_nodes(&self) -> Result<Vec<SwarmNode>, EngineError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| said("could not ask the daemon what it is", e))?;
        if !manages(&info) {
            return Ok(Vec::new());
        }
        let nodes = self
            .docker
            .list_nodes(None)
            .await
            .map_err(|e| said("could not list the Swarm's nodes", e))?;
        let running = ListTasksOptions {
            filters: Some(HashMap::from([(
                "desired-state".to_string(),
                vec!["running".to_string()],
            )])),
        };
        let mut tasks: HashMap<String, u32> = HashMap::new();
        for task in self
            .docker
            .list_tasks(Some(running))
            .await
            .map_err(|e| said("could not list the Swarm's tasks", e))?
        {
            if let (Some(node), Some(TaskState::RUNNING)) = (task.node_id, task.desired_state) {
                *tasks.entry(node).or_default() += 1;
            }
        }
        let mut seen: Vec<SwarmNode> = nodes
            .into_iter()
            .filter_map(|n| node_of(n, &tasks))
            .collect();
        seen.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::Reachability;

    fn manager(reachability: Reachability, state: bollard::models::NodeState) -> Node {
        Node {
            manager_status: Some(ManagerStatus {
                reachability: Some(reachability),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                state: Some(state),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_swarm_without_a_majority_of_its_managers_cannot_act() {
        use bollard::models::NodeState::{DOWN, READY};
        let up = || manager(Reachability::REACHABLE, READY);
        let worker = Node::default();
        assert_eq!(lost_quorum(&[up(), worker.clone()]), None);
        assert_eq!(
            lost_quorum(&[up(), up(), manager(Reachability::UNREACHABLE, DOWN)]),
            None
        );
        let lost = lost_quorum(&[up(), manager(Reachability::REACHABLE, DOWN)]).unwrap();
        assert!(lost.contains("1 of 2"), "{lost}");
        assert!(lost_quorum(&[
            up(),
            manager(Reachability::UNREACHABLE, READY),
            manager(Reachability::UNKNOWN, READY),
        ])
        .is_some());
        assert_eq!(
            lost_quorum(&[worker]),
            None,
            "no managers listed: nothing to tell"
        );
    }
    use bollard::models::{ManagerStatus, NodeDescription, NodeSpec, NodeStatus};

    #[test]
    fn a_daemon_says_what_it_is_in_its_swarm() {
        assert_eq!(swarm_part(None), None);
        let inactive = SwarmInfo {
            local_node_state: Some(LocalNodeState::INACTIVE),
            ..Default::default()
        };
        assert_eq!(swarm_part(Some(&inactive)), None, "a plain host");
        let manager = SwarmInfo {
            local_node_state: Some(LocalNodeState::ACTIVE),
            control_available: Some(true),
            nodes: Some(3),
            managers: Some(1),
            ..Default::default()
        };
        assert_eq!(
            swarm_part(Some(&manager)).as_deref(),
            Some("a manager of a Swarm of 3 nodes (1 managers)")
        );
        let worker = SwarmInfo {
            local_node_state: Some(LocalNodeState::ACTIVE),
            control_available: Some(false),
            ..Default::default()
        };
        assert!(swarm_part(Some(&worker)).unwrap().starts_with("a worker"));
    }

    #[test]
    fn a_node_is_shown_with_its_role_state_and_tasks() {
        let node = Node {
            id: Some("n1".into()),
            spec: Some(NodeSpec {
                role: Some(NodeSpecRoleEnum::MANAGER),
                availability: Some(NodeSpecAvailabilityEnum::DRAIN),
                ..Default::default()
            }),
            description: Some(NodeDescription {
                hostname: Some("lab-1".into()),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                state: Some(bollard::models::NodeState::DOWN),
                addr: Some("10.213.250.2".into()),
                ..Default::default()
            }),
            manager_status: Some(ManagerStatus {
                leader: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        };
        let tasks = HashMap::from([("n1".to_string(), 2)]);
        assert_eq!(
            node_of(node, &tasks),
            Some(SwarmNode {
                id: "n1".into(),
                hostname: "lab-1".into(),
                address: "10.213.250.2".into(),
                role: NodeRole::Manager,
                leader: true,
                availability: NodeAvailability::Drain,
                state: NodeState::Down,
                tasks: 2,
            })
        );
        assert_eq!(node_of(Node::default(), &tasks), None, "no id, no node");
    }
}
