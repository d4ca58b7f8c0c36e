//! Deployment statuses: of a service, of an environment's services, of an environment and of a
//! project's environments. Nothing is stored; every read derives them from the queue.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{EnvironmentId, ProjectId, ServiceId};
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use crate::ports::{Repo, Unit};
use serde::Serialize;
use std::collections::HashMap;
use time::OffsetDateTime;
use uuid::Uuid;

/// An environment's deployment status: the public `EnvironmentStatus`, with the members of a
/// service `Status` too, so that one answer satisfies the operations that answer either (an
/// environment's deploy answers `Status`, its other actions `EnvironmentStatus`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvironmentStatus {
    pub id: EnvironmentId,
    /// The state of the environment's latest deployment, as `last_deployment_state`.
    pub state: ServiceState,
    /// Its latest deployment's queued state until a service of it starts, then its running
    /// state (CANCELING once a cancel was asked for), then its outcome: DEPLOYED, RESTARTED,
    /// STOPPED, DELETED, CANCELED or an *_ERROR. READY before any deployment.
    pub last_deployment_state: ServiceState,
    /// The latest deployment's id (the id cancelDeployment and the queue take).
    pub last_deployment_id: Option<Uuid>,
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_deployment_date: Option<OffsetDateTime>,
    pub origin: Option<Origin>,
    pub triggered_by: Option<String>,
    /// NEVER_DEPLOYED until a service is deployed; OUT_OF_DATE while one is not up to date.
    pub deployment_status: DeploymentStatus,
    /// The latest deployment's id.
    pub deployment_request_id: Option<Uuid>,
    /// Once the latest deployment has ended.
    pub total_deployment_duration_in_seconds: Option<i64>,
    /// As `deployment_status` (the member a service `Status` has).
    pub service_deployment_status: DeploymentStatus,
    /// The latest deployment's action and how far it is.
    pub status_details: StatusDetails,
    pub is_part_last_deployment: bool,
    /// Requests waiting or running in the environment.
    pub deployment_requests_count: u64,
}

/// An environment's status and the statuses of its services by kind.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentStatuses {
    pub environment: EnvironmentStatus,
    pub applications: Vec<ServiceStatus>,
    pub containers: Vec<ServiceStatus>,
    pub databases: Vec<ServiceStatus>,
    pub jobs: Vec<ServiceStatus>,
    pub helms: Vec<ServiceStatus>,
    pub terraforms: Vec<ServiceStatus>,
}

/// An environment's statuses, its stages in deployment order, and the stage of each service.
#[derive(Debug, Clone)]
pub struct StagedStatuses {
    pub statuses: EnvironmentStatuses,
    pub stages: Vec<DeploymentStage>,
    pub members: Vec<StageMember>,
}

/// The requests of one service among those of many.
pub(super) fn of(requests: &[DeploymentRequest], service: ServiceId) -> Vec<DeploymentRequest> {
    requests
        .iter()
        .filter(|r| r.service_id == service)
        .cloned()
        .collect()
}

/// Whether an environment's services run what is configured.
fn environment_deployment_status(statuses: &[ServiceStatus]) -> DeploymentStatus {
    let all = |d: DeploymentStatus| statuses.iter().all(|s| s.service_deployment_status == d);
    if all(DeploymentStatus::NeverDeployed) {
        DeploymentStatus::NeverDeployed
    } else if all(DeploymentStatus::UpToDate) {
        DeploymentStatus::UpToDate
    } else {
        DeploymentStatus::OutOfDate
    }
}

/// The status of an environment as one of its deployments (`batch`, all of its requests)
/// shows it.
pub(super) fn batch_status(
    environment: EnvironmentId,
    env: &EnvironmentActivity,
    batch: &[DeploymentRequest],
    deployment_status: DeploymentStatus,
    created_at: OffsetDateTime,
) -> EnvironmentStatus {
    let refs: Vec<&DeploymentRequest> = batch.iter().collect();
    let summary = batch_summary(&refs);
    let state = summary.as_ref().map_or(ServiceState::Ready, |b| b.state);
    EnvironmentStatus {
        id: environment,
        state,
        last_deployment_state: state,
        last_deployment_id: summary.as_ref().map(|b| b.id),
        // Before any deployment, the environment's creation: deployment tools refuse a status
        // without a date.
        last_deployment_date: Some(summary.as_ref().map_or(created_at, |b| b.created_at)),
        origin: summary.as_ref().map(|b| b.origin),
        triggered_by: summary.as_ref().map(|b| b.requested_by.clone()),
        deployment_status,
        deployment_request_id: summary.as_ref().map(|b| b.id),
        total_deployment_duration_in_seconds: summary.as_ref().and_then(|b| b.duration_sec()),
        service_deployment_status: deployment_status,
        status_details: summary.map_or(StatusDetails::NEVER, |b| b.details),
        is_part_last_deployment: true,
        deployment_requests_count: env.pending.len() as u64,
    }
}

impl Capstan {
    /// The activity of `environment` and the statuses of its `services`, in their
    /// order, read in the unit that read the services (a snapshot, or a write unit holding
    /// their environment): the worker ends a request and saves its service in one unit, so the
    /// two always agree.
    pub(super) async fn statuses(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
        services: &[Service],
    ) -> DomainResult<(EnvironmentActivity, Vec<ServiceStatus>)> {
        let ids: Vec<ServiceId> = services.iter().map(|s| s.id).collect();
        let (env, requests) = tx.activity_of(environment, &ids).await?;
        let now = self.now();
        let statuses = services
            .iter()
            .map(|s| service_status(s, &of(&requests, s.id), &env, now))
            .collect();
        Ok((env, statuses))
    }

    pub(super) async fn status_of(
        &self,
        tx: &mut Unit,
        service: &Service,
    ) -> DomainResult<ServiceStatus> {
        let (_, mut one) = self
            .statuses(tx, service.environment_id, std::slice::from_ref(service))
            .await?;
        one.pop()
            .ok_or_else(|| DomainError::Internal("status vanished".into()))
    }

    pub async fn service_status(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<ServiceStatus> {
        Ok(self.service_with_status(p, kind, id).await?.1)
    }

    /// `GET /{kind}/{id}/ingressDeploymentStatus`: the router's state for the service. A
    /// deployment on its way is the ingress's too (the router's switch is one of its steps);
    /// settled, the ingress is DEPLOYED while the router has a running replica to send the
    /// service's requests to, STOPPED when it has none. Without a router (or for a service it
    /// does not serve), the ingress is the published ports, deployed with the service. Its
    /// router is its environment's (one per environment, as the public API has). Answers
    /// (router id, state).
    pub async fn ingress_status(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<(EnvironmentId, ServiceState)> {
        let (service, status) = self.service_with_status(p, kind, id).await?;
        let router = self.router.as_ref().filter(|_| is_routed(&service));
        let Some(router) = router.filter(|_| status.state.is_settled()) else {
            return Ok((service.environment_id, status.state));
        };
        let seen = self
            .reading()
            .await?
            .running_states(&[service.id])
            .await?
            .into_iter()
            .next();
        let environment = service.environment_id;
        let table = RouteTable::of(router, &[(service, seen)], &[], &[]);
        let serving = table.routes.values().any(|r| !r.backends.is_empty());
        let state = match status.state {
            _ if serving => ServiceState::Deployed,
            ServiceState::Deployed | ServiceState::Restarted => ServiceState::Stopped,
            settled => settled,
        };
        Ok((environment, state))
    }

    /// A service with its status, from one read, no snapshot: the checks of `load_service`,
    /// in its order.
    async fn service_with_status(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<(Service, ServiceStatus)> {
        let mut unit = self.reading().await?;
        let (service, env, requests) = unit
            .service_with_activity(id)
            .await?
            .ok_or(DomainError::NotFound(<Service as Record>::KIND))?;
        p.authorize(service.organization_id, Action::Read)?;
        if service.kind() != kind {
            return Err(DomainError::NotFound(kind.noun()));
        }
        let status = service_status(&service, &requests, &env, self.now());
        Ok((service, status))
    }

    /// The statuses of an environment's services of one kind, a page of them (endpoint 9 for
    /// applications).
    pub async fn kind_statuses(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        kind: ServiceKind,
        page: PageRequest,
    ) -> DomainResult<Page<ServiceStatus>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let services = tx
            .list_services_of_kind(environment, kind, false, page)
            .await?;
        self.authorize_children::<Environment, _>(tx, p, environment, &services, Action::Read)
            .await?;
        let (_, statuses) = self.statuses(tx, environment, &services.items).await?;
        Ok(Page {
            items: statuses,
            request: services.request,
            total_count: services.total_count,
        })
    }

    pub async fn environment_status(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatus> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        Ok(self
            .environment_statuses_of(tx, environment)
            .await?
            .environment)
    }

    pub async fn environment_statuses(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatuses> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        self.environment_statuses_of(tx, environment).await
    }

    /// The environment's statuses with its stages, in deployment order, and where each service
    /// is (`statusesWithStages`); one snapshot.
    pub async fn environment_statuses_with_stages(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<StagedStatuses> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let statuses = self.environment_statuses_of(tx, environment).await?;
        let stages = tx.stages_of(environment).await?;
        let members = tx.stage_members(environment).await?;
        Ok(StagedStatuses {
            statuses,
            stages,
            members,
        })
    }

    /// The status of each environment of a project, a page of them in creation order.
    pub async fn project_environment_statuses(
        &self,
        p: &Principal,
        project: ProjectId,
        page: PageRequest,
    ) -> DomainResult<Page<EnvironmentStatus>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let envs = self.list::<Environment>(tx, project, page).await?;
        self.authorize_children::<Project, _>(tx, p, project, &envs, Action::Read)
            .await?;
        let mut items = Vec::with_capacity(envs.items.len());
        for env in &envs.items {
            items.push(self.environment_statuses_of(tx, env.id).await?.environment);
        }
        Ok(Page {
            items,
            request: envs.request,
            total_count: envs.total_count,
        })
    }

    pub(super) async fn environment_statuses_of(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatuses> {
        let created_at = Repo::<Environment>::get(tx, environment)
            .await?
            .ok_or(DomainError::NotFound(Environment::KIND))?
            .created_at;
        let services = self.services_of(tx, environment).await?;
        let (env, statuses) = self.statuses(tx, environment, &services).await?;
        // The latest batch whole: some of its requests may be of services it deleted.
        let latest: Vec<DeploymentRequest> = match env.last_batch {
            Some(batch) => tx
                .batch_requests(&[batch])
                .await?
                .into_iter()
                .filter(|r| r.batch_id == batch)
                .collect(),
            None => Vec::new(),
        };
        let status = batch_status(
            environment,
            &env,
            &latest,
            environment_deployment_status(&statuses),
            created_at,
        );
        let kinds: HashMap<ServiceId, ServiceKind> =
            services.iter().map(|s| (s.id, s.kind())).collect();
        let mut by_kind: HashMap<ServiceKind, Vec<ServiceStatus>> = HashMap::new();
        for s in statuses {
            if let Some(kind) = kinds.get(&s.id) {
                by_kind.entry(*kind).or_default().push(s);
            }
        }
        let mut take = |k| by_kind.remove(&k).unwrap_or_default();
        Ok(EnvironmentStatuses {
            environment: status,
            applications: take(ServiceKind::Application),
            containers: take(ServiceKind::Container),
            databases: take(ServiceKind::Database),
            jobs: take(ServiceKind::Job),
            helms: take(ServiceKind::Helm),
            terraforms: take(ServiceKind::Terraform),
        })
    }
}
