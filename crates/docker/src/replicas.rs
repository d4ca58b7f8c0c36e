//! Replicas: the long-running containers of a container, an application (once built) or a
//! database, started beside or instead of the previous ones and ready before they count.

use crate::containers::Act;
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::images::ImageAccess;
use crate::{db_recipe, plan};
use bollard::models::ContainerUpdateBody;
use domain::engine::EngineError;
use domain::engine::StepWork;
use domain::model::{DeploymentAction, ServiceSpec, StepName};

impl DockerEngine {
    /// A step of a request for a container, an application or a database.
    pub(crate) async fn replicas_step(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let service = work.service;
        match (work.request.action, work.step) {
            (A::Deploy | A::Redeploy, StepName::RouterDeployment)
                if !matches!(service.spec, ServiceSpec::Database(_)) =>
            {
                self.switch_routes(work).await
            }
            (A::Deploy | A::Redeploy, _) => self.deploy_service(work).await,
            (A::Restart, _) => self.restart_replicas(work).await,
            (A::Stop, _) => self.each_owned(service, work.log, Act::Stop).await,
            (A::Delete | A::Uninstall, _) => self.remove_service(work).await,
            (A::Diff, _) => Ok(()),
        }
    }

    /// Restarts the service's replicas and waits until they are ready again.
    pub(crate) async fn restart_replicas(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let (service, log) = (work.service, work.log);
        self.each_owned(service, log, Act::Restart).await?;
        let ids: Vec<String> = self
            .owned(service.id, Some("service"))
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect();
        let readiness = self.readiness(service, work.inputs)?;
        self.wait_ready(&ids, &readiness, log, work.cancel).await
    }

    /// Removes every container of the service and, when it is deleted, its volume and the
    /// images built for it (an image another service's tag names stays with that tag).
    pub(crate) async fn remove_service(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let removed = self.remove_owned(work.service.id).await?;
        work.log.info(&format!("removed {removed} container(s)"));
        if work.request.action == DeploymentAction::Delete {
            self.remove_volume(work.service, work.log).await?;
            self.remove_built_images(work.service.id).await?;
        }
        Ok(())
    }

    pub(crate) async fn deploy_service(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let (service, log) = (work.service, work.log);
        let old = self.owned(service.id, Some("service")).await?;
        let previous = self.host_ports(&old).await?;
        let mut plans = match &service.spec {
            ServiceSpec::Database(_) => vec![db_recipe::database_plan(
                work.request,
                service,
                work.inputs,
                &self.settings.database_images,
                &self.settings.publish_address,
                &previous,
            )?],
            _ => {
                let image = match plan::container_image(service, work.inputs) {
                    Some(image) => image,
                    None => self.image_built_for(work)?,
                };
                plan::service_replicas(
                    work.request,
                    service,
                    &image,
                    work.inputs,
                    &self.settings.publish_address,
                    &previous,
                )?
            }
        };
        let rolling = self.rolls(service, &plans);
        if rolling {
            self.beside_the_old(work, &old, &mut plans).await?;
        }
        for port in plans.iter_mut().flat_map(|p| p.ports.iter_mut()) {
            if port.host.is_none() {
                port.host = self.free_port(port.public);
            }
        }
        let Some(first) = plans.first() else {
            return Ok(());
        };
        let access = match &service.spec {
            ServiceSpec::Container(_) => ImageAccess::Named(work.inputs.registry.as_ref()),
            _ => ImageAccess::Host,
        };
        self.ensure_image(&first.image, access, log, work.cancel)
            .await?;
        self.ensure_network(service).await?;
        if let Some(volume) = &first.volume {
            self.ensure_volume(service, &volume.name).await?;
        }
        if !rolling {
            for c in &old {
                if let Some(id) = &c.id {
                    self.remove(id).await?;
                }
            }
            if !old.is_empty() {
                log.info(&format!("removed {} previous container(s)", old.len()));
            }
        }
        let mut ids = Vec::new();
        for p in &plans {
            match self.start(p).await {
                Ok(id) => ids.push(id),
                Err(e) => {
                    self.remove_all(&ids).await;
                    return Err(e);
                }
            }
            log.info(&format!("started container {}", p.name));
        }
        let readiness = self.readiness(service, work.inputs)?;
        if let Err(e) = self.wait_ready(&ids, &readiness, log, work.cancel).await {
            self.remove_all(&ids).await;
            return Err(e);
        }
        if plans.iter().any(|p| p.restarts) {
            for id in &ids {
                let update = ContainerUpdateBody {
                    restart_policy: Some(plan::restart_policy()),
                    ..Default::default()
                };
                self.docker
                    .update_container(id, update)
                    .await
                    .map_err(|e| said("could not set the restart policy", e))?;
            }
        }
        let mut running = self.owned(service.id, Some("service")).await?;
        running.retain(|c| c.id.as_ref().is_some_and(|id| ids.contains(id)));
        for (replica, port) in self.host_ports(&running).await? {
            log.info(&format!(
                "replica {} port {} is published at {}:{}",
                replica.0, replica.1, self.settings.publish_address, port
            ));
        }
        Ok(())
    }
}
