//! The worker: claims requests from the queue and walks them through the engine, recording
//! every transition. Several workers (in one process or many) share one queue.

use super::Capstan;
use crate::clock::{Clock, SystemClock};
use crate::engine::{Cancel, Cut, Engine, EngineError, Kept, StepLog, StepWork, Target};
use crate::error::{DomainError, DomainResult};
use crate::ids::EnvironmentId;
use crate::model::*;
use crate::pagination::PageRequest;
use crate::ports::{Repo, Scope, Unit};
use std::sync::Arc;
use time::Duration;

/// A cluster's log as an action writes it, numbered from when it began by the system's clock
/// (as a request's log is: a stand-in's manual clock may stand still), so the lines of later
/// actions follow.
struct ClusterLog {
    cluster: crate::ids::ClusterId,
    next: i64,
    lines: Vec<ClusterLogLine>,
}

impl ClusterLog {
    fn new(cluster: crate::ids::ClusterId) -> Self {
        let now = time::OffsetDateTime::now_utc();
        let millis = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
        Self {
            cluster,
            next: millis << 20,
            lines: Vec::new(),
        }
    }

    fn line(&mut self, step: ClusterLogStep, level: LogLevel, message: String) {
        self.lines.push(ClusterLogLine {
            cluster_id: self.cluster,
            position: self.next,
            at: time::OffsetDateTime::now_utc(),
            step,
            level,
            message,
        });
        self.next += 1;
    }
}

/// Why a request ended when its worker died.
pub const WORKER_LOST: &str =
    "the worker running this request stopped before it finished (the server was stopped or crashed)";

/// What the log of a deployment cut in the router's switch says when it ends DEPLOYED.
pub const SWITCHED_WHEN_LOST: &str = "the worker running this request stopped during the router's switch; its replicas were ready and serve, and the previous ones were removed";

/// A name for a claimant (a worker, a sender) unique across processes and machines: the
/// process id shows which server it was, the uuid tells claimants apart.
pub fn worker_id() -> String {
    format!("{}-{}", std::process::id(), uuid::Uuid::new_v4())
}

/// How often a held deployment looks whether it may go on.
const HOLD_POLL: std::time::Duration = std::time::Duration::from_millis(100);
/// A held deployment renews its claim every this many looks (a second): well inside any
/// lease, and soon enough to see a cancel.
const RENEW_EVERY: u32 = 10;

/// How long a claim holds without renewal. Steps take as long as they take: the claim is
/// renewed while they run (every third of it, storing the step's log and looking for a cancel
/// as it does), so this only bounds how long a dead worker's request waits.
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a step that failed in a way that may pass (see [`EngineError::is_retriable`])
/// waits before it runs again: three more tries, seven seconds in all, before the request
/// fails. Each wait is well inside a lease.
pub const RETRY_BACKOFF: [std::time::Duration; 3] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(4),
];

/// How a running step ended.
enum Ran {
    Done(Result<(), EngineError>),
    Canceled,
    /// The claim went (a reset, or another worker took over).
    Lost,
}

/// How a hold ended.
enum Held {
    /// There was none, or it was released.
    No,
    /// The claim went (a reset, or another worker took over).
    Lost,
    Canceled,
}

pub struct Worker {
    capstan: Capstan,
    engine: Arc<dyn Engine>,
    id: String,
    lease: Duration,
}

/// A database whose container would have no password to accept (one made before Capstan
/// kept them).
fn lacks_password(service: &Service, inputs: &WorkloadInputs) -> bool {
    DatabaseConnection::of(service).is_some_and(|c| {
        let key = c.password_key();
        !inputs.environment.iter().any(|e| e.key == key)
    })
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
            id: worker_id(),
            lease,
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Runs the next request that can start to its end; false when none could start.
    pub async fn run_next(&self) -> DomainResult<bool> {
        let claimed = self
            .capstan
            .store
            .claim_next(&self.id, self.capstan.now(), self.lease_until())
            .await?;
        match claimed {
            Some(request) => {
                self.run(request).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Deploys or stops the cluster queued longest, to its end; false when none is queued.
    pub async fn run_next_cluster(&self) -> DomainResult<bool> {
        let Some(cluster) = self
            .capstan
            .store
            .claim_cluster(&self.id, self.lease_until())
            .await?
        else {
            return Ok(false);
        };
        let Some(action) = cluster.run.state.action() else {
            return Ok(true);
        };
        let (target, environments) = {
            let mut unit = self.capstan.reading().await?;
            let target = self.capstan.target_of_cluster(&mut *unit, &cluster).await;
            let environments: Vec<EnvironmentId> = unit
                .find_environments(
                    cluster.organization_id,
                    Some(cluster.id),
                    PageRequest::all(),
                )
                .await?
                .items
                .iter()
                .map(|e| e.id)
                .collect();
            (target, environments)
        };
        let (verb, begun, done, failed) = match action {
            ClusterAction::Deploy => (
                "deploying",
                ClusterLogStep::Create,
                ClusterLogStep::Created,
                ClusterLogStep::CreateError,
            ),
            ClusterAction::Stop => (
                "stopping",
                ClusterLogStep::Pause,
                ClusterLogStep::Paused,
                ClusterLogStep::PauseError,
            ),
        };
        let mut log = ClusterLog::new(cluster.id);
        // No unit is held while the engine works.
        let target = match (target, action) {
            (Ok(target), ClusterAction::Deploy) => self.checked_target(&cluster, target).await,
            (target, _) => target.map_err(|e| e.to_string()),
        };
        let outcome = match target {
            Ok(target) => {
                log.line(
                    begun,
                    LogLevel::Info,
                    format!("{verb} the cluster on {}", target.describe()),
                );
                let outcome = self
                    .engine
                    .run_cluster(action, &cluster, &target, &environments)
                    .await
                    .map_err(|e| e.to_string());
                let reach = self.engine.host_reach(&target).filter(|_| outcome.is_ok());
                if let Some(reach) = reach {
                    if let Ok(runs) = reach.reach(&target).await {
                        log.line(
                            ClusterLogStep::ValidateSystemRequirements,
                            LogLevel::Info,
                            format!("{} answers: {runs}", target.describe()),
                        );
                    }
                }
                outcome
            }
            Err(e) => Err(format!("the cluster's Docker host: {e}")),
        };
        match &outcome {
            Ok(()) => log.line(done, LogLevel::Info, format!("the cluster is done {verb}")),
            Err(why) => log.line(failed, LogLevel::Error, why.clone()),
        }
        self.end_cluster(cluster, outcome, log.lines).await?;
        Ok(true)
    }

    /// `target` once who answers there is known and may run the cluster (see
    /// [`Capstan::claim_daemon`]); the engine then talks to that one only.
    async fn checked_target(&self, cluster: &Cluster, target: Target) -> Result<Target, String> {
        let identity = match self.engine.host_reach(&target) {
            Some(reach) => reach.identify(&target).await,
            None => None,
        };
        let Some(identity) = identity else {
            return Ok(target);
        };
        let identity = identity.map_err(|e| e.to_string())?;
        self.capstan
            .claim_daemon(cluster, &identity)
            .await
            .map_err(|e| e.to_string())?;
        Ok(target.claimed_by(identity.claim))
    }

    /// Records how a cluster's action ended, with its log, unless another worker took the
    /// cluster over.
    async fn end_cluster(
        &self,
        claimed: Cluster,
        outcome: Result<(), String>,
        lines: Vec<ClusterLogLine>,
    ) -> DomainResult<()> {
        let held = [Scope::Organization(claimed.organization_id)];
        self.capstan
            .in_unit(&held, async |tx| {
                let Some(mut cluster) = Repo::<Cluster>::get(tx, claimed.id).await? else {
                    return Ok(());
                };
                if cluster.run.claimed_by != claimed.run.claimed_by || !cluster.run.state.busy() {
                    return Ok(());
                }
                cluster.finish(outcome, self.capstan.now());
                tx.append_cluster_logs(&lines).await?;
                Ok(Repo::<Cluster>::update(tx, &cluster).await?)
            })
            .await
    }

    /// How often a running step's claim is renewed: three times a lease.
    fn renewal(&self) -> std::time::Duration {
        std::time::Duration::try_from(self.lease / 3).unwrap_or(std::time::Duration::from_secs(1))
    }

    /// Until when a claim made now holds. Leases follow the system's clock, not the
    /// application's: a clock a test suite moves must not end (or stretch) work in progress.
    fn lease_until(&self) -> time::OffsetDateTime {
        SystemClock.now() + self.lease
    }

    /// Waits while a test suite holds `r`'s service at `r`'s state, renewing the claim; a
    /// cancel or a lost claim (a reset) ends the wait. Before its first step a request is
    /// held at its action's queued state, whether it was taken at once or after waiting its
    /// turn (WAITING_RUNNING and the like).
    async fn held(&self, r: &mut DeploymentRequest) -> DomainResult<Held> {
        let controls = &self.capstan.engine_controls;
        let at = if r.state.is_waiting() {
            ServiceState::queued(r.action)
        } else {
            r.state
        };
        let mut waited = 0u32;
        while controls.holds(r.service_id, at) {
            self.engine.pause(HOLD_POLL).await;
            waited += 1;
            if waited % RENEW_EVERY != 0 {
                continue;
            }
            r.lease_until = Some(self.lease_until());
            let held = self
                .capstan
                .in_unit(&[], async |tx| Ok(tx.record(r).await?))
                .await?;
            match held {
                None => return Ok(Held::Lost),
                Some(true) if r.action.cancellable() => return Ok(Held::Canceled),
                Some(_) => {}
            }
        }
        Ok(Held::No)
    }

    /// Tells the observer a request has ended.
    fn ended(&self, r: &DeploymentRequest) {
        let from = r.started_at.unwrap_or(r.created_at);
        let to = r.finished_at.unwrap_or_else(|| self.capstan.now());
        let seconds = (to - from).as_seconds_f64().max(0.0);
        self.capstan
            .observer
            .deployment_finished(r.action, r.status, seconds);
        // The pull request a preview runs is told apart: a slow provider holds up no worker.
        let (capstan, request) = (self.capstan.clone(), r.clone());
        tokio::spawn(async move { capstan.preview_deployment_ended(&request).await });
    }

    /// Writes a request's progress in `tx`, with the event it makes; `None` when the claim
    /// was lost (and nothing is written).
    async fn write(
        &self,
        tx: &mut Unit,
        r: &DeploymentRequest,
        log: &StepLog,
    ) -> DomainResult<Option<bool>> {
        let held = self.renew(tx, r, log).await?;
        if held.is_some() {
            let event = self.capstan.deployment_event(tx, r).await?;
            self.capstan.emit(tx, event).await?;
        }
        Ok(held)
    }

    /// Renews a running request's claim and stores its new log lines, in `tx`: nothing a
    /// client is told of changed, so no event is made. `None` when the claim was lost.
    async fn renew(
        &self,
        tx: &mut Unit,
        r: &DeploymentRequest,
        log: &StepLog,
    ) -> DomainResult<Option<bool>> {
        let held = tx.record(r).await?;
        let lines = log.take();
        if held.is_some() && !lines.is_empty() {
            tx.append_logs(&lines).await?;
        }
        Ok(held)
    }

    /// Writes a request's progress in a unit of its own; `None` when the claim was lost. A
    /// request that ends here is reported to the observer.
    async fn record(&self, r: &DeploymentRequest, log: &StepLog) -> DomainResult<Option<bool>> {
        let held = self
            .capstan
            .in_unit(&[], async |tx| self.write(tx, r, log).await)
            .await?;
        if held.is_some() && r.status.is_finished() {
            self.ended(r);
        }
        Ok(held)
    }

    /// Ends the requests whose worker died (see `end_orphan`); returns how many.
    pub async fn recover(&self) -> DomainResult<usize> {
        let lease_now = SystemClock.now();
        let orphans = self
            .capstan
            .store
            .reclaim_expired(&self.id, lease_now, lease_now + self.lease)
            .await?;
        for cluster in self.capstan.store.expired_clusters(lease_now).await? {
            let mut log = ClusterLog::new(cluster.id);
            let step = match cluster.run.state.action() {
                Some(ClusterAction::Stop) => ClusterLogStep::PauseError,
                _ => ClusterLogStep::CreateError,
            };
            log.line(step, LogLevel::Error, WORKER_LOST.into());
            self.end_cluster(cluster, Err(WORKER_LOST.into()), log.lines)
                .await?;
        }
        let count = orphans.len();
        for r in orphans {
            self.end_orphan(r).await?;
        }
        Ok(count)
    }

    /// Ends a request whose worker died. A deployment cut in the router's switch, whose
    /// replicas still run, ends DEPLOYED (they were ready and took the routes); any other
    /// ends in the error state matching where it was, and what it started goes.
    async fn end_orphan(&self, mut r: DeploymentRequest) -> DomainResult<()> {
        let log = StepLog::new(&r, Masker::default());
        let step = r
            .steps
            .last()
            .filter(|s| s.status.is_none())
            .map(|s| s.name);
        if let Some(step) = step {
            log.enter(step);
        }
        // A cancel asked for wins: the request ends canceled, leaving what ran before it.
        let switching = step == Some(StepName::RouterDeployment) && !r.cancel_requested;
        if r.deploys() {
            let cut = if switching {
                Cut::InSwitch
            } else {
                Cut::BeforeSwitch
            };
            if let Some((Kept::Started, target, service)) = self.settle_cut(&r, cut).await {
                log.info(SWITCHED_WHEN_LOST);
                self.report_now(&target, &service).await;
                let last = Phase {
                    step: StepName::RouterDeployment,
                    then: Event::Succeeded,
                };
                return self.succeed(r, last, &log).await;
            }
        }
        log.error(WORKER_LOST);
        let now = self.capstan.now();
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
            self.record(&r, &log).await?;
        } else {
            r.state = transition(state, Event::Failed).map_err(forbidden)?;
            r.finish(RequestStatus::Error, Some(WORKER_LOST.into()), now);
            self.record_failure(&r, &log).await?;
        }
        Ok(())
    }

    /// What a deployment cut short left, settled by the engine to one set; `None` when it
    /// could not be (the service gone, the host unreadable: reconciliation takes it later).
    async fn settle_cut(&self, r: &DeploymentRequest, cut: Cut) -> Option<(Kept, Target, Service)> {
        let found = async {
            let mut unit = self.capstan.reading().await?;
            let tx = &mut *unit;
            let service = Repo::<Service>::get(tx, r.service_id).await?;
            let target = self
                .capstan
                .target_of_environment(tx, r.environment_id)
                .await?;
            DomainResult::Ok(service.map(|s| (s, target)))
        };
        let (service, target) = match found.await {
            Ok(found) => found?,
            Err(e) => {
                tracing::warn!(request = %r.id, error = %e, "could not read what a deployment cut short started");
                return None;
            }
        };
        match self.engine.settle_cut(&target, &service, r.id, cut).await {
            Ok(kept) => Some((kept, target, service)),
            Err(why) => {
                tracing::warn!(request = %r.id, error = %why, "could not settle what a deployment cut short started");
                None
            }
        }
    }

    async fn run(&self, mut r: DeploymentRequest) -> DomainResult<()> {
        let (mut service, mut inputs) = self.workload(&r).await?;
        if let Some(database) = service.as_ref().filter(|s| lacks_password(s, &inputs)) {
            self.capstan.ensure_credentials(database).await?;
            (service, inputs) = self.workload(&r).await?;
        }
        let masker = Masker::new(inputs.secret_values());
        let log = StepLog::new(&r, masker);
        let Some(service) = service else {
            r.finish(
                RequestStatus::Error,
                Some("the service no longer exists".into()),
                self.capstan.now(),
            );
            self.record(&r, &log).await?;
            return Ok(());
        };
        let target = {
            let mut unit = self.capstan.reading().await?;
            self.capstan
                .target_of_environment(&mut *unit, r.environment_id)
                .await
        };
        let target = match target {
            Ok(target) => target,
            Err(e) => {
                let reason = format!("the environment's cluster names no usable host: {e}");
                r.finish(RequestStatus::Error, Some(reason), self.capstan.now());
                self.record(&r, &log).await?;
                return Ok(());
            }
        };
        match self.held(&mut r).await? {
            Held::No => {}
            Held::Lost => return Ok(()),
            Held::Canceled => return self.cancel(r, &log).await,
        }
        let builds = r.deploys() && service.builds_from_git();
        r.state = transition(r.state, Event::Started { builds }).map_err(forbidden)?;
        let routed = self.capstan.router.is_some() && is_routed(&service);
        let phases = plan(r.action, service.kind(), builds, routed);
        for (i, phase) in phases.iter().enumerate() {
            let now = self.capstan.now();
            r.steps.push(Step {
                name: phase.step,
                status: None,
                started_at: now,
                finished_at: None,
            });
            log.enter(phase.step);
            r.lease_until = Some(self.lease_until());
            match self.record(&r, &log).await? {
                // Another worker took it over: its lease ran out.
                None => return Ok(()),
                Some(true) if r.action.cancellable() => {
                    return self.cancel(r, &log).await;
                }
                Some(_) => {}
            }
            match self.held(&mut r).await? {
                Held::No => {}
                Held::Lost => return Ok(()),
                Held::Canceled => return self.cancel(r, &log).await,
            }
            let asked = self
                .capstan
                .engine_controls
                .failure(r.service_id, phase.step);
            if let Some(reason) = asked {
                return self.fail(r, reason, &log).await;
            }
            let ran = self
                .run_retrying(phase.step, &mut r, &service, &inputs, &target, &log)
                .await?;
            match ran {
                Ran::Done(Ok(())) => {}
                Ran::Done(Err(e)) => return self.fail(r, e.to_string(), &log).await,
                Ran::Canceled => return self.cancel(r, &log).await,
                Ran::Lost => return Ok(()),
            }
            if i + 1 == phases.len() {
                if r.deploys() {
                    self.report_now(&target, &service).await;
                }
                return self.succeed(r, *phase, &log).await;
            }
            r.end_step(StepStatus::Success, self.capstan.now());
            r.state = transition(r.state, phase.then).map_err(forbidden)?;
        }
        Err(DomainError::Internal(format!(
            "no step to run for {}",
            r.action
        )))
    }

    /// The request's service and what its workload runs with (its secret values are what
    /// the log masks, whatever the engine). No unit is held past this read.
    async fn workload(
        &self,
        r: &DeploymentRequest,
    ) -> DomainResult<(Option<Service>, WorkloadInputs)> {
        let mut unit = self.capstan.reading().await?;
        let tx = &mut *unit;
        let service = Repo::<Service>::get(tx, r.service_id).await?;
        let inputs = match service.as_ref() {
            Some(s) => self.capstan.inputs_of(tx, s).await?,
            None => WorkloadInputs::default(),
        };
        Ok((service, inputs))
    }

    /// Runs one step, and again after each of [`RETRY_BACKOFF`]'s waits while it fails in a
    /// way that may pass; the log says each time why and when it runs again. A cancel or a
    /// lost claim during a wait ends it.
    async fn run_retrying(
        &self,
        step: StepName,
        r: &mut DeploymentRequest,
        service: &Service,
        inputs: &WorkloadInputs,
        target: &Target,
        log: &StepLog,
    ) -> DomainResult<Ran> {
        let mut waits = RETRY_BACKOFF.iter();
        loop {
            let ran = self
                .run_renewing(step, r, service, inputs, target, log)
                .await?;
            let Ran::Done(Err(e)) = &ran else {
                return Ok(ran);
            };
            let Some(wait) = waits.next().filter(|_| e.is_retriable()) else {
                return Ok(ran);
            };
            let retry = RETRY_BACKOFF.len() - waits.len();
            log.warn(&format!(
                "{e}; this may pass, so the step runs again in {} s (retry {retry} of {})",
                wait.as_secs(),
                RETRY_BACKOFF.len()
            ));
            if let Some(ended) = self.still_held(r, log).await? {
                return Ok(ended);
            }
            self.engine.pause(*wait).await;
            if let Some(ended) = self.still_held(r, log).await? {
                return Ok(ended);
            }
        }
    }

    /// Renews the claim on a running request and stores its log: `Some` how it ended when the
    /// claim went or the request was canceled.
    async fn still_held(
        &self,
        r: &mut DeploymentRequest,
        log: &StepLog,
    ) -> DomainResult<Option<Ran>> {
        r.lease_until = Some(self.lease_until());
        let held = self
            .capstan
            .in_unit(&[], async |tx| self.renew(tx, r, log).await)
            .await?;
        Ok(match held {
            None => Some(Ran::Lost),
            Some(true) if r.action.cancellable() => Some(Ran::Canceled),
            Some(_) => None,
        })
    }

    /// Runs one step while renewing the claim on its request, storing the log the step writes
    /// and looking for a cancel as it goes; a cancel or a lost claim is passed to the step.
    async fn run_renewing(
        &self,
        step: StepName,
        r: &DeploymentRequest,
        service: &Service,
        inputs: &WorkloadInputs,
        target: &Target,
        log: &StepLog,
    ) -> DomainResult<Ran> {
        use futures_util::future::{select, Either};
        use std::sync::atomic::{AtomicU8, Ordering};
        const RUNNING: u8 = 0;
        const CANCELED: u8 = 1;
        const LOST: u8 = 2;
        let (handle, cancel) = Cancel::pair();
        let ended = AtomicU8::new(RUNNING);
        let work = StepWork {
            step,
            request: r,
            service,
            inputs,
            target,
            log,
            cancel: &cancel,
        };
        let running = self.engine.run_step(work);
        let mut beat = r.clone();
        let renew = async {
            loop {
                self.engine.pause(self.renewal()).await;
                beat.lease_until = Some(self.lease_until());
                // A failed renewal is tried again at the next beat; a claim that ran out
                // meanwhile shows as lost then.
                let held = self
                    .capstan
                    .in_unit(&[], async |tx| self.renew(tx, &beat, log).await)
                    .await;
                let next = match held {
                    Ok(None) => LOST,
                    Ok(Some(true)) if beat.action.cancellable() => CANCELED,
                    _ => continue,
                };
                if ended.load(Ordering::Relaxed) == RUNNING {
                    ended.store(next, Ordering::Relaxed);
                    handle.cancel();
                }
            }
        };
        futures_util::pin_mut!(running, renew);
        let outcome = match select(running, renew).await {
            Either::Left((outcome, _)) => outcome,
            Either::Right(((), running)) => running.await,
        };
        Ok(match ended.load(Ordering::Relaxed) {
            CANCELED => Ran::Canceled,
            LOST => Ran::Lost,
            _ => Ran::Done(outcome),
        })
    }

    /// Ends a request in the error state of its step; the later stages of its batch will not
    /// run (their requests end canceled), in the same unit.
    /// The reason is masked as the log is: an engine's reason may quote the workload's output.
    async fn fail(
        &self,
        mut r: DeploymentRequest,
        reason: String,
        log: &StepLog,
    ) -> DomainResult<()> {
        let reason = log.mask(&reason);
        log.error(&reason);
        let now = self.capstan.now();
        r.end_step(StepStatus::Error, now);
        r.state = transition(r.state, Event::Failed).map_err(forbidden)?;
        r.finish(RequestStatus::Error, Some(reason), now);
        self.record_failure(&r, log).await
    }

    /// Records a request's failure and cancels the later stages of its deployment, in one unit.
    async fn record_failure(&self, r: &DeploymentRequest, log: &StepLog) -> DomainResult<()> {
        let now = r.finished_at.unwrap_or_else(|| self.capstan.now());
        let held = self
            .capstan
            .in_unit(&[Scope::Environment(r.environment_id)], async |tx| {
                if self.write(tx, r, log).await?.is_none() {
                    return Ok(false);
                }
                if r.batch_id != r.id.0 {
                    let why = format!(
                        "not run: the deployment of {} in an earlier stage failed",
                        r.snapshot.name
                    );
                    let ended = tx
                        .cancel_later_stages(r.batch_id, r.position, &why, now)
                        .await?;
                    self.capstan.emit_canceled(tx, &ended).await?;
                }
                Ok(true)
            })
            .await?;
        if held {
            self.ended(r);
        }
        Ok(())
    }

    /// The state machine's way out of a cancel: CANCELING, then CANCELED.
    fn canceled(r: &mut DeploymentRequest, now: time::OffsetDateTime) -> DomainResult<()> {
        r.end_step(StepStatus::Cancel, now);
        r.state = transition(r.state, Event::CancelRequested)
            .and_then(|s| transition(s, Event::Canceled))
            .map_err(forbidden)?;
        let reason = r.reason.take().unwrap_or_else(|| "canceled".into());
        r.finish(RequestStatus::Canceled, Some(reason), now);
        Ok(())
    }

    async fn cancel(&self, mut r: DeploymentRequest, log: &StepLog) -> DomainResult<()> {
        Self::canceled(&mut r, self.capstan.now())?;
        self.record(&r, log).await?;
        Ok(())
    }

    /// Ends a request and applies what it did, in one unit holding its environment: the
    /// request ends, the service records its deployment (or goes, for a deletion) and an
    /// environment whose deletion this was goes with its last service, all or nothing.
    async fn succeed(
        &self,
        mut r: DeploymentRequest,
        last: Phase,
        log: &StepLog,
    ) -> DomainResult<()> {
        let now = self.capstan.now();
        let ended = self
            .capstan
            .in_unit(&[Scope::Environment(r.environment_id)], async |tx| {
                // A cancel asked for during the last step ends the request at this boundary, as the
                // state machine has it (CANCELING, CANCELED), and nothing of it is applied.
                let stored = Repo::<DeploymentRequest>::get(tx, r.id).await?;
                let cancel = stored.as_ref().is_some_and(|s| s.cancel_requested);
                // The environment's deletion may have joined this deletion while it ran.
                if stored.is_some_and(|s| s.snapshot.deletes_environment) {
                    r.snapshot.deletes_environment = true;
                }
                if cancel && r.action.cancellable() {
                    Self::canceled(&mut r, now)?;
                    return Ok(self.write(tx, &r, log).await?.is_some());
                }
                r.end_step(StepStatus::Success, now);
                r.state = transition(r.state, last.then).map_err(forbidden)?;
                r.finish(RequestStatus::Success, None, now);
                if self.write(tx, &r, log).await?.is_none() {
                    // Another worker took it over: what it does is what counts.
                    return Ok(false);
                }
                if r.action == DeploymentAction::Uninstall {
                    if let Some(mut service) = Repo::<Service>::get(tx, r.service_id).await? {
                        service.record_uninstall(now);
                        Repo::<Service>::update(tx, &service).await?;
                    }
                }
                if r.deploys() {
                    // Read under the lock: an edit made while the deployment ran is kept, and makes
                    // the service OUT_OF_DATE.
                    if let Some(mut service) = Repo::<Service>::get(tx, r.service_id).await? {
                        service.record_deployment(&r, now);
                        Repo::<Service>::update(tx, &service).await?;
                    }
                }
                self.capstan.keep_cron_turn(tx, &r, now).await?;
                if r.action == DeploymentAction::Delete {
                    // Already gone: another worker's end of the same deletion.
                    match self.capstan.delete_service_row(tx, r.service_id).await {
                        Ok(()) | Err(crate::error::DomainError::NotFound(_)) => {}
                        Err(e) => return Err(e),
                    }
                    if r.deletes_environment() {
                        self.capstan
                            .finish_environment_deletion(tx, r.environment_id, r.batch_id)
                            .await?;
                    }
                }
                Ok(true)
            })
            .await?;
        if ended {
            self.ended(&r);
            if r.action == DeploymentAction::Delete {
                // A deleted database's backups went with its record: their dumps go now.
                if let Err(e) = self.capstan.collect_backups(self.engine.as_ref()).await {
                    tracing::warn!(error = %e, "could not remove the dumps of a deleted database's backups; reconciliation will");
                }
                if r.deletes_environment() {
                    self.environment_gone(r.environment_id).await;
                }
            }
        }
        Ok(())
    }

    /// Keeps what runs of a service just deployed, as its engine reads it now: its links are
    /// there when its deployment ends, on any host (the stream of reports may lag behind).
    async fn report_now(&self, target: &Target, service: &Service) {
        let Some(report) = self.engine.report(target, service).await else {
            return;
        };
        if let Err(e) = self.capstan.record_running(&report).await {
            tracing::warn!(service = %service.id, error = %e, "could not keep a service's running state");
        }
    }

    /// Once an environment's deletion took it away, what the engine keeps of it (its network)
    /// goes too; what cannot go now is reconciliation's to take later.
    async fn environment_gone(&self, environment: EnvironmentId) {
        let exists = match self.capstan.reading().await {
            Ok(mut unit) => Repo::<Environment>::get(&mut *unit, environment)
                .await
                .map(|e| e.is_some())
                .unwrap_or(true),
            Err(_) => true,
        };
        if exists {
            return;
        }
        if let Err(why) = self.engine.remove_environment(environment).await {
            tracing::warn!(environment = %environment, error = %why, "could not remove a deleted environment's network; reconciliation will");
        }
    }
}
