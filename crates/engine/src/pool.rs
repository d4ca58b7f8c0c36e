//! The background workers: each claims a request, runs it to its end, and claims the next; one
//! more task ends the requests of workers that died, and one starts and stops environments at
//! their deployment rule's hours, one sequences the event log and one sends webhook deliveries.
//! Idle, each waits for the change it acts on (`domain::changes`), not polling the store.
//! On shutdown they stop claiming and finish what they hold.

use domain::changes::{Change, Rung};
use domain::engine::Engine;
use domain::services::{Capstan, Worker, LEASE};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// How many requests this process runs at once (of different environments).
    pub workers: usize,
    /// How long a simulated step takes; the pause after a failed look follows from it.
    pub step: Duration,
}

impl PoolSettings {
    /// The shortest pause between two looks at the store when a look failed or came early.
    fn poll(&self) -> Duration {
        (self.step / 2).clamp(Duration::from_millis(20), Duration::from_millis(500))
    }
}

/// How long a task waits for a change it is not told of (a notification lost with its
/// connection, a write by another process on the same SQLite file) before it looks anyway.
/// All the tasks of an idle server together stay under one transaction a second.
pub const FALLBACK: Duration = Duration::from_secs(30);

pub struct WorkerPool {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    capstan: Capstan,
}

impl WorkerPool {
    pub fn start(capstan: Capstan, engine: Arc<dyn Engine>, settings: PoolSettings) -> Self {
        let (stop, stopped) = watch::channel(false);
        let lease = time::Duration::try_from(LEASE).unwrap_or(time::Duration::MINUTE);
        let mut tasks = JoinSet::new();
        for _ in 0..settings.workers.max(1) {
            let worker = Worker::new(capstan.clone(), engine.clone(), lease);
            tasks.spawn(run(
                capstan.clone(),
                worker,
                stopped.clone(),
                settings.poll(),
            ));
        }
        tasks.spawn(observe(capstan.clone(), engine.clone(), stopped.clone()));
        tasks.spawn(collect_output(
            capstan.clone(),
            engine.clone(),
            stopped.clone(),
        ));
        tasks.spawn(reconcile(capstan.clone(), engine.clone(), stopped.clone()));
        let reaper = Worker::new(capstan.clone(), engine, lease);
        tasks.spawn(reap(reaper, stopped.clone()));
        tasks.spawn(schedule(capstan.clone(), stopped.clone(), settings.poll()));
        tasks.spawn(sequence(capstan.clone(), stopped.clone()));
        tasks.spawn(deliver(capstan.clone(), stopped, settings.poll()));
        Self {
            stop,
            tasks,
            capstan,
        }
    }

    /// Stops claiming, lets every request in flight finish, and returns when all have (held
    /// ones are let go: a stop does not wait on a test suite's release).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        self.capstan.release_all();
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Sleeps `pause` unless told to stop first; true when told to stop.
async fn pause_or_stop(stopped: &mut watch::Receiver<bool>, pause: Duration) -> bool {
    if *stopped.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(pause) => *stopped.borrow(),
        _ = stopped.changed() => true,
    }
}

/// As [`pause_or_stop`], ending early when `rung` completes (a change to act on).
async fn wait_or_stop(
    stopped: &mut watch::Receiver<bool>,
    rung: Rung<'_>,
    pause: Duration,
) -> bool {
    timed_wait_or_stop(stopped, rung, None, pause).await
}

/// As [`wait_or_stop`], for tasks that sleep until an hour: ending early too when the clock is
/// moved (`moved`, a manual clock's).
async fn timed_wait_or_stop(
    stopped: &mut watch::Receiver<bool>,
    rung: Rung<'_>,
    moved: Option<Rung<'_>>,
    pause: Duration,
) -> bool {
    if *stopped.borrow() {
        return true;
    }
    let moved = async {
        match moved {
            Some(m) => m.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = rung => *stopped.borrow(),
        _ = moved => *stopped.borrow(),
        _ = tokio::time::sleep(pause) => *stopped.borrow(),
        _ = stopped.changed() => true,
    }
}

async fn run(capstan: Capstan, worker: Worker, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        if *stopped.borrow() {
            return;
        }
        // Made before the claim, so a request queued after the claim found nothing wakes it.
        let rung = capstan.changes().listen(Change::Queue);
        let next = match worker.run_next().await {
            Ok(false) => worker.run_next_cluster().await,
            ran => ran,
        };
        let stop = match next {
            Ok(true) => false,
            Ok(false) => wait_or_stop(&mut stopped, rung, FALLBACK).await,
            Err(e) => {
                tracing::error!(worker = worker.id(), error = %e, cause = ?e, "deployment worker failed");
                pause_or_stop(&mut stopped, poll * 4).await
            }
        };
        if stop {
            return;
        }
    }
}

/// A claim outlives its worker by its lease; nothing tells of a death, so this one task polls,
/// slowly: once a lease, so a dead worker's request ends within two.
async fn reap(worker: Worker, mut stopped: watch::Receiver<bool>) {
    loop {
        match worker.recover().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(count = n, "ended requests whose worker died"),
            Err(e) => tracing::error!(error = %e, "could not look for requests of dead workers"),
        }
        if pause_or_stop(&mut stopped, LEASE.min(FALLBACK)).await {
            return;
        }
    }
}

/// Keeps what the engine sees run, as it reports it; asks again after a pause when its
/// reports end (the daemon restarted, say). Idle, it waits on the engine's events, not the store.
async fn observe(capstan: Capstan, engine: Arc<dyn Engine>, mut stopped: watch::Receiver<bool>) {
    use futures_util::StreamExt;
    loop {
        let Some(mut reports) = engine.observe() else {
            return;
        };
        loop {
            let next = tokio::select! {
                next = reports.next() => next,
                _ = stopped.changed() => return,
            };
            let Some(report) = next else { break };
            if let Err(e) = capstan.record_running(&report).await {
                tracing::error!(service = %report.service_id, error = %e, "could not keep a service's running state");
            }
        }
        tracing::warn!("the engine's reports of what runs ended; asking again");
        if pause_or_stop(&mut stopped, Duration::from_secs(5)).await {
            return;
        }
    }
}

/// The most lines of output kept in one unit.
const OUTPUT_BATCH: usize = 500;

/// Keeps what the engine's workloads print: each unit takes the lines read so far (up to
/// [`OUTPUT_BATCH`]), so a chatty workload costs a unit per batch, not per line, and a quiet
/// one none. Asks again after a pause when the engine's lines end.
async fn collect_output(
    capstan: Capstan,
    engine: Arc<dyn Engine>,
    mut stopped: watch::Receiver<bool>,
) {
    use futures_util::{FutureExt, StreamExt};
    loop {
        let Some(mut lines) = engine.output() else {
            return;
        };
        loop {
            let first = tokio::select! {
                next = lines.next() => next,
                _ = stopped.changed() => return,
            };
            let Some(first) = first else { break };
            let mut batch = vec![first];
            while batch.len() < OUTPUT_BATCH {
                match lines.next().now_or_never() {
                    Some(Some(line)) => batch.push(line),
                    _ => break,
                }
            }
            if let Err(e) = capstan.record_output(&batch).await {
                tracing::error!(lines = batch.len(), error = %e, "could not keep workloads' output");
            }
        }
        tracing::warn!("the engine's output ended; asking again");
        if pause_or_stop(&mut stopped, Duration::from_secs(5)).await {
            return;
        }
    }
}

/// How often what the engine runs is compared with what exists (and at start-up).
const RECONCILE: Duration = Duration::from_secs(60);

/// Removes the workloads of services that no longer exist, at start-up and once a minute: an
/// engine with nothing to show costs no transaction.
async fn reconcile(capstan: Capstan, engine: Arc<dyn Engine>, mut stopped: watch::Receiver<bool>) {
    loop {
        match capstan.reconcile(engine.as_ref()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                count = n,
                "removed the workloads of services that no longer exist"
            ),
            Err(e) => tracing::warn!(error = %e, "could not compare what runs with what exists"),
        }
        if pause_or_stop(&mut stopped, RECONCILE).await {
            return;
        }
    }
}

/// Deployment rules act at their hour and cron jobs run at theirs; several instances may all
/// run this. It sleeps until the next hour any rule or cron job has, or until one of them or
/// the clock changes.
async fn schedule(capstan: Capstan, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        let rung = capstan.changes().listen(Change::Rules);
        let moved = capstan.clock_moved();
        let rules = match capstan.run_due_rules().await {
            Ok(pass) => {
                if pass.taken > 0 {
                    tracing::info!(count = pass.taken, "deployment rules took their hours");
                }
                for (environment, e) in pass.failed {
                    tracing::error!(%environment, error = %e, cause = ?e, "a deployment rule could not act");
                }
                pass.next_turn
                    .map_or(FALLBACK, |at| capstan.until(at).clamp(poll, FALLBACK))
            }
            Err(e) => {
                tracing::error!(error = %e, "could not run the deployment rules due");
                poll * 4
            }
        };
        let crons = match capstan.run_due_cron_jobs().await {
            Ok(pass) => {
                if pass.queued > 0 {
                    tracing::info!(count = pass.queued, "cron jobs queued at their schedule");
                }
                for (job, e) in pass.failed {
                    tracing::error!(%job, error = %e, cause = ?e, "a cron job's run could not be queued");
                }
                pass.next_turn
                    .map_or(FALLBACK, |at| capstan.until(at).clamp(poll, FALLBACK))
            }
            Err(e) => {
                tracing::error!(error = %e, "could not run the cron jobs due");
                poll * 4
            }
        };
        match capstan.delete_idle_previews().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "deleted previews idle for longer than allowed"),
            Err(e) => tracing::error!(error = %e, "could not delete the idle previews"),
        }
        if timed_wait_or_stop(&mut stopped, rung, moved, rules.min(crons)).await {
            return;
        }
    }
}

/// Gives new events their stream positions and routes them to webhooks; several instances may
/// all run this (the sequencer's lock keeps each event once). Apart from the sender, so a slow
/// receiver does not hold up the stream.
async fn sequence(capstan: Capstan, mut stopped: watch::Receiver<bool>) {
    loop {
        let rung = capstan.changes().listen(Change::Events);
        let sequenced = capstan.sequence_events().await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "could not sequence the event log");
            0
        });
        if *stopped.borrow() || (sequenced == 0 && wait_or_stop(&mut stopped, rung, FALLBACK).await)
        {
            return;
        }
    }
}

/// Sends the webhook deliveries that are due (claimed, so each is sent by one sender at once),
/// then sleeps until the next falls due or new ones are planned.
async fn deliver(capstan: Capstan, mut stopped: watch::Receiver<bool>, poll: Duration) {
    let sender = domain::services::worker_id();
    loop {
        let rung = capstan.changes().listen(Change::Deliveries);
        let moved = capstan.clock_moved();
        let pause = match capstan.deliver_due(&sender).await {
            Ok(pass) if pass.sent > 0 => Duration::ZERO,
            Ok(pass) => pass
                .next_due
                .map_or(FALLBACK, |at| capstan.until(at).clamp(poll, FALLBACK)),
            Err(e) => {
                tracing::error!(error = %e, "could not send webhook deliveries");
                poll * 4
            }
        };
        if *stopped.borrow() {
            return;
        }
        if pause.is_zero() {
            continue;
        }
        if timed_wait_or_stop(&mut stopped, rung, moved, pause).await {
            return;
        }
    }
}
