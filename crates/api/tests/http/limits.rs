//! Rate limits, safe retries and the headers every answer carries, on both backends; the
//! limiter both in this process and in the database (shared by instances, by leases).

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{App, T};
use serde_json::json;

macro_rules! limited {
    ($($name:ident),* $(,)?) => {
        mod sqlite_local {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let b = crate::common::sqlite().await.unwrap().map(|c| c.with_git(super::git()));
                    let t = crate::common::setup_with(b, |s| s.with_limiter(capstan_api::limits::RateLimiter::local(5))).await;
                    super::$name(t).await;
                }
            )*
        }
        mod sqlite_shared {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let b = crate::common::sqlite().await.unwrap().map(|c| c.with_git(super::git()));
                    let c = b.capstan.clone();
                    let t = crate::common::setup_with(b, |s| s.with_limiter(capstan_api::limits::RateLimiter::shared(5, c))).await;
                    super::$name(t).await;
                }
            )*
        }
        mod postgres_shared {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(b) = crate::common::postgres().await else { return };
                    let b = b.map(|c| c.with_git(super::git()));
                    let c = b.capstan.clone();
                    let t = crate::common::setup_with(b, |s| s.with_limiter(capstan_api::limits::RateLimiter::shared(5, c))).await;
                    super::$name(t).await;
                }
            )*
        }
    };
}

limited!(
    the_sixth_request_of_a_token_is_refused_and_others_are_not,
    bad_credentials_are_metered_per_client_address,
    forged_deliveries_are_metered_by_address_and_signed_ones_by_service,
);

/// The receiver's integration: no provider is called here, deliveries are only verified.
fn git() -> domain::services::GitIntegration {
    domain::services::GitIntegration::new(
        std::sync::Arc::new(
            git::HttpGitHosting::new(
                std::time::Duration::from_millis(500),
                domain::outbound_policy::OutboundPolicy::default(),
            )
            .unwrap(),
        ),
        "https://capstan.example",
        domain::secret::Secret::new("limits-signing-key"),
        time::Duration::ZERO,
    )
}

http_suite!(
    a_retried_post_does_its_work_once,
    answers_carry_security_headers_and_no_cors_by_default,
);

fn header(r: &common::Resp, name: &str) -> String {
    r.headers
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .to_str()
        .unwrap()
        .to_string()
}

async fn the_sixth_request_of_a_token_is_refused_and_others_are_not<S: App>(t: T<S>) {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let path = format!("/organization/{}", t.org);
    for remaining in (0..5).rev() {
        let r = t.get(&path).await.expect(200);
        assert_eq!(header(&r, "x-ratelimit-limit"), "5");
        assert_eq!(header(&r, "x-ratelimit-remaining"), remaining.to_string());
        let reset: i64 = header(&r, "x-ratelimit-reset").parse().unwrap();
        assert!(reset > now && reset <= now + 3600 + 1, "{reset}");
    }
    let refused = t.get(&path).await.expect_error(429, "rate limit exceeded");
    let after: u64 = header(&refused, "retry-after").parse().unwrap();
    assert!(
        (1..=720).contains(&after),
        "one request comes back every 720 s: {after}"
    );
    assert_eq!(header(&refused, "x-ratelimit-remaining"), "0");
    assert!(refused.headers.contains_key("x-request-id"));
    // Another token of the same organization has its own quota. (Issued in the store: the
    // first token has no request left to create it.)
    let other = t.token_with_role(domain::auth::Role::Viewer).await;
    let r = t
        .call(Some(&other), Method::GET, &path, None)
        .await
        .expect(200);
    assert_eq!(header(&r, "x-ratelimit-remaining"), "4");
    // Probes are not metered and still say where the quota stands.
    let probe = t
        .call(None, Method::GET, "/healthz", None)
        .await
        .expect(200);
    assert_eq!(header(&probe, "x-ratelimit-limit"), "5");
}

async fn bad_credentials_are_metered_per_client_address<S: App>(t: T<S>) {
    let from = |ip: &str| {
        TestRequest::get()
            .uri("/organization")
            .insert_header(("Authorization", "Token cap_wrong"))
            .peer_addr(format!("{ip}:4000").parse().unwrap())
            .to_request()
    };
    for _ in 0..5 {
        let r = t.send(from("10.0.0.1")).await.expect(401);
        assert!(r.headers.contains_key("x-ratelimit-remaining"));
    }
    t.send(from("10.0.0.1"))
        .await
        .expect_error(429, "rate limit exceeded");
    t.send(from("10.0.0.2")).await.expect(401);
    // A valid token is metered under its own key, whatever the address.
    t.get(&format!("/organization/{}", t.org)).await.expect(200);
    // Unknown routes too carry the headers.
    let missing = t.get("/nowhere").await.expect(404);
    assert!(missing.headers.contains_key("x-ratelimit-limit"));
}

/// Forged deliveries spend their source address's quota (the one bad credentials spend),
/// never the service's: after many, the provider's correctly signed push still deploys; and
/// made-up service ids share the address's quota instead of bringing one each.
async fn forged_deliveries_are_metered_by_address_and_signed_ones_by_service<S: App>(t: T<S>) {
    use hmac::{Hmac, Mac};
    // Four requests of the token's five.
    let env = t.hierarchy().await.2;
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "auto_deploy": true,
                   "git_repository": {"url": "https://github.com/acme/api", "branch": "main"}}),
        )
        .await
        .expect(201)
        .id();
    let secret = git().secret_for(app.parse().unwrap());
    let push = serde_json::to_vec(&json!({"ref": "refs/heads/main", "after": "c0ffee1"})).unwrap();
    let signed = |key: &str| {
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
        mac.update(&push);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("sha256={hex}")
    };
    let deliver = |service: &str, from: &str, signature: String, id: &str| {
        TestRequest::post()
            .uri(&format!("/git/webhook/{service}"))
            .insert_header(("X-GitHub-Event", "push"))
            .insert_header(("X-GitHub-Delivery", id.to_string()))
            .insert_header(("X-Hub-Signature-256", signature))
            .peer_addr(format!("{from}:4000").parse().unwrap())
            .set_payload(push.clone())
            .to_request()
    };
    let provider = "140.82.112.1";
    for n in 0..5 {
        t.send(deliver(&app, provider, signed("forged"), &format!("f-{n}")))
            .await
            .expect(401);
    }
    t.send(deliver(&app, provider, signed("forged"), "f-5"))
        .await
        .expect_error(429, "rate limit exceeded");
    // The address's quota is the one bad credentials spend too.
    let bad_token = TestRequest::get()
        .uri("/organization")
        .insert_header(("Authorization", "Token cap_wrong"))
        .peer_addr(format!("{provider}:4000").parse().unwrap())
        .to_request();
    t.send(bad_token).await.expect(429);
    // The service's own push, from the same address, is untouched by all that.
    let queued = t
        .send(deliver(&app, provider, signed(secret.expose()), "d-1"))
        .await
        .expect(202);
    assert_eq!(queued.body["result"], "DEPLOYMENT_QUEUED");
    assert_eq!(header(&queued, "x-ratelimit-remaining"), "4");

    // Made-up service ids, one per delivery: one quota, the address's.
    let prober = "203.0.113.9";
    for n in 0..5 {
        let made_up = uuid::Uuid::new_v4().to_string();
        t.send(deliver(&made_up, prober, signed("x"), &format!("p-{n}")))
            .await
            .expect(401);
    }
    let made_up = uuid::Uuid::new_v4().to_string();
    t.send(deliver(&made_up, prober, signed("x"), "p-5"))
        .await
        .expect_error(429, "rate limit exceeded");
    t.send(deliver("not-an-id", prober, signed("x"), "p-6"))
        .await
        .expect(429);
}

async fn a_retried_post_does_its_work_once<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let post = |path: String, body: serde_json::Value, key: &'static str| {
        let req = TestRequest::post()
            .uri(&path)
            .insert_header(("Authorization", format!("Token {}", t.token)))
            .insert_header(("Idempotency-Key", key))
            .set_json(body)
            .to_request();
        t.send(req)
    };
    let first = post(
        format!("/project/{project}/environment"),
        json!({"name": "staging"}),
        "k-1",
    )
    .await
    .expect(201);
    let again = post(
        format!("/project/{project}/environment"),
        json!({"name": "staging"}),
        "k-1",
    )
    .await
    .expect(201);
    assert_eq!(first.body, again.body, "the first answer, replayed");
    assert_eq!(header(&again, "idempotent-replayed"), "true");
    let list = t
        .get(&format!("/project/{project}/environment"))
        .await
        .expect(200);
    assert_eq!(
        list.body["pagination"]["total_count"], 2,
        "prod and one staging"
    );
    post(
        format!("/project/{project}/environment"),
        json!({"name": "other"}),
        "k-1",
    )
    .await
    .expect_error(422, "Idempotency-Key");
    // A client error is an answer too: replayed, not retried.
    let bad = post(format!("/project/{project}/environment"), json!({}), "k-2")
        .await
        .expect(400);
    let bad_again = post(format!("/project/{project}/environment"), json!({}), "k-2")
        .await
        .expect(400);
    assert_eq!(bad.body["message"], bad_again.body["message"]);

    let db = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await
        .expect(201)
        .id();
    let deploy = format!("/database/{db}/deploy");
    let one = post(deploy.clone(), json!({}), "deploy-1")
        .await
        .expect(202);
    let two = post(deploy.clone(), json!({}), "deploy-1")
        .await
        .expect(202);
    assert_eq!(
        one.body["deployment_request_id"],
        two.body["deployment_request_id"]
    );
    t.settle(&format!("/database/{db}/status")).await;
    let history = t
        .get(&format!("/database/{db}/deploymentHistory"))
        .await
        .expect(200);
    assert_eq!(
        history.body["results"].as_array().unwrap().len(),
        1,
        "one deployment"
    );
    let bad_key = TestRequest::post()
        .uri(&deploy)
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Idempotency-Key", ""))
        .to_request();
    t.send(bad_key).await.expect_error(400, "Idempotency-Key");
}

async fn answers_carry_security_headers_and_no_cors_by_default<S: App>(t: T<S>) {
    let req = TestRequest::get()
        .uri(&format!("/organization/{}", t.org))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Origin", "https://evil.example"))
        .to_request();
    let r = t.send(req).await.expect(200);
    assert_eq!(header(&r, "x-content-type-options"), "nosniff");
    assert_eq!(header(&r, "cache-control"), "no-store");
    assert_eq!(header(&r, "x-frame-options"), "DENY");
    assert!(header(&r, "content-security-policy").contains("default-src 'none'"));
    assert!(!r.headers.contains_key("access-control-allow-origin"));
    let err = t.get("/nowhere").await.expect(404);
    assert_eq!(header(&err, "x-content-type-options"), "nosniff");
}

#[actix_rt::test]
async fn configured_origins_may_call_from_a_browser() {
    let b = common::sqlite().await.unwrap();
    let t = common::setup_with(b, |s| {
        s.with_cors_origins(vec!["https://console.example".into()])
    })
    .await;
    let req = TestRequest::default()
        .method(Method::OPTIONS)
        .uri("/organization")
        .insert_header(("Origin", "https://console.example"))
        .insert_header(("Access-Control-Request-Method", "GET"))
        .to_request();
    let r = t.send(req).await;
    assert_eq!(
        header(&r, "access-control-allow-origin"),
        "https://console.example"
    );
    let req = TestRequest::get()
        .uri(&format!("/organization/{}", t.org))
        .insert_header(("Authorization", format!("Token {}", t.token)))
        .insert_header(("Origin", "https://evil.example"))
        .to_request();
    let r = t.send(req).await;
    assert!(!r.headers.contains_key("access-control-allow-origin"));
}

#[actix_rt::test]
async fn a_request_that_takes_too_long_gets_503() {
    use actix_web::{test, web};
    let b = common::sqlite().await.unwrap();
    let state = web::Data::new(
        capstan_api::AppState::new(b.capstan.clone())
            .with_request_timeout(std::time::Duration::from_millis(50)),
    );
    async fn slow() -> actix_web::HttpResponse {
        actix_rt::time::sleep(std::time::Duration::from_secs(5)).await;
        actix_web::HttpResponse::Ok().finish()
    }
    let app = test::init_service(
        actix_web::App::new().app_data(state).service(
            web::resource("/slow")
                .wrap(actix_web::middleware::from_fn(capstan_api::limits::timeout))
                .route(web::get().to(slow)),
        ),
    )
    .await;
    let started = std::time::Instant::now();
    let res = test::call_service(&app, TestRequest::get().uri("/slow").to_request()).await;
    assert_eq!(res.status().as_u16(), 503);
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    let body: serde_json::Value = test::read_body_json(res).await;
    assert!(body["message"]
        .as_str()
        .unwrap()
        .starts_with("the request took longer"));
}

/// Two instances sharing a quota of 1000 through one database: taking turns they admit exactly
/// 1000 between them; when one stops, the cells it leased but did not spend are the only slack,
/// never more than one lease (a hundredth of the quota) nor than it admitted itself.
/// A clock that stands still: the quota below refills a cell every 3.6 s, which a loaded
/// machine's loop of 2200 acquisitions could otherwise outlast (one more admitted).
struct Stopped(time::OffsetDateTime);

impl domain::clock::Clock for Stopped {
    fn now(&self) -> time::OffsetDateTime {
        self.0
    }
}

async fn two_instances_share_one_quota(b: common::Backend) {
    use capstan_api::limits::RateLimiter;
    const QUOTA: u32 = 1000;
    let stopped = std::sync::Arc::new(Stopped(time::OffsetDateTime::now_utc()));
    let one = RateLimiter::shared(QUOTA, b.capstan.clone()).with_clock(stopped.clone());
    let other = RateLimiter::shared(QUOTA, b.capstan.clone()).with_clock(stopped);
    let mut admitted = 0;
    for i in 0..2200 {
        let limiter = if i % 2 == 0 { &one } else { &other };
        if limiter.acquire("token:turns").await.unwrap().allowed {
            admitted += 1;
        }
    }
    assert_eq!(
        admitted, QUOTA,
        "taking turns, every cell is spent and none twice"
    );

    let mut by_one = 0;
    for _ in 0..10 {
        assert!(one.acquire("token:alone").await.unwrap().allowed);
        by_one += 1;
    }
    let mut by_other = 0;
    while other.acquire("token:alone").await.unwrap().allowed {
        by_other += 1;
        assert!(by_other <= QUOTA, "no instance admits more than the quota");
    }
    let total = by_one + by_other;
    assert!(
        total <= QUOTA,
        "never more than the quota between them: {total}"
    );
    let slack = QUOTA - total;
    assert!(
        slack > 0,
        "the idle instance holds leased cells (else this checks nothing)"
    );
    assert!(
        slack <= by_one && slack <= QUOTA / 100,
        "the slack ({slack}) is at most one lease and what the idle instance admitted ({by_one})"
    );
}

#[actix_rt::test]
async fn two_sqlite_instances_share_one_quota() {
    two_instances_share_one_quota(common::sqlite().await.unwrap()).await;
}

#[actix_rt::test]
async fn two_postgres_instances_share_one_quota() {
    let Some(b) = common::postgres().await else {
        return;
    };
    two_instances_share_one_quota(b).await;
}

/// Requests of one key that run out of leased cells together each lease more: their cells add
/// up, so the whole quota is admitted, no more and no less.
async fn concurrent_requests_of_one_key_spend_the_whole_quota(b: common::Backend) {
    use capstan_api::limits::RateLimiter;
    let limiter = RateLimiter::shared(400, b.capstan.clone());
    let mut admitted = 0;
    for _ in 0..60 {
        let round =
            futures_util::future::join_all((0..10).map(|_| limiter.acquire("token:crowd"))).await;
        admitted += round
            .into_iter()
            .filter(|d| d.as_ref().unwrap().allowed)
            .count();
    }
    assert_eq!(admitted, 400);
}

#[actix_rt::test]
async fn sqlite_concurrent_requests_of_one_key_spend_the_whole_quota() {
    concurrent_requests_of_one_key_spend_the_whole_quota(common::sqlite().await.unwrap()).await;
}

#[actix_rt::test]
async fn postgres_concurrent_requests_of_one_key_spend_the_whole_quota() {
    let Some(b) = common::postgres().await else {
        return;
    };
    concurrent_requests_of_one_key_spend_the_whole_quota(b).await;
}
