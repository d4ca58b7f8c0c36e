//! The engine port: what carries out the steps of a deployment request. The domain drives one
//! [`Engine`], the dispatcher over the [`Adapter`]s the server registers by target kind
//! (`capstan_engine::Engines`); the worker in `services::worker` drives it.

use crate::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use crate::model::{
    Cluster, ClusterAction, DeploymentRequest, OutputLine, RunningState, Service, StepName,
    WorkloadInputs,
};
use async_trait::async_trait;

mod adapter;
mod cancel;
mod capabilities;
mod error;
mod replicas;
mod step_log;
mod target;

pub use adapter::{Adapter, Offers, Place};
pub use cancel::{Cancel, CancelHandle};
pub use capabilities::{DatabaseBackups, HostReach, ImageChecks, TerraformStates};
pub use error::{EngineError, Failure};
pub use replicas::{ReplicaUsage, Replicas, Shell, ShellRequest, TerminalSize};
pub use step_log::StepLog;
pub use target::{Target, TargetKind};

/// What one step is given: the request and its service, what the workload runs with and where
/// (its environment's cluster's target), where the step writes its log, and the signal that the
/// request was canceled.
pub struct StepWork<'a> {
    pub step: StepName,
    pub request: &'a DeploymentRequest,
    pub service: &'a Service,
    pub inputs: &'a WorkloadInputs,
    pub target: &'a Target,
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
    /// Its name, as a refusal of what it cannot do at `target` names it ("the simulated
    /// engine").
    fn name(&self, target: &Target) -> &'static str;

    /// Its image checks at `target`, if it offers them.
    fn image_checks(&self, target: &Target) -> Option<&dyn ImageChecks> {
        let _ = target;
        None
    }

    /// Its database backups at `target`, if it keeps them.
    fn database_backups(&self, target: &Target) -> Option<&dyn DatabaseBackups> {
        let _ = target;
        None
    }

    /// The terraform states it keeps at `target`, if it keeps them (none: a terraform service
    /// shows no state).
    fn terraform_states(&self, target: &Target) -> Option<&dyn TerraformStates> {
        let _ = target;
        None
    }

    /// How it reaches into the running replicas at `target` (shells, usage), if it can.
    fn replicas(&self, target: &Target) -> Option<&dyn Replicas> {
        let _ = target;
        None
    }

    /// How it reaches `target` apart from running anything there, if it has a place to reach
    /// (none: the cluster's record is all there is).
    fn host_reach(&self, target: &Target) -> Option<&dyn HostReach> {
        let _ = target;
        None
    }

    /// Performs one step. It takes as long as it takes: the worker renews its claim on the
    /// request meanwhile. Once `work.cancel` fires the step should stop what it started and
    /// return; whatever it returns then, the request ends canceled. `Err` carries the reason the
    /// step failed, as the client will read it, and whether trying again may help.
    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError>;

    /// Deploys or stops a cluster at its target (deploying reaches it and readies it for
    /// its `environments`). `Err` carries the reason it failed.
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError>;

    /// The targets the clusters name besides the engine's own place, as the store has them
    /// now: the engine watches what runs at each (and forgets those no longer named).
    async fn watch_targets(&self, targets: Vec<Target>) {
        let _ = targets;
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
    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        Ok(Vec::new())
    }

    /// The sets of replicas it runs (or keeps stopped): each service's, by the request that
    /// started them, with their organizations, for reconciliation.
    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        Ok(Vec::new())
    }

    /// Removes the failed executions it keeps of a job (a failed run is kept, with its output,
    /// until this or the job's next run); the names of those removed.
    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let _ = job;
        Ok(Vec::new())
    }

    /// Removes the backup `file` (none kept: nothing to do).
    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        let _ = file;
        Ok(())
    }

    /// The backups it keeps dumps of that may go once their records are gone, for
    /// reconciliation: none when the settings keep a deleted database's data.
    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        Ok(Vec::new())
    }

    /// Removes every workload it runs of a service that no longer exists.
    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        let _ = service;
        Ok(())
    }

    /// Settles what a deployment cut short (its worker died) left of `service` at `target`, by
    /// how far it had come: before the switch, what `request` started goes (the set an
    /// earlier deployment started is what its failure leaves); in the switch, its replicas
    /// passed their readiness and took the routes, so when they still run the earlier set
    /// goes instead. Answers which set it kept.
    async fn settle_cut(
        &self,
        target: &Target,
        service: &Service,
        request: DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, EngineError> {
        let _ = (target, service, request, cut);
        Ok(Kept::Previous)
    }

    /// What runs of `service` at `target` now, read at once (the stream of reports may lag
    /// behind a deployment that just ended); `None` when it cannot tell.
    async fn report(&self, target: &Target, service: &Service) -> Option<RunningState> {
        let _ = (target, service);
        None
    }

    /// The environments it keeps something of (a network), with their organizations (by its
    /// own marks), for reconciliation.
    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        Ok(Vec::new())
    }

    /// Removes what it keeps of an environment that no longer exists (its network), once no
    /// workload uses it any more (else it is left for the next try).
    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        let _ = environment;
        Ok(())
    }
}
