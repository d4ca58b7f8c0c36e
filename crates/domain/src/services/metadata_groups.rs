//! Labels and annotations groups of an organization
//! (`/organization/{id}/labelsGroups`, `/annotationsGroups`): one implementation for both
//! kinds, and their attachment to applications, containers, jobs and databases.

use super::{AssociatedService, Capstan};
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{MetadataGroupId, OrganizationId, ServiceId};
use crate::model::EventType;
use crate::model::{
    Cluster, GroupDraft, GroupKind, MetadataGroup, Organization, Service, ServiceKind,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, ServiceLink, Unit};
use serde_json::Value;
use std::collections::HashMap;

/// The kinds that carry groups, as the public description has them.
pub const GROUPED_KINDS: [ServiceKind; 4] = [
    ServiceKind::Application,
    ServiceKind::Container,
    ServiceKind::Job,
    ServiceKind::Database,
];

/// A group with how many services it is attached to.
#[derive(Debug, Clone)]
pub struct GroupDetails {
    pub group: MetadataGroup,
    pub associated_items_count: u64,
}

/// The request member naming a service's groups of `kind`.
fn member(kind: GroupKind) -> &'static str {
    match kind {
        GroupKind::Labels => "labels_groups",
        GroupKind::Annotations => "annotations_groups",
    }
}

/// The group ids a service request names for `kind` (`[{"id": ...}]`); absent: None.
fn named_groups(body: &Value, kind: GroupKind) -> DomainResult<Option<Vec<MetadataGroupId>>> {
    let field = member(kind);
    let Some(list) = body.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let items = list
        .as_array()
        .ok_or_else(|| DomainError::invalid(field, "must be a list of {\"id\": ...}"))?;
    let mut ids = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| DomainError::invalid(format!("{field}[{i}].id"), "must be a UUID"))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(Some(ids))
}

impl Capstan {
    /// Checks that each of `ids` (named by the request member of `kind`) is a group of that kind
    /// in `org`; 400 naming the first that is not.
    pub(super) async fn check_groups(
        &self,
        tx: &mut Unit,
        org: OrganizationId,
        kind: GroupKind,
        ids: &[MetadataGroupId],
    ) -> DomainResult<()> {
        let groups = self.by_id::<MetadataGroup>(tx, ids.iter().copied()).await?;
        for (i, id) in ids.iter().enumerate() {
            if !groups
                .get(id)
                .is_some_and(|g| g.kind == kind && g.organization_id == org)
            {
                return Err(DomainError::invalid(
                    format!("{}[{i}].id", member(kind)),
                    format!(
                        "no {} group with this id in the organization",
                        kind.as_str().to_lowercase()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Attaches the groups a create or edit body names (a member left out keeps what the
    /// service has). Each must be a group of its kind in the service's organization.
    pub(super) async fn attach_named_groups(
        &self,
        tx: &mut Unit,
        service: &Service,
        body: &Value,
    ) -> DomainResult<()> {
        if !GROUPED_KINDS.contains(&service.kind()) {
            return Ok(());
        }
        let (labels, annotations) = (
            named_groups(body, GroupKind::Labels)?,
            named_groups(body, GroupKind::Annotations)?,
        );
        if labels.is_none() && annotations.is_none() {
            return Ok(());
        }
        let current: Vec<MetadataGroupId> = tx
            .service_group_ids(&[service.id])
            .await?
            .into_iter()
            .map(|(_, g)| g)
            .collect();
        let found = self
            .by_id::<MetadataGroup>(tx, current.iter().copied())
            .await?;
        let mut wanted = Vec::new();
        for (kind, named) in [
            (GroupKind::Labels, labels),
            (GroupKind::Annotations, annotations),
        ] {
            match named {
                None => wanted.extend(
                    current
                        .iter()
                        .filter(|g| found.get(g).is_some_and(|f| f.kind == kind)),
                ),
                Some(ids) => {
                    self.check_groups(tx, service.organization_id, kind, &ids)
                        .await?;
                    wanted.extend(ids);
                }
            }
        }
        tx.set_service_groups(service.id, &wanted).await?;
        Ok(())
    }

    /// Fills in the groups attached to each service.
    pub(super) async fn with_groups(
        &self,
        tx: &mut Unit,
        services: &mut [Service],
    ) -> DomainResult<()> {
        let ids: Vec<ServiceId> = services
            .iter()
            .filter(|s| GROUPED_KINDS.contains(&s.kind()))
            .map(|s| s.id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let pairs = tx.service_group_ids(&ids).await?;
        self.attach_groups(tx, services, &pairs).await
    }

    /// Attaches to each service the groups `pairs` (service, group) name.
    pub(super) async fn attach_groups(
        &self,
        tx: &mut Unit,
        services: &mut [Service],
        pairs: &[(ServiceId, MetadataGroupId)],
    ) -> DomainResult<()> {
        let groups = self
            .by_id::<MetadataGroup>(tx, pairs.iter().map(|(_, g)| *g))
            .await?;
        for service in services.iter_mut() {
            let mut mine: Vec<MetadataGroup> = pairs
                .iter()
                .filter(|(s, _)| *s == service.id)
                .filter_map(|(_, g)| groups.get(g).cloned())
                .collect();
            mine.sort_by_key(|g| (g.name.key(), g.id));
            service.groups = mine;
        }
        Ok(())
    }

    /// Attaches to each copy the groups of its source (`copies`: source id to copy).
    pub(super) async fn copy_groups(
        &self,
        tx: &mut Unit,
        copies: &HashMap<ServiceId, Service>,
    ) -> DomainResult<()> {
        let sources: Vec<ServiceId> = copies.keys().copied().collect();
        let pairs = tx.service_group_ids(&sources).await?;
        for (source, copy) in copies {
            let groups: Vec<MetadataGroupId> = pairs
                .iter()
                .filter(|(s, _)| s == source)
                .map(|(_, g)| *g)
                .collect();
            if !groups.is_empty() {
                tx.set_service_groups(copy.id, &groups).await?;
            }
        }
        Ok(())
    }

    async fn group_in(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        kind: GroupKind,
        id: MetadataGroupId,
        action: Action,
    ) -> DomainResult<MetadataGroup> {
        let group: MetadataGroup = self.load(tx, p, id, action).await?;
        if group.organization_id != org || group.kind != kind {
            return Err(DomainError::NotFound(match kind {
                GroupKind::Labels => "labels group",
                GroupKind::Annotations => "annotations group",
            }));
        }
        Ok(group)
    }

    /// The organization's groups of `kind`, oldest first, each with its count of services.
    pub async fn list_groups(
        &self,
        p: &Principal,
        org: OrganizationId,
        kind: GroupKind,
    ) -> DomainResult<Vec<GroupDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let mut groups: Vec<MetadataGroup> = self
            .every::<MetadataGroup>(tx, org)
            .await?
            .into_iter()
            .filter(|g| g.kind == kind)
            .collect();
        // Lists are in creation order (API.md).
        groups.sort_by_key(|g| (g.created_at, g.id));
        let ids: Vec<uuid::Uuid> = groups.iter().map(|g| g.id.0).collect();
        let counts = tx
            .count_services_by(ServiceLink::MetadataGroup, &ids)
            .await?;
        Ok(groups
            .into_iter()
            .map(|group| GroupDetails {
                associated_items_count: counts.get(&group.id.0).copied().unwrap_or(0),
                group,
            })
            .collect())
    }

    pub async fn get_group(
        &self,
        p: &Principal,
        org: OrganizationId,
        kind: GroupKind,
        id: MetadataGroupId,
    ) -> DomainResult<MetadataGroup> {
        let mut unit = self.reading().await?;
        self.group_in(&mut *unit, p, org, kind, id, Action::Read)
            .await
    }

    pub async fn create_group(
        &self,
        p: &Principal,
        org: OrganizationId,
        draft: GroupDraft,
    ) -> DomainResult<MetadataGroup> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let now = self.now();
            let group = MetadataGroup {
                id: MetadataGroupId::generate(),
                organization_id: org,
                kind: draft.kind,
                name: draft.name,
                entries: draft.entries,
                scopes: draft.scopes,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &group, "organization").await?;
            self.audit(tx, p, EventType::Create, &group).await?;
            Ok(group)
        })
        .await
    }

    /// Replaces a group's name and entries; the services carrying it are OUT_OF_DATE when
    /// deployed (their labels or annotations change).
    pub async fn edit_group(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: MetadataGroupId,
        draft: GroupDraft,
    ) -> DomainResult<MetadataGroup> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut group = self
                .group_in(tx, p, org, draft.kind, id, Action::Write)
                .await?;
            let now = self.now();
            // What a deployment puts on the cluster: a new name alone changes nothing there.
            let changed = group.entries != draft.entries || group.scopes != draft.scopes;
            group.name = draft.name;
            group.entries = draft.entries;
            group.scopes = draft.scopes;
            group.updated_at = now;
            self.update(tx, &group, "organization").await?;
            if changed {
                let ids = tx.group_service_ids(id).await?;
                let carriers = self.by_id::<Service>(tx, ids).await?;
                // Marking services holds their projects, after the organization, as units that
                // lock several scopes do.
                self.lock_projects(tx, carriers.values().map(|s| s.project_id))
                    .await?;
                for s in carriers.values() {
                    tx.mark_out_of_date(crate::model::VariableParent::Service(s.id, s.kind()), now)
                        .await?;
                }
            }
            self.audit(tx, p, EventType::Update, &group).await?;
            Ok(group)
        })
        .await
    }

    /// Deletes a group no service carries (409 otherwise).
    pub async fn delete_group(
        &self,
        p: &Principal,
        org: OrganizationId,
        kind: GroupKind,
        id: MetadataGroupId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let group = self.group_in(tx, p, org, kind, id, Action::Write).await?;
            let users = tx.group_service_ids(id).await?.len();
            if users > 0 {
                return Err(DomainError::state(format!(
                    "the group is attached to {users} service(s); detach it first"
                )));
            }
            // Clusters name their labels groups in their spec; the organization's lock holds them.
            let clusters = self
                .every::<Cluster>(tx, org)
                .await?
                .into_iter()
                .filter(|c| c.spec.labels_groups.iter().any(|g| g.id == id))
                .count();
            if clusters > 0 {
                return Err(DomainError::state(format!(
                    "the group is attached to {clusters} cluster(s); detach it first"
                )));
            }
            self.audit(tx, p, EventType::Delete, &group).await?;
            self.delete::<MetadataGroup>(tx, id, "services").await?;
            Ok(())
        })
        .await
    }

    /// The services a group is attached to, with where they live.
    pub async fn group_associated_items(
        &self,
        p: &Principal,
        org: OrganizationId,
        kind: GroupKind,
        id: MetadataGroupId,
    ) -> DomainResult<Vec<AssociatedService>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.group_in(tx, p, org, kind, id, Action::Read).await?;
        let ids = tx.group_service_ids(id).await?;
        let mut services: Vec<Service> = self
            .by_id::<Service>(tx, ids)
            .await?
            .into_values()
            .collect();
        services.sort_by_key(|s| (s.created_at, s.id));
        Ok(self
            .associated(tx, Page::from_vec(services, PageRequest::all()))
            .await?
            .items)
    }
}
