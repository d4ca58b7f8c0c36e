//! Who answers at a Docker endpoint: the daemon itself, and the Swarm it is a node of. A
//! Swarm is one place to run on (its managers schedule onto every node), so its nodes are one
//! daemon for whom may claim it.

use bollard::models::{LocalNodeState, SystemInfo};
use domain::engine::EngineError;
use domain::model::{ClaimedDaemon, DockerHostKind};

/// A daemon, as `docker info` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Daemon {
    /// The daemon's own ID with its data root. Docker 20.10 keeps the ID in
    /// `/etc/docker/key.json`, which two daemons of one machine share; they are still two
    /// daemons when their data differ, and one daemon reached two ways is the same.
    pub node: String,
    /// The Swarm it is an active node of: `swarm:` and the least of its managers' node IDs,
    /// which every node, manager or worker, is told (a worker is not told the Swarm's own ID).
    pub swarm: Option<String>,
    /// Whether it manages that Swarm (a worker runs as a plain host: it cannot make services).
    pub manager: bool,
}

impl Daemon {
    /// What a cluster claims: the Swarm when it is a node of one, else the daemon.
    pub fn claim(&self) -> ClaimedDaemon {
        ClaimedDaemon {
            id: self.swarm.clone().unwrap_or_else(|| self.node.clone()),
            kind: if self.manager {
                DockerHostKind::Swarm
            } else {
                DockerHostKind::Host
            },
        }
    }

    /// Whether the two are one daemon, or nodes of one Swarm.
    pub fn same_place(&self, other: &Daemon) -> bool {
        self.node == other.node || (self.swarm.is_some() && self.swarm == other.swarm)
    }
}

/// The daemon `info` describes.
pub(crate) fn daemon_of(info: SystemInfo) -> Result<Daemon, EngineError> {
    let id = info
        .id
        .filter(|id| !id.is_empty())
        .ok_or_else(|| "it did not tell who it is (no daemon ID)".to_string())?;
    let node = format!("{id}@{}", info.docker_root_dir.unwrap_or_default());
    let active = info
        .swarm
        .filter(|s| s.local_node_state == Some(LocalNodeState::ACTIVE));
    let manager = active
        .as_ref()
        .is_some_and(|s| s.control_available == Some(true));
    let swarm = active
        .and_then(|s| {
            s.remote_managers
                .unwrap_or_default()
                .into_iter()
                .filter_map(|m| m.node_id.filter(|id| !id.is_empty()))
                .min()
                .or_else(|| s.cluster.and_then(|c| c.id))
        })
        .map(|key| format!("swarm:{key}"));
    Ok(Daemon {
        node,
        swarm,
        manager,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ClusterInfo, PeerNode, SwarmInfo};

    fn info(id: &str, swarm: Option<SwarmInfo>) -> SystemInfo {
        SystemInfo {
            id: Some(id.into()),
            docker_root_dir: Some("/var/lib/docker".into()),
            swarm,
            ..Default::default()
        }
    }

    fn member(managers: &[&str], cluster: Option<&str>) -> SwarmInfo {
        SwarmInfo {
            local_node_state: Some(LocalNodeState::ACTIVE),
            remote_managers: Some(
                managers
                    .iter()
                    .map(|m| PeerNode {
                        node_id: Some((*m).into()),
                        addr: Some("10.0.0.1:2377".into()),
                    })
                    .collect(),
            ),
            // Only a manager is told its Swarm's own ID, and may control it.
            control_available: Some(cluster.is_some()),
            cluster: cluster.map(|c| ClusterInfo {
                id: Some(c.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_swarms_manager_and_worker_claim_one_swarm() {
        let manager = daemon_of(info("A", Some(member(&["m2", "m1"], Some("c"))))).unwrap();
        let worker = daemon_of(info("B", Some(member(&["m1", "m2"], None)))).unwrap();
        assert_eq!(manager.claim().id, "swarm:m1");
        assert_eq!(manager.claim().kind, DockerHostKind::Swarm);
        assert_eq!(manager.claim().id, worker.claim().id);
        assert_eq!(
            worker.claim().kind,
            DockerHostKind::Host,
            "a worker runs as a host"
        );
        assert!(manager.same_place(&worker));
        let alone = daemon_of(info("C", None)).unwrap();
        assert_eq!(alone.claim().id, "C@/var/lib/docker");
        assert_eq!(alone.claim().kind, DockerHostKind::Host);
        assert!(!alone.same_place(&manager));
        let inactive = SwarmInfo {
            local_node_state: Some(LocalNodeState::INACTIVE),
            ..member(&["m1"], None)
        };
        assert_eq!(daemon_of(info("D", Some(inactive))).unwrap().swarm, None);
        assert!(daemon_of(info("", None)).is_err());
    }
}
