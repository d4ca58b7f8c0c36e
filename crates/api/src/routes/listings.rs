//! Lists across the hierarchy (an organization's environments and services, an environment's
//! services of every kind, a cluster's environments, a registry's services) and the catalogs
//! of providers and registry kinds.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, query_parsed, Auth, Paging};
use crate::openapi::{Doc, Query, Routes};
use crate::views::{
    AssociatedServiceView, AvailableHelmRepositoryView, AvailableRegistryView,
    CloudProviderEntryView, ClusterEnvironmentView, OrganizationEnvironmentView, Paged,
    ServiceLightView, ServiceView,
};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{regions, CloudProvider, HelmRepositoryKind, RegistryKind, ServiceStatus};
use domain::services::ServiceScope;

type St = web::Data<AppState>;
const ORG: &str = "organizationId";
const REGISTRY: &str = "containerRegistryId";

pub fn routes(r: &mut Routes) {
    r.at("/organization/{organizationId}/environments")
        .get(
            organization_environments,
            Doc::list::<OrganizationEnvironmentView>("List the organization's environments"),
        )
        .add();
    r.at("/organization/{organizationId}/services")
        .get(
            organization_services,
            Doc::list::<ServiceLightView>(
                "List the organization's services, in a project, an environment or on a cluster",
            )
            .query(Query::uuid("project_id", false))
            .query(Query::uuid("environment_id", false))
            .query(Query::uuid("cluster_id", false)),
        )
        .add();
    r.at("/environment/{environmentId}/services")
        .get(
            environment_services,
            Doc::list::<ServiceView>("List an environment's services of every kind"),
        )
        .add();
    r.at("/cluster/{clusterId}/environments")
        .get(
            cluster_environments,
            Doc::list::<ClusterEnvironmentView>("List the environments on a cluster"),
        )
        .add();
    r.at(
        "/organization/{organizationId}/containerRegistry/{containerRegistryId}/associatedServices",
    )
    .get(
        registry_services,
        Doc::list::<AssociatedServiceView>("List the services pulling from a registry"),
    )
    .add();
    r.at("/organization/{organizationId}/containerRegistry/{containerRegistryId}/container/status")
        .get(
            registry_container_statuses,
            Doc::list::<ServiceStatus>(
                "List the statuses of the containers pulling from a registry",
            ),
        )
        .add();
    r.at("/organization/{organizationId}/helmRepository/{helmRepositoryId}/associatedServices")
        .get(
            helm_repository_services,
            Doc::list::<AssociatedServiceView>(
                "List the helm services taking their chart from a repository",
            ),
        )
        .add();
    r.at("/availableHelmRepository")
        .get(
            available_helm_repositories,
            Doc::list::<AvailableHelmRepositoryView>(
                "List the kinds of helm repository and the configuration each takes",
            ),
        )
        .add();
    r.at("/cloudProvider")
        .get(
            cloud_providers,
            Doc::list::<CloudProviderEntryView>("List the cloud providers and their regions"),
        )
        .add();
    r.at("/availableContainerRegistry")
        .get(
            available_registries,
            Doc::list::<AvailableRegistryView>(
                "List the kinds of container registry and the configuration each takes",
            ),
        )
        .add();
}

async fn organization_environments(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let envs = st
        .capstan
        .organization_environments(&p, path_id(&req, ORG)?, page)
        .await?;
    Ok(ok(Paged::from_page(
        envs,
        OrganizationEnvironmentView::from,
    )))
}

async fn organization_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let scope = ServiceScope {
        project: query_parsed(&req, "project_id", "a UUID")?,
        environment: query_parsed(&req, "environment_id", "a UUID")?,
        cluster: query_parsed(&req, "cluster_id", "a UUID")?,
    };
    let services = st
        .capstan
        .organization_services(&p, path_id(&req, ORG)?, scope, page)
        .await?;
    Ok(ok(Paged::from_page(services, ServiceLightView::from)))
}

async fn environment_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let services = st
        .capstan
        .environment_services(&p, path_id(&req, "environmentId")?, page)
        .await?;
    Ok(ok(Paged::from_page(services, ServiceView::from)))
}

async fn cluster_environments(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let envs = st
        .capstan
        .cluster_environments(&p, path_id(&req, "clusterId")?, page)
        .await?;
    Ok(ok(Paged::from_page(envs, ClusterEnvironmentView::from)))
}

async fn registry_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let services = st
        .capstan
        .registry_services(&p, path_id(&req, ORG)?, path_id(&req, REGISTRY)?, page)
        .await?;
    Ok(ok(Paged::from_page(services, AssociatedServiceView::from)))
}

async fn registry_container_statuses(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let statuses = st
        .capstan
        .registry_container_statuses(&p, path_id(&req, ORG)?, path_id(&req, REGISTRY)?, page)
        .await?;
    Ok(ok(Paged::from_page(statuses, |s| s)))
}

/// Any authenticated caller may read the catalogs.
async fn cloud_providers(Auth(_p): Auth, Paging(page): Paging) -> ApiResult<HttpResponse> {
    let all = CloudProvider::ALL
        .iter()
        .map(|provider| CloudProviderEntryView {
            short_name: provider.as_str(),
            name: provider.display_name(),
            logo_url: format!(
                "app://capstan/provider/{}",
                provider.as_str().to_lowercase()
            ),
            regions: regions(*provider),
        })
        .collect();
    Ok(ok(Paged::from_vec(all, page, |p| p)))
}

async fn available_registries(Auth(_p): Auth, Paging(page): Paging) -> ApiResult<HttpResponse> {
    let all = RegistryKind::ALL
        .iter()
        .map(|kind| AvailableRegistryView {
            kind: *kind,
            required_config: config_shape(kind.config_members()),
            is_mandatory: false,
        })
        .collect();
    Ok(ok(Paged::from_vec(all, page, |k| k)))
}

async fn helm_repository_services(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let services = st
        .capstan
        .helm_repository_services(
            &p,
            path_id(&req, ORG)?,
            path_id(&req, "helmRepositoryId")?,
            page,
        )
        .await?;
    Ok(ok(Paged::from_page(services, AssociatedServiceView::from)))
}

fn config_shape(members: &[&str]) -> serde_json::Map<String, serde_json::Value> {
    members
        .iter()
        .map(|m| (m.to_string(), serde_json::json!("string")))
        .collect()
}

async fn available_helm_repositories(
    Auth(_p): Auth,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = HelmRepositoryKind::ALL
        .iter()
        .map(|kind| AvailableHelmRepositoryView {
            kind: *kind,
            required_config: config_shape(kind.config_members()),
            is_mandatory: false,
        })
        .collect();
    Ok(ok(Paged::from_vec(all, page, |k| k)))
}
