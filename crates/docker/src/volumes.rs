//! The volumes that outlive their containers: a database's data, a terraform state.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{self, ContainerPlan, PlannedVolume, LABEL_SERVICE};
use bollard::models::Volume;
use domain::engine::EngineError;
use domain::engine::StepLog;
use domain::ids::ServiceId;
use domain::model::{Service, ServiceSpec};
use std::collections::HashMap;
use std::time::Duration;

impl DockerEngine {
    /// The volume of a database, made the first time (labelled, so it is found again).
    pub(crate) async fn ensure_volume(
        &self,
        service: &Service,
        name: &str,
    ) -> Result<(), EngineError> {
        let request = bollard::models::VolumeCreateRequest {
            name: Some(name.to_string()),
            labels: Some(self.marked(HashMap::from([
                (LABEL_SERVICE.to_string(), service.id.0.to_string()),
                (
                    plan::LABEL_ORGANIZATION.to_string(),
                    service.organization_id.0.to_string(),
                ),
            ]))),
            ..Default::default()
        };
        self.docker
            .create_volume(request)
            .await
            .map(|_| ())
            .map_err(|e| said(&format!("could not make the volume {name}"), e))
    }

    /// Removes a deleted database's volume (its data), unless the settings keep it.
    pub(crate) async fn remove_volume(
        &self,
        service: &Service,
        log: &StepLog,
    ) -> Result<(), EngineError> {
        if !matches!(service.spec, ServiceSpec::Database(_)) {
            return Ok(());
        }
        let name = plan::volume_name(service.id);
        if self.settings.keep_volumes {
            log.info(&format!(
                "the volume {name} is kept (CAPSTAN_DOCKER_KEEP_DATABASE_VOLUMES)"
            ));
            return Ok(());
        }
        if self.remove_volume_of(service.id).await? {
            log.info(&format!("removed the volume {name} and its data"));
        }
        Ok(())
    }

    /// Removes the volume of a database, if there is one; whether there was.
    pub(crate) async fn remove_volume_of(&self, service: ServiceId) -> Result<bool, EngineError> {
        self.remove_named_volume(&plan::volume_name(service)).await
    }

    /// Removes a volume, if there is one (on a Swarm, from the node that keeps it, of those
    /// Capstan reaches); whether there was.
    pub(crate) async fn remove_named_volume(&self, name: &str) -> Result<bool, EngineError> {
        if self.settings.swarm {
            let Some(node) = self.node_keeping(name).await? else {
                return Ok(false);
            };
            return self
                .remove_volume_on(&node, name, Duration::ZERO)
                .await
                .map(|()| true);
        }
        match self
            .docker
            .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
            .await
        {
            Ok(()) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(false),
            Err(e) => Err(said(&format!("could not remove the volume {name}"), e)),
        }
    }

    /// Capstan's volumes (a database's data, a terraform state) on this host; on a Swarm, on
    /// every node whose daemon Capstan reaches (a node that does not answer is left out).
    pub(crate) async fn capstan_volumes(&self) -> Result<Vec<Volume>, EngineError> {
        let mut found = volumes_on(&self.docker, self.scoped(vec![LABEL_SERVICE.to_string()]))
            .await
            .map_err(|e| said("could not list Capstan's volumes", e))?;
        for node in self.nodes.iter().filter(|_| self.settings.swarm) {
            match volumes_on(&node.docker, self.scoped(vec![LABEL_SERVICE.to_string()])).await {
                Ok(more) => found.extend(more),
                Err(e) => {
                    tracing::warn!(node = %node.address, error = %e, "could not list a Swarm node's volumes")
                }
            }
        }
        Ok(found)
    }

    /// The daemon that keeps the volume `name`: this host's, or on a Swarm the daemon of the
    /// node that keeps it (of those Capstan reaches).
    pub(crate) async fn daemon_keeping(
        &self,
        name: &str,
    ) -> Result<Option<&bollard::Docker>, EngineError> {
        if !self.settings.swarm {
            let kept = self.docker.inspect_volume(name).await.is_ok();
            return Ok(kept.then_some(&self.docker));
        }
        match self.node_keeping(name).await? {
            Some(node) => self.daemon_of_node(&node).await,
            None => Ok(None),
        }
    }
}

/// The volumes on `docker` carrying all of `labels`.
async fn volumes_on(
    docker: &bollard::Docker,
    labels: Vec<String>,
) -> Result<Vec<Volume>, bollard::errors::Error> {
    let options = bollard::query_parameters::ListVolumesOptions {
        filters: Some(HashMap::from([("label".to_string(), labels)])),
    };
    Ok(docker
        .list_volumes(Some(options))
        .await?
        .volumes
        .unwrap_or_default())
}

/// A container named `name` of `image` that holds `volume`, made on `docker` and never
/// started: what reads or writes the volume's files through the daemon's archive calls. Its id.
pub(crate) async fn volume_holder(
    docker: &bollard::Docker,
    name: String,
    image: &str,
    volume: &PlannedVolume,
    labels: HashMap<String, String>,
) -> Result<String, EngineError> {
    let plan = ContainerPlan {
        name,
        image: image.to_string(),
        entrypoint: None,
        cmd: Some(vec!["true".into()]),
        env: Vec::new(),
        labels,
        ports: Vec::new(),
        files: Vec::new(),
        nano_cpus: 100_000_000,
        memory_bytes: 16 * 1024 * 1024,
        restarts: false,
        init: false,
        publish_address: String::new(),
        volume: Some(volume.clone()),
        network: "none".into(),
        aliases: Vec::new(),
    };
    let options = bollard::query_parameters::CreateContainerOptions {
        name: Some(plan.name.clone()),
        ..Default::default()
    };
    docker
        .create_container(Some(options), plan.body())
        .await
        .map(|made| made.id)
        .map_err(|e| said("could not make a container to reach a volume", e))
}

/// Removes a container made by [`volume_holder`]; one left is only logged.
pub(crate) async fn remove_volume_holder(docker: &bollard::Docker, id: &str) {
    let force = bollard::query_parameters::RemoveContainerOptions {
        force: true,
        ..Default::default()
    };
    if let Err(e) = docker.remove_container(id, Some(force)).await {
        tracing::warn!(container = %id, error = %e, "a container made to reach a volume was left");
    }
}
