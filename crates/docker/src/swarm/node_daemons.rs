//! The own daemons of a Swarm's nodes, as the cluster names them: reached with the cluster's
//! credentials when its place is attached, each checked to be the node it is named for, and
//! used for the work only a node's daemon can do (an image built on the manager loaded onto
//! it). A node whose daemon is not named, or does not answer, is spared that work.

use crate::connect::{answering, connect, Reach};
use crate::engine::DockerEngine;
use crate::errors::said;
use bollard::query_parameters::ImportImageOptions;
use bollard::Docker;
use domain::engine::{Cancel, EngineError, StepLog};
use domain::model::DockerHost;
use futures_util::StreamExt;

/// One node's own daemon.
pub(crate) struct NodeDaemon {
    /// The node's address in its Swarm.
    pub(crate) address: String,
    pub(crate) docker: Docker,
    /// What reaches it (key files, an SSH tunnel), kept while it is used.
    _reach: Reach,
}

/// The daemons `host` names for its Swarm's nodes that answer as those nodes; each one that
/// does not is left out, with a warning naming it.
pub(crate) async fn reach_nodes(host: &DockerHost) -> Vec<NodeDaemon> {
    let mut reached = Vec::new();
    for node in &host.nodes {
        let at = DockerHost {
            endpoint: node.endpoint.clone(),
            publish_address: None,
            daemon: None,
            nodes: Vec::new(),
            ..host.clone()
        };
        let answered = async {
            let (docker, reach) = connect(&at).await?;
            let docker = answering(docker, &at).await?;
            let info = docker
                .info()
                .await
                .map_err(|e| said("could not ask the daemon what it is", e))?;
            let address = info.swarm.and_then(|s| s.node_addr).unwrap_or_default();
            if address != node.address {
                return Err(EngineError::from(format!(
                    "{} is not the daemon of the Swarm's node at {} (its node's address: {})",
                    at.describe(),
                    node.address,
                    if address.is_empty() { "none" } else { &address }
                )));
            }
            Ok(NodeDaemon {
                address: node.address.clone(),
                docker,
                _reach: reach,
            })
        };
        match answered.await {
            Ok(daemon) => reached.push(daemon),
            Err(e) => tracing::warn!(
                cluster = %host.cluster_id,
                node = %node.address,
                error = %e,
                "a Swarm node's own daemon is left out"
            ),
        }
    }
    reached
}

impl DockerEngine {
    /// Loads `image` (built on the manager) onto every node whose own daemon it reaches and
    /// that lacks it: the addresses of the nodes that have it then, the manager's aside.
    pub(crate) async fn load_onto_nodes(
        &self,
        image: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<Vec<String>, EngineError> {
        let mut holding = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let place = format!("the node at {}", node.address);
            self.load_onto(&self.docker, &node.docker, image, &place, log, cancel)
                .await?;
            holding.push(node.address.clone());
        }
        Ok(holding)
    }

    /// Loads `image` from the daemon `source` onto the daemon `docker` of `place`, unless it
    /// has it.
    pub(crate) async fn load_onto(
        &self,
        source: &Docker,
        docker: &Docker,
        image: &str,
        place: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        if docker.inspect_image(image).await.is_ok() {
            return Ok(());
        }
        let exported = source.export_image(image);
        let mut loading = docker.import_image_stream(ImportImageOptions::default(), exported, None);
        loop {
            let next = tokio::select! {
                next = loading.next() => next,
                () = cancel.canceled() => return Err("canceled while loading the image onto the Swarm's nodes".into()),
            };
            match next {
                None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    return Err(said(
                        &format!("could not load image {image} onto {place}"),
                        e,
                    ))
                }
            }
        }
        log.info(&format!("loaded image {image} onto {place}"));
        Ok(())
    }

    /// Loads an image built on the manager onto the nodes whose daemons it reaches, and keeps
    /// the tasks of `wanted` off the nodes still without it.
    pub(crate) async fn keep_off_nodes_lacking(
        &self,
        wanted: &mut bollard::models::ServiceSpec,
        image: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let lacking = self.nodes_lacking(image, log, cancel).await?;
        if let Some(task) = wanted.task_template.as_mut() {
            task.placement = Some(bollard::models::TaskSpecPlacement {
                constraints: Some(lacking.iter().map(|id| format!("node.id!={id}")).collect()),
                ..Default::default()
            });
        }
        Ok(())
    }

    /// Loads an image built on the manager onto the nodes whose daemons it reaches: the ids
    /// of the nodes still without it.
    async fn nodes_lacking(
        &self,
        image: &str,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<Vec<String>, EngineError> {
        let holding = self.load_onto_nodes(image, log, cancel).await?;
        let own = self.own_node_id().await?;
        let nodes = self
            .docker
            .list_nodes(None)
            .await
            .map_err(|e| said("could not list the Swarm's nodes", e))?;
        let mut lacking = Vec::new();
        let mut named = Vec::new();
        for node in nodes {
            let Some(id) = node.id else { continue };
            let address = node.status.and_then(|s| s.addr).unwrap_or_default();
            if id != own && !holding.contains(&address) {
                named.push(address);
                lacking.push(id);
            }
        }
        if !named.is_empty() {
            log.info(&format!(
                "the image built from git is not on the node(s) at {} (the cluster names no \
                 daemon of theirs): no replica runs there",
                named.join(", ")
            ));
        }
        Ok(lacking)
    }
}
