//! Races, from outside: many clients released at the same instant (a barrier) against the built
//! binary, on SQLite (one process) and on PostgreSQL (two processes on one database, the
//! clients spread over both). After everything settles: no accepted action lost, no reference
//! to a deleted record, no deployed service UP_TO_DATE after an acknowledged change that
//! reaches it, no request stuck, no 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod harness;

use domain::ports::{Repo, Store};
use harness::*;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Barrier;

/// Servers on one database and a client of each, in one organization with one environment.
struct World {
    _dir: TempDir,
    servers: Vec<Server>,
    clients: Vec<Arc<Client>>,
    database: String,
    org: String,
    project: String,
    env: String,
}

impl World {
    async fn new(database: Database, step_ms: &str) -> Self {
        let dir = TempDir::new();
        let (url, processes) = match database {
            Database::Sqlite => (format!("sqlite://{}/races.db", dir.0.display()), 1),
            Database::Postgres(url) => (url, 2),
        };
        let token = create_token(&dir, &url, &["--organization-name", "Racers"]);
        let mut servers = Vec::new();
        for _ in 0..processes {
            servers.push(
                Server::start_with(
                    &dir,
                    &url,
                    None,
                    &[
                        ("CAPSTAN_ENGINE_STEP_MS", step_ms),
                        ("CAPSTAN_RATE_LIMIT_PER_HOUR", "4000000000"),
                    ],
                )
                .await,
            );
        }
        let clients: Vec<Arc<Client>> = servers
            .iter()
            .map(|s| {
                Arc::new(Client {
                    http: reqwest::Client::new(),
                    base: s.base.clone(),
                    token: token.clone(),
                })
            })
            .collect();
        let (org, env) = hierarchy(&clients[0]).await;
        let project = clients[0].get(&format!("/environment/{env}")).await["project"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        Self {
            _dir: dir,
            servers,
            clients,
            database: url,
            org,
            project,
            env,
        }
    }

    /// The client for the `i`th racer: racers alternate between the processes.
    fn client(&self, i: usize) -> Arc<Client> {
        self.clients[i % self.clients.len()].clone()
    }

    async fn registry(&self) -> String {
        self.clients[0]
            .create(
                &format!("/organization/{}/containerRegistry", self.org),
                json!({"name": format!("hub{}", uuid::Uuid::new_v4().simple()), "kind": "DOCKER_HUB",
                       "config": {"password": "pw"}}),
            )
            .await
    }

    async fn containers(&self, n: usize) -> Vec<String> {
        let registry = self.registry().await;
        let mut out = Vec::new();
        for i in 0..n {
            out.push(
                self.clients[0]
                    .create(
                        &format!("/environment/{}/container", self.env),
                        json!({"name": format!("web{i}"), "registry_id": registry,
                               "image_name": "nginx", "tag": "1.27"}),
                    )
                    .await,
            );
        }
        out
    }

    /// Deploys each container and waits until it runs, UP_TO_DATE.
    async fn deployed(&self, containers: &[String]) {
        let c = &self.clients[0];
        for id in containers {
            let (status, _) = c
                .call(
                    reqwest::Method::POST,
                    &format!("/container/{id}/deploy"),
                    None,
                )
                .await;
            assert_eq!(status, 202);
        }
        for id in containers {
            settle(
                c,
                &format!("/container/{id}/status"),
                Duration::from_secs(60),
            )
            .await;
        }
    }

    /// A read unit on the servers' database, for what the API does not show.
    async fn store(&self) -> storage::Db {
        let url = storage::DatabaseUrl::parse(&self.database).unwrap();
        storage::Db::connect(&url, 2, &[7u8; 32]).await.unwrap()
    }

    fn stop(self) {
        for s in self.servers {
            s.stop();
        }
    }
}

enum Database {
    Sqlite,
    Postgres(String),
}

async fn postgres() -> Option<Database> {
    match storage::testing::postgres_database().await {
        Some(storage::DatabaseUrl::Postgres(url)) => Some(Database::Postgres(url)),
        _ => None,
    }
}

/// One racer's request: method, path, body.
type Call = (reqwest::Method, String, Option<Value>);

/// Sends every call at once, each from its own task, released together by a barrier; returns
/// the answers in the calls' order. Any 5xx fails the test.
async fn race(world: &World, calls: Vec<Call>) -> Vec<(u16, Value)> {
    let barrier = Arc::new(Barrier::new(calls.len()));
    let mut tasks = Vec::new();
    for (i, (method, path, body)) in calls.into_iter().enumerate() {
        let client = world.client(i);
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let answer = tokio::time::timeout(
                Duration::from_secs(30),
                client.call(method.clone(), &path, body),
            )
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer within 30 s"));
            assert!(answer.0 < 500, "{method} {path}: {} {}", answer.0, answer.1);
            answer
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

fn post(path: String, body: Option<Value>) -> Call {
    (reqwest::Method::POST, path, body)
}

/// Deploys race the deletion of their service: each accepted deploy is queued ahead of the
/// deletion (so it runs), every later one is refused with 409; the services go in the end.
async fn deploys_racing_a_deletion_are_run_or_refused(database: Database) {
    let world = World::new(database, "100").await;
    let containers = world.containers(4).await;
    world.deployed(&containers).await;
    let mut calls = Vec::new();
    for id in &containers {
        for _ in 0..8 {
            calls.push(post(format!("/container/{id}/deploy"), None));
        }
        calls.push((reqwest::Method::DELETE, format!("/container/{id}"), None));
    }
    let answers = race(&world, calls.clone()).await;

    // Before the engine gets to the deletions (they come after every accepted deploy, each
    // several steps long), the queue shows what was accepted, in order.
    let db = world.store().await;
    let mut unit = Store::read(&db).await.unwrap();
    for id in &containers {
        let service: domain::ids::ServiceId = id.parse().unwrap();
        let requests = Repo::<domain::model::DeploymentRequest>::list(
            &mut *unit,
            service,
            domain::pagination::PageRequest::all(),
        )
        .await
        .unwrap()
        .items;
        let accepted: Vec<String> = calls
            .iter()
            .zip(&answers)
            .filter(|((m, p, _), (status, _))| {
                *m == reqwest::Method::POST && p.contains(id.as_str()) && *status == 202
            })
            .map(|(_, (_, body))| body["deployment_request_id"].as_str().unwrap().to_string())
            .collect();
        let deletion_accepted = calls.iter().zip(&answers).any(|((m, p, _), (status, _))| {
            *m == reqwest::Method::DELETE && p.contains(id.as_str()) && *status == 202
        });
        for ((method, path, _), (status, body)) in calls
            .iter()
            .zip(&answers)
            .filter(|((_, p, _), _)| p.contains(id.as_str()))
        {
            // A deploy that reaches the server only once the accepted deletion has run (a
            // loaded machine) finds no service: 404 is its refusal then.
            let gone = *method == reqwest::Method::POST
                && *status == 404
                && deletion_accepted
                && body["message"] == "service not found";
            assert!(
                *status == 202 || *status == 409 || gone,
                "a deploy or delete is accepted or refused: {method} {path}: {status} {body}"
            );
        }
        let Some(deletion) = requests
            .iter()
            .find(|r| r.action == domain::model::DeploymentAction::Delete)
        else {
            // Already done (its requests went with it): the queue ran every request of the
            // environment asked before it, so nothing accepted was left behind.
            let (status, _) = world
                .client(0)
                .call(reqwest::Method::GET, &format!("/container/{id}"), None)
                .await;
            assert_eq!(
                status, 404,
                "no deletion queued for {id}, yet it is still there"
            );
            continue;
        };
        for r in &requests {
            if r.action == domain::model::DeploymentAction::Deploy
                && r.created_at > deletion.created_at
            {
                panic!("a deploy of {id} was queued behind its deletion");
            }
        }
        for a in &accepted {
            assert!(
                requests.iter().any(|r| r.id.to_string() == *a),
                "the accepted deploy {a} of {id} is in the queue"
            );
        }
    }
    drop(unit);

    for id in &containers {
        let c = world.client(0);
        let path = format!("/container/{id}");
        eventually(
            Duration::from_secs(60),
            || format!("{id} was never deleted: a request is stuck"),
            async || (c.call(reqwest::Method::GET, &path, None).await.0 == 404).then_some(()),
        )
        .await;
    }
    let status = world
        .client(1)
        .get(&format!("/environment/{}/status", world.env))
        .await;
    assert_eq!(status["deployment_requests_count"], 0, "{status}");
    world.stop();
}

/// Variables at every scope are added while the services deploy: a service that ends
/// UP_TO_DATE was deployed after every change that reaches it was acknowledged.
async fn changes_racing_deployments_leave_no_service_up_to_date_wrongly(database: Database) {
    let world = World::new(database, "5").await;
    let containers = world.containers(4).await;
    world.deployed(&containers).await;
    let mut calls = Vec::new();
    for (i, id) in containers.iter().enumerate() {
        calls.push(post(format!("/container/{id}/redeploy"), None));
        calls.push(post(format!("/container/{id}/deploy"), None));
        for k in 0..3 {
            calls.push(post(
                format!("/container/{id}/environmentVariable"),
                Some(json!({"key": format!("S{i}_{k}"), "value": "v"})),
            ));
        }
        calls.push(post(
            format!("/environment/{}/environmentVariable", world.env),
            Some(json!({"key": format!("E{i}"), "value": "v"})),
        ));
        calls.push(post(
            format!("/project/{}/environmentVariable", world.project),
            Some(json!({"key": format!("P{i}"), "value": "v"})),
        ));
    }
    let answers = race(&world, calls).await;
    for (status, body) in &answers {
        assert!(*status == 201 || *status == 202, "{status} {body}");
    }
    let c = world.client(0);
    for id in &containers {
        settle(
            &c,
            &format!("/container/{id}/status"),
            Duration::from_secs(60),
        )
        .await;
    }
    for id in &containers {
        let service = c.get(&format!("/container/{id}")).await;
        let status = c.get(&format!("/container/{id}/status")).await;
        let variables = c
            .get(&format!(
                "/container/{id}/environmentVariable?page_size=100"
            ))
            .await;
        let last_change = variables["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                time::OffsetDateTime::parse(
                    v["created_at"].as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap()
            })
            .max()
            .unwrap();
        let history = c.get(&format!("/container/{id}/deploymentHistory")).await;
        let last_deploy = history["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["status"] == "DEPLOYED")
            .map(|d| {
                time::OffsetDateTime::parse(
                    d["created_at"].as_str().unwrap(),
                    &time::format_description::well_known::Rfc3339,
                )
                .unwrap()
            })
            .max()
            .unwrap();
        let up_to_date = status["service_deployment_status"] == "UP_TO_DATE";
        assert_eq!(
            up_to_date,
            last_deploy > last_change,
            "{id}: UP_TO_DATE exactly when the last deployment was asked for after the last \
             change ({last_deploy} vs {last_change}): {service}"
        );
    }
    world.stop();
}

/// Names stay unique when many clients create or rename at once: exactly one wins, the others
/// get 409.
async fn names_stay_unique_under_concurrent_creates_and_renames(database: Database) {
    let world = World::new(database, "5").await;
    let org = world.org.clone();
    let calls: Vec<Call> = (0..16)
        .map(|i| {
            let name = if i % 2 == 0 { "Shop" } else { "SHOP" };
            post(
                format!("/organization/{org}/project"),
                Some(json!({"name": name})),
            )
        })
        .collect();
    let answers = race(&world, calls).await;
    let created = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(created, 1, "{answers:?}");
    assert!(answers.iter().all(|(s, _)| *s == 201 || *s == 409));

    let mut projects = Vec::new();
    for i in 0..12 {
        projects.push(
            world.clients[0]
                .create(
                    &format!("/organization/{org}/project"),
                    json!({"name": format!("p{i}")}),
                )
                .await,
        );
    }
    let calls: Vec<Call> = projects
        .iter()
        .map(|p| {
            (
                reqwest::Method::PUT,
                format!("/project/{p}"),
                Some(json!({"name": "Same"})),
            )
        })
        .collect();
    let answers = race(&world, calls).await;
    assert_eq!(answers.iter().filter(|(s, _)| *s == 200).count(), 1);
    assert!(answers.iter().all(|(s, _)| *s == 200 || *s == 409));
    let listed = world.clients[0]
        .get(&format!("/organization/{org}/project?page_size=100"))
        .await;
    let same = listed["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"].as_str().unwrap().eq_ignore_ascii_case("same"))
        .count();
    assert_eq!(same, 1);
    world.stop();
}

/// A registry is deleted while containers are created with it: it goes only if none was
/// created with it, and no container ever points at a registry that is gone.
async fn a_registry_deleted_while_services_start_to_use_it(database: Database) {
    let world = World::new(database, "5").await;
    for round in 0..3 {
        let registry = world.registry().await;
        let mut calls: Vec<Call> = (0..12)
            .map(|i| {
                post(
                    format!("/environment/{}/container", world.env),
                    Some(
                        json!({"name": format!("r{round}c{i}"), "registry_id": registry,
                                "image_name": "nginx", "tag": "1"}),
                    ),
                )
            })
            .collect();
        calls.insert(
            6,
            (
                reqwest::Method::DELETE,
                format!("/organization/{}/containerRegistry/{registry}", world.org),
                None,
            ),
        );
        let answers = race(&world, calls).await;
        let deleted = answers[6].0 == 204;
        let created = answers
            .iter()
            .enumerate()
            .filter(|(i, (s, _))| *i != 6 && *s == 201)
            .count();
        if deleted {
            assert_eq!(
                created, 0,
                "a container was created with a deleted registry"
            );
        } else {
            assert_eq!(answers[6].0, 409, "{:?}", answers[6]);
            assert!(created > 0);
        }
        for (i, (status, body)) in answers.iter().enumerate() {
            if i != 6 {
                assert!(
                    [201, 404].contains(status),
                    "a create is done or finds no registry: {status} {body}"
                );
            }
        }
        let listed = world.clients[0]
            .get(&format!(
                "/environment/{}/container?page_size=100",
                world.env
            ))
            .await;
        let using = listed["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["registry_id"] == registry.as_str())
            .count();
        assert_eq!(
            using, created,
            "every container created with it, and no other"
        );
    }
    world.stop();
}

/// An environment is cloned while variables are added to it: each clone is a copy of the
/// source at one moment (all of its services, the variables committed by then, each once), never
/// a mix; since variables are only added, the clones' variables nest one inside the next.
async fn clones_taken_while_the_source_changes_are_consistent(database: Database) {
    let world = World::new(database, "5").await;
    let containers = world.containers(3).await;
    let mut calls: Vec<Call> = Vec::new();
    for i in 0..12 {
        calls.push(post(
            format!("/environment/{}/environmentVariable", world.env),
            Some(json!({"key": format!("K{i}"), "value": "v"})),
        ));
        if i % 4 == 0 {
            calls.push(post(
                format!("/environment/{}/clone", world.env),
                Some(json!({"name": format!("copy{i}")})),
            ));
        }
    }
    let answers = race(&world, calls.clone()).await;
    let c = world.client(0);
    let mut copies: Vec<std::collections::BTreeSet<String>> = Vec::new();
    for ((_, path, _), (status, body)) in calls.iter().zip(&answers) {
        assert!([200, 201, 202].contains(status), "{path}: {status} {body}");
        if !path.ends_with("/clone") {
            continue;
        }
        let clone = body["id"].as_str().unwrap();
        let services = c
            .get(&format!("/environment/{clone}/container?page_size=100"))
            .await;
        assert_eq!(
            services["results"].as_array().unwrap().len(),
            containers.len(),
            "the clone has every service of the source"
        );
        let vars = c
            .get(&format!(
                "/environment/{clone}/environmentVariable?page_size=100"
            ))
            .await;
        let copied: Vec<String> = vars["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["scope"] == "ENVIRONMENT")
            .map(|v| {
                assert_eq!(v["value"], "v", "{v}");
                v["key"].as_str().unwrap().to_string()
            })
            .collect();
        let keys: std::collections::BTreeSet<String> = copied.iter().cloned().collect();
        assert_eq!(
            keys.len(),
            copied.len(),
            "a variable copied twice: {copied:?}"
        );
        assert!(
            keys.iter().all(|k| (0..12).any(|i| *k == format!("K{i}"))),
            "{keys:?}"
        );
        copies.push(keys);
    }
    copies.sort_by_key(|k| k.len());
    for pair in copies.windows(2) {
        assert!(
            pair[0].is_subset(&pair[1]),
            "two clones saw the source at no common order: {:?} and {:?}",
            pair[0],
            pair[1]
        );
    }
    // The source ends with every variable, and a clone made now copies them all.
    let (status, now) = c
        .call(
            reqwest::Method::POST,
            &format!("/environment/{}/clone", world.env),
            Some(json!({"name": "after"})),
        )
        .await;
    assert!([200, 201, 202].contains(&status), "{status} {now}");
    let vars = c
        .get(&format!(
            "/environment/{}/environmentVariable?page_size=100",
            now["id"].as_str().unwrap()
        ))
        .await;
    let all = vars["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["scope"] == "ENVIRONMENT")
        .count();
    assert_eq!(all, 12);
    world.stop();
}

macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::Database::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let Some(db) = super::postgres().await else { return };
                    super::$name(db).await;
                }
            )*
        }
    };
}

on_both!(
    deploys_racing_a_deletion_are_run_or_refused,
    changes_racing_deployments_leave_no_service_up_to_date_wrongly,
    names_stay_unique_under_concurrent_creates_and_renames,
    a_registry_deleted_while_services_start_to_use_it,
    clones_taken_while_the_source_changes_are_consistent,
);
