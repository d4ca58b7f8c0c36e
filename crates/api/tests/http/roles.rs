//! The role table of API.md, operation class by operation class, for each of the four roles:
//! 403 exactly where the role does not allow the operation, success elsewhere.

use crate::common;

use actix_web::http::Method;
use common::{App, T};
use domain::auth::Role;
use serde_json::{json, Value};

http_suite!(every_role_gets_403_exactly_where_api_md_says);

#[derive(Clone, Copy, Debug)]
enum Class {
    ReadOrganization,
    Read,
    Write,
    Deploy,
    Administer,
}

fn allowed(role: Role, class: Class) -> bool {
    use Class::*;
    match role {
        Role::Admin => true,
        Role::Devops => !matches!(class, Administer),
        Role::Viewer => matches!(class, ReadOrganization | Read),
        Role::BillingManager => matches!(class, ReadOrganization),
    }
}

async fn every_role_gets_403_exactly_where_api_md_says<S: App>(t: T<S>) {
    let (cluster, project, env) = t.hierarchy().await;
    let org = t.org.clone();
    let registry = t.registry().await;
    let container = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
        .expect(201)
        .id();
    let variable = t
        .post(
            &format!("/container/{container}/environmentVariable"),
            json!({"key": "K", "value": "v"}),
        )
        .await
        .expect(201)
        .id();
    // Run the image that organization-wide deploys and previews look for.
    t.post(
        &format!("/environment/{env}/container"),
        json!({"name": "pushed", "registry_id": registry, "image_name": "pushed", "tag": "0",
               "auto_deploy": true, "auto_preview": true}),
    )
    .await
    .expect(201);
    for role in [
        Role::BillingManager,
        Role::Viewer,
        Role::Devops,
        Role::Admin,
    ] {
        let token = t.token_with_role(role).await;
        let n = role.name().to_lowercase();
        // Never deployed: uninstalling it is allowed work with nothing to do (204).
        let idle = t
            .post(
                &format!("/environment/{env}/database"),
                json!({"name": format!("idle-{n}"), "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
            )
            .await
            .expect(201)
            .id();
        // Created after the database: linked to it, so unlinking has something to remove.
        let linked = t
            .post(
                &format!("/environment/{env}/application"),
                json!({"name": format!("app-{n}"), "git_repository": {"url": "https://github.com/acme/api.git"}}),
            )
            .await
            .expect(201)
            .id();
        let ops: Vec<(Class, Method, String, Option<Value>)> = vec![
            (
                Class::ReadOrganization,
                Method::GET,
                format!("/organization/{org}"),
                None,
            ),
            (
                Class::ReadOrganization,
                Method::GET,
                format!("/organization/{org}/availableRole"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/project"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/project/{project}"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/cluster/{cluster}"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/container"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/environmentVariable"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/secret"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/containerRegistry"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/gitToken"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/cloudA/credentials"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/status"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/deploymentHistory"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/status"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/statuses"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/project/{project}/environment/status"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/deploymentStage"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/service/{container}/deploymentStage"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/deploymentQueue"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/service/{container}/deploymentQueue"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/deploymentHistoryV2"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/deploymentHistoryV2"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/environment/{env}/deploymentStage"),
                Some(json!({"name": format!("s-{n}")})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/project"),
                Some(json!({"name": format!("p-{n}")})),
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/project/{project}"),
                Some(json!({"name": "shop"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/project/{project}/environment"),
                Some(json!({"name": format!("e-{n}")})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/cluster"),
                Some(json!({"name": format!("c-{n}"), "region": "r", "cloud_provider": "CLOUDA"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/environment/{env}/database"),
                Some(
                    json!({"name": format!("db-{n}"), "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
                ),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/container/{container}/environmentVariable"),
                Some(json!({"key": format!("V_{n}"), "value": "v"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/container/{container}/secret"),
                Some(json!({"key": format!("S_{n}"), "value": "s"})),
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/variable/{variable}"),
                Some(json!({"key": "K", "value": "w"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/containerRegistry"),
                Some(json!({"name": format!("r-{n}"), "kind": "DOCKER_HUB"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/gitToken"),
                Some(json!({"name": format!("g-{n}"), "type": "HOSTA", "token": "x"})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/cloudA/credentials"),
                Some(
                    json!({"name": format!("a-{n}"), "access_key_id": "A", "secret_access_key": "s"}),
                ),
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/container/{container}/deploy"),
                None,
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/environment/{env}/deploy"),
                None,
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/environment/{env}/redeploy"),
                None,
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/environment/{env}/service/deploy"),
                Some(json!({"containers": [{"id": container}]})),
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/database/{idle}/uninstall"),
                None,
            ),
            // Issue 31's operations.
            (
                Class::Read,
                Method::GET,
                format!("/database/{idle}/masterCredentials"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/database/{idle}/version"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/database/{idle}/backup"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/databaseConfiguration"),
                None,
            ),
            (
                Class::ReadOrganization,
                Method::GET,
                "/terraform/availableVersion".into(),
                None,
            ),
            // Issue 13's operations.
            (
                Class::ReadOrganization,
                Method::GET,
                "/cloudProvider".into(),
                None,
            ),
            (
                Class::ReadOrganization,
                Method::GET,
                "/availableContainerRegistry".into(),
                None,
            ),
            (
                Class::ReadOrganization,
                Method::GET,
                "/availableHelmRepository".into(),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/credentials"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/environments"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/services"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/services"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/cluster/{cluster}/environments"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/cluster/status"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/cluster/{cluster}/advancedSettings"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/member"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/helmRepository"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/cloudC/credentials"),
                Some(
                    json!({"name": format!("c-{n}"), "cloudC_subscription_id": "s", "cloudC_tenant_id": "t"}),
                ),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/onPremise/credentials"),
                Some(json!({"name": format!("p-{n}")})),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/onPremise/credentials"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/cluster/{cluster}/logs"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/helmRepository"),
                Some(
                    json!({"name": format!("h-{n}"), "kind": "HTTPS", "url": "https://charts.example.com", "skip_tls_verification": false, "config": {}}),
                ),
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/organization/{org}/cluster/{cluster}/advancedSettings"),
                Some(json!({"loki.log_retention_in_week": 6})),
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/container/{container}/environmentVariable/{variable}"),
                Some(json!({"key": "K", "value": format!("v-{n}")})),
            ),
            (
                Class::Write,
                Method::POST,
                format!("/container/{container}/environmentVariable/import"),
                Some(
                    json!({"overwrite": true, "vars": [{"name": "IMPORTED", "value": "v", "scope": "CONTAINER", "is_secret": false}]}),
                ),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/database/{idle}/application"),
                None,
            ),
            // Issue 14's operations.
            (
                Class::ReadOrganization,
                Method::GET,
                "/defaultContainerAdvancedSettings".into(),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/advancedSettings"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/container/{container}/clone"),
                Some(json!({"name": format!("web-{n}"), "environment_id": env})),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/organization/{org}/labelsGroups"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/organization/{org}/annotationsGroups"),
                Some(json!({"name": format!("a-{n}"), "annotations": [], "scopes": []})),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/container/{container}/customDomain"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/container/{container}/customDomain"),
                Some(
                    json!({"domain": format!("{}.acme.com", n.replace('_', "-")), "generate_certificate": true}),
                ),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/application/{linked}/deploymentRestriction"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/application/{linked}/deploymentRestriction"),
                Some(json!({"mode": "MATCH", "type": "PATH", "value": format!("{n}/")})),
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/container/{container}/advancedSettings"),
                Some(json!({"hpa.cpu.average_utilization_percent": 70})),
            ),
            (
                Class::Write,
                Method::DELETE,
                format!("/database/{idle}/application/{linked}"),
                None,
            ),
            (
                Class::Read,
                Method::GET,
                format!("/project/{project}/deploymentRule"),
                None,
            ),
            (
                Class::Write,
                Method::POST,
                format!("/project/{project}/deploymentRule"),
                Some(json!({"name": format!("rule-{n}"), "mode": "DEVELOPMENT",
                    "cluster_id": cluster, "timezone": "UTC", "start_time": "08:00",
                    "stop_time": "19:00", "weekdays": ["MONDAY"], "wildcard": "x-*"})),
            ),
            (
                Class::Read,
                Method::GET,
                format!("/environment/{env}/deploymentRule"),
                None,
            ),
            (
                Class::Write,
                Method::PUT,
                format!("/environment/{env}/deploymentRule/{env}"),
                Some(
                    json!({"timezone": "UTC", "start_time": "08:00", "stop_time": "19:00",
                    "weekdays": ["MONDAY"]}),
                ),
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/organization/{org}/container/preview"),
                Some(json!({"image_name": "pushed", "tag": n})),
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/organization/{org}/container/deploy"),
                Some(json!({"image_name": "pushed", "tag": n})),
            ),
            (
                Class::Deploy,
                Method::POST,
                format!("/organization/{org}/cluster/{cluster}/deploy?dry_run=true"),
                None,
            ),
            (
                Class::Administer,
                Method::GET,
                format!("/organization/{org}/inviteMember"),
                None,
            ),
            (
                Class::Administer,
                Method::POST,
                format!("/organization/{org}/inviteMember"),
                Some(json!({"email": format!("{n}@example.com")})),
            ),
            (
                Class::Administer,
                Method::GET,
                format!("/organization/{org}/apiToken"),
                None,
            ),
            (
                Class::Administer,
                Method::POST,
                format!("/organization/{org}/apiToken"),
                Some(json!({"name": format!("t-{n}"), "role_id": Role::Viewer.id().0})),
            ),
            (
                Class::Administer,
                Method::PUT,
                format!("/organization/{org}"),
                Some(json!({"name": "Acme"})),
            ),
        ];
        for (class, method, path, body) in ops {
            let r = t.call(Some(&token), method.clone(), &path, body).await;
            if allowed(role, class) {
                assert!(
                    (200..300).contains(&r.status),
                    "{role:?} {class:?} {method} {path}: {} {}",
                    r.status,
                    r.text
                );
            } else {
                assert_eq!(
                    r.status, 403,
                    "{role:?} {class:?} {method} {path}: {}",
                    r.text
                );
                assert!(r.body["message"].as_str().unwrap().contains(role.name()));
            }
        }
        // Deleting: a variable (write) and the organization (administer).
        let doomed = t
            .post(
                &format!("/container/{container}/environmentVariable"),
                json!({"key": format!("D_{n}"), "value": "v"}),
            )
            .await
            .expect(201)
            .id();
        let r = t
            .call(
                Some(&token),
                Method::DELETE,
                &format!("/variable/{doomed}"),
                None,
            )
            .await;
        assert_eq!(
            r.status,
            if allowed(role, Class::Write) {
                204
            } else {
                403
            },
            "{role:?}"
        );
        if role != Role::Admin {
            let r = t
                .call(
                    Some(&token),
                    Method::DELETE,
                    &format!("/organization/{org}"),
                    None,
                )
                .await;
            assert_eq!(r.status, 403, "{role:?}");
        }
    }
    let admin = t.token_with_role(Role::Admin).await;
    let r = t
        .call(
            Some(&admin),
            Method::DELETE,
            &format!("/organization/{org}"),
            None,
        )
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
}
