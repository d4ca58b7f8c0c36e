//! Deployment restrictions of the services built from git (`/{kind}/{id}/deploymentRestriction`):
//! which changed paths of a push deploy the service. The git receiver applies them.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{DeploymentRestrictionId, ServiceId};
use crate::model::{DeploymentRestriction, RestrictionInput, Service, ServiceKind};
use crate::pagination::PageRequest;
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
    /// The restrictions of a service, oldest first.
    pub(super) async fn restrictions_of(
        &self,
        tx: &mut Unit,
        service: ServiceId,
    ) -> DomainResult<Vec<DeploymentRestriction>> {
        Ok(
            Repo::<DeploymentRestriction>::list(tx, service, PageRequest::all())
                .await?
                .items,
        )
    }

    /// Copies the restrictions of each source service onto its copy (`copies`: source id to
    /// copy), in the caller's unit.
    pub(super) async fn copy_restrictions(
        &self,
        tx: &mut Unit,
        copies: &HashMap<ServiceId, Service>,
    ) -> DomainResult<()> {
        let now = self.now();
        for (source, copy) in copies {
            for r in self.restrictions_of(tx, *source).await? {
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

    async fn restricted_service(
        &self,
        tx: &mut Unit,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: Action,
    ) -> DomainResult<Service> {
        if !RESTRICTED_KINDS.contains(&kind) {
            return Err(DomainError::NotFound(
                "deployment restrictions of this kind",
            ));
        }
        self.load_service(tx, p, kind, id, action).await
    }

    /// The service's restriction `id` (404 when it is another service's).
    async fn restriction(
        &self,
        tx: &mut Unit,
        p: &Principal,
        service: ServiceId,
        id: DeploymentRestrictionId,
        action: Action,
    ) -> DomainResult<DeploymentRestriction> {
        let r: DeploymentRestriction = self.load(tx, p, id, action).await?;
        if r.service_id != service {
            return Err(DomainError::NotFound(
                "deployment restriction of this service",
            ));
        }
        Ok(r)
    }

    pub async fn list_restrictions(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
    ) -> DomainResult<Vec<DeploymentRestriction>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.restricted_service(tx, p, kind, service, Action::Read)
            .await?;
        self.restrictions_of(tx, service).await
    }

    pub async fn create_restriction(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        input: RestrictionInput,
    ) -> DomainResult<DeploymentRestriction> {
        let (mode, restriction_type, value) = input.validate()?;
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::EnvironmentOf(service)).await?;
        let found = self
            .restricted_service(tx, p, kind, service, Action::Write)
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
        unit.commit().await?;
        Ok(r)
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
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::EnvironmentOf(service)).await?;
        self.restricted_service(tx, p, kind, service, Action::Write)
            .await?;
        let mut r = self.restriction(tx, p, service, id, Action::Write).await?;
        r.mode = mode;
        r.restriction_type = restriction_type;
        r.value = value;
        r.updated_at = self.now();
        Repo::<DeploymentRestriction>::update(tx, &r)
            .await
            .map_err(taken)?;
        unit.commit().await?;
        Ok(r)
    }

    pub async fn delete_restriction(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: DeploymentRestrictionId,
    ) -> DomainResult<()> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::EnvironmentOf(service)).await?;
        self.restricted_service(tx, p, kind, service, Action::Write)
            .await?;
        self.restriction(tx, p, service, id, Action::Write).await?;
        self.delete::<DeploymentRestriction>(tx, id, "nothing")
            .await?;
        unit.commit().await?;
        Ok(())
    }
}
