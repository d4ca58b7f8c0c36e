//! Cloud provider credentials: what each provider's hold, as requests send them and as stored.
//! The secret part (an access key's secret) is kept apart, encrypted at rest, never shown.

use super::{CloudProvider, Record};
use crate::error::DomainError;
use crate::ids::{CredentialsId, OrganizationId};
use crate::secret::Secret;
use crate::validate;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct CloudCredentials {
    pub id: CredentialsId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub details: CredentialsDetails,
    /// Empty for kinds without a secret (a role, a tenant).
    pub secret: Secret,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for CloudCredentials {
    type Id = CredentialsId;
    type Parent = OrganizationId;
    const KIND: &'static str = "credentials";
    fn id(&self) -> CredentialsId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The public members of credentials, by kind (the stored and the shown form).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "object_type")]
pub enum CredentialsDetails {
    /// An access key (its secret apart).
    #[serde(rename = "CLOUDA")]
    CloudAStatic { access_key_id: String },
    /// A role Capstan assumes.
    #[serde(rename = "CLOUDA_ROLE")]
    CloudARole { role_arn: String },
    #[serde(rename = "ALTCLOUD")]
    AltCloud {
        altcloud_access_key: String,
        altcloud_project_id: String,
        altcloud_organization_id: String,
    },
    /// A tenant's subscription; the application registered in it, once known.
    #[serde(rename = "CLOUDC")]
    CloudC {
        #[serde(rename = "cloudC_subscription_id")]
        subscription_id: String,
        #[serde(rename = "cloudC_tenant_id")]
        tenant_id: String,
        #[serde(rename = "cloudC_application_id", default)]
        application_id: String,
        #[serde(rename = "cloudC_application_object_id", default)]
        application_object_id: String,
    },
    /// One's own machines (the public `OTHER` credentials): a name, and, sealed apart, what
    /// reaches their Docker daemons ([`super::DockerAccess`]).
    #[serde(rename = "OTHER")]
    OnPremise {},
}

impl CredentialsDetails {
    pub fn provider(&self) -> CloudProvider {
        match self {
            Self::CloudAStatic { .. } | Self::CloudARole { .. } => CloudProvider::CloudA,
            Self::AltCloud { .. } => CloudProvider::AltCloud,
            Self::CloudC { .. } => CloudProvider::CloudC,
            Self::OnPremise {} => CloudProvider::OnPremise,
        }
    }
}

/// What a create or edit request sends, per provider (`/organization/{id}/{provider}/credentials`).
/// CLOUDA: an access key (`type` AWS_STATIC, the default) or a role (CLOUDA_ROLE).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CloudACredentialsInput {
    pub name: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub access_key_id: Option<String>,
    #[serde(default)]
    pub secret_access_key: Option<Secret>,
    #[serde(default)]
    pub role_arn: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct AltCloudCredentialsInput {
    pub name: String,
    pub altcloud_access_key: String,
    #[serde(default)]
    pub altcloud_secret_key: Option<Secret>,
    pub altcloud_project_id: String,
    pub altcloud_organization_id: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
#[allow(non_snake_case)]
pub struct CloudCCredentialsInput {
    pub name: String,
    pub cloudC_subscription_id: String,
    pub cloudC_tenant_id: String,
    #[serde(default)]
    pub cloudC_application_id: Option<String>,
    #[serde(default)]
    pub cloudC_application_object_id: Option<String>,
}

/// ON_PREMISE: a name (the public request), and what reaches the Docker daemons of the
/// clusters naming these credentials (Capstan's addition; sealed, never answered): a TLS
/// client's authority, certificate and key for a `tcp://` endpoint, a private key for `ssh://`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct OnPremiseCredentialsInput {
    pub name: String,
    #[serde(default)]
    pub docker_tls: Option<super::DockerTls>,
    #[serde(default)]
    pub ssh_private_key: Option<Secret>,
    #[serde(default)]
    pub ssh_host_key: Option<String>,
}

/// A validated request: the name, the public members, and the secret when one was sent (an
/// edit that sends none keeps the stored one).
#[derive(Debug)]
pub struct CredentialsDraft {
    pub name: super::Name,
    pub details: CredentialsDetails,
    pub secret: Option<Secret>,
}

fn text(field: &str, value: Option<String>) -> Result<String, DomainError> {
    match value {
        None => Err(DomainError::invalid(field, "is required")),
        Some(v) => validate::required_text(field, &v),
    }
}

fn secret(field: &str, value: Option<Secret>) -> Result<Option<Secret>, DomainError> {
    value
        .map(|s| validate::required_text(field, s.expose()).map(Secret::new))
        .transpose()
}

impl CredentialsDraft {
    /// Reads the request body of `provider`'s credentials. A new access key needs its secret;
    /// an edit may leave it out.
    pub fn parse(
        provider: CloudProvider,
        body: &serde_json::Value,
        creating: bool,
    ) -> Result<Self, DomainError> {
        let draft = match provider {
            CloudProvider::CloudA => {
                let i: CloudACredentialsInput = super::from_json(body)?;
                let name = validate::name("name", &i.name)?;
                match i.kind.as_deref().unwrap_or("AWS_STATIC") {
                    "AWS_STATIC" => Self {
                        name,
                        details: CredentialsDetails::CloudAStatic {
                            access_key_id: text("access_key_id", i.access_key_id)?,
                        },
                        secret: secret("secret_access_key", i.secret_access_key)?,
                    },
                    "CLOUDA_ROLE" => Self {
                        name,
                        details: CredentialsDetails::CloudARole {
                            role_arn: text("role_arn", i.role_arn)?,
                        },
                        secret: Some(Secret::new("")),
                    },
                    _ => {
                        return Err(DomainError::invalid(
                            "type",
                            "must be AWS_STATIC or CLOUDA_ROLE",
                        ))
                    }
                }
            }
            CloudProvider::AltCloud => {
                let i: AltCloudCredentialsInput = super::from_json(body)?;
                Self {
                    name: validate::name("name", &i.name)?,
                    details: CredentialsDetails::AltCloud {
                        altcloud_access_key: text(
                            "altcloud_access_key",
                            Some(i.altcloud_access_key),
                        )?,
                        altcloud_project_id: text(
                            "altcloud_project_id",
                            Some(i.altcloud_project_id),
                        )?,
                        altcloud_organization_id: text(
                            "altcloud_organization_id",
                            Some(i.altcloud_organization_id),
                        )?,
                    },
                    secret: secret("altcloud_secret_key", i.altcloud_secret_key)?,
                }
            }
            CloudProvider::CloudC => {
                let i: CloudCCredentialsInput = super::from_json(body)?;
                Self {
                    name: validate::name("name", &i.name)?,
                    details: CredentialsDetails::CloudC {
                        subscription_id: text(
                            "cloudC_subscription_id",
                            Some(i.cloudC_subscription_id),
                        )?,
                        tenant_id: text("cloudC_tenant_id", Some(i.cloudC_tenant_id))?,
                        application_id: i.cloudC_application_id.unwrap_or_default(),
                        application_object_id: i.cloudC_application_object_id.unwrap_or_default(),
                    },
                    secret: Some(Secret::new("")),
                }
            }
            CloudProvider::OnPremise => {
                let i: OnPremiseCredentialsInput = super::from_json(body)?;
                let sent = i.docker_tls.is_some()
                    || i.ssh_private_key.is_some()
                    || i.ssh_host_key.is_some();
                let access = super::DockerAccess {
                    tls: i.docker_tls,
                    ssh_private_key: i.ssh_private_key,
                    ssh_host_key: i.ssh_host_key,
                }
                .validate()?;
                Self {
                    name: validate::name("name", &i.name)?,
                    details: CredentialsDetails::OnPremise {},
                    // Nothing sent: a new set reaches only daemons that need nothing (a
                    // socket here), an edit keeps what it had.
                    secret: (sent || creating).then(|| access.seal()),
                }
            }
        };
        if creating && draft.secret.is_none() {
            let field = match provider {
                CloudProvider::AltCloud => "altcloud_secret_key",
                _ => "secret_access_key",
            };
            return Err(DomainError::invalid(field, "is required"));
        }
        Ok(draft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_provider_reads_its_own_body() {
        let a = CredentialsDraft::parse(
            CloudProvider::CloudA,
            &json!({"name": "k", "access_key_id": "AKIA", "secret_access_key": "s"}),
            true,
        )
        .unwrap();
        assert_eq!(
            a.details,
            CredentialsDetails::CloudAStatic {
                access_key_id: "AKIA".into()
            }
        );
        let role = CredentialsDraft::parse(
            CloudProvider::CloudA,
            &json!({"type": "CLOUDA_ROLE", "name": "r", "role_arn": "arn:x"}),
            true,
        )
        .unwrap();
        assert_eq!(role.details.provider(), CloudProvider::CloudA);
        let c = CredentialsDraft::parse(
            CloudProvider::CloudC,
            &json!({"name": "c", "cloudC_subscription_id": "s", "cloudC_tenant_id": "t"}),
            true,
        )
        .unwrap();
        let shown = serde_json::to_value(&c.details).unwrap();
        assert_eq!(shown["object_type"], "CLOUDC");
        assert_eq!(shown["cloudC_application_id"], "");
        for (provider, body, field) in [
            (
                CloudProvider::CloudA,
                json!({"name": "k", "access_key_id": "AKIA"}),
                "secret_access_key",
            ),
            (
                CloudProvider::CloudA,
                json!({"type": "EKS_ANYWHERE_VSPHERE_ROLE", "name": "k"}),
                "type",
            ),
            (
                CloudProvider::AltCloud,
                json!({"name": "k", "altcloud_access_key": "a", "altcloud_project_id": "p",
                       "altcloud_organization_id": "o"}),
                "altcloud_secret_key",
            ),
            (
                CloudProvider::CloudC,
                json!({"name": "k", "cloudC_subscription_id": "s"}),
                "cloudC_tenant_id",
            ),
        ] {
            let err = CredentialsDraft::parse(provider, &body, true).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }
}
