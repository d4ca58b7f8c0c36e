//! A service's deployment status, derived from its requests: the running one, the ones waiting
//! and the last that ended. Nothing here is stored; every read computes it from the queue.

use super::{
    DeploymentAction, DeploymentRequest, DeploymentStatus, Event, RequestStatus, Service,
    ServiceState, StepName, StepStatus,
};
use crate::ids::{DeploymentRequestId, ServiceId};
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

string_enum!(
    /// The action of `status_details`.
    ServiceAction {
        Deploy => "DEPLOY",
        Delete => "DELETE",
        Restart => "RESTART",
        Stop => "STOP",
        Unknown => "UNKNOWN",
    }
);

string_enum!(
    /// The status of `status_details`.
    ServiceActionStatus {
        Queued => "QUEUED",
        Ongoing => "ONGOING",
        Success => "SUCCESS",
        Error => "ERROR",
        Executing => "EXECUTING",
        Canceled => "CANCELED",
        Canceling => "CANCELING",
        Never => "NEVER",
    }
);

string_enum!(
    /// The sub-action of `status_details`; only terraform actions have others than NONE.
    ServiceSubAction {
        None => "NONE",
        TerraformPlanOnly => "TERRAFORM_PLAN_ONLY",
        TerraformPlanAndApply => "TERRAFORM_PLAN_AND_APPLY",
        TerraformDestroy => "TERRAFORM_DESTROY",
        TerraformForceUnlockState => "TERRAFORM_FORCE_UNLOCK_STATE",
        TerraformMigrateState => "TERRAFORM_MIGRATE_STATE",
    }
);

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusDetails {
    pub action: ServiceAction,
    pub status: ServiceActionStatus,
    pub sub_action: ServiceSubAction,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepMetric {
    pub step_name: StepName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StepStatus>,
    pub duration_sec: i64,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepMetrics {
    /// Null until the request has ended.
    pub total_duration_sec: Option<i64>,
    /// Without the time spent waiting in the queue.
    pub total_computing_duration_sec: i64,
    pub details: Vec<StepMetric>,
}

/// The deployment status of a service, as every status operation shows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceStatus {
    /// The service's id.
    pub id: ServiceId,
    pub state: ServiceState,
    pub service_deployment_status: DeploymentStatus,
    pub is_part_last_deployment: bool,
    pub status_details: StatusDetails,
    /// The service's latest request.
    pub deployment_request_id: Option<DeploymentRequestId>,
    /// Requests waiting or running.
    pub deployment_requests_count: u64,
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_deployment_date: Option<OffsetDateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepMetrics>,
}

/// What the status of one service needs to know of its environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvironmentActivity {
    /// The request running in the environment, if any.
    pub running: Option<DeploymentRequest>,
    /// The environment's waiting and running requests, oldest first.
    pub pending: Vec<DeploymentRequest>,
    /// The batch of the environment's latest request.
    pub last_batch: Option<Uuid>,
}

impl EnvironmentActivity {
    /// Whether the environment itself is being deleted.
    pub fn deleting(&self, environment: Uuid) -> bool {
        self.pending
            .iter()
            .any(|r| r.action == DeploymentAction::Delete && r.batch_id == environment)
    }
}

fn seconds(from: OffsetDateTime, to: OffsetDateTime) -> i64 {
    (to - from).whole_seconds().max(0)
}

fn steps(r: &DeploymentRequest, now: OffsetDateTime) -> Option<StepMetrics> {
    let started = r.started_at?;
    let queueing = if r.steps.first().map(|s| s.name) == Some(StepName::Build) {
        StepName::BuildQueueing
    } else {
        StepName::DeploymentQueueing
    };
    let mut details = vec![StepMetric {
        step_name: queueing,
        status: Some(StepStatus::Success),
        duration_sec: seconds(r.created_at, started),
    }];
    details.extend(r.steps.iter().map(|s| StepMetric {
        step_name: s.name,
        status: s.status,
        duration_sec: seconds(s.started_at, s.finished_at.unwrap_or(now)),
    }));
    Some(StepMetrics {
        total_duration_sec: r.finished_at.map(|end| seconds(r.created_at, end)),
        total_computing_duration_sec: seconds(started, r.finished_at.unwrap_or(now)),
        details,
    })
}

fn details(latest: Option<&DeploymentRequest>) -> StatusDetails {
    let (action, status) = match latest {
        None => (ServiceAction::Deploy, ServiceActionStatus::Never),
        Some(r) => (
            match r.action {
                DeploymentAction::Deploy | DeploymentAction::Redeploy | DeploymentAction::Diff => {
                    ServiceAction::Deploy
                }
                DeploymentAction::Restart => ServiceAction::Restart,
                DeploymentAction::Stop => ServiceAction::Stop,
                DeploymentAction::Delete => ServiceAction::Delete,
            },
            match r.status {
                RequestStatus::Queued => ServiceActionStatus::Queued,
                RequestStatus::Running if r.cancel_requested => ServiceActionStatus::Canceling,
                RequestStatus::Running => ServiceActionStatus::Ongoing,
                RequestStatus::Success => ServiceActionStatus::Success,
                RequestStatus::Error => ServiceActionStatus::Error,
                RequestStatus::Canceled => ServiceActionStatus::Canceled,
            },
        ),
    };
    StatusDetails {
        action,
        status,
        sub_action: ServiceSubAction::None,
    }
}

/// The state a service is in, given its requests (any order; at least those waiting or running
/// and the latest that ended of each action) and its environment's activity.
pub fn service_state(
    service: ServiceId,
    requests: &[DeploymentRequest],
    env: &EnvironmentActivity,
) -> ServiceState {
    let mut pending: Vec<&DeploymentRequest> = requests
        .iter()
        .filter(|r| !r.status.is_finished())
        .collect();
    pending.sort_by_key(|r| (r.created_at, r.id));
    if let Some(running) = pending.iter().find(|r| r.status == RequestStatus::Running) {
        if running.cancel_requested {
            return super::transition(running.state, Event::CancelRequested)
                .unwrap_or(running.state);
        }
        return running.state;
    }
    if let Some(next) = pending.first() {
        let blocked = env
            .running
            .as_ref()
            .is_some_and(|r| r.service_id != service);
        return if blocked {
            super::transition(next.state, Event::Blocked).unwrap_or(next.state)
        } else {
            next.state
        };
    }
    // A diff changes nothing, so the state is that of the latest other request.
    requests
        .iter()
        .filter(|r| r.action != DeploymentAction::Diff)
        .max_by_key(|r| (r.created_at, r.id))
        .map_or(ServiceState::Ready, |r| r.state)
}

/// The deployment status of `service`, from its requests (as for [`service_state`]).
pub fn service_status(
    service: &Service,
    requests: &[DeploymentRequest],
    env: &EnvironmentActivity,
    now: OffsetDateTime,
) -> ServiceStatus {
    let latest = requests.iter().max_by_key(|r| (r.created_at, r.id));
    ServiceStatus {
        id: service.id,
        state: service_state(service.id, requests, env),
        service_deployment_status: service.deployment_status,
        is_part_last_deployment: latest.is_some_and(|r| Some(r.batch_id) == env.last_batch),
        status_details: details(latest),
        deployment_request_id: latest.map(|r| r.id),
        deployment_requests_count: requests.iter().filter(|r| !r.status.is_finished()).count()
            as u64,
        last_deployment_date: latest.map(|r| r.created_at),
        steps: latest.and_then(|r| steps(r, now)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;
    use crate::model::{DeployTarget, Step};
    use time::Duration;

    fn request(service: ServiceId, action: DeploymentAction, minute: i64) -> DeploymentRequest {
        let at = OffsetDateTime::UNIX_EPOCH + Duration::minutes(minute);
        let id = DeploymentRequestId::generate();
        DeploymentRequest {
            id,
            organization_id: OrganizationId::generate(),
            environment_id: EnvironmentId::generate(),
            service_id: service,
            action,
            requested_by: "t".into(),
            target: DeployTarget::default(),
            status: RequestStatus::Queued,
            state: ServiceState::queued(action),
            batch_id: id.0,
            snapshot: Default::default(),
            steps: vec![],
            reason: None,
            claimed_by: None,
            lease_until: None,
            cancel_requested: false,
            created_at: at,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn a_service_without_requests_is_ready_and_never_deployed() {
        let s = ServiceId::generate();
        assert_eq!(
            service_state(s, &[], &EnvironmentActivity::default()),
            ServiceState::Ready
        );
        assert_eq!(
            details(None),
            StatusDetails {
                action: ServiceAction::Deploy,
                status: ServiceActionStatus::Never,
                sub_action: ServiceSubAction::None
            }
        );
    }

    #[test]
    fn a_queued_request_waits_while_another_service_runs() {
        let s = ServiceId::generate();
        let mine = request(s, DeploymentAction::Deploy, 1);
        let mut other = request(ServiceId::generate(), DeploymentAction::Restart, 0);
        other.status = RequestStatus::Running;
        other.state = ServiceState::Restarting;
        let idle = EnvironmentActivity::default();
        let busy = EnvironmentActivity {
            running: Some(other),
            ..Default::default()
        };
        let reqs = [mine];
        assert_eq!(
            service_state(s, &reqs, &idle),
            ServiceState::DeploymentQueued
        );
        assert_eq!(service_state(s, &reqs, &busy), ServiceState::WaitingRunning);
    }

    #[test]
    fn the_running_request_decides_and_a_cancel_shows_canceling() {
        let s = ServiceId::generate();
        let mut running = request(s, DeploymentAction::Deploy, 0);
        running.status = RequestStatus::Running;
        running.state = ServiceState::Building;
        let queued = request(s, DeploymentAction::Stop, 1);
        let env = EnvironmentActivity::default();
        let mut reqs = vec![running, queued];
        assert_eq!(service_state(s, &reqs, &env), ServiceState::Building);
        reqs[0].cancel_requested = true;
        assert_eq!(service_state(s, &reqs, &env), ServiceState::Canceling);
    }

    #[test]
    fn a_diff_leaves_the_state_of_the_request_before_it() {
        let s = ServiceId::generate();
        let mut stop = request(s, DeploymentAction::Stop, 0);
        stop.status = RequestStatus::Success;
        stop.state = ServiceState::Stopped;
        let mut diff = request(s, DeploymentAction::Diff, 1);
        diff.status = RequestStatus::Success;
        diff.state = ServiceState::Deployed;
        assert_eq!(
            service_state(s, &[stop, diff], &EnvironmentActivity::default()),
            ServiceState::Stopped
        );
    }

    #[test]
    fn status_counts_pending_requests_and_measures_steps() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::minutes(10);
        let body = serde_json::json!({"name": "db", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"});
        let draft =
            crate::model::ServiceDraft::parse(crate::model::ServiceKind::Database, &body, None)
                .unwrap();
        let service = Service {
            id: ServiceId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: draft.name,
            description: None,
            spec: draft.spec,
            deployment_status: DeploymentStatus::UpToDate,
            created_at: now,
            updated_at: now,
        };
        let mut done = request(service.id, DeploymentAction::Deploy, 0);
        done.status = RequestStatus::Success;
        done.state = ServiceState::Deployed;
        done.started_at = Some(done.created_at + Duration::seconds(5));
        done.steps = vec![Step {
            name: StepName::Build,
            status: Some(StepStatus::Success),
            started_at: done.created_at + Duration::seconds(5),
            finished_at: Some(done.created_at + Duration::seconds(65)),
        }];
        done.finished_at = Some(done.created_at + Duration::seconds(65));
        let env = EnvironmentActivity {
            last_batch: Some(done.batch_id),
            ..Default::default()
        };
        let status = service_status(&service, std::slice::from_ref(&done), &env, now);
        assert_eq!(status.state, ServiceState::Deployed);
        assert!(status.is_part_last_deployment);
        assert_eq!(status.deployment_requests_count, 0);
        assert_eq!(status.deployment_request_id, Some(done.id));
        let steps = status.steps.unwrap();
        assert_eq!(steps.total_duration_sec, Some(65));
        assert_eq!(steps.total_computing_duration_sec, 60);
        assert_eq!(steps.details[0].step_name, StepName::BuildQueueing);
        assert_eq!(steps.details[0].duration_sec, 5);
        assert_eq!(steps.details[1].duration_sec, 60);

        let later = request(service.id, DeploymentAction::Restart, 2);
        let status = service_status(&service, &[done, later.clone()], &env, now);
        assert_eq!(status.deployment_requests_count, 1);
        assert_eq!(status.deployment_request_id, Some(later.id));
        assert!(!status.is_part_last_deployment);
        assert_eq!(status.status_details.status, ServiceActionStatus::Queued);
        assert_eq!(status.status_details.action, ServiceAction::Restart);
        assert!(status.steps.is_none(), "a queued request has no steps yet");
    }
}
