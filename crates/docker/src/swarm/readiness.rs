//! When a Swarm service's new tasks count as started: they run, and pass the service's
//! readiness probe (Capstan's own, at each task's node address and published port), or a
//! database's own check run in the task's container through its node's daemon; a task that
//! fails on the way fails the deployment, naming the node and Swarm's reason.

use crate::diagnosis::{Readiness, LOOK_TIMEOUT, STAYS_UP};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::{exec, probe};
use bollard::models::{Task, TaskState};
use domain::engine::{Cancel, EngineError, StepLog};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long new tasks have at least: the Swarm schedules them, and each node readies its
/// image, before they start.
const SCHEDULED_READY_TIMEOUT: Duration = Duration::from_secs(90);
const LOOK: Duration = Duration::from_millis(300);

impl DockerEngine {
    /// Waits until `replicas` tasks of the Swarm service `name` (of the spec `force` when it
    /// says) run and are ready by `readiness`, probed at their nodes' addresses; a task that
    /// fails on the way fails it, naming the node and Swarm's reason.
    pub(crate) async fn swarm_ready(
        &self,
        name: &str,
        replicas: usize,
        readiness: &Readiness<'_>,
        force: Option<u64>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let timeout = readiness.timeout().max(SCHEDULED_READY_TIMEOUT);
        let started = Instant::now();
        let mut all_running_since: Option<Instant> = None;
        let nodes = |list: Vec<bollard::models::Node>| -> HashMap<String, (String, String)> {
            list.into_iter()
                .filter_map(|n| {
                    let host = n.description.and_then(|d| d.hostname).unwrap_or_default();
                    let addr = n.status.and_then(|s| s.addr).unwrap_or_default();
                    Some((n.id?, (host, addr)))
                })
                .collect()
        };
        loop {
            let tasks = self.tasks_of(name).await?;
            let of_spec = |t: &&Task| {
                force.is_none() || t.spec.as_ref().and_then(|s| s.force_update) == force
            };
            let seen = nodes(
                self.docker
                    .list_nodes(None)
                    .await
                    .map_err(|e| said("could not list the Swarm's nodes", e))?,
            );
            let node_of = |t: &Task| seen.get(t.node_id.as_deref().unwrap_or_default());
            if let Some(failed) = tasks.iter().filter(of_spec).find(|t| {
                matches!(
                    t.status.as_ref().and_then(|s| s.state),
                    Some(TaskState::FAILED | TaskState::REJECTED)
                )
            }) {
                let status = failed.status.clone().unwrap_or_default();
                let why = status.err.or(status.message).unwrap_or_default();
                let on = node_of(failed).map(|n| n.0.clone()).unwrap_or_default();
                return Err(format!("a new task did not start on node {on}: {why}").into());
            }
            let running: Vec<&Task> = tasks
                .iter()
                .filter(of_spec)
                .filter(|t| t.desired_state == Some(TaskState::RUNNING))
                .filter(|t| t.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING))
                .collect();
            if running.len() >= replicas {
                let since = *all_running_since.get_or_insert_with(Instant::now);
                let ready = match readiness {
                    Readiness::Probe(p) => match probe::port_of(p) {
                        Some(port) => {
                            let mut all = true;
                            for t in &running {
                                let at = node_of(t).map(|n| n.1.clone()).unwrap_or_default();
                                let published = published_port(t, port);
                                all &= match published {
                                    Some(published) => probe::answers(&at, published, p).await,
                                    None => false,
                                };
                            }
                            all
                        }
                        // An exec probe needs the node's daemon: the task staying up counts.
                        None => since.elapsed() >= STAYS_UP,
                    },
                    Readiness::UpFor(at_least) => since.elapsed() >= *at_least,
                    Readiness::Command { cmd, env } => {
                        let mut all = true;
                        for t in &running {
                            all &= self.passes_in_task(t, cmd, env).await;
                        }
                        all
                    }
                };
                if ready {
                    for t in &running {
                        let (host, addr) = node_of(t).cloned().unwrap_or_default();
                        let ports: Vec<String> = ports_of(t)
                            .iter()
                            .map(|(target, published)| format!("{target} at {addr}:{published}"))
                            .collect();
                        log.info(&format!(
                            "replica {name}.{} runs on node {host}{}",
                            t.slot.unwrap_or(0),
                            if ports.is_empty() {
                                String::new()
                            } else {
                                format!(", port {}", ports.join(", "))
                            }
                        ));
                    }
                    log.info("the new replicas run and are ready");
                    return Ok(());
                }
            } else {
                all_running_since = None;
            }
            if started.elapsed() > timeout {
                return Err(format!(
                    "the new replicas were not ready after {} s ({} of {replicas} running)",
                    timeout.as_secs(),
                    running.len()
                )
                .into());
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                () = cancel.canceled() => return Err("canceled while the new replicas started".into()),
            }
        }
    }

    /// Whether `cmd` succeeds in the task's container, run through its node's daemon (which
    /// must be reached: a database is pinned to such a node).
    async fn passes_in_task(&self, task: &Task, cmd: &[String], env: &[String]) -> bool {
        let Ok(Some((docker, container))) = self.task_container(task).await else {
            return false;
        };
        exec::run(docker, &container, cmd, env, None, LOOK_TIMEOUT)
            .await
            .is_ok_and(|ran| ran.succeeded())
    }
}

/// A task's host-mode ports: (the container's, the node's), once each.
fn ports_of(task: &Task) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = task
        .status
        .as_ref()
        .and_then(|s| s.port_status.as_ref())
        .and_then(|p| p.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| Some((p.target_port?, p.published_port?)))
                .collect()
        })
        .unwrap_or_default();
    out.sort_unstable();
    out.dedup();
    out
}

fn published_port(task: &Task, internal: i64) -> Option<u16> {
    ports_of(task)
        .into_iter()
        .find(|(target, _)| *target == internal)
        .and_then(|(_, published)| u16::try_from(published).ok())
}
