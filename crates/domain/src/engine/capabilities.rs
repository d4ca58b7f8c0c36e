//! What only some engines can do, each a trait an engine offers for a target or does not
//! (`Engine::image_checks`, `database_backups`, `terraform_states`, `host_reach`). A use case
//! asks before it acts, so a cluster whose engine lacks one is told up front, the engine
//! named, instead of by a failure later.

use super::{EngineError, Target};
use crate::model::{
    ClusterHost, DaemonIdentity, RegistryAccess, Service, SwarmNode, WorkloadInputs,
};
use async_trait::async_trait;

/// Telling whether an image can be run at a target.
#[async_trait]
pub trait ImageChecks: Send + Sync {
    /// Whether the image `name:tag` of `registry` can be run at `target`: there already, or in
    /// its registry. `Err` says why it could not be told.
    async fn image_available(
        &self,
        target: &Target,
        registry: &RegistryAccess,
        name: &str,
        tag: &str,
    ) -> Result<bool, EngineError>;
}

/// Dumping a running database, and loading a dump back.
#[async_trait]
pub trait DatabaseBackups: Send + Sync {
    /// Dumps a running database with its own tool into the backup `file` (a name the engine
    /// keeps it under); the dump's size in bytes.
    async fn backup_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError>;

    /// Loads the backup `file` back into the running database.
    async fn restore_database(
        &self,
        target: &Target,
        database: &Service,
        inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<(), EngineError>;
}

/// Keeping the state a terraform service's runs leave.
#[async_trait]
pub trait TerraformStates: Send + Sync {
    /// The state file the service's runs keep (none: it has not run).
    async fn terraform_state(
        &self,
        target: &Target,
        service: &Service,
    ) -> Result<Option<String>, EngineError>;
}

/// Reaching the place a cluster names, apart from running anything there.
#[async_trait]
pub trait HostReach: Send + Sync {
    /// Whether `target` answers now: what it runs (its engine and version), or why not.
    async fn reach(&self, target: &Target) -> Result<String, EngineError>;

    /// Who answers at `target` now (asked without running anything there, whether or not the
    /// cluster was checked before); `None`: no one to tell apart (the installation's own).
    async fn identify(&self, target: &Target) -> Option<Result<DaemonIdentity, EngineError>>;

    /// Whether `target` answered when last looked at, without asking it now; `None`: not
    /// looked at yet.
    fn answered(&self, target: &Target) -> Option<bool>;

    /// The nodes of the Swarm `target` manages, as its managers see them now; none for a
    /// place that manages no Swarm.
    async fn nodes(&self, target: &Target) -> Result<Vec<SwarmNode>, EngineError>;

    /// The hosts at `target` (the host itself, or each node of the Swarm it manages) with
    /// what each holds, now.
    async fn hosts(&self, target: &Target) -> Result<Vec<ClusterHost>, EngineError>;
}
