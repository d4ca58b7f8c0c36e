#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The organization's resources beyond SPEC.md's endpoints, over HTTP on both backends: cloud
//! credentials of the three providers.

mod common;

use common::{App, T};
use serde_json::{json, Value};

http_suite!(
    credentials_of_each_provider_keep_their_members_and_hide_their_secret,
    the_organization_lists_credentials_of_every_provider,
    credentials_are_refused_with_the_member_at_fault,
);

async fn credentials_of_each_provider_keep_their_members_and_hide_their_secret<S: App>(t: T<S>) {
    let org = t.org.clone();
    let cases = [
        (
            "altcloud",
            json!({"name": "scw", "altcloud_access_key": "SCWKEY", "altcloud_secret_key": "s3cret-alt",
                   "altcloud_project_id": "proj-1", "altcloud_organization_id": "org-1"}),
            json!({"object_type": "ALTCLOUD", "name": "scw", "altcloud_access_key": "SCWKEY",
                   "altcloud_project_id": "proj-1", "altcloud_organization_id": "org-1"}),
        ),
        (
            "cloudC",
            json!({"name": "az", "cloudC_subscription_id": "sub-1", "cloudC_tenant_id": "ten-1"}),
            json!({"object_type": "CLOUDC", "name": "az", "cloudC_subscription_id": "sub-1",
                   "cloudC_tenant_id": "ten-1", "cloudC_application_id": "",
                   "cloudC_application_object_id": ""}),
        ),
        (
            "cloudA",
            json!({"type": "CLOUDA_ROLE", "name": "role", "role_arn": "arn:aws:iam::1:role/capstan"}),
            json!({"object_type": "CLOUDA_ROLE", "name": "role",
                   "role_arn": "arn:aws:iam::1:role/capstan"}),
        ),
        (
            "cloudA",
            json!({"type": "AWS_STATIC", "name": "keys", "access_key_id": "AKIA1",
                   "secret_access_key": "s3cret-a"}),
            json!({"object_type": "CLOUDA", "name": "keys", "access_key_id": "AKIA1"}),
        ),
    ];
    for (segment, body, shown) in cases {
        let path = format!("/organization/{org}/{segment}/credentials");
        let created = t.post(&path, body.clone()).await.expect(201);
        let id = created.id();
        let mut expected = shown.clone();
        expected["id"] = json!(id);
        assert_eq!(created.body, expected, "{segment}");
        assert!(!created.text.contains("s3cret"), "{segment}");
        let got = t.get(&format!("{path}/{id}")).await.expect(200);
        assert_eq!(got.body, expected, "{segment}");
        // Another provider's route does not find them.
        let other = if segment == "cloudC" {
            "altcloud"
        } else {
            "cloudC"
        };
        t.get(&format!("/organization/{org}/{other}/credentials/{id}"))
            .await
            .expect_error(404, "credentials not found");
        // An edit without the secret keeps it; a new name is kept.
        let mut edit = body.clone();
        edit["name"] = json!(format!("{}-2", body["name"].as_str().unwrap()));
        for secret in ["altcloud_secret_key", "secret_access_key"] {
            edit.as_object_mut().unwrap().remove(secret);
        }
        let edited = t.put(&format!("{path}/{id}"), edit).await.expect(200);
        assert_eq!(
            edited.body["name"],
            format!("{}-2", body["name"].as_str().unwrap())
        );
        let listed = t.get(&path).await.expect(200);
        let objects: Vec<&Value> = listed.body["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["object_type"])
            .collect();
        assert!(
            objects.iter().all(|o| match segment {
                "cloudA" => *o == "CLOUDA" || *o == "CLOUDA_ROLE",
                "altcloud" => *o == "ALTCLOUD",
                _ => *o == "CLOUDC",
            }),
            "{segment}: {objects:?}"
        );
    }
    // A role becoming an access key needs the key's secret.
    let path = format!("/organization/{org}/cloudA/credentials");
    let role = t
        .post(
            &path,
            json!({"type": "CLOUDA_ROLE", "name": "r2", "role_arn": "arn:x"}),
        )
        .await
        .expect(201)
        .id();
    t.put(
        &format!("{path}/{role}"),
        json!({"type": "AWS_STATIC", "name": "r2", "access_key_id": "AKIA9"}),
    )
    .await
    .expect_error(400, "secret_access_key: is required");
    t.delete(&format!("{path}/{role}")).await.expect(204);
    t.get(&format!("{path}/{role}"))
        .await
        .expect_error(404, "credentials not found");
}

async fn the_organization_lists_credentials_of_every_provider<S: App>(t: T<S>) {
    let org = t.org.clone();
    for (segment, body) in [
        (
            "cloudA",
            json!({"name": "a", "access_key_id": "AKIA", "secret_access_key": "s"}),
        ),
        (
            "altcloud",
            json!({"name": "b", "altcloud_access_key": "k", "altcloud_secret_key": "s",
                   "altcloud_project_id": "p", "altcloud_organization_id": "o"}),
        ),
        (
            "cloudC",
            json!({"name": "c", "cloudC_subscription_id": "s", "cloudC_tenant_id": "t"}),
        ),
    ] {
        t.post(&format!("/organization/{org}/{segment}/credentials"), body)
            .await
            .expect(201);
    }
    let all = t
        .get(&format!("/organization/{org}/credentials"))
        .await
        .expect(200);
    let mut kinds: Vec<String> = all.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e["clusters"].is_array());
            e["credential"]["object_type"].as_str().unwrap().to_string()
        })
        .collect();
    kinds.sort();
    assert_eq!(kinds, ["ALTCLOUD", "CLOUDA", "CLOUDC"]);
    assert_eq!(all.body["pagination"]["total_count"], 3);
    let page = t
        .get(&format!(
            "/organization/{org}/credentials?page=2&page_size=2"
        ))
        .await
        .expect(200);
    assert_eq!(page.body["results"].as_array().unwrap().len(), 1);
    let other = t.other_org_token().await;
    let r = t
        .call(
            Some(&other),
            actix_web::http::Method::GET,
            &format!("/organization/{org}/credentials"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn credentials_are_refused_with_the_member_at_fault<S: App>(t: T<S>) {
    let org = t.org.clone();
    for (segment, body, message) in [
        (
            "altcloud",
            json!({"name": "b", "altcloud_access_key": "k", "altcloud_project_id": "p",
                   "altcloud_organization_id": "o"}),
            "altcloud_secret_key: is required",
        ),
        (
            "cloudC",
            json!({"name": "c", "cloudC_tenant_id": "t"}),
            "cloudC_subscription_id: is required",
        ),
        (
            "cloudA",
            json!({"type": "EKS_ANYWHERE_VSPHERE_STATIC", "name": "x"}),
            "type: must be AWS_STATIC or CLOUDA_ROLE",
        ),
        (
            "cloudA",
            json!({"type": "CLOUDA_ROLE", "name": "x"}),
            "role_arn: is required",
        ),
    ] {
        t.post(&format!("/organization/{org}/{segment}/credentials"), body)
            .await
            .expect_error(400, message);
    }
}
