//! Organization-wide deployments by image: a CI pipeline that pushed `image:tag` deploys every
//! container (or job) of the organization that runs that image at another tag and deploys on
//! its own (`auto_deploy`).

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::OrganizationId;
use crate::model::{
    DeployTarget, DeploymentAction, Organization, Service, ServiceKind, ServiceSpec, ServiceStatus,
};
use crate::pagination::PageRequest;
use crate::ports::{Scope, ServiceFilter};
use crate::validate;
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ImageDeployInput {
    pub image_name: String,
    pub tag: String,
}

/// The image a container or an image-built job runs, and whether it deploys on its own.
fn image_of(service: &Service) -> Option<(&str, &str, bool)> {
    match &service.spec {
        ServiceSpec::Container(c) => Some((&c.image_name, &c.tag, c.runtime.auto_deploy)),
        ServiceSpec::Job(j) => j
            .source
            .image
            .as_ref()
            .map(|i| (i.image_name.as_str(), i.tag.as_str(), j.auto_deploy)),
        _ => None,
    }
}

impl Capstan {
    /// Deploys `tag` to every service of `kind` (containers or jobs) in the organization that
    /// runs `image_name` at another tag with auto-deploy on; in one unit holding their
    /// environments. A service that cannot be deployed now (being deleted) is left out. Answers
    /// the statuses of the deployments queued; none matched: 404.
    pub async fn deploy_image(
        &self,
        p: &Principal,
        org: OrganizationId,
        kind: ServiceKind,
        input: ImageDeployInput,
    ) -> DomainResult<Vec<ServiceStatus>> {
        let image = validate::required_text("image_name", &input.image_name)?;
        let tag = validate::required_text("tag", &input.tag)?;
        let filter = ServiceFilter {
            organization: Some(org),
            kind: Some(kind),
            ..Default::default()
        };
        let matches = |s: &Service| {
            image_of(s).is_some_and(|(name, current, auto)| auto && name == image && current != tag)
        };
        // Which environments to hold is learnt first; the services are read again under them.
        let mut envs: Vec<_> = {
            let mut unit = self.reading().await?;
            self.load::<Organization>(&mut *unit, p, org, Action::Write)
                .await?;
            unit.find_services(&filter, PageRequest::all())
                .await?
                .items
                .iter()
                .filter(|s| matches(s))
                .map(|s| s.environment_id)
                .collect()
        };
        envs.sort();
        envs.dedup();
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        for env in &envs {
            tx.lock(Scope::Environment(*env)).await?;
        }
        self.load::<Organization>(tx, p, org, Action::Write).await?;
        let services = tx.find_services(&filter, PageRequest::all()).await?.items;
        let mut statuses = Vec::new();
        for service in services.into_iter().filter(|s| matches(s)) {
            if !envs.contains(&service.environment_id) {
                continue;
            }
            let target = DeployTarget {
                image_tag: Some(tag.clone()),
                ..Default::default()
            };
            match self
                .request(tx, p, service, DeploymentAction::Deploy, target)
                .await
            {
                Ok(status) => statuses.push(status),
                Err(DomainError::Conflict(_)) => {}
                Err(other) => return Err(other),
            }
        }
        if statuses.is_empty() {
            return Err(DomainError::NotFound(match kind {
                ServiceKind::Job => "job with auto-deploy running that image at another tag",
                _ => "container with auto-deploy running that image at another tag",
            }));
        }
        unit.commit().await?;
        Ok(statuses)
    }
}
