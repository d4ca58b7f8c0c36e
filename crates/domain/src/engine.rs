//! The engine port: what carries out the steps of a deployment request. The server wires an
//! adapter (the simulated engine by default); the worker in `services::worker` drives it.

use crate::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use crate::model::{
    Cluster, ClusterAction, DaemonIdentity, DeploymentLogLine, DeploymentRequest, Host, LogLevel,
    Masker, OutputLine, RegistryAccess, RunningState, Service, ServiceState, StepName,
    WorkloadInputs,
};
use async_trait::async_trait;
use std::sync::Mutex;
use tokio::sync::watch;

/// What one step is given: the request and its service, what the workload runs with and where
/// (its environment's cluster's host), where the step writes its log, and the signal that the
/// request was canceled.
pub struct StepWork<'a> {
    pub step: StepName,
    pub request: &'a DeploymentRequest,
    pub service: &'a Service,
    pub inputs: &'a WorkloadInputs,
    pub host: &'a Host,
    pub log: &'a StepLog,
    pub cancel: &'a Cancel,
}

/// The replicas of one service that one deployment request started, as an engine finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReplicaSet {
    pub organization: OrganizationId,
    pub service: ServiceId,
    pub request: DeploymentRequestId,
}

/// How far a deployment cut short had come when its worker died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Before its new replicas were all ready (building, pulling, starting, warming up).
    BeforeSwitch,
    /// In the router's switch: its replicas were ready and the routes were turning to them.
    InSwitch,
}

/// Which set of replicas a settled cut left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// What ran before the cut deployment (nothing, for a first one).
    Previous,
    /// The cut deployment's own replicas.
    Started,
}

#[async_trait]
pub trait Engine: Send + Sync {
    /// Performs one step. It takes as long as it takes: the worker renews its claim on the
    /// request meanwhile. Once `work.cancel` fires the step should stop what it started and
    /// return; whatever it returns then, the request ends canceled. `Err` carries the reason the
    /// step failed, as the client will read it.
    async fn run_step(&self, work: StepWork<'_>) -> Result<(), String>;

    /// Deploys or stops a cluster on its host (deploying reaches the host and readies it for
    /// its `environments`). `Err` carries the reason it failed.
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        host: &Host,
        environments: &[EnvironmentId],
    ) -> Result<(), String>;

    /// Whether `host` answers now: what it runs (its engine and version), or why it does
    /// not. `None`: this engine has no hosts to reach (the cluster's record is all there is).
    async fn reach(&self, host: &Host) -> Option<Result<String, String>> {
        let _ = host;
        None
    }

    /// Who answers at `host`'s endpoint now (asked without running anything there, whether
    /// or not the cluster was checked before); `None`: this engine has no hosts to reach.
    async fn identify(&self, host: &Host) -> Option<Result<DaemonIdentity, String>> {
        let _ = host;
        None
    }

    /// Whether `host` answered when last looked at, without asking it now; `None`: not
    /// known (not looked at yet, or this engine has no hosts).
    fn answered(&self, host: &Host) -> Option<bool> {
        let _ = host;
        None
    }

    /// The hosts the clusters name besides the engine's own, as the store has them now: the
    /// engine watches what runs on each (and forgets the hosts no longer named).
    async fn watch_hosts(&self, hosts: Vec<Host>) {
        let _ = hosts;
    }

    /// Waits `wait` (the pace at which a held deployment looks whether it may go on, and a
    /// running step's claim is renewed).
    async fn pause(&self, wait: std::time::Duration);

    /// What runs, as it changes: a report of every workload it knows at once, then one each
    /// time a workload's state changes, until the stream ends (the engine lost its source; the
    /// caller asks again). `None`: this engine runs nothing to observe.
    fn observe(&self) -> Option<futures_util::stream::BoxStream<'static, RunningState>> {
        None
    }

    /// What its workloads print, line by line as they print it (unmasked: the caller masks
    /// before it keeps), until the stream ends (the caller asks again; a line read twice is
    /// kept once). `None`: this engine runs nothing that prints.
    fn output(&self) -> Option<futures_util::stream::BoxStream<'static, OutputLine>> {
        None
    }

    /// The services it finds workloads of, with their organizations (by its own marks on
    /// them), for reconciliation.
    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, String> {
        Ok(Vec::new())
    }

    /// The sets of replicas it runs (or keeps stopped): each service's, by the request that
    /// started them, with their organizations, for reconciliation.
    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, String> {
        Ok(Vec::new())
    }

    /// Removes the failed executions it keeps of a job (a failed run is kept, with its output,
    /// until this or the job's next run); the names of those removed.
    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, String> {
        let _ = job;
        Ok(Vec::new())
    }

    /// Whether the image `name:tag` of `registry` can be run: on the engine's host already,
    /// or in its registry. `Err` says why it could not be told.
    async fn image_available(
        &self,
        host: &Host,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, String> {
        let _ = (host, registry, name, tag);
        Err("this engine runs no images".into())
    }

    /// Dumps a running database with its own tool into the backup `file` (a name the engine
    /// keeps it under); the dump's size in bytes.
    async fn backup_database(
        &self,
        host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, String> {
        let _ = (host, database, inputs, file);
        Err("this engine keeps no database backups".into())
    }

    /// Loads the backup `file` back into the running database.
    async fn restore_database(
        &self,
        host: &Host,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), String> {
        let _ = (host, database, inputs, file);
        Err("this engine keeps no database backups".into())
    }

    /// Removes the backup `file` (none kept: nothing to do).
    async fn remove_backup(&self, file: &str) -> Result<(), String> {
        let _ = file;
        Ok(())
    }

    /// The backups it keeps dumps of that may go once their records are gone, for
    /// reconciliation: none when the settings keep a deleted database's data.
    async fn held_backups(&self) -> Result<Vec<BackupId>, String> {
        Ok(Vec::new())
    }

    /// The state file a terraform service's runs keep (none: it has not run, or this engine
    /// keeps none).
    async fn terraform_state(
        &self,
        host: &Host,
        service: &Service,
    ) -> Result<Option<String>, String> {
        let _ = (host, service);
        Ok(None)
    }

    /// Removes every workload it runs of a service that no longer exists.
    async fn remove_workloads(&self, service: ServiceId) -> Result<(), String> {
        let _ = service;
        Ok(())
    }

    /// Settles what a deployment cut short (its worker died) left of `service` on `host`, by
    /// how far it had come: before the switch, what `request` started goes (the set an
    /// earlier deployment started is what its failure leaves); in the switch, its replicas
    /// passed their readiness and took the routes, so when they still run the earlier set
    /// goes instead. Answers which set it kept.
    async fn settle_cut(
        &self,
        host: &Host,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, String> {
        let _ = (host, service, request, cut);
        Ok(Kept::Previous)
    }

    /// What runs of `service` on `host` now, read at once (the stream of reports may lag
    /// behind a deployment that just ended); `None` when it cannot tell.
    async fn report(&self, host: &Host, service: &Service) -> Option<RunningState> {
        let _ = (host, service);
        None
    }

    /// The environments it keeps something of (a network), with their organizations (by its
    /// own marks), for reconciliation.
    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, String> {
        Ok(Vec::new())
    }

    /// Removes what it keeps of an environment that no longer exists (its network), once no
    /// workload uses it any more (else it is left for the next try).
    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), String> {
        let _ = environment;
        Ok(())
    }
}

/// Tells a running step that its request was canceled.
#[derive(Debug)]
pub struct CancelHandle(watch::Sender<bool>);

/// What a step watches for its request's cancel.
#[derive(Debug, Clone)]
pub struct Cancel(watch::Receiver<bool>);

impl Cancel {
    pub fn pair() -> (CancelHandle, Cancel) {
        let (tx, rx) = watch::channel(false);
        (CancelHandle(tx), Cancel(rx))
    }

    pub fn is_canceled(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the request is canceled; never, if it is not.
    pub async fn canceled(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|c| *c).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl CancelHandle {
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }
}

/// A request's log as its steps write it: each line masked (no secret value of the service
/// survives it) and kept in order until the worker stores it.
#[derive(Debug)]
pub struct StepLog {
    request: DeploymentRequest,
    masker: Masker,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    step: Option<StepName>,
    next_position: i64,
    lines: Vec<DeploymentLogLine>,
}

impl StepLog {
    /// Lines are numbered from the time the log was opened (milliseconds, shifted past room for
    /// a million lines), so a worker that ends a dead one's request writes after its lines.
    pub fn new(request: &DeploymentRequest, masker: Masker) -> Self {
        let millis = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let first = i64::try_from(millis).unwrap_or(0) << 20;
        Self {
            request: request.clone(),
            masker,
            pending: Mutex::new(Pending {
                next_position: first,
                ..Pending::default()
            }),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Pending) -> R) -> R {
        f(&mut self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The step the lines that follow belong to.
    pub fn enter(&self, step: StepName) {
        self.with(|p| p.step = Some(step));
    }

    pub fn write(&self, level: LogLevel, message: &str) {
        let message = self.masker.mask(message);
        let r = &self.request;
        self.with(|p| {
            let line = DeploymentLogLine {
                request_id: r.id,
                environment_id: r.environment_id,
                service_id: r.service_id,
                position: p.next_position,
                at: time::OffsetDateTime::now_utc(),
                step: p.step.unwrap_or(StepName::Deployment),
                level,
                message,
            };
            p.next_position += 1;
            p.lines.push(line);
        });
    }

    pub fn info(&self, message: &str) {
        self.write(LogLevel::Info, message);
    }

    pub fn warn(&self, message: &str) {
        self.write(LogLevel::Warning, message);
    }

    pub fn error(&self, message: &str) {
        self.write(LogLevel::Error, message);
    }

    /// `text` as a log line would keep it (a failure's reason, shown beside the log).
    pub fn mask(&self, text: &str) -> String {
        self.masker.mask(text)
    }

    /// The lines written since the last call, for the store.
    pub fn take(&self) -> Vec<DeploymentLogLine> {
        self.with(|p| std::mem::take(&mut p.lines))
    }
}

/// What a test suite asked of the engine, per service: hold its deployments at a state until
/// released, fail a step once. Kept by the process whose workers run the deployments (a
/// stand-in runs one); the worker consults it at every step.
#[derive(Debug, Default)]
pub struct EngineControls {
    services: std::sync::Mutex<std::collections::HashMap<ServiceId, Asked>>,
}

#[derive(Debug, Default, Clone)]
struct Asked {
    hold: Option<ServiceState>,
    fail: Option<(StepName, String)>,
}

/// The states a deployment passes through once a worker has it: where it can be held (a
/// queued state: before its first step).
pub const HOLDABLE: &[ServiceState] = &[
    ServiceState::DeploymentQueued,
    ServiceState::RestartQueued,
    ServiceState::StopQueued,
    ServiceState::DeleteQueued,
    ServiceState::Building,
    ServiceState::Deploying,
    ServiceState::Executing,
    ServiceState::Restarting,
    ServiceState::Stopping,
    ServiceState::Deleting,
];

impl EngineControls {
    fn with<R>(&self, f: impl FnOnce(&mut std::collections::HashMap<ServiceId, Asked>) -> R) -> R {
        f(&mut self.services.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Holds the service's deployments when they reach `state`, until [`Self::release`].
    pub fn hold(&self, service: ServiceId, state: ServiceState) {
        self.with(|s| s.entry(service).or_default().hold = Some(state));
    }

    /// Lets the service's held deployment go on; false when none was asked to be held.
    pub fn release(&self, service: ServiceId) -> bool {
        self.with(|s| {
            let Some(asked) = s.get_mut(&service) else {
                return false;
            };
            let held = asked.hold.take().is_some();
            if asked.fail.is_none() {
                s.remove(&service);
            }
            held
        })
    }

    /// Fails the service's next run of `step` with `message`.
    pub fn fail(&self, service: ServiceId, step: StepName, message: String) {
        self.with(|s| s.entry(service).or_default().fail = Some((step, message)));
    }

    /// Whether a deployment of `service` in `state` must wait.
    pub fn holds(&self, service: ServiceId, state: ServiceState) -> bool {
        self.with(|s| s.get(&service).is_some_and(|a| a.hold == Some(state)))
    }

    /// The failure asked for this run of `step`, once.
    pub fn failure(&self, service: ServiceId, step: StepName) -> Option<String> {
        self.with(|s| {
            let asked = s.get_mut(&service)?;
            if asked.fail.as_ref().is_some_and(|(at, _)| *at == step) {
                return asked.fail.take().map(|(_, message)| message);
            }
            None
        })
    }

    /// Forgets everything asked (a reset).
    pub fn clear(&self) {
        self.with(|s| s.clear());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_lasts_until_release_and_a_failure_is_used_once() {
        let controls = EngineControls::default();
        let (a, b) = (ServiceId::generate(), ServiceId::generate());
        controls.hold(a, ServiceState::Deploying);
        assert!(controls.holds(a, ServiceState::Deploying));
        assert!(!controls.holds(a, ServiceState::Building));
        assert!(!controls.holds(b, ServiceState::Deploying));
        controls.fail(a, StepName::Build, "no".into());
        assert_eq!(controls.failure(a, StepName::Deployment), None);
        assert!(controls.release(a));
        assert!(!controls.holds(a, ServiceState::Deploying));
        assert!(!controls.release(a), "nothing is held any more");
        assert_eq!(controls.failure(a, StepName::Build).as_deref(), Some("no"));
        assert_eq!(controls.failure(a, StepName::Build), None);
        controls.hold(b, ServiceState::Stopping);
        controls.clear();
        assert!(!controls.holds(b, ServiceState::Stopping));
    }
}
