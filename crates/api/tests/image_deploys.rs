#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Organization-wide deployments by image over HTTP, on both backends: only the services running
//! the image at another tag with auto-deploy on are deployed, with the new tag.

mod common;

use common::{App, T};
use domain::auth::Role;
use serde_json::{json, Value};

http_suite!(
    a_new_tag_deploys_every_matching_container_and_only_them,
    a_new_tag_deploys_matching_jobs,
    image_deploys_are_checked,
);

async fn container<S: App>(t: &T<S>, env: &str, registry: &str, image: &str, auto: bool) -> String {
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": format!("c-{}", uuid::Uuid::new_v4().simple()), "registry_id": registry,
               "image_name": image.split(':').next().unwrap(),
               "tag": image.split(':').nth(1).unwrap(), "auto_deploy": auto}),
    )
    .await
    .expect(201)
    .id()
}

fn ids(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

async fn a_new_tag_deploys_every_matching_container_and_only_them<S: App>(t: T<S>) {
    let (_, project, first) = t.hierarchy().await;
    let second = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "staging"}),
        )
        .await
        .expect(201)
        .id();
    let registry = t.registry().await;
    let a = container(&t, &first, &registry, "nginx:1", true).await;
    let b = container(&t, &second, &registry, "nginx:1", true).await;
    let current = container(&t, &first, &registry, "nginx:2", true).await;
    let manual = container(&t, &second, &registry, "nginx:1", false).await;
    let other = container(&t, &first, &registry, "redis:1", true).await;
    let path = format!("/organization/{}/container/deploy", t.org);
    let done = t
        .post(&path, json!({"image_name": "nginx", "tag": "2"}))
        .await
        .expect(202);
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(ids(&done.body), expected);
    assert!(
        done.body["state"].is_string(),
        "the first status, as the public answer"
    );
    for id in [&a, &b] {
        t.settle(&format!("/container/{id}/status")).await;
        assert_eq!(
            t.get(&format!("/container/{id}")).await.expect(200).body["tag"],
            "2"
        );
        let history = t
            .get(&format!("/container/{id}/deploymentHistory"))
            .await
            .expect(200);
        assert_eq!(history.body["results"][0]["tag"], "2");
    }
    for (id, tag) in [(&current, "2"), (&manual, "1"), (&other, "1")] {
        let c = t.get(&format!("/container/{id}")).await.expect(200);
        assert_eq!(c.body["tag"], tag);
        let status = t.get(&format!("/container/{id}/status")).await.expect(200);
        assert_eq!(status.body["deployment_requests_count"], 0);
        assert_eq!(status.body["service_deployment_status"], "NEVER_DEPLOYED");
    }
    // Nothing left runs nginx at another tag with auto-deploy on.
    t.post(&path, json!({"image_name": "nginx", "tag": "2"}))
        .await
        .expect_error(404, "container with auto-deploy");
}

async fn a_new_tag_deploys_matching_jobs<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let job = t
        .post(
            &format!("/environment/{env}/job"),
            json!({"name": "cron", "schedule": {"cronjob": {"scheduled_at": "0 * * * *"}},
                   "auto_deploy": true,
                   "source": {"image": {"image_name": "worker", "tag": "1", "registry_id": registry}}}),
        )
        .await
        .expect(201)
        .id();
    let c = container(&t, &env, &registry, "worker:1", true).await;
    let done = t
        .post(
            &format!("/organization/{}/job/deploy", t.org),
            json!({"image_name": "worker", "tag": "7"}),
        )
        .await
        .expect(202);
    assert_eq!(ids(&done.body), vec![job.clone()]);
    t.settle(&format!("/job/{job}/status")).await;
    let shown = t.get(&format!("/job/{job}")).await.expect(200);
    assert_eq!(shown.body["source"]["image"]["tag"], "7");
    assert_eq!(
        t.get(&format!("/container/{c}")).await.expect(200).body["tag"],
        "1"
    );
}

async fn image_deploys_are_checked<S: App>(t: T<S>) {
    let path = format!("/organization/{}/container/deploy", t.org);
    t.post(&path, json!({"image_name": "nginx"}))
        .await
        .expect_error(400, "tag: is required");
    t.post(&path, json!({"image_name": " ", "tag": "1"}))
        .await
        .expect_error(400, "image_name:");
    let viewer = t.token_with_role(Role::Viewer).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::POST,
            &path,
            Some(json!({"image_name": "nginx", "tag": "2"})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let other = t.other_org_token().await;
    let r = t
        .call(
            Some(&other),
            actix_web::http::Method::POST,
            &path,
            Some(json!({"image_name": "nginx", "tag": "2"})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}
