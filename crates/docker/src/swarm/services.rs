//! Containers and applications on a Swarm: each deployment starts a Swarm service of its own
//! generation beside the previous one, waits until its tasks run and pass Capstan's own probes
//! at their nodes' addresses, and only then lets the router switch to it and removes the
//! previous generation (a rollback is the new one removed, the previous one never touched).

use super::pinned;
use super::spec::{self, LABEL_RETIRING};
use super::tasks;
use crate::diagnosis::Readiness;
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::{db_recipe, exec, images, plan, probe, rollout};
use bollard::models::{Service, Task, TaskState};
use bollard::query_parameters::{ListTasksOptions, UpdateServiceOptions};
use domain::engine::{Cancel, Cut, EngineError, Kept, ReplicaSet, StepLog, StepWork};
use domain::ids::{DeploymentRequestId, OrganizationId, ServiceId};
use domain::model::{is_routed, DeploymentAction, RunningState, ServiceSpec, StepName};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long new tasks have to run and pass their probe, when the probe gives no longer time.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long tasks without a probe must stay up to count as started.
const STAYS_UP: Duration = Duration::from_secs(2);
const LOOK: Duration = Duration::from_millis(300);
/// How long one readiness command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a database has to accept connections (a first start initialises its data).
const DATABASE_READY_TIMEOUT: Duration = Duration::from_secs(180);

fn name_of(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.name.as_deref())
        .unwrap_or_default()
}

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
            (A::Delete | A::Uninstall, _) => {
                let service = work.service;
                let pinned = self.pinned_node(service.id).await?;
                let found = self.swarm_services(Some(service.id)).await?;
                for s in &found {
                    self.remove_swarm_service(s).await?;
                }
                work.log
                    .info(&format!("removed {} Swarm service(s)", found.len()));
                if work.request.action != A::Delete {
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
            (A::Diff, _) => Ok(()),
        }
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
        self.mark_spec(&mut wanted);
        if built {
            self.keep_off_nodes_lacking(&mut wanted, &image, log, work.cancel)
                .await?;
        }
        if database {
            let node = self.node_to_pin(service.id).await?;
            if let Some(task) = wanted.task_template.as_mut() {
                task.placement = Some(bollard::models::TaskSpecPlacement {
                    constraints: Some(vec![pinned::pinned_to(&node)]),
                    ..Default::default()
                });
            }
            log.info(&format!(
                "the database is pinned to the node {node}, where its volume is"
            ));
            // Two servers on one volume would corrupt it: the previous one goes first.
            self.retire_others(work, None).await?;
        }
        self.ensure_network(service).await?;
        // An earlier attempt at the same request goes first.
        for earlier in self.swarm_services(Some(service.id)).await? {
            if name_of(&earlier) == name {
                self.remove_swarm_service(&earlier).await?;
            }
        }
        let secrets = self.file_secrets(service.id, &name, &first.files).await?;
        if let Some(container) = wanted
            .task_template
            .as_mut()
            .and_then(|t| t.container_spec.as_mut())
        {
            container.secrets = Some(secrets);
        }
        let credentials = match &service.spec {
            ServiceSpec::Container(_) => Self::credentials(work.inputs.registry.as_ref()),
            _ => None,
        };
        self.docker
            .create_service(wanted, credentials)
            .await
            .map_err(|e| said(&format!("could not create the Swarm service {name}"), e))?;
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
        } else {
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

    /// Waits until `replicas` tasks of the Swarm service `name` (of the spec `force` when it
    /// says) run and are ready by `readiness`, probed at their nodes' addresses; a task that
    /// fails on the way fails it, naming the node and Swarm's reason.
    async fn swarm_ready(
        &self,
        name: &str,
        replicas: usize,
        readiness: &Readiness<'_>,
        force: Option<u64>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let timeout = match readiness {
            Readiness::Probe(p) => {
                let secs = p.initial_delay_seconds + p.period_seconds * p.failure_threshold;
                Duration::from_secs(u64::try_from(secs).unwrap_or(0)).max(READY_TIMEOUT)
            }
            Readiness::Command { .. } => DATABASE_READY_TIMEOUT,
            Readiness::UpFor(_) => READY_TIMEOUT,
        };
        let started = Instant::now();
        let mut all_running_since: Option<Instant> = None;
        let nodes = |list: Vec<bollard::models::Node>| -> HashMap<String, (String, String)> {
            list.into_iter()
                .filter_map(|n| {
                    let host = n.description.and_then(|d| d.hostname).unwrap_or_default();
                    let addr = n.status.and_then(|s| s.addr).unwrap_or_default();
                    Some((n.id?, (host, addr)))
                })
                .collect()
        };
        loop {
            let tasks = self.tasks_of(name).await?;
            let of_spec = |t: &&Task| {
                force.is_none() || t.spec.as_ref().and_then(|s| s.force_update) == force
            };
            let seen = nodes(
                self.docker
                    .list_nodes(None)
                    .await
                    .map_err(|e| said("could not list the Swarm's nodes", e))?,
            );
            let node_of = |t: &Task| seen.get(t.node_id.as_deref().unwrap_or_default());
            if let Some(failed) = tasks.iter().filter(of_spec).find(|t| {
                matches!(
                    t.status.as_ref().and_then(|s| s.state),
                    Some(TaskState::FAILED | TaskState::REJECTED)
                )
            }) {
                let status = failed.status.clone().unwrap_or_default();
                let why = status.err.or(status.message).unwrap_or_default();
                let on = node_of(failed).map(|n| n.0.clone()).unwrap_or_default();
                return Err(format!("a new task did not start on node {on}: {why}").into());
            }
            let running: Vec<&Task> = tasks
                .iter()
                .filter(of_spec)
                .filter(|t| t.desired_state == Some(TaskState::RUNNING))
                .filter(|t| t.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING))
                .collect();
            if running.len() >= replicas {
                let since = *all_running_since.get_or_insert_with(Instant::now);
                let ready = match readiness {
                    Readiness::Probe(p) => match probe::port_of(p) {
                        Some(port) => {
                            let mut all = true;
                            for t in &running {
                                let at = node_of(t).map(|n| n.1.clone()).unwrap_or_default();
                                let published = published_port(t, port);
                                all &= match published {
                                    Some(published) => probe::answers(&at, published, p).await,
                                    None => false,
                                };
                            }
                            all
                        }
                        // An exec probe needs the node's daemon: the task staying up counts.
                        None => since.elapsed() >= STAYS_UP,
                    },
                    Readiness::UpFor(at_least) => since.elapsed() >= *at_least,
                    Readiness::Command { cmd, env } => {
                        let mut all = true;
                        for t in &running {
                            all &= self.passes_in_task(t, cmd, env).await;
                        }
                        all
                    }
                };
                if ready {
                    for t in &running {
                        let (host, addr) = node_of(t).cloned().unwrap_or_default();
                        let ports: Vec<String> = ports_of(t)
                            .iter()
                            .map(|(target, published)| format!("{target} at {addr}:{published}"))
                            .collect();
                        log.info(&format!(
                            "replica {name}.{} runs on node {host}{}",
                            t.slot.unwrap_or(0),
                            if ports.is_empty() {
                                String::new()
                            } else {
                                format!(", port {}", ports.join(", "))
                            }
                        ));
                    }
                    log.info("the new replicas run and are ready");
                    return Ok(());
                }
            } else {
                all_running_since = None;
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "the new replicas were not ready after {} s ({} of {replicas} running)",
                    timeout.as_secs(),
                    running.len()
                )
                .into());
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                () = cancel.canceled() => return Err("canceled while the new replicas started".into()),
            }
        }
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

    /// Waits, at most `grace` and 15 s more, until no container of the removed Swarm services
    /// runs on a daemon Capstan reaches, then removes what is left of them there (the exited
    /// containers of their earlier tasks, which would hold their image).
    async fn wait_containers_gone(&self, removed: &[Service], grace: Duration) {
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

    /// Whether `cmd` succeeds in the task's container, run through its node's daemon (which
    /// must be reached: a database is pinned to such a node).
    async fn passes_in_task(&self, task: &Task, cmd: &[String], env: &[String]) -> bool {
        let container = task
            .status
            .as_ref()
            .and_then(|s| s.container_status.as_ref())
            .and_then(|c| c.container_id.clone());
        let (Some(container), Some(node)) = (container, task.node_id.as_deref()) else {
            return false;
        };
        let Ok(Some(docker)) = self.daemon_of_node(node).await else {
            return false;
        };
        exec::run(docker, &container, cmd, env, None, COMMAND_TIMEOUT)
            .await
            .is_ok_and(|ran| ran.succeeded())
    }

    /// The Swarm's id of the node whose daemon this is.
    pub(crate) async fn own_node_id(&self) -> Result<String, EngineError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| said("could not ask the daemon what it is", e))?;
        info.swarm
            .and_then(|s| s.node_id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| "the Docker host is no longer a node of a Swarm".into())
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

/// A task's host-mode ports: (the container's, the node's), once each.
fn ports_of(task: &Task) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = task
        .status
        .as_ref()
        .and_then(|s| s.port_status.as_ref())
        .and_then(|p| p.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| Some((p.target_port?, p.published_port?)))
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out.dedup();
    out
}

fn published_port(task: &Task, internal: i64) -> Option<u16> {
    ports_of(task)
        .into_iter()
        .find(|(target, _)| *target == internal)
        .and_then(|(_, published)| u16::try_from(published).ok())
}
