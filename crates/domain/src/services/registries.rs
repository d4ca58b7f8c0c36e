//! Container registries of an organization.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::Failure;
use crate::error::{DomainError, DomainResult};
use crate::ids::{ClusterId, ContainerRegistryId, OrganizationId};
use crate::model::EventType;
use crate::model::{
    from_json, Cluster, ContainerRegistry, Organization, RegistryConfig, RegistryKind,
    RegistrySummary,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, ServiceFilter, ServiceLink, Unit};
use crate::secret::Secret;
use crate::validate;
use serde::Deserialize;
use serde_json::{Map, Value};

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct RegistryInput {
    pub name: String,
    pub kind: RegistryKind,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
    #[serde(default)]
    pub cluster_id: Option<ClusterId>,
}

/// A registry as the API shows it.
#[derive(Debug, Clone)]
pub struct RegistryDetails {
    pub registry: ContainerRegistry,
    pub cluster: Option<Cluster>,
    pub associated_services_count: u64,
}

/// Splits `config` into the members that may be shown and the secret rest.
pub(super) fn split_config(config: Map<String, Value>) -> DomainResult<(RegistryConfig, Secret)> {
    let (public, secret): (Map<String, Value>, Map<String, Value>) = config
        .into_iter()
        .partition(|(k, _)| RegistryConfig::PUBLIC_MEMBERS.contains(&k.as_str()));
    let public: RegistryConfig = from_json(&Value::Object(public)).map_err(|e| match e {
        DomainError::Invalid { field, message } => {
            DomainError::invalid(format!("config.{field}"), message)
        }
        other => other,
    })?;
    let secret = serde_json::to_string(&Value::Object(secret))
        .map_err(|e| DomainError::Internal(e.to_string()))?;
    Ok((public, Secret::new(secret)))
}

/// The stored secret members, updated with those sent now.
pub(super) fn merge_secrets(stored: &Secret, sent: &Secret) -> DomainResult<Secret> {
    let parse =
        |s: &Secret| serde_json::from_str::<Map<String, Value>>(s.expose()).unwrap_or_default();
    let mut merged = parse(stored);
    merged.extend(parse(sent));
    serde_json::to_string(&merged)
        .map(Secret::new)
        .map_err(|e| DomainError::Internal(e.to_string()))
}

impl Capstan {
    async fn registry_fields(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        input: &RegistryInput,
    ) -> DomainResult<(String, Option<Cluster>)> {
        let url = match (&input.url, input.kind.default_url()) {
            (Some(u), _) => {
                validate::http_url("url", u)?;
                u.trim().to_string()
            }
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(DomainError::invalid(
                    "url",
                    format!("is required for a {} registry", input.kind),
                ))
            }
        };
        let cluster = match input.cluster_id {
            None => None,
            Some(id) => Some(
                self.load_in_org::<Cluster>(tx, p, org, id, Action::Read)
                    .await?,
            ),
        };
        Ok((url, cluster))
    }

    async fn registry_details(
        &self,
        tx: &mut Unit,
        registries: Vec<ContainerRegistry>,
    ) -> DomainResult<Vec<RegistryDetails>> {
        let ids: Vec<uuid::Uuid> = registries.iter().map(|r| r.id.0).collect();
        let counts = tx.count_services_by(ServiceLink::Registry, &ids).await?;
        let clusters = self
            .by_id::<Cluster>(tx, registries.iter().filter_map(|r| r.cluster_id))
            .await?;
        Ok(registries
            .into_iter()
            .map(|registry| RegistryDetails {
                associated_services_count: counts.get(&registry.id.0).copied().unwrap_or(0),
                cluster: registry
                    .cluster_id
                    .and_then(|id| clusters.get(&id).cloned()),
                registry,
            })
            .collect())
    }

    async fn one_registry(
        &self,
        tx: &mut Unit,
        registry: ContainerRegistry,
    ) -> DomainResult<RegistryDetails> {
        self.registry_details(tx, vec![registry])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("registry vanished".into()))
    }

    pub async fn create_registry(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: RegistryInput,
    ) -> DomainResult<RegistryDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let (url, cluster) = self.registry_fields(tx, p, org, &input).await?;
            let (config, secret_config) = split_config(input.config.unwrap_or_default())?;
            let now = self.now();
            let registry = ContainerRegistry {
                id: ContainerRegistryId::generate(),
                organization_id: org,
                name: validate::name("name", &input.name)?,
                kind: input.kind,
                url,
                description: validate::description("description", input.description)?,
                cluster_id: cluster.as_ref().map(|c| c.id),
                config,
                secret_config,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &registry, "organization").await?;
            self.audit(tx, p, EventType::Create, &registry).await?;
            Ok(RegistryDetails {
                registry,
                cluster,
                associated_services_count: 0,
            })
        })
        .await
    }

    pub async fn list_registries(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<RegistryDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let page = self.list::<ContainerRegistry>(tx, org, page).await?;
        let items = self.registry_details(tx, page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_registry(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ContainerRegistryId,
    ) -> DomainResult<RegistryDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let registry = self.load_in_org(tx, p, org, id, Action::Read).await?;
        self.one_registry(tx, registry).await
    }

    /// An edit replaces the shown config; secret members not sent again are kept.
    pub async fn update_registry(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ContainerRegistryId,
        input: RegistryInput,
    ) -> DomainResult<RegistryDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut registry: ContainerRegistry =
                self.load_in_org(tx, p, org, id, Action::Write).await?;
            let (url, cluster) = self.registry_fields(tx, p, org, &input).await?;
            let (config, secret_config) = split_config(input.config.unwrap_or_default())?;
            registry.name = validate::name("name", &input.name)?;
            // Secret members not sent again are kept, unless the kind changes (they would not
            // apply).
            let secret_config = if input.kind == registry.kind {
                merge_secrets(&registry.secret_config, &secret_config)?
            } else {
                secret_config
            };
            registry.kind = input.kind;
            registry.url = url;
            registry.description = validate::description("description", input.description)?;
            registry.cluster_id = cluster.as_ref().map(|c| c.id);
            registry.config = config;
            registry.secret_config = secret_config;
            registry.updated_at = self.now();
            self.update(tx, &registry, "organization").await?;
            // The containers and jobs pulling from it show it as it is now.
            let filter = ServiceFilter {
                registry: Some(registry.id),
                ..Default::default()
            };
            for mut service in tx.find_services(&filter, PageRequest::all()).await?.items {
                service
                    .spec
                    .set_registry_summary(Some(RegistrySummary::of(&registry)));
                self.update(tx, &service, "environment").await?;
            }
            self.audit(tx, p, EventType::Update, &registry).await?;
            let out = self.one_registry(tx, registry).await?;
            Ok(out)
        })
        .await
    }

    /// Refused (409) while services pull from the registry.
    pub async fn delete_registry(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ContainerRegistryId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let registry: ContainerRegistry =
                self.load_in_org(tx, p, org, id, Action::Write).await?;
            self.audit(tx, p, EventType::Delete, &registry).await?;
            self.delete::<ContainerRegistry>(tx, id, "services").await?;
            Ok(())
        })
        .await
    }
}

impl Capstan {
    /// `POST /environment/{id}/checkContainerImage`: the image `name:tag` of the registry can
    /// be run (it is on the engine's host, or in its registry); 400 when it is not found.
    pub async fn check_container_image(
        &self,
        p: &Principal,
        environment: crate::ids::EnvironmentId,
        registry: ContainerRegistryId,
        name: &str,
        tag: &str,
    ) -> DomainResult<()> {
        let (access, host) = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            let env: crate::model::Environment =
                self.load(tx, p, environment, Action::Read).await?;
            let access = crate::ports::Repo::<ContainerRegistry>::get(tx, registry)
                .await?
                .filter(|r| r.organization_id == env.organization_id)
                .ok_or_else(|| DomainError::invalid("registry_id", "no such container registry"))?
                .access();
            (access, self.target_of_environment(tx, environment).await?)
        };
        let engine = self
            .engine
            .as_ref()
            .ok_or_else(|| DomainError::Unavailable("no engine runs images here".into()))?;
        let checks = engine.image_checks(&host).ok_or_else(|| {
            DomainError::state(format!("{} checks no images", engine.name(&host)))
        })?;
        let found = checks
            .image_available(&host, &access, name, tag)
            .await
            .map_err(|why| match why.failure() {
                Failure::Refused => DomainError::invalid("registry_id", why.to_string()),
                _ => DomainError::Upstream(why.to_string()),
            })?;
        if found {
            Ok(())
        } else {
            Err(DomainError::invalid(
                "image_name",
                format!("the image {name}:{tag} cannot be had from its registry with its access"),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_secrets_are_kept_apart() {
        let Value::Object(config) =
            json!({"username": "bob", "password": "hunter2", "token_lifetime_seconds": 60})
        else {
            unreachable!()
        };
        let (public, secret) = split_config(config).unwrap();
        assert_eq!(public.username.as_deref(), Some("bob"));
        assert_eq!(public.token_lifetime_seconds, Some(60));
        assert!(!serde_json::to_string(&public).unwrap().contains("hunter2"));
        assert!(secret.expose().contains("hunter2"));
    }

    #[test]
    fn secrets_not_sent_again_are_kept() {
        let merged = merge_secrets(
            &Secret::new(r#"{"password":"a","token":"t"}"#),
            &Secret::new(r#"{"password":"b"}"#),
        )
        .unwrap();
        let v: Value = serde_json::from_str(merged.expose()).unwrap();
        assert_eq!(v, json!({"password": "b", "token": "t"}));
    }

    #[test]
    fn config_type_errors_name_the_member() {
        let Value::Object(config) = json!({"token_lifetime_seconds": "x"}) else {
            unreachable!()
        };
        let err = split_config(config).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config.token_lifetime_seconds:"),
            "{err}"
        );
    }
}
