//! The stand-in's fault controls: what a test suite asked of the deployments of a service
//! (hold them at a state, fail a step once). They belong to the stand-in, not to any engine:
//! the worker consults them around the engine's steps.

use crate::ids::ServiceId;
use crate::model::{ServiceState, StepName};

/// What a test suite asked of the engine, per service: hold its deployments at a state until
/// released, fail a step once. Kept by the process whose workers run the deployments (a
/// stand-in runs one); the worker consults it at every step.
#[derive(Debug, Default)]
pub struct EngineControls {
    services: std::sync::Mutex<std::collections::HashMap<ServiceId, Asked>>,
}

#[derive(Debug, Default, Clone)]
struct Asked {
    hold: Option<ServiceState>,
    fail: Option<(StepName, String)>,
}

/// The states a deployment passes through once a worker has it: where it can be held (a
/// queued state: before its first step).
pub const HOLDABLE: &[ServiceState] = &[
    ServiceState::DeploymentQueued,
    ServiceState::RestartQueued,
    ServiceState::StopQueued,
    ServiceState::DeleteQueued,
    ServiceState::Building,
    ServiceState::Deploying,
    ServiceState::Executing,
    ServiceState::Restarting,
    ServiceState::Stopping,
    ServiceState::Deleting,
];

impl EngineControls {
    fn with<R>(&self, f: impl FnOnce(&mut std::collections::HashMap<ServiceId, Asked>) -> R) -> R {
        f(&mut self.services.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Holds the service's deployments when they reach `state`, until [`Self::release`].
    pub fn hold(&self, service: ServiceId, state: ServiceState) {
        self.with(|s| s.entry(service).or_default().hold = Some(state));
    }

    /// Lets the service's held deployment go on; false when none was asked to be held.
    pub fn release(&self, service: ServiceId) -> bool {
        self.with(|s| {
            let Some(asked) = s.get_mut(&service) else {
                return false;
            };
            let held = asked.hold.take().is_some();
            if asked.fail.is_none() {
                s.remove(&service);
            }
            held
        })
    }

    /// Fails the service's next run of `step` with `message`.
    pub fn fail(&self, service: ServiceId, step: StepName, message: String) {
        self.with(|s| s.entry(service).or_default().fail = Some((step, message)));
    }

    /// Whether a deployment of `service` in `state` must wait.
    pub fn holds(&self, service: ServiceId, state: ServiceState) -> bool {
        self.with(|s| s.get(&service).is_some_and(|a| a.hold == Some(state)))
    }

    /// The failure asked for this run of `step`, once.
    pub fn failure(&self, service: ServiceId, step: StepName) -> Option<String> {
        self.with(|s| {
            let asked = s.get_mut(&service)?;
            if asked.fail.as_ref().is_some_and(|(at, _)| *at == step) {
                return asked.fail.take().map(|(_, message)| message);
            }
            None
        })
    }

    /// Forgets everything asked (a reset).
    pub fn clear(&self) {
        self.with(|s| s.clear());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_lasts_until_release_and_a_failure_is_used_once() {
        let controls = EngineControls::default();
        let (a, b) = (ServiceId::generate(), ServiceId::generate());
        controls.hold(a, ServiceState::Deploying);
        assert!(controls.holds(a, ServiceState::Deploying));
        assert!(!controls.holds(a, ServiceState::Building));
        assert!(!controls.holds(b, ServiceState::Deploying));
        controls.fail(a, StepName::Build, "no".into());
        assert_eq!(controls.failure(a, StepName::Deployment), None);
        assert!(controls.release(a));
        assert!(!controls.holds(a, ServiceState::Deploying));
        assert!(!controls.release(a), "nothing is held any more");
        assert_eq!(controls.failure(a, StepName::Build).as_deref(), Some("no"));
        assert_eq!(controls.failure(a, StepName::Build), None);
        controls.hold(b, ServiceState::Stopping);
        controls.clear();
        assert!(!controls.holds(b, ServiceState::Stopping));
    }
}
