//! `POST /{kind}/{id}/clone`: a copy of one service, into its environment or another of the
//! organization, in one unit.

use super::environments::clone_variables;
use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{EnvironmentId, ServiceId, VariableId};
use crate::model::EventType;
use crate::model::{DeploymentStatus, Environment, Service, ServiceKind, Variable};
use crate::ports::Repo;
use crate::validate;
use serde::Deserialize;
use std::collections::HashMap;

/// The public `CloneServiceRequest`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CloneServiceInput {
    pub name: String,
    pub environment_id: EnvironmentId,
}

impl Capstan {
    /// Copies the service (configuration, advanced settings, its own variables and secrets,
    /// deployment restrictions, custom domains renamed to stay unique) under `input.name` into
    /// `input.environment_id`, NEVER_DEPLOYED, in the target's default stage, and linked to
    /// the databases (or applications) there as a new service is. Aliases and overrides of
    /// variables above the service are kept where their target is visible from the copy.
    pub async fn clone_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        input: CloneServiceInput,
    ) -> DomainResult<Service> {
        let name = validate::name("name", &input.name)?;
        // Which projects to hold is learnt first, then both are held in id order (projects,
        // as environment clones and previews hold them, so that none waits on another's).
        let (source_project, target_project) = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let source = self.load_service(tx, p, kind, id, Action::Read).await?;
            let target: Environment = self
                .load(tx, p, input.environment_id, Action::Write)
                .await?;
            (source.project_id, target.project_id)
        };
        self.in_unit(&[], async |tx| {
            self.lock_projects(tx, [source_project, target_project])
                .await?;
            let source = self.load_service(tx, p, kind, id, Action::Read).await?;
            let target: Environment = self
                .load(tx, p, input.environment_id, Action::Write)
                .await?;
            if target.organization_id != source.organization_id {
                return Err(DomainError::Forbidden(
                    "the environment belongs to another organization".into(),
                ));
            }
            if tx
                .environment_activity(target.id)
                .await?
                .deleting(target.id.0)
            {
                return Err(DomainError::state("the environment is being deleted"));
            }
            let now = self.now();
            let mut spec = source.spec.clone();
            for repo in spec.git_repositories_mut() {
                repo.clear_deployment_state();
            }
            let copy = Service {
                id: ServiceId::generate(),
                project_id: target.project_id,
                environment_id: target.id,
                name,
                spec,
                deployment_status: DeploymentStatus::NeverDeployed,
                created_at: now,
                updated_at: now,
                ..source.clone()
            };
            self.insert(tx, &copy, "environment").await?;
            self.stage_new_service(tx, &target, copy.id).await?;
            self.copy_service_variables(tx, &source, &copy, &target)
                .await?;
            self.link_new_service(tx, &copy).await?;
            let copies = HashMap::from([(source.id, copy.clone())]);
            self.copy_restrictions(tx, &copies).await?;
            self.copy_domains(tx, &copies).await?;
            self.copy_groups(tx, &copies).await?;
            self.audit(tx, p, EventType::Clone, &copy).await?;
            let copy = self.decorate_one(tx, copy).await?;
            Ok(copy)
        })
        .await
    }

    /// The service's own variables onto its copy (not the database links: the copy gets the
    /// links of its environment). An alias or override keeps a target above the service when
    /// the copy sees it (the same project for a project variable, the same environment for an
    /// environment variable) and is left out otherwise.
    async fn copy_service_variables(
        &self,
        tx: &mut crate::ports::Unit,
        source: &Service,
        copy: &Service,
        target: &Environment,
    ) -> DomainResult<()> {
        let own: Vec<Variable> = self
            .all_variables(tx, &[source.id.0])
            .await?
            .into_iter()
            .filter(|v| v.linked_database_id.is_none())
            .collect();
        let above = self
            .by_id::<Variable>(
                tx,
                own.iter()
                    .flat_map(|v| [v.aliased_variable_id, v.overridden_variable_id])
                    .flatten(),
            )
            .await?;
        let seen = |t: VariableId| {
            above.get(&t).is_some_and(|v| match v.environment_id {
                None => v.project_id == copy.project_id,
                Some(env) => v.service_id.is_none() && env == copy.environment_id,
            })
        };
        let copies = clone_variables(
            own,
            target,
            &HashMap::from([(source.id, copy.id)]),
            seen,
            self.now(),
        );
        for v in &copies {
            Repo::<Variable>::insert(tx, v).await?;
        }
        Ok(())
    }
}
