//! Containers, applications and databases on a Swarm: each deployment starts a Swarm service
//! of its own generation, waits until its tasks run and are ready, and only then lets the
//! router switch to it and removes the previous generation (a rollback is the new one
//! removed, the previous one never touched). A database's previous generation stops first:
//! one volume holds one server.

use super::pinned;
use super::spec::{self, LABEL_RETIRING};
use super::tasks::{self, name_of};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::PlannedFile;
use crate::{db_recipe, images, plan, rollout};
use bollard::models::{Service, Task};
use bollard::query_parameters::{ListTasksOptions, UpdateServiceOptions};
use domain::engine::{Cut, EngineError, Kept, ReplicaSet, StepWork};
use domain::ids::{DeploymentRequestId, OrganizationId, ServiceId};
use domain::model::{is_routed, DeploymentAction, RunningState, ServiceSpec, StepName};
use std::collections::HashMap;
use std::time::Duration;

fn label<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .spec
        .as_ref()?
        .labels
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

impl DockerEngine {
    /// Capstan's Swarm services of this installation; only those of `of` when it says.
    pub(crate) async fn swarm_services(
        &self,
        of: Option<ServiceId>,
    ) -> Result<Vec<Service>, EngineError> {
        tasks::services(&self.docker, &self.scope(), of)
            .await
            .map_err(|e| said("could not list Capstan's Swarm services", e))
    }

    pub(crate) async fn tasks_of(&self, swarm_service: &str) -> Result<Vec<Task>, EngineError> {
        let options = ListTasksOptions {
            filters: Some(HashMap::from([(
                "service".to_string(),
                vec![swarm_service.to_string()],
            )])),
        };
        self.docker
            .list_tasks(Some(options))
            .await
            .map_err(|e| said("could not list the Swarm's tasks", e))
    }

    /// What runs of every Capstan service on the Swarm now.
    pub(crate) async fn swarm_states(&self) -> Result<Vec<RunningState>, EngineError> {
        tasks::look(&self.docker, &self.scope())
            .await
            .map_err(|e| said("could not read the Swarm's tasks", e))
    }

    /// A step of a container or an application on a Swarm.
    pub(crate) async fn swarm_replicas_step(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        use DeploymentAction as A;
        match (work.request.action, work.step) {
            (A::Deploy | A::Redeploy, StepName::RouterDeployment) => self.swarm_switch(work).await,
            (A::Deploy | A::Redeploy, _) => self.swarm_deploy(work).await,
            (A::Restart, _) => self.swarm_restart(work).await,
            (A::Stop, _) => self.swarm_stop(work).await,
            (A::Delete | A::Uninstall, _) => self.swarm_remove(work).await,
            (A::Diff, _) => Ok(()),
        }
    }

    async fn swarm_deploy(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let (service, log) = (work.service, work.log);
        let database = matches!(service.spec, ServiceSpec::Database(_));
        let (plans, built) = if database {
            let plan = db_recipe::database_plan(
                work.request,
                service,
                work.inputs,
                &self.settings.database_images,
                &self.settings.publish_address,
                &HashMap::new(),
            )?;
            (vec![plan], false)
        } else {
            let named = plan::container_image(service, work.inputs);
            let image = match &named {
                Some(image) => {
                    images::nameable(image)?;
                    if !self.settings.host_images.shares(image) {
                        self.pull_permitted(image).await?;
                    }
                    image.clone()
                }
                None => self.image_built_for(work)?,
            };
            let plans = plan::service_replicas(
                work.request,
                service,
                &image,
                work.inputs,
                &self.settings.publish_address,
                &HashMap::new(),
            )?;
            (plans, named.is_none())
        };
        let Some(first) = plans.first() else {
            return Ok(());
        };
        let image = first.image.clone();
        let name = spec::service_name(service.id, &rollout::generation(work.request));
        let Some(mut wanted) = spec::service_spec(
            &plans,
            &name,
            &spec::alias(service.id),
            service.termination_grace_seconds(),
        ) else {
            return Ok(());
        };
        if database {
            let node = match (&work.request.snapshot.move_to_node, &first.volume) {
                (Some(asked), Some(volume)) => {
                    self.move_database(work, asked, &image, volume).await?
                }
                _ => {
                    self.node_to_pin(service.id, &plan::volume_name(service.id))
                        .await?
                }
            };
            pinned::pin(&mut wanted, &node);
            log.info(&format!(
                "the database is pinned to the node {node}, where its volume is"
            ));
        }
        self.ensure_network(service).await?;
        // An earlier attempt at the same request goes first; for a database, every earlier
        // generation does, and stops: two servers on one volume would corrupt it.
        let going: Vec<Service> = self
            .swarm_services(Some(service.id))
            .await?
            .into_iter()
            .filter(|s| database || name_of(s) == name)
            .collect();
        for s in &going {
            self.remove_swarm_service(s).await?;
        }
        if database {
            let grace = u64::try_from(service.termination_grace_seconds()).unwrap_or(0);
            self.wait_containers_gone(&going, Duration::from_secs(grace))
                .await;
        }
        let named = matches!(service.spec, ServiceSpec::Container(_));
        let credentials = Self::credentials(work.inputs.registry.as_ref()).filter(|_| named);
        let built = built.then_some(image.as_str());
        self.create_swarm_service(work, wanted, &first.files, built, credentials)
            .await?;
        log.info(&format!(
            "created the Swarm service {name} ({} replica(s)); each node runs image {image}",
            plans.len()
        ));
        let readiness = self.readiness(service, work.inputs)?;
        if let Err(e) = self
            .swarm_ready(&name, plans.len(), &readiness, None, log, work.cancel)
            .await
        {
            if let Some(new) = self
                .swarm_services(Some(service.id))
                .await?
                .iter()
                .find(|s| name_of(s) == name)
            {
                self.remove_swarm_service(new).await?;
            }
            log.info("the new Swarm service is removed: the previous replicas keep running");
            return Err(e);
        }
        // Without a router's switch to come, the previous generation goes now.
        if !is_routed(service) {
            self.retire_others(work, None).await?;
        }
        Ok(())
    }

    /// The router's switch to the new generation, then the previous ones' retirement.
    async fn swarm_switch(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        self.retire_others(work, self.settings.switch_settle).await
    }

    /// Removes every generation of the service but the request's; with `settle`, each is
    /// first marked retiring (out of the routes) and given that long twice: for every
    /// instance's router to see the new replicas, then to stop sending to the old.
    async fn retire_others(
        &self,
        work: &StepWork<'_>,
        settle: Option<Duration>,
    ) -> Result<(), EngineError> {
        let log = work.log;
        let current = spec::service_name(work.service.id, &rollout::generation(work.request));
        let old: Vec<Service> = self
            .swarm_services(Some(work.service.id))
            .await?
            .into_iter()
            .filter(|s| name_of(s) != current)
            .collect();
        if let Some(settle) = settle.filter(|_| !old.is_empty()) {
            tokio::time::sleep(settle).await;
            for s in &old {
                self.mark_retiring(s).await?;
            }
            log.info(&format!(
                "the router sends requests to the new replicas; {} previous Swarm service(s) finish theirs",
                old.len()
            ));
            tokio::time::sleep(settle).await;
        } else if is_routed(work.service) {
            log.info("the router sends requests to the new replicas");
        }
        for s in &old {
            self.remove_swarm_service(s).await?;
        }
        if !old.is_empty() {
            log.info(&format!("removed {} previous Swarm service(s)", old.len()));
        }
        Ok(())
    }

    /// Updates `service`'s spec by `change` (at the version it was read at).
    async fn update_swarm_service(
        &self,
        service: &Service,
        change: impl FnOnce(&mut bollard::models::ServiceSpec),
    ) -> Result<(), EngineError> {
        let (Some(id), Some(mut wanted)) = (service.id.as_deref(), service.spec.clone()) else {
            return Ok(());
        };
        change(&mut wanted);
        let version = service
            .version
            .as_ref()
            .and_then(|v| v.index)
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0);
        let options = UpdateServiceOptions {
            version,
            ..Default::default()
        };
        self.docker
            .update_service(id, wanted, options, None)
            .await
            .map(drop)
            .map_err(|e| {
                said(
                    &format!("could not update the Swarm service {}", name_of(service)),
                    e,
                )
            })
    }

    /// Takes `service` out of the routes: its tasks run on, finishing their requests.
    async fn mark_retiring(&self, service: &Service) -> Result<(), EngineError> {
        if label(service, LABEL_RETIRING).is_some() {
            return Ok(());
        }
        self.update_swarm_service(service, |spec| {
            spec.labels
                .get_or_insert_with(HashMap::new)
                .insert(LABEL_RETIRING.into(), "true".into());
        })
        .await
    }

    /// The generations that serve (not retiring).
    async fn serving(&self, service: ServiceId) -> Result<Vec<Service>, EngineError> {
        Ok(self
            .swarm_services(Some(service))
            .await?
            .into_iter()
            .filter(|s| label(s, LABEL_RETIRING).is_none())
            .collect())
    }

    /// Each serving generation's tasks replaced by new ones (started first, as Swarm
    /// updates), then ready.
    async fn swarm_restart(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let readiness = self.readiness(work.service, work.inputs)?;
        for s in self.serving(work.service.id).await? {
            let force = s
                .spec
                .as_ref()
                .and_then(|s| s.task_template.as_ref())
                .and_then(|t| t.force_update)
                .unwrap_or(0)
                + 1;
            self.update_swarm_service(&s, |spec| {
                spec.task_template
                    .get_or_insert_with(Default::default)
                    .force_update = Some(force);
            })
            .await?;
            let replicas = replicas_of(&s);
            self.swarm_ready(
                name_of(&s),
                replicas,
                &readiness,
                Some(force),
                work.log,
                work.cancel,
            )
            .await?;
        }
        Ok(())
    }

    /// Swarm has no stopped service: each serving generation is scaled to no replica (its
    /// spec kept until the next deployment replaces it).
    async fn swarm_stop(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let serving = self.serving(work.service.id).await?;
        for s in &serving {
            self.update_swarm_service(s, |spec| {
                spec.mode = Some(bollard::models::ServiceSpecMode {
                    replicated: Some(bollard::models::ServiceSpecModeReplicated {
                        replicas: Some(0),
                    }),
                    ..Default::default()
                });
            })
            .await?;
        }
        work.log.info(&format!(
            "scaled {} Swarm service(s) to no replica",
            serving.len()
        ));
        Ok(())
    }

    /// Each generation of each service, as the deployment that made it.
    pub(crate) async fn swarm_replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        let mut sets: Vec<ReplicaSet> = self
            .swarm_services(None)
            .await?
            .iter()
            .filter_map(|s| {
                let id = |key: &str| label(s, key)?.parse::<uuid::Uuid>().ok();
                Some(ReplicaSet {
                    organization: OrganizationId(id(plan::LABEL_ORGANIZATION)?),
                    service: ServiceId(id(plan::LABEL_SERVICE)?),
                    request: DeploymentRequestId(id(plan::LABEL_REQUEST)?),
                })
            })
            .collect();
        sets.sort();
        sets.dedup();
        Ok(sets)
    }

    /// A deployment cut short: in the switch with its generation running, it is kept and the
    /// others go; otherwise its generation goes and the others keep serving.
    pub(crate) async fn settle_swarm_cut(
        &self,
        service: ServiceId,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        let request = request.0.to_string();
        let (started, earlier): (Vec<Service>, Vec<Service>) = self
            .swarm_services(Some(service))
            .await?
            .into_iter()
            .partition(|s| label(s, plan::LABEL_REQUEST) == Some(request.as_str()));
        let (kept, going) = if cut == Cut::InSwitch && !started.is_empty() {
            (Kept::Started, earlier)
        } else {
            (Kept::Previous, started)
        };
        for s in &going {
            self.remove_swarm_service(s).await?;
        }
        Ok(kept)
    }

    /// Creates `wanted` (named in it) for the step's service: marked as this installation's,
    /// its `files` as secrets, an image `built` on the manager first pushed to the registry the
    /// cluster names or, without one, loaded onto the nodes (its tasks kept off those without
    /// it), pulled with `credentials`.
    pub(crate) async fn create_swarm_service(
        &self,
        work: &StepWork<'_>,
        mut wanted: bollard::models::ServiceSpec,
        files: &[PlannedFile],
        built: Option<&str>,
        credentials: Option<bollard::auth::DockerCredentials>,
    ) -> Result<(), EngineError> {
        let name = wanted.name.clone().unwrap_or_default();
        self.mark_spec(&mut wanted);
        match (built, &self.settings.push_registry) {
            (Some(image), Some(registry)) => {
                let pushed = self
                    .push_to_registry(image, registry, work.log, work.cancel)
                    .await?;
                if let Some(container) = wanted
                    .task_template
                    .as_mut()
                    .and_then(|t| t.container_spec.as_mut())
                {
                    container.image = Some(pushed);
                }
            }
            (Some(image), None) => {
                self.keep_off_nodes_lacking(&mut wanted, image, work.log, work.cancel)
                    .await?;
            }
            (None, _) => {}
        }
        let secrets = self.file_secrets(work.service.id, &name, files).await?;
        if let Some(container) = wanted
            .task_template
            .as_mut()
            .and_then(|t| t.container_spec.as_mut())
        {
            container.secrets = Some(secrets);
        }
        self.docker
            .create_service(wanted, credentials)
            .await
            .map(drop)
            .map_err(|e| said(&format!("could not create the Swarm service {name}"), e))
    }

    /// Marks the service, its containers and its volume as this installation's.
    pub(crate) fn mark_spec(&self, spec: &mut bollard::models::ServiceSpec) {
        let mark = |labels: &mut Option<HashMap<String, String>>| {
            if let Some(labels) = labels.as_mut() {
                *labels = self.marked(std::mem::take(labels));
            }
        };
        mark(&mut spec.labels);
        let container = spec
            .task_template
            .as_mut()
            .and_then(|t| t.container_spec.as_mut());
        if let Some(container) = container {
            mark(&mut container.labels);
            for mount in container.mounts.iter_mut().flatten() {
                if let Some(options) = mount.volume_options.as_mut() {
                    mark(&mut options.labels);
                }
            }
        }
    }
}

fn replicas_of(service: &Service) -> usize {
    service
        .spec
        .as_ref()
        .and_then(|s| s.mode.as_ref())
        .and_then(|m| m.replicated.as_ref())
        .and_then(|r| r.replicas)
        .and_then(|r| usize::try_from(r).ok())
        .unwrap_or(1)
}
