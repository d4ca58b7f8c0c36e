//! Read-only views across resources: provider regions and the services using a git token.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{Page, PageRequest};

/// A service that uses a git token, with where it lives.
#[derive(Debug, Clone)]
pub struct AssociatedService {
    pub project_id: ProjectId,
    pub project_name: String,
    pub environment_id: EnvironmentId,
    pub environment_name: String,
    pub service: Service,
}

impl Capstan {
    /// The regions of a provider; any authenticated caller may read them.
    pub fn regions(
        &self,
        _p: &Principal,
        provider: CloudProvider,
        page: PageRequest,
    ) -> Page<Region> {
        Page::from_vec(regions(provider), page)
    }

    pub async fn git_token_services(
        &self,
        p: &Principal,
        org: OrganizationId,
        token: GitTokenId,
        page: PageRequest,
    ) -> DomainResult<Page<AssociatedService>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_in_org::<GitToken>(tx, p, org, token, Action::Read)
            .await?;
        let page = tx.list_services_by_git_token(token, page).await?;
        let envs = self
            .by_id::<Environment>(tx, page.items.iter().map(|s| s.environment_id))
            .await?;
        let projects = self
            .by_id::<Project>(tx, page.items.iter().map(|s| s.project_id))
            .await?;
        Ok(page.map(|service| AssociatedService {
            project_id: service.project_id,
            project_name: projects
                .get(&service.project_id)
                .map(|p| p.name.to_string())
                .unwrap_or_default(),
            environment_id: service.environment_id,
            environment_name: envs
                .get(&service.environment_id)
                .map(|e| e.name.to_string())
                .unwrap_or_default(),
            service,
        }))
    }
}
