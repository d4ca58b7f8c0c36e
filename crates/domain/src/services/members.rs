//! Members of an organization, the invitations that bring new ones, and ownership.

use super::Capstan;
use crate::auth::{Action, Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::ids::{InvitationId, OrganizationId, RoleId};
use crate::model::{EventType, SubTargetType};
use crate::model::{Invitation, Member, Organization, INVITATION_LIFETIME};
use crate::ports::{Repo, Scope, Unit};
use serde::Deserialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct InviteInput {
    pub email: String,
    /// ADMIN, DEVELOPER or VIEWER (the public names); `role_id` wins when both are sent.
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub role_id: Option<RoleId>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct RoleChange {
    /// The user id, or the member's id as listed.
    pub user_id: String,
    pub role_id: RoleId,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct MemberRef {
    /// The user id, or the member's id as listed.
    pub user_id: String,
}

/// An invitation with what the API shows around it.
#[derive(Debug, Clone)]
pub struct InvitationDetails {
    pub invitation: Invitation,
    /// Where the invited user accepts it (POST).
    pub link: String,
    pub organization_name: String,
    pub expired: bool,
}

/// The role an invitation grants: `role_id`, else the public role name (DEVELOPER is DEVOPS
/// here), else VIEWER.
fn invited_role(input: &InviteInput) -> DomainResult<Role> {
    if let Some(id) = input.role_id {
        return Role::from_id(id)
            .ok_or_else(|| DomainError::invalid("role_id", "is not a role of availableRole"));
    }
    match input.role.as_deref().map(str::trim) {
        None | Some("VIEWER") => Ok(Role::Viewer),
        Some("ADMIN") => Ok(Role::Admin),
        Some("DEVELOPER") | Some("DEVOPS") => Ok(Role::Devops),
        Some("BILLING_MANAGER") => Ok(Role::BillingManager),
        Some("OWNER") => Err(DomainError::invalid(
            "role",
            "an organization has one owner: invite an ADMIN, then transfer ownership",
        )),
        Some(_) => Err(DomainError::invalid(
            "role",
            "must be one of ADMIN, DEVELOPER, VIEWER",
        )),
    }
}

fn email(value: &str) -> DomainResult<String> {
    let v = value.trim();
    let valid = v.len() <= 254
        && !v.chars().any(char::is_whitespace)
        && v.split_once('@')
            .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
    if valid {
        Ok(v.to_string())
    } else {
        Err(DomainError::invalid(
            "email",
            "must be an email address like ada@example.com",
        ))
    }
}

/// The member `user` names (its user id or its listed id).
fn find<'a>(members: &'a [Member], user: &str) -> DomainResult<&'a Member> {
    members
        .iter()
        .find(|m| m.is(user))
        .ok_or(DomainError::NotFound("member"))
}

/// A change that would leave the organization without an ADMIN.
fn keeps_an_admin(members: &[Member], leaving: &Member) -> DomainResult<()> {
    let admins = members.iter().filter(|m| m.role == Role::Admin).count();
    if leaving.role == Role::Admin && admins <= 1 {
        return Err(DomainError::state(
            "the organization's last ADMIN cannot be removed or demoted",
        ));
    }
    Ok(())
}

impl Capstan {
    pub async fn list_members(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<Member>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        Ok(tx.members(org).await?)
    }

    pub async fn change_member_role(
        &self,
        p: &Principal,
        org: OrganizationId,
        change: RoleChange,
    ) -> DomainResult<Member> {
        let role = Role::from_id(change.role_id)
            .ok_or_else(|| DomainError::invalid("role_id", "is not a role of availableRole"))?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let members = self.administering(tx, p, org).await?;
            let member = find(&members, &change.user_id)?.clone();
            if role != Role::Admin {
                if member.owner {
                    return Err(DomainError::state(
                        "the owner stays an ADMIN: transfer ownership first",
                    ));
                }
                keeps_an_admin(&members, &member)?;
            }
            tx.put_member(org, &member.user_id, role, self.now())
                .await?;
            let change = super::audit::MemberChange {
                organization: org,
                user: &member.user_id,
                sub: SubTargetType::MemberRole,
            };
            self.audit(tx, p, EventType::Update, &change).await?;
            Ok(Member { role, ..member })
        })
        .await
    }

    pub async fn remove_member(
        &self,
        p: &Principal,
        org: OrganizationId,
        user: MemberRef,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let members = self.administering(tx, p, org).await?;
            let member = find(&members, &user.user_id)?;
            if member.owner {
                return Err(DomainError::state(
                    "the owner cannot be removed: transfer ownership first",
                ));
            }
            keeps_an_admin(&members, member)?;
            tx.remove_member(org, &member.user_id).await?;
            let change = super::audit::MemberChange {
                organization: org,
                user: &member.user_id,
                sub: SubTargetType::MemberRole,
            };
            self.audit(tx, p, EventType::Delete, &change).await?;
            Ok(())
        })
        .await
    }

    /// Makes a member the owner (and an ADMIN). Where the organization has an owner, only
    /// the owner or an ADMIN API token (acting for the organization) may hand it on.
    pub async fn transfer_ownership(
        &self,
        p: &Principal,
        org: OrganizationId,
        user: MemberRef,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let members = self.administering(tx, p, org).await?;
            let target = find(&members, &user.user_id)?.clone();
            let owner = members.iter().find(|m| m.owner);
            if let (Some(owner), Subject::User(caller)) = (owner, &p.subject) {
                if owner.user_id != *caller {
                    return Err(DomainError::Forbidden(
                        "only the owner transfers the ownership of the organization".into(),
                    ));
                }
            }
            tx.put_member(org, &target.user_id, Role::Admin, self.now())
                .await?;
            tx.set_owner(org, &target.user_id).await?;
            let change = super::audit::MemberChange {
                organization: org,
                user: &target.user_id,
                sub: SubTargetType::TransferOwnership,
            };
            self.audit(tx, p, EventType::Update, &change).await?;
            Ok(())
        })
        .await
    }

    /// The organization's members, for an ADMIN, in a unit holding the organization.
    async fn administering(
        &self,
        tx: &mut Unit,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<Member>> {
        self.load::<Organization>(tx, p, org, Action::Administer)
            .await?;
        Ok(tx.members(org).await?)
    }

    async fn invitation_details(
        &self,
        tx: &mut Unit,
        invitations: Vec<Invitation>,
    ) -> DomainResult<Vec<InvitationDetails>> {
        let names = self
            .by_id::<Organization>(tx, invitations.iter().map(|i| i.organization_id))
            .await?;
        let now = self.now();
        Ok(invitations
            .into_iter()
            .map(|invitation| InvitationDetails {
                link: format!(
                    "{}/organization/{}/inviteMember/{}",
                    self.public_url, invitation.organization_id, invitation.id
                ),
                organization_name: names
                    .get(&invitation.organization_id)
                    .map(|o| o.name.to_string())
                    .unwrap_or_default(),
                expired: invitation.expired(now),
                invitation,
            })
            .collect())
    }

    async fn one_invitation(
        &self,
        tx: &mut Unit,
        invitation: Invitation,
    ) -> DomainResult<InvitationDetails> {
        self.invitation_details(tx, vec![invitation])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("invitation vanished".into()))
    }

    pub async fn invite_member(
        &self,
        p: &Principal,
        org: OrganizationId,
        input: InviteInput,
    ) -> DomainResult<InvitationDetails> {
        let role = invited_role(&input)?;
        let address = email(&input.email)?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let members = self.administering(tx, p, org).await?;
            if members
                .iter()
                .any(|m| m.email.as_deref().map(str::to_lowercase) == Some(address.to_lowercase()))
            {
                return Err(DomainError::state(format!(
                    "{address} is already a member of the organization"
                )));
            }
            let now = self.now();
            let invitation = Invitation {
                id: InvitationId::generate(),
                organization_id: org,
                email: address.clone(),
                role,
                inviter: match &p.subject {
                    Subject::User(user) => user.clone(),
                    Subject::ApiToken(id) => format!("token:{id}"),
                },
                created_at: now,
                updated_at: now,
                expires_at: now + INVITATION_LIFETIME,
            };
            Repo::<Invitation>::insert(tx, &invitation)
                .await
                .map_err(|e| match e {
                    crate::error::StoreError::Duplicate => DomainError::state(format!(
                        "an invitation for {address} is already pending"
                    )),
                    other => other.into(),
                })?;
            self.audit(tx, p, EventType::Create, &invitation).await?;
            let details = self.one_invitation(tx, invitation).await?;
            Ok(details)
        })
        .await
    }

    /// Invitations carry the link that joins the organization: only its ADMINs see them.
    pub async fn list_invitations(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<InvitationDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Administer)
            .await?;
        let all = self
            .list::<Invitation>(tx, org, crate::pagination::PageRequest::all())
            .await?;
        self.invitation_details(tx, all.items).await
    }

    pub async fn get_invitation(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: InvitationId,
    ) -> DomainResult<InvitationDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Administer)
            .await?;
        let invitation = self.load_in_org(tx, p, org, id, Action::Administer).await?;
        self.one_invitation(tx, invitation).await
    }

    pub async fn delete_invitation(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: InvitationId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.administering(tx, p, org).await?;
            let invitation: Invitation =
                self.load_in_org(tx, p, org, id, Action::Administer).await?;
            self.audit(tx, p, EventType::Delete, &invitation).await?;
            self.delete::<Invitation>(tx, id, "nothing").await
        })
        .await
    }

    /// The invited user (a signed-in user, not yet a member: the invitation's id is what
    /// admits it) joins with the invitation's role; the invitation is used up.
    pub async fn accept_invitation(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: InvitationId,
    ) -> DomainResult<InvitationDetails> {
        let Subject::User(user) = &p.subject else {
            return Err(DomainError::Forbidden(
                "invitations are accepted by a signed-in user (Bearer JWT), not an API token"
                    .into(),
            ));
        };
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let invitation = Repo::<Invitation>::get(tx, id)
                .await?
                .filter(|i| i.organization_id == org)
                .ok_or(DomainError::NotFound("invitation"))?;
            if invitation.expired(self.now()) {
                return Err(DomainError::state(
                    "the invitation has expired: ask for a new one",
                ));
            }
            if tx.members(org).await?.iter().any(|m| m.user_id == *user) {
                return Err(DomainError::state(
                    "you are already a member of the organization",
                ));
            }
            tx.put_member(org, user, invitation.role, self.now())
                .await?;
            tx.set_member_email(org, user, &invitation.email).await?;
            self.delete::<Invitation>(tx, id, "nothing").await?;
            self.audit(tx, p, EventType::Accept, &invitation).await?;
            let details = self.one_invitation(tx, invitation).await?;
            Ok(details)
        })
        .await
    }
}
