//! Custom domains over HTTP, on both backends: CRUD per kind, uniqueness across organizations,
//! copies by environment clone, and the DNS check through a resolver that the test answers for.

use crate::common;

use async_trait::async_trait;
use common::{service_bodies, App, T};
use domain::dns::{ResolveError, Resolver};
use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;

const TARGET: &str = "lb.capstan.test";

/// The DNS as these tests have it.
struct FakeDns;

#[async_trait]
impl Resolver for FakeDns {
    async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, ResolveError> {
        let ip = |s: &str| vec![s.parse().unwrap()];
        match host {
            TARGET | "www.acme.com" | "wildcard-check.apps.acme.com" => Ok(ip("203.0.113.10")),
            "elsewhere.acme.com" | "cdn.acme.com" => Ok(ip("198.51.100.1")),
            "down.acme.com" => Err(ResolveError::Failed("timed out".into())),
            _ => Err(ResolveError::NotFound),
        }
    }
}

const ROUTER_DOMAIN: &str = "apps.capstan.test";

fn checked(c: domain::services::Capstan) -> domain::services::Capstan {
    c.with_domain_check(Arc::new(FakeDns), Some(TARGET.into()))
        .with_router(domain::model::RouterAddress {
            domain: ROUTER_DOMAIN.into(),
            port: 8000,
        })
}

http_suite_with!(
    checked;
    domains_of_each_kind_are_kept_and_edited,
    domains_are_unique_and_valid_host_names,
    the_status_says_where_a_domain_points,
    domains_follow_an_environment_clone_renamed,
);

async fn create<S: App>(t: &T<S>, env: &str, kind: &str) -> String {
    let registry = t.registry().await;
    let mut body = service_bodies(&registry)
        .into_iter()
        .find(|(k, _)| *k == kind)
        .unwrap()
        .1;
    body["name"] = json!(format!(
        "{kind}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..6]
    ));
    t.post(&format!("/environment/{env}/{kind}"), body)
        .await
        .expect(201)
        .id()
}

async fn domains_of_each_kind_are_kept_and_edited<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    for (i, kind) in ["application", "container", "helm"].iter().enumerate() {
        let id = create(&t, &env, kind).await;
        let path = format!("/{kind}/{id}/customDomain");
        let made = t
            .post(
                &path,
                json!({"domain": format!("Site{i}.Acme.com."), "generate_certificate": true}),
            )
            .await
            .expect(201);
        assert_eq!(made.body["domain"], format!("site{i}.acme.com"));
        assert_eq!(made.body["generate_certificate"], true);
        assert_eq!(made.body["use_cdn"], false);
        assert_eq!(made.body["status"], "VALIDATION_PENDING");
        assert_eq!(made.body["validation_domain"], TARGET);
        let did = made.id();
        let edited = t
            .put(
                &format!("{path}/{did}"),
                json!({"domain": format!("api{i}.acme.com"), "generate_certificate": false, "use_cdn": true}),
            )
            .await
            .expect(200);
        assert_eq!(edited.body["domain"], format!("api{i}.acme.com"));
        assert_eq!(edited.body["use_cdn"], true);
        let got = t.get(&format!("{path}/{did}")).await.expect(200);
        assert_eq!(got.body["generate_certificate"], false);
        let listed = t.get(&path).await.expect(200);
        assert_eq!(listed.body["results"].as_array().unwrap().len(), 1);
        t.delete(&format!("{path}/{did}")).await.expect(204);
        t.get(&format!("{path}/{did}")).await.expect(404);
    }
    for kind in ["database", "job", "terraform"] {
        let id = create(&t, &env, kind).await;
        t.get(&format!("/{kind}/{id}/customDomain"))
            .await
            .expect(404);
    }
    // A deployed service is out of date once its domains change.
    let container = create(&t, &env, "container").await;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let status = format!("/container/{container}/status");
    t.settle(&status).await;
    let shop = t
        .post(
            &format!("/container/{container}/customDomain"),
            json!({"domain": "shop.acme.com", "generate_certificate": true}),
        )
        .await
        .expect(201)
        .id();
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
    // Sending a domain as it is changes nothing: deployed again, it stays up to date.
    t.post(&format!("/container/{container}/redeploy"), json!({}))
        .await
        .expect(202);
    t.settle(&status).await;
    t.put(
        &format!("/container/{container}/customDomain/{shop}"),
        json!({"domain": "shop.acme.com", "generate_certificate": true}),
    )
    .await
    .expect(200);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "UP_TO_DATE"
    );
}

async fn domains_are_unique_and_valid_host_names<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = create(&t, &env, "application").await;
    let path = format!("/application/{app}/customDomain");
    for bad in [
        "acme",
        "https://acme.com",
        "a..acme.com",
        "-a.acme.com",
        "a_b.acme.com",
    ] {
        t.post(&path, json!({"domain": bad, "generate_certificate": true}))
            .await
            .expect_error(400, "domain:");
    }
    t.post(&path, json!({"domain": "x.acme.com"}))
        .await
        .expect_error(400, "generate_certificate");
    // The names under the router's domain are those Capstan gives services (another
    // organization's among them): none may be taken, nor covered by a wildcard.
    let generated = format!("p8080-z{}.{ROUTER_DOMAIN}", uuid::Uuid::new_v4().simple());
    for taken in [
        generated.as_str(),
        "apps.capstan.test",
        "*.apps.capstan.test",
        "*.deeper.apps.capstan.test",
    ] {
        let refused = t
            .post(
                &path,
                json!({"domain": taken, "generate_certificate": true}),
            )
            .await
            .expect_error(400, "domain: '");
        assert!(
            refused
                .text
                .contains("is under the router's domain 'apps.capstan.test'"),
            "{taken}: {}",
            refused.text
        );
    }
    let held = t
        .post(
            &path,
            json!({"domain": "www.acme.com", "generate_certificate": true}),
        )
        .await
        .expect(201)
        .id();
    let container = create(&t, &env, "container").await;
    t.post(
        &format!("/container/{container}/customDomain"),
        json!({"domain": "WWW.acme.com", "generate_certificate": true}),
    )
    .await
    .expect_error(
        409,
        "the domain 'www.acme.com' is already used by the application 'application-",
    );
    // Another organization's service is not named.
    let (stranger, their_env) = t.other_org_environment().await;
    use actix_web::http::Method;
    let theirs = t
        .call(
            Some(&stranger),
            Method::POST,
            &format!("/environment/{their_env}/application"),
            Some(service_bodies("unused")[0].1.clone()),
        )
        .await
        .expect(201)
        .id();
    t.call(
        Some(&stranger),
        Method::POST,
        &format!("/application/{theirs}/customDomain"),
        Some(json!({"domain": "www.acme.com", "generate_certificate": true})),
    )
    .await
    .expect_error(
        409,
        "the domain 'www.acme.com' is already used by a service of another organization",
    );
    // Editing a domain to a name another holds is refused the same way; to its own, accepted.
    let other = t
        .post(
            &path,
            json!({"domain": "api.acme.com", "generate_certificate": true}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("{path}/{other}"),
        json!({"domain": "www.acme.com", "generate_certificate": true}),
    )
    .await
    .expect(409);
    t.put(
        &format!("{path}/{held}"),
        json!({"domain": "www.acme.com", "generate_certificate": false}),
    )
    .await
    .expect(200);
    // Another service's domain is not found under this one.
    t.get(&format!("/container/{container}/customDomain/{held}"))
        .await
        .expect(404);
    // A domain is free again once its service is gone.
    t.delete(&format!("/application/{app}")).await.expect(204);
    t.post(
        &format!("/container/{container}/customDomain"),
        json!({"domain": "www.acme.com", "generate_certificate": true}),
    )
    .await
    .expect(201);
}

async fn the_status_says_where_a_domain_points<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let app = create(&t, &env, "application").await;
    let path = format!("/application/{app}/customDomain");
    for (domain, use_cdn, state) in [
        ("www.acme.com", false, "POINTS_AT_TARGET"),
        ("*.apps.acme.com", false, "POINTS_AT_TARGET"),
        ("elsewhere.acme.com", false, "POINTS_ELSEWHERE"),
        ("cdn.acme.com", true, "POINTS_AT_TARGET"),
        ("nowhere.acme.com", false, "NOT_FOUND"),
        ("down.acme.com", false, "RESOLVER_ERROR"),
    ] {
        let id = t
            .post(
                &path,
                json!({"domain": domain, "generate_certificate": true, "use_cdn": use_cdn}),
            )
            .await
            .expect(201)
            .id();
        let status = t.get(&format!("{path}/{id}/status")).await.expect(200);
        let check = &status.body["dns_check"];
        assert_eq!(check["state"], state, "{domain}: {}", status.text);
        assert_eq!(status.body["status"], "VALIDATION_PENDING");
        assert_eq!(status.body["domain"], domain);
        if state == "RESOLVER_ERROR" {
            assert!(check["message"].as_str().unwrap().contains("timed out"));
        }
        // Whether it points where it should, never where: no address reaches the answer.
        for address in ["203.0.113.10", "198.51.100.1"] {
            assert!(!status.text.contains(address), "{domain}: {}", status.text);
        }
    }
    // Every domain at once, in the public description's words.
    let checked = t
        .get(&format!("/application/{app}/checkCustomDomain"))
        .await
        .expect(200);
    let results = checked.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 6, "{}", checked.text);
    for (domain, status) in [
        ("www.acme.com", "MATCHES_LOAD_BALANCER_HOST"),
        ("*.apps.acme.com", "MATCHES_LOAD_BALANCER_HOST"),
        ("elsewhere.acme.com", "DOMAIN_LINKED_TO_WRONG_HOST"),
        ("cdn.acme.com", "RESOLVES_TO_IP"),
        ("nowhere.acme.com", "DOMAIN_NOT_CONFIGURED"),
        ("down.acme.com", "GENERIC_FAILURE"),
    ] {
        let found = results.iter().find(|r| r["domain_name"] == domain).unwrap();
        assert_eq!(found["status"], status, "{domain}: {found}");
        let passed = status.starts_with("MATCHES") || status.starts_with("RESOLVES");
        assert_eq!(found["error_details"].is_string(), !passed, "{found}");
    }
    assert!(!checked.text.contains("203.0.113.10"));
    let job = create(&t, &env, "job").await;
    t.get(&format!("/job/{job}/checkCustomDomain"))
        .await
        .expect(404);
}

async fn domains_follow_an_environment_clone_renamed<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let helm = create(&t, &env, "helm").await;
    t.post(
        &format!("/helm/{helm}/customDomain"),
        json!({"domain": "charts.acme.com", "generate_certificate": true}),
    )
    .await
    .expect(201);
    let copy = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy"}),
        )
        .await
        .expect(202)
        .id();
    let copied = t
        .get(&format!("/environment/{copy}/helm"))
        .await
        .expect(200)
        .body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let domains = t
        .get(&format!("/helm/{copied}/customDomain"))
        .await
        .expect(200);
    let short = &copied.replace('-', "")[..8];
    assert_eq!(
        domains.body["results"][0]["domain"],
        format!("charts-{short}.acme.com")
    );
    let original = t
        .get(&format!("/helm/{helm}/customDomain"))
        .await
        .expect(200);
    assert_eq!(original.body["results"][0]["domain"], "charts.acme.com");
}
