//! Bearer JWTs: HS256, RS256 and ES256; exp required, nbf, iss and aud checked; users create
//! organizations (becoming their ADMIN) and act by their membership role.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use capstan_api::jwt::JwtVerifier;
use common::{App, T};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

const SECRET: &[u8] = b"a-shared-secret-of-at-least-32-bytes!!";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn hs256(claims: Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET),
    )
    .unwrap()
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "exp": now() + 600, "iss": "https://id.example", "aud": "capstan"})
}

async fn bearer<S: App>(
    t: &T<S>,
    jwt: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> common::Resp {
    let mut req = TestRequest::default()
        .method(method)
        .uri(path)
        .insert_header(("Authorization", format!("Bearer {jwt}")));
    if let Some(b) = body {
        req = req.set_json(b);
    }
    t.send(req.to_request()).await
}

macro_rules! with_hs256 {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let b = crate::common::sqlite().await.unwrap();
                    let t = crate::common::setup_with(b, |s| s.with_jwt(
                        super::JwtVerifier::hs256(super::SECRET).with_issuer(Some("https://id.example")).with_audience(Some("capstan")),
                    )).await;
                    super::$name(t).await;
                }
            )*
        }
        mod postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(b) = crate::common::postgres().await else { return };
                    let t = crate::common::setup_with(b, |s| s.with_jwt(
                        super::JwtVerifier::hs256(super::SECRET).with_issuer(Some("https://id.example")).with_audience(Some("capstan")),
                    )).await;
                    super::$name(t).await;
                }
            )*
        }
    };
}

with_hs256!(
    a_user_creates_an_organization_and_administers_it,
    invalid_jwts_are_refused_with_401,
    members_act_by_their_role,
    invitations_bring_users_in_with_their_role,
    an_organization_keeps_an_admin_and_its_owner,
    an_organization_shows_its_owner,
);

/// A user's organization: created by `owner` (its ADMIN and owner).
async fn users_org<S: App>(t: &T<S>, owner: &str) -> String {
    bearer(
        t,
        &hs256(claims(owner)),
        Method::POST,
        "/organization",
        Some(json!({"name": format!("{owner}'s")})),
    )
    .await
    .expect(201)
    .id()
}

/// Invites `email` as `role` with `admin`'s JWT and has `user` accept; returns the invitation.
async fn join<S: App>(
    t: &T<S>,
    org: &str,
    admin: &str,
    email: &str,
    role: &str,
    user: &str,
) -> Value {
    let invitation = bearer(
        t,
        &hs256(claims(admin)),
        Method::POST,
        &format!("/organization/{org}/inviteMember"),
        Some(json!({"email": email, "role": role})),
    )
    .await
    .expect(201)
    .body;
    bearer(
        t,
        &hs256(claims(user)),
        Method::POST,
        &format!(
            "/organization/{org}/inviteMember/{}",
            invitation["id"].as_str().unwrap()
        ),
        None,
    )
    .await
    .expect(201);
    invitation
}

async fn members<S: App>(t: &T<S>, org: &str, jwt: &str) -> Vec<(String, String, String)> {
    let listed = bearer(
        t,
        jwt,
        Method::GET,
        &format!("/organization/{org}/member"),
        None,
    )
    .await
    .expect(200);
    listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["user_id"].as_str().unwrap().to_string(),
                m["email"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect()
}

async fn invitations_bring_users_in_with_their_role<S: App>(t: T<S>) {
    let org = t.org.clone();
    let path = format!("/organization/{org}/inviteMember");
    let invitation = t
        .post(
            &path,
            json!({"email": "ada@example.com", "role": "DEVELOPER"}),
        )
        .await
        .expect(201);
    let id = invitation.id();
    assert_eq!(invitation.body["invitation_status"], "PENDING");
    assert_eq!(
        (&invitation.body["role"], &invitation.body["role_name"]),
        (&json!("DEVELOPER"), &json!("DEVOPS"))
    );
    let link = invitation.body["invitation_link"].as_str().unwrap();
    assert!(
        link.ends_with(&format!("/organization/{org}/inviteMember/{id}")),
        "{link}"
    );
    assert_eq!(
        t.get(&path).await.expect(200).body["results"][0]["id"],
        json!(id)
    );
    t.get(&format!("{path}/{id}")).await.expect(200);
    // One pending invitation per address; addresses and roles are checked.
    t.post(&path, json!({"email": "ADA@example.com"}))
        .await
        .expect_error(409, "an invitation for ADA@example.com is already pending");
    t.post(&path, json!({"email": "not an address"}))
        .await
        .expect_error(400, "email: must be an email address");
    t.post(&path, json!({"email": "bob@example.com", "role": "OWNER"}))
        .await
        .expect_error(400, "role: an organization has one owner");
    // Only ADMINs see invitations (their link admits whoever holds it).
    let viewer = t.token_with_role(domain::auth::Role::Viewer).await;
    let r = t.call(Some(&viewer), Method::GET, &path, None).await;
    assert_eq!(r.status, 403, "{}", r.text);
    // An API token cannot accept; the invited user does.
    t.post(&format!("{path}/{id}"), json!(null))
        .await
        .expect_error(403, "invitations are accepted by a signed-in user");
    let ada = hs256(claims("user-ada"));
    bearer(&t, &ada, Method::POST, &format!("{path}/{id}"), None)
        .await
        .expect(201);
    assert!(members(&t, &org, &ada).await.contains(&(
        "user-ada".into(),
        "ada@example.com".into(),
        "DEVELOPER".into()
    )));
    t.get(&format!("{path}/{id}"))
        .await
        .expect_error(404, "invitation not found");
    bearer(&t, &ada, Method::POST, &format!("{path}/{id}"), None)
        .await
        .expect_error(404, "invitation not found");
    // The new member acts by its role: DEVOPS writes, but does not invite.
    bearer(
        &t,
        &ada,
        Method::POST,
        &format!("/organization/{org}/project"),
        Some(json!({"name": "p"})),
    )
    .await
    .expect(201);
    let r = bearer(
        &t,
        &ada,
        Method::POST,
        &path,
        Some(json!({"email": "eve@example.com"})),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text);
    // A member's address cannot be invited again; a withdrawn invitation is gone.
    t.post(&path, json!({"email": "ada@example.com"}))
        .await
        .expect_error(409, "ada@example.com is already a member");
    // The organization's only ADMIN member is neither demoted nor removed.
    let org_id: domain::ids::OrganizationId = org.parse().unwrap();
    t.capstan
        .add_member(org_id, "admin-al", domain::auth::Role::Admin)
        .await
        .unwrap();
    let member_path = format!("/organization/{org}/member");
    t.put(
        &member_path,
        json!({"user_id": "admin-al", "role_id": "7e57ca95-0000-4000-8000-000000000003"}),
    )
    .await
    .expect_error(
        409,
        "the organization's last ADMIN cannot be removed or demoted",
    );
    t.call(
        Some(&t.token.clone()),
        Method::DELETE,
        &member_path,
        Some(json!({"user_id": "admin-al"})),
    )
    .await
    .expect_error(409, "the organization's last ADMIN");
    t.call(
        Some(&t.token.clone()),
        Method::DELETE,
        &member_path,
        Some(json!({"user_id": "user-ada"})),
    )
    .await
    .expect(204);
    let other = t
        .post(&path, json!({"email": "bob@example.com"}))
        .await
        .expect(201)
        .id();
    t.delete(&format!("{path}/{other}")).await.expect(204);
    t.get(&format!("{path}/{other}"))
        .await
        .expect_error(404, "invitation not found");
}

async fn an_organization_keeps_an_admin_and_its_owner<S: App>(t: T<S>) {
    let org = users_org(&t, "owner-olga").await;
    let olga = hs256(claims("owner-olga"));
    assert_eq!(
        members(&t, &org, &olga).await,
        [("owner-olga".into(), "owner-olga".into(), "OWNER".into())]
    );
    join(
        &t,
        &org,
        "owner-olga",
        "bob@example.com",
        "VIEWER",
        "user-bob",
    )
    .await;
    let member_path = format!("/organization/{org}/member");
    let admin = "7e57ca95-0000-4000-8000-000000000001";
    let viewer = "7e57ca95-0000-4000-8000-000000000003";
    // The owner stays an ADMIN and a member until ownership moves.
    bearer(
        &t,
        &olga,
        Method::PUT,
        &member_path,
        Some(json!({"user_id": "owner-olga", "role_id": viewer})),
    )
    .await
    .expect_error(409, "the owner stays an ADMIN");
    bearer(
        &t,
        &olga,
        Method::DELETE,
        &member_path,
        Some(json!({"user_id": "owner-olga"})),
    )
    .await
    .expect_error(409, "the owner cannot be removed");
    // A member is named by its user id or by its listed id.
    let listed = bearer(&t, &olga, Method::GET, &member_path, None)
        .await
        .expect(200);
    let bob_id = listed.body["results"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let promoted = bearer(
        &t,
        &olga,
        Method::PUT,
        &member_path,
        Some(json!({"user_id": bob_id, "role_id": admin})),
    )
    .await
    .expect(200);
    assert_eq!(promoted.body["role"], "ADMIN");
    bearer(
        &t,
        &olga,
        Method::PUT,
        &member_path,
        Some(json!({"user_id": "nobody", "role_id": admin})),
    )
    .await
    .expect_error(404, "member not found");
    // Only the owner hands ownership on.
    let bob = hs256(claims("user-bob"));
    let transfer = format!("/organization/{org}/transferOwnership");
    bearer(
        &t,
        &bob,
        Method::POST,
        &transfer,
        Some(json!({"user_id": "user-bob"})),
    )
    .await
    .expect_error(403, "only the owner transfers");
    bearer(
        &t,
        &olga,
        Method::POST,
        &transfer,
        Some(json!({"user_id": "user-bob"})),
    )
    .await
    .expect(204);
    let now = members(&t, &org, &bob).await;
    assert_eq!(
        now,
        [
            ("owner-olga".into(), "owner-olga".into(), "ADMIN".into()),
            ("user-bob".into(), "bob@example.com".into(), "OWNER".into())
        ]
    );
    // The last ADMIN is not removed nor demoted.
    bearer(
        &t,
        &bob,
        Method::DELETE,
        &member_path,
        Some(json!({"user_id": "owner-olga"})),
    )
    .await
    .expect(204);
    bearer(&t, &olga, Method::GET, &member_path, None)
        .await
        .expect(403);
    join(&t, &org, "user-bob", "cy@example.com", "ADMIN", "user-cy").await;
    let cy = hs256(claims("user-cy"));
    bearer(
        &t,
        &cy,
        Method::POST,
        &transfer,
        Some(json!({"user_id": "user-cy"})),
    )
    .await
    .expect_error(403, "only the owner transfers");
    bearer(
        &t,
        &bob,
        Method::POST,
        &transfer,
        Some(json!({"user_id": "user-cy"})),
    )
    .await
    .expect(204);
    bearer(
        &t,
        &cy,
        Method::PUT,
        &member_path,
        Some(json!({"user_id": "user-bob", "role_id": viewer})),
    )
    .await
    .expect(200);
    bearer(
        &t,
        &cy,
        Method::PUT,
        &member_path,
        Some(json!({"user_id": "user-cy", "role_id": viewer})),
    )
    .await
    .expect_error(409, "the owner stays an ADMIN");
}

async fn a_user_creates_an_organization_and_administers_it<S: App>(t: T<S>) {
    let jwt = hs256(claims("user-ada"));
    let none = bearer(&t, &jwt, Method::GET, "/organization", None)
        .await
        .expect(200);
    assert_eq!(none.body["results"], json!([]));
    let org = bearer(
        &t,
        &jwt,
        Method::POST,
        "/organization",
        Some(json!({"name": "Ada's"})),
    )
    .await
    .expect(201);
    let id = org.id();
    let list = bearer(&t, &jwt, Method::GET, "/organization", None)
        .await
        .expect(200);
    assert_eq!(list.body["results"][0]["id"], json!(id));
    bearer(
        &t,
        &jwt,
        Method::POST,
        &format!("/organization/{id}/project"),
        Some(json!({"name": "p"})),
    )
    .await
    .expect(201);
    let token = bearer(
        &t,
        &jwt,
        Method::POST,
        &format!("/organization/{id}/apiToken"),
        Some(json!({"name": "ci", "role_id": "7e57ca95-0000-4000-8000-000000000003"})),
    )
    .await
    .expect(201);
    assert!(token.body["token"].is_string(), "the creator is ADMIN");
    // Not a member of the token's organization.
    bearer(
        &t,
        &jwt,
        Method::GET,
        &format!("/organization/{}", t.org),
        None,
    )
    .await
    .expect(403);
    // API tokens cannot create organizations.
    t.post("/organization", json!({"name": "x"}))
        .await
        .expect_error(403, "API tokens cannot create organizations");
}

async fn invalid_jwts_are_refused_with_401<S: App>(t: T<S>) {
    let mut expired = claims("u");
    expired["exp"] = json!(now() - 3600);
    let mut early = claims("u");
    early["nbf"] = json!(now() + 3600);
    let mut no_exp = claims("u");
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut wrong_iss = claims("u");
    wrong_iss["iss"] = json!("https://other.example");
    let mut wrong_aud = claims("u");
    wrong_aud["aud"] = json!("someone-else");
    let forged = encode(
        &Header::new(Algorithm::HS256),
        &claims("u"),
        &EncodingKey::from_secret(b"another-secret-of-at-least-32-bytes!!!"),
    )
    .unwrap();
    for (jwt, why) in [
        (hs256(expired), "expired"),
        (hs256(early), "not valid yet"),
        (hs256(no_exp), "lacks a required claim"),
        (hs256(wrong_iss), "issuer"),
        (hs256(wrong_aud), "audience"),
        (forged, "signature"),
        ("not.a.jwt".to_string(), "malformed"),
    ] {
        let r = bearer(&t, &jwt, Method::GET, "/organization", None).await;
        let r = r.expect(401);
        let message = r.body["message"].as_str().unwrap();
        assert!(message.contains(why), "{why}: {message}");
    }
    let ok = bearer(&t, &hs256(claims("u")), Method::GET, "/organization", None).await;
    ok.expect(200);
}

async fn members_act_by_their_role<S: App>(t: T<S>) {
    let org: domain::ids::OrganizationId = t.org.parse().unwrap();
    t.capstan
        .add_member(org, "viewer-vic", domain::auth::Role::Viewer)
        .await
        .unwrap();
    let jwt = hs256(claims("viewer-vic"));
    bearer(
        &t,
        &jwt,
        Method::GET,
        &format!("/organization/{}/project", t.org),
        None,
    )
    .await
    .expect(200);
    bearer(
        &t,
        &jwt,
        Method::POST,
        &format!("/organization/{}/project", t.org),
        Some(json!({"name": "p"})),
    )
    .await
    .expect_error(403, "the VIEWER role does not allow");
    // The role can change: it takes effect on the next request.
    t.capstan
        .add_member(org, "viewer-vic", domain::auth::Role::Devops)
        .await
        .unwrap();
    bearer(
        &t,
        &jwt,
        Method::POST,
        &format!("/organization/{}/project", t.org),
        Some(json!({"name": "p"})),
    )
    .await
    .expect(201);
}

#[actix_rt::test]
async fn rs256_and_es256_public_keys_verify_their_tokens() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/keys");
    for (public, private, alg) in [
        ("rsa-public.pem", "rsa-private.pem", Algorithm::RS256),
        ("ec-public.pem", "ec-private.pem", Algorithm::ES256),
    ] {
        let public = std::fs::read(format!("{dir}/{public}")).unwrap();
        let private = std::fs::read(format!("{dir}/{private}")).unwrap();
        let b = common::sqlite().await.unwrap();
        let verifier = JwtVerifier::from_public_key_pem(&public).unwrap();
        let t = common::setup_with(b, |s| s.with_jwt(verifier)).await;
        let key = match alg {
            Algorithm::RS256 => EncodingKey::from_rsa_pem(&private).unwrap(),
            _ => EncodingKey::from_ec_pem(&private).unwrap(),
        };
        let jwt = encode(
            &Header::new(alg),
            &json!({"sub": "u", "exp": now() + 60}),
            &key,
        )
        .unwrap();
        bearer(&t, &jwt, Method::GET, "/organization", None)
            .await
            .expect(200);
        let hs = hs256(json!({"sub": "u", "exp": now() + 60}));
        bearer(&t, &hs, Method::GET, "/organization", None)
            .await
            .expect_error(401, "the JWT is signed with another algorithm");
    }
    assert!(JwtVerifier::from_public_key_pem(b"not a key").is_err());
}

#[actix_rt::test]
async fn bearer_tokens_without_a_configured_key_are_refused() {
    let b = common::sqlite().await.unwrap();
    let t = common::setup(b).await;
    bearer(&t, &hs256(claims("u")), Method::GET, "/organization", None)
        .await
        .expect_error(401, "Bearer tokens are not accepted");
}

/// `owner` is the owner's member id (the id the member list shows): the creator, then whoever
/// ownership goes to; an organization made with a token has none until one is named.
async fn an_organization_shows_its_owner<S: App>(t: T<S>) {
    let t = &t;
    let org = users_org(t, "owner-olga").await;
    let olga = hs256(claims("owner-olga"));
    let member_ids = |listed: Value| -> Vec<(String, Value)> {
        listed["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["user_id"].as_str().unwrap().to_string(), m["id"].clone()))
            .collect()
    };
    let owner_of = |jwt: String, org: String| async move {
        bearer(t, &jwt, Method::GET, &format!("/organization/{org}"), None)
            .await
            .expect(200)
            .body["owner"]
            .clone()
    };
    let members_path = format!("/organization/{org}/member");
    let listed = bearer(t, &olga, Method::GET, &members_path, None)
        .await
        .expect(200)
        .body;
    let olga_id = member_ids(listed)[0].1.clone();
    assert!(olga_id.is_string());
    assert_eq!(owner_of(olga.clone(), org.clone()).await, olga_id);
    let all = bearer(t, &olga, Method::GET, "/organization", None)
        .await
        .expect(200)
        .body;
    assert_eq!(all["results"][0]["owner"], olga_id);
    let edited = bearer(
        t,
        &olga,
        Method::PUT,
        &format!("/organization/{org}"),
        Some(json!({"name": "renamed"})),
    )
    .await
    .expect(200);
    assert_eq!(edited.body["owner"], olga_id);

    join(
        t,
        &org,
        "owner-olga",
        "bob@example.com",
        "ADMIN",
        "user-bob",
    )
    .await;
    bearer(
        t,
        &olga,
        Method::POST,
        &format!("/organization/{org}/transferOwnership"),
        Some(json!({"user_id": "user-bob"})),
    )
    .await
    .expect(204);
    let listed = bearer(t, &olga, Method::GET, &members_path, None)
        .await
        .expect(200)
        .body;
    let bob_id = member_ids(listed)
        .into_iter()
        .find(|(user, _)| user == "user-bob")
        .unwrap()
        .1;
    assert_ne!(bob_id, olga_id);
    assert_eq!(owner_of(olga.clone(), org.clone()).await, bob_id);

    // The harness's organization was made with a token: no user owns it.
    let token_org = t.get(&format!("/organization/{}", t.org)).await.expect(200);
    assert!(token_org.body.get("owner").is_none(), "{}", token_org.text);
    t.capstan
        .add_member(
            t.org.parse().unwrap(),
            "user-zed",
            domain::auth::Role::Admin,
        )
        .await
        .unwrap();
    t.post(
        &format!("/organization/{}/transferOwnership", t.org),
        json!({"user_id": "user-zed"}),
    )
    .await
    .expect(204);
    let owned = t.get(&format!("/organization/{}", t.org)).await.expect(200);
    assert_eq!(
        owned.body["owner"],
        json!(domain::model::member_id("user-zed"))
    );
}
