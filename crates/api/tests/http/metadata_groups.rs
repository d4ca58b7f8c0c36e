//! Labels and annotations groups over HTTP, on both backends: CRUD, checks, attachment to
//! services, what carries them, and the 409 of deleting one in use.

use crate::common;

use common::{service_bodies, App, T};
use serde_json::{json, Value};

http_suite!(
    groups_of_both_kinds_are_kept_and_checked,
    services_carry_groups_and_a_group_in_use_stays,
    clusters_carry_labels_groups_and_hold_them,
);

async fn labels<S: App>(t: &T<S>, name: &str) -> String {
    t.post(
        &format!("/organization/{}/labelsGroups", t.org),
        json!({"name": name, "labels": [{"key": "team", "value": "core", "propagate_to_cloud_provider": true}]}),
    )
    .await
    .expect(201)
    .id()
}

async fn annotations<S: App>(t: &T<S>, name: &str) -> String {
    t.post(
        &format!("/organization/{}/annotationsGroups", t.org),
        json!({"name": name, "annotations": [{"key": "example.com/owner", "value": "Jane Doe"}], "scopes": ["PODS", "DEPLOYMENTS"]}),
    )
    .await
    .expect(201)
    .id()
}

async fn groups_of_both_kinds_are_kept_and_checked<S: App>(t: T<S>) {
    let org = t.org.clone();
    let l = labels(&t, "team").await;
    let a = annotations(&t, "owner").await;
    let shown = t
        .get(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect(200);
    assert_eq!(shown.body["name"], "team");
    assert_eq!(
        shown.body["labels"],
        json!([{"key": "team", "value": "core", "propagate_to_cloud_provider": true}])
    );
    let shown = t
        .get(&format!("/organization/{org}/annotationsGroups/{a}"))
        .await
        .expect(200);
    assert_eq!(shown.body["annotations"][0]["value"], "Jane Doe");
    assert_eq!(shown.body["scopes"], json!(["DEPLOYMENTS", "PODS"]));
    // Each kind under its own routes only.
    t.get(&format!("/organization/{org}/annotationsGroups/{l}"))
        .await
        .expect(404);
    let listed = t
        .get(&format!("/organization/{org}/labelsGroups"))
        .await
        .expect(200);
    assert_eq!(listed.body["results"].as_array().unwrap().len(), 1);
    assert_eq!(listed.body["results"][0]["associated_items_count"], 0);
    let edited = t
        .put(
            &format!("/organization/{org}/labelsGroups/{l}"),
            json!({"name": "squad", "labels": [{"key": "squad", "value": "", "propagate_to_cloud_provider": false}]}),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["name"], "squad");
    assert_eq!(edited.body["labels"][0]["key"], "squad");
    // Checks: names unique per kind, Kubernetes keys, known scopes.
    t.post(
        &format!("/organization/{org}/labelsGroups"),
        json!({"name": "SQUAD", "labels": []}),
    )
    .await
    .expect(409);
    annotations(&t, "squad").await;
    for (path, body, message) in [
        (
            "labelsGroups",
            json!({"name": "x", "labels": [{"key": "bad key", "value": "v", "propagate_to_cloud_provider": false}]}),
            "labels[0].key:",
        ),
        (
            "labelsGroups",
            json!({"name": "x", "labels": [{"key": "k", "value": "v"}]}),
            "labels[0].propagate_to_cloud_provider",
        ),
        ("labelsGroups", json!({"labels": []}), "name"),
        (
            "annotationsGroups",
            json!({"name": "x", "annotations": [], "scopes": ["NODES"]}),
            "scopes[0]",
        ),
        (
            "annotationsGroups",
            json!({"name": "x", "annotations": [{"key": "a", "value": "1"}, {"key": "a", "value": "2"}], "scopes": []}),
            "annotations:",
        ),
    ] {
        t.post(&format!("/organization/{org}/{path}"), body)
            .await
            .expect_error(400, message);
    }
    t.delete(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect(204);
    t.get(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect(404);
    let stranger = t.other_org_token().await;
    let r = t
        .call(
            Some(&stranger),
            actix_web::http::Method::GET,
            &format!("/organization/{org}/annotationsGroups/{a}"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

fn ids(groups: &Value) -> Vec<String> {
    groups
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {groups}"))
        .iter()
        .map(|g| g["id"].as_str().unwrap().to_string())
        .collect()
}

async fn services_carry_groups_and_a_group_in_use_stays<S: App>(t: T<S>) {
    let org = t.org.clone();
    let (_, _, env) = t.hierarchy().await;
    let l = labels(&t, "team").await;
    let a = annotations(&t, "owner").await;
    let mut body = service_bodies("")[0].1.clone();
    body["labels_groups"] = json!([{"id": l}]);
    body["annotations_groups"] = json!([{"id": a}]);
    let app = t
        .post(&format!("/environment/{env}/application"), body.clone())
        .await
        .expect(201);
    assert_eq!(ids(&app.body["labels_groups"]), [l.as_str()]);
    assert_eq!(app.body["labels_groups"][0]["labels"][0]["key"], "team");
    assert_eq!(ids(&app.body["annotations_groups"]), [a.as_str()]);
    let app = app.id();
    // Helm and terraform do not carry groups.
    let helm = t
        .post(
            &format!("/environment/{env}/helm"),
            service_bodies("")[4].1.clone(),
        )
        .await
        .expect(201);
    assert!(helm.body.get("labels_groups").is_none(), "{}", helm.text);
    // A group of the wrong kind, or unknown, is refused naming the member.
    let mut wrong = body.clone();
    wrong["name"] = json!("wrong");
    wrong["labels_groups"] = json!([{"id": a}]);
    t.post(&format!("/environment/{env}/application"), wrong)
        .await
        .expect_error(400, "labels_groups[0].id");
    let items = t
        .get(&format!(
            "/organization/{org}/labelsGroups/{l}/associatedItems"
        ))
        .await
        .expect(200);
    assert_eq!(items.body["results"][0]["item_id"], app.as_str());
    assert_eq!(items.body["results"][0]["item_type"], "APPLICATION");
    assert_eq!(items.body["results"][0]["environment_id"], env.as_str());
    assert_eq!(
        items.body["pagination"]["total_count"], 1,
        "a list, as API.md has them"
    );
    t.delete(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect_error(409, "the group is attached to 1 service");
    // Deployed, then the group changes: the service is out of date.
    t.post(
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": "4f2a9c1"}),
    )
    .await
    .expect(202);
    let status = format!("/application/{app}/status");
    t.settle(&status).await;
    t.put(
        &format!("/organization/{org}/labelsGroups/{l}"),
        json!({"name": "team", "labels": [{"key": "team", "value": "edge", "propagate_to_cloud_provider": false}]}),
    )
    .await
    .expect(200);
    assert_eq!(
        t.get(&status).await.body["service_deployment_status"],
        "OUT_OF_DATE"
    );
    // Clones carry the groups.
    let copy = t
        .post(
            &format!("/application/{app}/clone"),
            json!({"name": "copy", "environment_id": env}),
        )
        .await
        .expect(202);
    assert_eq!(ids(&copy.body["labels_groups"]), [l.as_str()]);
    let env_copy = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy"}),
        )
        .await
        .expect(202)
        .id();
    let listed = t
        .get(&format!("/environment/{env_copy}/application"))
        .await
        .expect(200);
    let copies = listed.body["results"].as_array().unwrap();
    assert!(!copies.is_empty(), "{}", listed.text);
    for s in copies {
        assert_eq!(ids(&s["annotations_groups"]), [a.as_str()], "{s}");
    }
    let counted = t
        .get(&format!("/organization/{org}/labelsGroups"))
        .await
        .expect(200);
    assert_eq!(counted.body["results"][0]["associated_items_count"], 4);
    // An edit that names no groups keeps them; one that names none detaches them.
    let mut edit = service_bodies("")[0].1.clone();
    t.put(&format!("/application/{app}"), edit.clone())
        .await
        .expect(200);
    let kept = t.get(&format!("/application/{app}")).await.expect(200);
    assert_eq!(ids(&kept.body["labels_groups"]), [l.as_str()]);
    edit["labels_groups"] = json!([]);
    let detached = t
        .put(&format!("/application/{app}"), edit)
        .await
        .expect(200);
    assert!(ids(&detached.body["labels_groups"]).is_empty());
    assert_eq!(ids(&detached.body["annotations_groups"]), [a.as_str()]);
}

async fn clusters_carry_labels_groups_and_hold_them<S: App>(t: T<S>) {
    let org = t.org.clone();
    let l = labels(&t, "team").await;
    let a = annotations(&t, "owner").await;
    let body = |groups: Value| {
        json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "labels_groups": groups})
    };
    let created = t
        .post(
            &format!("/organization/{org}/cluster"),
            body(json!([{"id": l}, {"id": l}])),
        )
        .await
        .expect(201);
    assert_eq!(created.body["labels_groups"], json!([{"id": l}]));
    let cluster = created.id();
    let path = format!("/organization/{org}/cluster/{cluster}");
    assert_eq!(
        t.get(&path).await.expect(200).body["labels_groups"],
        json!([{"id": l}])
    );
    // Only labels groups of the organization.
    t.put(&path, body(json!([{"id": a}])))
        .await
        .expect_error(400, "labels_groups[0].id: no labels group");
    t.put(
        &path,
        body(json!([{"id": l}, {"id": uuid::Uuid::new_v4()}])),
    )
    .await
    .expect_error(400, "labels_groups[1].id: no labels group");
    t.delete(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect_error(409, "the group is attached to 1 cluster(s)");
    // Detached, it can go.
    let edited = t.put(&path, body(json!([]))).await.expect(200);
    assert_eq!(edited.body["labels_groups"], json!([]));
    t.delete(&format!("/organization/{org}/labelsGroups/{l}"))
        .await
        .expect(204);
}
