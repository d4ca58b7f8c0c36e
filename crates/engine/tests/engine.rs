#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The worker pool and the simulated engine over a real store of each backend, driven by the
//! step size: one request at a time per environment, cancellation, recovery of a dead worker's
//! request, and a shutdown that lets the request in flight finish.

use capstan_engine::{Engines, PoolSettings, SimulatedEngine, WorkerPool};
use domain::auth::{Principal, Role};
use domain::clock::{Clock, SystemClock};
use domain::engine::{Cut, EngineError, Kept, Target};
use domain::ids::{EnvironmentId, ServiceId};
use domain::model::*;
use domain::ports::{QueueClaims, Store};
use domain::services::{Capstan, DeployInput, SWITCHED_WHEN_LOST, WORKER_LOST};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (db, _url, _guard) = storage::testing::sqlite().await;
                    super::$name(std::sync::Arc::new(db)).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some((db, _url)) = storage::testing::postgres().await else { return };
                    super::$name(std::sync::Arc::new(db)).await;
                }
            )*
        }
    };
}
type Db = Arc<storage::Db>;

both_backends!(
    one_request_runs_at_a_time_per_environment,
    a_running_deployment_can_be_canceled,
    a_dead_workers_request_ends_in_its_error_state_and_the_queue_goes_on,
    a_dead_workers_request_stops_the_later_stages_of_its_deployment,
    shutdown_lets_the_request_in_flight_finish,
    a_new_commit_is_out_of_date_until_deployed,
    an_idle_pool_leaves_the_store_alone,
    a_queued_deployment_wakes_an_idle_worker,
    a_long_step_keeps_its_claim_and_a_cancel_stops_it_at_once,
    a_deployment_cut_short_ends_as_its_engine_settles_it,
    a_step_that_fails_in_a_way_that_may_pass_runs_again_and_succeeds,
    a_terminal_failure_fails_the_step_at_once,
    a_step_that_keeps_failing_transiently_fails_after_three_retries,
    an_engine_that_keeps_no_backups_refuses_a_backup_and_a_restore_naming_itself,
);

/// An engine whose deployment step runs until it is canceled (or 30 s), logging as it goes.
struct Endless {
    canceled_after: std::sync::Mutex<Option<Duration>>,
}

#[async_trait::async_trait]
impl domain::engine::Engine for Endless {
    fn name(&self, _: &Target) -> &'static str {
        "a test's engine"
    }
    async fn run_step(
        &self,
        work: domain::engine::StepWork<'_>,
    ) -> Result<(), domain::engine::EngineError> {
        let started = Instant::now();
        work.log.info("started");
        let secret = work
            .inputs
            .environment
            .iter()
            .find(|e| e.secret)
            .map(|e| e.value.expose().to_string())
            .unwrap_or_default();
        work.log.info(&format!("signing in with {secret}"));
        tokio::select! {
            _ = work.cancel.canceled() => {
                *self.canceled_after.lock().unwrap() = Some(started.elapsed());
                work.log.warn("stopped: canceled");
                Ok(())
            }
            _ = tokio::time::sleep(Duration::from_secs(30)) => Ok(()),
        }
    }
    async fn run_cluster(
        &self,
        _: ClusterAction,
        _: &Cluster,
        _: &Target,
        _: &[EnvironmentId],
    ) -> Result<(), domain::engine::EngineError> {
        Ok(())
    }
    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
    }
}

/// Another instance on the same PostgreSQL database: a worker pool of its own, told of the
/// first's changes by notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_queued_on_one_instance_starts_on_another_at_once() {
    let Some((db, url)) = storage::testing::postgres().await else {
        return;
    };
    let queuing = world(Arc::new(db)).await;
    let other = Arc::new(
        storage::Db::connect(&url, 4, &storage::testing::TEST_KEY)
            .await
            .unwrap(),
    );
    let working = Capstan::new(other.clone(), Arc::new(SystemClock));
    let step = Duration::from_millis(20);
    let pool = WorkerPool::start(
        working,
        Arc::new(Engines::every_kind(Arc::new(SimulatedEngine::new(step)))),
        PoolSettings { workers: 2, step },
    );
    let a = queuing.database("a").await;
    // Past the pool's first looks at the store: idle, it waits for a change.
    quiet(&other).await;
    let asked = Instant::now();
    queuing.deploy(a).await;
    queuing
        .wait(a, |s| s.state != ServiceState::DeploymentQueued)
        .await;
    let took = asked.elapsed();
    assert!(
        took < capstan_engine::FALLBACK / 4,
        "started after {took:?}: not told, it waited for its fallback look"
    );
    queuing.wait(a, settled).await;
    pool.shutdown().await;
}

struct World {
    capstan: Capstan,
    p: Principal,
    env: EnvironmentId,
}

async fn world(db: Db) -> World {
    let capstan = Capstan::new(db, Arc::new(SystemClock));
    let (org, token) = capstan
        .bootstrap_organization("Acme", Role::Admin, "t")
        .await
        .unwrap();
    let p = capstan.authenticate_api_token(&token.value).await.unwrap();
    capstan
        .create_cluster(
            &p,
            org.id,
            serde_json::from_value(json!({"name": "c", "region": "r", "cloud_provider": "CLOUDA"}))
                .unwrap(),
        )
        .await
        .unwrap();
    let project = capstan
        .create_project(
            &p,
            org.id,
            serde_json::from_value(json!({"name": "p"})).unwrap(),
        )
        .await
        .unwrap();
    let env = capstan
        .create_environment(
            &p,
            project.project.id,
            serde_json::from_value(json!({"name": "e"})).unwrap(),
        )
        .await
        .unwrap()
        .environment
        .id;
    World { capstan, p, env }
}

impl World {
    async fn database(&self, name: &str) -> ServiceId {
        self.capstan
            .create_service(
                &self.p,
                self.env,
                ServiceKind::Database,
                &json!({"name": name, "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
            )
            .await
            .unwrap()
            .id
    }

    async fn deploy(&self, id: ServiceId) -> ServiceStatus {
        self.capstan
            .service_action(
                &self.p,
                ServiceKind::Database,
                id,
                DeploymentAction::Deploy,
                DeployInput::default(),
            )
            .await
            .unwrap()
    }

    async fn status(&self, id: ServiceId) -> ServiceStatus {
        self.capstan
            .service_status(&self.p, ServiceKind::Database, id)
            .await
            .unwrap()
    }

    /// Polls until `id` is in a state `until` accepts.
    async fn wait(&self, id: ServiceId, until: impl Fn(&ServiceStatus) -> bool) -> ServiceStatus {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.status(id).await;
            if until(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "still {s:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn pool(&self, step_ms: u64) -> WorkerPool {
        let step = Duration::from_millis(step_ms);
        WorkerPool::start(
            self.capstan.clone(),
            Arc::new(Engines::every_kind(Arc::new(SimulatedEngine::new(step)))),
            PoolSettings { workers: 3, step },
        )
    }
}

fn settled(s: &ServiceStatus) -> bool {
    s.deployment_requests_count == 0
}

async fn one_request_runs_at_a_time_per_environment(db: Db) {
    let w = world(db).await;
    let a = w.database("a").await;
    let b = w.database("b").await;
    let pool = w.pool(400);
    w.deploy(a).await;
    w.deploy(b).await;
    w.wait(a, |s| s.state == ServiceState::Deploying).await;
    // Three workers, yet b waits for a: they share an environment. (b's state is read while
    // a is seen deploying both before and after, so a slow machine cannot fool the check.)
    let b_meanwhile = w.status(b).await;
    assert_eq!(
        w.status(a).await.state,
        ServiceState::Deploying,
        "a step outlasts three reads"
    );
    assert_eq!(b_meanwhile.state, ServiceState::WaitingRunning);
    let a_done = w.wait(a, settled).await;
    assert_eq!(a_done.state, ServiceState::Deployed);
    assert_eq!(w.wait(b, settled).await.state, ServiceState::Deployed);
    let a_steps = a_done.steps.unwrap();
    assert_eq!(
        a_steps
            .details
            .iter()
            .map(|d| d.step_name)
            .collect::<Vec<_>>(),
        [StepName::DeploymentQueueing, StepName::Deployment]
    );
    pool.shutdown().await;
}

async fn a_running_deployment_can_be_canceled(db: Db) {
    let w = world(db).await;
    // An application builds, then deploys: a cancel takes effect at the step boundary.
    let app = w
        .capstan
        .create_service(
            &w.p,
            w.env,
            ServiceKind::Application,
            &json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await
        .unwrap()
        .id;
    let b = w.database("b").await;
    let pool = w.pool(600);
    w.capstan
        .service_action(
            &w.p,
            ServiceKind::Application,
            app,
            DeploymentAction::Deploy,
            DeployInput {
                git_commit_id: Some("abc".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    w.deploy(b).await;
    let app_status = || async {
        w.capstan
            .service_status(&w.p, ServiceKind::Application, app)
            .await
            .unwrap()
    };
    while app_status().await.state != ServiceState::Building {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let env = w
        .capstan
        .cancel_environment_deployment(&w.p, w.env)
        .await
        .unwrap();
    assert_eq!(env.id, w.env);
    let canceled = w.status(b).await;
    assert_eq!(
        canceled.state,
        ServiceState::Canceled,
        "the waiting one at once"
    );
    assert_eq!(
        canceled.status_details.status,
        ServiceActionStatus::Canceled
    );
    assert_eq!(app_status().await.state, ServiceState::Canceling);
    let deadline = Instant::now() + Duration::from_secs(20);
    let done = loop {
        let s = app_status().await;
        if settled(&s) {
            break s;
        }
        assert!(Instant::now() < deadline, "{s:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(done.state, ServiceState::Canceled);
    assert_eq!(done.status_details.status, ServiceActionStatus::Canceled);
    assert_eq!(
        done.service_deployment_status,
        DeploymentStatus::NeverDeployed
    );
    let steps = done.steps.unwrap().details;
    assert_eq!(steps[1].step_name, StepName::Build);
    assert_eq!(steps[1].status, Some(StepStatus::Success));
    assert_eq!(steps[2].status, Some(StepStatus::Cancel));
    pool.shutdown().await;
}

async fn a_dead_workers_request_ends_in_its_error_state_and_the_queue_goes_on(db: Db) {
    let store = db.clone();
    let w = world(db).await;
    let a = w.database("a").await;
    let b = w.database("b").await;
    w.deploy(a).await;
    w.deploy(b).await;
    // A worker claims a's request, starts deploying, and dies: its lease runs out.
    let now = SystemClock.now();
    let mut claimed = store
        .claim_next("dead-worker", now, now + time::Duration::milliseconds(50))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.service_id, a);
    claimed.state = transition(claimed.state, Event::Started { builds: false }).unwrap();
    claimed.steps.push(Step {
        name: StepName::Deployment,
        status: None,
        started_at: now,
        finished_at: None,
    });
    assert_eq!(
        store.read().await.unwrap().record(&claimed).await.unwrap(),
        Some(false)
    );
    assert_eq!(w.status(a).await.state, ServiceState::Deploying);
    // It had written a line of its log before it died.
    let log = domain::engine::StepLog::new(&claimed, Masker::default());
    log.enter(StepName::Deployment);
    log.info("pulling the image");
    store
        .read()
        .await
        .unwrap()
        .append_logs(&log.take())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let pool = w.pool(20);
    let a_done = w.wait(a, settled).await;
    assert_eq!(a_done.state, ServiceState::DeploymentError);
    assert_eq!(a_done.status_details.status, ServiceActionStatus::Error);
    let ended: DeploymentRequest =
        domain::ports::Repo::get(&mut *store.read().await.unwrap(), claimed.id)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(ended.reason.as_deref(), Some(WORKER_LOST));
    assert_eq!(ended.steps[0].status, Some(StepStatus::Error));
    let lines = store
        .read()
        .await
        .unwrap()
        .environment_logs(w.env, 100)
        .await
        .unwrap();
    let messages: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        messages,
        ["pulling the image", WORKER_LOST],
        "the line of why it ended follows the dead worker's own"
    );
    assert_eq!(
        w.wait(b, settled).await.state,
        ServiceState::Deployed,
        "nothing queued is lost"
    );
    pool.shutdown().await;
}

async fn a_dead_workers_request_stops_the_later_stages_of_its_deployment(db: Db) {
    let store = db.clone();
    let w = world(db).await;
    let a = w.database("a").await;
    let b = w.database("b").await;
    let later = w
        .capstan
        .create_stage(
            &w.p,
            w.env,
            serde_json::from_value(json!({"name": "later"})).unwrap(),
        )
        .await
        .unwrap();
    w.capstan
        .attach_service_to_stage(&w.p, later.stage.id, b, false)
        .await
        .unwrap();
    w.capstan
        .environment_action(
            &w.p,
            w.env,
            DeploymentAction::Deploy,
            domain::services::Selection::All,
        )
        .await
        .unwrap();
    let now = SystemClock.now();
    let mut claimed = store
        .claim_next("dead-worker", now, now + time::Duration::milliseconds(50))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.service_id, a, "the first stage first");
    claimed.state = transition(claimed.state, Event::Started { builds: false }).unwrap();
    store.read().await.unwrap().record(&claimed).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pool = w.pool(20);
    assert_eq!(
        w.wait(a, settled).await.state,
        ServiceState::DeploymentError
    );
    let b_done = w.wait(b, settled).await;
    assert_eq!(
        b_done.state,
        ServiceState::Canceled,
        "the later stage never ran"
    );
    assert!(b_done.steps.is_none());
    pool.shutdown().await;
}

async fn shutdown_lets_the_request_in_flight_finish(db: Db) {
    let w = world(db).await;
    let a = w.database("a").await;
    let b = w.database("b").await;
    let pool = w.pool(200);
    w.deploy(a).await;
    w.deploy(b).await;
    w.wait(a, |s| s.state == ServiceState::Deploying).await;
    pool.shutdown().await;
    let a_now = w.status(a).await;
    assert_eq!(
        a_now.state,
        ServiceState::Deployed,
        "finished before stopping"
    );
    assert_eq!(a_now.deployment_requests_count, 0);
    let b_now = w.status(b).await;
    assert_eq!(
        b_now.state,
        ServiceState::WaitingRunning,
        "not started (it waited behind a from the start): left for the next process"
    );
}

async fn a_new_commit_is_out_of_date_until_deployed(db: Db) {
    let w = world(db).await;
    let app = w
        .capstan
        .create_service(
            &w.p,
            w.env,
            ServiceKind::Application,
            &json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api"}}),
        )
        .await
        .unwrap()
        .id;
    let deploy = |commit: &str| {
        w.capstan.service_action(
            &w.p,
            ServiceKind::Application,
            app,
            DeploymentAction::Deploy,
            DeployInput {
                git_commit_id: Some(commit.into()),
                ..Default::default()
            },
        )
    };
    let status = || async {
        w.capstan
            .service_status(&w.p, ServiceKind::Application, app)
            .await
            .unwrap()
    };
    let pool = w.pool(10);
    deploy("aaa").await.unwrap();
    while !settled(&status().await) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pool.shutdown().await;
    assert_eq!(
        status().await.service_deployment_status,
        DeploymentStatus::UpToDate
    );
    // No worker runs now: the request waits, and the service wants another commit.
    let same = deploy("aaa").await.unwrap();
    assert_eq!(same.service_deployment_status, DeploymentStatus::UpToDate);
    let queued = deploy("bbb").await.unwrap();
    assert_eq!(
        queued.service_deployment_status,
        DeploymentStatus::OutOfDate
    );
    assert_eq!(queued.deployment_requests_count, 2);
    let pool = w.pool(10);
    while !settled(&status().await) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    pool.shutdown().await;
    assert_eq!(
        status().await.service_deployment_status,
        DeploymentStatus::UpToDate
    );
}

/// Waits until `db` has lent no connection for half a second (bounded), and answers the count.
async fn quiet(db: &storage::Db) -> u64 {
    use domain::ports::Health;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = db.connections_lent();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = db.connections_lent();
        if now == seen {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "never idle: {now} connections lent"
        );
        seen = now;
    }
}

async fn an_idle_pool_leaves_the_store_alone(db: Db) {
    let w = world(db.clone()).await;
    let a = w.database("a").await;
    let pool = w.pool(10);
    w.deploy(a).await;
    w.wait(a, settled).await;
    // Once its first looks are done, an idle pool waits: no claim, no sequencing, no delivery
    // or rule looked for (it polled every few milliseconds before).
    let before = quiet(&db).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    use domain::ports::Health;
    assert_eq!(
        db.connections_lent(),
        before,
        "the idle pool used the store"
    );
    pool.shutdown().await;
}

async fn a_queued_deployment_wakes_an_idle_worker(db: Db) {
    let w = world(db.clone()).await;
    let a = w.database("a").await;
    let pool = w.pool(10);
    quiet(&db).await;
    let asked = Instant::now();
    w.deploy(a).await;
    w.wait(a, |s| s.state != ServiceState::DeploymentQueued)
        .await;
    let took = asked.elapsed();
    assert!(
        took < capstan_engine::FALLBACK / 4,
        "started after {took:?}: the worker was not woken"
    );
    w.wait(a, settled).await;
    pool.shutdown().await;
}

async fn a_long_step_keeps_its_claim_and_a_cancel_stops_it_at_once(db: Db) {
    let store = db.clone();
    let w = world(db).await;
    let a = w.database("a").await;
    w.capstan
        .create_variable(
            &w.p,
            VariableParent::Environment(w.env),
            serde_json::from_value(json!({"key": "PASSWORD", "value": "hunter2-of-a"})).unwrap(),
            true,
        )
        .await
        .unwrap();
    let engine = Arc::new(Endless {
        canceled_after: Default::default(),
    });
    // A lease far shorter than the step: only its renewal keeps the request this worker's.
    let lease = time::Duration::milliseconds(600);
    let worker = domain::services::Worker::new(w.capstan.clone(), engine.clone(), lease);
    let rival = domain::services::Worker::new(w.capstan.clone(), engine.clone(), lease);
    w.deploy(a).await;
    let running = tokio::spawn(async move { worker.run_next().await.unwrap() });
    w.wait(a, |s| s.state == ServiceState::Deploying).await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(rival.recover().await.unwrap(), 0, "the claim was renewed");
    }
    assert_eq!(w.status(a).await.state, ServiceState::Deploying);
    let asked = Instant::now();
    w.capstan
        .cancel_environment_deployment(&w.p, w.env)
        .await
        .unwrap();
    assert!(running.await.unwrap(), "the worker ran a request");
    let after = engine
        .canceled_after
        .lock()
        .unwrap()
        .expect("the step saw the cancel");
    assert!(
        after >= Duration::from_secs(2),
        "the step ran past its lease: {after:?}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "stopped within a renewal, not at the step's end: {:?}",
        asked.elapsed()
    );
    let done = w.status(a).await;
    assert_eq!(done.state, ServiceState::Canceled, "{done:?}");
    let mut unit = store.read().await.unwrap();
    let lines = unit.environment_logs(w.env, 100).await.unwrap();
    let messages: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        messages,
        ["started", "signing in with ********", "stopped: canceled"],
        "every line kept, in order, the secret masked"
    );
    assert!(lines
        .iter()
        .all(|l| l.step == StepName::Deployment && l.service_id == a));
    assert_eq!(lines[2].level, LogLevel::Warning);
}

/// An engine that settles a cut deployment as it is told to, noting how far the worker said
/// the deployment had come.
struct Settling {
    kept: Kept,
    cuts: std::sync::Mutex<Vec<Cut>>,
}

#[async_trait::async_trait]
impl domain::engine::Engine for Settling {
    fn name(&self, _: &Target) -> &'static str {
        "a test's engine"
    }
    async fn run_step(
        &self,
        _: domain::engine::StepWork<'_>,
    ) -> Result<(), domain::engine::EngineError> {
        Ok(())
    }
    async fn run_cluster(
        &self,
        _: ClusterAction,
        _: &Cluster,
        _: &Target,
        _: &[EnvironmentId],
    ) -> Result<(), domain::engine::EngineError> {
        Ok(())
    }
    async fn pause(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
    }
    async fn settle_cut(
        &self,
        _: &Target,
        _: &Service,
        _: domain::ids::DeploymentRequestId,
        cut: Cut,
    ) -> Result<Kept, domain::engine::EngineError> {
        self.cuts.lock().unwrap().push(cut);
        Ok(self.kept)
    }
}

/// A deployment whose worker died in `step` (its lease already run out).
async fn cut_in(store: &storage::Db, w: &World, name: &str, step: StepName) -> ServiceId {
    let id = w.database(name).await;
    w.deploy(id).await;
    let now = SystemClock.now();
    let mut claimed = store
        .claim_next("dead-worker", now, now + time::Duration::milliseconds(50))
        .await
        .unwrap()
        .unwrap();
    claimed.state = transition(claimed.state, Event::Started { builds: false }).unwrap();
    for (name, done) in [
        (StepName::Deployment, step != StepName::Deployment),
        (step, false),
    ] {
        claimed.steps.push(Step {
            name,
            status: done.then_some(StepStatus::Success),
            started_at: now,
            finished_at: done.then_some(now),
        });
        if name == step {
            break;
        }
    }
    store.read().await.unwrap().record(&claimed).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    id
}

/// A deployment cut in the router's switch ends DEPLOYED when the engine kept its replicas
/// (they were ready and serve), in error when it kept the previous ones; one cut before the
/// switch is told so, and ends in error.
async fn a_deployment_cut_short_ends_as_its_engine_settles_it(db: Db) {
    let w = world(db.clone()).await;
    for (n, (kept, step, cut, state)) in [
        (
            Kept::Started,
            StepName::RouterDeployment,
            Cut::InSwitch,
            ServiceState::Deployed,
        ),
        (
            Kept::Previous,
            StepName::RouterDeployment,
            Cut::InSwitch,
            ServiceState::DeploymentError,
        ),
        (
            Kept::Previous,
            StepName::Deployment,
            Cut::BeforeSwitch,
            ServiceState::DeploymentError,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let id = cut_in(&db, &w, &format!("cut{n}"), step).await;
        let engine = Arc::new(Settling {
            kept,
            cuts: Default::default(),
        });
        let pool = WorkerPool::start(
            w.capstan.clone(),
            engine.clone(),
            PoolSettings {
                workers: 1,
                step: Duration::from_millis(20),
            },
        );
        let done = w.wait(id, settled).await;
        pool.shutdown().await;
        assert_eq!(done.state, state, "{kept:?} {step:?}");
        assert_eq!(*engine.cuts.lock().unwrap(), [cut]);
        let lines = db
            .read()
            .await
            .unwrap()
            .environment_logs(w.env, 100)
            .await
            .unwrap();
        let said = if state == ServiceState::Deployed {
            SWITCHED_WHEN_LOST
        } else {
            WORKER_LOST
        };
        assert!(
            lines.iter().any(|l| l.message == said),
            "{kept:?} {step:?}: {lines:?}"
        );
    }
}

/// An engine whose steps fail with the errors it is given, one per run, then succeed; its
/// pauses pass twenty times faster than asked (the retries' waits with them).
struct Flaky {
    failures: std::sync::Mutex<std::collections::VecDeque<EngineError>>,
    runs: std::sync::atomic::AtomicUsize,
    paused: std::sync::Mutex<Vec<Duration>>,
}

impl Flaky {
    fn failing(failures: impl IntoIterator<Item = EngineError>) -> Arc<Self> {
        Arc::new(Self {
            failures: std::sync::Mutex::new(failures.into_iter().collect()),
            runs: Default::default(),
            paused: Default::default(),
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The waits asked for that were not a renewal's (a third of the lease).
    fn backoffs(&self, renewal: Duration) -> Vec<Duration> {
        let paused = self.paused.lock().unwrap();
        paused.iter().copied().filter(|p| *p != renewal).collect()
    }
}

#[async_trait::async_trait]
impl domain::engine::Engine for Flaky {
    fn name(&self, _: &Target) -> &'static str {
        "a test's engine"
    }
    async fn run_step(&self, work: domain::engine::StepWork<'_>) -> Result<(), EngineError> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        work.log.info("asking the daemon");
        match self.failures.lock().unwrap().pop_front() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    async fn run_cluster(
        &self,
        _: ClusterAction,
        _: &Cluster,
        _: &Target,
        _: &[EnvironmentId],
    ) -> Result<(), EngineError> {
        Ok(())
    }
    async fn pause(&self, wait: Duration) {
        self.paused.lock().unwrap().push(wait);
        tokio::time::sleep(wait / 20).await;
    }
}

/// Deploys a database with `engine` on one worker; its status once settled and the messages
/// of its log.
async fn deployed_by(db: Db, engine: Arc<Flaky>) -> (ServiceStatus, Vec<(LogLevel, String)>) {
    let store = db.clone();
    let w = world(db).await;
    let a = w.database("a").await;
    let worker =
        domain::services::Worker::new(w.capstan.clone(), engine, time::Duration::SECOND * 30);
    w.deploy(a).await;
    assert!(worker.run_next().await.unwrap(), "the worker ran a request");
    let status = w.wait(a, settled).await;
    let mut unit = store.read().await.unwrap();
    let lines = unit.environment_logs(w.env, 100).await.unwrap();
    let messages = lines.into_iter().map(|l| (l.level, l.message)).collect();
    (status, messages)
}

const RENEWAL: Duration = Duration::from_secs(10);

async fn a_step_that_fails_in_a_way_that_may_pass_runs_again_and_succeeds(db: Db) {
    let engine = Flaky::failing([EngineError::transient(
        "could not create the container: the connection to the Docker daemon was reset",
    )]);
    let (status, log) = deployed_by(db, engine.clone()).await;
    assert_eq!(status.state, ServiceState::Deployed, "{status:?} {log:?}");
    assert_eq!(engine.runs(), 2, "run once more");
    assert_eq!(engine.backoffs(RENEWAL), [Duration::from_secs(1)]);
    assert_eq!(
        log,
        [
            (LogLevel::Info, "asking the daemon".to_string()),
            (
                LogLevel::Warning,
                "could not create the container: the connection to the Docker daemon was reset; \
                 this may pass, so the step runs again in 1 s (retry 1 of 3)"
                    .to_string()
            ),
            (LogLevel::Info, "asking the daemon".to_string()),
        ]
    );
}

async fn a_terminal_failure_fails_the_step_at_once(db: Db) {
    let engine =
        Flaky::failing([EngineError::terminal("no such image: web:9")
            .with_hint("check the image's name and tag")]);
    let (status, log) = deployed_by(db, engine.clone()).await;
    assert_eq!(status.state, ServiceState::DeploymentError, "{status:?}");
    assert_eq!(engine.runs(), 1, "not run again");
    assert!(engine.backoffs(RENEWAL).is_empty());
    let reason = "no such image: web:9 (hint: check the image's name and tag)";
    assert_eq!(
        log,
        [
            (LogLevel::Info, "asking the daemon".to_string()),
            (LogLevel::Error, reason.to_string()),
        ]
    );
}

async fn a_step_that_keeps_failing_transiently_fails_after_three_retries(db: Db) {
    let refused = || EngineError::transient("the Docker daemon could not be reached");
    let engine = Flaky::failing([refused(), refused(), refused(), refused(), refused()]);
    let (status, log) = deployed_by(db, engine.clone()).await;
    assert_eq!(status.state, ServiceState::DeploymentError, "{status:?}");
    assert_eq!(engine.runs(), 4, "one run and three more");
    assert_eq!(
        engine.backoffs(RENEWAL),
        [1, 2, 4].map(Duration::from_secs),
        "waits of 1, 2 and 4 s"
    );
    let retries: Vec<&str> = log
        .iter()
        .filter(|(level, _)| *level == LogLevel::Warning)
        .map(|(_, m)| m.rsplit("(").next().unwrap())
        .collect();
    assert_eq!(retries, ["retry 1 of 3)", "retry 2 of 3)", "retry 3 of 3)"]);
    assert_eq!(
        log.last().unwrap(),
        &(
            LogLevel::Error,
            "the Docker daemon could not be reached".to_string()
        )
    );
}

/// An engine that offers no database backups (the test's) is asked before anything is
/// recorded: a backup and a restore are refused at once, naming it.
async fn an_engine_that_keeps_no_backups_refuses_a_backup_and_a_restore_naming_itself(db: Db) {
    use domain::error::{Conflict, DomainError};
    use domain::ports::Repo;
    let store = db.clone();
    let w = world(db).await;
    let capstan = w.capstan.clone().with_engine(Flaky::failing([]));
    let a = w.database("a").await;
    let worker = domain::services::Worker::new(
        capstan.clone(),
        Flaky::failing([]),
        time::Duration::SECOND * 30,
    );
    w.deploy(a).await;
    assert!(worker.run_next().await.unwrap(), "the worker ran a request");
    w.wait(a, settled).await;
    let refused = |e: DomainError| match e {
        DomainError::Conflict(Conflict::State(why)) => why,
        other => panic!("not a conflict: {other:?}"),
    };
    let taken = capstan
        .create_backup(&w.p, a, "nightly".into(), "m".into())
        .await
        .unwrap_err();
    assert_eq!(refused(taken), "a test's engine keeps no database backups");
    let listed = capstan
        .list_backups(&w.p, a, domain::pagination::PageRequest::default())
        .await
        .unwrap();
    assert!(listed.items.is_empty(), "nothing recorded");

    // A backup another engine kept, restored through this one.
    let mut unit = store.write().await.unwrap();
    let database = Repo::<Service>::get(&mut *unit, a).await.unwrap().unwrap();
    let now = time::OffsetDateTime::now_utc();
    let kept = DatabaseBackup {
        id: domain::ids::BackupId::generate(),
        organization_id: database.organization_id,
        database_id: a,
        name: "kept".into(),
        message: String::new(),
        state: BackupState::Done,
        size_bytes: 10,
        reason: None,
        created_at: now,
        updated_at: now,
    };
    Repo::<DatabaseBackup>::insert(&mut *unit, &kept)
        .await
        .unwrap();
    unit.commit().await.unwrap();
    let restored = capstan.restore_backup(&w.p, a, kept.id).await.unwrap_err();
    assert_eq!(
        refused(restored),
        "a test's engine keeps no database backups"
    );
}
