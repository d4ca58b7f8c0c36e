//! Deployment stages: create, list, edit, delete, reorder, and which stage a service is in.
//! Every environment has at least one stage once a service lands in it; every service is in
//! exactly one stage of its environment.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentStageId, EnvironmentId, ServiceId};
use crate::model::*;
use crate::ports::{Repo, Scope, Unit};
use crate::validate;
use serde::Deserialize;
use std::collections::HashMap;

/// The body of a stage creation or edit.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Deserialize)]
pub struct StageInput {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// A service as a stage shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedService {
    pub member: StageMember,
    pub kind: ServiceKind,
}

/// A stage with the services in it.
#[derive(Debug, Clone, PartialEq)]
pub struct StageDetails {
    pub stage: DeploymentStage,
    pub services: Vec<StagedService>,
}

fn description(value: Option<String>) -> DomainResult<Option<String>> {
    match value {
        Some(d) if d.chars().count() > 255 => Err(DomainError::invalid(
            "description",
            "must be at most 255 characters",
        )),
        other => Ok(other),
    }
}

impl Capstan {
    /// The stage new services of `environment` land in: its first, or a new DEFAULT stage when
    /// it has none (the unit holds the environment).
    pub(super) async fn default_stage(
        &self,
        tx: &mut Unit,
        environment: &Environment,
    ) -> DomainResult<DeploymentStage> {
        if let Some(first) = tx.stages_of(environment.id).await?.into_iter().next() {
            return Ok(first);
        }
        let stage = DeploymentStage::new(
            environment,
            Name::parse("name", DEFAULT_STAGE)?,
            None,
            1,
            self.now(),
        );
        self.insert(tx, &stage, "environment").await?;
        Ok(stage)
    }

    /// Puts a new service in its environment's default stage.
    pub(super) async fn stage_new_service(
        &self,
        tx: &mut Unit,
        environment: &Environment,
        service: ServiceId,
    ) -> DomainResult<()> {
        let stage = self.default_stage(tx, environment).await?;
        tx.put_stage_member(&StageMember::new(service, &stage, false, self.now()))
            .await?;
        Ok(())
    }

    /// The stages of an environment with their services, in deployment order.
    async fn stages_with_services(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<StageDetails>> {
        let stages = tx.stages_of(environment).await?;
        let members = tx.stage_members(environment).await?;
        let kinds: HashMap<ServiceId, ServiceKind> = self
            .services_of(tx, environment)
            .await?
            .into_iter()
            .map(|s| (s.id, s.kind()))
            .collect();
        Ok(stages
            .into_iter()
            .map(|stage| StageDetails {
                services: members
                    .iter()
                    .filter(|m| m.stage_id == stage.id)
                    .filter_map(|m| {
                        kinds.get(&m.service_id).map(|kind| StagedService {
                            member: m.clone(),
                            kind: *kind,
                        })
                    })
                    .collect(),
                stage,
            })
            .collect())
    }

    async fn stage_details(
        &self,
        tx: &mut Unit,
        stage: DeploymentStage,
    ) -> DomainResult<StageDetails> {
        let id = stage.id;
        self.stages_with_services(tx, stage.environment_id)
            .await?
            .into_iter()
            .find(|d| d.stage.id == id)
            .ok_or(DomainError::NotFound(DeploymentStage::KIND))
    }

    /// A stage's environment, found (and the principal's right to change it checked) before
    /// the write unit opens: a read inside it would wait for a second connection of a pool the
    /// unit may hold the last of.
    async fn stage_environment(
        &self,
        p: &Principal,
        id: DeploymentStageId,
    ) -> DomainResult<EnvironmentId> {
        let found: DeploymentStage = self
            .load(&mut *self.reading().await?, p, id, Action::Write)
            .await?;
        Ok(found.environment_id)
    }

    /// The stage again, in the write unit, once its environment is locked.
    async fn lock_stage(
        &self,
        tx: &mut Unit,
        p: &Principal,
        id: DeploymentStageId,
        environment: EnvironmentId,
    ) -> DomainResult<DeploymentStage> {
        tx.lock(Scope::Environment(environment)).await?;
        self.load(tx, p, id, Action::Write).await
    }

    pub async fn create_stage(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        input: StageInput,
    ) -> DomainResult<StageDetails> {
        self.in_unit(&[Scope::Environment(environment)], async |tx| {
            let env: Environment = self.load(tx, p, environment, Action::Write).await?;
            let name = validate::name("name", &input.name)?;
            let description = description(input.description)?;
            let last = tx
                .stages_of(environment)
                .await?
                .iter()
                .map(|s| s.deployment_order)
                .max()
                .unwrap_or(0);
            let stage = DeploymentStage::new(&env, name, description, last + 1, self.now());
            self.insert(tx, &stage, "environment").await?;
            self.audit(tx, p, EventType::Create, &stage).await?;
            Ok(StageDetails {
                stage,
                services: Vec::new(),
            })
        })
        .await
    }

    pub async fn list_stages(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<Vec<StageDetails>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        self.stages_with_services(tx, environment).await
    }

    pub async fn get_stage(
        &self,
        p: &Principal,
        id: DeploymentStageId,
    ) -> DomainResult<StageDetails> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let stage: DeploymentStage = self.load(tx, p, id, Action::Read).await?;
        self.stage_details(tx, stage).await
    }

    pub async fn edit_stage(
        &self,
        p: &Principal,
        id: DeploymentStageId,
        input: StageInput,
    ) -> DomainResult<StageDetails> {
        let environment = self.stage_environment(p, id).await?;
        self.in_unit(&[], async |tx| {
            let mut stage = self.lock_stage(tx, p, id, environment).await?;
            stage.name = validate::name("name", &input.name)?;
            stage.description = description(input.description)?;
            stage.updated_at = self.now();
            self.update(tx, &stage, "environment").await?;
            self.audit(tx, p, EventType::Update, &stage).await?;
            let details = self.stage_details(tx, stage).await?;
            Ok(details)
        })
        .await
    }

    /// Deletes an empty stage; one that still holds services is refused (409) with a message
    /// that says so.
    pub async fn delete_stage(&self, p: &Principal, id: DeploymentStageId) -> DomainResult<()> {
        let environment = self.stage_environment(p, id).await?;
        self.in_unit(&[], async |tx| {
            let stage = self.lock_stage(tx, p, id, environment).await?;
            let held = tx
                .stage_members(stage.environment_id)
                .await?
                .iter()
                .filter(|m| m.stage_id == id)
                .count();
            if held > 0 {
                return Err(DomainError::state(format!(
                    "the deployment stage '{}' still holds {held} service{}; move {} to another stage first",
                    stage.name,
                    if held == 1 { "" } else { "s" },
                    if held == 1 { "it" } else { "them" },
                )));
            }
            self.audit(tx, p, EventType::Delete, &stage).await?;
            self.delete::<DeploymentStage>(tx, id, "services").await?;
            Ok(())
        })
        .await
    }

    /// Moves a stage just before or after another of its environment; answers every stage.
    pub async fn move_stage(
        &self,
        p: &Principal,
        id: DeploymentStageId,
        anchor: DeploymentStageId,
        placement: Placement,
    ) -> DomainResult<Vec<StageDetails>> {
        let environment = self.stage_environment(p, id).await?;
        self.in_unit(&[], async |tx| {
            let stage = self.lock_stage(tx, p, id, environment).await?;
            let other: DeploymentStage = self.load(tx, p, anchor, Action::Write).await?;
            if other.environment_id != stage.environment_id {
                return Err(DomainError::invalid(
                    "stageId",
                    "must name a deployment stage of the same environment",
                ));
            }
            let stages = tx.stages_of(stage.environment_id).await?;
            let orders = reorder(&stages, id, anchor, placement)
                .ok_or(DomainError::NotFound(DeploymentStage::KIND))?;
            tx.set_stage_orders(&orders, self.now()).await?;
            self.audit(tx, p, EventType::Update, &stage).await?;
            let all = self.stages_with_services(tx, stage.environment_id).await?;
            Ok(all)
        })
        .await
    }

    /// Puts a service in a stage of its environment (or marks it skipped there); answers every
    /// stage of the environment.
    pub async fn attach_service_to_stage(
        &self,
        p: &Principal,
        id: DeploymentStageId,
        service: ServiceId,
        is_skipped: bool,
    ) -> DomainResult<Vec<StageDetails>> {
        let environment = self.stage_environment(p, id).await?;
        self.in_unit(&[], async |tx| {
            let stage = self.lock_stage(tx, p, id, environment).await?;
            let found: Service = self.load(tx, p, service, Action::Write).await?;
            if found.environment_id != stage.environment_id {
                return Err(DomainError::invalid(
                    "serviceId",
                    "must name a service of the stage's environment",
                ));
            }
            let now = self.now();
            let member = match tx.stage_member(service).await? {
                Some(m) => StageMember {
                    stage_id: stage.id,
                    is_skipped,
                    updated_at: now,
                    ..m
                },
                None => StageMember::new(service, &stage, is_skipped, now),
            };
            tx.put_stage_member(&member).await?;
            self.audit(tx, p, EventType::Update, &stage).await?;
            let all = self.stages_with_services(tx, stage.environment_id).await?;
            Ok(all)
        })
        .await
    }

    /// The stage a service is in.
    pub async fn service_stage(
        &self,
        p: &Principal,
        service: ServiceId,
    ) -> DomainResult<StageDetails> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let found: Service = self.load(tx, p, service, Action::Read).await?;
        let member = tx
            .stage_member(found.id)
            .await?
            .ok_or(DomainError::NotFound(DeploymentStage::KIND))?;
        let stage = Repo::<DeploymentStage>::get(tx, member.stage_id)
            .await?
            .ok_or(DomainError::NotFound(DeploymentStage::KIND))?;
        self.stage_details(tx, stage).await
    }

    /// Copies an environment's stages onto its clone, with each copied service in the copy of
    /// its stage (`services` maps source to copy).
    pub(super) async fn clone_stages(
        &self,
        tx: &mut Unit,
        source: EnvironmentId,
        clone: &Environment,
        services: &HashMap<ServiceId, ServiceId>,
    ) -> DomainResult<()> {
        let now = self.now();
        let mut copies = HashMap::new();
        for stage in tx.stages_of(source).await? {
            let copy = DeploymentStage {
                id: DeploymentStageId::generate(),
                organization_id: clone.organization_id,
                environment_id: clone.id,
                created_at: now,
                updated_at: now,
                ..stage.clone()
            };
            Repo::<DeploymentStage>::insert(tx, &copy).await?;
            copies.insert(stage.id, copy);
        }
        for member in tx.stage_members(source).await? {
            if let (Some(stage), Some(service)) = (
                copies.get(&member.stage_id),
                services.get(&member.service_id),
            ) {
                tx.put_stage_member(&StageMember::new(*service, stage, member.is_skipped, now))
                    .await?;
            }
        }
        // A source without stages (or services outside any) still gives every copy a stage.
        for copy in services.values() {
            if tx.stage_member(*copy).await?.is_none() {
                self.stage_new_service(tx, clone, *copy).await?;
            }
        }
        Ok(())
    }
}
