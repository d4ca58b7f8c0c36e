use super::{OrganizationPlan, Record};
use crate::auth::Role;
use crate::ids::{ApiTokenId, OrganizationId};
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct Organization {
    pub id: OrganizationId,
    pub name: super::Name,
    pub description: Option<String>,
    pub plan: OrganizationPlan,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for Organization {
    type Id = OrganizationId;
    type Parent = ();
    const KIND: &'static str = "organization";
    fn id(&self) -> OrganizationId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.id
    }
}

/// An API token. Only its hash is kept; the value is shown once, at creation.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: ApiTokenId,
    pub organization_id: OrganizationId,
    pub name: super::Name,
    pub description: Option<String>,
    pub role: Role,
    pub token_hash: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

impl Record for ApiToken {
    type Id = ApiTokenId;
    type Parent = OrganizationId;
    const KIND: &'static str = "API token";
    fn id(&self) -> ApiTokenId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}
