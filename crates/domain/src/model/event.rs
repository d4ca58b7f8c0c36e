//! The organization's event log: what was written through the API (the audit log) and how
//! deployments went (the stream and the webhooks), one record per event, in one table.

use super::TerraformDeployAction;
use super::{DeploymentAction, EnvironmentMode, Origin, RequestStatus, ServiceKind, ServiceState};
use super::{OrganizationWebhookEvent, Record};
use crate::ids::*;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

string_enum!(
    /// The public `OrganizationEventType`.
    EventType {
        Create => "CREATE",
        Update => "UPDATE",
        Delete => "DELETE",
        Accept => "ACCEPT",
        Export => "EXPORT",
        Clone => "CLONE",
        DeployQueued => "DEPLOY_QUEUED",
        StopQueued => "STOP_QUEUED",
        RestartQueued => "RESTART_QUEUED",
        DeleteQueued => "DELETE_QUEUED",
        UninstallQueued => "UNINSTALL_QUEUED",
        Maintenance => "MAINTENANCE",
        DryRun => "DRY_RUN",
        TriggerRedeploy => "TRIGGER_REDEPLOY",
        TriggerCancel => "TRIGGER_CANCEL",
        ForceRunQueued => "FORCE_RUN_QUEUED",
        ForceRunQueuedDeploy => "FORCE_RUN_QUEUED_DEPLOY",
        ForceRunQueuedStop => "FORCE_RUN_QUEUED_STOP",
        ForceRunQueuedDelete => "FORCE_RUN_QUEUED_DELETE",
        TriggerDeploy => "TRIGGER_DEPLOY",
        TriggerStop => "TRIGGER_STOP",
        TriggerRestart => "TRIGGER_RESTART",
        TriggerDelete => "TRIGGER_DELETE",
        TriggerUninstall => "TRIGGER_UNINSTALL",
        TriggerDeployDryRun => "TRIGGER_DEPLOY_DRY_RUN",
        TriggerTerraformForceUnlock => "TRIGGER_TERRAFORM_FORCE_UNLOCK",
        TriggerTerraformMigrateState => "TRIGGER_TERRAFORM_MIGRATE_STATE",
        TriggerForceRun => "TRIGGER_FORCE_RUN",
        TriggerForceRunDeploy => "TRIGGER_FORCE_RUN_DEPLOY",
        TriggerForceRunStop => "TRIGGER_FORCE_RUN_STOP",
        TriggerForceRunDelete => "TRIGGER_FORCE_RUN_DELETE",
        Deployed => "DEPLOYED",
        Stopped => "STOPPED",
        Deleted => "DELETED",
        Uninstalled => "UNINSTALLED",
        Restarted => "RESTARTED",
        DeployedDryRun => "DEPLOYED_DRY_RUN",
        ForceRunSucceeded => "FORCE_RUN_SUCCEEDED",
        TerraformForceUnlockSucceeded => "TERRAFORM_FORCE_UNLOCK_SUCCEEDED",
        TerraformMigrateStateSucceeded => "TERRAFORM_MIGRATE_STATE_SUCCEEDED",
        DeployFailed => "DEPLOY_FAILED",
        StopFailed => "STOP_FAILED",
        DeleteFailed => "DELETE_FAILED",
        UninstallFailed => "UNINSTALL_FAILED",
        RestartFailed => "RESTART_FAILED",
        DeployedDryRunFailed => "DEPLOYED_DRY_RUN_FAILED",
        ForceRunFailed => "FORCE_RUN_FAILED",
        TerraformForceUnlockFailed => "TERRAFORM_FORCE_UNLOCK_FAILED",
        TerraformMigrateStateFailed => "TERRAFORM_MIGRATE_STATE_FAILED",
        Shell => "SHELL",
        PortForward => "PORT_FORWARD",
        RemoteDebug => "REMOTE_DEBUG",
        Mcp => "MCP",
        Import => "IMPORT",
        Lock => "LOCK",
        Unlock => "UNLOCK",
        PolicyFailed => "POLICY_FAILED",
    }
);

string_enum!(
    /// The public `OrganizationEventTargetType`.
    TargetType {
        AgenticWorkflow => "AGENTIC_WORKFLOW",
        Application => "APPLICATION",
        Cluster => "CLUSTER",
        Container => "CONTAINER",
        ContainerRegistry => "CONTAINER_REGISTRY",
        Database => "DATABASE",
        EnterpriseConnection => "ENTERPRISE_CONNECTION",
        Environment => "ENVIRONMENT",
        Job => "JOB",
        Helm => "HELM",
        HelmRepository => "HELM_REPOSITORY",
        MembersAndRoles => "MEMBERS_AND_ROLES",
        Organization => "ORGANIZATION",
        Project => "PROJECT",
        Webhook => "WEBHOOK",
        Terraform => "TERRAFORM",
    }
);

string_enum!(
    /// The public `OrganizationEventSubTargetType`.
    SubTargetType {
        AdvancedSettings => "ADVANCED_SETTINGS",
        AlertReceiver => "ALERT_RECEIVER",
        AlertRule => "ALERT_RULE",
        AnnotationsGroup => "ANNOTATIONS_GROUP",
        ApiToken => "API_TOKEN",
        ArgocdClusterMapping => "ARGOCD_CLUSTER_MAPPING",
        ArgocdConfiguration => "ARGOCD_CONFIGURATION",
        BillingInfo => "BILLING_INFO",
        BillingUsageReport => "BILLING_USAGE_REPORT",
        BlueprintMigration => "BLUEPRINT_MIGRATION",
        CloudProviderCredentials => "CLOUD_PROVIDER_CREDENTIALS",
        ClusterCredentials => "CLUSTER_CREDENTIALS",
        ClusterRoutingTable => "CLUSTER_ROUTING_TABLE",
        Config => "CONFIG",
        CreditCard => "CREDIT_CARD",
        CreditCode => "CREDIT_CODE",
        CustomDomain => "CUSTOM_DOMAIN",
        CustomRole => "CUSTOM_ROLE",
        DeploymentRule => "DEPLOYMENT_RULE",
        DeploymentStage => "DEPLOYMENT_STAGE",
        DnsProvider => "DNS_PROVIDER",
        GithubApp => "GITHUB_APP",
        GitRepository => "GIT_REPOSITORY",
        GitToken => "GIT_TOKEN",
        Invitation => "INVITATION",
        JwtTokenForged => "JWT_TOKEN_FORGED",
        KubernetesConfiguration => "KUBERNETES_CONFIGURATION",
        KubernetesCredentials => "KUBERNETES_CREDENTIALS",
        LabelsGroup => "LABELS_GROUP",
        McpServer => "MCP_SERVER",
        MemberRole => "MEMBER_ROLE",
        Plan => "PLAN",
        PolicyApiToken => "POLICY_API_TOKEN",
        RemoteAccess => "REMOTE_ACCESS",
        Secret => "SECRET",
        Sso => "SSO",
        Terraform => "TERRAFORM",
        ToolCall => "TOOL_CALL",
        TransferOwnership => "TRANSFER_OWNERSHIP",
        Variable => "VARIABLE",
    }
);

/// How a deployment request changed, when the event is about one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentChange {
    pub request_id: DeploymentRequestId,
    pub service_id: ServiceId,
    pub service_kind: ServiceKind,
    pub action: DeploymentAction,
    pub status: RequestStatus,
    pub state: ServiceState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What organization webhooks hear of it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_event: Option<OrganizationWebhookEvent>,
}

/// One event. Written in the unit of the change it tells of, so a change and its event are
/// committed (or rolled back) together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrgEvent {
    pub id: EventId,
    pub organization_id: OrganizationId,
    /// Its place in the organization-wide stream, given after commit by the sequencer (in
    /// the order events became visible, so a reader that resumes after a position misses
    /// nothing); `None` until then.
    #[serde(skip)]
    pub position: Option<i64>,
    pub created_at: OffsetDateTime,
    /// None: a deployment's progress, which the stream carries and the audit log leaves out.
    pub event_type: Option<EventType>,
    pub target_type: TargetType,
    pub target_id: Option<Uuid>,
    pub target_name: String,
    pub sub_target_type: Option<SubTargetType>,
    /// What changed, in words (never a secret value).
    pub change: String,
    pub origin: Origin,
    /// The token or user that acted (`token:{id}`, `user:{id}`), or `capstan` for the
    /// server's own actions.
    pub triggered_by: String,
    pub project_id: Option<ProjectId>,
    pub project_name: String,
    pub environment_id: Option<EnvironmentId>,
    pub environment_name: String,
    pub environment_mode: Option<EnvironmentMode>,
    pub service_id: Option<ServiceId>,
    pub user_agent: Option<String>,
    pub deployment: Option<DeploymentChange>,
}

impl Record for OrgEvent {
    type Id = EventId;
    type Parent = OrganizationId;
    const KIND: &'static str = "event";
    fn id(&self) -> EventId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The audit log's filters (`GET /organization/{id}/events`); all optional.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub from: Option<OffsetDateTime>,
    pub to: Option<OffsetDateTime>,
    pub event_type: Option<EventType>,
    pub target_type: Option<TargetType>,
    pub target_id: Option<Uuid>,
    pub sub_target_type: Option<SubTargetType>,
    pub triggered_by: Option<String>,
    pub origin: Option<Origin>,
    pub project_id: Option<ProjectId>,
    pub environment_id: Option<EnvironmentId>,
}

string_enum!(
    /// The public `OrganizationEventTargetLevel`.
    TargetLevel {
        Project => "PROJECT",
        Environment => "ENVIRONMENT",
    }
);

/// What a stream subscriber asked to see (`GET /organization/{id}/events/stream`).
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamFilter {
    pub project_id: Option<ProjectId>,
    pub environment_id: Option<EnvironmentId>,
    pub service_id: Option<ServiceId>,
}

impl StreamFilter {
    pub fn admits(&self, e: &OrgEvent) -> bool {
        (self.project_id.is_none() || self.project_id == e.project_id)
            && (self.environment_id.is_none() || self.environment_id == e.environment_id)
            && (self.service_id.is_none()
                || self.service_id == e.service_id
                || self.service_id.map(|s| s.0) == e.target_id)
    }
}

impl TargetType {
    /// The target type of a service of `kind`.
    pub fn of_service(kind: ServiceKind) -> TargetType {
        match kind {
            ServiceKind::Application => TargetType::Application,
            ServiceKind::Container => TargetType::Container,
            ServiceKind::Database => TargetType::Database,
            ServiceKind::Job => TargetType::Job,
            ServiceKind::Helm => TargetType::Helm,
            ServiceKind::Terraform => TargetType::Terraform,
        }
    }
}

impl EventType {
    /// How a request for `action`, as it is queued, shows in the audit log.
    /// A terraform deploy that unlocks or migrates the state shows as that.
    pub fn queued(action: DeploymentAction, terraform: Option<TerraformDeployAction>) -> EventType {
        use DeploymentAction as A;
        use TerraformDeployAction as T;
        match (action, terraform) {
            (A::Deploy | A::Redeploy, Some(T::ForceUnlock)) => {
                EventType::TriggerTerraformForceUnlock
            }
            (A::Deploy | A::Redeploy, Some(T::MigrateState)) => {
                EventType::TriggerTerraformMigrateState
            }
            (A::Deploy, _) => EventType::DeployQueued,
            (A::Redeploy, _) => EventType::TriggerRedeploy,
            (A::Restart, _) => EventType::RestartQueued,
            (A::Stop, _) => EventType::StopQueued,
            (A::Delete, _) => EventType::DeleteQueued,
            (A::Uninstall, _) => EventType::UninstallQueued,
            (A::Diff, _) => EventType::DryRun,
        }
    }

    /// How a finished deployment request of `action` shows in the audit log; None for the
    /// progress of one still running, and for a cancel (the TRIGGER_CANCEL that asked for it
    /// is the log's record).
    pub fn of_outcome(
        action: DeploymentAction,
        terraform: Option<TerraformDeployAction>,
        status: RequestStatus,
    ) -> Option<EventType> {
        use DeploymentAction as A;
        use EventType as E;
        use TerraformDeployAction as T;
        let deploy = matches!(action, A::Deploy | A::Redeploy);
        Some(match (status, action) {
            (RequestStatus::Success, _) if deploy && terraform == Some(T::ForceUnlock) => {
                E::TerraformForceUnlockSucceeded
            }
            (RequestStatus::Success, _) if deploy && terraform == Some(T::MigrateState) => {
                E::TerraformMigrateStateSucceeded
            }
            (RequestStatus::Error, _) if deploy && terraform == Some(T::ForceUnlock) => {
                E::TerraformForceUnlockFailed
            }
            (RequestStatus::Error, _) if deploy && terraform == Some(T::MigrateState) => {
                E::TerraformMigrateStateFailed
            }
            (RequestStatus::Success, A::Restart) => E::Restarted,
            (RequestStatus::Success, A::Diff) => E::DeployedDryRun,
            (RequestStatus::Success, A::Stop) => E::Stopped,
            (RequestStatus::Success, A::Delete) => E::Deleted,
            (RequestStatus::Success, A::Uninstall) => E::Uninstalled,
            (RequestStatus::Success, _) => E::Deployed,
            (RequestStatus::Error, A::Stop) => E::StopFailed,
            (RequestStatus::Error, A::Delete) => E::DeleteFailed,
            (RequestStatus::Error, A::Uninstall) => E::UninstallFailed,
            (RequestStatus::Error, A::Restart) => E::RestartFailed,
            (RequestStatus::Error, A::Diff) => E::DeployedDryRunFailed,
            (RequestStatus::Error, _) => E::DeployFailed,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_and_requests_have_their_audit_words() {
        use DeploymentAction as A;
        use RequestStatus as S;
        for (action, status, word) in [
            (A::Deploy, S::Success, Some("DEPLOYED")),
            (A::Redeploy, S::Success, Some("DEPLOYED")),
            (A::Restart, S::Success, Some("RESTARTED")),
            (A::Stop, S::Success, Some("STOPPED")),
            (A::Delete, S::Success, Some("DELETED")),
            (A::Uninstall, S::Success, Some("UNINSTALLED")),
            (A::Diff, S::Success, Some("DEPLOYED_DRY_RUN")),
            (A::Deploy, S::Error, Some("DEPLOY_FAILED")),
            (A::Stop, S::Error, Some("STOP_FAILED")),
            (A::Delete, S::Error, Some("DELETE_FAILED")),
            (A::Restart, S::Error, Some("RESTART_FAILED")),
            (A::Deploy, S::Canceled, None),
            (A::Deploy, S::Running, None),
            (A::Deploy, S::Queued, None),
        ] {
            assert_eq!(
                EventType::of_outcome(action, None, status).map(EventType::as_str),
                word,
                "{action} {status}"
            );
        }
        assert_eq!(EventType::queued(A::Deploy, None), EventType::DeployQueued);
        assert_eq!(EventType::queued(A::Stop, None), EventType::StopQueued);
        assert_eq!(EventType::queued(A::Diff, None), EventType::DryRun);
    }

    #[test]
    fn terraform_unlocks_and_migrations_have_their_own_audit_words() {
        use DeploymentAction as A;
        use RequestStatus as S;
        use TerraformDeployAction as T;
        for (terraform, queued, succeeded, failed) in [
            (
                T::ForceUnlock,
                "TRIGGER_TERRAFORM_FORCE_UNLOCK",
                "TERRAFORM_FORCE_UNLOCK_SUCCEEDED",
                "TERRAFORM_FORCE_UNLOCK_FAILED",
            ),
            (
                T::MigrateState,
                "TRIGGER_TERRAFORM_MIGRATE_STATE",
                "TERRAFORM_MIGRATE_STATE_SUCCEEDED",
                "TERRAFORM_MIGRATE_STATE_FAILED",
            ),
        ] {
            assert_eq!(
                EventType::queued(A::Deploy, Some(terraform)).as_str(),
                queued
            );
            let outcome = |s| EventType::of_outcome(A::Deploy, Some(terraform), s);
            assert_eq!(outcome(S::Success).map(EventType::as_str), Some(succeeded));
            assert_eq!(outcome(S::Error).map(EventType::as_str), Some(failed));
            assert_eq!(outcome(S::Canceled), None);
        }
        // A plan is a deployment like any other in the audit log.
        assert_eq!(
            EventType::queued(A::Deploy, Some(T::Plan)),
            EventType::DeployQueued
        );
        assert_eq!(
            EventType::of_outcome(A::Deploy, Some(T::Plan), S::Success),
            Some(EventType::Deployed)
        );
    }

    #[test]
    fn a_stream_filter_admits_only_its_scope() {
        let project = ProjectId::generate();
        let environment = EnvironmentId::generate();
        let service = ServiceId::generate();
        let event = OrgEvent {
            id: EventId::generate(),
            organization_id: OrganizationId::generate(),
            position: Some(1),
            created_at: OffsetDateTime::UNIX_EPOCH,
            event_type: None,
            target_type: TargetType::Container,
            target_id: Some(service.0),
            target_name: "web".into(),
            sub_target_type: None,
            change: String::new(),
            origin: Origin::Api,
            triggered_by: String::new(),
            project_id: Some(project),
            project_name: String::new(),
            environment_id: Some(environment),
            environment_name: String::new(),
            environment_mode: None,
            service_id: Some(service),
            user_agent: None,
            deployment: None,
        };
        assert!(StreamFilter::default().admits(&event));
        assert!(StreamFilter {
            project_id: Some(project),
            environment_id: Some(environment),
            service_id: Some(service)
        }
        .admits(&event));
        for other in [
            StreamFilter {
                project_id: Some(ProjectId::generate()),
                ..Default::default()
            },
            StreamFilter {
                environment_id: Some(EnvironmentId::generate()),
                ..Default::default()
            },
            StreamFilter {
                service_id: Some(ServiceId::generate()),
                ..Default::default()
            },
        ] {
            assert!(!other.admits(&event), "{other:?}");
        }
    }
}
