//! Environments: a project's deployment targets, each on a cluster.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{ClusterId, EnvironmentId, ProjectId};
use crate::model::{Cluster, Environment, EnvironmentMode, Project};
use crate::pagination::{Page, PageRequest};
use crate::ports::Repo;
use crate::validate;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Debug, Deserialize)]
pub struct EnvironmentInput {
    pub name: String,
    #[serde(default)]
    pub cluster: Option<ClusterId>,
    #[serde(default)]
    pub mode: Option<EnvironmentMode>,
}

#[derive(Debug, Deserialize)]
pub struct EnvironmentUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub mode: Option<EnvironmentMode>,
}

/// An environment with the cluster it runs on, as the API shows it.
#[derive(Debug, Clone)]
pub struct EnvironmentDetails {
    pub environment: Environment,
    pub cluster: Option<Cluster>,
}

impl Capstan {
    async fn with_clusters(&self, envs: Vec<Environment>) -> DomainResult<Vec<EnvironmentDetails>> {
        let mut ids: Vec<ClusterId> = envs.iter().map(|e| e.cluster_id).collect();
        ids.sort();
        ids.dedup();
        let clusters: HashMap<ClusterId, Cluster> = Repo::<Cluster>::get_many(&*self.store, &ids)
            .await?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        Ok(envs
            .into_iter()
            .map(|environment| EnvironmentDetails {
                cluster: clusters.get(&environment.cluster_id).cloned(),
                environment,
            })
            .collect())
    }

    async fn details(&self, env: Environment) -> DomainResult<EnvironmentDetails> {
        let mut v = self.with_clusters(vec![env]).await?;
        v.pop()
            .ok_or_else(|| DomainError::Internal("environment vanished".into()))
    }

    /// The cluster named by a request, or the organization's first cluster.
    async fn cluster_for(
        &self,
        p: &Principal,
        project: &Project,
        wanted: Option<ClusterId>,
    ) -> DomainResult<Cluster> {
        match wanted {
            Some(id) => {
                let cluster: Cluster = self.load(p, id, Action::Read).await?;
                if cluster.organization_id != project.organization_id {
                    return Err(DomainError::Forbidden(
                        "the cluster belongs to another organization".into(),
                    ));
                }
                Ok(cluster)
            }
            None => self
                .list::<Cluster>(project.organization_id, PageRequest::new(1, 1)?)
                .await?
                .items
                .pop()
                .ok_or_else(|| {
                    DomainError::invalid(
                        "cluster",
                        "the organization has no cluster; create one first",
                    )
                }),
        }
    }

    pub async fn create_environment(
        &self,
        p: &Principal,
        project_id: ProjectId,
        input: EnvironmentInput,
    ) -> DomainResult<EnvironmentDetails> {
        let project: Project = self.load(p, project_id, Action::Write).await?;
        let name = validate::name("name", &input.name)?;
        let cluster = self.cluster_for(p, &project, input.cluster).await?;
        let now = self.now();
        let env = Environment {
            id: EnvironmentId::generate(),
            organization_id: project.organization_id,
            project_id,
            cluster_id: cluster.id,
            name,
            mode: input.mode.unwrap_or(EnvironmentMode::Development),
            last_updated_by: None,
            created_at: now,
            updated_at: now,
        };
        self.insert(&env, "project").await?;
        Ok(EnvironmentDetails {
            environment: env,
            cluster: Some(cluster),
        })
    }

    pub async fn list_environments(
        &self,
        p: &Principal,
        project_id: ProjectId,
        page: PageRequest,
    ) -> DomainResult<Page<EnvironmentDetails>> {
        self.load::<Project>(p, project_id, Action::Read).await?;
        let page = self.list::<Environment>(project_id, page).await?;
        let items = self.with_clusters(page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_environment(
        &self,
        p: &Principal,
        id: EnvironmentId,
    ) -> DomainResult<EnvironmentDetails> {
        let env = self.load(p, id, Action::Read).await?;
        self.details(env).await
    }

    pub async fn update_environment(
        &self,
        p: &Principal,
        id: EnvironmentId,
        input: EnvironmentUpdate,
    ) -> DomainResult<EnvironmentDetails> {
        let mut env: Environment = self.load(p, id, Action::Write).await?;
        if let Some(name) = input.name {
            env.name = validate::name("name", &name)?;
        }
        if let Some(mode) = input.mode {
            env.mode = mode;
        }
        env.updated_at = self.now();
        self.update(&env, "project").await?;
        self.details(env).await
    }

    /// Deletes the environment with its services.
    pub async fn delete_environment(&self, p: &Principal, id: EnvironmentId) -> DomainResult<()> {
        self.load::<Environment>(p, id, Action::Write).await?;
        self.delete::<Environment>(id, "services").await
    }
}
