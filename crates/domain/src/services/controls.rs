//! What a test suite does to a stand-in as a whole: empty it, hold and fail the engine's work.
//! These are an operator's controls, not a tenant's use cases: the API gates them behind their
//! own token, and no principal is involved.

use super::fault_controls::HOLDABLE;
use super::Capstan;
use crate::changes::ChangeSet;
use crate::error::{DomainError, DomainResult, StoreError};
use crate::ids::ServiceId;
use crate::model::{
    is_routed, plan, DeploymentAction, Service, ServiceState, Snapshot, SnapshotName, StepName,
};
use crate::ports::Repo;

impl Capstan {
    /// Brings everything back to empty, in one transaction (`keep_tokens`: the organizations
    /// that have API tokens stay, with their tokens and members). What was asked of the
    /// engine is forgotten. Seeded id sequences go on (kept or restored records hold ids
    /// drawn already). A deployment running now loses its claim: its worker stops at its next
    /// step, writing nothing.
    pub async fn reset(&self, keep_tokens: bool) -> DomainResult<()> {
        self.store.reset(keep_tokens).await?;
        self.engine_controls.clear();
        Ok(())
    }

    /// Saves the whole state under `name` (consistent as of one instant, while others go on).
    pub async fn save_snapshot(&self, name: &str) -> DomainResult<Snapshot> {
        let name = SnapshotName::parse("name", name)?;
        match self.store.save_snapshot(&name, self.now()).await {
            Err(StoreError::Duplicate) => Err(DomainError::state(format!(
                "a snapshot named '{name}' already exists: delete it first"
            ))),
            saved => Ok(saved?),
        }
    }

    /// Brings back the state saved under `name`, exactly, in one transaction. Deployments
    /// running now lose their claims, as with a reset; those the snapshot holds as running
    /// end when their lease runs out (their worker is not this one).
    pub async fn restore_snapshot(&self, name: &str) -> DomainResult<()> {
        let name = SnapshotName::parse("name", name)?;
        snapshot_found(self.store.restore_snapshot(&name).await)?;
        // The state brought back may hold work of every kind.
        self.store.changes().ring(ChangeSet::ALL);
        Ok(())
    }

    pub async fn snapshots(&self) -> DomainResult<Vec<Snapshot>> {
        Ok(self.store.snapshots().await?)
    }

    pub async fn delete_snapshot(&self, name: &str) -> DomainResult<()> {
        let name = SnapshotName::parse("name", name)?;
        snapshot_found(self.store.delete_snapshot(&name).await)
    }

    /// Holds `service`'s deployments when they reach `state` until [`Capstan::release`].
    pub async fn hold(&self, service: ServiceId, state: ServiceState) -> DomainResult<()> {
        if !HOLDABLE.contains(&state) {
            let allowed: Vec<&str> = HOLDABLE.iter().map(|s| s.as_str()).collect();
            return Err(DomainError::invalid(
                "state",
                format!("must be one of {}", allowed.join(", ")),
            ));
        }
        let found = self.existing(service).await?;
        // A hold at a state this service never reaches would never hold: refused, not kept.
        // Only these two states belong to a step that some services skip.
        let entered_by = match state {
            ServiceState::Building => Some(StepName::Build),
            ServiceState::Executing => Some(StepName::Executing),
            _ => None,
        };
        if entered_by.is_some_and(|step| !steps_run(&found, self.router.is_some()).contains(&step))
        {
            return Err(DomainError::invalid(
                "state",
                format!("this {}'s deployments never reach {state}", found.kind()),
            ));
        }
        self.engine_controls.hold(service, state);
        Ok(())
    }

    /// Lets `service`'s held deployment go on; 404 when no hold was asked for it.
    pub async fn release(&self, service: ServiceId) -> DomainResult<()> {
        if self.engine_controls.release(service) {
            Ok(())
        } else {
            Err(DomainError::NotFound("hold"))
        }
    }

    /// Lets every held deployment go on (the server is stopping).
    pub fn release_all(&self) {
        self.engine_controls.clear();
    }

    /// Fails `service`'s next run of `step` with `message`. A step the service's work never
    /// runs is refused: the failure would wait for ever, and the suite would wait with it.
    pub async fn fail_step(
        &self,
        service: ServiceId,
        step: StepName,
        message: &str,
    ) -> DomainResult<()> {
        let message = message.trim();
        if message.is_empty() || message.len() > 1024 {
            return Err(DomainError::invalid(
                "message",
                "must be 1 to 1024 characters",
            ));
        }
        let found = self.existing(service).await?;
        let runs = steps_run(&found, self.router.is_some());
        if !runs.contains(&step) {
            let names: Vec<&str> = runs.iter().map(|s| s.as_str()).collect();
            return Err(DomainError::invalid(
                "step",
                format!(
                    "this {} runs {}, never {step}",
                    found.kind(),
                    names.join(", ")
                ),
            ));
        }
        self.engine_controls
            .fail(service, step, message.to_string());
        Ok(())
    }

    async fn existing(&self, service: ServiceId) -> DomainResult<Service> {
        Repo::<Service>::get(&mut *self.reading().await?, service)
            .await?
            .ok_or(DomainError::NotFound("service"))
    }
}

/// The steps a service's deployments run: a deploy runs every step any action of it does.
fn steps_run(service: &Service, router: bool) -> Vec<StepName> {
    plan(
        DeploymentAction::Deploy,
        service.kind(),
        service.builds_from_git(),
        router && is_routed(service),
    )
    .into_iter()
    .map(|phase| phase.step)
    .collect()
}

fn snapshot_found(done: Result<(), StoreError>) -> DomainResult<()> {
    match done {
        Err(StoreError::NotFound) => Err(DomainError::NotFound("snapshot")),
        other => Ok(other?),
    }
}
