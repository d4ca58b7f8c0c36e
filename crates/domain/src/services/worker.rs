//! The worker: claims requests from the queue and walks them through the engine, recording
//! every transition. Several workers (in one process or many) share one queue.

use super::Capstan;
use crate::engine::Engine;
use crate::error::{DomainError, DomainResult};
use crate::model::*;
use crate::ports::Repo;
use std::sync::Arc;
use time::Duration;

/// Why a request ended when its worker died.
pub const WORKER_LOST: &str =
    "the worker running this request stopped before it finished (the server was stopped or crashed)";

pub struct Worker {
    capstan: Capstan,
    engine: Arc<dyn Engine>,
    id: String,
    lease: Duration,
}

fn forbidden(f: Forbidden) -> DomainError {
    DomainError::Internal(f.to_string())
}

impl Worker {
    /// `lease` is how long a claim holds without renewal; it must outlast the longest step.
    pub fn new(capstan: Capstan, engine: Arc<dyn Engine>, lease: Duration) -> Self {
        Self {
            capstan,
            engine,
            // The process id shows which server ran a request; the uuid tells workers apart.
            id: format!("{}-{}", std::process::id(), uuid::Uuid::new_v4()),
            lease,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs the next request that can start to its end; false when none could start.
    pub async fn run_next(&self) -> DomainResult<bool> {
        let now = self.capstan.now();
        let claimed = self
            .capstan
            .store
            .claim_next(&self.id, now, now + self.lease)
            .await?;
        match claimed {
            Some(request) => {
                self.run(request).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Ends the requests whose worker died in the error state matching where they were
    /// (a cancel in progress ends canceled); returns how many.
    pub async fn recover(&self) -> DomainResult<usize> {
        let now = self.capstan.now();
        let orphans = self
            .capstan
            .store
            .reclaim_expired(&self.id, now, now + self.lease)
            .await?;
        let count = orphans.len();
        for mut r in orphans {
            let mut state = r.state;
            if state.is_waiting() {
                state = transition(state, Event::Started { builds: false }).map_err(forbidden)?;
            }
            r.end_step(StepStatus::Error, now);
            if r.cancel_requested {
                // A cancel was asked for: it ends canceled all the same.
                r.state = transition(state, Event::CancelRequested)
                    .and_then(|s| transition(s, Event::Canceled))
                    .map_err(forbidden)?;
                r.finish(RequestStatus::Canceled, Some(WORKER_LOST.into()), now);
            } else {
                r.state = transition(state, Event::Failed).map_err(forbidden)?;
                r.finish(RequestStatus::Error, Some(WORKER_LOST.into()), now);
            }
            self.capstan.store.record(&r).await?;
        }
        Ok(count)
    }

    async fn run(&self, mut r: DeploymentRequest) -> DomainResult<()> {
        let store = &self.capstan.store;
        let Some(service) = Repo::<Service>::get(&**store, r.service_id).await? else {
            r.finish(
                RequestStatus::Error,
                Some("the service no longer exists".into()),
                self.capstan.now(),
            );
            store.record(&r).await?;
            return Ok(());
        };
        let builds = r.deploys() && service.builds_from_git();
        r.state = transition(r.state, Event::Started { builds }).map_err(forbidden)?;
        for phase in plan(r.action, service.kind(), builds) {
            let now = self.capstan.now();
            r.steps.push(Step {
                name: phase.step,
                status: None,
                started_at: now,
                finished_at: None,
            });
            r.lease_until = Some(now + self.lease);
            match store.record(&r).await? {
                // Another worker took it over: its lease ran out.
                None => return Ok(()),
                Some(true) if r.action != DeploymentAction::Delete => {
                    return self.cancel(r).await;
                }
                Some(_) => {}
            }
            if let Err(reason) = self.engine.run_step(phase.step, &r, &service).await {
                let now = self.capstan.now();
                r.end_step(StepStatus::Error, now);
                r.state = transition(r.state, Event::Failed).map_err(forbidden)?;
                r.finish(RequestStatus::Error, Some(reason), now);
                store.record(&r).await?;
                return Ok(());
            }
            r.end_step(StepStatus::Success, self.capstan.now());
            r.state = transition(r.state, phase.then).map_err(forbidden)?;
        }
        self.succeed(r, service).await
    }

    async fn cancel(&self, mut r: DeploymentRequest) -> DomainResult<()> {
        let now = self.capstan.now();
        r.end_step(StepStatus::Cancel, now);
        r.state = transition(r.state, Event::CancelRequested)
            .and_then(|s| transition(s, Event::Canceled))
            .map_err(forbidden)?;
        let reason = r.reason.take().unwrap_or_else(|| "canceled".into());
        r.finish(RequestStatus::Canceled, Some(reason), now);
        self.capstan.store.record(&r).await?;
        Ok(())
    }

    async fn succeed(&self, mut r: DeploymentRequest, service: Service) -> DomainResult<()> {
        let store = &self.capstan.store;
        let now = self.capstan.now();
        if r.deploys() {
            self.save_deployed(&r, service).await?;
        }
        r.finish(RequestStatus::Success, None, now);
        store.record(&r).await?;
        if r.action == DeploymentAction::Delete {
            match Repo::<Service>::delete(&**store, r.service_id).await {
                Ok(()) | Err(crate::error::StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
            if r.batch_id == r.environment_id.0 {
                self.capstan
                    .finish_environment_deletion(r.environment_id)
                    .await?;
            }
        }
        Ok(())
    }

    /// Records what was deployed; a configuration that changed meanwhile is OUT_OF_DATE.
    async fn save_deployed(&self, r: &DeploymentRequest, mut service: Service) -> DomainResult<()> {
        let store = &self.capstan.store;
        for _ in 0..5 {
            service.record_deployment(&r.target, r.created_at, self.capstan.now());
            if store.save_deployed(&service).await? {
                return Ok(());
            }
            match Repo::<Service>::get(&**store, r.service_id).await? {
                Some(fresh) => service = fresh,
                None => return Ok(()),
            }
        }
        Err(DomainError::Unavailable(
            "the service kept changing while its deployment was recorded".into(),
        ))
    }
}
