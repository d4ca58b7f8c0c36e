//! The users of an organization (JWT subjects) and the invitations waiting for new ones.

use super::Record;
use crate::auth::Role;
use crate::ids::{InvitationId, OrganizationId};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// A user of an organization and its role there.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub organization_id: OrganizationId,
    /// The JWT subject.
    pub user_id: String,
    pub role: Role,
    /// The address the user was invited at, when it joined through an invitation.
    pub email: Option<String>,
    /// The member who owns the organization (at most one): an ADMIN who cannot be removed or
    /// demoted until ownership is transferred.
    pub owner: bool,
    pub created_at: OffsetDateTime,
}

impl Member {
    /// The member's id as the API shows it: the user id when it is a UUID, else a UUID derived
    /// from it (stable, so it names the member in later requests).
    pub fn id(&self) -> Uuid {
        member_id(&self.user_id)
    }

    /// Whether `user` (a user id or a member id) names this member.
    pub fn is(&self, user: &str) -> bool {
        self.user_id == user || self.id().to_string() == user.trim().to_ascii_lowercase()
    }
}

pub fn member_id(user_id: &str) -> Uuid {
    Uuid::parse_str(user_id)
        .unwrap_or_else(|_| Uuid::new_v5(&Uuid::NAMESPACE_OID, user_id.as_bytes()))
}

/// How long an invitation can be accepted.
pub const INVITATION_LIFETIME: Duration = Duration::days(7);

#[derive(Debug, Clone, PartialEq)]
pub struct Invitation {
    pub id: InvitationId,
    pub organization_id: OrganizationId,
    pub email: String,
    pub role: Role,
    /// Who invited: a user id, or an API token's name.
    pub inviter: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

impl Record for Invitation {
    type Id = InvitationId;
    type Parent = OrganizationId;
    const KIND: &'static str = "invitation";
    fn id(&self) -> InvitationId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

impl Invitation {
    pub fn expired(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }

    /// The comparison key of its email: one pending invitation per address.
    pub fn email_key(&self) -> String {
        self.email.trim().to_lowercase()
    }
}
