//! Services of every kind: one generic path; only the payload differs by kind.

use super::{admitted, Capstan};
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{EnvironmentId, OrganizationId, ServiceId};
use crate::model::EventType;
use crate::model::{
    ContainerRegistry, DeploymentStatus, Environment, GitToken, HelmRepository, RegistrySummary,
    Service, ServiceDraft, ServiceKind, ServiceSpec,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Reference, Scope, Unit};

impl Capstan {
    /// The registry and git tokens a spec names must exist in the service's organization (and
    /// are held so until the unit ends: a concurrent deletion waits, then finds them used). A
    /// repository reached with a token is on that token's provider, whatever its host is called
    /// (a self-hosted HOSTB need not have "gitlab" in its name).
    async fn check_references(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        spec: &mut ServiceSpec,
    ) -> DomainResult<()> {
        if let Some(id) = spec.registry_id() {
            tx.lock(Scope::Referenced(Reference::Registry(id))).await?;
            let registry: ContainerRegistry = self.load(tx, p, id, Action::Read).await?;
            if registry.organization_id != org {
                return Err(DomainError::Forbidden(
                    "the container registry belongs to another organization".into(),
                ));
            }
            spec.set_registry_summary(Some(RegistrySummary::of(&registry)));
        }
        if let Some(id) = spec.helm_repository_id() {
            let repository: HelmRepository = self.load(tx, p, id, Action::Read).await?;
            if repository.organization_id != org {
                return Err(DomainError::Forbidden(
                    "the helm repository belongs to another organization".into(),
                ));
            }
        }
        for repo in spec.git_repositories_mut() {
            if let Some(id) = repo.git_token_id {
                tx.lock(Scope::Referenced(Reference::GitToken(id))).await?;
                let token: GitToken = self.load(tx, p, id, Action::Read).await?;
                if token.organization_id != org {
                    return Err(DomainError::Forbidden(
                        "the git token belongs to another organization".into(),
                    ));
                }
                repo.provider = token.provider;
            }
        }
        Ok(())
    }

    /// Fills the read-time members: git repositories' token names and access, the helm
    /// repositories charts come from, and the registry of records written before it was kept
    /// with them (one query each for a page, none when nothing needs it).
    pub(super) async fn decorate(
        &self,
        tx: &mut Unit,
        mut services: Vec<Service>,
    ) -> DomainResult<Vec<Service>> {
        self.with_groups(tx, &mut services).await?;
        self.decorate_grouped(tx, services).await
    }

    /// [`Capstan::decorate`] for services whose groups are attached already.
    async fn decorate_grouped(
        &self,
        tx: &mut Unit,
        mut services: Vec<Service>,
    ) -> DomainResult<Vec<Service>> {
        let tokens = self
            .by_id::<GitToken>(
                tx,
                services
                    .iter()
                    .flat_map(|s| s.spec.git_repositories())
                    .filter_map(|r| r.git_token_id),
            )
            .await?;
        // Records written before the registry was kept with them read it now.
        let registries = self
            .by_id::<ContainerRegistry>(
                tx,
                services
                    .iter()
                    .filter(|s| s.spec.registry_summary().is_none())
                    .filter_map(|s| s.spec.registry_id()),
            )
            .await?;
        let charts = self
            .by_id::<HelmRepository>(
                tx,
                services.iter().filter_map(|s| s.spec.helm_repository_id()),
            )
            .await?;
        for service in &mut services {
            if let Some(r) = service
                .spec
                .registry_id()
                .and_then(|id| registries.get(&id))
            {
                service
                    .spec
                    .set_registry_summary(Some(RegistrySummary::of(r)));
            }
            if let (Some(id), ServiceSpec::Helm(h)) =
                (service.spec.helm_repository_id(), &mut service.spec)
            {
                if let (Some(r), Some(source)) = (charts.get(&id), h.source.repository.as_mut()) {
                    source.repository.name = r.name.to_string();
                    source.repository.url = r.url.clone();
                }
            }
            for repo in service.spec.git_repositories_mut() {
                repo.git_token_name = repo
                    .git_token_id
                    .and_then(|id| tokens.get(&id).map(|t| t.name.to_string()));
                repo.has_access = repo.git_token_id.is_none() || repo.git_token_name.is_some();
            }
        }
        Ok(services)
    }

    pub(super) async fn decorate_one(
        &self,
        tx: &mut Unit,
        service: Service,
    ) -> DomainResult<Service> {
        only(self.decorate(tx, vec![service]).await?)
    }

    pub(super) async fn load_service(
        &self,
        tx: &mut Unit,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        action: Action,
    ) -> DomainResult<Service> {
        admit(
            p,
            kind,
            crate::ports::Repo::<Service>::get(tx, id).await?,
            action,
        )
    }

    /// Deletes a service's row, every path of deletion alike: a database's linked
    /// applications are marked first (its link variables go with it).
    pub(crate) async fn delete_service_row(
        &self,
        tx: &mut Unit,
        id: ServiceId,
    ) -> DomainResult<()> {
        self.unlink_all(tx, id).await?;
        self.delete::<Service>(tx, id, "other resources").await
    }

    pub async fn create_service(
        &self,
        p: &Principal,
        environment_id: EnvironmentId,
        kind: ServiceKind,
        body: &serde_json::Value,
    ) -> DomainResult<Service> {
        self.in_unit(&[Scope::Environment(environment_id)], async |tx| {
            let env: Environment = self.load(tx, p, environment_id, Action::Write).await?;
            if tx
                .environment_activity(environment_id)
                .await?
                .deleting(environment_id.0)
            {
                // It would go with the environment at the end of the deletion.
                return Err(DomainError::state("the environment is being deleted"));
            }
            let mut draft = ServiceDraft::parse(kind, body, None)?;
            self.bounds.check_service(&draft.spec)?;
            self.check_references(tx, p, env.organization_id, &mut draft.spec)
                .await?;
            let now = self.now();
            let service = Service {
                id: ServiceId::generate(),
                organization_id: env.organization_id,
                project_id: env.project_id,
                environment_id,
                name: draft.name,
                description: draft.description,
                spec: draft.spec,
                deployment_status: DeploymentStatus::NeverDeployed,
                advanced_settings: Default::default(),
                groups: Vec::new(),
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &service, "environment").await?;
            self.attach_named_groups(tx, &service, body).await?;
            self.stage_new_service(tx, &env, service.id).await?;
            self.link_new_service(tx, &service).await?;
            self.audit(tx, p, EventType::Create, &service).await?;
            let service = self.decorate_one(tx, service).await?;
            Ok(service)
        })
        .await
    }

    pub async fn list_services(
        &self,
        p: &Principal,
        environment_id: EnvironmentId,
        kind: ServiceKind,
        out_of_date_only: bool,
        page: PageRequest,
    ) -> DomainResult<Page<Service>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let page = tx
            .list_services_of_kind(environment_id, kind, out_of_date_only, page)
            .await?;
        self.authorize_children::<Environment, _>(tx, p, environment_id, &page, Action::Read)
            .await?;
        let items = self.decorate(tx, page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
    ) -> DomainResult<Service> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        // The group ids come in the service's own statement: one round trip, not two.
        let (found, groups) = tx.service_with_group_ids(id).await?.unzip();
        let mut services = vec![admit(p, kind, found, Action::Read)?];
        let pairs: Vec<_> = groups.into_iter().flatten().map(|g| (id, g)).collect();
        self.attach_groups(tx, &mut services, &pairs).await?;
        only(self.decorate_grouped(tx, services).await?)
    }

    /// Replaces the service's configuration with the request's (see [`ServiceDraft::edit_body`]
    /// for the kinds whose edit body is partial).
    pub async fn update_service(
        &self,
        p: &Principal,
        kind: ServiceKind,
        id: ServiceId,
        body: &serde_json::Value,
    ) -> DomainResult<Service> {
        self.in_unit(&[Scope::EnvironmentOf(id)], async |tx| {
            let mut service = self.load_service(tx, p, kind, id, Action::Write).await?;
            self.attach_named_groups(tx, &service, body).await?;
            let body = ServiceDraft::edit_body(&service, body);
            let mut draft = ServiceDraft::parse(kind, &body, Some(&service.spec))?;
            self.bounds.check_service(&draft.spec)?;
            self.check_references(tx, p, service.organization_id, &mut draft.spec)
                .await?;
            service.name = draft.name;
            service.description = draft.description;
            service.spec = draft.spec;
            service.mark_changed();
            service.updated_at = self.now();
            self.update(tx, &service, "environment").await?;
            self.audit(tx, p, EventType::Update, &service).await?;
            let service = self.decorate_one(tx, service).await?;
            Ok(service)
        })
        .await
    }
}

/// A service read by id as [`admitted`] answers it, and 404 naming `kind` when it is of another
/// kind than the path names.
fn admit(
    p: &Principal,
    kind: ServiceKind,
    found: Option<Service>,
    action: Action,
) -> DomainResult<Service> {
    let service = admitted(p, found, action)?;
    if service.kind() != kind {
        return Err(DomainError::NotFound(kind.noun()));
    }
    Ok(service)
}

/// The one service a decoration of one gave back.
fn only(mut services: Vec<Service>) -> DomainResult<Service> {
    services
        .pop()
        .ok_or_else(|| DomainError::Internal("service vanished".into()))
}
