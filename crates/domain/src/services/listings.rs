//! Lists across the hierarchy: an organization's environments and services, an environment's
//! services of every kind, a cluster's environments, the services of a container registry.

use super::{AssociatedService, Capstan};
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use crate::ports::{ServiceFilter, Unit};
use std::collections::HashMap;

/// A service as organization-wide lists show it: with where it lives.
#[derive(Debug, Clone)]
pub struct ServiceLight {
    pub service: Service,
    pub project_name: String,
    pub environment_name: String,
    pub cluster_id: ClusterId,
}

/// An environment on a cluster, with its project's name and its services.
#[derive(Debug, Clone)]
pub struct ClusterEnvironment {
    pub environment: Environment,
    pub project_name: String,
    pub services: Vec<Service>,
}

/// Where an organization-wide list of services looks (every condition set holds).
#[derive(Debug, Clone, Copy, Default)]
pub struct ServiceScope {
    pub project: Option<ProjectId>,
    pub environment: Option<EnvironmentId>,
    pub cluster: Option<ClusterId>,
}

impl Capstan {
    pub async fn organization_environments(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<Environment>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        Ok(tx.find_environments(org, None, page).await?)
    }

    pub async fn organization_services(
        &self,
        p: &Principal,
        org: OrganizationId,
        scope: ServiceScope,
        page: PageRequest,
    ) -> DomainResult<Page<ServiceLight>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let filter = ServiceFilter {
            organization: Some(org),
            project: scope.project,
            environment: scope.environment,
            cluster: scope.cluster,
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        let envs = self
            .by_id::<Environment>(tx, page.items.iter().map(|s| s.environment_id))
            .await?;
        let projects = self
            .by_id::<Project>(tx, page.items.iter().map(|s| s.project_id))
            .await?;
        Ok(page.map(|service| {
            let env = envs.get(&service.environment_id);
            ServiceLight {
                project_name: name_of(&projects, &service.project_id, |p| &p.name),
                environment_name: env.map(|e| e.name.to_string()).unwrap_or_default(),
                cluster_id: env.map_or(ClusterId(uuid::Uuid::nil()), |e| e.cluster_id),
                service,
            }
        }))
    }

    /// The services of every kind in an environment, as each kind's record shows them.
    pub async fn environment_services(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        page: PageRequest,
    ) -> DomainResult<Page<Service>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let filter = ServiceFilter {
            environment: Some(environment),
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        let (request, total_count) = (page.request, page.total_count);
        Ok(Page {
            items: self.decorate(tx, page.items).await?,
            request,
            total_count,
        })
    }

    pub async fn cluster_environments(
        &self,
        p: &Principal,
        cluster: ClusterId,
        page: PageRequest,
    ) -> DomainResult<Page<ClusterEnvironment>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let c: Cluster = self.load(tx, p, cluster, Action::Read).await?;
        let envs = tx
            .find_environments(c.organization_id, Some(cluster), page)
            .await?;
        let projects = self
            .by_id::<Project>(tx, envs.items.iter().map(|e| e.project_id))
            .await?;
        // The services of every environment on the cluster, in one read, shared out below.
        let filter = ServiceFilter {
            cluster: Some(cluster),
            ..Default::default()
        };
        let mut services: HashMap<EnvironmentId, Vec<Service>> = HashMap::new();
        for service in tx.find_services(&filter, PageRequest::all()).await?.items {
            services
                .entry(service.environment_id)
                .or_default()
                .push(service);
        }
        Ok(envs.map(|environment| ClusterEnvironment {
            project_name: name_of(&projects, &environment.project_id, |p| &p.name),
            services: services.remove(&environment.id).unwrap_or_default(),
            environment,
        }))
    }

    /// The containers and jobs pulling their image from a registry.
    pub async fn registry_services(
        &self,
        p: &Principal,
        org: OrganizationId,
        registry: ContainerRegistryId,
        page: PageRequest,
    ) -> DomainResult<Page<AssociatedService>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_in_org::<ContainerRegistry>(tx, p, org, registry, Action::Read)
            .await?;
        let filter = ServiceFilter {
            registry: Some(registry),
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        self.associated(tx, page).await
    }

    /// The statuses of the containers pulling their image from a registry.
    pub async fn registry_container_statuses(
        &self,
        p: &Principal,
        org: OrganizationId,
        registry: ContainerRegistryId,
        page: PageRequest,
    ) -> DomainResult<Page<ServiceStatus>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load_in_org::<ContainerRegistry>(tx, p, org, registry, Action::Read)
            .await?;
        let filter = ServiceFilter {
            registry: Some(registry),
            kind: Some(ServiceKind::Container),
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        let mut by_env: HashMap<EnvironmentId, Vec<Service>> = HashMap::new();
        for s in &page.items {
            by_env.entry(s.environment_id).or_default().push(s.clone());
        }
        let mut statuses: HashMap<ServiceId, ServiceStatus> = HashMap::new();
        for (env, services) in by_env {
            let (_, of_env) = self.statuses(tx, env, &services).await?;
            statuses.extend(services.iter().map(|s| s.id).zip(of_env));
        }
        let (request, total_count) = (page.request, page.total_count);
        Ok(Page {
            items: page
                .items
                .iter()
                .filter_map(|s| statuses.remove(&s.id))
                .collect(),
            request,
            total_count,
        })
    }

    /// Where each service of a page lives (its project's and environment's names).
    pub(super) async fn associated(
        &self,
        tx: &mut Unit,
        page: Page<Service>,
    ) -> DomainResult<Page<AssociatedService>> {
        let envs = self
            .by_id::<Environment>(tx, page.items.iter().map(|s| s.environment_id))
            .await?;
        let projects = self
            .by_id::<Project>(tx, page.items.iter().map(|s| s.project_id))
            .await?;
        Ok(page.map(|service| AssociatedService {
            project_id: service.project_id,
            project_name: name_of(&projects, &service.project_id, |p| &p.name),
            environment_id: service.environment_id,
            environment_name: name_of(&envs, &service.environment_id, |e| &e.name),
            service,
        }))
    }
}

fn name_of<K: std::hash::Hash + Eq, T>(
    records: &HashMap<K, T>,
    id: &K,
    name: impl Fn(&T) -> &Name,
) -> String {
    records
        .get(id)
        .map(|r| name(r).to_string())
        .unwrap_or_default()
}
