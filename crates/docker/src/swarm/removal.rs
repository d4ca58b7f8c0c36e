//! Removing a service from a Swarm: its Swarm services, then, once their tasks' containers
//! stopped (they hold the image and the volume until then), what is left of those containers
//! on the daemons Capstan reaches, its file secrets, its built images and a database's volume.

use super::tasks::{self, name_of};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan;
use bollard::models::{ContainerSummary, Service};
use bollard::query_parameters::{ListContainersOptions, RemoveContainerOptions};
use bollard::Docker;
use domain::engine::{EngineError, StepWork};
use domain::ids::ServiceId;
use domain::model::DeploymentAction;
use std::collections::HashMap;
use std::time::{Duration, Instant};

const LOOK: Duration = Duration::from_millis(300);

impl DockerEngine {
    /// A service's deletion (or uninstall, which keeps its images and volume).
    pub(crate) async fn swarm_remove(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let service = work.service;
        let pinned = self.pinned_node(service.id).await?;
        let found = self.remove_swarm_services(service.id).await?;
        work.log
            .info(&format!("removed {} Swarm service(s)", found.len()));
        if work.request.action != DeploymentAction::Delete {
            return Ok(());
        }
        // Their tasks stop within their grace: until then their containers hold the
        // image and the volume.
        let grace = u64::try_from(service.termination_grace_seconds()).unwrap_or(0);
        let grace = Duration::from_secs(grace);
        self.wait_containers_gone(&found, grace).await;
        self.remove_all_file_secrets(service.id).await?;
        self.remove_built_images(service.id).await?;
        if let (Some(node), false) = (pinned, self.settings.keep_volumes) {
            let volume = plan::volume_name(service.id);
            self.remove_volume_on(&node, &volume, grace).await?;
            work.log.info(&format!("removed the volume {volume}"));
        }
        Ok(())
    }

    /// Removes every Swarm service of `service`: those there were.
    pub(crate) async fn remove_swarm_services(
        &self,
        service: ServiceId,
    ) -> Result<Vec<Service>, EngineError> {
        let found = self.swarm_services(Some(service)).await?;
        for s in &found {
            self.remove_swarm_service(s).await?;
        }
        Ok(found)
    }

    /// Removes a Swarm service; a job's, with the exited containers Swarm leaves of it.
    pub(crate) async fn remove_swarm_service(&self, service: &Service) -> Result<(), EngineError> {
        let id = service.id.as_deref().unwrap_or_default();
        tracing::debug!(service = name_of(service), "removing a Swarm service");
        match self.docker.delete_service(id).await {
            Ok(())
            | Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => {
                return Err(said(
                    &format!("could not remove the Swarm service {}", name_of(service)),
                    e,
                ))
            }
        }
        if tasks::is_job(service) {
            self.remove_task_containers(std::slice::from_ref(service))
                .await;
        }
        self.remove_file_secrets(name_of(service)).await
    }

    /// Waits, at most `grace` and 15 s more, until no container of the removed Swarm services
    /// runs on a daemon Capstan reaches, then removes what is left of them there (the exited
    /// containers of their earlier tasks, which would hold their image).
    pub(crate) async fn wait_containers_gone(&self, removed: &[Service], grace: Duration) {
        let deadline = Instant::now() + grace + Duration::from_secs(15);
        let ids: Vec<&str> = removed.iter().filter_map(|s| s.id.as_deref()).collect();
        while Instant::now() < deadline {
            let mut running = false;
            for docker in self.daemons() {
                for id in &ids {
                    running |= !task_containers(docker, id, false).await.is_empty();
                }
            }
            if !running {
                break;
            }
            tokio::time::sleep(LOOK).await;
        }
        self.remove_task_containers(removed).await;
    }

    /// Removes the containers of the removed Swarm services' tasks (a job's exited ones,
    /// which Swarm leaves) from the daemons Capstan reaches; elsewhere they stay.
    pub(crate) async fn remove_task_containers(&self, removed: &[Service]) {
        for docker in self.daemons() {
            for id in removed.iter().filter_map(|s| s.id.as_deref()) {
                for c in task_containers(docker, id, true).await {
                    let Some(container) = c.id else { continue };
                    let force = RemoveContainerOptions {
                        force: true,
                        v: true,
                        ..Default::default()
                    };
                    if let Err(e) = docker.remove_container(&container, Some(force)).await {
                        tracing::debug!(%container, error = %e, "a removed task's container stays");
                    }
                }
            }
        }
    }

    /// The daemons Capstan reaches on the Swarm: the manager's, and the named nodes'.
    fn daemons(&self) -> Vec<&Docker> {
        std::iter::once(&self.docker)
            .chain(self.nodes.iter().map(|n| &n.docker))
            .collect()
    }
}

/// The containers (running ones, or `all`) of the Swarm service `id`'s tasks on `docker`.
async fn task_containers(docker: &Docker, id: &str, all: bool) -> Vec<ContainerSummary> {
    let options = ListContainersOptions {
        all,
        filters: Some(HashMap::from([(
            "label".to_string(),
            vec![format!("com.docker.swarm.service.id={id}")],
        )])),
        ..Default::default()
    };
    match docker.list_containers(Some(options)).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "could not list a removed Swarm service's containers");
            Vec::new()
        }
    }
}
