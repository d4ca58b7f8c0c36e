//! Helm chart repositories of an organization: their config is kept as a container registry's
//! (public members shown, secret ones encrypted and never shown).

use super::registries::{merge_secrets, split_config};
use super::{AssociatedService, Capstan};
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{HelmRepositoryId, OrganizationId};
use crate::model::EventType;
use crate::model::{HelmRepository, HelmRepositoryKind, Organization};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, ServiceFilter, ServiceLink, Unit};
use crate::validate;
use serde::Deserialize;
use serde_json::{Map, Value};

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct HelmRepositoryInput {
    pub name: String,
    pub kind: HelmRepositoryKind,
    /// Required unless the kind has a well-known address (OCI_DOCKER_HUB, OCI_PUBLIC_ECR,
    /// OCI_GITHUB_CR, OCI_GITLAB_CR).
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub skip_tls_verification: Option<bool>,
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
}

/// A helm repository as the API shows it.
#[derive(Debug, Clone)]
pub struct HelmRepositoryDetails {
    pub repository: HelmRepository,
    pub associated_services_count: u64,
}

/// An HTTPS repository is reached over http(s), the OCI kinds at an `oci://` address.
fn repository_url(kind: HelmRepositoryKind, url: Option<&str>) -> DomainResult<String> {
    let url = match (url, kind.default_url()) {
        (Some(u), _) => u.trim().to_string(),
        (None, Some(d)) => return Ok(d.to_string()),
        (None, None) => {
            return Err(DomainError::invalid(
                "url",
                format!("is required for a {kind} repository"),
            ))
        }
    };
    let parsed = url::Url::parse(&url);
    // Credentials in the address would be stored and shown with it; they belong in the
    // config's secret members, which are sealed and never answered.
    if parsed
        .as_ref()
        .is_ok_and(|u| !u.username().is_empty() || u.password().is_some())
    {
        return Err(DomainError::invalid(
            "url",
            "must not hold credentials; put them in the repository's config (login, password)",
        ));
    }
    let scheme_ok = match parsed {
        Ok(u) if kind == HelmRepositoryKind::Https => {
            matches!(u.scheme(), "https" | "http") && u.host_str().is_some()
        }
        Ok(u) => u.scheme() == "oci" && u.host_str().is_some(),
        Err(_) => false,
    };
    if !scheme_ok {
        let expected = if kind == HelmRepositoryKind::Https {
            "an https:// address"
        } else {
            "an oci:// address"
        };
        return Err(DomainError::invalid(
            "url",
            format!("must be {expected} for a {kind} repository"),
        ));
    }
    Ok(url)
}

impl Capstan {
    async fn helm_repository_details(
        &self,
        tx: &mut Unit,
        repositories: Vec<HelmRepository>,
    ) -> DomainResult<Vec<HelmRepositoryDetails>> {
        let ids: Vec<uuid::Uuid> = repositories.iter().map(|r| r.id.0).collect();
        let counts = tx
            .count_services_by(ServiceLink::HelmRepository, &ids)
            .await?;
        Ok(repositories
            .into_iter()
            .map(|repository| HelmRepositoryDetails {
                associated_services_count: counts.get(&repository.id.0).copied().unwrap_or(0),
                repository,
            })
            .collect())
    }

    async fn one_helm_repository(
        &self,
        tx: &mut Unit,
        repository: HelmRepository,
    ) -> DomainResult<HelmRepositoryDetails> {
        self.helm_repository_details(tx, vec![repository])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("helm repository vanished".into()))
    }

    pub async fn create_helm_repository(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: HelmRepositoryInput,
    ) -> DomainResult<HelmRepositoryDetails> {
        let url = repository_url(input.kind, input.url.as_deref())?;
        let (config, secret_config) = split_config(input.config.unwrap_or_default())?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let now = self.now();
            let repository = HelmRepository {
                id: HelmRepositoryId::generate(),
                organization_id: org,
                name: validate::name("name", &input.name)?,
                kind: input.kind,
                url,
                description: validate::description("description", input.description)?,
                skip_tls_verification: input.skip_tls_verification.unwrap_or(false),
                config,
                secret_config,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &repository, "organization").await?;
            self.audit(tx, p, EventType::Create, &repository).await?;
            Ok(HelmRepositoryDetails {
                repository,
                associated_services_count: 0,
            })
        })
        .await
    }

    pub async fn list_helm_repositories(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<HelmRepositoryDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let page = self.list::<HelmRepository>(tx, org, page).await?;
        let (request, total_count) = (page.request, page.total_count);
        Ok(Page {
            items: self.helm_repository_details(tx, page.items).await?,
            request,
            total_count,
        })
    }

    pub async fn get_helm_repository(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: HelmRepositoryId,
    ) -> DomainResult<HelmRepositoryDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let repository = self.load_in_org(tx, p, org, id, Action::Read).await?;
        self.one_helm_repository(tx, repository).await
    }

    /// An edit replaces the shown config; secret members not sent again are kept while the
    /// kind stays. The helm services using it read its new name and address at once.
    pub async fn update_helm_repository(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: HelmRepositoryId,
        input: HelmRepositoryInput,
    ) -> DomainResult<HelmRepositoryDetails> {
        let url = repository_url(input.kind, input.url.as_deref())?;
        let (config, secret_config) = split_config(input.config.unwrap_or_default())?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut repository: HelmRepository =
                self.load_in_org(tx, p, org, id, Action::Write).await?;
            repository.secret_config = if input.kind == repository.kind {
                merge_secrets(&repository.secret_config, &secret_config)?
            } else {
                secret_config
            };
            repository.name = validate::name("name", &input.name)?;
            repository.kind = input.kind;
            repository.url = url;
            repository.description = validate::description("description", input.description)?;
            repository.skip_tls_verification = input
                .skip_tls_verification
                .unwrap_or(repository.skip_tls_verification);
            repository.config = config;
            repository.updated_at = self.now();
            self.update(tx, &repository, "organization").await?;
            self.audit(tx, p, EventType::Update, &repository).await?;
            let out = self.one_helm_repository(tx, repository).await?;
            Ok(out)
        })
        .await
    }

    /// Refused (409) while helm services take their chart from it.
    pub async fn delete_helm_repository(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: HelmRepositoryId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let repository: HelmRepository =
                self.load_in_org(tx, p, org, id, Action::Write).await?;
            self.audit(tx, p, EventType::Delete, &repository).await?;
            self.delete::<HelmRepository>(tx, id, "helm services")
                .await?;
            Ok(())
        })
        .await
    }

    pub async fn helm_repository_services(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: HelmRepositoryId,
        page: PageRequest,
    ) -> DomainResult<Page<AssociatedService>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_in_org::<HelmRepository>(tx, p, org, id, Action::Read)
            .await?;
        let filter = ServiceFilter {
            helm_repository: Some(id),
            ..Default::default()
        };
        let page = tx.find_services(&filter, page).await?;
        self.associated(tx, page).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_match_the_kind() {
        assert_eq!(
            repository_url(
                HelmRepositoryKind::Https,
                Some("https://charts.example.com")
            )
            .unwrap(),
            "https://charts.example.com"
        );
        assert_eq!(
            repository_url(HelmRepositoryKind::OciGithubCr, None).unwrap(),
            "oci://ghcr.io"
        );
        for (kind, url, message) in [
            (
                HelmRepositoryKind::Https,
                Some("oci://x.io"),
                "url: must be an https://",
            ),
            (
                HelmRepositoryKind::OciEcr,
                Some("https://x.io"),
                "url: must be an oci://",
            ),
            (HelmRepositoryKind::OciGenericCr, None, "url: is required"),
            (
                HelmRepositoryKind::Https,
                Some("https://user:pass@charts.example.com"),
                "url: must not hold credentials",
            ),
            (
                HelmRepositoryKind::OciGenericCr,
                Some("oci://robot@registry.example.com/charts"),
                "url: must not hold credentials",
            ),
        ] {
            let err = repository_url(kind, url).unwrap_err().to_string();
            assert!(err.starts_with(message), "{err}");
        }
    }
}
