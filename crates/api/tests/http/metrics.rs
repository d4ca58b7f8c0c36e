//! `GET /metrics` on both backends: Prometheus text without credentials, requests by route
//! template and status, how deployments end, the queue's depth, and rate-limit refusals.

use crate::common;

use actix_web::http::Method;
use common::{App, T};
use serde_json::json;

http_suite!(metrics_count_requests_deployments_and_the_queue);

mod limited {
    #[actix_rt::test]
    async fn sqlite() {
        let backend = crate::common::sqlite().await.unwrap();
        let t = crate::common::setup_with(backend, |s| {
            s.with_limiter(capstan_api::limits::RateLimiter::local(3))
        })
        .await;
        super::refusals_are_counted(t).await;
    }

    #[actix_rt::test]
    async fn postgres() {
        let Some(backend) = crate::common::postgres().await else {
            return;
        };
        let t = crate::common::setup_with(backend, |s| {
            s.with_limiter(capstan_api::limits::RateLimiter::local(3))
        })
        .await;
        super::refusals_are_counted(t).await;
    }
}

/// The value of the sample whose line starts with `series` (`name{labels}`).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn scrape<S: App>(t: &T<S>) -> String {
    let r = t.call(None, Method::GET, "/metrics", None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r
        .headers
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    r.text
}

async fn metrics_count_requests_deployments_and_the_queue<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    t.get(&format!("/environment/{}/status", uuid::Uuid::new_v4()))
        .await
        .expect(404);
    // Held before its first step, the deployment is in the queue whenever the scrape comes.
    let id: domain::ids::ServiceId = container.parse().unwrap();
    t.capstan
        .hold(id, domain::model::ServiceState::DeploymentQueued)
        .await
        .unwrap();
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let running = scrape(&t).await;
    let waiting = sample(
        &running,
        "capstan_deployment_queue_depth{status=\"QUEUED\"}",
    )
    .unwrap()
        + sample(
            &running,
            "capstan_deployment_queue_depth{status=\"RUNNING\"}",
        )
        .unwrap();
    assert!(waiting >= 1.0, "{running}");
    t.capstan.release(id).await.unwrap();
    t.settle(&format!("/container/{container}/status")).await;
    // The worker counts an ending once it is committed, so a reader may see it end first.
    finished_counted(&t).await;

    let text = scrape(&t).await;
    // Route templates, never raw paths (bounded label values).
    assert_eq!(
        sample(
            &text,
            "capstan_http_requests_total{method=\"POST\",route=\"/environment/{environmentId}/container\",status=\"201\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "capstan_http_requests_total{method=\"GET\",route=\"/environment/{environmentId}/status\",status=\"404\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains(&container), "no ids in labels");
    // The store's load: every unit of this test so far lent a connection, and a read adds one.
    let lent = |text: &str| sample(text, "capstan_store_connections_lent_total").unwrap_or(0.0);
    let before = lent(&text);
    assert!(before > 0.0, "{text}");
    t.get(&format!("/container/{container}")).await.expect(200);
    assert!(lent(&scrape(&t).await) > before);
    assert!(sample(
        &text,
        "capstan_http_request_duration_seconds_count{method=\"POST\",route=\"/container/{containerId}/deploy\"}"
    )
    .is_some_and(|n| n >= 1.0));
    assert_eq!(
        sample(
            &text,
            "capstan_deployments_finished_total{action=\"DEPLOY\",status=\"SUCCESS\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "capstan_deployment_duration_seconds_count{action=\"DEPLOY\",status=\"SUCCESS\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "capstan_deployment_queue_depth{status=\"QUEUED\"}"),
        Some(0.0)
    );
}

/// Waits until one successful deployment is counted.
async fn finished_counted<S: App>(t: &T<S>) {
    let series = "capstan_deployments_finished_total{action=\"DEPLOY\",status=\"SUCCESS\"}";
    let seen = std::cell::RefCell::new(String::new());
    common::eventually(
        common::WITHIN,
        || format!("never counted: {}", seen.borrow()),
        async || {
            let text = scrape(t).await;
            let counted = sample(&text, series).is_some();
            *seen.borrow_mut() = text;
            counted.then_some(())
        },
    )
    .await
}

async fn refusals_are_counted<S: App>(t: T<S>) {
    let mut refused = 0;
    for _ in 0..5 {
        if t.get(&format!("/organization/{}", t.org)).await.status == 429 {
            refused += 1;
        }
    }
    assert!(refused >= 1);
    // The scrape itself is not metered.
    let text = scrape(&t).await;
    assert_eq!(
        sample(&text, "capstan_rate_limit_refusals_total"),
        Some(refused as f64),
        "{text}"
    );
}
