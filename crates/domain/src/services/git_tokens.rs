//! Git tokens of an organization, used by services to reach private repositories.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{GitTokenId, OrganizationId};
use crate::model::EventType;
use crate::model::{expiry_date, GitProvider, GitToken, Organization};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Scope, ServiceLink, Unit};
use crate::secret::Secret;
use crate::validate;
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct GitTokenInput {
    pub name: String,
    #[serde(rename = "type")]
    pub provider: GitProvider,
    /// Required on creation; on edit, the stored value is kept when absent.
    #[serde(default)]
    pub token: Option<Secret>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub workspace: Option<String>,
    #[serde(default)]
    pub git_api_url: Option<String>,
    /// When the token expires (a date), as its provider told the client. Not in the public
    /// request: a client that knows it may send it. On edit, absent keeps the stored day
    /// unless a new `token` is sent (that value's expiry is not known then).
    #[serde(default)]
    pub expired_at: Option<String>,
}

#[derive(Debug, Clone)]
pub struct GitTokenDetails {
    pub token: GitToken,
    pub associated_services_count: u64,
}

/// Where a token is sent: its API address, or its provider's public one.
fn api_address(provider: GitProvider, git_api_url: Option<&str>) -> String {
    git_api_url
        .unwrap_or_else(|| crate::git::default_api_url(provider))
        .trim()
        .trim_end_matches('/')
        .to_ascii_lowercase()
}

fn token_value(secret: &Secret) -> DomainResult<Secret> {
    if secret.expose().trim().is_empty() {
        return Err(DomainError::invalid("token", "must not be empty"));
    }
    Ok(secret.clone())
}

impl Capstan {
    async fn git_token_details(
        &self,
        tx: &mut Unit,
        tokens: Vec<GitToken>,
    ) -> DomainResult<Vec<GitTokenDetails>> {
        let ids: Vec<uuid::Uuid> = tokens.iter().map(|t| t.id.0).collect();
        let counts = tx.count_services_by(ServiceLink::GitToken, &ids).await?;
        Ok(tokens
            .into_iter()
            .map(|token| GitTokenDetails {
                associated_services_count: counts.get(&token.id.0).copied().unwrap_or(0),
                token,
            })
            .collect())
    }

    async fn one_git_token(&self, tx: &mut Unit, token: GitToken) -> DomainResult<GitTokenDetails> {
        self.git_token_details(tx, vec![token])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("git token vanished".into()))
    }

    pub async fn create_git_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: GitTokenInput,
    ) -> DomainResult<GitTokenDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Write).await?;
            let value = input
                .token
                .as_ref()
                .ok_or_else(|| DomainError::invalid("token", "is required"))
                .and_then(token_value)?;
            let now = self.now();
            let token = GitToken {
                id: GitTokenId::generate(),
                organization_id: org,
                name: validate::name("name", &input.name)?,
                description: validate::description("description", input.description)?,
                provider: input.provider,
                token: value,
                workspace: input.workspace,
                git_api_url: input
                    .git_api_url
                    .map(|u| validate::http_url("git_api_url", &u).map(|_| u))
                    .transpose()?,
                expired_at: input
                    .expired_at
                    .map(|d| expiry_date("expired_at", &d))
                    .transpose()?,
                created_at: now,
                updated_at: now,
            };
            self.insert(tx, &token, "organization").await?;
            self.audit(tx, p, EventType::Create, &token).await?;
            Ok(GitTokenDetails {
                token,
                associated_services_count: 0,
            })
        })
        .await
    }

    pub async fn list_git_tokens(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<GitTokenDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let page = self.list::<GitToken>(tx, org, page).await?;
        let items = self.git_token_details(tx, page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_git_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: GitTokenId,
    ) -> DomainResult<GitTokenDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let token = self.load_in_org(tx, p, org, id, Action::Read).await?;
        self.one_git_token(tx, token).await
    }

    pub async fn update_git_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: GitTokenId,
        input: GitTokenInput,
    ) -> DomainResult<GitTokenDetails> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut token: GitToken = self.load_in_org(tx, p, org, id, Action::Write).await?;
            let git_api_url = input
                .git_api_url
                .map(|u| validate::http_url("git_api_url", &u).map(|_| u))
                .transpose()?;
            // Whoever may edit the token may not have it: sending it to a new address takes it.
            let moved = input.provider != token.provider
                || api_address(input.provider, git_api_url.as_deref())
                    != api_address(token.provider, token.git_api_url.as_deref());
            if moved && input.token.is_none() {
                return Err(DomainError::invalid(
                    "token",
                    "is required when type or git_api_url changes: the stored token is never sent to a new address",
                ));
            }
            token.name = validate::name("name", &input.name)?;
            token.description = validate::description("description", input.description)?;
            token.provider = input.provider;
            token.expired_at = match (input.expired_at, &input.token) {
                (Some(day), _) => Some(expiry_date("expired_at", &day)?),
                (None, Some(_)) => None,
                (None, None) => token.expired_at,
            };
            if let Some(value) = &input.token {
                token.token = token_value(value)?;
            }
            token.workspace = input.workspace;
            token.git_api_url = git_api_url;
            token.updated_at = self.now();
            self.update(tx, &token, "organization").await?;
            self.audit(tx, p, EventType::Update, &token).await?;
            let out = self.one_git_token(tx, token).await?;
            Ok(out)
        })
        .await
    }

    /// Refused (409) while services use the token.
    pub async fn delete_git_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: GitTokenId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let token: GitToken = self.load_in_org(tx, p, org, id, Action::Write).await?;
            self.audit(tx, p, EventType::Delete, &token).await?;
            self.delete::<GitToken>(tx, id, "services").await
        })
        .await
    }
}
