//! The Docker engine on one daemon: its client and the settings its every module works with.

use crate::connect::Reach;
use crate::db_recipe::DatabaseImages;
use crate::errors::said;
use crate::images::HostImages;
use crate::plan;
use crate::swarm::node_daemons::NodeDaemon;
use bollard::Docker;
use domain::engine::EngineError;
use domain::git::Checkouts;
use domain::ids::DeploymentRequestId;
use domain::outbound_policy::OutboundPolicy;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The image terraform services run in, unless the settings say: OpenTofu's.
pub const DEFAULT_TERRAFORM_IMAGE: &str = "ghcr.io/opentofu/opentofu:{version}";

/// How many images built from git a service keeps, unless the settings say.
pub const DEFAULT_IMAGES_KEPT: usize = 5;

pub struct DockerEngine {
    pub(crate) docker: Docker,
    pub(crate) settings: Settings,
    /// The image each running deployment's build step made or found, for its deploy step.
    built: Mutex<HashMap<DeploymentRequestId, String>>,
    /// What reaches the daemon (key files, an SSH tunnel), gone with the engine.
    connection: Mutex<Reach>,
    /// On a Swarm manager: the own daemons of the nodes its cluster names.
    pub(crate) nodes: Vec<NodeDaemon>,
}

/// How the engine works on its daemon, the same on every host.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) publish_address: String,
    /// What image pulls may reach: the daemon pulls, but only from a registry whose
    /// addresses the outbound policy permits.
    pub(crate) policy: OutboundPolicy,
    /// The repositories every organization may run from the host without a pull.
    pub(crate) host_images: HostImages,
    /// Whether the daemon runs on this host (its socket, or a loopback address).
    pub(crate) local: bool,
    /// What fetches the repositories services are built from.
    pub(crate) checkouts: Option<Arc<dyn Checkouts>>,
    /// How many images built from git each service keeps (the newest).
    pub(crate) images_kept: usize,
    /// The image of each database type.
    pub(crate) database_images: DatabaseImages,
    /// Whether a deleted database's volume is kept (its data outlives it).
    pub(crate) keep_volumes: bool,
    /// Where databases' backups are kept.
    pub(crate) backup_dir: std::path::PathBuf,
    /// The image terraform services run in, `{version}` standing for their version.
    pub(crate) terraform_image: String,
    /// How long each turn of the router's switch to new replicas waits; none: no router.
    pub(crate) switch_settle: Option<Duration>,
    /// The installation whose objects these are (see [`plan::LABEL_INSTALLATION`]); empty:
    /// none told (every Capstan object of the daemon is its own).
    pub(crate) installation: String,
    /// The daemon manages a Swarm: services run as Swarm services over its nodes.
    pub(crate) swarm: bool,
    /// On a Swarm: the registry images built from git are pushed to, for the nodes to pull.
    pub(crate) push_registry: Option<String>,
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
            settings: Settings {
                publish_address,
                policy: OutboundPolicy::default(),
                host_images: HostImages::default(),
                local,
                checkouts: None,
                images_kept: DEFAULT_IMAGES_KEPT,
                database_images: DatabaseImages::default(),
                keep_volumes: false,
                backup_dir: std::path::PathBuf::from("backups"),
                terraform_image: DEFAULT_TERRAFORM_IMAGE.to_string(),
                switch_settle: None,
                installation: String::new(),
                swarm: false,
                push_registry: None,
            },
            built: Mutex::default(),
            connection: Mutex::default(),
            nodes: Vec::new(),
        }
    }

    /// The same settings on another daemon: `docker` (reached through `reach`), its
    /// workloads' ports published on `publish_address`; `on_this_machine`: the daemon runs
    /// where Capstan does.
    pub(crate) fn on(
        &self,
        docker: Docker,
        reach: Reach,
        publish_address: String,
        on_this_machine: bool,
    ) -> Self {
        Self {
            docker,
            settings: Settings {
                publish_address,
                local: on_this_machine,
                swarm: false,
                push_registry: None,
                ..self.settings.clone()
            },
            built: Mutex::default(),
            connection: Mutex::new(reach),
            nodes: Vec::new(),
        }
    }

    /// Runs services as Swarm services when the daemon manages a Swarm (asked now), with the
    /// own daemons of the nodes `host` names.
    pub(crate) async fn on_its_swarm(mut self, host: &domain::model::DockerHost) -> Self {
        self.settings.swarm = self.manages_swarm().await;
        if self.settings.swarm {
            self.nodes = crate::swarm::node_daemons::reach_nodes(host).await;
            self.settings.push_registry = host.image_registry.clone();
        }
        self
    }

    /// Marks what it makes as `installation`'s, and acts only on what is marked so: several
    /// installations may share a daemon.
    pub fn with_installation(mut self, installation: &str) -> Self {
        self.settings.installation = installation.to_string();
        self
    }

    /// The label filters that narrow a listing to this installation's objects.
    pub(crate) fn scope(&self) -> Vec<String> {
        if self.settings.installation.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{}={}",
            plan::LABEL_INSTALLATION,
            self.settings.installation
        )]
    }

    /// `filters` narrowed to this installation's objects.
    pub(crate) fn scoped(&self, mut filters: Vec<String>) -> Vec<String> {
        filters.extend(self.scope());
        filters
    }

    /// `labels` with this installation's mark.
    pub(crate) fn marked(&self, mut labels: HashMap<String, String>) -> HashMap<String, String> {
        if !self.settings.installation.is_empty() {
            labels.insert(
                plan::LABEL_INSTALLATION.into(),
                self.settings.installation.clone(),
            );
        }
        labels
    }

    /// Where its workloads' ports are published.
    pub(crate) fn publish_address(&self) -> &str {
        &self.settings.publish_address
    }

    /// Runs databases from `images`; a deleted database's volume stays when `keep_volumes`;
    /// backups are kept in `backup_dir`.
    pub fn with_databases(
        mut self,
        images: DatabaseImages,
        keep_volumes: bool,
        backup_dir: std::path::PathBuf,
    ) -> Self {
        self.settings.database_images = images;
        self.settings.keep_volumes = keep_volumes;
        self.settings.backup_dir = backup_dir;
        self
    }

    /// Runs terraform services in `image` (`{version}` standing for their version).
    pub fn with_terraform(mut self, image: String) -> Self {
        self.settings.terraform_image = image;
        self
    }

    /// Builds services from git, fetched by `checkouts`, keeping each service's newest
    /// `images_kept` images.
    pub fn with_builds(mut self, checkouts: Arc<dyn Checkouts>, images_kept: usize) -> Self {
        self.settings.checkouts = Some(checkouts);
        self.settings.images_kept = images_kept.max(1);
        self
    }

    pub(crate) fn built_images(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<DeploymentRequestId, String>> {
        self.built.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pulls only from registries `policy` permits (the default permits public addresses).
    pub fn with_policy(mut self, policy: OutboundPolicy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// Lets every organization run the images of the repositories `shared` names from the
    /// host, without a pull (every other image an organization names is pulled each time).
    pub fn with_host_images(mut self, shared: HostImages) -> Self {
        self.settings.host_images = shared;
        self
    }

    /// Whether what reaches the daemon still holds (an SSH tunnel ends with its connection).
    pub(crate) fn holds(&self) -> bool {
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        connection.holds()
    }

    /// The daemon's version and API version, and what it is in its Swarm when it is in one,
    /// for the start-up log and a cluster's check.
    pub async fn describe(&self) -> String {
        let daemon = match self.docker.version().await {
            Ok(v) => format!(
                "Docker {} (API {})",
                v.version.unwrap_or_default(),
                self.docker.client_version()
            ),
            Err(e) => format!("Docker (version unknown: {e})"),
        };
        match self.swarm_role().await {
            Some(role) => format!("{daemon}, {role}"),
            None => daemon,
        }
    }
}
