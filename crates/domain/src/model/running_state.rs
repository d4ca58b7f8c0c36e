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
    /// The service's state from its replicas' (see [`RunState::of_all`]).
    pub fn of(replicas: &[Replica]) -> RunState {
        RunState::of_all(replicas.iter().map(|r| r.state))
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
        }
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
