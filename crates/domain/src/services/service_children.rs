//! What restrictions and custom domains share: records that belong to one service of some
//! kinds, reached under that service's route.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::{
    CustomDomain, DeploymentRestriction, Record, Service, ServiceKind, VariableParent,
};
use crate::ports::{Repo, Scope, Tx, Unit};

/// A record that belongs to one service.
pub(super) trait ServiceChild: Record<Parent = ServiceId> + super::audit::Audited {
    /// The kinds whose services have such records.
    const KINDS: &'static [ServiceKind];
    /// What a 404 says when the service's kind has none.
    const NONE_FOR_KIND: &'static str;
    /// What a 404 says when the record is another service's.
    const NOT_THIS_SERVICE: &'static str;
    /// Whether adding, changing or removing one changes what a deployment puts on the cluster
    /// (so a deployed service becomes OUT_OF_DATE).
    const DEPLOYED: bool;
    fn service_id(&self) -> ServiceId;
}

impl ServiceChild for DeploymentRestriction {
    const KINDS: &'static [ServiceKind] = &super::RESTRICTED_KINDS;
    const NONE_FOR_KIND: &'static str = "deployment restrictions of this kind";
    const NOT_THIS_SERVICE: &'static str = "deployment restriction of this service";
    /// Restrictions decide which pushes deploy, not what is deployed.
    const DEPLOYED: bool = false;
    fn service_id(&self) -> ServiceId {
        self.service_id
    }
}

impl ServiceChild for CustomDomain {
    const KINDS: &'static [ServiceKind] = &super::DOMAIN_KINDS;
    const NONE_FOR_KIND: &'static str = "custom domains of this kind";
    const NOT_THIS_SERVICE: &'static str = "custom domain of this service";
    /// A domain is part of the service's ingress.
    const DEPLOYED: bool = true;
    fn service_id(&self) -> ServiceId {
        self.service_id
    }
}

/// Whether services like `service` have `T` records (others need no look).
pub(super) fn carries<T: ServiceChild>(service: &Service) -> bool {
    T::KINDS.contains(&service.kind())
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

    /// `GET /{kind}/{id}/...`: the service's `T` records, oldest first.
    pub(super) async fn list_children<T: ServiceChild>(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
    ) -> DomainResult<Vec<T>>
    where
        dyn Tx: Repo<T>,
    {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.owner_of::<T>(tx, p, kind, service, Action::Read)
            .await?;
        self.children_of(tx, service).await
    }

    /// `DELETE /{kind}/{id}/.../{childId}`: removes one of the service's `T` records.
    pub(super) async fn delete_child<T: ServiceChild>(
        &self,
        p: &Principal,
        kind: ServiceKind,
        service: ServiceId,
        id: T::Id,
    ) -> DomainResult<()>
    where
        dyn Tx: Repo<T>,
    {
        self.in_unit(&[Scope::EnvironmentOf(service)], async |tx| {
            self.owner_of::<T>(tx, p, kind, service, Action::Write)
                .await?;
            let child = self
                .child_of::<T>(tx, p, service, id, Action::Write)
                .await?;
            self.audit(tx, p, crate::model::EventType::Delete, &child)
                .await?;
            self.delete::<T>(tx, id, "nothing").await?;
            if T::DEPLOYED {
                tx.mark_out_of_date(VariableParent::Service(service, kind), self.now())
                    .await?;
            }
            Ok(())
        })
        .await
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
        self.every::<T>(tx, service).await
    }
}
