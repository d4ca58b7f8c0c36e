//! Clusters over HTTP on both backends: their configuration, deploy and stop through the
//! engine (polled as a waiter would, with no state outside the expected ones), readiness,
//! advanced settings, the credentials they use.

use crate::common;

use common::{App, T};
use domain::auth::Role;
use serde_json::{json, Value};

/// The operator's rules these tests' clusters live under: sockets under `/run`, and the
/// private network and the loopback the outbound policy allows.
fn hosts_allowed(c: domain::services::Capstan) -> domain::services::Capstan {
    c.with_docker_hosts(domain::model::DockerHostsPolicy {
        sockets_dir: Some("/run".into()),
        outbound: domain::outbound_policy::OutboundPolicy::parse("10.0.0.0/8,127.0.0.1").unwrap(),
    })
}

http_suite_with!(
    hosts_allowed;
    a_cluster_is_deployed_and_stopped_through_the_engine,
    a_failed_cluster_deployment_says_why,
    advanced_settings_have_defaults_and_are_checked,
    a_cluster_names_credentials_of_its_provider,
    every_cluster_answer_shows_version_capacity_default_and_access,
    an_on_premise_cluster_names_its_docker_host_with_sealed_credentials,
    a_cluster_keeps_a_log_of_what_was_done_on_it,
    an_environment_moves_to_another_cluster_only_when_nothing_runs,
);

const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nsealed-key-material\n-----END PRIVATE KEY-----\n";

async fn an_on_premise_cluster_names_its_docker_host_with_sealed_credentials<S: App>(t: T<S>) {
    let org = t.org.clone();
    let path = format!("/organization/{org}/onPremise/credentials");
    let tls = json!({"ca": CERTIFICATE, "certificate": CERTIFICATE, "key": KEY});
    let creds = t
        .post(&path, json!({"name": "racks", "docker_tls": tls}))
        .await
        .expect(201);
    assert_eq!(creds.body["object_type"], "OTHER");
    assert_eq!(creds.body["name"], "racks");
    let creds = creds.id();
    for shown in [
        t.get(&path).await.expect(200).text,
        t.get(&format!("{path}/{creds}")).await.expect(200).text,
        t.put(&format!("{path}/{creds}"), json!({"name": "racks-2"}))
            .await
            .expect(200)
            .text,
    ] {
        assert!(!shown.contains("sealed-key-material"), "{shown}");
    }
    t.post(
        &path,
        json!({"name": "bad", "docker_tls": {"ca": CERTIFICATE, "certificate": CERTIFICATE, "key": "nope"}}),
    )
    .await
    .expect_error(400, "docker_tls.key");
    let on_premise = |name: &str, endpoint: &str, creds: Option<&str>| {
        let mut body = json!({"name": name, "region": "on-premise", "cloud_provider": "ON_PREMISE",
                              "docker": {"endpoint": endpoint}});
        if let Some(id) = creds {
            body["cloud_provider_credentials"] = json!({"cloud_provider": "ON_PREMISE",
                "credentials": {"id": id, "name": "x"}, "region": "on-premise"});
        }
        body
    };
    let cluster = t
        .post(
            &format!("/organization/{org}/cluster"),
            on_premise("socket", "unix:///run/docker-2.sock", None),
        )
        .await
        .expect(201);
    assert_eq!(
        cluster.body["docker"],
        json!({"endpoint": "unix:///run/docker-2.sock"})
    );
    assert_eq!(cluster.body["cloud_provider"], "ON_PREMISE");
    let remote = t
        .post(
            &format!("/organization/{org}/cluster"),
            on_premise("remote", "tcp://10.0.0.5:2376", Some(&creds)),
        )
        .await
        .expect(201);
    assert_eq!(
        remote.body["cloud_provider_credentials"]["credentials"]["name"],
        "racks-2"
    );
    assert!(!remote.text.contains("sealed-key-material"));
    // A Swarm manager's cluster names its nodes' own daemons; each is held to the same rules.
    let nodes = |address: &str, endpoint: &str| {
        let mut body = on_premise(
            &format!("swarm-{endpoint}-{address}"),
            "unix:///run/docker-2.sock",
            None,
        );
        body["docker"]["nodes"] = json!([{"address": address, "endpoint": endpoint}]);
        body
    };
    let swarm = t
        .post(
            &format!("/organization/{org}/cluster"),
            nodes("10.0.0.12", "unix:///run/docker-3.sock"),
        )
        .await
        .expect(201);
    assert_eq!(
        swarm.body["docker"]["nodes"],
        json!([{"address": "10.0.0.12", "endpoint": "unix:///run/docker-3.sock"}])
    );
    // It may name a registry its nodes pull what is built from git from.
    let with_registry = |name: &str, registry: &str| {
        let mut body = on_premise(name, "unix:///run/docker-2.sock", None);
        body["docker"]["image_registry"] = json!(registry);
        body
    };
    let pushing = t
        .post(
            &format!("/organization/{org}/cluster"),
            with_registry("swarm-registry", "10.0.0.2:5000/builds"),
        )
        .await
        .expect(201);
    assert_eq!(
        pushing.body["docker"]["image_registry"],
        "10.0.0.2:5000/builds"
    );
    for (body, status, prefix) in [
        (
            with_registry("bad-registry", "https://10.0.0.2:5000"),
            400,
            "docker.image_registry: must be a registry's host[:port]",
        ),
        (
            with_registry("bad-registry-path", "10.0.0.2:5000/Team"),
            400,
            "docker.image_registry: its path must be lowercase components",
        ),
        (
            with_registry("bad-registry-port", "10.0.0.2:http"),
            400,
            "docker.image_registry: must be a registry's host[:port]",
        ),
        (
            nodes("node-2", "unix:///run/docker-3.sock"),
            400,
            "docker.nodes.address: must be an IP address",
        ),
        (
            nodes("10.0.0.12", "unix:///var/run/docker.sock"),
            400,
            "docker.nodes.endpoint: a unix:// endpoint must name a socket under the directory",
        ),
        (
            nodes("10.0.0.12", "tcp://192.168.7.7:2375"),
            400,
            "cloud_provider_credentials: a tcp:// endpoint off this machine needs TLS",
        ),
        (
            on_premise("plain", "tcp://10.0.0.5:2375", None),
            400,
            "cloud_provider_credentials: a tcp:// endpoint off this machine needs TLS",
        ),
        (
            on_premise("http", "http://10.0.0.5:2375", None),
            400,
            "docker.endpoint",
        ),
        (
            on_premise("own", "unix:///var/run/docker.sock", None),
            400,
            "docker.endpoint: a unix:// endpoint must name a socket under the directory the \
             operator allows (CAPSTAN_DOCKER_SOCKETS_DIR)",
        ),
        (
            on_premise("private", "tcp://192.168.7.7:2376", Some(&creds)),
            400,
            "docker.endpoint: the host 192.168.7.7 is not one the outbound policy",
        ),
        (
            on_premise("private-ssh", "ssh://deploy@172.16.0.9", None),
            400,
            "docker.endpoint: the host 172.16.0.9 is not one the outbound policy",
        ),
        (
            json!({"name": "cloud", "region": "eu-west-3", "cloud_provider": "CLOUDA",
                   "docker": {"endpoint": "unix:///run/docker.sock"}}),
            400,
            "docker: only an ON_PREMISE cluster",
        ),
    ] {
        t.post(&format!("/organization/{org}/cluster"), body)
            .await
            .expect_error(status, prefix);
    }
    // On the loopback, plain TCP is tolerated (a daemon of this machine).
    t.post(
        &format!("/organization/{org}/cluster"),
        on_premise("loopback", "tcp://127.0.0.1:2375", None),
    )
    .await
    .expect(201);
    let providers = t.get("/cloudProvider").await.expect(200).body;
    assert!(
        providers["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["short_name"] == "ON_PREMISE"),
        "{providers}"
    );
}

async fn a_cluster_keeps_a_log_of_what_was_done_on_it<S: App>(t: T<S>) {
    let org = t.org.clone();
    let id = new_cluster(
        &t,
        json!({"name": "racks", "region": "on-premise", "cloud_provider": "ON_PREMISE",
               "docker": {"endpoint": "unix:///run/docker-2.sock"}}),
    )
    .await;
    let base = format!("/organization/{org}/cluster/{id}");
    assert_eq!(
        t.get(&format!("{base}/logs")).await.expect(200).body["results"],
        json!([]),
        "nothing done yet"
    );
    t.post(&format!("{base}/deploy"), json!(null))
        .await
        .expect(201);
    wait_for(
        &t,
        &format!("{base}/status"),
        &["DEPLOYMENT_QUEUED", "DEPLOYING", "DEPLOYED"],
        "DEPLOYED",
    )
    .await;
    let lines = t.get(&format!("{base}/logs")).await.expect(200).body;
    let lines = lines["results"].as_array().unwrap();
    let steps: Vec<&str> = lines.iter().map(|l| l["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["Create", "Created"], "{lines:?}");
    assert_eq!(lines[0]["type"], "info");
    assert!(lines[0]["message"]["safe_message"]
        .as_str()
        .unwrap()
        .contains("unix:///run/docker-2.sock"));
    let text = t
        .get(&format!("/cluster/{id}/logs?endpoint=x&query=y"))
        .await
        .expect(200)
        .body;
    assert!(
        text["response"].as_str().unwrap().contains("[Created]"),
        "{text}"
    );

    let flaky = new_cluster(
        &t,
        json!({"name": "flaky", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "description": "capstan-fail-deploy"}),
    )
    .await;
    let flaky_base = format!("/organization/{org}/cluster/{flaky}");
    t.post(&format!("{flaky_base}/deploy"), json!(null))
        .await
        .expect(201);
    wait_for(
        &t,
        &format!("{flaky_base}/status"),
        &["DEPLOYMENT_QUEUED", "DEPLOYING", "DEPLOYMENT_ERROR"],
        "DEPLOYMENT_ERROR",
    )
    .await;
    let lines = t.get(&format!("{flaky_base}/logs")).await.expect(200).body;
    let last = lines["results"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["step"], "CreateError");
    assert_eq!(last["type"], "error");
    assert!(last["error"]["user_log_message"]
        .as_str()
        .unwrap()
        .contains("simulated cluster deploy failure"));
    // Another organization sees none of it.
    let other = t.other_org_token().await;
    let seen = t
        .call(
            Some(&other),
            actix_web::http::Method::GET,
            &format!("/cluster/{id}/logs"),
            None,
        )
        .await;
    assert!(seen.status == 403 || seen.status == 404, "{}", seen.text);
}

async fn an_environment_moves_to_another_cluster_only_when_nothing_runs<S: App>(t: T<S>) {
    let (first, _, env) = t.hierarchy().await;
    let second = new_cluster(
        &t,
        json!({"name": "racks", "region": "on-premise", "cloud_provider": "ON_PREMISE"}),
    )
    .await;
    let container = t.container(&env, "web").await;
    let moved = t
        .put(
            &format!("/environment/{env}"),
            json!({"cluster_id": second}),
        )
        .await
        .expect(200);
    assert_eq!(
        moved.body["cluster_id"],
        json!(second),
        "never deployed: it moves"
    );
    t.post(&format!("/container/{container}/deploy"), json!({}))
        .await
        .expect(202);
    let status = t.settle(&format!("/container/{container}/status")).await;
    assert_eq!(status["state"], "DEPLOYED");
    t.put(&format!("/environment/{env}"), json!({"cluster_id": first}))
        .await
        .expect_error(409, "1 service(s) of the environment run on its cluster");
    t.post(&format!("/environment/{env}/stop"), json!({}))
        .await
        .expect(202);
    t.settle(&format!("/environment/{env}/status")).await;
    let moved = t
        .put(&format!("/environment/{env}"), json!({"cluster_id": first}))
        .await
        .expect(200);
    assert_eq!(
        moved.body["cluster_id"],
        json!(first),
        "stopped: it moves back"
    );
    t.put(
        &format!("/environment/{env}"),
        json!({"cluster_id": uuid::Uuid::new_v4()}),
    )
    .await
    .expect_error(404, "cluster not found");
}

async fn new_cluster<S: App>(t: &T<S>, body: Value) -> String {
    t.post(&format!("/organization/{}/cluster", t.org), body)
        .await
        .expect(201)
        .id()
}

/// Polls the cluster's status until it is `until`; every state seen is one of `allowed`.
async fn wait_for<S: App>(t: &T<S>, path: &str, allowed: &[&str], until: &str) -> Value {
    let seen = std::cell::RefCell::new(Value::Null);
    common::eventually(
        common::WITHIN,
        || format!("never {until}: {}", seen.borrow()),
        async || {
            let s = t.get(path).await.expect(200).body;
            let state = s["status"].as_str().unwrap().to_string();
            assert!(
                allowed.contains(&state.as_str()),
                "{state} while waiting for {until}"
            );
            *seen.borrow_mut() = s.clone();
            (state == until).then_some(s)
        },
    )
    .await
}

async fn a_cluster_is_deployed_and_stopped_through_the_engine<S: App>(t: T<S>) {
    let org = t.org.clone();
    let id = new_cluster(
        &t,
        json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "min_running_nodes": 2, "max_running_nodes": 4, "instance_type": "t3a.large",
               "disk_size": 50, "kubernetes": "MANAGED", "production": true}),
    )
    .await;
    let base = format!("/organization/{org}/cluster/{id}");
    let record = t.get(&base).await.expect(200).body;
    assert_eq!(
        (
            &record["min_running_nodes"],
            &record["max_running_nodes"],
            &record["instance_type"]
        ),
        (&json!(2), &json!(4), &json!("t3a.large"))
    );
    assert_eq!(
        (&record["disk_size"], &record["production"]),
        (&json!(50), &json!(true))
    );
    assert_eq!(
        (&record["status"], &record["deployment_status"]),
        (&json!("READY"), &json!("NEVER_DEPLOYED"))
    );
    let status = t.get(&format!("{base}/status")).await.expect(200).body;
    assert_eq!(
        (
            &status["status"],
            &status["is_deployed"],
            &status["cluster_id"]
        ),
        (&json!("READY"), &json!(false), &json!(id))
    );
    assert_eq!(
        t.get(&format!("{base}/isReady")).await.expect(200).body["is_ready"],
        false
    );
    t.post(&format!("{base}/stop"), json!(null))
        .await
        .expect_error(409, "the cluster is not deployed");
    // A dry run changes nothing.
    let dry = t
        .post(&format!("{base}/deploy?dry_run=true"), json!(null))
        .await
        .expect(201);
    assert_eq!(dry.body["status"], "READY");
    let queued = t
        .post(&format!("{base}/deploy"), json!(null))
        .await
        .expect(201);
    assert_eq!(queued.body["status"], "DEPLOYMENT_QUEUED");
    // Queued or already deploying (a worker may have claimed it): another action waits.
    let again = t.post(&format!("{base}/deploy"), json!(null)).await;
    assert_eq!(again.status, 409, "{}", again.text);
    let message = again.body["message"].as_str().unwrap();
    assert!(
        message == "the cluster is deployment queued: wait for it to end"
            || message == "the cluster is deploying: wait for it to end",
        "{message}"
    );
    let deployed = wait_for(
        &t,
        &format!("{base}/status"),
        &["DEPLOYMENT_QUEUED", "DEPLOYING", "DEPLOYED"],
        "DEPLOYED",
    )
    .await;
    assert_eq!(deployed["is_deployed"], true);
    assert!(deployed["last_deployment_date"].is_string());
    assert_eq!(
        t.get(&format!("{base}/isReady")).await.expect(200).body["is_ready"],
        true
    );
    let all = t
        .get(&format!("/organization/{org}/cluster/status"))
        .await
        .expect(200);
    assert_eq!(all.body["results"][0]["status"], "DEPLOYED");
    // A change makes it OUT_OF_DATE; a stop goes through the engine.
    t.put(
        &base,
        json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "min_running_nodes": 3, "max_running_nodes": 4}),
    )
    .await
    .expect(200);
    assert_eq!(
        t.get(&base).await.expect(200).body["deployment_status"],
        "OUT_OF_DATE"
    );
    let stopping = t
        .post(&format!("{base}/stop"), json!(null))
        .await
        .expect(202);
    assert_eq!(stopping.body["status"], "STOP_QUEUED");
    wait_for(
        &t,
        &format!("{base}/status"),
        &["STOP_QUEUED", "STOPPING", "STOPPED"],
        "STOPPED",
    )
    .await;
    assert_eq!(
        t.get(&format!("{base}/isReady")).await.expect(200).body["is_ready"],
        false
    );
    // A stopped cluster still hosts environments (they are created and deployed as before).
    let project = t
        .post(
            &format!("/organization/{org}/project"),
            json!({"name": "p"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/project/{project}/environment"),
        json!({"name": "e", "cluster": id}),
    )
    .await
    .expect(201);
    let viewer = t.token_with_role(Role::Viewer).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::POST,
            &format!("{base}/deploy"),
            None,
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn a_failed_cluster_deployment_says_why<S: App>(t: T<S>) {
    let id = new_cluster(
        &t,
        json!({"name": "flaky", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "description": "capstan-fail-deploy"}),
    )
    .await;
    let base = format!("/organization/{}/cluster/{id}", t.org);
    t.post(&format!("{base}/deploy"), json!(null))
        .await
        .expect(201);
    let failed = wait_for(
        &t,
        &format!("{base}/status"),
        &["DEPLOYMENT_QUEUED", "DEPLOYING", "DEPLOYMENT_ERROR"],
        "DEPLOYMENT_ERROR",
    )
    .await;
    assert!(failed["failure_reason"]
        .as_str()
        .unwrap()
        .contains("simulated cluster deploy failure"));
    assert_eq!(failed["is_deployed"], false);
    // It can be deployed again.
    t.post(&format!("{base}/deploy"), json!(null))
        .await
        .expect(201);
}

async fn advanced_settings_have_defaults_and_are_checked<S: App>(t: T<S>) {
    let id = new_cluster(
        &t,
        json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
    )
    .await;
    let path = format!("/organization/{}/cluster/{id}/advancedSettings", t.org);
    let all = t.get(&path).await.expect(200).body;
    assert_eq!(all["loki.log_retention_in_week"], 12);
    assert_eq!(all["cloudA.eks.enable_alb_controller"], true);
    assert_eq!(all["envoy.gateway_api.retry.num_retries"], Value::Null);
    assert_eq!(all.as_object().unwrap().len(), 59);
    let edited = t
        .put(
            &path,
            json!({"loki.log_retention_in_week": 4, "database.redis.allowed_cidrs": ["10.0.0.0/8"]}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(edited["loki.log_retention_in_week"], 4);
    assert_eq!(
        edited["database.redis.allowed_cidrs"],
        json!(["10.0.0.0/8"])
    );
    assert_eq!(t.get(&path).await.expect(200).body, edited);
    t.put(&path, json!({"qovery.static_ip_mode": true}))
        .await
        .expect(201);
    assert_eq!(
        t.get(&path).await.expect(200).body["loki.log_retention_in_week"],
        4,
        "a key not sent keeps its value"
    );
    for (body, message) in [
        (
            json!({"no.such.key": 1}),
            "no.such.key: is not an advanced setting",
        ),
        (
            json!({"loki.deployment_mode": "distributed"}),
            "loki.deployment_mode: must be one of single_binary, simple_scalable",
        ),
        (
            json!({"nginx.hpa.min_number_instances": "2"}),
            "nginx.hpa.min_number_instances: must be an integer",
        ),
    ] {
        t.put(&path, body).await.expect_error(400, message);
    }
    let viewer = t.token_with_role(Role::Viewer).await;
    let r = t
        .call(
            Some(&viewer),
            actix_web::http::Method::PUT,
            &path,
            Some(json!({"qovery.static_ip_mode": false})),
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
}

async fn a_cluster_names_credentials_of_its_provider<S: App>(t: T<S>) {
    let org = t.org.clone();
    let creds = t
        .post(
            &format!("/organization/{org}/cloudA/credentials"),
            json!({"name": "keys", "access_key_id": "AKIA", "secret_access_key": "s"}),
        )
        .await
        .expect(201)
        .id();
    let alt = t
        .post(
            &format!("/organization/{org}/altcloud/credentials"),
            json!({"name": "scw", "altcloud_access_key": "k", "altcloud_secret_key": "s",
                   "altcloud_project_id": "p", "altcloud_organization_id": "o"}),
        )
        .await
        .expect(201)
        .id();
    let reference = |id: &str| {
        json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA",
               "cloud_provider_credentials": {"cloud_provider": "CLOUDA",
                   "credentials": {"id": id, "name": "whatever"}, "region": "eu-west-3"}})
    };
    let cluster = t
        .post(&format!("/organization/{org}/cluster"), reference(&creds))
        .await
        .expect(201);
    assert_eq!(
        cluster.body["cloud_provider_credentials"]["credentials"],
        json!({"id": creds, "name": "keys"})
    );
    t.post(&format!("/organization/{org}/cluster"), reference(&alt))
        .await
        .expect_error(
            400,
            "cloud_provider_credentials: must be credentials of CLOUDA",
        );
    t.post(
        &format!("/organization/{org}/cluster"),
        reference(&uuid::Uuid::new_v4().to_string()),
    )
    .await
    .expect_error(404, "credentials not found");
    let listed = t
        .get(&format!("/organization/{org}/credentials"))
        .await
        .expect(200);
    let keys = listed.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["credential"]["id"] == json!(creds))
        .unwrap();
    assert_eq!(
        keys["clusters"],
        json!([{"id": cluster.id(), "name": "main", "cloud_provider": "CLOUDA"}])
    );
}

/// The list and the answers to create, get and edit have one shape: the Kubernetes version,
/// what its nodes give at most (16000 millicores and 65536 MB each, up to max_running_nodes),
/// whether it is the organization's default (its first: where environments go when they
/// name none) and whether Capstan reaches it.
async fn every_cluster_answer_shows_version_capacity_default_and_access<S: App>(t: T<S>) {
    let path = format!("/organization/{}/cluster", t.org);
    let first = t
        .post(
            &path,
            json!({"name": "first", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await
        .expect(201);
    let second = t
        .post(
            &path,
            json!({"name": "second", "region": "eu-west-3", "cloud_provider": "CLOUDA",
                   "max_running_nodes": 3}),
        )
        .await
        .expect(201);
    let check = |c: &Value, default: bool, nodes: i64| {
        assert_eq!(c["version"], "1.31", "{c}");
        assert_eq!(c["cpu"], 16000 * nodes, "{c}");
        assert_eq!(c["memory"], 65536 * nodes, "{c}");
        assert_eq!(c["is_default"], default, "{c}");
        assert_eq!(c["has_access"], true, "{c}");
    };
    check(&first.body, true, 1);
    check(&second.body, false, 3);
    let listed = t.get(&path).await.expect(200).body;
    let results = listed["results"].as_array().unwrap();
    check(&results[0], true, 1);
    check(&results[1], false, 3);
    // An environment naming no cluster goes to the default one.
    let project = t
        .post(
            &format!("/organization/{}/project", t.org),
            json!({"name": "p"}),
        )
        .await
        .expect(201)
        .id();
    let env = t
        .post(
            &format!("/project/{project}/environment"),
            json!({"name": "e"}),
        )
        .await
        .expect(201);
    assert_eq!(env.body["cluster_id"], first.body["id"]);
    let one = format!("{path}/{}", second.id());
    check(&t.get(&one).await.expect(200).body, false, 3);
    let edited = t
        .put(
            &one,
            json!({"name": "second", "region": "eu-west-3", "cloud_provider": "CLOUDA",
                   "max_running_nodes": 2}),
        )
        .await
        .expect(200);
    check(&edited.body, false, 2);
    // Once the first is gone, the next is the default.
    t.delete(&format!("/environment/{}", env.id())).await;
    t.gone(&format!("/environment/{}", env.id())).await;
    t.delete(&format!("{path}/{}", first.id()))
        .await
        .expect(204);
    check(&t.get(&one).await.expect(200).body, true, 2);
}
