//! Organization-wide deployments by image: a CI pipeline that pushed `image:tag` deploys every
//! container (or job) of the organization that runs that image at another tag and deploys on
//! its own (`auto_deploy`), or previews the tag: each environment whose containers run that
//! image with `auto_preview` on gets a PREVIEW copy deployed with the new tag.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{EnvironmentId, OrganizationId};
use crate::model::EventType;
use crate::model::{
    DeployTarget, DeploymentAction, Environment, EnvironmentMode, Name, Organization, Project,
    Service, ServiceKind, ServiceSpec, ServiceStatus,
};
use crate::pagination::PageRequest;
use crate::ports::{ServiceFilter, Unit};
use crate::validate;
use serde::Deserialize;
use std::collections::BTreeMap;

use super::deployments::Selection;

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

/// The name of the PREVIEW environment of `source` for `tag`: one per environment and tag, so
/// that pushing the same tag again redeploys it rather than copying the environment again.
fn preview_name(source: &Name, tag: &str) -> DomainResult<Name> {
    let suffix = format!(" (preview {tag})");
    let room = validate::MAX_NAME_CHARS.saturating_sub(suffix.chars().count());
    let base: String = source.as_str().chars().take(room).collect();
    validate::name("tag", &format!("{base}{suffix}"))
}

fn previewed(service: &Service, image: &str, tag: &str) -> bool {
    matches!(&service.spec, ServiceSpec::Container(c)
        if c.runtime.workload.auto_preview && c.image_name == image && c.tag != tag)
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
        // Which projects to hold is learnt first; the services are read again under them.
        // Projects, not environments: a preview of the same push holds projects, and units
        // that lock several take projects before environments.
        let projects: Vec<_> = {
            let mut unit = self.reading().await?;
            self.load::<Organization>(&mut *unit, p, org, Action::Write)
                .await?;
            unit.find_services(&filter, PageRequest::all())
                .await?
                .items
                .iter()
                .filter(|s| matches(s))
                .map(|s| s.project_id)
                .collect()
        };
        self.in_unit(&[], async |tx| {
            self.lock_projects(tx, projects.iter().copied()).await?;
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let services = tx.find_services(&filter, PageRequest::all()).await?.items;
            let mut statuses = Vec::new();
            for service in services.into_iter().filter(|s| matches(s)) {
                if !projects.contains(&service.project_id) {
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
            Ok(statuses)
        })
        .await
    }

    /// For every environment of the organization (not itself a preview) with containers that
    /// run `image_name` at another tag and have `auto_preview` on: deploys its PREVIEW copy,
    /// named for the tag, with those containers at `tag`. The copy is made (services,
    /// variables, secrets, stages; everything deployed) the first time, and only those
    /// containers are deployed again when the tag is pushed again. One unit holding the
    /// projects. Answers the statuses of the previewed containers; none matched: 404.
    pub async fn preview_image(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: ImageDeployInput,
    ) -> DomainResult<Vec<ServiceStatus>> {
        let image = validate::required_text("image_name", &input.image_name)?;
        let tag = validate::required_text("tag", &input.tag)?;
        let filter = ServiceFilter {
            organization: Some(org),
            kind: Some(ServiceKind::Container),
            ..Default::default()
        };
        // Which projects to hold is learnt first; everything is read again under them.
        let projects: Vec<_> = {
            let mut unit = self.reading().await?;
            self.load::<Organization>(&mut *unit, p, org, Action::Write)
                .await?;
            unit.find_services(&filter, PageRequest::all())
                .await?
                .items
                .iter()
                .filter(|s| previewed(s, &image, &tag))
                .map(|s| s.project_id)
                .collect()
        };
        self.in_unit(&[], async |tx| {
            self.lock_projects(tx, projects.iter().copied()).await?;
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let mut sources: BTreeMap<EnvironmentId, Vec<Service>> = BTreeMap::new();
            for service in tx.find_services(&filter, PageRequest::all()).await?.items {
                if previewed(&service, &image, &tag) && projects.contains(&service.project_id) {
                    sources
                        .entry(service.environment_id)
                        .or_default()
                        .push(service);
                }
            }
            let environments = self
                .by_id::<Environment>(tx, sources.keys().copied())
                .await?;
            let mut statuses = Vec::new();
            for (id, containers) in sources {
                let Some(source) = environments.get(&id) else {
                    continue;
                };
                if source.mode == EnvironmentMode::Preview {
                    continue;
                }
                statuses.extend(self.preview(tx, p, source, &containers, &tag).await?);
            }
            if statuses.is_empty() {
                return Err(DomainError::NotFound(
                    "container with auto-preview running that image at another tag",
                ));
            }
            Ok(statuses)
        })
        .await
    }

    /// Deploys `containers` of `source` at `tag` in the environment's preview for that tag.
    async fn preview(
        &self,
        tx: &mut Unit,
        p: &Principal,
        source: &Environment,
        containers: &[Service],
        tag: &str,
    ) -> DomainResult<Vec<ServiceStatus>> {
        let name = preview_name(&source.name, tag)?;
        let project: Project = self.load(tx, p, source.project_id, Action::Write).await?;
        let existing = self
            .every::<Environment>(tx, project.id)
            .await?
            .into_iter()
            .find(|e| e.name.key() == name.key());
        let target = DeployTarget {
            image_tag: Some(tag.to_string()),
            ..Default::default()
        };
        let mut statuses = Vec::new();
        if let Some(preview) = existing {
            if preview.mode != EnvironmentMode::Preview {
                return Err(DomainError::state(format!(
                    "the environment '{name}' that would preview this tag is not a preview"
                )));
            }
            let services = self.services_of(tx, preview.id).await?;
            let mut refused = None;
            for container in containers {
                let Some(copy) = services
                    .iter()
                    .find(|s| s.name.key() == container.name.key())
                else {
                    continue;
                };
                match self
                    .request(
                        tx,
                        p,
                        copy.clone(),
                        DeploymentAction::Deploy,
                        target.clone(),
                    )
                    .await
                {
                    Ok(status) => statuses.push(status),
                    Err(e @ DomainError::Conflict(_)) => refused = Some(e),
                    Err(other) => return Err(other),
                }
            }
            // The preview is there but none of its copies can be deployed now: say why.
            return match refused {
                Some(e) if statuses.is_empty() => Err(e),
                _ => Ok(statuses),
            };
        }
        let cluster = self
            .cluster_for(tx, p, &project, Some(source.cluster_id))
            .await?;
        let preview = self.new_environment(p, &project, &cluster, name, EnvironmentMode::Preview);
        let (preview, copies) = self
            .copy_environment(tx, source, preview, super::environments::Copied::Whole)
            .await?;
        self.audit(tx, p, EventType::Clone, &preview).await?;
        let mut retagged = Vec::new();
        for container in containers {
            if let Some(copy) = copies.get(&container.id) {
                let mut copy = copy.clone();
                copy.apply_target(&target);
                self.update(tx, &copy, "environment").await?;
                retagged.push(copy);
            }
        }
        self.environment_action_in(tx, p, preview.id, DeploymentAction::Deploy, Selection::All)
            .await?;
        for copy in &retagged {
            statuses.push(self.status_of(tx, copy).await?);
        }
        Ok(statuses)
    }
}
