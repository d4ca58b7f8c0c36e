//! Several Docker hosts behind the engine port: each cluster's environments run on the daemon
//! it names (the engine's own when it names none). Each host is a [`DockerEngine`] of its own,
//! made with the local one's settings when first needed and kept while its cluster names it.
//! What runs on every host that answers is reported as one stream; a host that stops
//! answering is left out of it (and its steps fail naming it) until it answers again.

use crate::daemon::{daemon_of, Daemon};
use crate::engine::DockerEngine;
use crate::errors::failure_words;
use crate::tunnel::{Destination, Tunnel};
use async_trait::async_trait;
use bollard::Docker;
use domain::engine::EngineError;
use domain::engine::{Cut, Engine, Kept, ReplicaSet, StepWork};
use domain::ids::{
    BackupId, ClusterId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId,
};
use domain::model::{
    Cluster, ClusterAction, DaemonIdentity, DockerEndpoint, Host, OutputLine, RegistryAccess,
    RunningState, Service, WorkloadInputs,
};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How long a host has to answer a ping.
const ANSWER: Duration = Duration::from_secs(5);
/// How often every host is pinged, so one that stops or starts answering is noticed.
const LOOK: Duration = Duration::from_secs(5);
/// The oldest Docker API a host may speak (Docker 20.10).
const OLDEST_API: (u32, u32) = (1, 41);
/// A request's timeout on a host, in seconds (a build or a pull can take minutes).
const REQUEST_TIMEOUT: u64 = 600;
/// How long one host may take over its part of a call asked of every host (a listing, a
/// removal): one that stopped answering since it was last pinged holds up no other.
const EACH_HOST: Duration = Duration::from_secs(30);

/// The engine over every host.
pub struct Hosts {
    local: Arc<DockerEngine>,
    attached: Mutex<HashMap<ClusterId, Attached>>,
    /// Bumped whenever the hosts that answer change: the merged reports end, and the caller
    /// asks for them again, over the hosts that answer then.
    changed: watch::Sender<u64>,
    /// [`EACH_HOST`], shorter in tests.
    each_host: Duration,
    /// The Docker ID of the daemon this installation itself uses, once asked.
    own_id: tokio::sync::OnceCell<Daemon>,
}

/// An engine that answered when last looked at: what names its host, and the cluster that
/// names it (none: the local daemon).
struct Answering {
    name: String,
    cluster: Option<ClusterId>,
    engine: Arc<DockerEngine>,
}

struct Attached {
    host: Host,
    engine: Arc<DockerEngine>,
    answers: bool,
    /// What reaches it (key files, an SSH tunnel), gone with it.
    reach: Reach,
}

/// What a host is reached through, besides its client: dropped, the tunnel ends (first), then
/// the files go.
#[derive(Default)]
struct Reach {
    tunnel: Option<Tunnel>,
    _files: Option<Material>,
}

impl Reach {
    /// Whether it still reaches the host (an SSH tunnel ends with its connection).
    fn holds(&mut self) -> bool {
        self.tunnel.as_mut().is_none_or(Tunnel::is_open)
    }
}

impl Hosts {
    /// Runs on `local` unless a cluster names another host; looks at every host it knows
    /// (must be called within a Tokio runtime).
    pub fn new(local: DockerEngine) -> Arc<Self> {
        Self::limited(local, EACH_HOST)
    }

    fn limited(local: DockerEngine, each_host: Duration) -> Arc<Self> {
        let (changed, _) = watch::channel(0);
        let hosts = Arc::new(Self {
            local: Arc::new(local),
            attached: Mutex::new(HashMap::new()),
            changed,
            each_host,
            own_id: tokio::sync::OnceCell::new(),
        });
        tokio::spawn(look_at_hosts(Arc::downgrade(&hosts)));
        hosts
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<ClusterId, Attached>> {
        self.attached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The engine of `host`, connected the first time (or again when its cluster's endpoint
    /// changed); why not, naming the host, when it does not answer.
    async fn engine_for(&self, host: &Host) -> Result<Arc<DockerEngine>, EngineError> {
        if host.endpoint == DockerEndpoint::Local {
            return Ok(self.local.clone());
        }
        let known = self
            .held()
            .get_mut(&host.cluster_id)
            .filter(|a| a.host == *host)
            .and_then(|a| a.reach.holds().then(|| a.engine.clone()));
        if let Some(engine) = known {
            return Ok(engine);
        }
        let (docker, reach) = connect(host).await?;
        let docker = answering(docker, host).await?;
        let found = self.identity(&docker, host).await?;
        if found.installations_own {
            return Err(format!(
                "{} reaches the Docker daemon this installation itself uses",
                host.describe()
            )
            .into());
        }
        match &host.daemon_id {
            None => {
                return Err(format!(
                    "the cluster on {} is not deployed: deploying it checks whose daemon \
                     answers there",
                    host.describe()
                )
                .into())
            }
            Some(deployed) if *deployed != found.id => {
                return Err(format!(
                    "another Docker daemon answers at {} than the one its cluster was \
                     deployed on: deploy the cluster again",
                    host.describe()
                )
                .into())
            }
            Some(_) => {}
        }
        let publish = host
            .publish_address
            .clone()
            .or_else(|| host.endpoint.remote_host().map(str::to_string))
            .unwrap_or_else(|| self.local.publish_address().to_string());
        let on_this_machine = match &host.endpoint {
            DockerEndpoint::Local | DockerEndpoint::Unix { .. } => true,
            other => other.remote_host().is_some_and(is_loopback),
        };
        let engine = Arc::new(self.local.on(docker, publish, on_this_machine));
        let mut held = self.held();
        // Another call connected meanwhile: its engine stays (a caller may be using it, and
        // its tunnel and files with it); this one goes.
        if let Some(a) = held.get_mut(&host.cluster_id) {
            if a.host == *host && a.reach.holds() {
                return Ok(a.engine.clone());
            }
        }
        held.insert(
            host.cluster_id,
            Attached {
                host: host.clone(),
                engine: engine.clone(),
                answers: true,
                reach,
            },
        );
        drop(held);
        self.changed.send_modify(|n| *n += 1);
        Ok(engine)
    }

    /// Who answers through `docker` (the daemon's own ID), and whether it is the daemon this
    /// installation uses itself.
    async fn identity(&self, docker: &Docker, host: &Host) -> Result<DaemonIdentity, EngineError> {
        let id = daemon_id(docker)
            .await
            .map_err(|why| why.context(&does_not_answer(host)))?;
        let own = self
            .own_id
            .get_or_try_init(|| daemon_id(&self.local.docker))
            .await
            .map_err(|why| why.context("the installation's own Docker daemon"))?;
        Ok(DaemonIdentity {
            installations_own: own.same_place(&id),
            id: id.claim(),
        })
    }

    /// The engine of `host` if it answers now; why not, naming it, otherwise.
    async fn answering_engine(&self, host: &Host) -> Result<Arc<DockerEngine>, EngineError> {
        let engine = self.engine_for(host).await?;
        answer_of(host, engine.docker.ping()).await?;
        Ok(engine)
    }

    /// Every host's engine that answered when last looked at, the local one first, with
    /// what names its host.
    fn answering(&self) -> Vec<Answering> {
        let mut all = vec![Answering {
            name: "the local Docker host".to_string(),
            cluster: None,
            engine: self.local.clone(),
        }];
        all.extend(
            self.held()
                .values()
                .filter(|a| a.answers)
                .map(|a| Answering {
                    name: format!("the Docker host {}", a.host.describe()),
                    cluster: Some(a.host.cluster_id),
                    engine: a.engine.clone(),
                }),
        );
        all
    }

    /// `call` on every answering host at once, each given [`EACH_HOST`].
    async fn on_each<T, F>(
        &self,
        call: impl Fn(Arc<DockerEngine>) -> F,
    ) -> Vec<Result<T, EngineError>>
    where
        F: std::future::Future<Output = Result<T, EngineError>>,
    {
        let limit = self.each_host;
        let calls = self.answering().into_iter().map(|answering| {
            let Answering { name, engine, .. } = answering;
            let work = call(engine);
            async move {
                tokio::time::timeout(limit, work).await.unwrap_or_else(|_| {
                    Err(EngineError::transient(format!(
                        "{name} did not answer within {}s",
                        limit.as_secs_f32()
                    )))
                })
            }
        });
        futures_util::future::join_all(calls).await
    }

    /// What `list` finds on every answering host, sorted, once each; a host that cannot
    /// answer is logged (naming `what` it was asked for) and left out.
    async fn gathered<T: Ord, F>(&self, what: &str, list: impl Fn(Arc<DockerEngine>) -> F) -> Vec<T>
    where
        F: std::future::Future<Output = Result<Vec<T>, EngineError>>,
    {
        let mut all = Vec::new();
        for found in self.on_each(list).await {
            match found {
                Ok(found) => all.extend(found),
                Err(why) => tracing::warn!(error = %why, "could not list a Docker host's {what}"),
            }
        }
        all.sort();
        all.dedup();
        all
    }

    /// Merges each answering host's stream (from `of`) until the hosts that answer change or
    /// one stream ends (its host stopped answering): the caller then asks again.
    fn merged<T: Send + 'static>(
        &self,
        of: impl Fn(Option<ClusterId>, &DockerEngine) -> Option<BoxStream<'static, T>>,
    ) -> Option<BoxStream<'static, T>> {
        let streams: Vec<BoxStream<'static, Option<T>>> = self
            .answering()
            .iter()
            .filter_map(|a| of(a.cluster, &a.engine))
            .map(|s| {
                s.map(Some)
                    .chain(futures_util::stream::once(async { None }))
                    .boxed()
            })
            .collect();
        if streams.is_empty() {
            return None;
        }
        let mut changed = self.changed.subscribe();
        changed.mark_unchanged();
        let until_changed = async move {
            let _ = changed.changed().await;
        };
        let merged = futures_util::stream::select_all(streams)
            .take_while(|item| futures_util::future::ready(item.is_some()))
            .filter_map(futures_util::future::ready)
            .take_until(until_changed);
        Some(merged.boxed())
    }
}

/// Who the daemon is, as `docker info` tells it (see [`crate::daemon`]).
async fn daemon_id(docker: &Docker) -> Result<Daemon, EngineError> {
    let info = tokio::time::timeout(ANSWER, docker.info())
        .await
        .map_err(|_| format!("it did not tell who it is within {}s", ANSWER.as_secs()))?
        .map_err(|e| failure_words(&e))?;
    daemon_of(info)
}

fn does_not_answer(host: &Host) -> String {
    format!("the Docker host {} does not answer", host.describe())
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Pings every attached host in turn, marking whether it answers; a change is told to the
/// merged streams. Ends with the engine.
async fn look_at_hosts(hosts: std::sync::Weak<Hosts>) {
    loop {
        tokio::time::sleep(LOOK).await;
        let Some(hosts) = hosts.upgrade() else {
            return;
        };
        let attached: Vec<(ClusterId, Docker, bool)> = hosts
            .held()
            .iter()
            .map(|(id, a)| (*id, a.engine.docker.clone(), a.answers))
            .collect();
        let mut flipped = false;
        for (id, docker, answered) in attached {
            let answers = matches!(tokio::time::timeout(ANSWER, docker.ping()).await, Ok(Ok(_)));
            if answers != answered {
                flipped = true;
                if let Some(a) = hosts.held().get_mut(&id) {
                    a.answers = answers;
                    tracing::warn!(cluster = %id, host = %a.host.describe(), answers, "a Docker host's answer changed");
                }
            }
        }
        if flipped {
            hosts.changed.send_modify(|n| *n += 1);
        }
    }
}

/// The files of what reaches a host (a TLS client's key and certificate; an SSH key and the
/// tunnel's socket), in a folder only this user reads; removed when dropped.
struct Material(std::path::PathBuf);

impl Drop for Material {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Material {
    fn folder() -> Result<Self, EngineError> {
        let dir = std::env::temp_dir().join(format!("capstan-host-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        }
        Ok(Self(dir))
    }

    fn write(&self, name: &str, contents: &str) -> Result<std::path::PathBuf, EngineError> {
        let path = self.0.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(&path)
            .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        std::io::Write::write_all(&mut file, contents.as_bytes())
            .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        Ok(path)
    }
}

/// Where the host key a cluster's SSH host showed first is kept (owner-only, one file per
/// cluster, for as long as the machine keeps its temporary files): met again, the host must
/// show the same.
fn first_met_keys(host: &Host) -> Result<std::path::PathBuf, EngineError> {
    let dir = std::env::temp_dir().join("capstan-ssh-known-hosts");
    let failed = |e: std::io::Error| format!("cannot keep the SSH host keys met: {e}");
    std::fs::create_dir_all(&dir).map_err(failed)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    Ok(dir.join(format!("cluster-{}", host.cluster_id.0)))
}

/// A client of `host`'s daemon (not yet asked anything), and what it reaches it through.
async fn connect(host: &Host) -> Result<(Docker, Reach), EngineError> {
    let version = bollard::API_DEFAULT_VERSION;
    let failed = |e: bollard::errors::Error| {
        failure_words(&e).context(&format!("cannot reach {}", host.describe()))
    };
    match &host.endpoint {
        DockerEndpoint::Local => Docker::connect_with_defaults()
            .map(|d| (d, Reach::default()))
            .map_err(failed),
        DockerEndpoint::Unix { socket } => {
            Docker::connect_with_unix(socket, REQUEST_TIMEOUT, version)
                .map(|d| (d, Reach::default()))
                .map_err(failed)
        }
        DockerEndpoint::Tcp { address } => match &host.access.tls {
            None => Docker::connect_with_http(address, REQUEST_TIMEOUT, version)
                .map(|d| (d, Reach::default()))
                .map_err(failed),
            // bollard reads the client's key and certificate at each handshake: they stay
            // while the host is attached.
            Some(tls) => {
                let files = Material::folder()?;
                let key = files.write("key.pem", tls.key.expose())?;
                let cert = files.write("cert.pem", &tls.certificate)?;
                let ca = files.write("ca.pem", &tls.ca)?;
                let docker =
                    Docker::connect_with_ssl(address, &key, &cert, &ca, REQUEST_TIMEOUT, version)
                        .map_err(failed)?;
                let reach = Reach {
                    tunnel: None,
                    _files: Some(files),
                };
                Ok((docker, reach))
            }
        },
        DockerEndpoint::Ssh {
            user,
            host: name,
            port,
            socket,
        } => {
            let files = Material::folder()?;
            let key = match &host.access.ssh_private_key {
                // OpenSSH refuses a key file that does not end its last line.
                Some(key) => Some(files.write("id", &format!("{}\n", key.expose().trim_end()))?),
                None => None,
            };
            let (known_hosts, accept_new) = match &host.access.ssh_host_key {
                Some(pinned) => {
                    let pattern = match port {
                        Some(p) if *p != 22 => format!("[{name}]:{p}"),
                        _ => name.clone(),
                    };
                    let line = format!("{pattern} {}\n", pinned.trim());
                    (files.write("known_hosts", &line)?, false)
                }
                None => (first_met_keys(host)?, true),
            };
            let destination = Destination {
                user: user.as_deref(),
                host: name,
                port: *port,
                socket,
                key: key.as_deref(),
                known_hosts: &known_hosts,
                accept_new,
            };
            let tunnel = Tunnel::open(&files.0, &destination)
                .await
                .map_err(|why| why.context(&does_not_answer(host)))?;
            let docker = Docker::connect_with_unix(
                &tunnel.socket.to_string_lossy(),
                REQUEST_TIMEOUT,
                version,
            )
            .map_err(failed)?;
            let reach = Reach {
                tunnel: Some(tunnel),
                _files: Some(files),
            };
            Ok((docker, reach))
        }
    }
}

/// What `host` answers to `call` within [`ANSWER`]; why not, naming the host: a call not
/// answered in time may be answered if made again.
async fn answer_of<T>(
    host: &Host,
    call: impl std::future::Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, EngineError> {
    match tokio::time::timeout(ANSWER, call).await {
        Ok(answer) => answer.map_err(|e| failure_words(&e).context(&does_not_answer(host))),
        Err(_) => Err(EngineError::transient(format!(
            "{} within {}s",
            does_not_answer(host),
            ANSWER.as_secs()
        ))),
    }
}

/// `docker`, once it answers and speaks an API new enough; its version agreed.
async fn answering(docker: Docker, host: &Host) -> Result<Docker, EngineError> {
    let docker = answer_of(host, docker.negotiate_version()).await?;
    let version = docker.client_version();
    if (version.major_version as u32, version.minor_version as u32) < OLDEST_API {
        return Err(format!(
            "the Docker host {} speaks API {}.{}: Capstan needs {}.{} or newer (Docker 20.10)",
            host.describe(),
            version.major_version,
            version.minor_version,
            OLDEST_API.0,
            OLDEST_API.1
        )
        .into());
    }
    Ok(docker)
}

#[async_trait]
impl Engine for Hosts {
    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        let engine = self.answering_engine(work.host).await?;
        engine.run_step(work).await
    }

    /// Deploying reaches the host, checks what it runs (`answering`) and readies it for the
    /// cluster's environments; stopping leaves it as it is (its environments are stopped one
    /// by one).
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        host: &Host,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        let engine = self.answering_engine(host).await?;
        engine
            .run_cluster(action, cluster, host, environments)
            .await
    }

    async fn identify(&self, host: &Host) -> Option<Result<DaemonIdentity, EngineError>> {
        if host.endpoint == DockerEndpoint::Local {
            return None;
        }
        Some(
            async {
                let (docker, _reach) = connect(host).await?;
                let docker = answering(docker, host).await?;
                self.identity(&docker, host).await
            }
            .await,
        )
    }

    async fn reach(&self, host: &Host) -> Option<Result<String, EngineError>> {
        Some(match self.answering_engine(host).await {
            Ok(engine) => Ok(engine.describe().await),
            Err(why) => Err(why),
        })
    }

    /// From the pings every [`LOOK`]: the engine's own daemon is not among them.
    fn answered(&self, host: &Host) -> Option<bool> {
        self.held()
            .get(&host.cluster_id)
            .filter(|a| a.host == *host)
            .map(|a| a.answers)
    }

    async fn watch_hosts(&self, hosts: Vec<Host>) {
        let named: HashMap<ClusterId, &Host> = hosts.iter().map(|h| (h.cluster_id, h)).collect();
        let before = self.held().len();
        self.held()
            .retain(|id, a| named.get(id).is_some_and(|h| **h == a.host));
        let changed = self.held().len() != before;
        // Attached ones are kept as they are (an SSH tunnel that ended is opened again); a
        // host attached is told to the streams as it is.
        for host in hosts.iter().filter(|h| h.endpoint != DockerEndpoint::Local) {
            if let Err(why) = self.engine_for(host).await {
                tracing::warn!(cluster = %host.cluster_id, error = %why, "a cluster's Docker host does not answer");
            }
        }
        if changed {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
    }

    /// Each report names the cluster whose host made it (none: the local daemon), for the
    /// domain to keep only those of that cluster's own services.
    fn observe(&self) -> Option<BoxStream<'static, RunningState>> {
        self.merged(|cluster, engine| {
            let reports = engine.observe()?;
            Some(
                reports
                    .map(move |mut report| {
                        report.reported_by = cluster;
                        report
                    })
                    .boxed(),
            )
        })
    }

    fn output(&self) -> Option<BoxStream<'static, OutputLine>> {
        self.merged(|_, engine| engine.output())
    }

    /// What every answering host runs; one that cannot be asked now is left out (what it
    /// runs is compared the next time).
    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        Ok(self
            .gathered("workloads", |e| async move { e.workloads().await })
            .await)
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        Ok(self
            .gathered("replicas", |e| async move { e.replica_sets().await })
            .await)
    }

    async fn settle_cut(
        &self,
        host: &Host,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        self.engine_for(host)
            .await?
            .settle_cut(host, service, request, cut)
            .await
    }

    async fn report(&self, host: &Host, service: &Service) -> Option<RunningState> {
        let engine = self.engine_for(host).await.ok()?;
        let mut report = engine.report(host, service).await?;
        report.reported_by = (host.endpoint != DockerEndpoint::Local).then_some(host.cluster_id);
        Some(report)
    }

    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        Ok(self
            .gathered("networks", |e| async move { e.environments().await })
            .await)
    }

    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        for done in self
            .on_each(|e| async move { e.remove_environment(environment).await })
            .await
        {
            done?;
        }
        Ok(())
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for found in self
            .on_each(|e| async move { e.clean_failed_jobs(job).await })
            .await
        {
            removed.extend(found?);
        }
        Ok(removed)
    }

    async fn image_available(
        &self,
        host: &Host,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, EngineError> {
        let engine = self.answering_engine(host).await?;
        engine.image_available(host, registry, name, tag).await
    }

    async fn backup_database(
        &self,
        host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        let engine = self.answering_engine(host).await?;
        engine.backup_database(host, database, inputs, file).await
    }

    async fn restore_database(
        &self,
        host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        let engine = self.answering_engine(host).await?;
        engine.restore_database(host, database, inputs, file).await
    }

    /// Backups are kept on this machine, whichever host the database runs on.
    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        self.local.remove_backup(file).await
    }

    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        self.local.held_backups().await
    }

    async fn terraform_state(
        &self,
        host: &Host,
        service: &Service,
    ) -> Result<Option<String>, EngineError> {
        let engine = self.answering_engine(host).await?;
        engine.terraform_state(host, service).await
    }

    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        self.on_each(|e| async move { e.remove_workloads(service).await })
            .await
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_host_that_stops_answering_mid_call_holds_up_nothing() {
        // Accepts connections and never answers: a daemon frozen since its last ping.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("tcp://{}", silent.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((connection, _)) = silent.accept().await {
                held.push(connection);
            }
        });
        let docker =
            Docker::connect_with_http(&address, REQUEST_TIMEOUT, bollard::API_DEFAULT_VERSION)
                .unwrap();
        let hosts = Hosts::limited(
            DockerEngine::with_defaults(docker, "127.0.0.1".to_string(), true),
            Duration::from_millis(200),
        );
        let removal = hosts.remove_workloads(ServiceId::generate()).await;
        assert_eq!(
            removal,
            Err(EngineError::transient(
                "the local Docker host did not answer within 0.2s"
            ))
        );
        assert_eq!(
            hosts.workloads().await,
            Ok(Vec::new()),
            "a host that cannot be listed now is left out of the listing"
        );
    }
}
