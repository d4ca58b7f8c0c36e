//! Members, invitations and ownership of an organization.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Routes};
use crate::views::{InvitationView, MemberView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::services::{InviteInput, MemberRef, RoleChange};

type St = web::Data<AppState>;
const ORG: &str = "organizationId";
const INVITE: &str = "inviteId";

pub fn routes(r: &mut Routes) {
    r.at("/organization/{organizationId}/member")
        .get(
            list_members,
            Doc::list::<MemberView>("List the organization's members"),
        )
        .put(
            change_role,
            Doc::answer(
                "Change a member's role (the last ADMIN and the owner stay ADMIN: 409)",
                200,
                Some(Body::of::<MemberView>()),
            )
            .body(Body::of::<RoleChange>()),
        )
        .delete(
            remove_member,
            Doc::delete("Remove a member (not the last ADMIN nor the owner: 409)")
                .body(Body::of::<MemberRef>()),
        )
        .add();
    r.at("/organization/{organizationId}/inviteMember")
        .get(
            list_invitations,
            Doc::list::<InvitationView>("List the pending invitations (ADMIN)"),
        )
        .post(
            invite,
            Doc::create::<InvitationView, InviteInput>("Invite someone to the organization"),
        )
        .add();
    r.at("/organization/{organizationId}/inviteMember/{inviteId}")
        .get(
            get_invitation,
            Doc::get::<InvitationView>("Get an invitation (ADMIN)"),
        )
        .post(
            accept,
            Doc::answer(
                "Accept an invitation: the signed-in user joins with its role",
                201,
                Some(Body::of::<InvitationView>()),
            ),
        )
        .delete(delete_invitation, Doc::delete("Withdraw an invitation"))
        .add();
    r.at("/organization/{organizationId}/transferOwnership")
        .post(
            transfer,
            Doc::answer("Make a member the organization's owner", 204, None)
                .body(Body::of::<MemberRef>()),
        )
        .add();
}

async fn list_members(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let members = st.capstan.list_members(&p, path_id(&req, ORG)?).await?;
    Ok(ok(Paged::from_vec(members, page, MemberView::from)))
}

async fn change_role(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<RoleChange>,
) -> ApiResult<HttpResponse> {
    let member = st
        .capstan
        .change_member_role(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(ok(MemberView::from(member)))
}

async fn remove_member(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<MemberRef>,
) -> ApiResult<HttpResponse> {
    st.capstan
        .remove_member(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(no_content())
}

async fn transfer(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<MemberRef>,
) -> ApiResult<HttpResponse> {
    st.capstan
        .transfer_ownership(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(no_content())
}

async fn list_invitations(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st.capstan.list_invitations(&p, path_id(&req, ORG)?).await?;
    Ok(ok(Paged::from_vec(all, page, InvitationView::from)))
}

async fn invite(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<InviteInput>,
) -> ApiResult<HttpResponse> {
    let invitation = st
        .capstan
        .invite_member(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(created(InvitationView::from(invitation)))
}

async fn get_invitation(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let invitation = st
        .capstan
        .get_invitation(&p, path_id(&req, ORG)?, path_id(&req, INVITE)?)
        .await?;
    Ok(ok(InvitationView::from(invitation)))
}

async fn accept(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let invitation = st
        .capstan
        .accept_invitation(&p, path_id(&req, ORG)?, path_id(&req, INVITE)?)
        .await?;
    Ok(created(InvitationView::from(invitation)))
}

async fn delete_invitation(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_invitation(&p, path_id(&req, ORG)?, path_id(&req, INVITE)?)
        .await?;
    Ok(no_content())
}
