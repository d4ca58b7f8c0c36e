//! Roles, principals and API token material.

use crate::error::DomainError;
use crate::ids::{ApiTokenId, OrganizationId, RoleId};
use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The four roles of an organization. Their ids are fixed so clients can hard-code them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[cfg_attr(
    feature = "diesel",
    derive(diesel::expression::AsExpression, diesel::deserialize::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
pub enum Role {
    Admin,
    Devops,
    Viewer,
    BillingManager,
}

#[cfg(feature = "diesel")]
text_column!(Role);

/// Its name.
impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name in any case (see [`Role::from_name`]).
impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
            format!("must be one of {}", names.join(", "))
        })
    }
}

impl Role {
    pub const ALL: [Role; 4] = [
        Role::Admin,
        Role::Devops,
        Role::Viewer,
        Role::BillingManager,
    ];

    pub fn id(self) -> RoleId {
        let n: u128 = match self {
            Role::Admin => 1,
            Role::Devops => 2,
            Role::Viewer => 3,
            Role::BillingManager => 4,
        };
        // 7e57ca95-0000-4000-8000-00000000000N: stable, valid v4-shaped ids.
        RoleId(Uuid::from_u128(0x7e57ca95_0000_4000_8000_000000000000 | n))
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "ADMIN",
            Role::Devops => "DEVOPS",
            Role::Viewer => "VIEWER",
            Role::BillingManager => "BILLING_MANAGER",
        }
    }

    pub fn from_id(id: RoleId) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.id() == id)
    }

    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL
            .into_iter()
            .find(|r| r.name().eq_ignore_ascii_case(name))
    }

    /// Whether this role may perform `action`. The one permission table of the product.
    pub fn allows(self, action: Action) -> bool {
        match action {
            Action::ReadOrganization => true,
            Action::Read => !matches!(self, Role::BillingManager),
            Action::Write => matches!(self, Role::Admin | Role::Devops),
            Action::Administer => matches!(self, Role::Admin),
        }
    }
}

/// Classes of operation that roles are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read the organization record itself.
    ReadOrganization,
    /// Read anything else in the organization.
    Read,
    /// Create, edit, delete resources and run deployment actions.
    Write,
    /// API tokens, editing or deleting the organization.
    Administer,
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    ApiToken(ApiTokenId),
    /// A JWT user: the token's `sub`.
    User(String),
}

/// How a subject is named where it acted (`requested_by`) and in rate-limit keys.
impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::ApiToken(id) => write!(f, "token:{id}"),
            Subject::User(id) => write!(f, "user:{id}"),
        }
    }
}

impl Subject {
    /// The subject as a record names who last changed it (`last_updated_by`, a UUID): a
    /// token's id, a user's member id (the one the member list shows).
    pub fn uuid(&self) -> Uuid {
        match self {
            Subject::ApiToken(id) => id.0,
            Subject::User(user) => crate::model::member_id(user),
        }
    }
}

/// An authenticated caller and its role in each organization it belongs to: one for an API
/// token, any number for a user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub subject: Subject,
    pub memberships: Vec<(OrganizationId, Role)>,
    /// Where its requests come from (the API unless its client says otherwise).
    pub origin: crate::model::Origin,
    /// The client's `User-Agent`, as the audit log shows it (at most 256 characters).
    pub user_agent: Option<String>,
}

impl Principal {
    /// The key its requests are metered under: one quota per token or user, whatever
    /// organization a request names.
    pub fn rate_key(&self) -> String {
        self.subject.to_string()
    }

    pub fn token(id: ApiTokenId, organization: OrganizationId, role: Role) -> Self {
        Self {
            subject: Subject::ApiToken(id),
            memberships: vec![(organization, role)],
            origin: crate::model::Origin::Api,
            user_agent: None,
        }
    }

    /// The principal's role in `organization`, if it belongs to it.
    pub fn role_in(&self, organization: OrganizationId) -> Option<Role> {
        self.memberships
            .iter()
            .find(|(o, _)| *o == organization)
            .map(|(_, r)| *r)
    }

    pub fn organizations(&self) -> Vec<OrganizationId> {
        self.memberships.iter().map(|(o, _)| *o).collect()
    }

    /// Allows `action` on a resource of `organization`, or says why not (403).
    pub fn authorize(
        &self,
        organization: OrganizationId,
        action: Action,
    ) -> Result<(), DomainError> {
        let Some(role) = self.role_in(organization) else {
            return Err(DomainError::Forbidden(
                "the resource belongs to another organization".into(),
            ));
        };
        if !role.allows(action) {
            return Err(DomainError::Forbidden(format!(
                "the {} role does not allow this operation",
                role.name()
            )));
        }
        Ok(())
    }
}

const TOKEN_PREFIX: &str = "cap_";

/// Compares two token hashes in time independent of where they differ.
pub fn same_hash(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// A new API token: 32 random bytes, URL-safe, with a recognisable prefix for secret scanners.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// What is stored and looked up instead of the token. The token carries 256 bits of entropy, so a
/// fast hash is enough and keeps each request's lookup cheap (an indexed equality match).
pub fn hash_token(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    crate::hex::encode(&digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_ids_are_fixed_and_distinct() {
        let ids: std::collections::HashSet<_> = Role::ALL.iter().map(|r| r.id()).collect();
        assert_eq!(ids.len(), 4);
        assert_eq!(
            Role::Admin.id().to_string(),
            "7e57ca95-0000-4000-8000-000000000001"
        );
        for r in Role::ALL {
            assert_eq!(Role::from_id(r.id()), Some(r));
            assert_eq!(Role::from_name(&r.name().to_lowercase()), Some(r));
        }
    }

    #[test]
    fn permission_table() {
        use Action::*;
        let table = [
            (Role::Admin, [true, true, true, true]),
            (Role::Devops, [true, true, true, false]),
            (Role::Viewer, [true, true, false, false]),
            (Role::BillingManager, [true, false, false, false]),
        ];
        for (role, expected) in table {
            let got = [ReadOrganization, Read, Write, Administer].map(|a| role.allows(a));
            assert_eq!(got, expected, "{role:?}");
        }
    }

    #[test]
    fn other_organization_is_forbidden() {
        let org = OrganizationId::generate();
        let p = Principal::token(ApiTokenId::generate(), org, Role::Admin);
        assert!(p.authorize(org, Action::Administer).is_ok());
        assert!(matches!(
            p.authorize(OrganizationId::generate(), Action::Read),
            Err(DomainError::Forbidden(_))
        ));
    }

    #[test]
    fn tokens_are_long_random_and_hashed() {
        let a = generate_token();
        let b = generate_token();
        assert_ne!(a, b);
        assert!(a.starts_with("cap_") && a.len() >= 4 + 43);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert_eq!(hash_token(&a).len(), 64);
    }
}
