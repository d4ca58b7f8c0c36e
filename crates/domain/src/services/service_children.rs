//! What restrictions and custom domains share: records that belong to one service of some
//! kinds, reached under that service's route.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::{CustomDomain, DeploymentRestriction, Record, Service, ServiceKind};
use crate::pagination::PageRequest;
use crate::ports::{Repo, Tx, Unit};

/// A record that belongs to one service.
pub(super) trait ServiceChild: Record<Parent = ServiceId> {
    /// The kinds whose services have such records.
    const KINDS: &'static [ServiceKind];
    /// What a 404 says when the service's kind has none.
    const NONE_FOR_KIND: &'static str;
    /// What a 404 says when the record is another service's.
    const NOT_THIS_SERVICE: &'static str;
    fn service_id(&self) -> ServiceId;
}

impl ServiceChild for DeploymentRestriction {
    const KINDS: &'static [ServiceKind] = &super::RESTRICTED_KINDS;
    const NONE_FOR_KIND: &'static str = "deployment restrictions of this kind";
    const NOT_THIS_SERVICE: &'static str = "deployment restriction of this service";
    fn service_id(&self) -> ServiceId {
        self.service_id
    }
}

impl ServiceChild for CustomDomain {
    const KINDS: &'static [ServiceKind] = &super::DOMAIN_KINDS;
    const NONE_FOR_KIND: &'static str = "custom domains of this kind";
    const NOT_THIS_SERVICE: &'static str = "custom domain of this service";
    fn service_id(&self) -> ServiceId {
        self.service_id
    }
}

impl Capstan {
    /// The service that owns `T` records, loaded for `action` (404 when its kind has none).
    pub(super) async fn owner_of<T: ServiceChild>(
        &self,
        tx: &mut Unit,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: Action,
    ) -> DomainResult<Service> {
        if !T::KINDS.contains(&kind) {
            return Err(DomainError::NotFound(T::NONE_FOR_KIND));
        }
        self.load_service(tx, p, kind, id, action).await
    }

    /// The service's record `id` (404 when it is another service's).
    pub(super) async fn child_of<T: ServiceChild>(
        &self,
        tx: &mut Unit,
        p: &Principal,
        service: ServiceId,
        id: T::Id,
        action: Action,
    ) -> DomainResult<T>
    where
        dyn Tx: Repo<T>,
    {
        let record: T = self.load(tx, p, id, action).await?;
        if record.service_id() != service {
            return Err(DomainError::NotFound(T::NOT_THIS_SERVICE));
        }
        Ok(record)
    }

    /// Every `T` record of the service, oldest first.
    pub(super) async fn children_of<T: ServiceChild>(
        &self,
        tx: &mut Unit,
        service: ServiceId,
    ) -> DomainResult<Vec<T>>
    where
        dyn Tx: Repo<T>,
    {
        Ok(Repo::<T>::list(tx, service, PageRequest::all())
            .await?
            .items)
    }
}
