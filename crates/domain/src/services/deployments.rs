//! Deployment actions: what clients ask of the engine, for one service, for an environment, or
//! for chosen services of an environment. Every action is a durable request in the queue; the
//! requests of one action form a batch, run stage by stage.

use super::audit::Audited;
use super::statuses::{of, EnvironmentStatus};
use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentRequestId, EnvironmentId, ServiceId};
use crate::model::*;
use crate::ports::{Repo, Scope, Unit};
use serde::Deserialize;
use std::collections::HashMap;

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
    /// Who wrote the commit, when a push delivery said; never taken from a request body.
    #[serde(skip)]
    pub git_commit_author: Option<String>,
    /// A terraform deployment's action: PLAN only, FORCE_UNLOCK, MIGRATE_STATE (none: plan
    /// and apply).
    #[serde(default)]
    pub action: Option<TerraformDeployAction>,
}

impl DeployInput {
    fn target(self) -> DomainResult<DeployTarget> {
        // An empty value is no value: clients send `"image_tag": ""` to keep the current one.
        let text = |field: &str, v: Option<String>| -> DomainResult<Option<String>> {
            v.filter(|v| !v.is_empty())
                .map(|v| crate::validate::required_text(field, &v))
                .transpose()
        };
        Ok(DeployTarget {
            git_commit_id: text("git_commit_id", self.git_commit_id)?,
            image_tag: text("image_tag", self.image_tag)?,
            chart_version: text("chart_version", self.chart_version)?,
            git_commit_author: self.git_commit_author,
            scheduled_run: false,
            terraform_action: self.action,
            move_to_node: None,
        })
    }

    fn into_target(self, kind: ServiceKind) -> DomainResult<DeployTarget> {
        let target = self.target()?;
        if kind == ServiceKind::Application && target.git_commit_id.is_none() {
            return Err(DomainError::invalid("git_commit_id", "is required"));
        }
        Ok(target)
    }
}

/// One service an environment-level action names, with where its id was in the request (for
/// messages) and, for deployments, what to deploy.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub field: String,
    pub kind: ServiceKind,
    pub id: ServiceId,
    pub input: DeployInput,
}

/// Which services of an environment an action is for.
#[derive(Debug, Clone)]
pub enum Selection {
    /// Every service the action applies to (those a stage marks skipped are left out of
    /// deployments); services whose state refuses it are passed over.
    All,
    /// The services stopped or on their way there (what a deployment rule starts at its
    /// hour), each deployed again with what it had, after its stop.
    Stopped,
    /// Exactly these; one whose state refuses the action refuses the whole request (409).
    Only(Vec<Chosen>),
    /// As `All`, the services named here at these commits (a preview's, at its pull
    /// request's head).
    AllAt(HashMap<ServiceId, String>),
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
    if pending.iter().any(|r| r.action == DeploymentAction::Delete) {
        return Some("the service is being deleted");
    }
    if state.is_deleting()
        || pending
            .iter()
            .any(|r| r.action == DeploymentAction::Uninstall)
    {
        return Some("the service is being uninstalled");
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

/// Whether a service has something in its cluster (or on its way there) that an uninstall or
/// a deletion must remove through the engine.
fn installed(service: &Service, requests: &[DeploymentRequest]) -> bool {
    service.deployment_status != DeploymentStatus::NeverDeployed
        || requests
            .iter()
            .any(|r| r.service_id == service.id && !r.status.is_finished())
}

/// The commit a redeploy deploys: the one deployed last.
fn deployed_commit(service: &Service) -> DeployTarget {
    DeployTarget {
        git_commit_id: service
            .spec
            .git_repositories()
            .first()
            .and_then(|r| r.deployed_commit_id.clone()),
        ..Default::default()
    }
}

/// A request about to be queued, with the stage its service is in.
struct Draft<'a> {
    service: &'a Service,
    action: DeploymentAction,
    target: DeployTarget,
}

/// What a batch is: one service's action alone, an environment-level or bulk action, or the
/// environment's deletion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Batch {
    Alone,
    Many,
    EnvironmentDeletion,
}

impl Capstan {
    /// The requests of one action (one batch), each placed by its service's stage and set to
    /// wait behind what the environment already has in line; queued in the unit.
    async fn queue(
        &self,
        tx: &mut Unit,
        p: &Principal,
        environment: EnvironmentId,
        env: &EnvironmentActivity,
        drafts: Vec<Draft<'_>>,
        kind: Batch,
    ) -> DomainResult<Vec<DeploymentRequest>> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let stages: HashMap<_, DeploymentStage> = tx
            .stages_of(environment)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let places: HashMap<ServiceId, &DeploymentStage> = tx
            .stage_members(environment)
            .await?
            .into_iter()
            .filter_map(|m| stages.get(&m.stage_id).map(|s| (m.service_id, s)))
            .collect();
        let changes = drafts
            .iter()
            .map(|d| {
                let event = EventType::queued(d.action, d.target.terraform_action);
                (event, d.service.audit_target())
            })
            .collect();
        self.audit_all(tx, p, changes).await?;
        let now = self.now();
        let batch = crate::ids::fresh("Batch");
        let alone = kind == Batch::Alone;
        let mut requests: Vec<DeploymentRequest> = drafts
            .into_iter()
            .map(|d| {
                let id = DeploymentRequestId::generate();
                let stage = places.get(&d.service.id);
                let mut snapshot = d.service.snapshot(&d.target);
                snapshot.stage_id = stage.map(|s| s.id);
                snapshot.stage_name = stage.map(|s| s.name.to_string());
                snapshot.deletes_environment = kind == Batch::EnvironmentDeletion;
                DeploymentRequest {
                    id,
                    organization_id: d.service.organization_id,
                    environment_id: d.service.environment_id,
                    service_id: d.service.id,
                    action: d.action,
                    requested_by: p.subject.to_string(),
                    snapshot,
                    target: d.target,
                    status: RequestStatus::Queued,
                    state: ServiceState::queued(d.action),
                    // A request asked for alone is its own batch.
                    batch_id: if alone { id.0 } else { batch },
                    steps: Vec::new(),
                    reason: None,
                    claimed_by: None,
                    lease_until: None,
                    cancel_requested: false,
                    created_at: now,
                    started_at: None,
                    finished_at: None,
                    position: stage.map_or(0, |s| s.deployment_order),
                    origin: p.origin,
                }
            })
            .collect();
        queue_up(&mut requests, !env.pending.is_empty());
        tx.enqueue(&requests).await?;
        Ok(requests)
    }

    /// Checks an action is allowed now and queues it for the service.
    pub(super) async fn request(
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
        let state = service_state(&requests);
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
        if service.apply_target(&target) {
            service.mark_changed();
            service.updated_at = self.now();
            self.update(tx, &service, "environment").await?;
        }
        let draft = Draft {
            service: &service,
            action,
            target,
        };
        self.queue(
            tx,
            p,
            service.environment_id,
            &env,
            vec![draft],
            Batch::Alone,
        )
        .await?;
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
        self.in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
            let service = self.load_service(tx, p, kind, id, Action::Write).await?;
            let target = match action {
                DeploymentAction::Deploy => input.into_target(kind)?,
                // A redeploy deploys again what is configured, the deployed commit included.
                DeploymentAction::Redeploy | DeploymentAction::Diff => deployed_commit(&service),
                _ => DeployTarget::default(),
            };
            let status = self.request(tx, p, service, action, target).await?;
            Ok(status)
        })
        .await
    }

    /// Moves a deployed database to another node of its cluster's Swarm (Capstan's addition):
    /// a redeploy whose engine copies its data to `node` (its id, address or host name) and
    /// pins it there. Whether the cluster is a Swarm with such a node is the engine's to say.
    pub async fn move_database(
        &self,
        p: &Principal,
        id: ServiceId,
        node: &str,
    ) -> DomainResult<ServiceStatus> {
        let node = crate::validate::required_text("node", node)?;
        // The cluster's place is asked for its nodes before the unit: no call to a host is
        // made while a transaction is held.
        let target = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let service = self
                .load_service(tx, p, ServiceKind::Database, id, Action::Write)
                .await?;
            self.target_of_environment(tx, service.environment_id)
                .await?
        };
        if let Some(reach) = self.engine.as_ref().and_then(|e| e.host_reach(&target)) {
            let nodes = reach.nodes(&target).await.map_err(|why| {
                DomainError::state(format!("the cluster's nodes cannot be listed: {why}"))
            })?;
            if nodes.is_empty() {
                return Err(DomainError::state(
                    "the database's cluster is not a Swarm: its host is one machine, and a \
                     database moves between the nodes of a Swarm",
                ));
            }
            let known = nodes
                .iter()
                .any(|n| n.id == node || n.address == node || n.hostname == node);
            if !known {
                return Err(DomainError::invalid(
                    "node",
                    format!("no node {node} in the cluster's Swarm (its id, address or host name)"),
                ));
            }
        }
        self.in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
            let service = self
                .load_service(tx, p, ServiceKind::Database, id, Action::Write)
                .await?;
            if service.deployment_status == DeploymentStatus::NeverDeployed {
                return Err(DomainError::state(
                    "the database was never deployed: it is placed at its first deployment",
                ));
            }
            let target = DeployTarget {
                move_to_node: Some(node.clone()),
                ..deployed_commit(&service)
            };
            self.request(tx, p, service, DeploymentAction::Redeploy, target)
                .await
        })
        .await
    }

    /// Removes a service from its cluster and keeps its configuration (DELETE_QUEUED,
    /// DELETING, DELETED; then NEVER_DEPLOYED, ready to be deployed again). Nothing to do for
    /// a service never deployed with nothing queued (204).
    pub async fn uninstall_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Deletion<ServiceStatus>> {
        self.remove_service(p, kind, id, DeploymentAction::Uninstall)
            .await
    }

    /// Deletes a service: at once when it was never deployed and nothing is queued for it,
    /// else through the engine (DELETE_QUEUED, DELETING, DELETED, then the record goes).
    pub async fn delete_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Deletion<ServiceStatus>> {
        self.remove_service(p, kind, id, DeploymentAction::Delete)
            .await
    }

    /// An uninstall or a deletion: through the engine when something of the service is
    /// deployed or queued; else done at once (a deletion removes the record).
    async fn remove_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: DeploymentAction,
    ) -> DomainResult<Deletion<ServiceStatus>> {
        let outcome = self
            .in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
                self.remove_service_in(tx, p, kind, id, action).await
            })
            .await?;
        // Deleted at once, a database or a terraform service may still have what outlives a
        // run on the engine (a volume an uninstall kept): it goes too. A failure leaves it to
        // the reconciliation.
        let keeps_volumes = matches!(kind, ServiceKind::Database | ServiceKind::Terraform);
        if let (Deletion::Done, DeploymentAction::Delete, Some(engine), true) =
            (&outcome, action, &self.engine, keeps_volumes)
        {
            if let Err(e) = engine.remove_workloads(id).await {
                tracing::warn!(service = %id, error = %e, "a deleted service's workloads stay");
            }
        }
        Ok(outcome)
    }

    async fn remove_service_in(
        &self,
        tx: &mut Unit,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: DeploymentAction,
    ) -> DomainResult<Deletion<ServiceStatus>> {
        let service = self.load_service(tx, p, kind, id, Action::Write).await?;
        let (_, requests) = tx.activity_of(service.environment_id, &[id]).await?;
        let done = if installed(&service, &requests) {
            let status = self
                .request(tx, p, service, action, DeployTarget::default())
                .await?;
            Deletion::Requested(status)
        } else {
            if action == DeploymentAction::Delete {
                self.audit(tx, p, EventType::Delete, &service).await?;
                self.delete_service_row(tx, id).await?;
            }
            Deletion::Done
        };
        Ok(done)
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

    /// Queues `action` for the services of the environment that `selection` names, as one
    /// batch, and answers the environment's status.
    pub async fn environment_action(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        action: DeploymentAction,
        selection: Selection,
    ) -> DomainResult<EnvironmentStatus> {
        self.in_unit(&[], async |tx| {
            let status = self
                .environment_action_in(tx, p, environment, action, selection)
                .await?;
            Ok(status)
        })
        .await
    }

    /// [`Self::environment_action`] within a unit of the caller's.
    pub(super) async fn environment_action_in(
        &self,
        tx: &mut Unit,
        p: &Principal,
        environment: EnvironmentId,
        action: DeploymentAction,
        selection: Selection,
    ) -> DomainResult<EnvironmentStatus> {
        let (env, services, requests) = self.environment_for_action(tx, p, environment).await?;
        let by_id: HashMap<ServiceId, &Service> = services.iter().map(|s| (s.id, s)).collect();
        let skipped: Vec<ServiceId> = tx
            .stage_members(environment)
            .await?
            .into_iter()
            .filter(|m| m.is_skipped)
            .map(|m| m.service_id)
            .collect();
        let mut updated: Vec<Service> = Vec::new();
        let mut chosen: Vec<(Service, DeployTarget)> = Vec::new();
        match selection {
            Selection::All | Selection::Stopped | Selection::AllAt(_) => {
                let stopped_only = matches!(selection, Selection::Stopped);
                let commits = match &selection {
                    Selection::AllAt(commits) => commits.clone(),
                    _ => HashMap::new(),
                };
                for service in &services {
                    let mine = of(&requests, service.id);
                    let state = service_state(&mine);
                    let pending: Vec<DeploymentRequest> = mine
                        .into_iter()
                        .filter(|r| !r.status.is_finished())
                        .collect();
                    let wanted = (!stopped_only || state.stopped_or_stopping())
                        && match action {
                            DeploymentAction::Deploy | DeploymentAction::Redeploy => {
                                !skipped.contains(&service.id)
                            }
                            DeploymentAction::Stop => state != ServiceState::Stopped,
                            DeploymentAction::Uninstall => installed(service, &requests),
                            _ => true,
                        };
                    if wanted && refusal(action, service, state, &pending, false).is_none() {
                        let mut target = deployed_commit(service);
                        if let Some(commit) = commits.get(&service.id) {
                            target.git_commit_id = Some(commit.clone());
                        }
                        chosen.push(((*service).clone(), target));
                    }
                }
            }
            Selection::Only(list) => {
                if list.is_empty() {
                    return Err(DomainError::invalid("body", "lists no service"));
                }
                for c in list {
                    let service =
                        by_id
                            .get(&c.id)
                            .filter(|s| s.kind() == c.kind)
                            .ok_or_else(|| {
                                DomainError::invalid(
                                    c.field.clone(),
                                    format!("no {} with this id in the environment", c.kind.noun()),
                                )
                            })?;
                    let mine = of(&requests, service.id);
                    let state = service_state(&mine);
                    let pending: Vec<DeploymentRequest> = mine
                        .into_iter()
                        .filter(|r| !r.status.is_finished())
                        .collect();
                    if let Some(why) = refusal(action, service, state, &pending, false) {
                        return Err(DomainError::state(format!(
                            "cannot {} the {} '{}': {why}",
                            action.as_str().to_lowercase(),
                            service.kind().noun(),
                            service.name
                        )));
                    }
                    let mut target = c.input.target()?;
                    if target.git_commit_id.is_none() {
                        target.git_commit_id = deployed_commit(service).git_commit_id;
                    }
                    if action == DeploymentAction::Deploy
                        && c.kind == ServiceKind::Application
                        && target.git_commit_id.is_none()
                    {
                        return Err(DomainError::invalid(
                            c.field.replace("application_id", "git_commit_id"),
                            "is required for an application never deployed",
                        ));
                    }
                    if chosen.iter().any(|(s, _)| s.id == service.id) {
                        continue;
                    }
                    chosen.push(((*service).clone(), target));
                }
            }
        }
        if chosen.is_empty() && env.last_batch.is_none() {
            // Nothing would ever show this action done: a waiter would wait for ever on READY.
            return Err(DomainError::state(format!(
                "the environment has no service to {}",
                action.as_str().to_lowercase()
            )));
        }
        let now = self.now();
        for (service, target) in &mut chosen {
            if matches!(action, DeploymentAction::Deploy) && service.apply_target(target) {
                service.mark_changed();
                service.updated_at = now;
                updated.push(service.clone());
            }
        }
        for service in &updated {
            self.update(tx, service, "environment").await?;
        }
        let drafts = chosen
            .iter()
            .map(|(service, target)| Draft {
                service,
                action,
                target: target.clone(),
            })
            .collect();
        self.queue(tx, p, environment, &env, drafts, Batch::Many)
            .await?;
        let status = self
            .environment_statuses_of(tx, environment)
            .await?
            .environment;
        Ok(status)
    }

    /// Deletes the chosen services of an environment: those never deployed with nothing queued
    /// at once, the others through the engine, as one batch.
    pub async fn delete_services(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        chosen: Vec<Chosen>,
    ) -> DomainResult<EnvironmentStatus> {
        self.in_unit(&[], async |tx| {
            let (env, services, requests) = self.environment_for_action(tx, p, environment).await?;
            if chosen.is_empty() {
                return Err(DomainError::invalid("body", "lists no service"));
            }
            let mut engine = Vec::new();
            for c in &chosen {
                let service = services
                    .iter()
                    .find(|s| s.id == c.id && s.kind() == c.kind)
                    .ok_or_else(|| {
                        DomainError::invalid(
                            c.field.clone(),
                            format!("no {} with this id in the environment", c.kind.noun()),
                        )
                    })?;
                if requests.iter().any(|r| {
                    r.service_id == service.id
                        && r.action == DeploymentAction::Delete
                        && !r.status.is_finished()
                }) || engine.iter().any(|s: &&Service| s.id == service.id)
                {
                    continue;
                }
                if installed(service, &requests) {
                    engine.push(service);
                } else {
                    self.audit(tx, p, EventType::Delete, service).await?;
                    self.delete_service_row(tx, service.id).await?;
                }
            }
            let drafts = engine
                .into_iter()
                .map(|service| Draft {
                    service,
                    action: DeploymentAction::Delete,
                    target: DeployTarget::default(),
                })
                .collect();
            self.queue(tx, p, environment, &env, drafts, Batch::Many)
                .await?;
            let status = self
                .environment_statuses_of(tx, environment)
                .await?
                .environment;
            Ok(status)
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
        self.in_unit(&[Scope::Environment(environment)], async |tx| {
            let env: Environment = self.load(tx, p, environment, Action::Write).await?;
            let canceled = tx
                .cancel_pending(
                    environment,
                    None,
                    &format!("canceled by {}", p.subject),
                    self.now(),
                )
                .await?;
            self.emit_canceled(tx, &canceled.ended).await?;
            if canceled.touched() == 0 {
                return Err(DomainError::state(
                    "the environment has no deployment to cancel",
                ));
            }
            self.audit(tx, p, EventType::TriggerCancel, &env).await?;
            let status = self
                .environment_statuses_of(tx, environment)
                .await?
                .environment;
            Ok(status)
        })
        .await
    }

    /// Cancels one deployment request, named by its id or by its batch's (the queue's
    /// `deploymentRequestId`): what of it waits never runs, what runs stops at its next step.
    /// 409 when it has ended (or only a deletion of it is left, which cannot be canceled).
    pub async fn cancel_deployment_request(&self, p: &Principal, id: Uuid) -> DomainResult<()> {
        let found = self.reading().await?.batch_requests(&[id]).await?;
        let first = found
            .first()
            .ok_or(DomainError::NotFound(DeploymentRequest::KIND))?;
        p.authorize(first.organization_id, Action::Write)?;
        let environment = first.environment_id;
        let batch = first.batch_id;
        self.in_unit(&[Scope::Environment(environment)], async |tx| {
            let canceled = tx
                .cancel_pending(
                    environment,
                    Some(batch),
                    &format!("canceled by {}", p.subject),
                    self.now(),
                )
                .await?;
            self.emit_canceled(tx, &canceled.ended).await?;
            if let Some(service) = Repo::<Service>::get(tx, first.service_id).await? {
                self.audit(tx, p, EventType::TriggerCancel, &service)
                    .await?;
            }
            if canceled.touched() == 0 {
                let ended = tx
                    .batch_requests(&[batch])
                    .await?
                    .iter()
                    .all(|r| r.status.is_finished());
                return Err(DomainError::state(if ended {
                    "the deployment request has already ended"
                } else {
                    "the deployment request has nothing left that can be canceled (a deletion goes to its end)"
                }));
            }
            Ok(())
        })
        .await
    }

    /// Deletes an environment: at once when none of its services needs the engine, else by
    /// deleting those through the engine first; the environment goes with its last one.
    pub async fn delete_environment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Deletion<EnvironmentStatus>> {
        let deletion = self.deleting_environment(p, environment).await?;
        if matches!(deletion, Deletion::Done) {
            self.environment_network_gone(environment);
        }
        Ok(deletion)
    }

    /// An environment deleted at once leaves what its engine keeps of it (its network, from
    /// services deleted before it) to go now, not at the next reconciliation: networks are
    /// few (Docker's address pools hold a few dozen).
    fn environment_network_gone(&self, environment: EnvironmentId) {
        let Some(engine) = self.engine.clone() else {
            return;
        };
        tokio::spawn(async move {
            if let Err(why) = engine.remove_environment(environment).await {
                tracing::warn!(environment = %environment, error = %why, "could not remove a deleted environment's network; reconciliation will");
            }
        });
    }

    async fn deleting_environment(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Deletion<EnvironmentStatus>> {
        self.in_unit(&[], async |tx| {
            let (env, services, requests) = self.environment_for_action(tx, p, environment).await?;
            let busy = |s: &Service| installed(s, &requests);
            // Deletions of its services already under way: the environment's deletion joins
            // them rather than asking twice, and goes with the last of them.
            let joined: Vec<DeploymentRequest> = requests
                .iter()
                .filter(|r| r.action == DeploymentAction::Delete && !r.status.is_finished())
                .filter(|r| !r.deletes_environment())
                .cloned()
                .collect();
            let drafts: Vec<Draft> = services
                .iter()
                .filter(|s| busy(s))
                .filter(|s| {
                    !requests.iter().any(|r| {
                        r.service_id == s.id
                            && r.action == DeploymentAction::Delete
                            && !r.status.is_finished()
                    })
                })
                .map(|service| Draft {
                    service,
                    action: DeploymentAction::Delete,
                    target: DeployTarget::default(),
                })
                .collect();
            let deletion = if drafts.is_empty() && !services.iter().any(busy) {
                if let Some(record) = Repo::<Environment>::get(tx, environment).await? {
                    self.audit(tx, p, EventType::Delete, &record).await?;
                }
                self.delete::<Environment>(tx, environment, "other resources")
                    .await?;
                Deletion::Done
            } else {
                tx.join_environment_deletion(&joined).await?;
                self.queue(tx, p, environment, &env, drafts, Batch::EnvironmentDeletion)
                    .await?;
                Deletion::Requested(
                    self.environment_statuses_of(tx, environment)
                        .await?
                        .environment,
                )
            };
            Ok(deletion)
        })
        .await
    }

    /// Every service of an environment, all kinds.
    pub(super) async fn services_of(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<Service>> {
        self.every::<Service>(tx, environment).await
    }

    /// The environment goes once its deletion has nothing left to do and none of it failed (in
    /// the unit that ends its last request, holding the environment). After a failure it stays,
    /// with the services that could not be deleted, for the client to try again.
    pub(super) async fn finish_environment_deletion(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
        batch: Uuid,
    ) -> DomainResult<()> {
        let env = tx.environment_activity(environment).await?;
        let failed = tx
            .batch_requests(&[batch])
            .await?
            .iter()
            .any(|r| r.batch_id == batch && r.status == RequestStatus::Error);
        if env.pending.is_empty() && !failed {
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
    use time::OffsetDateTime;

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
            advanced_settings: Default::default(),
            groups: Vec::new(),
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
        // An uninstalled service (DELETED, its record kept) may be deployed again.
        let uninstalled = service(DeploymentStatus::NeverDeployed);
        assert_eq!(
            refusal(
                DeploymentAction::Deploy,
                &uninstalled,
                ServiceState::Deleted,
                &[],
                false
            ),
            None
        );
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
