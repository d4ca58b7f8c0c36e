//! Databases on a Swarm: one replica pinned to one node, where its volume is, and kept there
//! (a later deployment reads the node from the generation before it); the node is chosen among
//! those whose daemon Capstan reaches, for what only that daemon can do (checking the server
//! is ready, removing the volume with the database).

use crate::engine::DockerEngine;
use crate::errors::said;
use bollard::models::Service;
use bollard::Docker;
use domain::engine::EngineError;
use domain::ids::ServiceId;
use domain::model::{NodeAvailability, NodeState};
use std::time::{Duration, Instant};

const PINNED: &str = "node.id==";

/// The node a Swarm service's tasks are pinned to.
fn pinned_in(service: &Service) -> Option<String> {
    service
        .spec
        .as_ref()?
        .task_template
        .as_ref()?
        .placement
        .as_ref()?
        .constraints
        .as_ref()?
        .iter()
        .find_map(|c| c.strip_prefix(PINNED).map(str::to_string))
}

/// The constraint pinning a task to `node`.
pub(crate) fn pinned_to(node: &str) -> String {
    format!("{PINNED}{node}")
}

impl DockerEngine {
    /// The node `service`'s generations are pinned to, if one is.
    pub(crate) async fn pinned_node(
        &self,
        service: ServiceId,
    ) -> Result<Option<String>, EngineError> {
        Ok(self
            .swarm_services(Some(service))
            .await?
            .iter()
            .find_map(pinned_in))
    }

    /// The node to pin `service` to: the one it is pinned to; else, of the ready nodes whose
    /// daemon Capstan reaches (the manager's own, and those the cluster names), the one the
    /// Swarm gives the fewest tasks.
    pub(crate) async fn node_to_pin(&self, service: ServiceId) -> Result<String, EngineError> {
        if let Some(node) = self.pinned_node(service).await? {
            return Ok(node);
        }
        let own = self.own_node_id().await?;
        let nodes = self.swarm_nodes().await?;
        let chosen = nodes
            .iter()
            .filter(|n| n.state == NodeState::Ready && n.availability == NodeAvailability::Active)
            .filter(|n| n.id == own || self.nodes.iter().any(|d| d.address == n.address))
            .min_by_key(|n| (n.tasks, n.id != own))
            .map(|n| n.id.clone());
        Ok(chosen.unwrap_or(own))
    }

    /// The daemon of the node `node` (the Swarm's id), when Capstan reaches it.
    pub(crate) async fn daemon_of_node(&self, node: &str) -> Result<Option<&Docker>, EngineError> {
        if node == self.own_node_id().await? {
            return Ok(Some(&self.docker));
        }
        let seen = self
            .docker
            .inspect_node(node)
            .await
            .map_err(|e| said("could not read a node of the Swarm", e))?;
        let address = seen.status.and_then(|s| s.addr).unwrap_or_default();
        Ok(self
            .nodes
            .iter()
            .find(|d| d.address == address)
            .map(|d| &d.docker))
    }

    /// Removes the volume `name` from the node `node` once no container of it holds it (its
    /// task stops within its grace): said why not, when the node's daemon is out of reach.
    pub(crate) async fn remove_volume_on(
        &self,
        node: &str,
        name: &str,
        grace: Duration,
    ) -> Result<(), EngineError> {
        let Some(docker) = self.daemon_of_node(node).await? else {
            return Err(format!(
                "the volume {name} stays on its node: the cluster names no daemon of that node"
            )
            .into());
        };
        let deadline = Instant::now() + grace + Duration::from_secs(15);
        loop {
            match docker
                .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
                .await
            {
                Ok(())
                | Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                }) => return Ok(()),
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(said(&format!("could not remove the volume {name}"), e)),
            }
        }
    }
}
