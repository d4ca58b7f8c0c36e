//! A service's deployment status, derived from its requests: the running one, the ones waiting
//! and the last that ended. Nothing here is stored; every read computes it from the queue.

use super::{
    DeploymentAction, DeploymentRequest, DeploymentStatus, Event, RequestStatus, Service,
    ServiceKind, ServiceState, StepName, StepStatus, TerraformDeployAction,
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

string_enum!(
    /// How far a stage of a deployment (or one service in it) is, as queues and histories
    /// show it.
    StageStatus {
        Queued => "QUEUED",
        Ongoing => "ONGOING",
        Done => "DONE",
        Error => "ERROR",
        Skipped => "SKIPPED",
        Canceled => "CANCELED",
    }
);

string_enum!(
    /// What a deployment was asked to do, as queues and histories show it.
    TriggerAction {
        Deploy => "DEPLOY",
        Delete => "DELETE",
        Restart => "RESTART",
        Stop => "STOP",
        DeployDryRun => "DEPLOY_DRY_RUN",
        TerraformForceUnlock => "TERRAFORM_FORCE_UNLOCK",
        TerraformMigrateState => "TERRAFORM_MIGRATE_STATE",
        DeleteResourcesOnly => "DELETE_RESOURCES_ONLY",
        Unknown => "UNKNOWN",
        Uninstall => "UNINSTALL",
    }
);

impl ServiceSubAction {
    /// What a request does to a terraform service's state: NONE for other kinds, and for the
    /// actions that run no terraform (stop, restart, a dry run).
    pub fn of(
        kind: Option<ServiceKind>,
        action: DeploymentAction,
        terraform: Option<TerraformDeployAction>,
    ) -> Self {
        use DeploymentAction as A;
        use TerraformDeployAction as T;
        if kind != Some(ServiceKind::Terraform) {
            return Self::None;
        }
        match (action, terraform) {
            (A::Deploy | A::Redeploy, None) => Self::TerraformPlanAndApply,
            (A::Deploy | A::Redeploy, Some(T::Plan)) => Self::TerraformPlanOnly,
            (A::Deploy | A::Redeploy, Some(T::ForceUnlock)) => Self::TerraformForceUnlockState,
            (A::Deploy | A::Redeploy, Some(T::MigrateState)) => Self::TerraformMigrateState,
            (A::Delete | A::Uninstall, _) => Self::TerraformDestroy,
            (A::Restart | A::Stop | A::Diff, _) => Self::None,
        }
    }

    /// A request's.
    pub fn of_request(r: &DeploymentRequest) -> Self {
        Self::of(r.snapshot.kind, r.action, r.snapshot.terraform_action)
    }
}

impl TriggerAction {
    /// How a deployment of `action` shows in histories; a terraform deploy that unlocks or
    /// migrates the state shows as that.
    pub fn of(action: DeploymentAction, terraform: Option<TerraformDeployAction>) -> Self {
        match action {
            DeploymentAction::Deploy | DeploymentAction::Redeploy => match terraform {
                Some(TerraformDeployAction::ForceUnlock) => Self::TerraformForceUnlock,
                Some(TerraformDeployAction::MigrateState) => Self::TerraformMigrateState,
                Some(TerraformDeployAction::Plan) | None => Self::Deploy,
            },
            DeploymentAction::Diff => Self::DeployDryRun,
            DeploymentAction::Restart => Self::Restart,
            DeploymentAction::Stop => Self::Stop,
            DeploymentAction::Delete => Self::Delete,
            DeploymentAction::Uninstall => Self::Uninstall,
        }
    }
}

impl StageStatus {
    /// One request's.
    pub fn of_request(r: &DeploymentRequest) -> Self {
        match r.status {
            RequestStatus::Queued => Self::Queued,
            RequestStatus::Running => Self::Ongoing,
            RequestStatus::Success => Self::Done,
            RequestStatus::Error => Self::Error,
            RequestStatus::Canceled => Self::Canceled,
        }
    }

    /// A stage's, from its requests: waiting until one starts, ongoing until all end, then
    /// ERROR if one failed, SKIPPED if none ran (an earlier stage failed or the deployment was
    /// canceled before it), CANCELED if some were canceled, else DONE.
    pub fn of_stage(requests: &[&DeploymentRequest]) -> Self {
        let all = |s: RequestStatus| requests.iter().all(|r| r.status == s);
        let any = |s: RequestStatus| requests.iter().any(|r| r.status == s);
        if all(RequestStatus::Queued) {
            Self::Queued
        } else if any(RequestStatus::Queued) || any(RequestStatus::Running) {
            Self::Ongoing
        } else if any(RequestStatus::Error) {
            Self::Error
        } else if requests
            .iter()
            .all(|r| r.status == RequestStatus::Canceled && r.started_at.is_none())
        {
            Self::Skipped
        } else if any(RequestStatus::Canceled) {
            Self::Canceled
        } else {
            Self::Done
        }
    }
}

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
    /// The deployment the shown request is part of: the id its action answered (an
    /// environment's action for every service it carries), the one queues list, cancels take
    /// and histories name.
    pub deployment_request_id: Option<DeploymentRequestId>,
    /// The same deployment, as histories name it (`execution_id`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    /// Requests waiting or running.
    pub deployment_requests_count: u64,
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    /// When its latest request was asked for (before any, when the service was created).
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
            .any(|r| r.environment_id.0 == environment && r.deletes_environment())
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

/// The `status_details` action of a request's action.
pub fn service_action(action: DeploymentAction) -> ServiceAction {
    match action {
        DeploymentAction::Deploy | DeploymentAction::Redeploy | DeploymentAction::Diff => {
            ServiceAction::Deploy
        }
        DeploymentAction::Restart => ServiceAction::Restart,
        DeploymentAction::Stop => ServiceAction::Stop,
        DeploymentAction::Delete | DeploymentAction::Uninstall => ServiceAction::Delete,
    }
}

/// The `status_details` status of a request.
pub fn action_status(r: &DeploymentRequest) -> ServiceActionStatus {
    match r.status {
        RequestStatus::Queued => ServiceActionStatus::Queued,
        RequestStatus::Running if r.cancel_requested => ServiceActionStatus::Canceling,
        RequestStatus::Running => ServiceActionStatus::Ongoing,
        RequestStatus::Success => ServiceActionStatus::Success,
        RequestStatus::Error => ServiceActionStatus::Error,
        RequestStatus::Canceled => ServiceActionStatus::Canceled,
    }
}

impl StatusDetails {
    /// A request's.
    pub fn of(r: &DeploymentRequest) -> Self {
        StatusDetails {
            action: service_action(r.action),
            status: action_status(r),
            sub_action: ServiceSubAction::of_request(r),
        }
    }

    /// Before any deployment.
    pub const NEVER: StatusDetails = StatusDetails {
        action: ServiceAction::Deploy,
        status: ServiceActionStatus::Never,
        sub_action: ServiceSubAction::None,
    };
}

fn details(shown: Option<&DeploymentRequest>) -> StatusDetails {
    shown.map_or(StatusDetails::NEVER, StatusDetails::of)
}

/// The request a service's status describes (its `state`, `status_details` and
/// `deployment_request_id` all come from it): the one running, else the first in line, else
/// the latest that ended. A diff that ended changed nothing, so the request before it is shown.
pub fn shown_request(requests: &[DeploymentRequest]) -> Option<&DeploymentRequest> {
    let mut pending: Vec<&DeploymentRequest> = requests
        .iter()
        .filter(|r| !r.status.is_finished())
        .collect();
    pending.sort_by_key(|r| r.queue_key());
    if let Some(running) = pending.iter().find(|r| r.status == RequestStatus::Running) {
        return Some(running);
    }
    if let Some(next) = pending.first() {
        return Some(next);
    }
    requests
        .iter()
        .filter(|r| r.action != DeploymentAction::Diff)
        .max_by_key(|r| r.queue_key())
}

/// The state a request shows: its own, or CANCELING once a cancel of it was asked for.
fn state_of(r: &DeploymentRequest) -> ServiceState {
    if r.status == RequestStatus::Running && r.cancel_requested {
        super::transition(r.state, Event::CancelRequested).unwrap_or(r.state)
    } else {
        r.state
    }
}

/// The state a service is in, given its requests (any order; at least those waiting or running
/// and the latest that ended of each action).
pub fn service_state(requests: &[DeploymentRequest]) -> ServiceState {
    shown_request(requests).map_or(ServiceState::Ready, state_of)
}

/// The deployment status of `service`, from its requests (as for [`service_state`]).
pub fn service_status(
    service: &Service,
    requests: &[DeploymentRequest],
    env: &EnvironmentActivity,
    now: OffsetDateTime,
) -> ServiceStatus {
    let shown = shown_request(requests);
    ServiceStatus {
        id: service.id,
        state: shown.map_or(ServiceState::Ready, state_of),
        service_deployment_status: service.deployment_status,
        is_part_last_deployment: shown.is_some_and(|r| Some(r.batch_id) == env.last_batch),
        status_details: details(shown),
        deployment_request_id: shown.map(DeploymentRequest::deployment_id),
        execution_id: shown.map(|r| r.batch_id.to_string()),
        deployment_requests_count: requests.iter().filter(|r| !r.status.is_finished()).count()
            as u64,
        // Before any request, the service's creation: deployment tools refuse a status
        // without a date.
        last_deployment_date: Some(shown.map_or(service.created_at, |r| r.created_at)),
        steps: shown.and_then(|r| steps(r, now)),
    }
}

/// What one deployment (a batch: an environment-level action, or one service's request)
/// shows as a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSummary {
    pub id: Uuid,
    /// One of the values the public tools wait on: the action's queued state until a request
    /// starts, then its running state (CANCELING once a cancel was asked for), then its
    /// outcome. It never goes back.
    pub state: ServiceState,
    pub details: StatusDetails,
    pub created_at: OffsetDateTime,
    /// When its last request ended; `None` while any waits or runs.
    pub finished_at: Option<OffsetDateTime>,
    pub requested_by: String,
    pub origin: super::Origin,
    pub action: DeploymentAction,
    /// The first request's terraform action, when it asked for one.
    pub terraform_action: Option<TerraformDeployAction>,
}

impl BatchSummary {
    pub fn duration_sec(&self) -> Option<i64> {
        self.finished_at.map(|end| seconds(self.created_at, end))
    }
}

/// The summary of one batch from its requests (all of them, any order); `None` for none.
pub fn batch_summary(requests: &[&DeploymentRequest]) -> Option<BatchSummary> {
    let first = requests.iter().min_by_key(|r| r.queue_key())?;
    let action = first.action;
    let (queued, running, success, error) = match action {
        DeploymentAction::Deploy | DeploymentAction::Redeploy => (
            ServiceState::DeploymentQueued,
            ServiceState::Deploying,
            ServiceState::Deployed,
            ServiceState::DeploymentError,
        ),
        // EXECUTING is not among the states deployment tools wait through at this level.
        DeploymentAction::Diff => (
            ServiceState::Queued,
            ServiceState::Deploying,
            ServiceState::Deployed,
            ServiceState::DeploymentError,
        ),
        DeploymentAction::Restart => (
            ServiceState::RestartQueued,
            ServiceState::Restarting,
            ServiceState::Restarted,
            ServiceState::RestartError,
        ),
        DeploymentAction::Stop => (
            ServiceState::StopQueued,
            ServiceState::Stopping,
            ServiceState::Stopped,
            ServiceState::StopError,
        ),
        DeploymentAction::Delete | DeploymentAction::Uninstall => (
            ServiceState::DeleteQueued,
            ServiceState::Deleting,
            ServiceState::Deleted,
            ServiceState::DeleteError,
        ),
    };
    let pending = requests.iter().any(|r| !r.status.is_finished());
    let started = requests.iter().any(|r| r.status != RequestStatus::Queued);
    let canceling = requests
        .iter()
        .any(|r| !r.status.is_finished() && r.cancel_requested);
    let errored = requests.iter().any(|r| r.status == RequestStatus::Error);
    let canceled = requests.iter().any(|r| r.status == RequestStatus::Canceled);
    let (state, status) = if canceling {
        (ServiceState::Canceling, ServiceActionStatus::Canceling)
    } else if pending && started {
        (running, ServiceActionStatus::Ongoing)
    } else if pending {
        (queued, ServiceActionStatus::Queued)
    } else if errored {
        (error, ServiceActionStatus::Error)
    } else if canceled {
        (ServiceState::Canceled, ServiceActionStatus::Canceled)
    } else {
        (success, ServiceActionStatus::Success)
    };
    Some(BatchSummary {
        id: first.batch_id,
        state,
        details: StatusDetails {
            action: service_action(action),
            status,
            sub_action: ServiceSubAction::of_request(first),
        },
        created_at: first.created_at,
        finished_at: if pending {
            None
        } else {
            requests.iter().filter_map(|r| r.finished_at).max()
        },
        requested_by: first.requested_by.clone(),
        origin: first.origin,
        action,
        terraform_action: first.snapshot.terraform_action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;
    use crate::model::{DeployTarget, Origin, Step};
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
            position: 0,
            origin: Origin::Api,
        }
    }

    #[test]
    fn a_service_without_requests_is_ready_and_never_deployed() {
        assert_eq!(service_state(&[]), ServiceState::Ready);
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
    fn a_request_behind_another_waits_from_the_start_and_never_shows_queued_again() {
        let s = ServiceId::generate();
        let mut batch = vec![
            request(s, DeploymentAction::Deploy, 1),
            request(ServiceId::generate(), DeploymentAction::Deploy, 1),
        ];
        batch[0].position = 2;
        batch[1].position = 1;
        crate::model::queue_up(&mut batch, false);
        // The earlier stage's request is first in line; the other waits behind it.
        assert_eq!(batch[0].position, 1);
        assert_eq!(batch[0].state, ServiceState::DeploymentQueued);
        assert_eq!(batch[1].state, ServiceState::WaitingRunning);
        let mut alone = vec![request(s, DeploymentAction::Restart, 2)];
        crate::model::queue_up(&mut alone, true);
        assert_eq!(alone[0].state, ServiceState::WaitingRestarting);
        // Whatever else runs or ends meanwhile, the waiting request shows its own state.
        assert_eq!(
            service_state(std::slice::from_ref(&batch[1])),
            ServiceState::WaitingRunning
        );
    }

    #[test]
    fn state_details_and_request_id_describe_the_same_request() {
        let s = ServiceId::generate();
        let mut running = request(s, DeploymentAction::Deploy, 0);
        running.status = RequestStatus::Running;
        running.state = ServiceState::Deploying;
        let queued = request(s, DeploymentAction::Stop, 1);
        let service = test_service(s);
        let st = service_status(
            &service,
            &[running.clone(), queued],
            &EnvironmentActivity::default(),
            running.created_at,
        );
        assert_eq!(st.state, ServiceState::Deploying);
        assert_eq!(st.deployment_request_id, Some(running.id));
        assert_eq!(st.status_details.action, ServiceAction::Deploy);
        assert_eq!(st.status_details.status, ServiceActionStatus::Ongoing);
        assert_eq!(st.deployment_requests_count, 2);
    }

    #[test]
    fn a_batch_moves_from_queued_to_running_to_its_outcome() {
        let mk = |status: RequestStatus| {
            let mut r = request(ServiceId::generate(), DeploymentAction::Deploy, 0);
            r.status = status;
            r
        };
        let summary = |rs: &[DeploymentRequest]| {
            let refs: Vec<&DeploymentRequest> = rs.iter().collect();
            batch_summary(&refs).unwrap().state
        };
        use RequestStatus as R;
        assert_eq!(
            summary(&[mk(R::Queued), mk(R::Queued)]),
            ServiceState::DeploymentQueued
        );
        assert_eq!(
            summary(&[mk(R::Success), mk(R::Queued)]),
            ServiceState::Deploying
        );
        assert_eq!(
            summary(&[mk(R::Success), mk(R::Success)]),
            ServiceState::Deployed
        );
        assert_eq!(
            summary(&[mk(R::Error), mk(R::Canceled)]),
            ServiceState::DeploymentError
        );
        assert_eq!(
            summary(&[mk(R::Success), mk(R::Canceled)]),
            ServiceState::Canceled
        );
        let mut flagged = mk(R::Running);
        flagged.cancel_requested = true;
        assert_eq!(
            summary(&[flagged, mk(R::Canceled)]),
            ServiceState::Canceling
        );
        assert!(batch_summary(&[]).is_none());
    }

    #[test]
    fn the_running_request_decides_and_a_cancel_shows_canceling() {
        let s = ServiceId::generate();
        let mut running = request(s, DeploymentAction::Deploy, 0);
        running.status = RequestStatus::Running;
        running.state = ServiceState::Building;
        let queued = request(s, DeploymentAction::Stop, 1);
        let mut reqs = vec![running, queued];
        assert_eq!(service_state(&reqs), ServiceState::Building);
        reqs[0].cancel_requested = true;
        assert_eq!(service_state(&reqs), ServiceState::Canceling);
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
        assert_eq!(service_state(&[stop, diff]), ServiceState::Stopped);
    }

    fn test_service(id: ServiceId) -> Service {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::minutes(10);
        let body = serde_json::json!({"name": "db", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"});
        let draft =
            crate::model::ServiceDraft::parse(crate::model::ServiceKind::Database, &body, None)
                .unwrap();
        Service {
            id,
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: draft.name,
            description: None,
            spec: draft.spec,
            deployment_status: DeploymentStatus::UpToDate,
            advanced_settings: Default::default(),
            groups: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn status_counts_pending_requests_and_measures_steps() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::minutes(10);
        let service = test_service(ServiceId::generate());
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
