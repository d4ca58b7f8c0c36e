//! Response bodies: how each record is shown. Secret members have no field here, so they
//! cannot be serialized by mistake.

use domain::auth::Role;
use domain::model::*;
use domain::services::{
    AssociatedService, ClusterDetails, ClusterEnvironment, EnvironmentDetails, GitTokenDetails,
    HelmRepositoryDetails, ImportReport, InvitationDetails, NewApiToken, OrganizationDetails,
    ProjectDetails, RegistryDetails, ServiceLight, VariableDetails,
};
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

pub(crate) use crate::view_parts::base;
pub use crate::view_parts::{Base, Paged, Pagination, Reference};

#[derive(Serialize, utoipa::ToSchema)]
pub struct OrganizationView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub plan: OrganizationPlan,
    /// The member id of the user who owns it; absent while no user does (an organization
    /// made with `capstan token create`, until `transferOwnership`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<Uuid>,
}

impl From<OrganizationDetails> for OrganizationView {
    fn from(d: OrganizationDetails) -> Self {
        let o = d.organization;
        Self {
            base: base(o.id.0, o.created_at, o.updated_at),
            name: o.name.into(),
            description: o.description,
            plan: o.plan,
            owner: d.owner,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ApiTokenView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub role_id: Uuid,
    pub role_name: &'static str,
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_used_at: Option<OffsetDateTime>,
    /// Present only in the creation response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl From<ApiToken> for ApiTokenView {
    fn from(t: ApiToken) -> Self {
        Self {
            base: base(t.id.0, t.created_at, t.updated_at),
            name: t.name.into(),
            description: t.description,
            role_id: t.role.id().0,
            role_name: t.role.name(),
            last_used_at: t.last_used_at,
            token: None,
        }
    }
}

impl From<NewApiToken> for ApiTokenView {
    fn from(t: NewApiToken) -> Self {
        let mut view = ApiTokenView::from(t.token);
        view.token = Some(t.value);
        view
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RoleView {
    pub id: Uuid,
    pub name: &'static str,
}

impl From<Role> for RoleView {
    fn from(r: Role) -> Self {
        Self {
            id: r.id().0,
            name: r.name(),
        }
    }
}

/// Credentials of any provider: the public members of their kind, named by `object_type`
/// (CLOUDA, CLOUDA_ROLE, ALTCLOUD, CLOUDC, OTHER for on-premise); never the secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CredentialsView {
    pub id: Uuid,
    pub name: String,
    #[serde(flatten)]
    pub details: CredentialsDetails,
}

impl From<CloudCredentials> for CredentialsView {
    fn from(c: CloudCredentials) -> Self {
        Self {
            id: c.id.0,
            name: c.name.into(),
            details: c.details,
        }
    }
}

/// One entry of `GET /organization/{id}/credentials`: the credentials and the clusters using them.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OrganizationCredentialsView {
    pub credential: CredentialsView,
    pub clusters: Vec<CredentialClusterView>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CredentialClusterView {
    pub id: Uuid,
    pub name: String,
    pub cloud_provider: CloudProvider,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub region: String,
    pub cloud_provider: CloudProvider,
    pub organization: Reference,
    #[serde(flatten)]
    pub spec: ClusterSpec,
    pub status: ClusterState,
    pub deployment_status: DeploymentStatus,
    /// The Kubernetes version it runs (or will, once deployed).
    pub version: &'static str,
    /// Millicores and MB its nodes give together at most (see `Cluster::capacity`).
    pub cpu: i64,
    pub memory: i64,
    /// The organization's first cluster: where environments created without one go.
    pub is_default: bool,
    /// Whether Capstan reaches it: its host answered when last looked at.
    pub has_access: bool,
    /// Capstan's addition: what its deployment found at the Docker endpoint it names, one
    /// host or a Swarm's manager (absent before that, and on the installation's own daemon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub docker_host_kind: Option<domain::model::DockerHostKind>,
}

impl From<ClusterDetails> for ClusterView {
    fn from(d: ClusterDetails) -> Self {
        let c = d.cluster;
        let (cpu, memory) = c.capacity();
        Self {
            version: KUBERNETES_VERSION,
            cpu,
            memory,
            is_default: d.is_default,
            has_access: d.has_access,
            docker_host_kind: d.docker_host_kind,
            base: base(c.id.0, c.created_at, c.updated_at),
            name: c.name.into(),
            description: c.description,
            region: c.region,
            cloud_provider: c.cloud_provider,
            organization: Reference {
                id: c.organization_id.0,
            },
            spec: c.spec,
            status: c.run.state,
            deployment_status: c.run.deployment_status,
        }
    }
}

/// Where the engine's work on a cluster stands. `reason` is the public description's
/// (UNSPECIFIED); why the last action failed is `failure_reason`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterStatusView {
    pub cluster_id: Uuid,
    pub status: ClusterState,
    pub is_deployed: bool,
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    pub deployment_status: DeploymentStatus,
    pub last_execution_id: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_deployment_date: Option<OffsetDateTime>,
    pub next_k8s_available_version: Option<String>,
    /// Capstan's addition: the nodes of the Swarm the cluster's Docker host manages (none for
    /// a plain host), in the single cluster's status.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<domain::model::SwarmNode>,
}

impl From<Cluster> for ClusterStatusView {
    fn from(c: Cluster) -> Self {
        Self {
            nodes: Vec::new(),
            cluster_id: c.id.0,
            is_deployed: c.is_deployed(),
            status: c.run.state,
            reason: "UNSPECIFIED",
            failure_reason: c.run.reason,
            deployment_status: c.run.deployment_status,
            last_execution_id: c.run.last_execution_id,
            last_deployment_date: c.run.last_deployment_date,
            next_k8s_available_version: None,
        }
    }
}

/// A line of a cluster's log, in the public `ClusterLogs` shape: `type` is the level in lower
/// case, an error line carries its message again as `error.user_log_message`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterLogView {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(with = "time::serde::rfc3339")]
    pub timestamp: OffsetDateTime,
    pub step: ClusterLogStep,
    pub message: SafeMessage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ClusterLogError>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct SafeMessage {
    pub safe_message: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterLogError {
    pub tag: &'static str,
    pub user_log_message: String,
}

impl From<ClusterLogLine> for ClusterLogView {
    fn from(l: ClusterLogLine) -> Self {
        let error = (l.level == LogLevel::Error).then(|| ClusterLogError {
            tag: "CLUSTER_ACTION_FAILED",
            user_log_message: l.message.clone(),
        });
        Self {
            kind: l.level.as_str().to_lowercase(),
            timestamp: l.at,
            step: l.step,
            message: SafeMessage {
                safe_message: l.message,
            },
            error,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ProjectView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub organization: Reference,
    pub associated_environments_count: u64,
}

impl From<ProjectDetails> for ProjectView {
    fn from(d: ProjectDetails) -> Self {
        let p = d.project;
        Self {
            base: base(p.id.0, p.created_at, p.updated_at),
            name: p.name.into(),
            description: p.description,
            organization: Reference {
                id: p.organization_id.0,
            },
            associated_environments_count: d.associated_environments_count,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct CloudProviderView {
    pub provider: String,
    pub cluster: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub organization: Reference,
    pub project: Reference,
    pub cloud_provider: CloudProviderView,
    pub mode: EnvironmentMode,
    pub cluster_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_updated_by: Option<Uuid>,
    /// Capstan's addition: the pull request a PREVIEW environment follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<PullRequestView>,
}

/// The pull request a preview environment follows (docs/previews.md).
#[derive(Serialize, utoipa::ToSchema)]
pub struct PullRequestView {
    pub provider: domain::model::GitProvider,
    /// `owner/name` of the repository.
    pub repository: String,
    pub number: i64,
    pub url: String,
    pub head_branch: String,
    pub head_commit: String,
    /// The environment the preview copies.
    pub blueprint_environment_id: Uuid,
}

impl From<domain::model::PreviewOf> for PullRequestView {
    fn from(p: domain::model::PreviewOf) -> Self {
        Self {
            provider: p.provider,
            repository: p.repository,
            number: p.number,
            url: p.url,
            head_branch: p.head_branch,
            head_commit: p.head_commit,
            blueprint_environment_id: p.blueprint_environment_id.0,
        }
    }
}

impl From<EnvironmentDetails> for EnvironmentView {
    fn from(d: EnvironmentDetails) -> Self {
        let e = d.environment;
        let (provider, region, cluster_name) = match d.cluster {
            Some(c) => (
                c.cloud_provider.as_str().to_string(),
                c.region,
                Some(c.name),
            ),
            None => (String::new(), String::new(), None),
        };
        Self {
            base: base(e.id.0, e.created_at, e.updated_at),
            name: e.name.into(),
            organization: Reference {
                id: e.organization_id.0,
            },
            project: Reference { id: e.project_id.0 },
            cloud_provider: CloudProviderView {
                provider,
                cluster: region,
            },
            mode: e.mode,
            cluster_id: e.cluster_id.0,
            cluster_name: cluster_name.map(Into::into),
            last_updated_by: e.last_updated_by,
            pull_request: e.pull_request.map(Into::into),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct NamedReference {
    pub id: Uuid,
    pub name: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct RegistryView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub kind: RegistryKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<NamedReference>,
    pub associated_services_count: u64,
    pub config: RegistryConfig,
}

impl From<RegistryDetails> for RegistryView {
    fn from(d: RegistryDetails) -> Self {
        let r = d.registry;
        Self {
            base: base(r.id.0, r.created_at, r.updated_at),
            name: r.name.into(),
            kind: r.kind,
            description: r.description,
            url: r.url,
            cluster: d.cluster.map(|c| NamedReference {
                id: c.id.0,
                name: c.name.into(),
            }),
            associated_services_count: d.associated_services_count,
            config: r.config,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GitTokenView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "type")]
    pub provider: GitProvider,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The token's own API address, else its provider's hosted one.
    pub git_api_url: String,
    pub associated_services_count: u64,
    /// The day the token expires, when its client said (see docs/records.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Date)]
    pub expired_at: Option<String>,
}

impl From<GitTokenDetails> for GitTokenView {
    fn from(d: GitTokenDetails) -> Self {
        let t = d.token;
        Self {
            base: base(t.id.0, t.created_at, t.updated_at),
            name: t.name.into(),
            description: t.description,
            provider: t.provider,
            workspace: t.workspace,
            git_api_url: t
                .git_api_url
                .unwrap_or_else(|| t.provider.default_api_url().into()),
            associated_services_count: d.associated_services_count,
            expired_at: t.expired_at.map(|d| d.to_string()),
        }
    }
}

/// The members every kind of service shows.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceCommon {
    #[serde(flatten)]
    pub base: Base,
    pub environment: Reference,
    pub name: String,
    pub description: String,
    pub service_type: ServiceKind,
}

/// A labels group (`labels`) or an annotations group (`annotations` and `scopes`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct GroupView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<domain::model::GroupEntry>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Vec<domain::model::GroupEntry>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<domain::model::AnnotationScope>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associated_items_count: Option<u64>,
}

impl From<domain::model::MetadataGroup> for GroupView {
    fn from(g: domain::model::MetadataGroup) -> Self {
        let labels = g.kind == domain::model::GroupKind::Labels;
        Self {
            base: base(g.id.0, g.created_at, g.updated_at),
            name: g.name.into(),
            labels: labels.then(|| g.entries.clone()),
            annotations: (!labels).then(|| g.entries.clone()),
            scopes: (!labels).then_some(g.scopes),
            associated_items_count: None,
        }
    }
}

impl From<domain::services::GroupDetails> for GroupView {
    fn from(d: domain::services::GroupDetails) -> Self {
        Self {
            associated_items_count: Some(d.associated_items_count),
            ..Self::from(d.group)
        }
    }
}

/// A service of any kind: the common members, then the kind's own. Applications, containers
/// and jobs also show the most their workload may ask for (`maximum_*`; applications also under
/// the public description's own spelling `maximun_gpu`), databases the most CPU and memory
/// they may ask for and whether their disk is encrypted.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceView {
    #[serde(flatten)]
    pub common: ServiceCommon,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum_cpu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum_memory: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximum_gpu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maximun_gpu: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_encrypted: Option<bool>,
    /// The groups attached (applications, containers, jobs and databases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels_groups: Option<Vec<GroupView>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations_groups: Option<Vec<GroupView>>,
    #[serde(flatten)]
    pub spec: ServiceSpec,
}

impl From<Service> for ServiceView {
    fn from(s: Service) -> Self {
        let workload = matches!(
            s.spec.kind(),
            ServiceKind::Application | ServiceKind::Container | ServiceKind::Job
        );
        let database = match &s.spec {
            ServiceSpec::Database(d) => Some(d),
            _ => None,
        };
        let bounded = workload || database.is_some();
        let grouped = domain::services::GROUPED_KINDS.contains(&s.spec.kind());
        let of = |kind: domain::model::GroupKind| {
            grouped.then(|| {
                s.groups
                    .iter()
                    .filter(|g| g.kind == kind)
                    .cloned()
                    .map(GroupView::from)
                    .collect()
            })
        };
        let labels_groups = of(domain::model::GroupKind::Labels);
        let annotations_groups = of(domain::model::GroupKind::Annotations);
        Self {
            labels_groups,
            annotations_groups,
            maximum_cpu: bounded.then_some(MAXIMUM_CPU),
            maximum_memory: bounded.then_some(MAXIMUM_MEMORY),
            disk_encrypted: database.map(DatabaseSpec::disk_encrypted),
            maximum_gpu: workload.then_some(MAXIMUM_GPU),
            maximun_gpu: (s.spec.kind() == ServiceKind::Application).then_some(MAXIMUM_GPU),
            common: ServiceCommon {
                base: base(s.id.0, s.created_at, s.updated_at),
                environment: Reference {
                    id: s.environment_id.0,
                },
                name: s.name.into(),
                description: s.description.unwrap_or_default(),
                service_type: s.spec.kind(),
            },
            spec: s.spec,
        }
    }
}

/// A variable named by another (the aliased or overridden one), as non-secret lists show it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct VariableRef {
    pub id: Uuid,
    pub key: String,
    pub value: String,
    pub mount_path: String,
    pub scope: VariableScope,
    pub variable_type: VariableType,
}

/// The same, for secrets: never a value.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SecretRef {
    pub id: Uuid,
    pub key: String,
    pub mount_path: String,
    pub scope: VariableScope,
    pub variable_type: VariableType,
    pub description: Option<String>,
    pub enable_interpolation_in_file: Option<bool>,
}

fn plain_value(v: &Variable) -> Option<String> {
    (!v.is_secret).then(|| {
        v.value
            .as_ref()
            .map(|s| s.expose().to_string())
            .unwrap_or_default()
    })
}

impl From<&Variable> for VariableRef {
    fn from(v: &Variable) -> Self {
        Self {
            id: v.id.0,
            key: v.key.to_string(),
            value: plain_value(v).unwrap_or_default(),
            mount_path: v.mount_path.clone().unwrap_or_default(),
            scope: v.scope,
            variable_type: v.variable_type,
        }
    }
}

impl From<&Variable> for SecretRef {
    fn from(v: &Variable) -> Self {
        Self {
            id: v.id.0,
            key: v.key.to_string(),
            mount_path: v.mount_path.clone().unwrap_or_default(),
            scope: v.scope,
            variable_type: v.variable_type,
            description: v.description.clone(),
            enable_interpolation_in_file: v.enable_interpolation_in_file,
        }
    }
}

/// An environment variable. The creation form (endpoint 2, lists) has no `is_secret` nor
/// `secret_manager_access_id`; the edit form (endpoint 3) has both, and `value` is null for a
/// secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct VariableView {
    #[serde(flatten)]
    pub base: Base,
    pub key: String,
    pub value: Option<String>,
    pub mount_path: Option<String>,
    pub scope: VariableScope,
    pub variable_type: VariableType,
    // Absent rather than null: the edit form does not allow null here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_interpolation_in_file: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overridden_variable: Option<VariableRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aliased_variable: Option<VariableRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceKind>,
    pub owned_by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_secret: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Uuid>, nullable)]
    pub secret_manager_access_id: Option<Option<Uuid>>,
}

impl VariableView {
    pub fn creation(d: VariableDetails) -> Self {
        let v = &d.variable;
        // An alias shows the value it stands for.
        let value = match &d.aliased {
            Some(target) if v.variable_type == VariableType::Alias => plain_value(target),
            _ => plain_value(v),
        };
        Self {
            base: base(v.id.0, v.created_at, v.updated_at),
            key: v.key.to_string(),
            value,
            mount_path: v.mount_path.clone(),
            scope: v.scope,
            variable_type: v.variable_type,
            description: v.description.clone(),
            enable_interpolation_in_file: v.enable_interpolation_in_file,
            overridden_variable: d.overridden.as_ref().map(VariableRef::from),
            aliased_variable: d.aliased.as_ref().map(VariableRef::from),
            service_id: d.service.as_ref().map(|s| s.0 .0),
            service_name: d.service.as_ref().map(|s| s.1.clone()),
            service_type: d.service.as_ref().map(|s| s.2),
            owned_by: d.owner_name.clone(),
            is_secret: None,
            secret_manager_access_id: None,
        }
    }

    pub fn edit(d: VariableDetails) -> Self {
        let is_secret = d.variable.is_secret;
        let access = d.variable.secret_manager_access_id;
        let mut view = Self::creation(d);
        view.is_secret = Some(is_secret);
        view.secret_manager_access_id = Some(access);
        view
    }
}

/// A secret as listed: no value.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SecretView {
    #[serde(flatten)]
    pub base: Base,
    pub key: String,
    pub scope: VariableScope,
    pub variable_type: VariableType,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overridden_secret: Option<SecretRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aliased_secret: Option<SecretRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_id: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceKind>,
    pub owned_by: String,
    pub description: Option<String>,
    pub enable_interpolation_in_file: Option<bool>,
}

impl From<VariableDetails> for SecretView {
    fn from(d: VariableDetails) -> Self {
        let v = d.variable;
        Self {
            base: base(v.id.0, v.created_at, v.updated_at),
            key: v.key.into_string(),
            scope: v.scope,
            variable_type: v.variable_type,
            mount_path: v.mount_path,
            overridden_secret: d.overridden.as_ref().map(SecretRef::from),
            aliased_secret: d.aliased.as_ref().map(SecretRef::from),
            service_id: d.service.as_ref().map(|s| s.0 .0),
            service_name: d.service.as_ref().map(|s| s.1.clone()),
            service_type: d.service.as_ref().map(|s| s.2),
            owned_by: d.owner_name,
            description: v.description,
            enable_interpolation_in_file: v.enable_interpolation_in_file,
        }
    }
}

/// One variable an import wrote: a secret without its value.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ImportedView {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub scope: VariableScope,
    pub is_secret: bool,
}

/// The answer of an import.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ImportView {
    pub total_variables_to_import: usize,
    pub successful_imported_variables: Vec<ImportedView>,
}

impl From<ImportReport> for ImportView {
    fn from(r: ImportReport) -> Self {
        Self {
            total_variables_to_import: r.total,
            successful_imported_variables: r
                .imported
                .iter()
                .map(|v| ImportedView {
                    name: v.key.to_string(),
                    value: plain_value(v),
                    scope: v.scope,
                    is_secret: v.is_secret,
                })
                .collect(),
        }
    }
}

/// A service using a git token (endpoint 12). Jobs are shown as CRON or LIFECYCLE.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AssociatedServiceView {
    pub project_id: Uuid,
    pub project_name: String,
    pub environment_id: Uuid,
    pub environment_name: String,
    pub service_id: Uuid,
    pub service_name: String,
    pub service_type: &'static str,
}

impl From<AssociatedService> for AssociatedServiceView {
    fn from(a: AssociatedService) -> Self {
        let service_type = match &a.service.spec {
            ServiceSpec::Job(j) => j.job_type.as_str(),
            other => other.kind().as_str(),
        };
        Self {
            project_id: a.project_id.0,
            project_name: a.project_name,
            environment_id: a.environment_id.0,
            environment_name: a.environment_name,
            service_id: a.service.id.0,
            service_name: a.service.name.into(),
            service_type,
        }
    }
}

/// One deployment of a service, as deployed: the name and, for image-based services, the
/// image, tag, arguments and entrypoint it ran with; for services from git, the commit.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DeploymentHistoryItem {
    #[serde(flatten)]
    pub base: Base,
    /// The service's name when it was deployed.
    pub name: String,
    /// The state this deployment brought (or is bringing) the service to; for an application,
    /// SUCCESS or FAILED once it has ended (absent before), as the public description has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<crate::deployment_views::CommitView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_commit_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart_version: Option<String>,
    /// A chart repository's chart and version, for helms deployed from one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub repository: Option<serde_json::Value>,
    /// Why the deployment failed or was canceled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DeploymentHistoryItem {
    pub fn of(r: DeploymentRequest, kind: ServiceKind) -> Self {
        let updated = r.finished_at.or(r.started_at).unwrap_or(r.created_at);
        let status = match kind {
            ServiceKind::Application => match r.status {
                RequestStatus::Success => Some("SUCCESS"),
                RequestStatus::Error | RequestStatus::Canceled => Some("FAILED"),
                RequestStatus::Queued | RequestStatus::Running => None,
            },
            _ => Some(r.state.as_str()),
        };
        let commit = r
            .snapshot
            .git_commit_id
            .clone()
            .filter(|_| !matches!(kind, ServiceKind::Container | ServiceKind::Database))
            .map(|id| crate::deployment_views::CommitView {
                git_commit_id: id,
                created_at: r.created_at,
                author_name: String::new(),
                message: String::new(),
                tag: String::new(),
            });
        let s = r.snapshot;
        let repository = match (&s.chart_name, &s.chart_version) {
            (Some(name), Some(version)) => Some(serde_json::json!({
                "chart_name": name,
                "chart_version": version,
            })),
            _ => None,
        };
        Self {
            // The deployment it was part of: the id its action answered.
            base: base(r.batch_id, r.created_at, updated),
            name: s.name,
            status,
            commit,
            image_name: s.image_name,
            tag: s.tag,
            arguments: s.arguments,
            entrypoint: s.entrypoint,
            git_commit_id: s.git_commit_id,
            chart_name: s.chart_name,
            chart_version: s.chart_version,
            repository,
            reason: r.reason,
        }
    }
}

/// A deployment history page: `page` and `page_size` beside `results`, as endpoint 11 shows.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    pub page: u32,
    pub page_size: u32,
    pub results: Vec<DeploymentHistoryItem>,
}

impl HistoryPage {
    pub fn from_page(
        page: domain::services::HistoryPage<DeploymentRequest>,
        kind: ServiceKind,
    ) -> Self {
        Self {
            page: page.page,
            page_size: page.page_size,
            results: page
                .items
                .into_iter()
                .map(|r| DeploymentHistoryItem::of(r, kind))
                .collect(),
        }
    }
}

/// `{results: [...]}` without pagination (the statuses of an environment's services).
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusList {
    pub results: Vec<ServiceStatus>,
}

/// An environment as organization-wide lists show it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OrganizationEnvironmentView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub organization: Reference,
    pub project: Reference,
    pub mode: EnvironmentMode,
}

impl From<Environment> for OrganizationEnvironmentView {
    fn from(e: Environment) -> Self {
        Self {
            base: base(e.id.0, e.created_at, e.updated_at),
            name: e.name.into(),
            organization: Reference {
                id: e.organization_id.0,
            },
            project: Reference { id: e.project_id.0 },
            mode: e.mode,
        }
    }
}

/// A service as organization-wide lists show it: what it is and where it lives.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceLightView {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub icon_uri: String,
    pub service_type: ServiceKind,
    pub project_id: Uuid,
    pub project_name: String,
    pub environment_id: Uuid,
    pub environment_name: String,
    pub cluster_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_type: Option<JobType>,
}

impl From<ServiceLight> for ServiceLightView {
    fn from(l: ServiceLight) -> Self {
        let s = l.service;
        Self {
            id: s.id.0,
            name: s.name.to_string(),
            description: s.description.clone().unwrap_or_default(),
            icon_uri: s.spec.icon_uri().to_string(),
            service_type: s.kind(),
            project_id: s.project_id.0,
            project_name: l.project_name,
            environment_id: s.environment_id.0,
            environment_name: l.environment_name,
            cluster_id: l.cluster_id.0,
            job_type: match &s.spec {
                ServiceSpec::Job(j) => Some(j.job_type),
                _ => None,
            },
        }
    }
}

/// A service of an environment on a cluster.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterServiceView {
    pub id: Uuid,
    pub name: String,
    #[serde(rename = "type")]
    pub service_type: ServiceKind,
}

/// An environment on a cluster, with its services.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ClusterEnvironmentView {
    pub environment_id: Uuid,
    pub environment_name: String,
    pub project_id: Uuid,
    pub project_name: String,
    pub services: Vec<ClusterServiceView>,
}

impl From<ClusterEnvironment> for ClusterEnvironmentView {
    fn from(c: ClusterEnvironment) -> Self {
        let e = c.environment;
        Self {
            environment_id: e.id.0,
            environment_name: e.name.into(),
            project_id: e.project_id.0,
            project_name: c.project_name,
            services: c
                .services
                .into_iter()
                .map(|s| ClusterServiceView {
                    id: s.id.0,
                    service_type: s.kind(),
                    name: s.name.into(),
                })
                .collect(),
        }
    }
}

/// A cloud provider and its regions (`GET /cloudProvider`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct CloudProviderEntryView {
    pub short_name: &'static str,
    pub name: &'static str,
    pub logo_url: String,
    pub regions: Vec<Region>,
}

/// A kind of container registry and the `config` members it takes. None is mandatory: an
/// organization needs no registry of any kind.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AvailableRegistryView {
    pub kind: RegistryKind,
    #[schema(value_type = Object)]
    pub required_config: serde_json::Map<String, serde_json::Value>,
    pub is_mandatory: bool,
}

/// The role as the public member records name it: OWNER for the owner; DEVELOPER is DEVOPS;
/// a BILLING_MANAGER has no public name (its `role_name` says it).
fn public_role(role: Role, owner: bool) -> Option<&'static str> {
    match (role, owner) {
        (_, true) => Some("OWNER"),
        (Role::Admin, _) => Some("ADMIN"),
        (Role::Devops, _) => Some("DEVELOPER"),
        (Role::Viewer, _) => Some("VIEWER"),
        (Role::BillingManager, _) => None,
    }
}

/// A member of the organization. `email` is the address it was invited at, else its user id.
#[derive(Serialize, utoipa::ToSchema)]
pub struct MemberView {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub user_id: String,
    pub email: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    pub role_name: &'static str,
    pub role_id: Uuid,
}

impl From<Member> for MemberView {
    fn from(m: Member) -> Self {
        Self {
            id: m.id(),
            created_at: m.created_at,
            email: m.email.clone().unwrap_or_else(|| m.user_id.clone()),
            user_id: m.user_id,
            role: public_role(m.role, m.owner),
            role_name: m.role.name(),
            role_id: m.role.id().0,
        }
    }
}

/// An invitation to join the organization; `invitation_link` is where the invited user
/// accepts it (POST, signed in).
#[derive(Serialize, utoipa::ToSchema)]
pub struct InvitationView {
    #[serde(flatten)]
    pub base: Base,
    pub email: String,
    pub role: &'static str,
    pub role_id: Uuid,
    pub role_name: &'static str,
    pub invitation_link: String,
    /// PENDING, or EXPIRED once it can no longer be accepted.
    pub invitation_status: &'static str,
    pub organization_name: String,
    pub inviter: String,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

impl From<InvitationDetails> for InvitationView {
    fn from(d: InvitationDetails) -> Self {
        let i = d.invitation;
        Self {
            base: base(i.id.0, i.created_at, i.updated_at),
            email: i.email,
            role: public_role(i.role, false).unwrap_or("VIEWER"),
            role_id: i.role.id().0,
            role_name: i.role.name(),
            invitation_link: d.link,
            invitation_status: if d.expired { "EXPIRED" } else { "PENDING" },
            organization_name: d.organization_name,
            inviter: i.inviter,
            expires_at: i.expires_at,
        }
    }
}

/// A helm chart repository; `config` shows its public members only.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HelmRepositoryView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub kind: HelmRepositoryKind,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub skip_tls_verification: bool,
    pub associated_services_count: u64,
    pub config: RegistryConfig,
}

impl From<HelmRepositoryDetails> for HelmRepositoryView {
    fn from(d: HelmRepositoryDetails) -> Self {
        let r = d.repository;
        let url = r.shown_url();
        Self {
            base: base(r.id.0, r.created_at, r.updated_at),
            name: r.name.into(),
            kind: r.kind,
            url,
            description: r.description,
            skip_tls_verification: r.skip_tls_verification,
            associated_services_count: d.associated_services_count,
            config: r.config,
        }
    }
}

/// A kind of helm repository and the `config` members it takes.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AvailableHelmRepositoryView {
    pub kind: HelmRepositoryKind,
    #[schema(value_type = Object)]
    pub required_config: serde_json::Map<String, serde_json::Value>,
    pub is_mandatory: bool,
}
