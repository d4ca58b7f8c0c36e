//! Several Docker hosts behind the engine port: each cluster's environments run on the daemon
//! it names (the engine's own when it names none). Each host is a [`DockerEngine`] of its own,
//! made with the local one's settings when first needed and kept while its cluster names it.
//! What runs on every host that answers is reported as one stream; a host that stops
//! answering is left out of it (and its steps fail naming it) until it answers again.

use crate::connect::{
    answer_of, answering, connect, daemon_id, does_not_answer, is_loopback, Reach, ANSWER,
};
use crate::daemon::Daemon;
use crate::engine::DockerEngine;
use async_trait::async_trait;
use bollard::Docker;
use domain::engine::EngineError;
use domain::engine::{
    Cut, DatabaseBackups, Engine, HostReach, ImageChecks, Kept, ReplicaSet, StepWork, Target,
    TerraformStates,
};
use domain::ids::{
    BackupId, ClusterId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId,
};
use domain::model::{
    Cluster, ClusterAction, DaemonIdentity, DockerEndpoint, DockerHost, OutputLine, RegistryAccess,
    RunningState, Service, WorkloadInputs,
};
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How often every host is pinged, so one that stops or starts answering is noticed.
const LOOK: Duration = Duration::from_secs(5);
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
    host: DockerHost,
    engine: Arc<DockerEngine>,
    answers: bool,
    /// What reaches it (key files, an SSH tunnel), gone with it.
    reach: Reach,
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
    async fn engine_for(&self, host: &DockerHost) -> Result<Arc<DockerEngine>, EngineError> {
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
    async fn identity(
        &self,
        docker: &Docker,
        host: &DockerHost,
    ) -> Result<DaemonIdentity, EngineError> {
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
    async fn answering_engine(&self, host: &DockerHost) -> Result<Arc<DockerEngine>, EngineError> {
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

#[async_trait]
impl Engine for Hosts {
    fn name(&self, _target: &Target) -> &'static str {
        "the Docker engine"
    }

    fn image_checks(&self, _target: &Target) -> Option<&dyn ImageChecks> {
        Some(self)
    }

    fn database_backups(&self, _target: &Target) -> Option<&dyn DatabaseBackups> {
        Some(self)
    }

    fn terraform_states(&self, _target: &Target) -> Option<&dyn TerraformStates> {
        Some(self)
    }

    fn host_reach(&self, _target: &Target) -> Option<&dyn HostReach> {
        Some(self)
    }

    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        let Target::Docker(host) = work.target;
        let engine = self.answering_engine(host).await?;
        engine.run_step(work).await
    }

    /// Deploying reaches the host, checks what it runs (`answering`) and readies it for the
    /// cluster's environments; stopping leaves it as it is (its environments are stopped one
    /// by one).
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        engine
            .run_cluster(action, cluster, target, environments)
            .await
    }

    async fn watch_targets(&self, targets: Vec<Target>) {
        let hosts: Vec<DockerHost> = targets
            .into_iter()
            .map(|target| match target {
                Target::Docker(host) => host,
            })
            .collect();
        let named: HashMap<ClusterId, &DockerHost> =
            hosts.iter().map(|h| (h.cluster_id, h)).collect();
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
        target: &Target,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        let Target::Docker(host) = target;
        self.engine_for(host)
            .await?
            .settle_cut(target, service, request, cut)
            .await
    }

    async fn report(&self, target: &Target, service: &Service) -> Option<RunningState> {
        let Target::Docker(host) = target;
        let engine = self.engine_for(host).await.ok()?;
        let mut report = engine.report(target, service).await?;
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

    /// Backups are kept on this machine, whichever host the database runs on.
    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        self.local.remove_backup(file).await
    }

    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        self.local.held_backups().await
    }

    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        self.on_each(|e| async move { e.remove_workloads(service).await })
            .await
            .into_iter()
            .collect()
    }
}

#[async_trait]
impl HostReach for Hosts {
    async fn reach(&self, target: &Target) -> Result<String, EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        Ok(engine.describe().await)
    }

    async fn identify(&self, target: &Target) -> Option<Result<DaemonIdentity, EngineError>> {
        let Target::Docker(host) = target;
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

    /// From the pings every [`LOOK`]: the engine's own daemon is not among them.
    fn answered(&self, target: &Target) -> Option<bool> {
        let Target::Docker(host) = target;
        self.held()
            .get(&host.cluster_id)
            .filter(|a| a.host == *host)
            .map(|a| a.answers)
    }
}

#[async_trait]
impl ImageChecks for Hosts {
    async fn image_available(
        &self,
        target: &Target,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        engine.image_available(target, registry, name, tag).await
    }
}

#[async_trait]
impl DatabaseBackups for Hosts {
    async fn backup_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        engine.backup_database(target, database, inputs, file).await
    }

    async fn restore_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        engine
            .restore_database(target, database, inputs, file)
            .await
    }
}

#[async_trait]
impl TerraformStates for Hosts {
    async fn terraform_state(
        &self,
        target: &Target,
        service: &Service,
    ) -> Result<Option<String>, EngineError> {
        let Target::Docker(host) = target;
        let engine = self.answering_engine(host).await?;
        engine.terraform_state(target, service).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::REQUEST_TIMEOUT;

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
