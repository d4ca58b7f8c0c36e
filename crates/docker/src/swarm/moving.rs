//! Moving a pinned database to another node, by an explicit request only: its task stopped,
//! its volume's content copied from the node that keeps it to the node asked for (through the
//! two nodes' daemons, as an archive streamed between containers made to hold the volumes and
//! never started), the old volume removed once the copy is whole; the next generation is then
//! pinned to the new node.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{PlannedVolume, LABEL_ORGANIZATION, LABEL_SERVICE};
use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use bollard::Docker;
use domain::engine::{EngineError, StepWork};
use domain::model::{NodeAvailability, NodeState, SwarmNode};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;

/// The node `asked` names (its id, address or host name) among `nodes`.
fn named<'a>(nodes: &'a [SwarmNode], asked: &str) -> Option<&'a SwarmNode> {
    nodes
        .iter()
        .find(|n| n.id == asked || n.address == asked || n.hostname == asked)
}

impl DockerEngine {
    /// Moves the database's data to the node `asked` names, which must be ready and reached
    /// through its own daemon: the node to pin it to. `volume` is its data's volume, mounted
    /// at `target` in containers of `image`.
    pub(crate) async fn move_database(
        &self,
        work: &StepWork<'_>,
        asked: &str,
        image: &str,
        volume: &PlannedVolume,
    ) -> Result<String, EngineError> {
        let (service, log) = (work.service, work.log);
        let nodes = self.swarm_nodes().await?;
        let to = named(&nodes, asked).ok_or_else(|| {
            format!("no node {asked} in the cluster's Swarm (its id, address or host name)")
        })?;
        if to.state != NodeState::Ready || to.availability != NodeAvailability::Active {
            return Err(format!("the node {asked} is not ready and active: nothing moves").into());
        }
        let to_docker = self.daemon_of_node(&to.id).await?.ok_or_else(|| {
            format!("the cluster names no daemon of the node {asked}: a database moves only to a node whose daemon Capstan reaches")
        })?;
        let from = match self.pinned_node(service.id).await? {
            Some(node) => Some(node),
            None => self.node_keeping(&volume.name).await?,
        };
        let Some(from) = from.filter(|from| *from != to.id) else {
            log.info(&format!(
                "the database's data is on the node {asked}: nothing to move"
            ));
            return Ok(to.id.clone());
        };
        let from_docker = self.daemon_of_node(&from).await?.ok_or_else(|| {
            format!(
                "the cluster names no daemon of the node {from}, which keeps the database's data"
            )
        })?;
        // Nothing may write to the data while it is copied.
        let running = self.remove_swarm_services(service.id).await?;
        let grace = u64::try_from(service.termination_grace_seconds()).unwrap_or(0);
        self.wait_containers_gone(&running, Duration::from_secs(grace))
            .await;
        log.info(&format!(
            "the database stopped on the node {from}: its data moves to the node {asked}"
        ));
        self.load_onto(
            from_docker,
            to_docker,
            image,
            &format!("the node {asked}"),
            log,
            work.cancel,
        )
        .await?;
        let labels = self.marked(HashMap::from([
            (LABEL_SERVICE.to_string(), service.id.0.to_string()),
            (
                LABEL_ORGANIZATION.to_string(),
                service.organization_id.0.to_string(),
            ),
        ]));
        let copied = copy_volume(from_docker, to_docker, image, volume, &labels).await;
        if let Err(why) = copied {
            // The data stays whole where it was; what was copied of it goes.
            let _ = to_docker
                .remove_volume(
                    &volume.name,
                    None::<bollard::query_parameters::RemoveVolumeOptions>,
                )
                .await;
            return Err(why);
        }
        self.remove_volume_on(&from, &volume.name, Duration::ZERO)
            .await?;
        log.info(&format!(
            "moved the database's data from the node {from} to the node {asked} ({})",
            to.id
        ));
        Ok(to.id.clone())
    }
}

/// A container of `image` holding `volume` on `docker`, made to move its data: its id.
async fn holder(
    docker: &Docker,
    image: &str,
    volume: &PlannedVolume,
    labels: &HashMap<String, String>,
) -> Result<String, EngineError> {
    let name = format!("capstan-move-{}", uuid::Uuid::new_v4().simple());
    crate::volumes::volume_holder(docker, name, image, volume, labels.clone()).await
}

/// Copies the content of `volume` on `from` into the volume of the same name on `to` (made
/// with `labels`), streamed as an archive.
async fn copy_volume(
    from: &Docker,
    to: &Docker,
    image: &str,
    volume: &PlannedVolume,
    labels: &HashMap<String, String>,
) -> Result<(), EngineError> {
    to.create_volume(bollard::models::VolumeCreateRequest {
        name: Some(volume.name.clone()),
        labels: Some(labels.clone()),
        ..Default::default()
    })
    .await
    .map_err(|e| said("could not make the volume on the new node", e))?;
    let source = holder(from, image, volume, labels).await?;
    let copied = match holder(to, image, volume, labels).await {
        Ok(sink) => {
            let copied = stream_between(from, &source, to, &sink, &volume.target).await;
            crate::volumes::remove_volume_holder(to, &sink).await;
            copied
        }
        Err(e) => Err(e),
    };
    crate::volumes::remove_volume_holder(from, &source).await;
    copied
}

/// Streams the directory `target` of the container `source` on `from` into the same place in
/// the container `sink` on `to`.
async fn stream_between(
    from: &Docker,
    source: &str,
    to: &Docker,
    sink: &str,
    target: &str,
) -> Result<(), EngineError> {
    // The archive's top directory is the target's name: extracted in its parent, it is the
    // volume's content, owners and modes kept.
    let parent = std::path::Path::new(target)
        .parent()
        .map_or_else(|| "/".to_string(), |p| p.to_string_lossy().to_string());
    // A failure to read ends the upload's body in error: nothing half-copied passes as whole.
    let archive = from
        .download_from_container(
            source,
            Some(DownloadFromContainerOptions {
                path: target.to_string(),
            }),
        )
        .map(|chunk| chunk.map_err(|e| std::io::Error::other(e.to_string())));
    to.upload_to_container(
        sink,
        Some(UploadToContainerOptions {
            path: parent,
            ..Default::default()
        }),
        bollard::body_try_stream(archive),
    )
    .await
    .map_err(|e| said("could not copy the data to the new node", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, address: &str, hostname: &str) -> SwarmNode {
        SwarmNode {
            id: id.into(),
            hostname: hostname.into(),
            address: address.into(),
            role: domain::model::NodeRole::Worker,
            leader: false,
            availability: NodeAvailability::Active,
            state: NodeState::Ready,
            tasks: 0,
        }
    }

    #[test]
    fn a_node_is_named_by_its_id_address_or_host_name() {
        let nodes = [node("n1", "10.0.0.1", "one"), node("n2", "10.0.0.2", "two")];
        for asked in ["n2", "10.0.0.2", "two"] {
            assert_eq!(named(&nodes, asked).map(|n| n.id.as_str()), Some("n2"));
        }
        assert!(named(&nodes, "three").is_none());
    }
}
