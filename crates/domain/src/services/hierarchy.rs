//! Clusters and projects: the organization-level containers of environments.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::Target;
use crate::error::{DomainError, DomainResult};
use crate::ids::{ClusterId, OrganizationId, ProjectId};
use crate::model::EventType;
use crate::model::{
    CloudCredentials, CloudProvider, Cluster, ClusterRun, ClusterSpec, DockerAccess, DockerHost,
    GroupKind, Organization, Project,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, Unit};
use crate::validate;
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ClusterInput {
    pub name: String,
    pub region: String,
    pub cloud_provider: CloudProvider,
    #[serde(default)]
    pub description: Option<String>,
    /// Nodes, disks, machines and credentials: optional, with the description's defaults.
    #[serde(flatten)]
    pub spec: ClusterSpec,
}

/// A cluster with what its record shows beside its own members.
#[derive(Debug, Clone)]
pub struct ClusterDetails {
    pub cluster: Cluster,
    /// The organization's default cluster: its first, where an environment created without
    /// naming one goes.
    pub is_default: bool,
    /// Whether its host answered when last looked at (a cluster whose host is unknown yet,
    /// or an engine of no hosts, counts as reached).
    pub has_access: bool,
    /// What its deployment found at the Docker endpoint it names (none before that, and for
    /// a cluster on the installation's own daemon).
    pub docker_host_kind: Option<crate::model::DockerHostKind>,
}

/// A project with what its record shows beside its own members.
#[derive(Debug, Clone)]
pub struct ProjectDetails {
    pub project: Project,
    pub associated_environments_count: u64,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ProjectInput {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
}

impl Capstan {
    /// The organization's default cluster: its first (clusters are listed oldest first).
    pub(super) async fn default_cluster(
        &self,
        tx: &mut Unit,
        org: OrganizationId,
    ) -> DomainResult<Option<ClusterId>> {
        Ok(self
            .list::<Cluster>(tx, org, PageRequest::new(1, 1)?)
            .await?
            .items
            .first()
            .map(|c| c.id))
    }

    async fn cluster_details(
        &self,
        tx: &mut Unit,
        org: OrganizationId,
        clusters: Vec<Cluster>,
    ) -> DomainResult<Vec<ClusterDetails>> {
        let default = self.default_cluster(tx, org).await?;
        let hosts = self.targets_of_clusters(tx, &clusters).await?;
        Ok(clusters
            .into_iter()
            .zip(hosts)
            .map(|(cluster, host)| ClusterDetails {
                is_default: Some(cluster.id) == default,
                docker_host_kind: match &host {
                    Ok(Target::Docker(host)) => host.daemon.as_ref().map(|d| d.kind),
                    Err(_) => None,
                },
                has_access: match (&self.engine, host) {
                    (Some(engine), Ok(target)) => {
                        engine.host_reach(&target).and_then(|r| r.answered(&target)) != Some(false)
                    }
                    (Some(_), Err(_)) => false,
                    (None, _) => true,
                },
                cluster,
            })
            .collect())
    }

    async fn one_cluster(&self, tx: &mut Unit, cluster: Cluster) -> DomainResult<ClusterDetails> {
        self.cluster_details(tx, cluster.organization_id, vec![cluster])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("cluster vanished".into()))
    }

    /// A cluster's spec, checked: the credentials it names are the organization's, of its
    /// provider (their name is taken from them).
    async fn cluster_spec(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        spec: ClusterSpec,
    ) -> DomainResult<ClusterSpec> {
        let mut spec = spec.validate()?;
        let mut access = DockerAccess::default();
        if let Some(reference) = spec.cloud_provider_credentials.as_mut() {
            let creds: CloudCredentials = self
                .load_in_org(tx, p, org, reference.credentials.id, Action::Read)
                .await?;
            if creds.details.provider() != provider || reference.cloud_provider != provider {
                return Err(DomainError::invalid(
                    "cloud_provider_credentials",
                    format!("must be credentials of {provider}, the cluster's provider"),
                ));
            }
            reference.credentials.name = creds.name.to_string();
            if spec.docker.is_some() {
                access = DockerAccess::unseal(&creds.secret);
            }
        }
        if let Some(docker) = &spec.docker {
            if provider != CloudProvider::OnPremise {
                return Err(DomainError::invalid(
                    "docker",
                    "only an ON_PREMISE cluster names a Docker daemon",
                ));
            }
            let host = DockerHost::named(ClusterId::generate(), docker, access)?;
            self.endpoint_allowed(&host).await?;
        }
        let groups: Vec<_> = spec.labels_groups.iter().map(|g| g.id).collect();
        self.check_groups(tx, org, GroupKind::Labels, &groups)
            .await?;
        Ok(spec)
    }

    pub async fn create_cluster(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: ClusterInput,
    ) -> DomainResult<ClusterDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let spec = self
                .cluster_spec(tx, p, org, input.cloud_provider, input.spec)
                .await?;
            let now = self.now();
            let cluster = Cluster {
                id: ClusterId::generate(),
                organization_id: org,
                name: validate::name("name", &input.name)?,
                description: validate::description("description", input.description)?,
                region: validate::required_text("region", &input.region)?,
                cloud_provider: input.cloud_provider,
                spec,
                advanced_settings: Default::default(),
                run: ClusterRun::default(),
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &cluster, "organization").await?;
            self.audit(tx, p, EventType::Create, &cluster).await?;
            let out = self.one_cluster(tx, cluster).await?;
            Ok(out)
        })
        .await
    }

    pub async fn list_clusters(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<ClusterDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let page: Page<Cluster> = self.list(tx, org, page).await?;
        Ok(Page {
            items: self.cluster_details(tx, org, page.items).await?,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_cluster(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<ClusterDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let cluster = self.load_in_org(tx, p, org, id, Action::Read).await?;
        self.one_cluster(tx, cluster).await
    }

    pub async fn update_cluster(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
        input: ClusterInput,
    ) -> DomainResult<ClusterDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut cluster: Cluster = self.load_in_org(tx, p, org, id, Action::Write).await?;
            cluster.name = validate::name("name", &input.name)?;
            cluster.description = validate::description("description", input.description)?;
            cluster.region = validate::required_text("region", &input.region)?;
            cluster.spec = self
                .cluster_spec(tx, p, org, input.cloud_provider, input.spec)
                .await?;
            cluster.cloud_provider = input.cloud_provider;
            cluster.mark_changed();
            cluster.updated_at = self.now();
            self.update(tx, &cluster, "organization").await?;
            self.audit(tx, p, EventType::Update, &cluster).await?;
            let out = self.one_cluster(tx, cluster).await?;
            Ok(out)
        })
        .await
    }

    /// Refused (409) while environments run on the cluster.
    pub async fn delete_cluster(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ClusterId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let cluster: Cluster = self.load_in_org(tx, p, org, id, Action::Write).await?;
            self.audit(tx, p, EventType::Delete, &cluster).await?;
            self.delete::<Cluster>(tx, id, "environments or deployment rules")
                .await?;
            Ok(())
        })
        .await
    }

    pub async fn create_project(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: ProjectInput,
    ) -> DomainResult<ProjectDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let now = self.now();
            let project = Project {
                id: ProjectId::generate(),
                organization_id: org,
                name: validate::name("name", &input.name)?,
                description: validate::description("description", input.description)?,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &project, "organization").await?;
            self.audit(tx, p, EventType::Create, &project).await?;
            Ok(ProjectDetails {
                project,
                associated_environments_count: 0,
            })
        })
        .await
    }

    async fn project_details(
        &self,
        tx: &mut Unit,
        projects: Vec<Project>,
    ) -> DomainResult<Vec<ProjectDetails>> {
        let ids: Vec<ProjectId> = projects.iter().map(|p| p.id).collect();
        let counts = tx.count_environments_by_project(&ids).await?;
        Ok(projects
            .into_iter()
            .map(|project| ProjectDetails {
                associated_environments_count: counts.get(&project.id).copied().unwrap_or(0),
                project,
            })
            .collect())
    }

    async fn one_project(&self, tx: &mut Unit, project: Project) -> DomainResult<ProjectDetails> {
        self.project_details(tx, vec![project])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("project vanished".into()))
    }

    pub async fn list_projects(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<ProjectDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let page: Page<Project> = self.list(tx, org, page).await?;
        Ok(Page {
            items: self.project_details(tx, page.items).await?,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_project(&self, p: &Principal, id: ProjectId) -> DomainResult<ProjectDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let project = self.load(tx, p, id, Action::Read).await?;
        self.one_project(tx, project).await
    }

    pub async fn update_project(
        &self,
        p: &Principal,
        id: ProjectId,
        input: ProjectInput,
    ) -> DomainResult<ProjectDetails> {
        self.in_unit(&[Scope::Project(id)], async |tx| {
            let mut project: Project = self.load(tx, p, id, Action::Write).await?;
            project.name = validate::name("name", &input.name)?;
            project.description = validate::description("description", input.description)?;
            project.updated_at = self.now();
            self.update(tx, &project, "organization").await?;
            self.audit(tx, p, EventType::Update, &project).await?;
            let details = self.one_project(tx, project).await?;
            Ok(details)
        })
        .await
    }

    /// Deletes the project with its environments and their services.
    pub async fn delete_project(&self, p: &Principal, id: ProjectId) -> DomainResult<()> {
        self.in_unit(&[Scope::Project(id)], async |tx| {
            let project: Project = self.load(tx, p, id, Action::Write).await?;
            self.audit(tx, p, EventType::Delete, &project).await?;
            self.delete::<Project>(tx, id, "environments").await?;
            Ok(())
        })
        .await
    }
}
