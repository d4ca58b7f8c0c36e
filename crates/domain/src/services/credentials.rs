//! Cloud provider credentials of the three providers: one path, the provider named by the route.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{CredentialsId, OrganizationId};
use crate::model::EventType;
use crate::model::{CloudCredentials, CloudProvider, Cluster, CredentialsDraft, Organization};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, Unit};
use crate::secret::Secret;
use std::mem::discriminant;

impl Capstan {
    pub async fn create_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        body: &serde_json::Value,
    ) -> DomainResult<CloudCredentials> {
        let draft = CredentialsDraft::parse(provider, body, true)?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let now = self.now();
            let creds = CloudCredentials {
                id: CredentialsId::generate(),
                organization_id: org,
                name: draft.name,
                details: draft.details,
                secret: draft.secret.unwrap_or_else(|| Secret::new("")),
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &creds, "organization").await?;
            self.audit(tx, p, EventType::Create, &creds).await?;
            Ok(creds)
        })
        .await
    }

    /// The organization's credentials of one provider, or of all three.
    pub async fn list_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        provider: Option<CloudProvider>,
        page: PageRequest,
    ) -> DomainResult<Page<CloudCredentials>> {
        let mut unit = self.reading().await?;
        self.credentials_in(&mut *unit, p, org, provider, page)
            .await
    }

    async fn credentials_in(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        provider: Option<CloudProvider>,
        page: PageRequest,
    ) -> DomainResult<Page<CloudCredentials>> {
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        // An organization holds a handful of credentials: all are read and the page cut here.
        let all: Page<CloudCredentials> = self.list(tx, org, PageRequest::all()).await?;
        let matching: Vec<CloudCredentials> = all
            .items
            .into_iter()
            .filter(|c| provider.is_none_or(|wanted| c.details.provider() == wanted))
            .collect();
        Ok(Page::from_vec(matching, page))
    }

    /// Every provider's credentials, each with the clusters that use them (one unit).
    pub async fn credentials_with_clusters(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<(CloudCredentials, Vec<Cluster>)>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let page = self.credentials_in(tx, p, org, None, page).await?;
        let clusters: Page<Cluster> = self.list(tx, org, PageRequest::all()).await?;
        Ok(page.map(|creds| {
            let users = clusters
                .items
                .iter()
                .filter(|c| {
                    c.spec
                        .cloud_provider_credentials
                        .as_ref()
                        .is_some_and(|r| r.credentials.id == creds.id)
                })
                .cloned()
                .collect();
            (creds, users)
        }))
    }

    /// Credentials of `provider` (another provider's are not found at its route).
    async fn credentials_of(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        id: CredentialsId,
        action: Action,
    ) -> DomainResult<CloudCredentials> {
        let creds: CloudCredentials = self.load_in_org(tx, p, org, id, action).await?;
        if creds.details.provider() != provider {
            return Err(DomainError::NotFound("credentials"));
        }
        Ok(creds)
    }

    pub async fn get_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        id: CredentialsId,
    ) -> DomainResult<CloudCredentials> {
        let mut unit = self.reading().await?;
        self.credentials_of(&mut *unit, p, org, provider, id, Action::Read)
            .await
    }

    /// An edit keeps the stored secret when none is sent, unless the kind changes (a role
    /// becoming an access key needs the key's secret).
    pub async fn update_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        id: CredentialsId,
        body: &serde_json::Value,
    ) -> DomainResult<CloudCredentials> {
        let draft = CredentialsDraft::parse(provider, body, false)?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut creds = self
                .credentials_of(tx, p, org, provider, id, Action::Write)
                .await?;
            let same_kind = discriminant(&creds.details) == discriminant(&draft.details);
            creds.secret = match draft.secret {
                Some(secret) => secret,
                None if same_kind => creds.secret,
                None => return Err(DomainError::invalid("secret_access_key", "is required")),
            };
            creds.name = draft.name;
            creds.details = draft.details;
            creds.updated_at = self.now();
            self.update(tx, &creds, "organization").await?;
            self.audit(tx, p, EventType::Update, &creds).await?;
            Ok(creds)
        })
        .await
    }

    pub async fn delete_credentials(
        &self,
        p: &Principal,
        org: OrganizationId,
        provider: CloudProvider,
        id: CredentialsId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let creds = self
                .credentials_of(tx, p, org, provider, id, Action::Write)
                .await?;
            self.audit(tx, p, EventType::Delete, &creds).await?;
            self.delete::<CloudCredentials>(tx, id, "clusters").await?;
            Ok(())
        })
        .await
    }
}
