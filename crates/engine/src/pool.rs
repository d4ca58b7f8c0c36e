//! The background workers: each claims a request, runs it to its end, and claims the next; one
//! more task ends the requests of workers that died, and one starts and stops environments at
//! their deployment rule's hours, one sequences the event log and one sends webhook deliveries.
//! On shutdown they stop claiming and finish what they hold.

use domain::engine::Engine;
use domain::services::{Capstan, Worker};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// How many requests this process runs at once (of different environments).
    pub workers: usize,
    /// How long a step takes; the lease and polling follow from it.
    pub step: Duration,
}

impl PoolSettings {
    /// A claim must outlive the longest step with room to spare, and no more: a dead worker's
    /// request is ended once its lease runs out.
    pub fn lease(&self) -> Duration {
        self.step * 3 + Duration::from_secs(5)
    }

    fn poll(&self) -> Duration {
        (self.step / 2).clamp(Duration::from_millis(20), Duration::from_millis(500))
    }

    /// The stream and the webhooks wait on the sequencer: it runs often, whatever the step.
    fn events_poll(&self) -> Duration {
        self.poll().min(Duration::from_millis(100))
    }
}

pub struct WorkerPool {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    capstan: Capstan,
}

impl WorkerPool {
    pub fn start(capstan: Capstan, engine: Arc<dyn Engine>, settings: PoolSettings) -> Self {
        let (stop, stopped) = watch::channel(false);
        let lease = time::Duration::try_from(settings.lease()).unwrap_or(time::Duration::MINUTE);
        let mut tasks = JoinSet::new();
        for _ in 0..settings.workers.max(1) {
            let worker = Worker::new(capstan.clone(), engine.clone(), lease);
            tasks.spawn(run(worker, stopped.clone(), settings.poll()));
        }
        let reaper = Worker::new(capstan.clone(), engine, lease);
        tasks.spawn(reap(reaper, stopped.clone(), settings.poll()));
        tasks.spawn(schedule(capstan.clone(), stopped.clone(), settings.poll()));
        tasks.spawn(sequence(
            capstan.clone(),
            stopped.clone(),
            settings.events_poll(),
        ));
        tasks.spawn(deliver(capstan.clone(), stopped, settings.events_poll()));
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

async fn run(worker: Worker, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        if *stopped.borrow() {
            return;
        }
        let next = match worker.run_next().await {
            Ok(false) => worker.run_next_cluster().await,
            ran => ran,
        };
        let idle = match next {
            Ok(ran) => !ran,
            Err(e) => {
                tracing::error!(worker = worker.id(), error = %e, cause = ?e, "deployment worker failed");
                true
            }
        };
        if idle && pause_or_stop(&mut stopped, poll).await {
            return;
        }
    }
}

async fn reap(worker: Worker, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        match worker.recover().await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(count = n, "ended requests whose worker died"),
            Err(e) => tracing::error!(error = %e, "could not look for requests of dead workers"),
        }
        if pause_or_stop(&mut stopped, poll * 4).await {
            return;
        }
    }
}

/// Deployment rules act within a few polls of their hour; several instances may all run this.
async fn schedule(capstan: Capstan, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        match capstan.run_due_rules().await {
            Ok(pass) => {
                if pass.taken > 0 {
                    tracing::info!(count = pass.taken, "deployment rules took their hours");
                }
                for (environment, e) in pass.failed {
                    tracing::error!(%environment, error = %e, cause = ?e, "a deployment rule could not act");
                }
            }
            Err(e) => tracing::error!(error = %e, "could not run the deployment rules due"),
        }
        if pause_or_stop(&mut stopped, poll * 4).await {
            return;
        }
    }
}

/// Gives new events their stream positions and routes them to webhooks; several instances may
/// all run this (the sequencer's lock keeps each event once). Apart from the sender, so a slow
/// receiver does not hold up the stream.
async fn sequence(capstan: Capstan, mut stopped: watch::Receiver<bool>, poll: Duration) {
    loop {
        let sequenced = capstan.sequence_events().await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "could not sequence the event log");
            0
        });
        if *stopped.borrow() || (sequenced == 0 && pause_or_stop(&mut stopped, poll).await) {
            return;
        }
    }
}

/// Sends the webhook deliveries that are due (claimed, so each is sent by one sender at once).
async fn deliver(capstan: Capstan, mut stopped: watch::Receiver<bool>, poll: Duration) {
    let sender = domain::services::worker_id();
    loop {
        let sent = capstan.deliver_due(&sender).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "could not send webhook deliveries");
            0
        });
        if *stopped.borrow() || (sent == 0 && pause_or_stop(&mut stopped, poll).await) {
            return;
        }
    }
}
