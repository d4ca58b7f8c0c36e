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

/// Pins the tasks of `wanted` to `node`.
pub(crate) fn pin(wanted: &mut bollard::models::ServiceSpec, node: &str) {
    if let Some(task) = wanted.task_template.as_mut() {
        task.placement = Some(bollard::models::TaskSpecPlacement {
            constraints: Some(vec![format!("{PINNED}{node}")]),
            ..Default::default()
        });
    }
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

    /// The node to pin `service` to: the one it is pinned to; else the one that keeps its
    /// `volume` (a run that went left it there); else, of the ready nodes whose daemon Capstan
    /// reaches (the manager's own, and those the cluster names), the one the Swarm gives the
    /// fewest tasks.
    pub(crate) async fn node_to_pin(
        &self,
        service: ServiceId,
        volume: &str,
    ) -> Result<String, EngineError> {
        if let Some(node) = self.pinned_node(service).await? {
            return Ok(node);
        }
        if let Some(node) = self.node_keeping(volume).await? {
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

    /// The node (the Swarm's id) whose daemon, of those Capstan reaches, keeps `volume`.
    pub(crate) async fn node_keeping(&self, volume: &str) -> Result<Option<String>, EngineError> {
        if self.docker.inspect_volume(volume).await.is_ok() {
            return self.own_node_id().await.map(Some);
        }
        let nodes = self.swarm_nodes().await?;
        for daemon in &self.nodes {
            let node = nodes.iter().find(|n| n.address == daemon.address);
            if let (Some(node), Ok(_)) = (node, daemon.docker.inspect_volume(volume).await) {
                return Ok(Some(node.id.clone()));
            }
        }
        Ok(None)
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
        Ok(self.daemon_at(&address))
    }

    /// The daemon the cluster names for the node at `address` in its Swarm.
    pub(crate) fn daemon_at(&self, address: &str) -> Option<&Docker> {
        self.nodes
            .iter()
            .find(|d| d.address == address)
            .map(|d| &d.docker)
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
                    remove_exited_users(docker, name).await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(said(&format!("could not remove the volume {name}"), e)),
            }
        }
    }
}

/// Removes the exited containers of Capstan's that hold the volume `name` on `docker` (those
/// of one-off tasks, which Swarm leaves behind, and may still hold when Capstan first removed
/// them).
async fn remove_exited_users(docker: &Docker, name: &str) {
    let options = bollard::query_parameters::ListContainersOptions {
        all: true,
        filters: Some(std::collections::HashMap::from([
            ("volume".to_string(), vec![name.to_string()]),
            (
                "label".to_string(),
                vec![crate::plan::LABEL_SERVICE.to_string()],
            ),
            (
                "status".to_string(),
                vec!["exited".to_string(), "created".to_string()],
            ),
        ])),
        ..Default::default()
    };
    let Ok(users) = docker.list_containers(Some(options)).await else {
        return;
    };
    for id in users.into_iter().filter_map(|c| c.id) {
        let force = bollard::query_parameters::RemoveContainerOptions {
            force: true,
            ..Default::default()
        };
        if let Err(e) = docker.remove_container(&id, Some(force)).await {
            tracing::debug!(container = %id, error = %e, "an exited user of a volume stays");
        }
    }
}
