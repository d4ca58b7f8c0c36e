//! What runs of a service, as its engine last saw it: each replica's state, restarts and last
//! exit, and where its ports are published. Engines report it as it changes; every instance reads
//! it from the store.

use crate::ids::{ClusterId, EnvironmentId, ServiceId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

string_enum!(
    /// The running state of a workload, as the public live API names it.
    RunState {
        Starting => "STARTING",
        Running => "RUNNING",
        Warning => "WARNING",
        Error => "ERROR",
        Stopping => "STOPPING",
        Stopped => "STOPPED",
        Completed => "COMPLETED",
    }
);

/// One replica (a container; a pod in the public API's words).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub name: String,
    pub image: String,
    pub state: RunState,
    pub restart_count: i64,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    /// Its last exit's code, once it exited.
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// A word for why it is in its state: `OOMKilled`, `Error`, `Completed`, `CrashLoop`,
    /// `Unhealthy`.
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    /// Its health check's verdict, when it has one.
    #[serde(default)]
    pub healthy: Option<bool>,
    /// The node it runs on, on an engine of several (a Swarm's node's host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The restarts its engine counted itself (Docker's `RestartCount`), as reported: those
    /// its engine did not count (Capstan restarting it when its liveness probe fails) are
    /// `restart_count` beyond it. See [`RunningState::carry_restarts`].
    #[serde(default)]
    pub engine_restarts: i64,
    /// What happened to it lately, oldest first (at most [`KEPT_EVENTS`]), as seen between
    /// its reports: restarts, OOM kills, failed checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<ReplicaEvent>,
}

/// How many of its latest events a replica keeps.
pub const KEPT_EVENTS: usize = 10;

string_enum!(
    /// Why a replica's event happened, in the words Kubernetes' events use.
    ReplicaEventReason {
        OomKilled => "OOMKilling",
        Restarted => "BackOff",
        Unhealthy => "Unhealthy",
    }
);

/// Something that happened to a replica (`PodKubernetesEventDto` in the live API's words).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaEvent {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub reason: ReplicaEventReason,
    pub message: String,
}

/// Where the host reaches one of the service's ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub internal_port: u16,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningState {
    pub service_id: ServiceId,
    pub environment_id: EnvironmentId,
    pub state: RunState,
    pub replicas: Vec<Replica>,
    pub endpoints: Vec<Endpoint>,
    pub observed_at: OffsetDateTime,
    /// The cluster whose named Docker host reported it; none: the installation's own daemon
    /// (and a state read back from the store). A report counts only from the cluster of the
    /// service's environment: any host may carry labels naming any service.
    pub reported_by: Option<ClusterId>,
}

impl RunningState {
    /// Carries each replica's history over from what was recorded `before` (by name) into
    /// this report (whose `restart_count` is its engine's own) and adds what happened between:
    /// - a replica that started again while its engine's count stayed put was restarted
    ///   behind the engine's back (a Docker restart asked by Capstan when its liveness probe
    ///   failed, which Docker does not count): one restart more;
    /// - a restart, an OOM kill and a replica turned unhealthy are events.
    ///
    /// Reporting the same state twice counts and tells nothing twice.
    pub fn carry_history(&mut self, before: Option<&RunningState>) {
        let at = self.observed_at;
        for replica in &mut self.replicas {
            let earlier = before.and_then(|b| b.replicas.iter().find(|r| r.name == replica.name));
            let counted = replica.restart_count;
            let Some(earlier) = earlier else {
                replica.engine_restarts = counted;
                if replica.reason.as_deref() == Some("OOMKilled") {
                    replica.events.push(oom_event(at, replica));
                }
                continue;
            };
            let carried = (earlier.restart_count - earlier.engine_restarts).max(0);
            let started_again = matches!(
                (earlier.started_at, replica.started_at),
                (Some(then), Some(now)) if now > then
            );
            let uncounted = started_again && counted == earlier.engine_restarts;
            replica.engine_restarts = counted;
            replica.restart_count = counted + carried + i64::from(uncounted);
            let mut events = earlier.events.clone();
            let oom = replica.reason.as_deref() == Some("OOMKilled");
            if oom && (earlier.reason.as_deref() != Some("OOMKilled") || started_again) {
                events.push(oom_event(at, replica));
            }
            if uncounted {
                events.push(ReplicaEvent {
                    at,
                    reason: ReplicaEventReason::Unhealthy,
                    message: "restarted by Capstan: its liveness probe failed".into(),
                });
            } else if counted > earlier.engine_restarts {
                let exit = replica
                    .exit_code
                    .or(earlier.exit_code)
                    .map(|code| format!(" (exited with code {code})"))
                    .unwrap_or_default();
                events.push(ReplicaEvent {
                    at,
                    reason: ReplicaEventReason::Restarted,
                    message: format!("restarted by its engine{exit}"),
                });
            }
            let unhealthy = |r: &Replica| r.healthy == Some(false);
            if unhealthy(replica) && !unhealthy(earlier) {
                events.push(ReplicaEvent {
                    at,
                    reason: ReplicaEventReason::Unhealthy,
                    message: "its health check fails".into(),
                });
            }
            let extra = events.len().saturating_sub(KEPT_EVENTS);
            events.drain(..extra);
            replica.events = events;
        }
    }

    /// The service's state from its replicas' (see [`RunState::of_all`]).
    pub fn of(replicas: &[Replica]) -> RunState {
        RunState::of_all(replicas.iter().map(|r| r.state))
    }
}

fn oom_event(at: OffsetDateTime, replica: &Replica) -> ReplicaEvent {
    ReplicaEvent {
        at,
        reason: ReplicaEventReason::OomKilled,
        message: match &replica.message {
            Some(m) => format!("killed: out of memory ({m})"),
            None => "killed: out of memory".into(),
        },
    }
}

impl RunState {
    /// The state of a whole from its parts': the worst of them wins (an error, then a
    /// warning, then one starting); none at all is stopped; all ended well is completed.
    pub fn of_all(states: impl IntoIterator<Item = RunState>) -> RunState {
        let states: Vec<RunState> = states.into_iter().collect();
        let any = |s: RunState| states.contains(&s);
        let all = |s: RunState| states.iter().all(|x| *x == s);
        if states.is_empty() {
            RunState::Stopped
        } else if any(RunState::Error) {
            RunState::Error
        } else if any(RunState::Warning) {
            RunState::Warning
        } else if all(RunState::Completed) {
            RunState::Completed
        } else if all(RunState::Stopped) {
            RunState::Stopped
        } else if any(RunState::Starting) {
            RunState::Starting
        } else if any(RunState::Stopping) {
            RunState::Stopping
        } else {
            RunState::Running
        }
    }

    /// What a service runs by its deployment state alone, for an engine that reports nothing
    /// (the simulated one): deployed is running (a job's run is completed), on its way is
    /// starting, a failure is an error.
    pub fn following(state: super::ServiceState, job: bool) -> RunState {
        use super::ServiceState as S;
        match state {
            S::Deployed | S::Restarted if job => RunState::Completed,
            S::Deployed | S::Restarted => RunState::Running,
            S::Building
            | S::Deploying
            | S::Restarting
            | S::Executing
            | S::WaitingRunning
            | S::WaitingRestarting => RunState::Starting,
            S::Stopping | S::WaitingStopping | S::Deleting | S::WaitingDeleting => {
                RunState::Stopping
            }
            S::BuildError
            | S::DeploymentError
            | S::RestartError
            | S::StopError
            | S::DeleteError => RunState::Error,
            _ => RunState::Stopped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replica(state: RunState) -> Replica {
        Replica {
            name: "r".into(),
            image: "i".into(),
            state,
            restart_count: 0,
            started_at: None,
            finished_at: None,
            exit_code: None,
            reason: None,
            message: None,
            healthy: None,
            node: None,
            engine_restarts: 0,
            events: Vec::new(),
        }
    }

    fn state_of(replicas: Vec<Replica>) -> RunningState {
        RunningState {
            service_id: crate::ids::ServiceId::generate(),
            environment_id: crate::ids::EnvironmentId::generate(),
            state: RunState::Running,
            replicas,
            endpoints: Vec::new(),
            observed_at: OffsetDateTime::UNIX_EPOCH,
            reported_by: None,
        }
    }

    /// A replica `name` as its engine reports it: started at second `started`, with the
    /// engine's own count of restarts.
    fn seen(name: &str, started: i64, engine_count: i64) -> Replica {
        Replica {
            name: name.into(),
            restart_count: engine_count,
            started_at: Some(OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(started)),
            ..replica(RunState::Running)
        }
    }

    /// What is recorded of `reported` given what was recorded before.
    fn recorded(before: Option<&RunningState>, reported: Vec<Replica>) -> RunningState {
        let mut state = state_of(reported);
        state.carry_history(before);
        state
    }

    #[test]
    fn restarts_the_engine_did_not_count_are_counted_once_each_and_kept() {
        let first = recorded(None, vec![seen("a", 10, 0), seen("b", 10, 0)]);
        assert_eq!(first.replicas[0].restart_count, 0);
        // "a" restarted by Capstan (the engine's count unchanged), "b" by its engine.
        let second = recorded(Some(&first), vec![seen("a", 20, 0), seen("b", 20, 1)]);
        assert_eq!(second.replicas[0].restart_count, 1);
        assert_eq!(second.replicas[1].restart_count, 1);
        // The same report again counts nothing more.
        let again = recorded(Some(&second), vec![seen("a", 20, 0), seen("b", 20, 1)]);
        assert_eq!(again.replicas[0].restart_count, 1);
        assert_eq!(again.replicas[1].restart_count, 1);
        // Both kinds add up; what was carried stays when the engine counts one more.
        let third = recorded(Some(&again), vec![seen("a", 30, 0), seen("b", 30, 1)]);
        assert_eq!(third.replicas[0].restart_count, 2);
        assert_eq!(third.replicas[1].restart_count, 2);
        let fourth = recorded(Some(&third), vec![seen("a", 40, 1), seen("b", 40, 2)]);
        assert_eq!(fourth.replicas[0].restart_count, 3);
        assert_eq!(fourth.replicas[1].restart_count, 3);
        // A replica not seen before (a new generation's) starts from its engine's count.
        let fresh = recorded(Some(&fourth), vec![seen("c", 50, 0)]);
        assert_eq!(fresh.replicas[0].restart_count, 0);
        // A replica that stopped (no start time) keeps what it had.
        let mut stopped = seen("a", 0, 1);
        stopped.started_at = None;
        let after = recorded(Some(&fourth), vec![stopped]);
        assert_eq!(after.replicas[0].restart_count, 3);
        // Each restart told once, the liveness restarts apart.
        let reasons: Vec<_> = fourth.replicas[0].events.iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            [
                ReplicaEventReason::Unhealthy,
                ReplicaEventReason::Unhealthy,
                ReplicaEventReason::Restarted
            ]
        );
        assert_eq!(after.replicas[0].events, fourth.replicas[0].events);
    }

    #[test]
    fn an_oom_kill_and_a_failing_health_check_are_told_once_and_events_are_capped() {
        let oom = |started: i64, count: i64| Replica {
            state: RunState::Error,
            reason: Some("OOMKilled".into()),
            exit_code: Some(137),
            ..seen("a", started, count)
        };
        let first = recorded(None, vec![oom(10, 0)]);
        assert_eq!(first.replicas[0].events.len(), 1);
        assert_eq!(
            first.replicas[0].events[0].reason,
            ReplicaEventReason::OomKilled
        );
        let same = recorded(Some(&first), vec![oom(10, 0)]);
        assert_eq!(same.replicas[0].events.len(), 1, "told once");
        // Killed again after its engine restarted it: an OOM kill and a restart.
        let again = recorded(Some(&same), vec![oom(20, 1)]);
        let reasons: Vec<_> = again.replicas[0].events.iter().map(|e| e.reason).collect();
        assert_eq!(
            reasons,
            [
                ReplicaEventReason::OomKilled,
                ReplicaEventReason::OomKilled,
                ReplicaEventReason::Restarted
            ]
        );
        assert!(again.replicas[0].events[2].message.contains("code 137"));
        let sick = Replica {
            healthy: Some(false),
            ..seen("b", 10, 0)
        };
        let told = recorded(None, vec![seen("b", 10, 0)]);
        let told = recorded(Some(&told), vec![sick.clone()]);
        let told = recorded(Some(&told), vec![sick]);
        assert_eq!(told.replicas[0].events.len(), 1, "told once");
        let mut state = recorded(None, vec![seen("c", 0, 0)]);
        for n in 1..=15 {
            state = recorded(Some(&state), vec![seen("c", n, n)]);
        }
        assert_eq!(state.replicas[0].events.len(), KEPT_EVENTS);
        assert!(state.replicas[0].events[KEPT_EVENTS - 1]
            .message
            .starts_with("restarted"));
    }

    #[test]
    fn the_worst_replica_gives_the_services_state() {
        use RunState::*;
        let of = |states: &[RunState]| {
            RunningState::of(&states.iter().map(|s| replica(*s)).collect::<Vec<_>>())
        };
        assert_eq!(of(&[]), Stopped);
        assert_eq!(of(&[Running, Running]), Running);
        assert_eq!(of(&[Running, Error]), Error);
        assert_eq!(of(&[Warning, Running]), Warning);
        assert_eq!(of(&[Starting, Running]), Starting);
        assert_eq!(of(&[Completed, Completed]), Completed);
        assert_eq!(of(&[Stopped, Stopped]), Stopped);
        assert_eq!(of(&[Stopped, Running]), Running);
    }

    #[test]
    fn without_a_report_the_deployment_state_says_what_runs() {
        use crate::model::ServiceState as S;
        assert_eq!(RunState::following(S::Deployed, false), RunState::Running);
        assert_eq!(RunState::following(S::Deployed, true), RunState::Completed);
        assert_eq!(RunState::following(S::Deploying, false), RunState::Starting);
        assert_eq!(
            RunState::following(S::DeploymentError, false),
            RunState::Error
        );
        assert_eq!(RunState::following(S::Stopping, false), RunState::Stopping);
        assert_eq!(RunState::following(S::Stopped, false), RunState::Stopped);
        assert_eq!(RunState::following(S::Ready, false), RunState::Stopped);
        assert_eq!(
            RunState::following(S::DeploymentQueued, false),
            RunState::Stopped
        );
    }
}
