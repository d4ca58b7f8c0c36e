//! Organizations, API tokens, roles and authentication.

use super::Capstan;
use crate::auth::{self, Action, Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::ids::{ApiTokenId, OrganizationId, RoleId};
use crate::model::EventType;
use crate::model::{member_id, ApiToken, Organization, OrganizationPlan};
use crate::pagination::{Page, PageRequest};
use crate::ports::Repo;
use crate::ports::{Scope, Unit};
use crate::validate;
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct OrganizationUpdate {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub plan: Option<OrganizationPlan>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ApiTokenInput {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub role_id: RoleId,
}

/// An organization with its owner: the member id of the user who owns it, absent for an
/// organization no user owns yet (one made with `capstan token create`, until
/// `transferOwnership` names one).
#[derive(Debug, Clone)]
pub struct OrganizationDetails {
    pub organization: Organization,
    pub owner: Option<uuid::Uuid>,
}

/// A token just created: the record and, this once, its value.
#[derive(Debug)]
pub struct NewApiToken {
    pub token: ApiToken,
    pub value: String,
}

impl Capstan {
    /// Resolves `Authorization: Token <value>` to a principal.
    pub async fn authenticate_api_token(&self, value: &str) -> DomainResult<Principal> {
        // The lookup is by the SHA-256 of the value, so its timing says nothing of the value;
        // the match is confirmed in constant time all the same.
        let hash = auth::hash_token(value.trim());
        let token = self
            .store
            .find_token_by_hash(&hash)
            .await?
            .filter(|t| auth::same_hash(&t.token_hash, &hash))
            .ok_or_else(|| DomainError::Unauthenticated("invalid API token".into()))?;
        Ok(Principal::token(
            token.id,
            token.organization_id,
            token.role,
        ))
    }

    pub(super) fn new_token(
        &self,
        organization_id: OrganizationId,
        name: &str,
        description: Option<String>,
        role: Role,
    ) -> DomainResult<NewApiToken> {
        let value = auth::generate_token();
        let now = self.now();
        let token = ApiToken {
            id: ApiTokenId::generate(),
            organization_id,
            name: validate::name("name", name)?,
            description: validate::description("description", description)?,
            role,
            token_hash: auth::hash_token(&value),
            created_at: now,
            updated_at: now,
            last_used_at: None,
        };
        Ok(NewApiToken { token, value })
    }

    /// Resolves a verified JWT's subject to a principal with the user's memberships.
    pub async fn authenticate_user(&self, subject: &str) -> DomainResult<Principal> {
        if subject.is_empty() || subject.len() > 255 {
            return Err(DomainError::Unauthenticated(
                "the JWT's sub must be 1 to 255 characters".into(),
            ));
        }
        Ok(Principal {
            subject: Subject::User(subject.to_string()),
            memberships: self.reading().await?.memberships(subject).await?,
            origin: crate::model::Origin::Api,
            user_agent: None,
        })
    }

    /// `POST /organization`: a signed-in user creates an organization and becomes its ADMIN.
    pub async fn create_organization(
        &self,
        p: &Principal,
        input: OrganizationUpdate,
    ) -> DomainResult<OrganizationDetails> {
        let Subject::User(user) = &p.subject else {
            return Err(DomainError::Forbidden(
                "API tokens cannot create organizations; a signed-in user (Bearer JWT) or `capstan token create` can".into(),
            ));
        };
        let now = self.now();
        let org = Organization {
            id: OrganizationId::generate(),
            name: validate::name("name", &input.name)?,
            description: validate::description("description", input.description)?,
            plan: input.plan.unwrap_or(OrganizationPlan::Free),
            created_at: now,
            updated_at: now,
        };
        self.in_unit(&[], async |tx| {
            self.insert(tx, &org, "installation").await?;
            tx.put_member(org.id, user, Role::Admin, now).await?;
            tx.set_owner(org.id, user).await?;
            self.audit(tx, p, EventType::Create, &org).await?;
            Ok(OrganizationDetails {
                organization: org,
                owner: Some(member_id(user)),
            })
        })
        .await
    }

    /// Each organization with its owner.
    async fn organization_details(
        &self,
        tx: &mut Unit,
        organizations: Vec<Organization>,
    ) -> DomainResult<Vec<OrganizationDetails>> {
        let ids: Vec<OrganizationId> = organizations.iter().map(|o| o.id).collect();
        let owners = tx.owners(&ids).await?;
        Ok(organizations
            .into_iter()
            .map(|organization| OrganizationDetails {
                owner: owners.get(&organization.id).map(|u| member_id(u)),
                organization,
            })
            .collect())
    }

    async fn one_organization(
        &self,
        tx: &mut Unit,
        organization: Organization,
    ) -> DomainResult<OrganizationDetails> {
        self.organization_details(tx, vec![organization])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("organization vanished".into()))
    }

    /// Command line: adds a user (a JWT subject) to an organization with a role.
    pub async fn add_member(
        &self,
        organization_id: OrganizationId,
        user: &str,
        role: Role,
    ) -> DomainResult<()> {
        if user.trim().is_empty() || user.len() > 255 {
            return Err(DomainError::invalid(
                "user-id",
                "must be 1 to 255 characters",
            ));
        }
        self.in_unit(&[Scope::Organization(organization_id)], async |tx| {
            Repo::<Organization>::get(tx, organization_id)
                .await?
                .ok_or(DomainError::NotFound("organization"))?;
            tx.put_member(organization_id, user.trim(), role, self.now())
                .await?;
            Ok(())
        })
        .await
    }

    /// Command-line bootstrap: a new organization and a first token in it, in one transaction.
    pub async fn bootstrap_organization(
        &self,
        organization_name: &str,
        role: Role,
        token_name: &str,
    ) -> DomainResult<(Organization, NewApiToken)> {
        let now = self.now();
        let org = Organization {
            id: OrganizationId::generate(),
            name: validate::name("organization-name", organization_name)?,
            description: None,
            plan: OrganizationPlan::Free,
            created_at: now,
            updated_at: now,
        };
        let token = self.new_token(org.id, token_name, None, role)?;
        self.in_unit(&[], async |tx| {
            self.insert(tx, &org, "installation").await?;
            Repo::<ApiToken>::insert(tx, &token.token).await?;
            Ok((org, token))
        })
        .await
    }

    /// Command-line: a further token in an existing organization.
    pub async fn issue_token(
        &self,
        organization_id: OrganizationId,
        role: Role,
        token_name: &str,
    ) -> DomainResult<NewApiToken> {
        let token = self.new_token(organization_id, token_name, None, role)?;
        self.in_unit(&[Scope::Organization(organization_id)], async |tx| {
            Repo::<Organization>::get(tx, organization_id)
                .await?
                .ok_or(DomainError::NotFound("organization"))?;
            Repo::<ApiToken>::insert(tx, &token.token).await?;
            Ok(token)
        })
        .await
    }

    pub async fn list_organizations(
        &self,
        p: &Principal,
        page: PageRequest,
    ) -> DomainResult<Page<OrganizationDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let mut own = Repo::<Organization>::get_many(tx, &p.organizations()).await?;
        own.sort_by_key(|o| (o.created_at, o.id));
        let page = Page::from_vec(own, page);
        Ok(Page {
            items: self.organization_details(tx, page.items).await?,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_organization(
        &self,
        p: &Principal,
        id: OrganizationId,
    ) -> DomainResult<OrganizationDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let org = self.load(tx, p, id, Action::ReadOrganization).await?;
        self.one_organization(tx, org).await
    }

    pub async fn update_organization(
        &self,
        p: &Principal,
        id: OrganizationId,
        input: OrganizationUpdate,
    ) -> DomainResult<OrganizationDetails> {
        self.in_unit(&[Scope::Organization(id)], async |tx| {
            let mut org: Organization = self.load(tx, p, id, Action::Administer).await?;
            org.name = validate::name("name", &input.name)?;
            org.description = validate::description("description", input.description)?;
            if let Some(plan) = input.plan {
                org.plan = plan;
            }
            org.updated_at = self.now();
            Repo::<Organization>::update(tx, &org).await?;
            self.audit(tx, p, EventType::Update, &org).await?;
            let out = self.one_organization(tx, org).await?;
            Ok(out)
        })
        .await
    }

    /// Deletes the organization and everything in it.
    pub async fn delete_organization(&self, p: &Principal, id: OrganizationId) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(id)], async |tx| {
            self.load::<Organization>(tx, p, id, Action::Administer)
                .await?;
            // Its events, webhooks and deliveries go with it: held against the sequencer (which
            // positions events and routes them to webhooks row by row), so the two cannot
            // deadlock on those rows.
            tx.lock(Scope::EventLog).await?;
            self.delete::<Organization>(tx, id, "other resources")
                .await?;
            tx.forget_events(id).await?;
            Ok(())
        })
        .await
    }

    pub async fn available_roles(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<Role>> {
        let mut tx = self.reading().await?;
        self.load::<Organization>(&mut *tx, p, org, Action::ReadOrganization)
            .await?;
        Ok(Role::ALL.to_vec())
    }

    pub async fn create_api_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: ApiTokenInput,
    ) -> DomainResult<NewApiToken> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Administer)
                .await?;
            let role = Role::from_id(input.role_id).ok_or_else(|| {
                DomainError::invalid(
                    "role_id",
                    "must be the id of a role listed by availableRole",
                )
            })?;
            // Counted under the organization's lock: two creations cannot both take the last place.
            let held = Repo::<ApiToken>::list(tx, org, PageRequest::new(1, 1)?)
                .await?
                .total_count;
            if held >= self.max_api_tokens {
                return Err(DomainError::state(format!(
                    "the organization already holds {held} API tokens, the most it may hold \
                     (CAPSTAN_MAX_API_TOKENS); delete one first"
                )));
            }
            let token = self.new_token(org, &input.name, input.description, role)?;
            Repo::<ApiToken>::insert(tx, &token.token).await?;
            self.audit(tx, p, EventType::Create, &token.token).await?;
            Ok(token)
        })
        .await
    }

    pub async fn list_api_tokens(
        &self,
        p: &Principal,
        org: OrganizationId,
        page: PageRequest,
    ) -> DomainResult<Page<ApiToken>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        // "ADMIN: DEVOPS plus API tokens": even their names and roles are the admins' business.
        self.load::<Organization>(tx, p, org, Action::Administer)
            .await?;
        self.list::<ApiToken>(tx, org, page).await
    }

    /// Revokes a token; it stops working on its next request.
    pub async fn delete_api_token(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: ApiTokenId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Administer)
                .await?;
            let token: ApiToken = self.load(tx, p, id, Action::Administer).await?;
            if token.organization_id != org {
                return Err(DomainError::NotFound("API token"));
            }
            self.audit(tx, p, EventType::Delete, &token).await?;
            self.delete::<ApiToken>(tx, id, "nothing").await?;
            Ok(())
        })
        .await
    }
}
