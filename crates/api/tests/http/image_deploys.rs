//! Organization-wide deployments by image over HTTP, on both backends: only the services running
//! the image at another tag with auto-deploy on are deployed, with the new tag.

use crate::common;

use common::{service_bodies, App, T};
use domain::auth::Role;
use serde_json::{json, Value};

http_suite!(
    a_new_tag_deploys_every_matching_container_and_only_them,
    a_new_tag_deploys_matching_jobs,
    image_deploys_are_checked,
    a_new_tag_is_previewed_in_a_copy_of_each_environment,
    a_preview_name_held_by_another_environment_is_a_conflict,
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
    for action in ["deploy", "preview"] {
        image_deploy_is_checked(&t, &format!("/organization/{}/container/{action}", t.org)).await;
    }
}

async fn image_deploy_is_checked<S: App>(t: &T<S>, path: &str) {
    let path = path.to_string();
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

async fn previewed<S: App>(t: &T<S>, env: &str, registry: &str, name: &str, image: &str) -> String {
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": name, "registry_id": registry, "image_name": image, "tag": "1",
               "auto_preview": true, "auto_deploy": false}),
    )
    .await
    .expect(201)
    .id()
}

/// The environments of a project, by name: (id, mode).
async fn environments<S: App>(t: &T<S>, project: &str) -> Vec<(String, String, String)> {
    let r = t
        .get(&format!("/project/{project}/environment"))
        .await
        .expect(200);
    let mut out: Vec<_> = r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["id"].as_str().unwrap().to_string(),
                e["mode"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The services of an environment by name: (name, id).
async fn services<S: App>(t: &T<S>, env: &str) -> Vec<(String, String)> {
    let r = t
        .get(&format!("/environment/{env}/services"))
        .await
        .expect(200);
    let mut out: Vec<_> = r.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn a_new_tag_is_previewed_in_a_copy_of_each_environment<S: App>(t: T<S>) {
    let (_, project, prod) = t.hierarchy().await;
    let registry = t.registry().await;
    let web = previewed(&t, &prod, &registry, "web", "shop").await;
    let db = t
        .post(
            &format!("/environment/{prod}/database"),
            json!({"name": "db", "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/container/{web}/environmentVariable"),
        json!({"key": "MODE", "value": "preview-me"}),
    )
    .await
    .expect(201);
    // Not previewed: auto_preview off, or another image.
    let mut quiet = service_bodies(&registry)[1].1.clone();
    quiet["name"] = json!("quiet");
    quiet["image_name"] = json!("shop");
    t.post(&format!("/environment/{prod}/container"), quiet)
        .await
        .expect(201);
    previewed(&t, &prod, &registry, "other", "billing").await;

    let path = format!("/organization/{}/container/preview", t.org);
    let done = t
        .post(&path, json!({"image_name": "shop", "tag": "2"}))
        .await
        .expect(202);
    let envs = environments(&t, &project).await;
    assert_eq!(envs.len(), 2, "{envs:?}");
    let (name, preview, mode) = envs.iter().find(|e| e.1 != prod).cloned().unwrap();
    assert_eq!(
        (name.as_str(), mode.as_str()),
        ("prod (preview 2)", "PREVIEW")
    );
    let copies = services(&t, &preview).await;
    let names: Vec<&str> = copies.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(names, ["db", "other", "quiet", "web"]);
    let copy = copies.iter().find(|c| c.0 == "web").unwrap().1.clone();
    assert_eq!(ids(&done.body), vec![copy.clone()]);
    // The copy runs the new tag with the source's variables; everything in it is deployed.
    let settled = t.settle(&format!("/environment/{preview}/status")).await;
    assert_eq!(settled["state"], "DEPLOYED", "{settled}");
    let shown = t.get(&format!("/container/{copy}")).await.expect(200);
    assert_eq!(shown.body["tag"], "2");
    let vars = t
        .get(&format!("/container/{copy}/environmentVariable"))
        .await
        .expect(200);
    assert!(vars.text.contains("preview-me"), "{}", vars.text);
    // The source is untouched.
    assert_eq!(
        t.get(&format!("/container/{web}")).await.expect(200).body["tag"],
        "1"
    );
    let source = t.get(&format!("/container/{web}/status")).await.expect(200);
    assert_eq!(source.body["service_deployment_status"], "NEVER_DEPLOYED");
    assert_eq!(
        t.get(&format!("/database/{db}/status")).await.body["service_deployment_status"],
        "NEVER_DEPLOYED"
    );

    // The same tag again: the preview's container is deployed again, no second copy.
    let again = t
        .post(&path, json!({"image_name": "shop", "tag": "2"}))
        .await
        .expect(202);
    assert_eq!(ids(&again.body), vec![copy.clone()]);
    assert_eq!(environments(&t, &project).await.len(), 2);
    t.settle(&format!("/container/{copy}/status")).await;
    let history = t
        .get(&format!("/container/{copy}/deploymentHistory"))
        .await
        .expect(200);
    assert_eq!(history.body["results"].as_array().unwrap().len(), 2);

    // Another tag: another preview, of the source only (previews are not previewed).
    t.post(&path, json!({"image_name": "shop", "tag": "3"}))
        .await
        .expect(202);
    let envs = environments(&t, &project).await;
    let names: Vec<&str> = envs.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["prod", "prod (preview 2)", "prod (preview 3)"]);
    t.post(&path, json!({"image_name": "nothing", "tag": "3"}))
        .await
        .expect_error(404, "container with auto-preview");
}

async fn a_preview_name_held_by_another_environment_is_a_conflict<S: App>(t: T<S>) {
    let (_, project, prod) = t.hierarchy().await;
    let registry = t.registry().await;
    previewed(&t, &prod, &registry, "web", "shop").await;
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "prod (preview 9)", "mode": "STAGING"}),
    )
    .await
    .expect(201);
    t.post(
        &format!("/organization/{}/container/preview", t.org),
        json!({"image_name": "shop", "tag": "9"}),
    )
    .await
    .expect_error(409, "the environment 'prod (preview 9)' that would preview");
    assert_eq!(environments(&t, &project).await.len(), 2);
}
