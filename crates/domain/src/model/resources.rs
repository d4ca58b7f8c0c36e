//! The organization-level and hierarchy resources.

use super::{EnvironmentMode, GitProvider, Record, RegistryKind};
use crate::ids::*;
use crate::secret::Secret;
use serde::{Deserialize, Serialize};
use time::{Date, OffsetDateTime};
use uuid::Uuid;

macro_rules! record {
    ($ty:ty, $id:ty, $parent:ty, $kind:literal) => {
        impl Record for $ty {
            type Id = $id;
            type Parent = $parent;
            const KIND: &'static str = $kind;
            fn id(&self) -> $id {
                self.id
            }
            fn organization_id(&self) -> OrganizationId {
                self.organization_id
            }
        }
    };
}

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: ProjectId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub description: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}
record!(Project, ProjectId, OrganizationId, "project");

#[derive(Debug, Clone, PartialEq)]
pub struct Environment {
    pub id: EnvironmentId,
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub cluster_id: ClusterId,
    pub name: super::Name,
    pub mode: EnvironmentMode,
    pub last_updated_by: Option<Uuid>,
    /// The pull request a preview environment follows (docs/previews.md); none for every
    /// other environment.
    pub pull_request: Option<PreviewOf>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}
record!(Environment, EnvironmentId, ProjectId, "environment");

/// What a preview environment follows: a pull request of a repository, previewing the
/// blueprint environment whose services it copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewOf {
    pub provider: GitProvider,
    /// `owner/name`, as the provider names the base repository.
    pub repository: String,
    pub number: i64,
    pub url: String,
    pub head_branch: String,
    pub head_commit: String,
    pub blueprint_environment_id: EnvironmentId,
    /// The comment on the pull request that names the preview's links, once written.
    #[serde(default)]
    pub comment_id: Option<String>,
    /// The last delivery about the pull request: a preview idle for long is deleted.
    #[serde(with = "time::serde::rfc3339")]
    pub last_activity_at: OffsetDateTime,
}

/// The members of a registry's `config` that may be shown. Anything else a client sends in
/// `config` (passwords, secret keys, JSON credentials) is kept apart as a secret.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegistryConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub altcloud_access_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub altcloud_project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_email: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_identity_provider_resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_lifetime_seconds: Option<i64>,
    #[serde(rename = "cloudC_tenant_id", skip_serializing_if = "Option::is_none")]
    pub cloudc_tenant_id: Option<String>,
    #[serde(
        rename = "cloudC_subscription_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub cloudc_subscription_id: Option<String>,
    #[serde(
        rename = "cloudC_application_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub cloudc_application_id: Option<String>,
    #[serde(
        rename = "cloudC_application_object_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub cloudc_application_object_id: Option<String>,
}

impl RegistryConfig {
    /// The member names that are public; every other `config` member is secret.
    pub const PUBLIC_MEMBERS: [&'static str; 14] = [
        "username",
        "region",
        "altcloud_access_key",
        "altcloud_project_id",
        "access_key_id",
        "role_arn",
        "project_id",
        "service_account_email",
        "workload_identity_provider_resource",
        "token_lifetime_seconds",
        "cloudC_tenant_id",
        "cloudC_subscription_id",
        "cloudC_application_id",
        "cloudC_application_object_id",
    ];
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRegistry {
    pub id: ContainerRegistryId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub kind: RegistryKind,
    pub url: String,
    pub description: Option<String>,
    pub cluster_id: Option<ClusterId>,
    pub config: RegistryConfig,
    /// The secret members of `config`, as a JSON object serialized to text.
    pub secret_config: Secret,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}
record!(
    ContainerRegistry,
    ContainerRegistryId,
    OrganizationId,
    "container registry"
);

impl ContainerRegistry {
    /// How an engine signs in to it: the username of its config, the password of its secret
    /// config (absent for a public registry).
    pub fn access(&self) -> super::RegistryAccess {
        let secret: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(self.secret_config.expose()).unwrap_or_default();
        super::RegistryAccess {
            url: self.url.clone(),
            kind: self.kind,
            username: self.config.username.clone(),
            password: secret
                .get("password")
                .and_then(|p| p.as_str())
                .map(Secret::new),
        }
    }
}

/// A helm chart repository of an organization; `config` as a container registry's.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmRepository {
    pub id: HelmRepositoryId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub kind: super::HelmRepositoryKind,
    pub url: String,
    pub description: Option<String>,
    pub skip_tls_verification: bool,
    pub config: RegistryConfig,
    /// The secret members of `config`, as a JSON object serialized to text.
    pub secret_config: Secret,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}
record!(
    HelmRepository,
    HelmRepositoryId,
    OrganizationId,
    "helm repository"
);

impl HelmRepository {
    /// Its address as answers show it: without the credentials a repository stored before
    /// they were refused in addresses may still hold (they are the config's to carry).
    pub fn shown_url(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
                // Both only fail for URLs that cannot have credentials at all.
                let _ = u.set_username("");
                let _ = u.set_password(None);
                u.to_string()
            }
            _ => self.url.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct GitToken {
    pub id: GitTokenId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub description: Option<String>,
    pub provider: GitProvider,
    pub token: Secret,
    pub workspace: Option<String>,
    pub git_api_url: Option<String>,
    /// The day it stops working, when its client said: providers tell no one else, and
    /// Capstan does not send the token to them to ask.
    pub expired_at: Option<Date>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}
record!(GitToken, GitTokenId, OrganizationId, "git token");

/// A git token's expiry as a client gives it: a day (`2026-12-31`, the public `format: date`)
/// or a date-time (RFC 3339), of which the day in UTC is kept.
pub fn expiry_date(field: &str, text: &str) -> Result<Date, crate::error::DomainError> {
    let text = text.trim();
    let day = time::macros::format_description!("[year]-[month]-[day]");
    Date::parse(text, &day)
        .or_else(|_| {
            OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .map(|t| t.to_offset(time::UtcOffset::UTC).date())
        })
        .map_err(|_| crate::error::DomainError::invalid(field, "must be a date like 2026-12-31"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repository(url: &str) -> HelmRepository {
        let now = OffsetDateTime::UNIX_EPOCH;
        HelmRepository {
            id: HelmRepositoryId::generate(),
            organization_id: OrganizationId::generate(),
            name: super::super::Name::parse("name", "charts").unwrap(),
            kind: super::super::HelmRepositoryKind::Https,
            url: url.into(),
            description: None,
            skip_tls_verification: false,
            config: RegistryConfig::default(),
            secret_config: Secret::new("{}"),
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn a_helm_repository_never_shows_credentials_its_address_held() {
        assert_eq!(
            repository("https://bob:hunter2@charts.example/stable").shown_url(),
            "https://charts.example/stable"
        );
        assert_eq!(
            repository("https://token@charts.example/").shown_url(),
            "https://charts.example/"
        );
        assert_eq!(
            repository("oci://charts.example/stable").shown_url(),
            "oci://charts.example/stable"
        );
    }
}
