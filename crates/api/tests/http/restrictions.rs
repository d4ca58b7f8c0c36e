//! Deployment restrictions over HTTP, on both backends: CRUD per kind, checks, and copies made
//! by an environment clone. (That they filter pushes: tests/webhooks.rs.)

use crate::common;

use common::{service_bodies, App, T};
use serde_json::json;

http_suite!(
    every_kind_a_push_deploys_has_restrictions,
    restrictions_are_checked,
    restrictions_follow_an_environment_clone,
);

async fn every_kind_a_push_deploys_has_restrictions<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    for (kind, body) in service_bodies(&registry) {
        let id = t
            .post(&format!("/environment/{env}/{kind}"), body)
            .await
            .expect(201)
            .id();
        let path = format!("/{kind}/{id}/deploymentRestriction");
        if matches!(kind, "container" | "database") {
            t.get(&path).await.expect(404);
            continue;
        }
        let created = t
            .post(
                &path,
                json!({"mode": "MATCH", "type": "PATH", "value": "src/"}),
            )
            .await
            .expect(201);
        assert_eq!(created.body["mode"], "MATCH");
        assert_eq!(created.body["type"], "PATH");
        assert_eq!(created.body["value"], "src/");
        assert!(created.body["created_at"].is_string());
        let rid = created.id();
        let edited = t
            .put(
                &format!("{path}/{rid}"),
                json!({"mode": "EXCLUDE", "type": "PATH", "value": "docs"}),
            )
            .await
            .expect(200);
        assert_eq!(edited.body["mode"], "EXCLUDE");
        let listed = t.get(&path).await.expect(200);
        assert_eq!(listed.body["results"].as_array().unwrap().len(), 1);
        assert_eq!(listed.body["results"][0]["value"], "docs");
        t.delete(&format!("{path}/{rid}")).await.expect(204);
        t.delete(&format!("{path}/{rid}")).await.expect(404);
        assert!(t.get(&path).await.body["results"]
            .as_array()
            .unwrap()
            .is_empty());
    }
}

async fn restrictions_are_checked<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let bodies = service_bodies("unused");
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            bodies[0].1.clone(),
        )
        .await
        .expect(201)
        .id();
    let mut other_body = bodies[0].1.clone();
    other_body["name"] = json!("other");
    let other = t
        .post(&format!("/environment/{env}/application"), other_body)
        .await
        .expect(201)
        .id();
    let path = format!("/application/{app}/deploymentRestriction");
    for (body, message) in [
        (
            json!({"mode": "MATCH", "type": "PATH", "value": "/src"}),
            "value:",
        ),
        (
            json!({"mode": "MATCH", "type": "PATH", "value": ""}),
            "value:",
        ),
        (
            json!({"mode": "ALWAYS", "type": "PATH", "value": "src"}),
            "mode:",
        ),
        (
            json!({"mode": "MATCH", "type": "FILE", "value": "src"}),
            "type:",
        ),
        (json!({"mode": "MATCH", "type": "PATH"}), "value:"),
    ] {
        t.post(&path, body).await.expect_error(400, message);
    }
    let body = json!({"mode": "MATCH", "type": "PATH", "value": "src"});
    let rid = t.post(&path, body.clone()).await.expect(201).id();
    t.post(&path, body.clone())
        .await
        .expect_error(409, "the service has this restriction already");
    // Another service's restriction is not found under this one.
    t.put(
        &format!("/application/{other}/deploymentRestriction/{rid}"),
        body.clone(),
    )
    .await
    .expect(404);
    t.delete(&format!("/application/{other}/deploymentRestriction/{rid}"))
        .await
        .expect(404);
    let stranger = t.other_org_token().await;
    let r = t
        .call(Some(&stranger), actix_web::http::Method::GET, &path, None)
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    // Deleting the service deletes its restrictions.
    t.delete(&format!("/application/{app}")).await.expect(204);
    t.get(&path).await.expect(404);
    let mut unit = t.capstan.store().read().await.unwrap();
    let kept = domain::ports::Repo::<domain::model::DeploymentRestriction>::get(
        &mut *unit,
        rid.parse().unwrap(),
    )
    .await
    .unwrap();
    assert!(kept.is_none(), "the restriction went with its service");
}

async fn restrictions_follow_an_environment_clone<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let job = t
        .post(
            &format!("/environment/{env}/job"),
            json!({"name": "build", "schedule": {"on_start": {}},
                   "source": {"docker": {"git_repository": {"url": "https://github.com/acme/jobs"}}}}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/job/{job}/deploymentRestriction"),
        json!({"mode": "EXCLUDE", "type": "PATH", "value": "README.md"}),
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
    let listed = t.get(&format!("/environment/{copy}/job")).await.expect(200);
    let copied = listed.body["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let restrictions = t
        .get(&format!("/job/{copied}/deploymentRestriction"))
        .await
        .expect(200);
    assert_eq!(restrictions.body["results"][0]["value"], "README.md");
    assert_eq!(restrictions.body["results"][0]["mode"], "EXCLUDE");
}
