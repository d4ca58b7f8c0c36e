//! Read-only views across resources: provider regions and the services using a git token.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use crate::ports::ServiceFilter;

/// A service that uses a git token or a registry, with where it lives.
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
        let filter = ServiceFilter {
            git_token: Some(token),
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        self.associated(tx, page).await
    }
}
