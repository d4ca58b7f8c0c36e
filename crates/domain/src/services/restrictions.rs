//! Deployment restrictions of the services built from git (`/{kind}/{id}/deploymentRestriction`):
//! which changed paths of a push deploy the service. The git receiver applies them.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentRestrictionId, ServiceId};
use crate::model::EventType;
use crate::model::{DeploymentRestriction, RestrictionInput, Service, ServiceKind};
use crate::ports::{Repo, Scope, Unit};
use std::collections::HashMap;

/// The kinds a push can deploy, and so the kinds with restrictions.
pub const RESTRICTED_KINDS: [ServiceKind; 4] = [
    ServiceKind::Application,
    ServiceKind::Job,
    ServiceKind::Helm,
    ServiceKind::Terraform,
];

fn taken(e: crate::error::StoreError) -> DomainError {
    match e {
        crate::error::StoreError::Duplicate => {
            DomainError::state("the service has this restriction already")
        }
        other => other.into(),
    }
}

impl Capstan {
    /// Copies the restrictions of each source service onto its copy (`copies`: source id to
    /// copy), in the caller's unit.
    pub(super) async fn copy_restrictions(
        &self,
        tx: &mut Unit,
        copies: &HashMap<ServiceId, Service>,
    ) -> DomainResult<()> {
        let now = self.now();
        for (source, copy) in copies {
            if !super::service_children::carries::<DeploymentRestriction>(copy) {
                continue;
            }
            for r in self
                .children_of::<DeploymentRestriction>(tx, *source)
                .await?
            {
                let copied = DeploymentRestriction {
                    id: DeploymentRestrictionId::generate(),
                    organization_id: copy.organization_id,
                    service_id: copy.id,
                    created_at: now,
                    updated_at: now,
                    ..r
                };
                Repo::<DeploymentRestriction>::insert(tx, &copied).await?;
            }
        }
        Ok(())
    }

    pub async fn list_restrictions(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
    ) -> DomainResult<Vec<DeploymentRestriction>> {
        self.list_children(p, kind, service).await
    }

    pub async fn create_restriction(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        input: RestrictionInput,
    ) -> DomainResult<DeploymentRestriction> {
        let (mode, restriction_type, value) = input.validate()?;
        self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
            let found = self
                .owner_of::<DeploymentRestriction>(tx, p, kind, service, Action::Write)
                .await?;
            let now = self.now();
            let r = DeploymentRestriction {
                id: DeploymentRestrictionId::generate(),
                organization_id: found.organization_id,
                service_id: service,
                mode,
                restriction_type,
                value,
                created_at: now,
                updated_at: now,
            };
            Repo::<DeploymentRestriction>::insert(tx, &r)
                .await
                .map_err(taken)?;
            self.audit(tx, p, EventType::Create, &r).await?;
            Ok(r)
        })
        .await
    }

    pub async fn edit_restriction(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: DeploymentRestrictionId,
        input: RestrictionInput,
    ) -> DomainResult<DeploymentRestriction> {
        let (mode, restriction_type, value) = input.validate()?;
        self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
            self.owner_of::<DeploymentRestriction>(tx, p, kind, service, Action::Write)
                .await?;
            let mut r = self
                .child_of::<DeploymentRestriction>(tx, p, service, id, Action::Write)
                .await?;
            r.mode = mode;
            r.restriction_type = restriction_type;
            r.value = value;
            r.updated_at = self.now();
            Repo::<DeploymentRestriction>::update(tx, &r)
                .await
                .map_err(taken)?;
            self.audit(tx, p, EventType::Update, &r).await?;
            Ok(r)
        })
        .await
    }

    pub async fn delete_restriction(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: DeploymentRestrictionId,
    ) -> DomainResult<()> {
        self.delete_child::<DeploymentRestriction>(p, kind, service, id)
            .await
    }
}
