//! Cron jobs at their schedule. A cron job's deployment keeps when it runs next; at that time
//! the scheduler (any instance; the turn is taken under its environment's lock, so once) queues
//! a run of it: a deployment request of the job marked as a scheduled run, asked for by
//! `cron-job`, whose state, log, output and history are a deployment's. A run that cannot be
//! queued (the job is busy) is skipped, as a Kubernetes CronJob that forbids overlaps does.

use super::deployment_rules::SCHEDULER_BATCH;
use super::Capstan;
use crate::auth::{Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::*;
use crate::ports::{Repo, Scope, Unit};
use time::OffsetDateTime;

/// What one pass of the cron scheduler did.
#[derive(Debug, Default)]
pub struct CronPass {
    pub queued: usize,
    pub failed: Vec<(ServiceId, DomainError)>,
    /// The earliest time a cron job runs next, once the pass is over.
    pub next_turn: Option<OffsetDateTime>,
}

/// When a job runs next after `now`: none for a job that is not a cron job (or whose schedule
/// names no time).
fn next_run(service: &Service, now: OffsetDateTime) -> Option<OffsetDateTime> {
    let ServiceSpec::Job(job) = &service.spec else {
        return None;
    };
    let cron = job.schedule.cronjob.as_ref()?;
    CronSchedule::parse(&cron.scheduled_at)
        .ok()?
        .next_after(now, &cron.timezone)
}

impl Capstan {
    /// In the unit that ends a request well: a cron job's deployment keeps when it runs next;
    /// its stop or uninstall forgets it (its deletion takes it with the job).
    pub(super) async fn keep_cron_turn(
        &self,
        tx: &mut Unit,
        r: &DeploymentRequest,
        now: OffsetDateTime,
    ) -> DomainResult<()> {
        match r.action {
            DeploymentAction::Deploy | DeploymentAction::Redeploy => {
                let Some(service) = Repo::<Service>::get(tx, r.service_id).await? else {
                    return Ok(());
                };
                self.plan_cron_turn(tx, &service, now).await
            }
            DeploymentAction::Stop | DeploymentAction::Uninstall => {
                Ok(tx.delete_cron_turn(r.service_id).await?)
            }
            _ => Ok(()),
        }
    }

    async fn plan_cron_turn(
        &self,
        tx: &mut Unit,
        service: &Service,
        now: OffsetDateTime,
    ) -> DomainResult<()> {
        match next_run(service, now) {
            Some(at) => Ok(tx
                .put_cron_turn(&CronTurn {
                    service_id: service.id,
                    environment_id: service.environment_id,
                    next_run_at: at,
                })
                .await?),
            None => Ok(tx.delete_cron_turn(service.id).await?),
        }
    }

    /// Queues a run of every cron job whose time came.
    pub async fn run_due_cron_jobs(&self) -> DomainResult<CronPass> {
        let now = self.now();
        let due = self
            .reading()
            .await?
            .due_cron_turns(now, SCHEDULER_BATCH)
            .await?;
        let mut pass = CronPass::default();
        for turn in due {
            match self.run_cron_turn(turn.service_id, now).await {
                Ok(true) => pass.queued += 1,
                Ok(false) => {}
                Err(e) => pass.failed.push((turn.service_id, e)),
            }
        }
        pass.next_turn = self.reading().await?.next_cron_turn().await?;
        Ok(pass)
    }

    /// Takes the job's turn if it is still due (another instance may have taken it): plans the
    /// next; the job, when taken.
    async fn take_cron_turn(
        &self,
        tx: &mut Unit,
        service: ServiceId,
        now: OffsetDateTime,
    ) -> DomainResult<Option<Service>> {
        let Some(turn) = tx.cron_turn(service).await? else {
            return Ok(None);
        };
        if turn.next_run_at > now {
            return Ok(None);
        }
        let Some(job) = Repo::<Service>::get(tx, service).await? else {
            return Ok(None);
        };
        self.plan_cron_turn(tx, &job, now).await?;
        Ok(Some(job))
    }

    /// Takes a due turn and queues its run, in one unit; true when a run was queued. A run
    /// the job's state refuses is skipped, its turn taken all the same.
    async fn run_cron_turn(&self, service: ServiceId, now: OffsetDateTime) -> DomainResult<bool> {
        let mut refused = false;
        let queued = self
            .in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
                let Some(job) = self.take_cron_turn(tx, service, now).await? else {
                    return Ok(false);
                };
                let scheduler = Principal {
                    subject: Subject::User("cron-job".into()),
                    memberships: vec![(job.organization_id, Role::Devops)],
                    origin: Origin::Internal,
                    user_agent: None,
                };
                let target = DeployTarget {
                    scheduled_run: true,
                    ..Default::default()
                };
                let asked = self
                    .request(tx, &scheduler, job, DeploymentAction::Deploy, target)
                    .await;
                refused = asked.is_err();
                asked.map(|_| true)
            })
            .await;
        match queued {
            Ok(queued) => Ok(queued),
            Err(e) if !refused => Err(e),
            // The store failed: the turn stays due, for the next pass.
            Err(e @ (DomainError::Unavailable(_) | DomainError::StoreFull(_))) => Err(e),
            // Refused (the job is busy, or cannot run): this run is skipped, its turn taken,
            // so it is not asked again and again.
            Err(_) => {
                self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
                    self.take_cron_turn(tx, service, now).await.map(|_| ())
                })
                .await?;
                Ok(false)
            }
        }
    }
}
