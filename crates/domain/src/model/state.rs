//! The service state machine: the 29 states of a service's deployment status and every allowed
//! transition, defined once here (drawn in docs/deployments.md).

use std::fmt;

string_enum!(
    /// The `state` of a service deployment status.
    ServiceState {
        Building => "BUILDING",
        BuildError => "BUILD_ERROR",
        Canceled => "CANCELED",
        Canceling => "CANCELING",
        Deleted => "DELETED",
        DeleteError => "DELETE_ERROR",
        DeleteQueued => "DELETE_QUEUED",
        Deleting => "DELETING",
        Deployed => "DEPLOYED",
        Deploying => "DEPLOYING",
        DeploymentError => "DEPLOYMENT_ERROR",
        DeploymentQueued => "DEPLOYMENT_QUEUED",
        Executing => "EXECUTING",
        Queued => "QUEUED",
        Ready => "READY",
        Recap => "RECAP",
        Restarted => "RESTARTED",
        Restarting => "RESTARTING",
        RestartError => "RESTART_ERROR",
        RestartQueued => "RESTART_QUEUED",
        Stopped => "STOPPED",
        Stopping => "STOPPING",
        StopError => "STOP_ERROR",
        StopQueued => "STOP_QUEUED",
        Unavailable => "UNAVAILABLE",
        WaitingDeleting => "WAITING_DELETING",
        WaitingRestarting => "WAITING_RESTARTING",
        WaitingRunning => "WAITING_RUNNING",
        WaitingStopping => "WAITING_STOPPING",
    }
);

string_enum!(
    /// What a deployment request asks for. DIFF is a helm redeploy that computes a diff and
    /// changes nothing.
    DeploymentAction {
        Deploy => "DEPLOY",
        Redeploy => "REDEPLOY",
        Restart => "RESTART",
        Stop => "STOP",
        Delete => "DELETE",
        Diff => "DIFF",
        Uninstall => "UNINSTALL",
    }
);

impl DeploymentAction {
    /// Actions a cancel leaves alone: what removes a service from its cluster goes to its end.
    pub fn cancellable(self) -> bool {
        !matches!(self, DeploymentAction::Delete | DeploymentAction::Uninstall)
    }
}

/// What happens to a service, as the engine reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A request was accepted for the service.
    Requested(DeploymentAction),
    /// Another request of the environment runs first.
    Blocked,
    /// A worker took the request; `builds` when the service is built from git.
    Started {
        builds: bool,
    },
    /// The build finished; deployment begins.
    Built,
    /// A job or terraform service began to run.
    Executing,
    /// The new workload runs and is ready: the router's switch to it begins.
    Routing,
    Succeeded,
    Failed,
    /// A client asked to cancel.
    CancelRequested,
    Canceled,
}

/// Why an event cannot happen in a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forbidden {
    pub state: ServiceState,
    pub event: Event,
}

impl fmt::Display for Forbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not possible while the service is {}",
            self.event, self.state
        )
    }
}

use DeploymentAction as A;
use ServiceState as S;

impl ServiceState {
    /// No request in flight: a new one may start from here.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            S::Ready
                | S::Deployed
                | S::Restarted
                | S::Stopped
                | S::Canceled
                | S::BuildError
                | S::DeploymentError
                | S::RestartError
                | S::StopError
                | S::DeleteError
                | S::Unavailable
                | S::Recap
                | S::Deleted
        )
    }

    /// On its way out of its cluster (a deletion or an uninstall).
    pub fn is_deleting(self) -> bool {
        matches!(self, S::DeleteQueued | S::WaitingDeleting | S::Deleting)
    }

    /// Stopped, or on its way there.
    pub fn stopped_or_stopping(self) -> bool {
        matches!(
            self,
            S::Stopped | S::StopQueued | S::WaitingStopping | S::Stopping
        )
    }

    /// Waiting for its turn (accepted, not started).
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            S::Queued
                | S::DeploymentQueued
                | S::RestartQueued
                | S::StopQueued
                | S::DeleteQueued
                | S::WaitingRunning
                | S::WaitingRestarting
                | S::WaitingStopping
                | S::WaitingDeleting
        )
    }

    /// A worker is on it.
    pub fn is_running(self) -> bool {
        matches!(
            self,
            S::Building
                | S::Deploying
                | S::Executing
                | S::Restarting
                | S::Stopping
                | S::Deleting
                | S::Canceling
        )
    }
}

impl ServiceState {
    /// The state a request of `action` starts in.
    pub fn queued(action: DeploymentAction) -> ServiceState {
        match action {
            A::Deploy | A::Redeploy => S::DeploymentQueued,
            A::Restart => S::RestartQueued,
            A::Stop => S::StopQueued,
            A::Delete | A::Uninstall => S::DeleteQueued,
            A::Diff => S::Queued,
        }
    }
}

/// The one definition of the allowed transitions.
pub fn transition(state: ServiceState, event: Event) -> Result<ServiceState, Forbidden> {
    let next = match (state, event) {
        // A new request starts from a settled state.
        (s, Event::Requested(action)) if s.is_settled() => Some(S::queued(action)),
        // Waiting behind another request of the environment.
        (S::DeploymentQueued, Event::Blocked) => Some(S::WaitingRunning),
        (S::RestartQueued, Event::Blocked) => Some(S::WaitingRestarting),
        (S::StopQueued, Event::Blocked) => Some(S::WaitingStopping),
        (S::DeleteQueued, Event::Blocked) => Some(S::WaitingDeleting),
        (S::Queued, Event::Blocked) => Some(S::Queued),
        // A worker takes it.
        (S::DeploymentQueued | S::WaitingRunning, Event::Started { builds: true }) => {
            Some(S::Building)
        }
        (S::DeploymentQueued | S::WaitingRunning, Event::Started { builds: false }) => {
            Some(S::Deploying)
        }
        (S::RestartQueued | S::WaitingRestarting, Event::Started { .. }) => Some(S::Restarting),
        (S::StopQueued | S::WaitingStopping, Event::Started { .. }) => Some(S::Stopping),
        (S::DeleteQueued | S::WaitingDeleting, Event::Started { .. }) => Some(S::Deleting),
        (S::Queued, Event::Started { .. }) => Some(S::Executing),
        // Steps.
        (S::Building, Event::Built) => Some(S::Deploying),
        (S::Deploying, Event::Executing) => Some(S::Executing),
        (S::Deploying, Event::Routing) => Some(S::Deploying),
        // Endings.
        (S::Deploying, Event::Succeeded) => Some(S::Deployed),
        (S::Executing, Event::Succeeded) => Some(S::Deployed),
        (S::Restarting, Event::Succeeded) => Some(S::Restarted),
        (S::Stopping, Event::Succeeded) => Some(S::Stopped),
        (S::Deleting, Event::Succeeded) => Some(S::Deleted),
        (S::Building, Event::Failed) => Some(S::BuildError),
        (S::Deploying | S::Executing, Event::Failed) => Some(S::DeploymentError),
        (S::Restarting, Event::Failed) => Some(S::RestartError),
        (S::Stopping, Event::Failed) => Some(S::StopError),
        (S::Deleting, Event::Failed) => Some(S::DeleteError),
        // Cancelling: anything waiting or running except a deletion or an uninstall.
        (s, Event::CancelRequested)
            if (s.is_waiting() || s.is_running()) && !s.is_deleting() && s != S::Canceling =>
        {
            Some(S::Canceling)
        }
        (S::Canceling, Event::Canceled) => Some(S::Canceled),
        _ => None,
    };
    next.ok_or(Forbidden { state, event })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<Event> {
        let mut all: Vec<Event> = A::ALL.iter().map(|a| Event::Requested(*a)).collect();
        all.extend([
            Event::Blocked,
            Event::Started { builds: true },
            Event::Started { builds: false },
            Event::Built,
            Event::Executing,
            Event::Succeeded,
            Event::Failed,
            Event::CancelRequested,
            Event::Canceled,
        ]);
        all
    }

    #[test]
    fn there_are_29_states() {
        assert_eq!(S::ALL.len(), 29);
    }

    #[test]
    fn a_deployment_from_git_walks_every_step() {
        let mut s = S::Ready;
        for (event, expected) in [
            (Event::Requested(A::Deploy), S::DeploymentQueued),
            (Event::Blocked, S::WaitingRunning),
            (Event::Started { builds: true }, S::Building),
            (Event::Built, S::Deploying),
            (Event::Succeeded, S::Deployed),
            (Event::Requested(A::Restart), S::RestartQueued),
            (Event::Started { builds: false }, S::Restarting),
            (Event::Succeeded, S::Restarted),
            (Event::Requested(A::Stop), S::StopQueued),
            (Event::Started { builds: false }, S::Stopping),
            (Event::Succeeded, S::Stopped),
            (Event::Requested(A::Delete), S::DeleteQueued),
            (Event::Started { builds: false }, S::Deleting),
            (Event::Succeeded, S::Deleted),
        ] {
            s = transition(s, event).unwrap();
            assert_eq!(s, expected, "after {event:?}");
        }
    }

    #[test]
    fn failures_end_in_the_matching_error_state() {
        for (running, error) in [
            (S::Building, S::BuildError),
            (S::Deploying, S::DeploymentError),
            (S::Executing, S::DeploymentError),
            (S::Restarting, S::RestartError),
            (S::Stopping, S::StopError),
            (S::Deleting, S::DeleteError),
        ] {
            assert_eq!(transition(running, Event::Failed), Ok(error));
            assert!(error.is_settled());
        }
    }

    #[test]
    fn every_pair_is_either_allowed_or_forbidden_consistently() {
        for state in S::ALL {
            for event in events() {
                match transition(*state, event) {
                    Ok(next) => {
                        // Settled states (DELETED of an uninstalled service among them) only
                        // move on a request.
                        if state.is_settled() {
                            assert!(
                                matches!(event, Event::Requested(_)),
                                "{state:?} on {event:?}"
                            );
                        }
                        if let Event::Requested(a) = event {
                            assert_eq!(next, S::queued(a));
                        }
                    }
                    Err(f) => {
                        assert_eq!(f.state, *state);
                        assert!(!f.to_string().is_empty());
                    }
                }
            }
        }
    }

    #[test]
    fn requests_are_refused_while_in_flight_or_deleted() {
        for state in [S::Deploying, S::DeploymentQueued, S::Deleting, S::Canceling] {
            assert!(
                transition(state, Event::Requested(A::Deploy)).is_err(),
                "{state:?}"
            );
        }
        assert!(
            transition(S::Deleting, Event::CancelRequested).is_err(),
            "a deletion cannot be cancelled"
        );
        assert_eq!(
            transition(S::WaitingRunning, Event::CancelRequested),
            Ok(S::Canceling)
        );
        assert_eq!(transition(S::Canceling, Event::Canceled), Ok(S::Canceled));
        assert_eq!(
            transition(S::Queued, Event::Started { builds: false }),
            Ok(S::Executing)
        );
    }

    #[test]
    fn every_state_but_recap_and_unavailable_is_reachable_from_ready() {
        let mut seen = std::collections::HashSet::from([S::Ready]);
        let mut frontier = vec![S::Ready];
        while let Some(s) = frontier.pop() {
            for e in events() {
                if let Ok(n) = transition(s, e) {
                    if seen.insert(n) {
                        frontier.push(n);
                    }
                }
            }
        }
        let unreachable: Vec<_> = S::ALL.iter().filter(|s| !seen.contains(s)).collect();
        assert_eq!(unreachable, vec![&S::Recap, &S::Unavailable]);
    }
}
