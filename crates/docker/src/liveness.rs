//! Liveness: each running replica with a liveness probe is probed at its period, from its
//! initial delay after it started; one that fails `failure_threshold` times in a row is
//! restarted, as Kubernetes does (on a Swarm, stopped: the Swarm starts a new task in its
//! place, as its restart policy says). The probe travels with the container (a label), so a
//! replica found after a restart of Capstan is probed too. With no such replica, this waits on
//! Docker's events and asks nothing.

use crate::plan::LABEL_LIVENESS;
use crate::probe;
use bollard::query_parameters::{
    EventsOptions, ListContainersOptions, RestartContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use domain::model::Probe;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use tokio::time::Instant;

/// What becomes of a replica that failed its liveness probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failing {
    /// Restarted by its daemon (a container of one host).
    Restart,
    /// Stopped, for its Swarm to replace (a task's container: a restart behind the Swarm's
    /// back would leave the task failed and the container running).
    Stop,
}

struct Watched {
    name: String,
    probe: Probe,
    failures: i64,
    due: Instant,
}

fn seconds(n: i64) -> Duration {
    Duration::from_secs(u64::try_from(n.max(0)).unwrap_or(0))
}

/// A replica that just started, first probed after its initial delay.
fn watched(name: &str, labels: &HashMap<String, String>) -> Option<Watched> {
    let probe: Probe = serde_json::from_str(labels.get(LABEL_LIVENESS)?).ok()?;
    Some(Watched {
        name: name.trim_start_matches('/').to_string(),
        due: Instant::now() + seconds(probe.initial_delay_seconds),
        probe,
        failures: 0,
    })
}

/// Probes until the daemon's event stream ends or the engine's reader of `reports` left.
pub async fn watch(
    docker: Docker,
    reach: probe::Reach,
    failing: Failing,
    scope: Vec<String>,
    reports: tokio::sync::mpsc::Sender<domain::model::RunningState>,
) {
    // Only this installation's replicas: another's sharing the daemon are not its to restart.
    let ours = [vec![LABEL_LIVENESS.to_string()], scope].concat();
    let options = EventsOptions {
        filters: Some(HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("label".to_string(), ours.clone()),
        ])),
        ..Default::default()
    };
    let mut events = docker.events(Some(options));
    let mut replicas: HashMap<String, Watched> = HashMap::new();
    let running = ListContainersOptions {
        filters: Some(HashMap::from([("label".to_string(), ours)])),
        ..Default::default()
    };
    for c in docker
        .list_containers(Some(running))
        .await
        .unwrap_or_default()
    {
        let name = c
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or_default();
        let (Some(id), Some(labels)) = (c.id, c.labels) else {
            continue;
        };
        // Found running: its initial delay has passed, or will before its first period.
        if let Some(w) = watched(&name, &labels) {
            let period = seconds(w.probe.period_seconds);
            replicas.insert(
                id,
                Watched {
                    due: Instant::now() + period,
                    ..w
                },
            );
        }
    }
    loop {
        let next = replicas.values().map(|w| w.due).min();
        let wake = async {
            match next {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            event = events.next() => {
                let Some(Ok(event)) = event else { return };
                let Some(actor) = event.actor else { continue };
                let Some(id) = actor.id else { continue };
                match event.action.as_deref() {
                    Some("start") => {
                        let attributes = actor.attributes.unwrap_or_default();
                        let name = attributes.get("name").cloned().unwrap_or_default();
                        if let Some(w) = watched(&name, &attributes) {
                            replicas.insert(id, w);
                        }
                    }
                    // A signal alone (`kill`) may leave it running: only an exit counts.
                    Some("die" | "destroy") => {
                        replicas.remove(&id);
                    }
                    _ => {}
                }
            }
            () = wake => {
                let now = Instant::now();
                let due: Vec<String> = replicas
                    .iter()
                    .filter(|(_, w)| w.due <= now)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in due {
                    probe_one(&docker, &reach, failing, &id, &mut replicas).await;
                }
            }
            () = reports.closed() => return,
        }
    }
}

async fn probe_one(
    docker: &Docker,
    reach: &probe::Reach,
    failing: Failing,
    id: &str,
    replicas: &mut HashMap<String, Watched>,
) {
    let Some(w) = replicas.get(id) else { return };
    let probe = w.probe.clone();
    let alive = probe::passes(docker, id, &probe, reach).await;
    let Some(w) = replicas.get_mut(id) else {
        return;
    };
    w.due = Instant::now() + seconds(probe.period_seconds.max(1));
    if alive {
        w.failures = 0;
        return;
    }
    w.failures += 1;
    if w.failures < probe.failure_threshold.max(1) {
        return;
    }
    tracing::warn!(container = %w.name, failures = w.failures, "a replica failed its liveness probe: restarting it");
    w.failures = 0;
    w.due = Instant::now() + seconds(probe.initial_delay_seconds.max(probe.period_seconds));
    let done = match failing {
        Failing::Restart => {
            docker
                .restart_container(id, None::<RestartContainerOptions>)
                .await
        }
        Failing::Stop => {
            docker
                .stop_container(id, None::<StopContainerOptions>)
                .await
        }
    };
    if let Err(e) = done {
        tracing::warn!(container = %id, error = %e, "could not restart a replica that failed its liveness probe");
    }
}
