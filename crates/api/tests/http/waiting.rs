//! `?wait=SECONDS` on status reads, on both backends: the answer comes once the deployment has
//! settled, without the client polling.

use crate::common;

use common::{App, T};
use serde_json::json;

http_suite!(
    statuses_wait_for_the_deployment_to_settle,
    the_wait_is_checked
);

/// A slow engine (5 s a step) behind a 1 s request time limit.
mod slow {
    async fn setup(backend: crate::common::Backend) -> crate::common::T<impl crate::common::App> {
        crate::common::setup_with_step(
            backend,
            |s| s.with_request_timeout(std::time::Duration::from_secs(1)),
            std::time::Duration::from_secs(5),
        )
        .await
    }

    #[actix_rt::test]
    async fn sqlite() {
        let backend = crate::common::sqlite().await.unwrap();
        super::a_wait_that_runs_out_answers_the_state_then(setup(backend).await).await;
    }

    #[actix_rt::test]
    async fn postgres() {
        let Some(backend) = crate::common::postgres().await else {
            return;
        };
        super::a_wait_that_runs_out_answers_the_state_then(setup(backend).await).await;
    }
}

/// The wait runs out before the deployment ends: 200 with the state then, not the time
/// limit's 503 (the wait counts on top of it).
async fn a_wait_that_runs_out_answers_the_state_then<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let asked = std::time::Instant::now();
    let then = t
        .get(&format!("/container/{container}/status?wait=2"))
        .await
        .expect(200);
    assert!(asked.elapsed() >= std::time::Duration::from_secs(2));
    assert_eq!(then.body["deployment_requests_count"], 1, "{}", then.text);
    t.get(&format!("/container/{container}/status?wait=61"))
        .await
        .expect_error(400, "wait: must be a whole number of seconds from 0 to 60");
}

async fn statuses_wait_for_the_deployment_to_settle<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let container = t.container(&env, "web").await;
    let queued = t
        .post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    assert_eq!(queued.body["deployment_requests_count"], 1);
    // Without wait: at once, while it runs.
    let now = t
        .get(&format!("/container/{container}/status"))
        .await
        .expect(200);
    assert_eq!(now.body["deployment_requests_count"], 1, "{}", now.text);
    // With wait: one answer, once it has settled.
    let settled = t
        .get(&format!("/container/{container}/status?wait=30"))
        .await
        .expect(200);
    assert_eq!(
        settled.body["deployment_requests_count"], 0,
        "{}",
        settled.text
    );
    assert_eq!(settled.body["state"], "DEPLOYED");

    t.post(&format!("/environment/{env}/stop"), json!({}))
        .await
        .expect(202);
    let env_status = t
        .get(&format!("/environment/{env}/status?wait=30"))
        .await
        .expect(200);
    assert_eq!(env_status.body["state"], "STOPPED", "{}", env_status.text);
    assert_eq!(env_status.body["deployment_requests_count"], 0);

    t.post(&format!("/environment/{env}/deploy"), json!({}))
        .await
        .expect(202);
    let statuses = t
        .get(&format!("/environment/{env}/statuses?wait=30"))
        .await
        .expect(200);
    assert_eq!(
        statuses.body["environment"]["state"], "DEPLOYED",
        "{}",
        statuses.text
    );
    assert_eq!(statuses.body["containers"][0]["state"], "DEPLOYED");
    // Already settled: answered at once, not after the 60 seconds asked.
    let asked = std::time::Instant::now();
    let again = t
        .get(&format!("/environment/{env}/statuses?wait=60"))
        .await
        .expect(200);
    assert!(asked.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(again.body["environment"]["deployment_requests_count"], 0);
}

async fn the_wait_is_checked<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    for bad in ["61", "-1", "soon"] {
        t.get(&format!("/environment/{env}/status?wait={bad}"))
            .await
            .expect_error(400, "wait: must be a whole number of seconds from 0 to 60");
    }
    // Credentials come first.
    let r = t
        .call(
            None,
            actix_web::http::Method::GET,
            &format!("/environment/{env}/status?wait=soon"),
            None,
        )
        .await;
    assert_eq!(r.status, 401);
    t.get(&format!(
        "/environment/{}/status?wait=5",
        uuid::Uuid::new_v4()
    ))
    .await
    .expect(404);
}
