//! The Docker engine: each step of a request done on the daemon, its progress in the step's log.

use crate::db_recipe::{self, DatabaseImages};
use crate::errors::said;
use crate::exec;
use crate::images::{self, HostImages, ImageAccess};
use crate::plan::{self, ContainerPlan, LABEL_ROLE, LABEL_SERVICE};
use crate::probe;
use crate::terraform::Run;
use async_trait::async_trait;
use bollard::auth::DockerCredentials;
use bollard::models::{
    ContainerStateStatusEnum, ContainerSummary, ContainerSummaryStateEnum, ContainerUpdateBody,
    HealthStatusEnum,
};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, EventsOptions, LogsOptions, RemoveContainerOptions,
    RestartContainerOptions, StopContainerOptions, UploadToContainerOptions,
};
use bollard::Docker;
use domain::engine::EngineError;
use domain::engine::{Cancel, Cut, Engine, Kept, ReplicaSet, StepLog, StepWork};
use domain::git::Checkouts;
use domain::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use domain::model::{
    Cluster, ClusterAction, DeploymentAction, DeploymentStatus, Host, JobCommand, JobSpec,
    OutputLine, RegistryAccess, RunningState, Service, ServiceKind, ServiceSpec, ServiceSubAction,
    StepName, WorkloadInputs,
};
use domain::outbound_policy::OutboundPolicy;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// How long a new workload has to run (and pass its readiness probe) before it counts as
/// deployed, when its probe gives no longer time.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a workload without a probe must stay up to count as started.
const STAYS_UP: Duration = Duration::from_secs(2);
/// How often a starting workload is looked at.
const LOOK: Duration = Duration::from_millis(250);
/// The output lines a failure quotes.
const LAST_LINES: usize = 20;
/// How long a database has to accept connections (a first start initialises its data).
const DATABASE_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the daemon may take to report that a killed container was OOM-killed.
const OOM_MARK: Duration = Duration::from_secs(3);
/// How long one readiness command may take.
const LOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// What tells that a new container is ready: it stayed up that long, its readiness probe
/// passes, or a command run in it succeeds (a database accepting connections).
pub(crate) enum Readiness<'a> {
    UpFor(Duration),
    Probe(&'a domain::model::Probe),
    Command { cmd: Vec<String>, env: Vec<String> },
}

/// The image terraform services run in, unless the settings say: OpenTofu's.
pub const DEFAULT_TERRAFORM_IMAGE: &str = "ghcr.io/opentofu/opentofu:{version}";

/// How a container run to its end ended.
pub(crate) enum Ended {
    Exited(i64),
    TimedOut,
    Canceled,
}

/// How many images built from git a service keeps, unless the settings say.
pub const DEFAULT_IMAGES_KEPT: usize = 5;

#[derive(Debug, Clone, Copy)]
enum Act {
    Restart,
    Stop,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Act::Restart => "restart",
            Act::Stop => "stop",
        }
    }
}

pub struct DockerEngine {
    pub(crate) docker: Docker,
    publish_address: String,
    /// What image pulls may reach: the daemon pulls, but only from a registry whose
    /// addresses the outbound policy permits.
    policy: OutboundPolicy,
    /// The repositories every organization may run from the host without a pull.
    host_images: HostImages,
    /// Whether the daemon runs on this host (its socket, or a loopback address).
    local: bool,
    /// What fetches the repositories services are built from.
    pub(crate) checkouts: Option<Arc<dyn Checkouts>>,
    /// How many images built from git each service keeps (the newest).
    pub(crate) images_kept: usize,
    /// The image each running deployment's build step made or found, for its deploy step.
    built: Mutex<HashMap<DeploymentRequestId, String>>,
    /// The image of each database type.
    pub(crate) database_images: DatabaseImages,
    /// Whether a deleted database's volume is kept (its data outlives it).
    keep_volumes: bool,
    /// Where databases' backups are kept.
    pub(crate) backup_dir: std::path::PathBuf,
    /// The image terraform services run in, `{version}` standing for their version.
    pub(crate) terraform_image: String,
    /// How long each turn of the router's switch to new replicas waits; none: no router.
    pub(crate) switch_settle: Option<Duration>,
    /// The installation whose objects these are (see [`plan::LABEL_INSTALLATION`]); empty:
    /// none told (every Capstan object of the daemon is its own).
    installation: String,
}

/// How a workload's process ended, as a reason says it: the signals a code stands for named
/// (a SIGTERM Capstan did not send is its daemon stopping, or a stop by hand).
fn exited(code: i64) -> String {
    match code {
        143 => format!("exited with code {code} (stopped by SIGTERM, not by Capstan: its Docker daemon stopping or restarting, or a stop by hand)"),
        137 => format!("exited with code {code} (killed by SIGKILL)"),
        _ => format!("exited with code {code}"),
    }
}

/// What a workload last wrote, as a reason quotes it.
fn wrote(lines: &[String]) -> String {
    if lines.is_empty() {
        "it wrote nothing".to_string()
    } else {
        format!("its last lines:\n{}", lines.join("\n"))
    }
}

impl DockerEngine {
    /// Connects to the daemon at `DOCKER_HOST` (or the default socket) and agrees on an API
    /// version with it; `Err` says why it could not.
    pub async fn connect(publish_address: String) -> Result<Self, EngineError> {
        let docker = Docker::connect_with_defaults().map_err(|e| said("no Docker daemon", e))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| said("the Docker daemon did not answer", e))?;
        docker
            .ping()
            .await
            .map_err(|e| said("the Docker daemon did not answer", e))?;
        let host = std::env::var("DOCKER_HOST").unwrap_or_default();
        let local = host.is_empty()
            || host.starts_with("unix://")
            || host.contains("://127.0.0.1")
            || host.contains("://localhost");
        Ok(Self::with_defaults(docker, publish_address, local))
    }

    /// The engine's default settings on `docker` (`local`: it runs where Capstan does),
    /// whether it answers or not.
    pub(crate) fn with_defaults(docker: Docker, publish_address: String, local: bool) -> Self {
        Self {
            docker,
            publish_address,
            policy: OutboundPolicy::default(),
            host_images: HostImages::default(),
            local,
            checkouts: None,
            images_kept: DEFAULT_IMAGES_KEPT,
            built: Mutex::default(),
            database_images: DatabaseImages::default(),
            keep_volumes: false,
            backup_dir: std::path::PathBuf::from("backups"),
            terraform_image: DEFAULT_TERRAFORM_IMAGE.to_string(),
            switch_settle: None,
            installation: String::new(),
        }
    }

    /// The same settings on another daemon: `docker`, its workloads' ports published on
    /// `publish_address`; `on_this_machine`: the daemon runs where Capstan does.
    pub(crate) fn on(
        &self,
        docker: Docker,
        publish_address: String,
        on_this_machine: bool,
    ) -> Self {
        Self {
            docker,
            publish_address,
            policy: self.policy.clone(),
            host_images: self.host_images.clone(),
            local: on_this_machine,
            checkouts: self.checkouts.clone(),
            images_kept: self.images_kept,
            built: Mutex::default(),
            database_images: self.database_images.clone(),
            keep_volumes: self.keep_volumes,
            backup_dir: self.backup_dir.clone(),
            terraform_image: self.terraform_image.clone(),
            switch_settle: self.switch_settle,
            installation: self.installation.clone(),
        }
    }

    /// Marks what it makes as `installation`'s, and acts only on what is marked so: several
    /// installations may share a daemon.
    pub fn with_installation(mut self, installation: &str) -> Self {
        self.installation = installation.to_string();
        self
    }

    /// The label filters that narrow a listing to this installation's objects.
    pub(crate) fn scope(&self) -> Vec<String> {
        if self.installation.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{}={}",
            plan::LABEL_INSTALLATION,
            self.installation
        )]
    }

    /// `filters` narrowed to this installation's objects.
    pub(crate) fn scoped(&self, mut filters: Vec<String>) -> Vec<String> {
        filters.extend(self.scope());
        filters
    }

    /// `labels` with this installation's mark.
    pub(crate) fn marked(&self, mut labels: HashMap<String, String>) -> HashMap<String, String> {
        if !self.installation.is_empty() {
            labels.insert(plan::LABEL_INSTALLATION.into(), self.installation.clone());
        }
        labels
    }

    /// Where its workloads' ports are published.
    pub(crate) fn publish_address(&self) -> &str {
        &self.publish_address
    }

    /// Runs databases from `images`; a deleted database's volume stays when `keep_volumes`;
    /// backups are kept in `backup_dir`.
    pub fn with_databases(
        mut self,
        images: DatabaseImages,
        keep_volumes: bool,
        backup_dir: std::path::PathBuf,
    ) -> Self {
        self.database_images = images;
        self.keep_volumes = keep_volumes;
        self.backup_dir = backup_dir;
        self
    }

    /// Runs terraform services in `image` (`{version}` standing for their version).
    pub fn with_terraform(mut self, image: String) -> Self {
        self.terraform_image = image;
        self
    }

    /// What tells that a service's new containers are ready.
    fn readiness<'a>(
        &self,
        service: &'a Service,
        inputs: &WorkloadInputs,
    ) -> Result<Readiness<'a>, EngineError> {
        if let ServiceSpec::Database(_) = &service.spec {
            let (spec, connection, password) = db_recipe::database_of(service, inputs)?;
            let recipe = db_recipe::recipe(spec.db_type, &connection, &password);
            return Ok(Readiness::Command {
                cmd: recipe.health,
                env: recipe.exec_env,
            });
        }
        Ok(match plan::readiness(service) {
            Some(p) => Readiness::Probe(p),
            None => Readiness::UpFor(STAYS_UP),
        })
    }

    /// The network of the service's environment, made the first time.
    pub(crate) async fn ensure_network(&self, service: &Service) -> Result<(), EngineError> {
        self.ensure_environment_network(service.organization_id, service.environment_id)
            .await
    }

    /// The network of an environment, made the first time.
    async fn ensure_environment_network(
        &self,
        organization: OrganizationId,
        environment: EnvironmentId,
    ) -> Result<(), EngineError> {
        let name = plan::network_name(environment);
        if self.docker.inspect_network(&name, None).await.is_ok() {
            return Ok(());
        }
        let request = bollard::models::NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            options: Some(HashMap::from([(
                "com.docker.network.bridge.name".to_string(),
                plan::bridge_name(environment),
            )])),
            labels: Some(self.marked(HashMap::from([
                (
                    plan::LABEL_ORGANIZATION.to_string(),
                    organization.0.to_string(),
                ),
                (
                    plan::LABEL_ENVIRONMENT.to_string(),
                    environment.0.to_string(),
                ),
            ]))),
            ..Default::default()
        };
        match self.docker.create_network(request).await {
            Ok(_) => Ok(()),
            // Made meanwhile by another deployment of the environment.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 409, ..
            }) => Ok(()),
            Err(e) => Err(said(&format!("could not make the network {name}"), e)),
        }
    }

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
    async fn remove_volume(&self, service: &Service, log: &StepLog) -> Result<(), EngineError> {
        if !matches!(service.spec, ServiceSpec::Database(_)) {
            return Ok(());
        }
        let name = plan::volume_name(service.id);
        if self.keep_volumes {
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
    async fn remove_volume_of(&self, service: ServiceId) -> Result<bool, EngineError> {
        self.remove_named_volume(&plan::volume_name(service)).await
    }

    /// Removes a volume, if there is one; whether there was.
    async fn remove_named_volume(&self, name: &str) -> Result<bool, EngineError> {
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

    /// Builds services from git, fetched by `checkouts`, keeping each service's newest
    /// `images_kept` images.
    pub fn with_builds(mut self, checkouts: Arc<dyn Checkouts>, images_kept: usize) -> Self {
        self.checkouts = Some(checkouts);
        self.images_kept = images_kept.max(1);
        self
    }

    pub(crate) fn built_images(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<DeploymentRequestId, String>> {
        self.built.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pulls only from registries `policy` permits (the default permits public addresses).
    pub fn with_policy(mut self, policy: OutboundPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Lets every organization run the images of the repositories `shared` names from the
    /// host, without a pull (every other image an organization names is pulled each time).
    pub fn with_host_images(mut self, shared: HostImages) -> Self {
        self.host_images = shared;
        self
    }

    /// The daemon's version and API version, for the start-up log.
    pub async fn describe(&self) -> String {
        match self.docker.version().await {
            Ok(v) => format!(
                "Docker {} (API {})",
                v.version.unwrap_or_default(),
                self.docker.client_version()
            ),
            Err(e) => format!("Docker (version unknown: {e})"),
        }
    }

    /// Containers Capstan made for `service`, running or not; `role` narrows to replicas
    /// (`service`) or job executions (`job`).
    pub(crate) async fn owned(
        &self,
        service: ServiceId,
        role: Option<&str>,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        let mut labels = vec![plan::of_service(service)];
        labels.extend(role.map(|r| format!("{LABEL_ROLE}={r}")));
        let options = plan::labelled(self.scoped(labels));
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| said("could not list the service's containers", e))
    }

    async fn remove(&self, id: &str) -> Result<(), EngineError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(said("could not remove a container", e)),
        }
    }

    /// Removes each of `ids`, stopping at the first that cannot go.
    async fn remove_each(&self, ids: &[String]) -> Result<(), EngineError> {
        for id in ids {
            self.remove(id).await?;
        }
        Ok(())
    }

    /// Removes every container of a service; how many there were.
    async fn remove_owned(&self, service: ServiceId) -> Result<usize, EngineError> {
        let ids: Vec<String> = self
            .owned(service, None)
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect();
        self.remove_each(&ids).await?;
        Ok(ids.len())
    }

    /// The image on the host, pulled from its registry when it is not there yet.
    /// Refuses a pull from a registry the outbound policy does not permit: one of its
    /// addresses private, loopback or link-local, and not allowed by the operator.
    pub(crate) async fn pull_permitted(&self, image: &str) -> Result<(), EngineError> {
        let host = plan::registry_host(image);
        self.host_permitted(&host)
            .await
            .map_err(|why| why.context(&format!("could not pull image {image}")))
    }

    /// Refuses a URL a build would make the daemon fetch (`ADD <url>`) where the outbound
    /// policy does not let calls made for users go.
    pub(crate) async fn fetch_permitted(&self, url: &str) -> Result<(), EngineError> {
        let Some(host) = domain::dockerfile::url_host(url) else {
            return Err(format!("could not fetch {url}: it names no host").into());
        };
        self.host_permitted(&host)
            .await
            .map_err(|why| why.context(&format!("could not fetch {url}")))
    }

    /// Whether every address `host` resolves to (now) is one the outbound policy permits.
    async fn host_permitted(&self, host: &str) -> Result<(), EngineError> {
        let addresses: Vec<std::net::IpAddr> = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => tokio::net::lookup_host((host, 443))
                .await
                .map_err(|e| format!("{host} does not resolve: {e}"))?
                .map(|a| a.ip())
                .collect(),
        };
        if addresses.iter().all(|ip| self.policy.permits(host, *ip)) {
            Ok(())
        } else {
            Err(EngineError::refused(self.policy.refusal(host).to_string()))
        }
    }

    /// An image an organization names is pulled with its registry access each time, unless
    /// the operator shares its repository (see [`crate::images`]).
    pub(crate) async fn ensure_image(
        &self,
        image: &str,
        access: ImageAccess<'_>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let (registry, from_host) = match access {
            ImageAccess::Host => (None, true),
            ImageAccess::Named(registry) => {
                images::nameable(image)?;
                (registry, self.host_images.shares(image))
            }
        };
        if from_host && self.docker.inspect_image(image).await.is_ok() {
            log.info(&format!("image {image} is on the Docker host"));
            return Ok(());
        }
        self.pull_permitted(image).await?;
        log.info(&format!("pulling image {image}"));
        let credentials = Self::credentials(registry);
        let options = CreateImageOptions {
            from_image: Some(image.to_string()),
            ..Default::default()
        };
        let mut pull = self.docker.create_image(Some(options), None, credentials);
        let mut last = String::new();
        loop {
            let next = tokio::select! {
                next = pull.next() => next,
                () = cancel.canceled() => return Err("canceled while pulling the image".into()),
            };
            match next {
                None => break,
                Some(Ok(info)) => {
                    let status = info.status.unwrap_or_default();
                    // Progress lines repeat per layer; each kind of news is logged once.
                    if !status.is_empty() && status != last && info.progress_detail.is_none() {
                        log.info(&status);
                        last = status;
                    }
                }
                Some(Err(e)) => return Err(said(&format!("could not pull image {image}"), e)),
            }
        }
        Ok(())
    }

    /// The credentials a pull from `registry` signs in with, when it has some.
    fn credentials(registry: Option<&RegistryAccess>) -> Option<DockerCredentials> {
        registry
            .filter(|r| r.username.is_some() || r.password.is_some())
            .map(|r| DockerCredentials {
                username: r.username.clone(),
                password: r.password.as_ref().map(|p| p.expose().to_string()),
                serveraddress: Some(r.url.clone()),
                ..Default::default()
            })
    }

    /// Creates a container from its plan, copies its files in and starts it.
    pub(crate) async fn start(&self, plan: &ContainerPlan) -> Result<String, EngineError> {
        let options = CreateContainerOptions {
            name: Some(plan.name.clone()),
            ..Default::default()
        };
        let mut body = plan.body();
        body.labels = body.labels.map(|labels| self.marked(labels));
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| said(&format!("could not create container {}", plan.name), e))?;
        if !plan.files.is_empty() {
            let archive = crate::files::archive(&plan.files)?;
            let options = UploadToContainerOptions {
                path: "/".into(),
                ..Default::default()
            };
            self.docker
                .upload_to_container(
                    &created.id,
                    Some(options),
                    bollard::body_full(archive.into()),
                )
                .await
                .map_err(|e| said("could not write the file variables", e))?;
        }
        self.docker
            .start_container(&created.id, None)
            .await
            .map_err(|e| said(&format!("could not start container {}", plan.name), e))?;
        Ok(created.id)
    }

    /// The last lines a container wrote, for a failure's reason.
    pub(crate) async fn last_lines(&self, id: &str, count: usize) -> Vec<String> {
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            tail: count.to_string(),
            ..Default::default()
        };
        let mut out = Vec::new();
        let mut logs = self.docker.logs(id, Some(options));
        while let Some(Ok(chunk)) = logs.next().await {
            let text = chunk.to_string();
            out.extend(text.lines().map(str::to_string));
        }
        out
    }

    /// Whether the daemon tells of an OOM kill of the container, in its state or its `oom`
    /// events since `created`, within [`OOM_MARK`].
    async fn oom_reported(&self, id: &str, created: Option<&str>) -> bool {
        let since = created
            .and_then(|c| OffsetDateTime::parse(c, &Rfc3339).ok())
            .map_or(0, OffsetDateTime::unix_timestamp);
        let deadline = Instant::now() + OOM_MARK;
        loop {
            let options = EventsOptions {
                since: Some(since.to_string()),
                until: Some((OffsetDateTime::now_utc().unix_timestamp() + 1).to_string()),
                filters: Some(HashMap::from([
                    ("container".to_string(), vec![id.to_string()]),
                    ("event".to_string(), vec!["oom".to_string()]),
                ])),
            };
            let told = self.docker.events(Some(options)).next().await;
            if matches!(told, Some(Ok(_))) {
                return true;
            }
            let marked = self.docker.inspect_container(id, None).await.ok();
            if marked.and_then(|m| m.state?.oom_killed) == Some(true) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(LOOK).await;
        }
    }

    /// Why a container that should run does not, if it does not: exited, OOM-killed,
    /// restarted by Docker since the wait began (`restarts_before`), unhealthy. `None` while
    /// it runs.
    async fn trouble(&self, id: &str, restarts_before: i64) -> Result<Option<String>, EngineError> {
        let seen = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|e| said("could not look at a container", e))?;
        let killed = seen
            .state
            .as_ref()
            .is_some_and(|st| st.exit_code == Some(137) && st.oom_killed != Some(true));
        // The kernel's OOM notice can reach the daemon after the exit: then the state never
        // says so and only the daemon's `oom` event does. A SIGKILL is called a plain exit
        // only once neither has told of one for a while.
        let oom = killed && self.oom_reported(id, seen.created.as_deref()).await;
        let state = seen.state.unwrap_or_default();
        let restarted = seen.restart_count.unwrap_or(0) - restarts_before;
        let why = if oom || state.oom_killed == Some(true) {
            Some("it was OOM-killed (out of memory)".to_string())
        } else if matches!(
            state.status,
            Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD)
        ) {
            Some(format!(
                "it {}",
                exited(state.exit_code.unwrap_or_default())
            ))
        } else if restarted > 0 || state.restarting == Some(true) {
            Some(format!(
                "it exited and was restarting ({restarted} restarts)"
            ))
        } else if state.health.and_then(|h| h.status) == Some(HealthStatusEnum::UNHEALTHY) {
            Some("it is unhealthy".to_string())
        } else {
            None
        };
        match why {
            None => Ok(None),
            Some(why) => {
                let lines = self.last_lines(id, LAST_LINES).await;
                Ok(Some(format!("{why}; {}", wrote(&lines))))
            }
        }
    }

    /// The host ports a service's containers publish, by (replica, internal port): the ones
    /// they were created with (kept while they are stopped), or the ones Docker gave them.
    async fn host_ports(
        &self,
        containers: &[ContainerSummary],
    ) -> Result<HashMap<(usize, u16), u16>, EngineError> {
        let mut out = HashMap::new();
        for c in containers {
            let replica = c
                .labels
                .as_ref()
                .and_then(|l| l.get(plan::LABEL_REPLICA))
                .and_then(|r| r.parse::<usize>().ok());
            let (Some(replica), Some(id)) = (replica, &c.id) else {
                continue;
            };
            let seen = self
                .docker
                .inspect_container(id, None)
                .await
                .map_err(|e| said("could not look at a container", e))?;
            let asked = seen.host_config.and_then(|h| h.port_bindings);
            let given = seen.network_settings.and_then(|n| n.ports);
            for map in [asked, given].into_iter().flatten() {
                for (port, bindings) in map {
                    let internal = port.split('/').next().and_then(|p| p.parse::<u16>().ok());
                    let host = bindings
                        .iter()
                        .flatten()
                        .find_map(|b| b.host_port.as_deref()?.parse::<u16>().ok());
                    if let (Some(internal), Some(host)) = (internal, host) {
                        out.entry((replica, internal)).or_insert(host);
                    }
                }
            }
        }
        Ok(out)
    }

    /// A free port on the publish address, when this host is the Docker host's (a local
    /// daemon): created with it, a container keeps it while stopped. `None` lets Docker choose.
    fn free_port(&self, public: bool) -> Option<u16> {
        if !self.local {
            return None;
        }
        let address = if public {
            self.probe_address()
        } else {
            plan::LOOPBACK
        };
        let listener = std::net::TcpListener::bind((address, 0)).ok()?;
        listener.local_addr().ok().map(|a| a.port())
    }

    /// Where probes reach the workloads' published ports.
    fn reach(&self) -> probe::Reach {
        probe::Reach {
            published: self.probe_address().to_string(),
            loopback: self.local,
        }
    }

    /// Where the host reaches a published port.
    fn probe_address(&self) -> &str {
        match self.publish_address.as_str() {
            "0.0.0.0" | "" => "127.0.0.1",
            other => other,
        }
    }

    /// Waits until every new replica runs (and passes its readiness probe, run from the host
    /// through the published port); fails as soon as one cannot.
    async fn wait_ready(
        &self,
        ids: &[String],
        readiness: &Readiness<'_>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let timeout = match readiness {
            Readiness::UpFor(_) => READY_TIMEOUT,
            Readiness::Probe(p) => {
                let secs = p.initial_delay_seconds + p.period_seconds * p.failure_threshold;
                Duration::from_secs(u64::try_from(secs).unwrap_or(0)).max(READY_TIMEOUT)
            }
            Readiness::Command { .. } => DATABASE_READY_TIMEOUT,
        };
        let mut restarts_before = Vec::with_capacity(ids.len());
        for id in ids {
            let seen = self.docker.inspect_container(id, None).await;
            restarts_before.push(seen.ok().and_then(|s| s.restart_count).unwrap_or(0));
        }
        let started = Instant::now();
        loop {
            for (id, before) in ids.iter().zip(&restarts_before) {
                if let Some(why) = self.trouble(id, *before).await? {
                    return Err(format!("the new container did not start: {why}").into());
                }
            }
            let mut ready = true;
            for id in ids {
                ready &= match readiness {
                    Readiness::UpFor(at_least) => started.elapsed() >= *at_least,
                    Readiness::Probe(p) => probe::passes(&self.docker, id, p, &self.reach()).await,
                    Readiness::Command { cmd, env } => {
                        exec::run(&self.docker, id, cmd, env, None, LOOK_TIMEOUT)
                            .await
                            .is_ok_and(|ran| ran.succeeded())
                    }
                };
            }
            if ready {
                log.info("the new containers run and are ready");
                return Ok(());
            }
            if started.elapsed() > timeout {
                let what = match readiness {
                    Readiness::Command { .. } => "it never accepted connections",
                    _ => "it is unhealthy (its readiness probe never passed)",
                };
                return Err(format!(
                    "the new container was not ready after {} s: {what}",
                    timeout.as_secs()
                )
                .into());
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                () = cancel.canceled() => return Err("canceled while the new containers started".into()),
            }
        }
    }

    async fn deploy_service(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let (service, log) = (work.service, work.log);
        let old = self.owned(service.id, Some("service")).await?;
        let previous = self.host_ports(&old).await?;
        let mut plans = match &service.spec {
            ServiceSpec::Database(_) => vec![db_recipe::database_plan(
                work.request,
                service,
                work.inputs,
                &self.database_images,
                &self.publish_address,
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
                    &self.publish_address,
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
                replica.0, replica.1, self.publish_address, port
            ));
        }
        Ok(())
    }

    pub(crate) async fn remove_all(&self, ids: &[String]) {
        for id in ids {
            if let Err(e) = self.remove(id).await {
                tracing::warn!(container = %id, error = %e, "could not remove a container");
            }
        }
    }

    /// The job's executions that ended with a non-zero exit code, removed; their names.
    async fn remove_failed_executions(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for c in self.owned(job, Some("job")).await? {
            let Some(id) = c.id else { continue };
            let seen = self
                .docker
                .inspect_container(&id, None)
                .await
                .map_err(|e| said("could not read a job execution", e))?;
            let state = seen.state.unwrap_or_default();
            let ended = state.status == Some(bollard::models::ContainerStateStatusEnum::EXITED);
            if ended && state.exit_code.unwrap_or(0) != 0 {
                self.remove(&id).await?;
                let name = seen.name.unwrap_or_default();
                removed.push(name.trim_start_matches('/').to_string());
            }
        }
        Ok(removed)
    }

    /// Restarts or stops every container of the service (a job's kept executions ran once:
    /// a restart leaves them be).
    async fn each_owned(
        &self,
        service: &Service,
        log: &StepLog,
        act: Act,
    ) -> Result<(), EngineError> {
        let role = match act {
            Act::Restart => Some("service"),
            Act::Stop => None,
        };
        let owned = self.owned(service.id, role).await?;
        for c in &owned {
            let Some(id) = &c.id else { continue };
            let done = match act {
                Act::Restart => {
                    self.docker
                        .restart_container(id, None::<RestartContainerOptions>)
                        .await
                }
                Act::Stop => {
                    self.docker
                        .stop_container(id, None::<StopContainerOptions>)
                        .await
                }
            };
            done.map_err(|e| said(&format!("could not {} a container", act.verb()), e))?;
        }
        log.info(&format!("{}: {} container(s)", act.verb(), owned.len()));
        Ok(())
    }

    /// Waits for a started container to end, within `limit`; its last `lines` of output go to
    /// the log. A canceled one is removed; one past its limit is left to the caller.
    pub(crate) async fn run_to_end(
        &self,
        id: &str,
        limit: Duration,
        cancel: &Cancel,
        log: &StepLog,
        lines: usize,
    ) -> Result<Ended, bollard::errors::Error> {
        let mut waiting = self.docker.wait_container(id, None);
        let ended = tokio::select! {
            ended = waiting.next() => Some(ended),
            () = tokio::time::sleep(limit) => None,
            () = cancel.canceled() => {
                self.remove_all(&[id.to_string()]).await;
                return Ok(Ended::Canceled);
            }
        };
        for line in self.last_lines(id, lines).await {
            log.info(&line);
        }
        match ended {
            None => Ok(Ended::TimedOut),
            Some(Some(Ok(done))) => Ok(Ended::Exited(done.status_code)),
            // A non-zero exit comes back as an error carrying the code.
            Some(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => {
                Ok(Ended::Exited(code))
            }
            Some(Some(Err(e))) => Err(e),
            Some(None) => Ok(Ended::Exited(-1)),
        }
    }

    /// The image a job runs: its registry's, or the one built from its repository.
    fn job_image<'w>(
        &self,
        work: &StepWork<'w>,
        job: &JobSpec,
    ) -> Result<(String, ImageAccess<'w>), EngineError> {
        match plan::job_image(job, work.inputs) {
            Some(image) => Ok((image, ImageAccess::Named(work.inputs.registry.as_ref()))),
            None => Ok((self.image_built_for(work)?, ImageAccess::Host)),
        }
    }

    async fn run_job(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
        run: &JobCommand,
    ) -> Result<(), EngineError> {
        let log = work.log;
        let (image, _) = self.job_image(work, job)?;
        self.ensure_network(work.service).await?;
        let limit =
            Duration::from_secs(u64::try_from(job.max_duration_seconds.max(1)).unwrap_or(300));
        // The executions kept of the job's last run (failed ones, and the last that ended)
        // make way for this run's.
        let kept: Vec<String> = self
            .owned(work.service.id, Some("job"))
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect();
        self.remove_all(&kept).await;
        let mut last_failure = String::new();
        let mut failed: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        for attempt in 0..=job.max_nb_restart.max(0) {
            let plan = plan::job_execution(
                work.request,
                work.service,
                job,
                plan::Execution {
                    run,
                    image: &image,
                    attempt,
                },
                work.inputs,
                &self.publish_address,
            );
            let id = self.start(&plan).await?;
            log.info(&format!("job execution {} started", attempt + 1));
            let code = match self.run_to_end(&id, limit, work.cancel, log, 1000).await {
                Ok(Ended::Exited(code)) => code,
                Ok(Ended::Canceled) => return Err("canceled while the job ran".into()),
                Ok(Ended::TimedOut) => {
                    self.remove_all(std::slice::from_ref(&id)).await;
                    return Err(format!(
                        "the job ran past its max_duration_seconds ({} s) and was stopped",
                        limit.as_secs()
                    )
                    .into());
                }
                Err(e) => {
                    self.remove_all(std::slice::from_ref(&id)).await;
                    return Err(said("lost the job's execution", e));
                }
            };
            // An execution that ended is kept, with its output, until the job runs again (or
            // a failed one is cleaned): its state and output stay readable.
            let lines = self.last_lines(&id, LAST_LINES).await;
            if code == 0 {
                log.info("the job succeeded (exit code 0)");
                return Ok(());
            }
            last_failure = format!("the job {}; {}", exited(code), wrote(&lines));
            failed.push_back(id);
            if failed.len() > FAILED_ATTEMPTS_KEPT {
                let oldest: Vec<String> = failed.pop_front().into_iter().collect();
                self.remove_all(&oldest).await;
            }
            log.warn(&format!(
                "job execution {} exited with code {code}",
                attempt + 1
            ));
        }
        Err(last_failure.into())
    }
}

/// How many failed executions of one run of a job are kept (the latest, with their output):
/// a job that fails at every one of many restarts must not leave a container per attempt.
pub const FAILED_ATTEMPTS_KEPT: usize = 3;

impl DockerEngine {
    async fn carry_out(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let (service, log) = (work.service, work.log);
        let action = work.request.action;
        match (&service.spec, action, work.step) {
            (spec, A::Deploy | A::Redeploy, StepName::Build) => match spec.build_source() {
                Some(source) => self.build(work, source).await,
                None => Ok(()),
            },
            (
                ServiceSpec::Container(_) | ServiceSpec::Application(_),
                A::Deploy | A::Redeploy,
                StepName::RouterDeployment,
            ) => self.switch_routes(work).await,
            (
                ServiceSpec::Container(_) | ServiceSpec::Application(_) | ServiceSpec::Database(_),
                A::Deploy | A::Redeploy,
                _,
            ) => self.deploy_service(work).await,
            (ServiceSpec::Terraform(tf), A::Deploy | A::Redeploy, StepName::Executing) => {
                let sub_action = ServiceSubAction::of(
                    Some(ServiceKind::Terraform),
                    action,
                    work.request.snapshot.terraform_action,
                );
                let run = Run::of(sub_action).ok_or("no terraform action for this request")?;
                self.run_terraform(work, tf, run).await
            }
            (ServiceSpec::Terraform(_), A::Deploy | A::Redeploy, _) => Ok(()),
            (ServiceSpec::Terraform(tf), A::Delete | A::Uninstall, _) => {
                if service.deployment_status != DeploymentStatus::NeverDeployed {
                    self.run_terraform(work, tf, Run::Destroy).await?;
                }
                if action == A::Delete && !self.keep_volumes {
                    self.remove_named_volume(&plan::state_volume_name(service.id))
                        .await?;
                }
                Ok(())
            }
            (ServiceSpec::Terraform(_), A::Stop | A::Restart | A::Diff, _) => Ok(()),
            (ServiceSpec::Job(job), A::Deploy | A::Redeploy, StepName::Executing) => {
                let scheduled = work.request.snapshot.scheduled_run;
                match plan::job_command(job, action, scheduled) {
                    Some(run) => self.run_job(work, job, &run).await,
                    None if job.schedule.cronjob.is_some() => {
                        log.info("the cron job runs at its schedule: its deployment keeps it");
                        Ok(())
                    }
                    None => {
                        log.info("the job has no on_start command: nothing runs at deployment");
                        Ok(())
                    }
                }
            }
            (ServiceSpec::Job(job), A::Deploy | A::Redeploy, _) => {
                let (image, access) = self.job_image(work, job)?;
                self.ensure_image(&image, access, log, work.cancel).await
            }
            // A lifecycle job runs its on_stop, or its on_delete before it goes.
            (ServiceSpec::Job(job), A::Stop | A::Delete | A::Uninstall, _) => {
                let ran = match plan::job_command(job, action, false) {
                    Some(run) => {
                        let (image, access) = self.job_image(work, job)?;
                        self.ensure_image(&image, access, log, work.cancel).await?;
                        self.run_job(work, job, &run).await
                    }
                    None => Ok(()),
                };
                if action == A::Stop {
                    self.each_owned(service, log, Act::Stop).await?;
                } else {
                    let removed = self.remove_owned(service.id).await?;
                    log.info(&format!("removed {removed} container(s)"));
                }
                ran
            }
            (
                ServiceSpec::Container(_)
                | ServiceSpec::Application(_)
                | ServiceSpec::Job(_)
                | ServiceSpec::Database(_),
                A::Restart,
                _,
            ) => {
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
            (_, A::Stop, _) => self.each_owned(service, log, Act::Stop).await,
            (_, A::Delete | A::Uninstall, _) => {
                let removed = self.remove_owned(service.id).await?;
                log.info(&format!("removed {removed} container(s)"));
                if action == A::Delete {
                    self.remove_volume(service, log).await?;
                }
                Ok(())
            }
            (
                ServiceSpec::Container(_)
                | ServiceSpec::Application(_)
                | ServiceSpec::Job(_)
                | ServiceSpec::Database(_),
                A::Diff,
                _,
            ) => Ok(()),
            (spec, _, _) => Err(plan::refused(spec).into()),
        }
    }
}

#[async_trait]
impl Engine for DockerEngine {
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
        _host: &Host,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        match action {
            // The hosts' engine ([`crate::Hosts`]) has just seen the daemon answer: no ping.
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

    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
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
        let volumes = self
            .docker
            .list_volumes(Some(bollard::query_parameters::ListVolumesOptions {
                filters: Some(HashMap::from([(
                    "label".to_string(),
                    self.scoped(vec![LABEL_SERVICE.to_string()]),
                )])),
            }))
            .await
            .map_err(|e| said("could not list Capstan's volumes", e))?
            .volumes
            .unwrap_or_default();
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
        let labelled = found
            .iter()
            .filter_map(|c| c.labels.as_ref())
            .chain(volumes.iter().map(|v| &v.labels))
            .chain(images.iter().map(|i| &i.labels));
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

    /// On the host, or in its registry (the daemon asks it, once the outbound policy permits).
    async fn image_available(
        &self,
        _host: &Host,
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
        if self.host_images.shares(&image) && self.docker.inspect_image(&image).await.is_ok() {
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

    async fn backup_database(
        &self,
        _host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        self.take_backup(database, inputs, file).await
    }

    async fn restore_database(
        &self,
        _host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        self.load_backup(database, inputs, file).await
    }

    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        self.drop_backup(file)
    }

    /// A deleted database's dumps are its data too: kept with its volume.
    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        if self.keep_volumes {
            return Ok(Vec::new());
        }
        self.dumps()
    }

    async fn terraform_state(
        &self,
        _host: &Host,
        service: &Service,
    ) -> Result<Option<String>, EngineError> {
        match &service.spec {
            ServiceSpec::Terraform(spec) => self.read_terraform_state(service, spec).await,
            _ => Ok(None),
        }
    }

    /// Its containers, and its volumes: a database's data, a terraform state (unless the
    /// settings keep them).
    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        self.remove_owned(service).await?;
        if !self.keep_volumes {
            self.remove_volume_of(service).await?;
            self.remove_named_volume(&plan::state_volume_name(service))
                .await?;
        }
        self.remove_built_images(service).await
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
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
        _host: &Host,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
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

    async fn report(&self, _host: &Host, service: &Service) -> Option<RunningState> {
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
                self.installation.is_empty()
                    || labels.get(plan::LABEL_INSTALLATION) == Some(&self.installation)
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
        tokio::spawn(crate::liveness::watch(
            self.docker.clone(),
            self.reach(),
            self.scope(),
            reports.clone(),
        ));
        tokio::spawn(crate::observe::watch(
            self.docker.clone(),
            self.probe_address().to_string(),
            self.scope(),
            reports,
        ));
        let stream = futures_util::stream::unfold(received, |mut received| async move {
            received.recv().await.map(|state| (state, received))
        });
        Some(stream.boxed())
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        self.remove_failed_executions(job).await
    }

    fn output(&self) -> Option<futures_util::stream::BoxStream<'static, OutputLine>> {
        let (lines, received) = tokio::sync::mpsc::channel(1024);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_signal() {
        assert!(exited(143).contains("its Docker daemon stopping or restarting"));
        assert!(exited(137).contains("SIGKILL"));
        assert_eq!(exited(3), "exited with code 3");
        assert_eq!(wrote(&[]), "it wrote nothing");
    }
}
