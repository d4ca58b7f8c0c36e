//! The audit log's writing side: each use case that writes records what it did, to what, and
//! for whom, in its own unit, so the log holds exactly the changes that were committed.

use super::events::event_time;
use super::Capstan;
use crate::auth::Principal;
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::ports::Unit;
use std::collections::HashMap;
use uuid::Uuid;

/// The ids among `ids` not in `known`, once each.
fn unread<K: Ord + std::hash::Hash, V>(
    ids: impl Iterator<Item = K>,
    known: &HashMap<K, V>,
) -> Vec<K> {
    let mut ids: Vec<K> = ids.filter(|id| !known.contains_key(id)).collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What an audit event is about.
pub(crate) struct Target {
    /// Set by [`Audited::audit_target`].
    pub organization: Option<OrganizationId>,
    pub kind: TargetType,
    pub id: Uuid,
    /// None: the name of the record `kind` and `id` name, read from the store.
    pub name: Option<String>,
    pub sub: Option<SubTargetType>,
    /// What the sub-target is called (a variable's key, a domain), for the change's words.
    pub detail: Option<String>,
    pub project: Option<ProjectId>,
    pub environment: Option<EnvironmentId>,
    pub service: Option<ServiceId>,
}

impl Target {
    fn of(kind: TargetType, id: Uuid, name: &str) -> Self {
        Self {
            organization: None,
            kind,
            id,
            name: Some(name.to_string()),
            sub: None,
            detail: None,
            project: None,
            environment: None,
            service: None,
        }
    }

    /// A part of the organization (a token, credentials, a group).
    fn organization_part(org: OrganizationId, sub: SubTargetType, detail: &str) -> Self {
        Self {
            name: None,
            sub: Some(sub),
            detail: Some(detail.to_string()),
            ..Self::of(TargetType::Organization, org.0, "")
        }
    }

    /// A part of a project (a rule, a variable).
    fn project_part(id: ProjectId, sub: SubTargetType, detail: Option<String>) -> Self {
        Self {
            name: None,
            sub: Some(sub),
            detail,
            project: Some(id),
            ..Self::of(TargetType::Project, id.0, "")
        }
    }

    /// A part of an environment (a stage, its rule, a variable).
    fn environment_part(id: EnvironmentId, sub: SubTargetType, detail: Option<String>) -> Self {
        Self {
            name: None,
            sub: Some(sub),
            detail,
            environment: Some(id),
            ..Self::of(TargetType::Environment, id.0, "")
        }
    }

    /// A part of a service (a domain, a restriction, its settings).
    fn service_part(id: ServiceId, kind: ServiceKind, sub: SubTargetType, detail: &str) -> Self {
        Self {
            name: None,
            sub: Some(sub),
            detail: Some(detail.to_string()),
            service: Some(id),
            ..Self::of(TargetType::of_service(kind), id.0, "")
        }
    }
}

/// The organization whose log tells of a change: a record's own, for every record.
pub(crate) trait InOrganization {
    fn organization(&self) -> OrganizationId;
}

impl<T: Record> InOrganization for T {
    fn organization(&self) -> OrganizationId {
        self.organization_id()
    }
}

/// What the audit log can tell of.
pub(crate) trait Audited: InOrganization {
    fn target(&self) -> Target;

    /// Its target, with its organization.
    fn audit_target(&self) -> Target {
        Target {
            organization: Some(self.organization()),
            ..self.target()
        }
    }
}

impl Audited for Organization {
    fn target(&self) -> Target {
        Target::of(TargetType::Organization, self.id.0, self.name.as_str())
    }
}

impl Audited for Project {
    fn target(&self) -> Target {
        Target {
            project: Some(self.id),
            ..Target::of(TargetType::Project, self.id.0, self.name.as_str())
        }
    }
}

impl Audited for Environment {
    fn target(&self) -> Target {
        Target {
            project: Some(self.project_id),
            environment: Some(self.id),
            ..Target::of(TargetType::Environment, self.id.0, self.name.as_str())
        }
    }
}

impl Audited for Service {
    fn target(&self) -> Target {
        Target {
            project: Some(self.project_id),
            environment: Some(self.environment_id),
            service: Some(self.id),
            ..Target::of(
                TargetType::of_service(self.kind()),
                self.id.0,
                self.name.as_str(),
            )
        }
    }
}

impl Audited for Cluster {
    fn target(&self) -> Target {
        Target::of(TargetType::Cluster, self.id.0, self.name.as_str())
    }
}

impl Audited for ContainerRegistry {
    fn target(&self) -> Target {
        Target::of(TargetType::ContainerRegistry, self.id.0, self.name.as_str())
    }
}

impl Audited for HelmRepository {
    fn target(&self) -> Target {
        Target::of(TargetType::HelmRepository, self.id.0, self.name.as_str())
    }
}

impl Audited for OrganizationWebhook {
    fn target(&self) -> Target {
        // The host only: a Slack URL is itself a credential.
        let host = url::Url::parse(&self.target_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_default();
        Target::of(TargetType::Webhook, self.id.0, &host)
    }
}

impl Audited for GitToken {
    fn target(&self) -> Target {
        Target::organization_part(
            self.organization_id,
            SubTargetType::GitToken,
            self.name.as_str(),
        )
    }
}

impl Audited for CloudCredentials {
    fn target(&self) -> Target {
        Target::organization_part(
            self.organization_id,
            SubTargetType::CloudProviderCredentials,
            self.name.as_str(),
        )
    }
}

impl Audited for ApiToken {
    fn target(&self) -> Target {
        Target::organization_part(
            self.organization_id,
            SubTargetType::ApiToken,
            self.name.as_str(),
        )
    }
}

impl Audited for MetadataGroup {
    fn target(&self) -> Target {
        let sub = match self.kind {
            GroupKind::Labels => SubTargetType::LabelsGroup,
            GroupKind::Annotations => SubTargetType::AnnotationsGroup,
        };
        Target::organization_part(self.organization_id, sub, self.name.as_str())
    }
}

impl Audited for Invitation {
    fn target(&self) -> Target {
        Target {
            sub: Some(SubTargetType::Invitation),
            detail: Some(self.email.clone()),
            ..Target::of(
                TargetType::MembersAndRoles,
                self.organization_id.0,
                "members",
            )
        }
    }
}

impl Audited for DeploymentStage {
    fn target(&self) -> Target {
        Target::environment_part(
            self.environment_id,
            SubTargetType::DeploymentStage,
            Some(self.name.to_string()),
        )
    }
}

impl Audited for ProjectDeploymentRule {
    fn target(&self) -> Target {
        Target::project_part(
            self.project_id,
            SubTargetType::DeploymentRule,
            Some(self.name.to_string()),
        )
    }
}

impl Audited for EnvironmentDeploymentRule {
    fn target(&self) -> Target {
        Target::environment_part(self.environment_id, SubTargetType::DeploymentRule, None)
    }
}

impl Audited for CustomDomain {
    fn target(&self) -> Target {
        // The service is read for its name, and its kind with it.
        Target::service_part(
            self.service_id,
            ServiceKind::Application,
            SubTargetType::CustomDomain,
            &self.domain,
        )
    }
}

impl Audited for DeploymentRestriction {
    fn target(&self) -> Target {
        Target::service_part(
            self.service_id,
            ServiceKind::Application,
            SubTargetType::Config,
            &self.value,
        )
    }
}

impl Audited for Variable {
    fn target(&self) -> Target {
        let sub = if self.is_secret {
            SubTargetType::Secret
        } else {
            SubTargetType::Variable
        };
        let key = self.key.to_string();
        match self.parent() {
            VariableParent::Project(id) => Target::project_part(id, sub, Some(key)),
            VariableParent::Environment(id) => Target::environment_part(id, sub, Some(key)),
            VariableParent::Service(id, kind) => Target::service_part(id, kind, sub, &key),
        }
    }
}

/// A member of an organization, as a change of members and roles.
pub(crate) struct MemberChange<'a> {
    pub organization: OrganizationId,
    pub user: &'a str,
    pub sub: SubTargetType,
}

impl InOrganization for MemberChange<'_> {
    fn organization(&self) -> OrganizationId {
        self.organization
    }
}

impl Audited for MemberChange<'_> {
    fn target(&self) -> Target {
        Target {
            sub: Some(self.sub),
            detail: Some(self.user.to_string()),
            ..Target::of(TargetType::MembersAndRoles, self.organization.0, "members")
        }
    }
}

/// A service's advanced settings.
pub(crate) struct SettingsOf<'a>(pub &'a Service);

impl InOrganization for SettingsOf<'_> {
    fn organization(&self) -> OrganizationId {
        self.0.organization_id
    }
}

impl Audited for SettingsOf<'_> {
    fn target(&self) -> Target {
        Target {
            sub: Some(SubTargetType::AdvancedSettings),
            ..self.0.target()
        }
    }
}

/// A cluster's advanced settings.
pub(crate) struct ClusterSettingsOf<'a>(pub &'a Cluster);

impl InOrganization for ClusterSettingsOf<'_> {
    fn organization(&self) -> OrganizationId {
        self.0.organization_id
    }
}

impl Audited for ClusterSettingsOf<'_> {
    fn target(&self) -> Target {
        Target {
            sub: Some(SubTargetType::AdvancedSettings),
            ..self.0.target()
        }
    }
}

impl Capstan {
    /// Records in `tx` that `p` did `what` to `item`. Call it before a deletion it tells of
    /// (the names are read from the store).
    pub(super) async fn audit(
        &self,
        tx: &mut Unit,
        p: &Principal,
        what: EventType,
        item: &impl Audited,
    ) -> DomainResult<()> {
        self.audit_all(tx, p, vec![(what, item.audit_target())])
            .await
    }

    /// Records several changes at once: the records their names come from are read together.
    pub(super) async fn audit_all(
        &self,
        tx: &mut Unit,
        p: &Principal,
        changes: Vec<(EventType, Target)>,
    ) -> DomainResult<()> {
        let mut changes = changes;
        let named = unread(
            changes
                .iter()
                .filter(|(_, t)| t.name.is_none())
                .filter_map(|(_, t)| t.service),
            &HashMap::<ServiceId, ()>::new(),
        );
        let services: HashMap<ServiceId, ServiceNamed> = tx
            .services_named(&named)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        for (_, t) in changes.iter_mut() {
            if let Some(s) = t.service.and_then(|id| services.get(&id)) {
                t.kind = TargetType::of_service(s.kind);
                t.environment = t.environment.or(Some(s.environment.id));
                t.project = t.project.or(Some(s.environment.project.id));
            }
        }
        // A service's environment came with it; the others are read (with their projects).
        let mut environments: HashMap<EnvironmentId, EnvironmentNamed> = services
            .values()
            .map(|s| (s.environment.id, s.environment.clone()))
            .collect();
        let others = unread(
            changes.iter().filter_map(|(_, t)| t.environment),
            &environments,
        );
        for e in tx.environments_named(&others).await? {
            environments.insert(e.id, e);
        }
        for (_, t) in changes.iter_mut() {
            if let Some(e) = t.environment.and_then(|id| environments.get(&id)) {
                t.project = t.project.or(Some(e.project.id));
            }
        }
        let mut projects: HashMap<ProjectId, String> = environments
            .values()
            .map(|e| (e.project.id, e.project.name.clone()))
            .collect();
        let others = unread(changes.iter().filter_map(|(_, t)| t.project), &projects);
        for (id, project) in self.by_id::<Project>(tx, others).await? {
            projects.insert(id, project.name.to_string());
        }
        let organizations = self
            .by_id::<Organization>(
                tx,
                changes
                    .iter()
                    .filter(|(_, t)| t.name.is_none() && t.kind == TargetType::Organization)
                    .map(|(_, t)| OrganizationId(t.id)),
            )
            .await?;
        let now = event_time(self.now());
        for (what, target) in changes {
            let service = target.service.and_then(|id| services.get(&id));
            let environment = target.environment.and_then(|id| environments.get(&id));
            let project = target.project.and_then(|id| projects.get(&id));
            let organization = organizations.get(&OrganizationId(target.id));
            let name = target.name.clone().unwrap_or_else(|| {
                match target.kind {
                    TargetType::Project => project.cloned(),
                    TargetType::Environment => environment.map(|e| e.name.clone()),
                    TargetType::Organization => organization.map(|o| o.name.to_string()),
                    _ => service.map(|s| s.name.clone()),
                }
                .unwrap_or_default()
            });
            let organization_id = target.organization.ok_or_else(|| {
                crate::error::DomainError::Internal(
                    "an audit target without its organization".into(),
                )
            })?;
            let change = match (&target.sub, &target.detail) {
                (Some(sub), Some(detail)) => format!("{what} {sub} {detail} of {name}"),
                (Some(sub), None) => format!("{what} {sub} of {name}"),
                _ => format!("{what} {} {name}", target.kind),
            };
            let event = OrgEvent {
                id: EventId::generate(),
                organization_id,
                position: None,
                created_at: now,
                event_type: Some(what),
                target_type: target.kind,
                target_id: Some(target.id),
                target_name: name,
                sub_target_type: target.sub,
                change,
                origin: p.origin,
                triggered_by: p.subject.to_string(),
                project_id: target.project,
                project_name: project.cloned().unwrap_or_default(),
                environment_id: target.environment,
                environment_name: environment.map(|e| e.name.clone()).unwrap_or_default(),
                environment_mode: environment.map(|e| e.mode),
                service_id: target.service,
                user_agent: p.user_agent.clone(),
                deployment: None,
            };
            self.emit(tx, event).await?;
        }
        Ok(())
    }
}
