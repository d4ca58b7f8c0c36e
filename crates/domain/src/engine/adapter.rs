//! What an engine plugs in as: an [`Adapter`] for one kind of target, and a [`Place`] for each
//! place it runs workloads at (a Docker daemon; a Swarm next). The dispatcher
//! (`capstan_engine::Engines`) is the one [`super::Engine`] the domain drives: it keeps the
//! places the clusters name, sends a call naming a target to its place, and asks every place
//! at once what reconciliation and the streams need, each within its own deadline, so no
//! adapter does that itself.

use super::{
    Cut, DatabaseBackups, EngineError, ImageChecks, Kept, ReplicaSet, Replicas, StepWork, Target,
    TerraformStates,
};
use crate::ids::{BackupId, DeploymentRequestId, EnvironmentId, OrganizationId, ServiceId};
use crate::model::{
    Cluster, ClusterAction, ClusterHost, DaemonIdentity, OutputLine, RunningState, Service,
    SwarmNode,
};
use async_trait::async_trait;
use futures_util::stream::BoxStream;
use std::sync::Arc;

/// What the places of an adapter can do besides running workloads (the capabilities the
/// dispatcher offers for its targets before it reaches one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    pub image_checks: bool,
    pub database_backups: bool,
    pub terraform_states: bool,
    /// Reaching into running replicas (shells, usage).
    pub replicas: bool,
    /// A place to reach apart from running anything there (a daemon to ping and identify);
    /// without it the cluster's record is all there is.
    pub host_reach: bool,
}

/// One kind of engine: the place of the installation's own, if it has one, and how it reaches
/// the places clusters name.
#[async_trait]
pub trait Adapter: Send + Sync {
    /// How a refusal of what it cannot do names it ("the simulated engine").
    fn name(&self) -> &'static str;

    fn offers(&self) -> Offers;

    /// The installation's own place (the local Docker daemon), with how a message names it;
    /// always there, never attached or forgotten.
    fn own(&self) -> Option<(&'static str, &dyn Place)>;

    /// Whether `target` is the installation's own place.
    fn is_own(&self, target: &Target) -> bool;

    /// Reaches the place `target` names and checks that it is the one its cluster was
    /// deployed on: the place, kept by the dispatcher while its cluster names it; why not,
    /// naming the target.
    async fn attach(&self, target: &Target) -> Result<Arc<dyn Place>, EngineError>;

    /// Who answers at `target` now, asked without attaching it; `None`: no one to tell apart
    /// (the installation's own place).
    async fn identify(&self, target: &Target) -> Option<Result<DaemonIdentity, EngineError>> {
        let _ = target;
        None
    }

    /// Removes the backup `file` (none kept: nothing to do). Backups are the adapter's, not
    /// a place's: they are kept where Capstan runs.
    async fn remove_backup(&self, file: &str) -> Result<(), EngineError> {
        let _ = file;
        Ok(())
    }

    /// The backups it keeps dumps of that may go once their records are gone, for
    /// reconciliation: none when the settings keep a deleted database's data.
    async fn held_backups(&self) -> Result<Vec<BackupId>, EngineError> {
        Ok(Vec::new())
    }
}

/// What an engine runs at one place. The calls mean what the [`super::Engine`] calls of the
/// same names mean, for this place alone.
#[async_trait]
pub trait Place: Send + Sync {
    /// Whether it answers now (the dispatcher gives it a deadline and names the target).
    async fn ping(&self) -> Result<(), EngineError> {
        Ok(())
    }

    /// Whether what reaches it still holds (an SSH tunnel ends with its connection); when
    /// not, the dispatcher attaches its target again.
    fn holds(&self) -> bool {
        true
    }

    /// What runs there (its engine and version), for a cluster's check.
    async fn describe(&self) -> String;

    /// The nodes of the Swarm it manages; none when it manages none.
    async fn nodes(&self) -> Result<Vec<SwarmNode>, EngineError> {
        Ok(Vec::new())
    }

    /// Its hosts (itself, or the nodes of the Swarm it manages) with what each holds.
    async fn hosts(&self) -> Result<Vec<ClusterHost>, EngineError> {
        Ok(Vec::new())
    }

    fn image_checks(&self) -> Option<&dyn ImageChecks> {
        None
    }

    fn database_backups(&self) -> Option<&dyn DatabaseBackups> {
        None
    }

    fn terraform_states(&self) -> Option<&dyn TerraformStates> {
        None
    }

    fn replicas(&self) -> Option<&dyn Replicas> {
        None
    }

    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError>;

    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        target: &Target,
        environments: &[EnvironmentId],
    ) -> Result<(), EngineError>;

    fn observe(&self) -> Option<BoxStream<'static, RunningState>> {
        None
    }

    fn output(&self) -> Option<BoxStream<'static, OutputLine>> {
        None
    }

    async fn workloads(&self) -> Result<Vec<(OrganizationId, ServiceId)>, EngineError> {
        Ok(Vec::new())
    }

    async fn replica_sets(&self) -> Result<Vec<ReplicaSet>, EngineError> {
        Ok(Vec::new())
    }

    async fn clean_failed_jobs(&self, job: ServiceId) -> Result<Vec<String>, EngineError> {
        let _ = job;
        Ok(Vec::new())
    }

    async fn remove_workloads(&self, service: ServiceId) -> Result<(), EngineError> {
        let _ = service;
        Ok(())
    }

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

    async fn report(&self, service: &Service) -> Option<RunningState> {
        let _ = service;
        None
    }

    async fn environments(&self) -> Result<Vec<(OrganizationId, EnvironmentId)>, EngineError> {
        Ok(Vec::new())
    }

    async fn remove_environment(&self, environment: EnvironmentId) -> Result<(), EngineError> {
        let _ = environment;
        Ok(())
    }
}
