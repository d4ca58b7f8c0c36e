//! Complete records over HTTP: every member the public description requires is answered, kept
//! as sent, edited, cloned, and given a documented default when not sent; on both backends.

use crate::common;

use common::{service_bodies, App, T};
use domain::auth::Role;
use serde_json::{json, Value};

http_suite!(
    members_sent_are_kept_edited_and_cloned,
    members_not_sent_get_their_documented_defaults,
    images_show_their_registry_as_it_is_now,
    partial_edits_of_applications_and_databases_keep_the_rest,
    bad_members_are_named,
    a_project_counts_its_environments,
    a_git_token_shows_its_api_address,
    an_environment_names_who_last_changed_it,
    a_database_shows_its_maxima_and_disk_encryption,
    a_git_token_shows_the_expiry_its_client_gave,
);

/// A probe as sent and as shown (with the nullable members of its type that default to null).
fn probe(kind: &str, port: u16) -> Value {
    let target = match kind {
        "tcp" => json!({"port": port, "host": null}),
        "grpc" => json!({"port": port, "service": null}),
        _ => json!({"port": port}),
    };
    json!({"type": {kind: target}, "initial_delay_seconds": 5, "period_seconds": 7,
           "timeout_seconds": 2, "success_threshold": 1, "failure_threshold": 4})
}

/// Members of the public description beyond what SPEC.md's endpoints named, per kind.
fn full_bodies(registry: &str) -> Vec<(&'static str, Value)> {
    let checks =
        json!({"readiness_probe": probe("tcp", 8080), "liveness_probe": probe("grpc", 8080)});
    let workload = json!({"gpu": 1, "ephemeral_storage_in_gib": 3, "cpu_architecture": "ARM64",
        "auto_preview": true, "healthchecks": checks});
    let mut bodies = service_bodies(registry);
    for (kind, body) in bodies.iter_mut() {
        let extra = match *kind {
            "application" | "container" => {
                let mut w = workload.clone();
                w["storage"] = json!([{"type": "FAST_SSD", "size": 20, "mount_point": "/data"}]);
                if *kind == "application" {
                    w["docker_target_build_stage"] = json!("runtime");
                }
                w
            }
            "job" => {
                let mut w = workload.clone();
                w["port"] = json!(9000);
                w
            }
            "terraform" => json!({
                "auto_deploy_config": {"auto_deploy": true, "terraform_action": "PLAN"},
                "backend": {"user_provided": {}},
                "provider_version": {"read_from_terraform_block": false, "explicit_version": "1.8.5"},
                "job_resources": {"cpu_milli": 750, "ram_mib": 2048, "gpu": 0, "storage_gib": 4},
                "use_cluster_credentials": true,
                "action_extra_arguments": {"apply": ["-parallelism=2"]},
                "engine": "OPEN_TOFU",
            }),
            _ => json!({}),
        };
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body["icon_uri"] = json!(format!("https://icons.example.com/{kind}.svg"));
    }
    bodies
}

/// Each member of `sent` (but the name and the inputs shown in another form) is answered as sent.
fn assert_kept(kind: &str, sent: &Value, got: &Value) {
    for (k, v) in sent.as_object().unwrap() {
        if [
            "registry_id",
            "git_repository",
            "source",
            "terraform_files_source",
            "values_override",
            "ports",
            "schedule",
            "storage",
        ]
        .contains(&k.as_str())
        {
            continue;
        }
        assert_eq!(&got[k], v, "{kind}.{k}: {got}");
    }
}

async fn members_sent_are_kept_edited_and_cloned<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let registry = t.registry().await;
    for (kind, body) in full_bodies(&registry) {
        let created = t
            .post(&format!("/environment/{env}/{kind}"), body.clone())
            .await
            .expect(201);
        assert_kept(kind, &body, &created.body);
        let id = created.id();
        let got = t.get(&format!("/{kind}/{id}")).await.expect(200);
        assert_kept(kind, &body, &got.body);
        if kind == "application" || kind == "container" {
            let volume = &got.body["storage"][0];
            assert_eq!(
                (&volume["type"], &volume["size"], &volume["mount_point"]),
                (&json!("FAST_SSD"), &json!(20), &json!("/data"))
            );
            assert!(volume["id"].is_string(), "a volume gets an id");
        }
        let mut edited = body.clone();
        edited["icon_uri"] = json!("app://capstan/edited");
        if kind != "database" && kind != "helm" && kind != "terraform" {
            edited["gpu"] = json!(2);
            edited["healthchecks"] = json!({"readiness_probe": probe("http", 80)});
        }
        if kind == "terraform" {
            edited["job_resources"]["ram_mib"] = json!(4096);
        }
        let put = t
            .put(&format!("/{kind}/{id}"), edited.clone())
            .await
            .expect(200);
        let mut shown_edit = edited.clone();
        if let Some(check) = shown_edit.pointer_mut("/healthchecks/readiness_probe/type/http") {
            // The defaults of an HTTP probe are filled in.
            check["path"] = json!("/");
            check["scheme"] = json!("HTTP");
        }
        if kind != "database" && kind != "helm" && kind != "terraform" {
            shown_edit["healthchecks"]["liveness_probe"] = Value::Null;
        }
        assert_kept(kind, &shown_edit, &put.body);
    }
    let clone = t
        .post(
            &format!("/environment/{env}/clone"),
            json!({"name": "copy", "project_id": project}),
        )
        .await
        .expect(202)
        .id();
    for (kind, _) in full_bodies(&registry) {
        let copy = &t
            .get(&format!("/environment/{clone}/{kind}"))
            .await
            .expect(200)
            .body["results"][0];
        assert_eq!(copy["icon_uri"], "app://capstan/edited", "{kind}: {copy}");
        if kind == "terraform" {
            assert_eq!(copy["job_resources"]["ram_mib"], 4096);
            assert_eq!(copy["backend"], json!({"user_provided": {}}));
        }
        if kind == "job" {
            assert_eq!(copy["gpu"], 2);
            assert_eq!(copy["port"], 9000);
        }
    }
}

async fn members_not_sent_get_their_documented_defaults<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    for (kind, body) in service_bodies(&registry) {
        let s = t
            .post(&format!("/environment/{env}/{kind}"), body)
            .await
            .expect(201)
            .body;
        assert_eq!(s["icon_uri"], format!("app://capstan/{kind}"), "{kind}");
        if ["application", "container", "job"].contains(&kind) {
            assert_eq!(s["gpu"], 0, "{kind}");
            assert_eq!(s["cpu_architecture"], "AMD64", "{kind}");
            assert_eq!(s["maximum_cpu"], 16000, "{kind}");
            assert_eq!(s["maximum_memory"], 65536, "{kind}");
            assert_eq!(s["maximum_gpu"], 8, "{kind}");
            assert_eq!(s["auto_preview"], kind == "application", "{kind}");
        } else if kind == "database" {
            // A database is held to the same CPU and memory maxima; it has no GPU.
            assert_eq!(s["maximum_cpu"], 16000, "{kind}");
            assert_eq!(s["maximum_memory"], 65536, "{kind}");
            assert!(s.get("maximum_gpu").is_none(), "{kind}: {s}");
        } else {
            assert!(s.get("maximum_cpu").is_none(), "{kind}: {s}");
        }
        match kind {
            // Probes on the default port; the container has no port, the job no probes.
            "application" => {
                assert_eq!(
                    s["healthchecks"]["readiness_probe"]["type"],
                    json!({"tcp": {"port": 8080, "host": null}})
                );
                assert_eq!(s["healthchecks"]["liveness_probe"]["failure_threshold"], 9);
                assert_eq!(s["storage"], json!([]));
                assert_eq!(s["docker_target_build_stage"], Value::Null);
            }
            "container" | "job" => {
                assert_eq!(
                    s["healthchecks"],
                    json!({"readiness_probe": null, "liveness_probe": null})
                );
            }
            "terraform" => {
                assert_eq!(s["backend"], json!({"kubernetes": {}}));
                assert_eq!(
                    s["provider_version"],
                    json!({"read_from_terraform_block": true, "explicit_version": "1.9"})
                );
                assert_eq!(
                    s["job_resources"],
                    json!({"cpu_milli": 500, "ram_mib": 512, "gpu": 0, "storage_gib": 1})
                );
                assert_eq!(s["use_cluster_credentials"], false);
                assert_eq!(s["action_extra_arguments"], json!({}));
                assert_eq!(
                    s["auto_deploy_config"],
                    json!({"auto_deploy": false, "terraform_action": "DEFAULT"})
                );
                assert_eq!(
                    s["terraform_files_source"]["git"]["git_repository"]["url"],
                    "https://gitlab.com/acme/infra"
                );
            }
            _ => {}
        }
    }
}

async fn images_show_their_registry_as_it_is_now<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let bodies = service_bodies(&registry);
    let mut ids = vec![];
    for (kind, body) in bodies
        .iter()
        .filter(|(k, _)| *k == "container" || *k == "job")
    {
        ids.push((
            *kind,
            t.post(&format!("/environment/{env}/{kind}"), body.clone())
                .await
                .expect(201)
                .id(),
        ));
    }
    t.put(
        &format!("/organization/{}/containerRegistry/{registry}", t.org),
        json!({"name": "renamed", "kind": "GENERIC_CR", "url": "https://registry.acme.example",
               "config": {"username": "bob", "password": "hunter2-registry"}}),
    )
    .await
    .expect(200);
    let expected = json!({"id": registry, "name": "renamed", "url": "https://registry.acme.example",
                          "kind": "GENERIC_CR"});
    for (kind, id) in ids {
        let s = t.get(&format!("/{kind}/{id}")).await.expect(200).body;
        let shown = if kind == "job" {
            &s["source"]["image"]["registry"]
        } else {
            &s["registry"]
        };
        assert_eq!(shown, &expected, "{kind}");
        let listed = t
            .get(&format!("/environment/{env}/{kind}"))
            .await
            .expect(200);
        assert!(listed.text.contains("registry.acme.example"), "{kind}");
    }
}

async fn partial_edits_of_applications_and_databases_keep_the_rest<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let db = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "MYSQL", "version": "8.0", "mode": "CONTAINER",
                   "description": "orders", "cpu": 500}),
        )
        .await
        .expect(201)
        .id();
    let edited = t
        .put(
            &format!("/database/{db}"),
            json!({"version": "8.4", "storage": 20}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(
        (&edited["type"], &edited["mode"], &edited["version"]),
        (&json!("MYSQL"), &json!("CONTAINER"), &json!("8.4"))
    );
    assert_eq!(
        (&edited["name"], &edited["description"]),
        (&json!("db"), &json!("orders"))
    );
    assert_eq!(
        (&edited["cpu"], &edited["storage"]),
        (&json!(500), &json!(20))
    );

    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api", "branch": "dev"},
                   "ports": [{"internal_port": 3000, "publicly_accessible": true}], "cpu": 250}),
        )
        .await
        .expect(201)
        .body;
    let checks = json!({"readiness_probe": probe("tcp", 3000), "liveness_probe": null});
    let edited = t
        .put(
            &format!("/application/{}", app["id"].as_str().unwrap()),
            json!({"healthchecks": checks}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(
        edited["healthchecks"]["readiness_probe"],
        probe("tcp", 3000)
    );
    assert_eq!(edited["git_repository"]["branch"], "dev");
    assert_eq!(
        edited["ports"][0]["id"], app["ports"][0]["id"],
        "ports keep their ids"
    );
    assert_eq!(
        (&edited["name"], &edited["cpu"]),
        (&json!("api"), &json!(250))
    );
    // The other kinds are still edited with their whole body.
    let registry = t.registry().await;
    let c = t
        .post(
            &format!("/environment/{env}/container"),
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
        .expect(201)
        .id();
    t.put(&format!("/container/{c}"), json!({"name": "web"}))
        .await
        .expect_error(400, "registry_id: is required");
}

async fn bad_members_are_named<S: App>(t: T<S>) {
    let (_, _, env) = t.hierarchy().await;
    let registry = t.registry().await;
    let bodies = service_bodies(&registry);
    let body = |kind: &str, extra: Value| {
        let mut b = bodies.iter().find(|(k, _)| *k == kind).unwrap().1.clone();
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    for (kind, extra, message) in [
        ("container", json!({"gpu": 9}), "gpu: must be between 0 and 8"),
        ("application", json!({"cpu": 16001}), "cpu: must be at most 16000"),
        ("job", json!({"memory": 70000}), "memory: must be at most 65536"),
        (
            "application",
            json!({"healthchecks": {"readiness_probe": {"type": {"tcp": {"port": 80}, "http": {"port": 80}}}}}),
            "healthchecks.readiness_probe.type: exactly one of exec, grpc, http or tcp is required",
        ),
        (
            "container",
            json!({"storage": [{"type": "FAST_SSD", "size": 10, "mount_point": "data"}]}),
            "storage[0].mount_point: must be an absolute path",
        ),
        (
            "container",
            json!({"storage": [{"type": "SLOW_HDD", "size": 10, "mount_point": "/data"}]}),
            "storage[0].type",
        ),
        ("application", json!({"cpu_architecture": "SPARC"}), "cpu_architecture"),
        ("database", json!({"icon_uri": "not an uri"}), "icon_uri: must be an absolute URI"),
        ("job", json!({"port": 70000}), "port: must be between 1 and 65535"),
        (
            "terraform",
            json!({"action_extra_arguments": {"deploy": ["-x"]}}),
            "action_extra_arguments.deploy: must be one of init, validate, plan, apply, destroy",
        ),
        (
            "terraform",
            json!({"provider_version": {"read_from_terraform_block": false, "explicit_version": ""}}),
            "provider_version.explicit_version: is required unless read_from_terraform_block is true",
        ),
        ("terraform", json!({"backend": {"blueprint": {}}}), "backend"),
        (
            "terraform",
            json!({"job_resources": {"cpu_milli": 0, "ram_mib": 1, "gpu": 0, "storage_gib": 1}}),
            "job_resources.cpu_milli: must be greater than 0",
        ),
    ] {
        let r = t
            .post(&format!("/environment/{env}/{kind}"), body(kind, extra.clone()))
            .await;
        assert_eq!(r.status, 400, "{kind} {extra}: {}", r.text);
        assert!(
            r.body["message"].as_str().unwrap().starts_with(message),
            "{kind} {extra}: {}",
            r.text
        );
    }
}

async fn a_project_counts_its_environments<S: App>(t: T<S>) {
    let (_, project, _) = t.hierarchy().await;
    let count = |body: &Value| body["associated_environments_count"].clone();
    let shown = t.get(&format!("/project/{project}")).await.expect(200);
    assert_eq!(count(&shown.body), 1);
    let other = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "staging"}),
        )
        .await
        .expect(201)
        .id();
    let listed = t
        .get(&format!("/organization/{}/project", t.org))
        .await
        .expect(200);
    let mine = listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == json!(project))
        .unwrap()
        .clone();
    assert_eq!(count(&mine), 2);
    t.delete(&format!("/environment/{other}")).await;
    t.gone(&format!("/environment/{other}")).await;
    let edited = t
        .put(&format!("/project/{project}"), json!({"name": "shop"}))
        .await
        .expect(200);
    assert_eq!(count(&edited.body), 1);
    let fresh = t
        .post(
            &format!("/organization/{}/project", t.org),
            json!({"name": "empty"}),
        )
        .await
        .expect(201);
    assert_eq!(count(&fresh.body), 0);
}

async fn a_git_token_shows_its_api_address<S: App>(t: T<S>) {
    let path = format!("/organization/{}/gitToken", t.org);
    for (provider, sent, shown) in [
        ("HOSTA", None, "https://api.github.com"),
        ("HOSTB", None, "https://gitlab.com/api/v4"),
        ("HOSTC", None, "https://api.bitbucket.org/2.0"),
        (
            "HOSTB",
            Some("https://git.acme.example/api/v4"),
            "https://git.acme.example/api/v4",
        ),
    ] {
        let mut body = json!({"name": format!("t-{provider}-{}", sent.is_some()), "type": provider,
                              "token": "tok-secret"});
        if let Some(url) = sent {
            body["git_api_url"] = json!(url);
        }
        let created = t.post(&path, body).await.expect(201);
        assert_eq!(created.body["git_api_url"], shown, "{provider}");
        let got = t.get(&format!("{path}/{}", created.id())).await.expect(200);
        assert_eq!(got.body["git_api_url"], shown, "{provider}");
        assert!(!got.text.contains("tok-secret"));
    }
}

/// The id of the organization's API token named `name`.
async fn token_id<S: App>(t: &T<S>, name: &str) -> Value {
    let listed = t
        .get(&format!("/organization/{}/apiToken", t.org))
        .await
        .expect(200);
    listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("no token {name}: {}", listed.text))["id"]
        .clone()
}

async fn an_environment_names_who_last_changed_it<S: App>(t: T<S>) {
    let (_, project, env) = t.hierarchy().await;
    let admin = token_id(&t, "tests").await;
    let path = format!("/environment/{env}");
    assert_eq!(t.get(&path).await.body["last_updated_by"], admin);
    let devops = t.token_with_role(Role::Devops).await;
    let devops_id = token_id(&t, "DEVOPS").await;
    assert_ne!(admin, devops_id);
    let edited = t
        .call(
            Some(&devops),
            actix_web::http::Method::PUT,
            &path,
            Some(json!({"name": "prod-2"})),
        )
        .await
        .expect(200);
    assert_eq!(edited.body["last_updated_by"], devops_id);
    assert_eq!(t.get(&path).await.body["last_updated_by"], devops_id);
    let listed = t
        .get(&format!("/project/{project}/environment"))
        .await
        .expect(200);
    assert_eq!(listed.body["results"][0]["last_updated_by"], devops_id);
    // A clone is made, so last changed, by whoever cloned it.
    let clone = t
        .post(&format!("{path}/clone"), json!({"name": "copy"}))
        .await
        .expect(202);
    assert_eq!(clone.body["last_updated_by"], admin);
}

async fn a_database_shows_its_maxima_and_disk_encryption<S: App>(t: T<S>) {
    let env = t.hierarchy().await.2;
    for (name, mode, encrypted) in [("pg", "CONTAINER", false), ("rds", "MANAGED", true)] {
        let made = t
            .post(
                &format!("/environment/{env}/database"),
                json!({"name": name, "type": "POSTGRESQL", "version": "16", "mode": mode}),
            )
            .await
            .expect(201);
        let got = t.get(&format!("/database/{}", made.id())).await.expect(200);
        for shown in [&made.body, &got.body] {
            assert_eq!(shown["maximum_cpu"], 16000, "{mode}");
            assert_eq!(shown["maximum_memory"], 65536, "{mode}");
            assert_eq!(shown["disk_encrypted"], encrypted, "{mode}");
        }
    }
    // The maxima are those a database's request is held to.
    t.post(
        &format!("/environment/{env}/database"),
        json!({"name": "big", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER",
               "cpu": 16001}),
    )
    .await
    .expect_error(400, "cpu");
}

async fn a_git_token_shows_the_expiry_its_client_gave<S: App>(t: T<S>) {
    let path = format!("/organization/{}/gitToken", t.org);
    let body = |extra: Value| {
        let mut b = json!({"name": "gh", "type": "HOSTA"});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let made = t
        .post(
            &path,
            body(json!({"token": "ghp_one", "expired_at": "2027-03-31"})),
        )
        .await
        .expect(201);
    assert_eq!(made.body["expired_at"], "2027-03-31");
    let one = format!("{path}/{}", made.id());
    assert_eq!(t.get(&one).await.body["expired_at"], "2027-03-31");
    // An edit without it keeps it while the token stays.
    let kept = t
        .put(&one, body(json!({"description": "d"})))
        .await
        .expect(200);
    assert_eq!(kept.body["expired_at"], "2027-03-31");
    // A date-time gives its day (UTC).
    let moved = t
        .put(
            &one,
            body(json!({"expired_at": "2028-01-01T23:30:00-02:00"})),
        )
        .await
        .expect(200);
    assert_eq!(moved.body["expired_at"], "2028-01-02");
    // A new token value without it: that value's expiry is not known.
    let renewed = t
        .put(&one, body(json!({"token": "ghp_two"})))
        .await
        .expect(200);
    assert!(renewed.body.get("expired_at").is_none(), "{}", renewed.text);
    let listed = t.get(&path).await.expect(200);
    assert!(listed.body["results"][0].get("expired_at").is_none());
    t.put(&one, body(json!({"expired_at": "someday"})))
        .await
        .expect_error(400, "expired_at");
    t.post(
        &path,
        json!({"name": "gl", "type": "HOSTB", "token": "x", "expired_at": "2027-02-30"}),
    )
    .await
    .expect_error(400, "expired_at");
    let plain = t
        .post(&path, json!({"name": "bb", "type": "HOSTC", "token": "x"}))
        .await
        .expect(201);
    assert!(plain.body.get("expired_at").is_none());
}
