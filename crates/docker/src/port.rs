//! One Docker daemon as a place of the engine port: a step carried out by the module of its
//! service's kind, and what reconciliation and reports ask of the daemon.

use crate::containers::Act;
use crate::engine::DockerEngine;
use crate::errors::{failure_words, said};
use crate::images;
use crate::plan::{self, LABEL_ROLE, LABEL_SERVICE};
use async_trait::async_trait;
use bollard::models::{ContainerSummary, ContainerSummaryStateEnum};
use domain::engine::{
    Cut, DatabaseBackups, EngineError, ImageChecks, Kept, Place, ReplicaSet, ReplicaUsage,
    Replicas, Shell, ShellRequest, StepWork, Target, TerraformStates,
};
use domain::ids::{DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use domain::model::{
    Cluster, ClusterAction, ClusterHost, DeploymentAction, OutputLine, RegistryAccess,
    RunningState, Service, ServiceSpec, StepName, SwarmNode, WorkloadInputs,
};
use futures_util::StreamExt;
use std::collections::HashMap;

impl DockerEngine {
    /// A step, by its service's kind; a build, whatever the kind, by what it builds from.
    async fn carry_out(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let (service, action) = (work.service, work.request.action);
        if work.request.snapshot.move_to_node.is_some() && !self.settings.swarm {
            return Err(
                "a database moves between the nodes of a Swarm, and this cluster's \
                        Docker host is one machine: nothing moved"
                    .into(),
            );
        }
        if matches!(action, A::Deploy | A::Redeploy) && work.step == StepName::Build {
            return match service.spec.build_source() {
                Some(source) => self.build(work, source).await,
                None => Ok(()),
            };
        }
        match &service.spec {
            ServiceSpec::Container(_) | ServiceSpec::Application(_) | ServiceSpec::Database(_)
                if self.settings.swarm =>
            {
                self.swarm_replicas_step(work).await
            }
            ServiceSpec::Job(job) if self.settings.swarm => self.swarm_job_step(work, job).await,
            ServiceSpec::Container(_) | ServiceSpec::Application(_) | ServiceSpec::Database(_) => {
                self.replicas_step(work).await
            }
            ServiceSpec::Job(job) => self.job_step(work, job).await,
            ServiceSpec::Terraform(tf) => self.terraform_step(work, tf).await,
            spec => match action {
                A::Stop => self.each_owned(service, work.log, Act::Stop).await,
                A::Delete | A::Uninstall => self.remove_service(work).await,
                _ => Err(plan::refused(spec).into()),
            },
        }
    }
}

#[async_trait]
impl Place for DockerEngine {
    /// The daemon answers; a Swarm manager's, with the Swarm behind it (managers that lost
    /// their majority answer pings but run nothing).
    async fn ping(&self) -> Result<(), EngineError> {
        self.docker.ping().await.map_err(|e| failure_words(&e))?;
        if self.settings.swarm {
            let nodes = self.docker.list_nodes(None).await.map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError {
                    status_code: 503, ..
                } => EngineError::transient(
                    "its Swarm has no leader: a majority of its managers is lost or cut off",
                ),
                e => failure_words(&e),
            })?;
            if let Some(why) = crate::swarm::nodes::lost_quorum(&nodes) {
                return Err(EngineError::transient(why));
            }
        }
        Ok(())
    }

    fn holds(&self) -> bool {
        DockerEngine::holds(self)
    }

    async fn describe(&self) -> String {
        DockerEngine::describe(self).await
    }

    async fn nodes(&self) -> Result<Vec<SwarmNode>, EngineError> {
        self.swarm_nodes().await
    }

    async fn hosts(&self) -> Result<Vec<ClusterHost>, EngineError> {
        self.holdings().await
    }

    fn image_checks(&self) -> Option<&dyn ImageChecks> {
        Some(self)
    }

    /// A backup runs in the database's container (on a Swarm, through its node's daemon).
    fn database_backups(&self) -> Option<&dyn DatabaseBackups> {
        Some(self)
    }

    fn terraform_states(&self) -> Option<&dyn TerraformStates> {
        Some(self)
    }

    fn replicas(&self) -> Option<&dyn Replicas> {
        Some(self)
    }

    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        let done = self.carry_out(&work).await;
        // A deployment's last step, whatever its end, no longer needs what its build made.
        let last = match work.service.spec {
            ServiceSpec::Job(_) => StepName::Executing,
            _ => StepName::Deployment,
        };
        if work.step == last || done.is_err() {
            self.forget_build(work.request.id);
        }
        done
    }

    /// A cluster is this daemon: deploying it makes its environments' networks (their router
    /// needs nothing here: it reaches published ports).
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        _target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        match action {
            // The dispatcher has just seen the daemon answer: no ping.
            ClusterAction::Deploy => {
                for environment in environments {
                    self.ensure_environment_network(cluster.organization_id, *environment)
                        .await?;
                }
                Ok(())
            }
            ClusterAction::Stop => Ok(()),
        }
    }

    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        let found = self
            .docker
            .list_containers(Some(plan::labelled(
                self.scoped(vec![LABEL_SERVICE.to_string()]),
            )))
            .await
            .map_err(|e| said("could not list Capstan's containers", e))?;
        // A volume (a database's data, a terraform state) outlives its containers.
        let volumes = self.capstan_volumes().await?;
        // So do the images built from git.
        let images = self
            .docker
            .list_images(Some(bollard::query_parameters::ListImagesOptions {
                filters: Some(HashMap::from([(
                    "label".to_string(),
                    self.scoped(vec![LABEL_SERVICE.to_string()]),
                )])),
                ..Default::default()
            }))
            .await
            .map_err(|e| said("could not list Capstan's images", e))?;
        let swarm = if self.settings.swarm {
            self.swarm_services(None).await?
        } else {
            Vec::new()
        };
        let labelled = found
            .iter()
            .filter_map(|c| c.labels.as_ref())
            .chain(volumes.iter().map(|v| &v.labels))
            .chain(images.iter().map(|i| &i.labels))
            .chain(
                swarm
                    .iter()
                    .filter_map(|s| s.spec.as_ref()?.labels.as_ref()),
            );
        let mut services: Vec<(OrganizationId, ServiceId)> = labelled
            .filter_map(|labels| {
                let org = labels.get(plan::LABEL_ORGANIZATION)?.parse().ok()?;
                let service = labels.get(LABEL_SERVICE)?.parse().ok()?;
                Some((OrganizationId(org), ServiceId(service)))
            })
            .collect();
        services.sort();
        services.dedup();
        Ok(services)
    }

    /// Its containers, and its volumes: a database's data, a terraform state (unless the
    /// settings keep them).
    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        if self.settings.swarm {
            self.remove_swarm_services(service).await?;
        }
        self.remove_owned(service).await?;
        if !self.settings.keep_volumes {
            self.remove_volume_of(service).await?;
            self.remove_named_volume(&plan::state_volume_name(service))
                .await?;
        }
        self.remove_built_images(service).await
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        if self.settings.swarm {
            return self.swarm_replica_sets().await;
        }
        let replicas = plan::labelled(self.scoped(vec![format!("{LABEL_ROLE}=service")]));
        let found = self
            .docker
            .list_containers(Some(replicas))
            .await
            .map_err(|e| said("could not list Capstan's replicas", e))?;
        let mut sets: Vec<ReplicaSet> = found
            .iter()
            .filter_map(|c| {
                let labels = c.labels.as_ref()?;
                let id = |label: &str| labels.get(label)?.parse::<uuid::Uuid>().ok();
                Some(ReplicaSet {
                    organization: OrganizationId(id(plan::LABEL_ORGANIZATION)?),
                    service: ServiceId(id(LABEL_SERVICE)?),
                    request: DeploymentRequestId(id(plan::LABEL_REQUEST)?),
                })
            })
            .collect();
        sets.sort();
        sets.dedup();
        Ok(sets)
    }

    async fn settle_cut(
        &self,
        _target: &Target,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        if self.settings.swarm {
            return self.settle_swarm_cut(service.id, request, cut).await;
        }
        let all = self.owned(service.id, Some("service")).await?;
        let of_request = |c: &ContainerSummary| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(plan::LABEL_REQUEST))
                .is_some_and(|id| *id == request.0.to_string())
        };
        let (started, earlier): (Vec<_>, Vec<_>) = all.iter().partition(|c| of_request(c));
        let running = |c: &&ContainerSummary| c.state == Some(ContainerSummaryStateEnum::RUNNING);
        let ids = |set: &[&ContainerSummary]| -> Vec<String> {
            set.iter().filter_map(|c| c.id.clone()).collect()
        };
        // Ready and routed to: the switch is finished, without the drain it was giving the
        // earlier replicas (already out of the routes, or about to be).
        let kept = if cut == Cut::InSwitch && !started.is_empty() && started.iter().all(running) {
            self.remove_each(&ids(&earlier)).await?;
            Kept::Started
        } else {
            self.remove_each(&ids(&started)).await?;
            Kept::Previous
        };
        Ok(kept)
    }

    async fn report(&self, service: &Service) -> Option<RunningState> {
        if self.settings.swarm {
            let states = self.swarm_states().await.ok()?;
            return states.into_iter().find(|s| s.service_id == service.id);
        }
        let scope = self.scope();
        crate::observe::report(
            &self.docker,
            service.id,
            service.environment_id,
            self.probe_address(),
            &scope,
            &std::collections::HashSet::new(),
        )
        .await
        .ok()
    }

    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        let networks = self
            .docker
            .list_networks(Some(bollard::query_parameters::ListNetworksOptions {
                filters: Some(HashMap::from([(
                    "label".to_string(),
                    self.scoped(vec![plan::LABEL_ENVIRONMENT.to_string()]),
                )])),
            }))
            .await
            .map_err(|e| said("could not list Capstan's networks", e))?;
        let mut found: Vec<(OrganizationId, EnvironmentId)> = networks
            .iter()
            .filter_map(|n| {
                let labels = n.labels.as_ref()?;
                let org = labels.get(plan::LABEL_ORGANIZATION)?.parse().ok()?;
                let env = labels.get(plan::LABEL_ENVIRONMENT)?.parse().ok()?;
                Some((OrganizationId(org), EnvironmentId(env)))
            })
            .collect();
        found.sort();
        found.dedup();
        Ok(found)
    }

    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        let name = plan::network_name(environment);
        let ours = self
            .docker
            .inspect_network(&name, None)
            .await
            .ok()
            .and_then(|n| n.labels)
            .is_some_and(|labels| {
                self.settings.installation.is_empty()
                    || labels.get(plan::LABEL_INSTALLATION) == Some(&self.settings.installation)
            });
        if !ours {
            return Ok(());
        }
        match self.docker.remove_network(&name).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            // Something still runs on it (a workload on its way out): the next try takes it.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 403 | 409,
                ..
            }) => Ok(()),
            Err(e) => Err(said(&format!("could not remove the network {name}"), e)),
        }
    }

    /// Docker's event stream, read by a task of its own while the stream is listened to.
    fn observe(&self) -> Option<futures_util::stream::BoxStream<'static, RunningState>> {
        let (reports, received) = tokio::sync::mpsc::channel(64);
        let stream = |received: tokio::sync::mpsc::Receiver<RunningState>| {
            futures_util::stream::unfold(received, |mut received| async move {
                received.recv().await.map(|state| (state, received))
            })
        };
        // On a Swarm what runs is the tasks, as the managers see them; the containers of
        // the manager's own node are some of them.
        if self.settings.swarm {
            self.keep_tasks_alive(&reports);
            tokio::spawn(crate::swarm::tasks::watch(
                self.docker.clone(),
                self.scope(),
                reports,
            ));
            return Some(stream(received).boxed());
        }
        tokio::spawn(crate::liveness::watch(
            self.docker.clone(),
            self.reach(),
            crate::liveness::Failing::Restart,
            self.scope(),
            reports.clone(),
        ));
        tokio::spawn(crate::observe::watch(
            self.docker.clone(),
            self.probe_address().to_string(),
            self.scope(),
            reports,
        ));
        Some(stream(received).boxed())
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        if self.settings.swarm {
            return self.remove_failed_runs(job).await;
        }
        self.remove_failed_executions(job).await
    }

    fn output(&self) -> Option<futures_util::stream::BoxStream<'static, OutputLine>> {
        let (lines, received) = tokio::sync::mpsc::channel(1024);
        // On a Swarm, each node's daemon Capstan reaches follows the tasks it runs.
        for node in &self.nodes {
            tokio::spawn(crate::output::watch(
                node.docker.clone(),
                self.scope(),
                lines.clone(),
            ));
        }
        tokio::spawn(crate::output::watch(
            self.docker.clone(),
            self.scope(),
            lines,
        ));
        let stream = futures_util::stream::unfold(received, |mut received| async move {
            received.recv().await.map(|line| (line, received))
        });
        Some(stream.boxed())
    }
}

#[async_trait]
impl ImageChecks for DockerEngine {
    /// On the host, or in its registry (the daemon asks it, once the outbound policy permits).
    async fn image_available(
        &self,
        _target: &Target,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, EngineError> {
        let image = plan::image_reference(Some(registry), name, tag);
        // What only this host holds (another organization's build or private pull) is
        // answered as what does not exist: the registry is asked, with the caller's access.
        if images::nameable(&image).is_err() {
            return Ok(false);
        }
        if self.settings.host_images.shares(&image)
            && self.docker.inspect_image(&image).await.is_ok()
        {
            return Ok(true);
        }
        self.pull_permitted(&image).await?;
        match self
            .docker
            .inspect_registry_image(&image, Self::credentials(Some(registry)))
            .await
        {
            Ok(_) => Ok(true),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 401 | 403 | 404,
                ..
            }) => Ok(false),
            Err(e) => Err(said(&format!("could not ask for image {image}"), e)),
        }
    }
}

#[async_trait]
impl DatabaseBackups for DockerEngine {
    async fn backup_database(
        &self,
        _target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        self.take_backup(database, inputs, file).await
    }

    async fn restore_database(
        &self,
        _target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        self.load_backup(database, inputs, file).await
    }
}

#[async_trait]
impl Replicas for DockerEngine {
    async fn open_shell(
        &self,
        _target: &Target,
        service: &Service,
        request: &ShellRequest,
    ) -> Result<Shell, EngineError> {
        DockerEngine::open_shell(self, service, request).await
    }

    async fn usage(
        &self,
        _target: &Target,
        service: &Service,
    ) -> Result<Vec<ReplicaUsage>, EngineError> {
        DockerEngine::usage(self, service).await
    }
}

#[async_trait]
impl TerraformStates for DockerEngine {
    async fn terraform_state(
        &self,
        _target: &Target,
        service: &Service,
    ) -> Result<Option<String>, EngineError> {
        match &service.spec {
            ServiceSpec::Terraform(spec) => self.read_terraform_state(service, spec).await,
            _ => Ok(None),
        }
    }
}
