//! Cloud provider credentials (cloudA access keys).

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::{CredentialsId, OrganizationId};
use crate::model::{CloudCredentials, Organization};
use crate::pagination::{Page, PageRequest};
use crate::ports::Scope;
use crate::secret::Secret;
use crate::validate;
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CredentialsInput {
    pub name: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
}

/// An edit; the secret is kept when not sent again.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CredentialsUpdate {
    pub name: String,
    pub access_key_id: String,
    #[serde(default)]
    pub secret_access_key: Option<Secret>,
}

impl Capstan {
    pub async fn create_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: CredentialsInput,
    ) -> DomainResult<CloudCredentials> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::Organization(org)).await?;
        self.load::<Organization>(tx, p, org, Action::Write).await?;
        let now = self.now();
        let creds = CloudCredentials {
            id: CredentialsId::generate(),
            organization_id: org,
            name: validate::name("name", &input.name)?,
            access_key_id: validate::required_text("access_key_id", &input.access_key_id)?,
            secret_access_key: Secret::new(validate::required_text(
                "secret_access_key",
                input.secret_access_key.expose(),
            )?),
            created_at: now,
            updated_at: now,
        };
        self.insert(tx, &creds, "organization").await?;
        unit.commit().await?;
        Ok(creds)
    }

    pub async fn list_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<CloudCredentials>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        self.list(tx, org, page).await
    }

    pub async fn get_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: CredentialsId,
    ) -> DomainResult<CloudCredentials> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_in_org(tx, p, org, id, Action::Read).await
    }

    pub async fn update_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: CredentialsId,
        input: CredentialsUpdate,
    ) -> DomainResult<CloudCredentials> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::Organization(org)).await?;
        let mut creds: CloudCredentials = self.load_in_org(tx, p, org, id, Action::Write).await?;
        creds.name = validate::name("name", &input.name)?;
        creds.access_key_id = validate::required_text("access_key_id", &input.access_key_id)?;
        if let Some(secret) = input.secret_access_key {
            creds.secret_access_key = Secret::new(validate::required_text(
                "secret_access_key",
                secret.expose(),
            )?);
        }
        creds.updated_at = self.now();
        self.update(tx, &creds, "organization").await?;
        unit.commit().await?;
        Ok(creds)
    }

    pub async fn delete_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: CredentialsId,
    ) -> DomainResult<()> {
        let mut unit = self.writing().await?;
        let tx = &mut *unit;
        tx.lock(Scope::Organization(org)).await?;
        self.load_in_org::<CloudCredentials>(tx, p, org, id, Action::Write)
            .await?;
        self.delete::<CloudCredentials>(tx, id, "clusters").await?;
        Ok(unit.commit().await?)
    }
}
