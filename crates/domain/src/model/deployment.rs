//! Deployment requests: durable records of what a client asked the engine to do, and of how far
//! the engine has gone with it.

use super::{DeploymentAction, Event, Record, ServiceKind, ServiceState};
use crate::ids::*;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

string_enum!(
    /// Where a request is in its life.
    RequestStatus {
        Queued => "QUEUED",
        Running => "RUNNING",
        Success => "SUCCESS",
        Error => "ERROR",
        Canceled => "CANCELED",
    }
);

impl RequestStatus {
    /// Waiting or running.
    pub const PENDING: [RequestStatus; 2] = [Self::Queued, Self::Running];
    /// Ended, one way or another.
    pub const FINISHED: [RequestStatus; 3] = [Self::Success, Self::Error, Self::Canceled];

    pub fn is_finished(self) -> bool {
        Self::FINISHED.contains(&self)
    }
}

string_enum!(
    /// Where an action came from, as histories and queues show it (the public
    /// `OrganizationEventOrigin`).
    Origin {
        Api => "API",
        Cli => "CLI",
        Console => "CONSOLE",
        Git => "GIT",
        Internal => "QOVERY_INTERNAL",
        Skill => "SKILL",
        TerraformProvider => "TERRAFORM_PROVIDER",
    }
);

impl Origin {
    /// The origin a client's `User-Agent` shows: the public CLI (`qovery-cli`) and Terraform
    /// provider name themselves there; anything else is the API.
    pub fn from_user_agent(agent: &str) -> Origin {
        let agent = agent.to_ascii_lowercase();
        if agent.contains("terraform") {
            Origin::TerraformProvider
        } else if agent.contains("qovery-cli") || agent.contains("capstan-cli") {
            Origin::Cli
        } else {
            Origin::Api
        }
    }
}

string_enum!(
    /// The name of a deployment step, as the public API names them.
    StepName {
        RegistryCreateRepository => "REGISTRY_CREATE_REPOSITORY",
        GitClone => "GIT_CLONE",
        BuildQueueing => "BUILD_QUEUEING",
        Build => "BUILD",
        DeploymentQueueing => "DEPLOYMENT_QUEUEING",
        Deployment => "DEPLOYMENT",
        RouterDeployment => "ROUTER_DEPLOYMENT",
        MirrorImage => "MIRROR_IMAGE",
        Executing => "EXECUTING",
    }
);

string_enum!(
    /// How a step ended.
    StepStatus {
        Success => "SUCCESS",
        Error => "ERROR",
        Cancel => "CANCEL",
        Skip => "SKIP",
    }
);

string_enum!(
    /// What a terraform deployment does besides planning and applying (the public API's
    /// `action` of a terraform deploy).
    TerraformDeployAction {
        Plan => "PLAN",
        ForceUnlock => "FORCE_UNLOCK",
        MigrateState => "MIGRATE_STATE",
    }
);

/// What a deployment deploys: a commit, an image tag or a chart version, as the kind has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployTarget {
    pub git_commit_id: Option<String>,
    pub image_tag: Option<String>,
    pub chart_version: Option<String>,
    /// Who wrote the commit, when a push delivery said; kept in the request's snapshot.
    pub git_commit_author: Option<String>,
    /// A cron job's run at its schedule (its deployment only keeps the schedule); kept in the
    /// request's snapshot.
    pub scheduled_run: bool,
    /// A terraform deployment's action (none: plan and apply); kept in the request's snapshot.
    pub terraform_action: Option<TerraformDeployAction>,
    /// A database's redeploy onto another node of its cluster's Swarm (its id, address or host
    /// name), its data moved there; kept in the request's snapshot.
    pub move_to_node: Option<String>,
}

/// What a deployment deploys, as its history shows it: the service as configured when the
/// deployment was asked for. Stored as JSON; members a kind does not have are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentSnapshot {
    /// The service's name then.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit_id: Option<String>,
    /// Who wrote that commit, when the push that asked for it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_commit_author: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    /// Its service's kind (the history shows it after the service is gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ServiceKind>,
    /// A job's type (CRON or LIFECYCLE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    /// A cron job's run at its schedule, asked for by the scheduler.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scheduled_run: bool,
    /// A terraform deployment's action (none: plan and apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform_action: Option<TerraformDeployAction>,
    /// A database moved to this node of its Swarm by this redeploy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_to_node: Option<String>,
    /// Part of its environment's deletion: the environment goes with the last of them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deletes_environment: bool,
    /// The stage its service was in when it was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_id: Option<crate::ids::DeploymentStageId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_name: Option<String>,
}

/// One step the engine walked (or is walking: no status, no end yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: StepName,
    #[serde(default)]
    pub status: Option<StepStatus>,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRequest {
    pub id: DeploymentRequestId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub service_id: ServiceId,
    pub action: DeploymentAction,
    /// The token or user that asked.
    pub requested_by: String,
    pub target: DeployTarget,
    pub status: RequestStatus,
    /// The state this request has brought its service to.
    pub state: ServiceState,
    /// The environment-level action it is part of; its own id when asked for alone.
    pub batch_id: Uuid,
    /// What it deploys: the service as configured when it was asked for (name and the members
    /// a deployment history shows).
    pub snapshot: DeploymentSnapshot,
    pub steps: Vec<Step>,
    /// Why it ended in error or was canceled.
    pub reason: Option<String>,
    /// The worker running it (process-unique) and until when its claim holds; a claim that is
    /// not renewed in time belonged to a worker that died.
    pub claimed_by: Option<String>,
    pub lease_until: Option<OffsetDateTime>,
    pub cancel_requested: bool,
    pub created_at: OffsetDateTime,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
    /// Its place in its batch: the deployment order of its service's stage when it was asked
    /// for. An environment's requests run in (created_at, position, id) order.
    pub position: i32,
    /// Where the action came from.
    pub origin: Origin,
}

impl DeploymentRequest {
    /// The id of the deployment it is part of, as every client-facing answer names it: its
    /// batch's (its own when asked for alone).
    pub fn deployment_id(&self) -> DeploymentRequestId {
        DeploymentRequestId(self.batch_id)
    }
}

impl Record for DeploymentRequest {
    type Id = DeploymentRequestId;
    /// Requests are listed per service.
    type Parent = ServiceId;
    const KIND: &'static str = "deployment request";
    fn id(&self) -> DeploymentRequestId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// One step of a plan, and the event its success brings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub step: StepName,
    pub then: Event,
}

/// The steps the engine walks for an action. BUILDING only for services built from git; jobs
/// and terraform services then run (EXECUTING); services a router serves (`routed`) end with
/// the router's switch to their new replicas (ROUTER_DEPLOYMENT).
pub fn plan(action: DeploymentAction, kind: ServiceKind, builds: bool, routed: bool) -> Vec<Phase> {
    let phase = |step, then| Phase { step, then };
    match action {
        DeploymentAction::Deploy | DeploymentAction::Redeploy => {
            let mut phases = Vec::new();
            if builds {
                phases.push(phase(StepName::Build, Event::Built));
            }
            if matches!(kind, ServiceKind::Job | ServiceKind::Terraform) {
                phases.push(phase(StepName::Deployment, Event::Executing));
                phases.push(phase(StepName::Executing, Event::Succeeded));
            } else if routed {
                phases.push(phase(StepName::Deployment, Event::Routing));
                phases.push(phase(StepName::RouterDeployment, Event::Succeeded));
            } else {
                phases.push(phase(StepName::Deployment, Event::Succeeded));
            }
            phases
        }
        DeploymentAction::Restart
        | DeploymentAction::Stop
        | DeploymentAction::Delete
        | DeploymentAction::Uninstall => {
            vec![phase(StepName::Deployment, Event::Succeeded)]
        }
        DeploymentAction::Diff => vec![phase(StepName::Executing, Event::Succeeded)],
    }
}

impl DeploymentRequest {
    /// Whether this request deploys (and so appears in the deployment history).
    pub fn deploys(&self) -> bool {
        matches!(
            self.action,
            DeploymentAction::Deploy | DeploymentAction::Redeploy
        )
    }

    /// Whether it is part of its environment's deletion (earlier versions gave such requests
    /// the environment's id as their batch).
    pub fn deletes_environment(&self) -> bool {
        self.action == DeploymentAction::Delete
            && (self.snapshot.deletes_environment || self.batch_id == self.environment_id.0)
    }

    /// Its place in its environment's queue: requests run in this order.
    pub fn queue_key(&self) -> (OffsetDateTime, i32, DeploymentRequestId) {
        (self.created_at, self.position, self.id)
    }

    /// Ends the running step with `status`.
    pub fn end_step(&mut self, status: StepStatus, now: OffsetDateTime) {
        if let Some(step) = self.steps.last_mut().filter(|s| s.status.is_none()) {
            step.status = Some(status);
            step.finished_at = Some(now);
        }
    }

    /// Ends the request.
    pub fn finish(&mut self, status: RequestStatus, reason: Option<String>, now: OffsetDateTime) {
        self.status = status;
        self.reason = reason;
        self.finished_at = Some(now);
        self.lease_until = None;
    }
}

/// Sets the state new requests wait in: a request that has another of its environment ahead
/// of it in the queue (one already waiting or running, or one of its own batch in an earlier
/// place) waits (WAITING_RUNNING, ...) from the start; only the first in line shows the queued
/// state. Decided once, when the requests are queued, so what a client sees of a waiting
/// request never goes back from waiting to queued.
pub fn queue_up(requests: &mut [DeploymentRequest], environment_busy: bool) {
    requests.sort_by_key(DeploymentRequest::queue_key);
    for (i, r) in requests.iter_mut().enumerate() {
        r.state = ServiceState::queued(r.action);
        if environment_busy || i > 0 {
            r.state = super::transition(r.state, Event::Blocked).unwrap_or(r.state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_git_built_services_build_and_jobs_execute() {
        let steps =
            |a, k, b| -> Vec<StepName> { plan(a, k, b, false).iter().map(|p| p.step).collect() };
        use DeploymentAction as A;
        use ServiceKind as K;
        assert_eq!(
            steps(A::Deploy, K::Application, true),
            [StepName::Build, StepName::Deployment]
        );
        assert_eq!(
            steps(A::Deploy, K::Container, false),
            [StepName::Deployment]
        );
        assert_eq!(
            steps(A::Redeploy, K::Job, true),
            [StepName::Build, StepName::Deployment, StepName::Executing]
        );
        assert_eq!(steps(A::Diff, K::Helm, false), [StepName::Executing]);
        assert_eq!(steps(A::Stop, K::Database, false), [StepName::Deployment]);
        let routed: Vec<StepName> = plan(A::Redeploy, K::Container, false, true)
            .iter()
            .map(|p| p.step)
            .collect();
        assert_eq!(routed, [StepName::Deployment, StepName::RouterDeployment]);
        assert_eq!(
            plan(A::Restart, K::Container, false, true).len(),
            1,
            "a restart keeps its replicas: no switch"
        );
    }

    #[test]
    fn every_plan_walks_the_state_machine_to_its_end() {
        use super::super::transition;
        for action in DeploymentAction::ALL {
            for kind in ServiceKind::ALL {
                for (builds, routed) in [(false, false), (true, false), (false, true), (true, true)]
                {
                    let mut state = ServiceState::queued(*action);
                    state = transition(state, Event::Started { builds }).unwrap();
                    for phase in plan(*action, *kind, builds, routed) {
                        state = transition(state, phase.then).unwrap();
                    }
                    assert!(
                        state.is_settled() || state == ServiceState::Deleted,
                        "{action:?} {kind:?} ends in {state:?}"
                    );
                }
            }
        }
    }
}
