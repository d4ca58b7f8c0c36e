//! One-off Swarm services (a job's run, a terraform run): a replicated job of one task, followed
//! to its end through the managers' view of its tasks.

use crate::engine::DockerEngine;
use bollard::models::{Task, TaskState};
use domain::engine::{Cancel, EngineError};
use std::time::{Duration, Instant};

const LOOK: Duration = Duration::from_millis(300);

/// How a one-off run ended.
pub(crate) enum RunEnd {
    Completed,
    /// Failed more times than it may restart: its last failed execution.
    Failed(Box<Task>),
    TimedOut,
    Canceled,
}

fn state_of(task: &Task) -> Option<TaskState> {
    task.status.as_ref().and_then(|s| s.state)
}

/// The task's execution completed.
pub(crate) fn completed(task: &Task) -> bool {
    state_of(task) == Some(TaskState::COMPLETE)
}

/// The task's execution failed (or was never given a node).
pub(crate) fn failed(task: &Task) -> bool {
    matches!(
        state_of(task),
        Some(TaskState::FAILED | TaskState::REJECTED)
    )
}

/// The exit code of a task's container, once it exited.
pub(crate) fn exit_code(task: &Task) -> Option<i64> {
    task.status.as_ref()?.container_status.as_ref()?.exit_code
}

/// Why a task failed, as a reason says it.
pub(crate) fn why_failed(task: &Task) -> String {
    match exit_code(task) {
        Some(code) if code != 0 => crate::diagnosis::exited(code),
        _ => {
            let status = task.status.clone().unwrap_or_default();
            format!(
                "failed: {}",
                status.err.or(status.message).unwrap_or_default()
            )
        }
    }
}

impl DockerEngine {
    /// Follows the one-off Swarm service `name` until its task completes, fails more than
    /// `restarts` times (each failed execution given to `told` once, numbered from 1), runs
    /// past `limit` or the step is canceled. The service stays: the caller decides its end.
    pub(crate) async fn await_swarm_run(
        &self,
        name: &str,
        restarts: i64,
        limit: Duration,
        cancel: &Cancel,
        mut told: impl FnMut(usize, &Task),
    ) -> Result<RunEnd, EngineError> {
        let started = Instant::now();
        let mut failures_told = 0;
        let allowed = usize::try_from(restarts.max(0)).unwrap_or(0);
        loop {
            let tasks = self.tasks_of(name).await?;
            if tasks.iter().any(completed) {
                return Ok(RunEnd::Completed);
            }
            let failures: Vec<&Task> = tasks.iter().filter(|t| failed(t)).collect();
            for f in failures.iter().skip(failures_told) {
                failures_told += 1;
                told(failures_told, f);
            }
            if failures.len() > allowed {
                if let Some(last) = failures.last() {
                    return Ok(RunEnd::Failed(Box::new((*last).clone())));
                }
            }
            if started.elapsed() > limit {
                return Ok(RunEnd::TimedOut);
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                () = cancel.canceled() => return Ok(RunEnd::Canceled),
            }
        }
    }

    /// What a Swarm service's tasks last wrote (`count` lines), through the manager.
    pub(crate) async fn last_lines_of_service(&self, name: &str, count: usize) -> Vec<String> {
        let options = crate::containers::last(count);
        crate::containers::lines_of(self.docker.service_logs(name, Some(options))).await
    }
}
