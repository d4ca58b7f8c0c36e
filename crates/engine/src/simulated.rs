//! The simulated engine: every step takes the configured time and succeeds, unless the client
//! asked for a failure. A failure is asked for by putting `capstan-fail-<what>` (build, deploy,
//! restart, stop or delete) in the commit id, image tag or chart version being deployed, or in
//! the service's description; see docs/deployments.md. A database's backups and restores are
//! simulated the same way (`capstan-fail-backup`, `capstan-fail-restore` in its description).

use async_trait::async_trait;
use domain::engine::{
    Adapter, DatabaseBackups, EngineError, ImageChecks, Offers, Place, StepWork, Target,
};
use domain::ids::EnvironmentId;
use domain::model::{
    Cluster, ClusterAction, DeploymentAction, DeploymentRequest, RegistryAccess, Service, StepName,
    WorkloadInputs,
};
use std::sync::Arc;
use std::time::Duration;

/// The prefix of the words that make a simulated step fail.
pub const FAILURE_MARKER: &str = "capstan-fail-";

pub struct SimulatedEngine {
    step: Duration,
}

impl SimulatedEngine {
    pub fn new(step: Duration) -> Self {
        Self { step }
    }
}

/// What a failure of this step is called in the marker.
fn failure_word(step: StepName, action: DeploymentAction) -> &'static str {
    match (step, action) {
        (StepName::Build, _) => "build",
        (_, DeploymentAction::Restart) => "restart",
        (_, DeploymentAction::Stop) => "stop",
        (_, DeploymentAction::Delete | DeploymentAction::Uninstall) => "delete",
        _ => "deploy",
    }
}

fn failure_asked(step: StepName, request: &DeploymentRequest, service: &Service) -> bool {
    let marker = format!("{FAILURE_MARKER}{}", failure_word(step, request.action));
    let t = &request.target;
    [
        t.git_commit_id.as_deref(),
        t.image_tag.as_deref(),
        t.chart_version.as_deref(),
        service.description.as_deref(),
    ]
    .into_iter()
    .flatten()
    .any(|text| text.contains(&marker))
}

const NAME: &str = "the simulated engine";

/// Every target is the simulated engine's own place: it reaches nothing.
#[async_trait]
impl Adapter for SimulatedEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn offers(&self) -> Offers {
        Offers {
            image_checks: true,
            database_backups: true,
            ..Offers::default()
        }
    }

    fn own(&self) -> Option<(&'static str, &dyn Place)> {
        Some((NAME, self))
    }

    fn is_own(&self, _target: &Target) -> bool {
        true
    }

    async fn attach(&self, target: &Target) -> Result<Arc<dyn Place>, EngineError> {
        Err(EngineError::terminal(format!(
            "{NAME} reaches no place: it does not attach {}",
            target.describe()
        )))
    }
}

#[async_trait]
impl Place for SimulatedEngine {
    async fn describe(&self) -> String {
        NAME.to_string()
    }

    fn image_checks(&self) -> Option<&dyn ImageChecks> {
        Some(self)
    }

    fn database_backups(&self) -> Option<&dyn DatabaseBackups> {
        Some(self)
    }

    /// Ignores a cancel: a simulated step always runs its time, and the request ends
    /// canceled after it, as it did before steps could be stopped.
    async fn run_step(&self, work: StepWork<'_>) -> Result<(), EngineError> {
        let (step, request, service) = (work.step, work.request, work.service);
        tokio::time::sleep(self.step).await;
        work.log.info(&format!(
            "simulated {} of {} ({})",
            step, service.name, request.action
        ));
        if failure_asked(step, request, service) {
            let what = failure_word(step, request.action);
            return Err(EngineError::terminal(format!(
                "simulated {what} failure (asked for with {FAILURE_MARKER}{what})"
            )));
        }
        Ok(())
    }

    /// Two steps' time; fails when the cluster's description asks for it
    /// (`capstan-fail-deploy`, `capstan-fail-stop`).
    async fn run_cluster(
        &self,
        action: ClusterAction,
        cluster: &Cluster,
        _target: &Target,
        _environments: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        tokio::time::sleep(self.step * 2).await;
        let what = match action {
            ClusterAction::Deploy => "deploy",
            ClusterAction::Stop => "stop",
        };
        let marker = format!("{FAILURE_MARKER}{what}");
        if cluster
            .description
            .as_deref()
            .is_some_and(|d| d.contains(&marker))
        {
            return Err(EngineError::terminal(format!(
                "simulated cluster {what} failure (asked for with {marker})"
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl ImageChecks for SimulatedEngine {
    /// Any image runs on the simulated engine, except one whose name asks to be missing
    /// (`capstan-fail-pull`).
    async fn image_available(
        &self,
        _target: &Target,
        _registry: &RegistryAccess,
        name: &str,
        _tag: &str,
    ) -> Result<bool, EngineError> {
        Ok(!name.contains(&format!("{FAILURE_MARKER}pull")))
    }
}

/// Fails the simulated backup or restore of a database whose description asks for it
/// (`capstan-fail-backup`, `capstan-fail-restore`).
fn database_failure(database: &Service, what: &str) -> Result<(), EngineError> {
    let marker = format!("{FAILURE_MARKER}{what}");
    match database.description.as_deref() {
        Some(d) if d.contains(&marker) => Err(EngineError::terminal(format!(
            "simulated {what} failure (asked for with {marker})"
        ))),
        _ => Ok(()),
    }
}

/// The stand-in keeps no dump, but a backup takes a step's time, ends DONE (or FAILED when
/// asked) and restores, so a client sees a backup's whole life as the public API shows it.
#[async_trait]
impl DatabaseBackups for SimulatedEngine {
    /// The size is the simulated dump's: the one line that names what it would hold.
    async fn backup_database(
        &self,
        _target: &Target,
        database: &Service,
        _inputs: &WorkloadInputs,
        file: &str,
    ) -> Result<i64, EngineError> {
        tokio::time::sleep(self.step).await;
        database_failure(database, "backup")?;
        let dump = format!("-- simulated dump of {} into {file}\n", database.name);
        Ok(dump.len() as i64)
    }

    async fn restore_database(
        &self,
        _target: &Target,
        database: &Service,
        _inputs: &WorkloadInputs,
        _file: &str,
    ) -> Result<(), EngineError> {
        tokio::time::sleep(self.step).await;
        database_failure(database, "restore")
    }
}
