#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Bearer JWTs: HS256, RS256 and ES256; exp required, nbf, iss and aud checked; users create
//! organizations (becoming their ADMIN) and act by their membership role.

mod common;

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
);

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
