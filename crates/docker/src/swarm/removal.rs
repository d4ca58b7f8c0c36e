//! Removing a service from a Swarm: its Swarm services, then, once their tasks' containers
//! stopped (they hold the image and the volume until then), what is left of those containers
//! on the daemons Capstan reaches, its file secrets, its built images and a database's volume.

use super::tasks::{self, name_of};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan;
use bollard::models::Service;
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
        let found = self.swarm_services(Some(service.id)).await?;
        for s in &found {
            self.remove_swarm_service(s).await?;
        }
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

    /// Removes every Swarm service of `service`: how many there were.
    pub(crate) async fn remove_swarm_services(
        &self,
        service: ServiceId,
    ) -> Result<usize, EngineError> {
        let found = self.swarm_services(Some(service)).await?;
        for s in &found {
            self.remove_swarm_service(s).await?;
        }
        Ok(found.len())
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
            self.clean_job_containers(service).await;
        }
        self.remove_file_secrets(name_of(service)).await
    }

    /// Waits, at most `grace` and 15 s more, until no container of the removed Swarm services
    /// runs on a daemon Capstan reaches, then removes what is left of them there (the exited
    /// containers of their earlier tasks, which would hold their image).
    pub(crate) async fn wait_containers_gone(&self, removed: &[Service], grace: Duration) {
        let deadline = Instant::now() + grace + Duration::from_secs(15);
        let mut daemons: Vec<&bollard::Docker> = vec![&self.docker];
        daemons.extend(self.nodes.iter().map(|n| &n.docker));
        let listed = |docker: &'_ bollard::Docker, id: String, all: bool| {
            let options = bollard::query_parameters::ListContainersOptions {
                all,
                filters: Some(HashMap::from([(
                    "label".to_string(),
                    vec![format!("com.docker.swarm.service.id={id}")],
                )])),
                ..Default::default()
            };
            let docker = docker.clone();
            async move {
                docker
                    .list_containers(Some(options))
                    .await
                    .unwrap_or_default()
            }
        };
        let ids: Vec<String> = removed.iter().filter_map(|s| s.id.clone()).collect();
        while Instant::now() < deadline {
            let mut running = false;
            for docker in &daemons {
                for id in &ids {
                    running |= !listed(docker, id.clone(), false).await.is_empty();
                }
            }
            if !running {
                break;
            }
            tokio::time::sleep(LOOK).await;
        }
        for docker in &daemons {
            for id in &ids {
                for c in listed(docker, id.clone(), true).await {
                    let Some(container) = c.id else { continue };
                    let force = bollard::query_parameters::RemoveContainerOptions {
                        force: true,
                        ..Default::default()
                    };
                    if let Err(e) = docker.remove_container(&container, Some(force)).await {
                        tracing::debug!(%container, error = %e, "a removed task's container stays");
                    }
                }
            }
        }
    }
}
