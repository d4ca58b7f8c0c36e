//! Deployment actions and statuses: what clients ask of the engine, and how far it has got.
//! Every action is a durable request in the queue; statuses are derived from the queue.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentRequestId, EnvironmentId, ServiceId};
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use crate::ports::Repo;
use crate::ports::{Scope, Unit};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use time::OffsetDateTime;
use uuid::Uuid;

/// The optional body of a deploy action: what to deploy, as the kind has it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DeployInput {
    /// The commit to deploy (required for an application).
    #[serde(default)]
    pub git_commit_id: Option<String>,
    /// The image tag to deploy (containers, jobs built from an image); becomes the configured tag.
    #[serde(default)]
    pub image_tag: Option<String>,
    /// The chart version to deploy (helms from a chart repository); becomes the configured one.
    #[serde(default)]
    pub chart_version: Option<String>,
}

impl DeployInput {
    fn into_target(self, kind: ServiceKind) -> DomainResult<DeployTarget> {
        let text = |field: &str, v: Option<String>| -> DomainResult<Option<String>> {
            v.map(|v| crate::validate::required_text(field, &v))
                .transpose()
        };
        let target = DeployTarget {
            git_commit_id: text("git_commit_id", self.git_commit_id)?,
            image_tag: text("image_tag", self.image_tag)?,
            chart_version: text("chart_version", self.chart_version)?,
        };
        if kind == ServiceKind::Application && target.git_commit_id.is_none() {
            return Err(DomainError::invalid("git_commit_id", "is required"));
        }
        Ok(target)
    }
}

/// An environment's deployment status, with the status of each of its services by kind.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Serialize)]
pub struct EnvironmentStatus {
    pub id: EnvironmentId,
    /// The state of the request running or waiting first, else of the latest deployment.
    pub state: ServiceState,
    /// NEVER_DEPLOYED until a service is deployed; OUT_OF_DATE while one is not up to date.
    pub service_deployment_status: DeploymentStatus,
    pub deployment_requests_count: u64,
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_deployment_date: Option<OffsetDateTime>,
    /// The latest environment-level deployment (or single request) of the environment.
    pub last_deployment_id: Option<Uuid>,
    pub applications: Vec<ServiceStatus>,
    pub containers: Vec<ServiceStatus>,
    pub databases: Vec<ServiceStatus>,
    pub jobs: Vec<ServiceStatus>,
    pub helms: Vec<ServiceStatus>,
    pub terraforms: Vec<ServiceStatus>,
}

/// What a delete did: removed at once (never deployed) or handed to the engine.
pub enum Deletion<T> {
    Done,
    Requested(T),
}

/// Why an action cannot be taken now (409), or nothing when it can.
pub fn refusal(
    action: DeploymentAction,
    service: &Service,
    state: ServiceState,
    pending: &[DeploymentRequest],
    environment_deleting: bool,
) -> Option<&'static str> {
    if environment_deleting {
        return Some("the environment is being deleted");
    }
    if state.is_deleting() || pending.iter().any(|r| r.action == DeploymentAction::Delete) {
        return Some("the service is being deleted");
    }
    let deploy_pending = pending.iter().any(DeploymentRequest::deploys);
    match action {
        DeploymentAction::Restart | DeploymentAction::Stop
            if service.deployment_status == DeploymentStatus::NeverDeployed && !deploy_pending =>
        {
            Some("the service has never been deployed; deploy it first")
        }
        DeploymentAction::Restart if state == ServiceState::Stopped && !deploy_pending => {
            Some("the service is stopped; deploy it to start it again")
        }
        _ => None,
    }
}

/// The requests of one service among those of many.
fn of(requests: &[DeploymentRequest], service: ServiceId) -> Vec<DeploymentRequest> {
    requests
        .iter()
        .filter(|r| r.service_id == service)
        .cloned()
        .collect()
}

impl Capstan {
    fn new_request(
        &self,
        p: &Principal,
        service: &Service,
        action: DeploymentAction,
        target: DeployTarget,
        batch_id: Option<Uuid>,
        now: OffsetDateTime,
    ) -> DeploymentRequest {
        let id = DeploymentRequestId::generate();
        DeploymentRequest {
            id,
            organization_id: service.organization_id,
            environment_id: service.environment_id,
            service_id: service.id,
            action,
            requested_by: p.subject.to_string(),
            snapshot: service.snapshot(&target),
            target,
            status: RequestStatus::Queued,
            state: ServiceState::queued(action),
            batch_id: batch_id.unwrap_or(id.0),
            steps: Vec::new(),
            reason: None,
            claimed_by: None,
            lease_until: None,
            cancel_requested: false,
            created_at: now,
            started_at: None,
            finished_at: None,
        }
    }

    /// Every service of an environment, all kinds.
    pub(super) async fn services_of(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<Service>> {
        let mut all = Vec::new();
        let mut page = 1;
        loop {
            let got = self
                .list::<Service>(tx, environment, PageRequest::new(page, 1000)?)
                .await?;
            let done = got.items.len() < 1000;
            all.extend(got.items);
            if done {
                return Ok(all);
            }
            page += 1;
        }
    }

    /// The activity of `environment` and the statuses of its `services`, in their order, read
    /// in the unit that read the services (a snapshot, or a write unit holding their
    /// environment): the worker ends a request and saves its service in one unit, so the two
    /// always agree.
    async fn statuses(
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

    async fn status_of(&self, tx: &mut Unit, service: &Service) -> DomainResult<ServiceStatus> {
        let (_, mut one) = self
            .statuses(tx, service.environment_id, std::slice::from_ref(service))
            .await?;
        one.pop()
            .ok_or_else(|| DomainError::Internal("status vanished".into()))
    }

    /// Checks an action is allowed now and queues it for the service.
    async fn request(
        &self,
        tx: &mut Unit,
        p: &Principal,
        mut service: Service,
        action: DeploymentAction,
        target: DeployTarget,
    ) -> DomainResult<ServiceStatus> {
        let (env, requests) = tx
            .activity_of(service.environment_id, &[service.id])
            .await?;
        let pending: Vec<DeploymentRequest> = requests
            .iter()
            .filter(|r| !r.status.is_finished())
            .cloned()
            .collect();
        let state = service_state(service.id, &requests, &env);
        if let Some(why) = refusal(
            action,
            &service,
            state,
            &pending,
            env.deleting(service.environment_id.0),
        ) {
            return Err(DomainError::state(format!(
                "cannot {} the {}: {why}",
                action.as_str().to_lowercase(),
                service.kind().noun()
            )));
        }
        let now = self.now();
        if service.apply_target(&target) {
            service.mark_changed();
            service.updated_at = now;
            self.update(tx, &service, "environment").await?;
        }
        let request = self.new_request(p, &service, action, target, None, now);
        tx.enqueue(std::slice::from_ref(&request)).await?;
        self.status_of(tx, &service).await
    }

    /// Deploy, redeploy, restart or stop a service (202 with its status).
    pub async fn service_action(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: DeploymentAction,
        input: DeployInput,
    ) -> DomainResult<ServiceStatus> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::EnvironmentOf(id)).await?;
        let service = self.load_service(tx, p, kind, id, Action::Write).await?;
        let target = match action {
            DeploymentAction::Deploy => input.into_target(kind)?,
            // A redeploy deploys again what is configured, the deployed commit included.
            DeploymentAction::Redeploy | DeploymentAction::Diff => DeployTarget {
                git_commit_id: service
                    .spec
                    .git_repositories()
                    .first()
                    .and_then(|r| r.deployed_commit_id.clone()),
                ..Default::default()
            },
            _ => DeployTarget::default(),
        };
        let status = self.request(tx, p, service, action, target).await?;
        unit.commit().await?;
        Ok(status)
    }

    pub async fn service_status(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<ServiceStatus> {
        let mut unit = self.reading().await?;
        // One read, no snapshot: the checks of `load_service`, in its order.
        let (service, env, requests) = unit
            .service_with_activity(id)
            .await?
            .ok_or(DomainError::NotFound(<Service as Record>::KIND))?;
        p.authorize(service.organization_id, Action::Read)?;
        if service.kind() != kind {
            return Err(DomainError::NotFound(kind.noun()));
        }
        Ok(service_status(&service, &requests, &env, self.now()))
    }

    /// The statuses of an environment's services of one kind (endpoint 9 for applications).
    pub async fn kind_statuses(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        kind: ServiceKind,
    ) -> DomainResult<Vec<ServiceStatus>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let services: Vec<Service> = self
            .services_of(tx, environment)
            .await?
            .into_iter()
            .filter(|s| s.kind() == kind)
            .collect();
        Ok(self.statuses(tx, environment, &services).await?.1)
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
        self.environment_status_of(tx, environment).await
    }

    async fn environment_status_of(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatus> {
        let services = self.services_of(tx, environment).await?;
        let (env, statuses) = self.statuses(tx, environment, &services).await?;
        let first_pending = env
            .pending
            .iter()
            .find(|r| r.status == RequestStatus::Running)
            .or(env.pending.first());
        let state = match first_pending {
            Some(r) => statuses
                .iter()
                .find(|s| s.id == r.service_id)
                .map_or(r.state, |s| s.state),
            None => {
                let last: Vec<&ServiceStatus> = statuses
                    .iter()
                    .filter(|s| s.is_part_last_deployment)
                    .collect();
                last.iter()
                    .find(|s| s.status_details.status == ServiceActionStatus::Error)
                    .or(last.iter().max_by_key(|s| s.last_deployment_date))
                    .map_or(ServiceState::Ready, |s| s.state)
            }
        };
        let never =
            |s: &&ServiceStatus| s.service_deployment_status == DeploymentStatus::NeverDeployed;
        let service_deployment_status = if statuses.iter().all(|s| never(&s)) {
            DeploymentStatus::NeverDeployed
        } else if statuses
            .iter()
            .all(|s| s.service_deployment_status == DeploymentStatus::UpToDate)
        {
            DeploymentStatus::UpToDate
        } else {
            DeploymentStatus::OutOfDate
        };
        let mut by_kind: HashMap<ServiceKind, Vec<ServiceStatus>> = HashMap::new();
        let kinds: HashMap<ServiceId, ServiceKind> =
            services.iter().map(|s| (s.id, s.kind())).collect();
        for status in &statuses {
            if let Some(kind) = kinds.get(&status.id) {
                by_kind.entry(*kind).or_default().push(status.clone());
            }
        }
        let mut take = |k| by_kind.remove(&k).unwrap_or_default();
        Ok(EnvironmentStatus {
            id: environment,
            state,
            service_deployment_status,
            deployment_requests_count: env.pending.len() as u64,
            last_deployment_date: statuses.iter().filter_map(|s| s.last_deployment_date).max(),
            last_deployment_id: env.last_batch,
            applications: take(ServiceKind::Application),
            containers: take(ServiceKind::Container),
            databases: take(ServiceKind::Database),
            jobs: take(ServiceKind::Job),
            helms: take(ServiceKind::Helm),
            terraforms: take(ServiceKind::Terraform),
        })
    }

    /// What an environment-level action starts from: the environment's activity, its services
    /// and their requests, with the environment locked; 409 while it is being deleted.
    async fn environment_for_action(
        &self,
        tx: &mut Unit,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<(EnvironmentActivity, Vec<Service>, Vec<DeploymentRequest>)> {
        tx.lock(Scope::Environment(environment)).await?;
        self.load::<Environment>(tx, p, environment, Action::Write)
            .await?;
        let services = self.services_of(tx, environment).await?;
        let ids: Vec<ServiceId> = services.iter().map(|s| s.id).collect();
        let (env, requests) = tx.activity_of(environment, &ids).await?;
        if env.deleting(environment.0) {
            return Err(DomainError::state("the environment is being deleted"));
        }
        Ok((env, services, requests))
    }

    /// Queues `action` for every service of the environment that `wanted` selects and the
    /// service's state allows, as one batch.
    async fn environment_action(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        action: DeploymentAction,
        wanted: impl Fn(&Service, ServiceState) -> bool,
    ) -> DomainResult<EnvironmentStatus> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        let (env, services, requests) = self.environment_for_action(tx, p, environment).await?;
        let now = self.now();
        let batch = Uuid::new_v4();
        let mut queued = Vec::new();
        for service in &services {
            let mine = of(&requests, service.id);
            let state = service_state(service.id, &mine, &env);
            let pending: Vec<DeploymentRequest> = mine
                .into_iter()
                .filter(|r| !r.status.is_finished())
                .collect();
            if wanted(service, state) && refusal(action, service, state, &pending, false).is_none()
            {
                let target = DeployTarget {
                    git_commit_id: service
                        .spec
                        .git_repositories()
                        .first()
                        .and_then(|r| r.deployed_commit_id.clone()),
                    ..Default::default()
                };
                queued.push(self.new_request(p, service, action, target, Some(batch), now));
            }
        }
        tx.enqueue(&queued).await?;
        let status = self.environment_status_of(tx, environment).await?;
        unit.commit().await?;
        Ok(status)
    }

    /// Deploys every service of the environment (202).
    pub async fn deploy_environment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatus> {
        self.environment_action(p, environment, DeploymentAction::Deploy, |_, _| true)
            .await
    }

    /// Stops every deployed service of the environment that runs (202).
    pub async fn stop_environment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatus> {
        self.environment_action(p, environment, DeploymentAction::Stop, |_, state| {
            state != ServiceState::Stopped
        })
        .await
    }

    /// Cancels what waits in the environment and stops what runs at its next step (202);
    /// 409 when nothing can be canceled.
    pub async fn cancel_environment_deployment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentStatus> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::Environment(environment)).await?;
        self.load::<Environment>(tx, p, environment, Action::Write)
            .await?;
        let touched = tx
            .cancel_environment(
                environment,
                &format!("canceled by {}", p.subject),
                self.now(),
            )
            .await?;
        if touched == 0 {
            return Err(DomainError::state(
                "the environment has no deployment to cancel",
            ));
        }
        let status = self.environment_status_of(tx, environment).await?;
        unit.commit().await?;
        Ok(status)
    }

    /// Deletes a service: at once when it was never deployed and nothing is queued for it,
    /// else through the engine (DELETE_QUEUED, DELETING, DELETED, then the record goes).
    pub async fn delete_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Deletion<ServiceStatus>> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::EnvironmentOf(id)).await?;
        let service = self.load_service(tx, p, kind, id, Action::Write).await?;
        let (_, requests) = tx.activity_of(service.environment_id, &[id]).await?;
        let idle = requests.iter().all(|r| r.status.is_finished());
        let deletion = if service.deployment_status == DeploymentStatus::NeverDeployed && idle {
            self.delete::<Service>(tx, id, "other resources").await?;
            Deletion::Done
        } else {
            let status = self
                .request(
                    tx,
                    p,
                    service,
                    DeploymentAction::Delete,
                    DeployTarget::default(),
                )
                .await?;
            Deletion::Requested(status)
        };
        unit.commit().await?;
        Ok(deletion)
    }

    /// Deletes an environment: at once when none of its services needs the engine, else by
    /// deleting those through the engine first; the environment goes with its last one.
    pub async fn delete_environment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Deletion<EnvironmentStatus>> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        let (_, services, requests) = self.environment_for_action(tx, p, environment).await?;
        let busy = |s: &Service| {
            s.deployment_status != DeploymentStatus::NeverDeployed
                || requests
                    .iter()
                    .any(|r| r.service_id == s.id && !r.status.is_finished())
        };
        let now = self.now();
        let deletions: Vec<DeploymentRequest> = services
            .iter()
            .filter(|s| busy(s))
            .filter(|s| {
                !requests.iter().any(|r| {
                    r.service_id == s.id
                        && r.action == DeploymentAction::Delete
                        && !r.status.is_finished()
                })
            })
            .map(|s| {
                self.new_request(
                    p,
                    s,
                    DeploymentAction::Delete,
                    DeployTarget::default(),
                    Some(environment.0),
                    now,
                )
            })
            .collect();
        let deletion = if deletions.is_empty() && !services.iter().any(busy) {
            self.delete::<Environment>(tx, environment, "other resources")
                .await?;
            Deletion::Done
        } else {
            tx.enqueue(&deletions).await?;
            Deletion::Requested(self.environment_status_of(tx, environment).await?)
        };
        unit.commit().await?;
        Ok(deletion)
    }

    /// A service's deployments, newest first.
    pub async fn deployment_history(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        page: PageRequest,
    ) -> DomainResult<Page<DeploymentRequest>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_service(tx, p, kind, id, Action::Read).await?;
        Ok(tx.deployment_history(id, page).await?)
    }

    /// The environment goes once its deletion batch has nothing left to do (in the unit that
    /// ends the batch's last request, holding the environment).
    pub(super) async fn finish_environment_deletion(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<()> {
        let env = tx.environment_activity(environment).await?;
        if env.pending.is_empty() {
            match Repo::<Environment>::delete(tx, environment).await {
                Ok(()) | Err(crate::error::StoreError::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;

    fn service(status: DeploymentStatus) -> Service {
        let body = serde_json::json!({"name": "db", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"});
        let draft = ServiceDraft::parse(ServiceKind::Database, &body, None).unwrap();
        let now = OffsetDateTime::UNIX_EPOCH;
        Service {
            id: ServiceId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: draft.name,
            description: None,
            spec: draft.spec,
            deployment_status: status,
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn restart_and_stop_need_a_deployment_first() {
        let never = service(DeploymentStatus::NeverDeployed);
        let ready = ServiceState::Ready;
        for action in [DeploymentAction::Restart, DeploymentAction::Stop] {
            assert!(refusal(action, &never, ready, &[], false)
                .unwrap()
                .contains("never been deployed"));
        }
        assert_eq!(
            refusal(DeploymentAction::Deploy, &never, ready, &[], false),
            None
        );
        let deployed = service(DeploymentStatus::UpToDate);
        assert_eq!(
            refusal(
                DeploymentAction::Restart,
                &deployed,
                ServiceState::Deployed,
                &[],
                false
            ),
            None
        );
        assert!(refusal(
            DeploymentAction::Restart,
            &deployed,
            ServiceState::Stopped,
            &[],
            false
        )
        .unwrap()
        .contains("stopped"));
    }

    #[test]
    fn nothing_is_allowed_on_a_service_or_environment_being_deleted() {
        let deployed = service(DeploymentStatus::UpToDate);
        for action in DeploymentAction::ALL {
            assert!(refusal(*action, &deployed, ServiceState::Deleting, &[], false).is_some());
            assert!(refusal(*action, &deployed, ServiceState::Deployed, &[], true).is_some());
        }
    }

    #[test]
    fn an_application_deploy_needs_a_commit() {
        let err = DeployInput::default()
            .into_target(ServiceKind::Application)
            .unwrap_err();
        assert!(err.to_string().starts_with("git_commit_id"), "{err}");
        assert!(DeployInput::default()
            .into_target(ServiceKind::Container)
            .is_ok());
    }
}
