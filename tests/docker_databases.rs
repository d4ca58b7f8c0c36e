//! The built binary with the Docker engine running databases, on SQLite and PostgreSQL: a
//! PostgreSQL image made from the host's packages (no registry is reachable here), its data
//! kept on its volume across redeploys, restarts and stops, an application built from git
//! beside it connecting with its connection variables, and the volume gone with the database;
//! the same for Redis, from the host's Redis package, its backup restored into the running
//! server; and MySQL, from the host's MariaDB packages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod git_http;
mod harness;

use git_http::{GitServer, Repository};
use harness::*;
use serde_json::json;
use std::time::Duration;

/// Runs SQL in the database's container, signed in with its master credentials.
fn sql(container: &str, password: &str, statement: &str) -> String {
    docker(&[
        "exec",
        "-e",
        &format!("PGPASSWORD={password}"),
        container,
        "psql",
        "-h",
        "127.0.0.1",
        "-U",
        "superuser",
        "-d",
        "postgres",
        "-tAc",
        statement,
    ])
    .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

fn container_of(service: &str) -> String {
    let found = containers_of(service);
    assert_eq!(found.len(), 1, "one container: {found:?}");
    found[0].split(' ').next().unwrap().to_string()
}

async fn act(client: &Client, id: &str, action: &str, want: &str) {
    post(client, &format!("/database/{id}/{action}"), json!({})).await;
    settled_in(client, "database", id, want).await;
}

/// A Docker test's world whose databases run `images` (a CAPSTAN_DOCKER_DATABASE_IMAGES entry),
/// their backups kept in `backups`, with the settings `more`.
async fn case_for(
    database: Option<&str>,
    images: &str,
    backups: &TempDir,
    more: &[(&str, &str)],
) -> Case {
    let backup_dir = backups.0.display().to_string();
    let mut settings = vec![
        ("CAPSTAN_BACKUP_DIR", backup_dir.as_str()),
        ("CAPSTAN_DOCKER_DATABASE_IMAGES", images),
        ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
    ];
    settings.extend_from_slice(more);
    Case::start(database, &settings).await
}

/// A database of `kind` at `version` created and deployed from `image`: (its id, its master
/// password), once its credentials name `login` at `port`.
async fn deployed(
    client: &Client,
    env: &str,
    (kind, version, image): (&str, &str, &str),
    (login, port): (&str, u16),
) -> (String, String) {
    let db = client
        .create(
            &format!("/environment/{env}/database"),
            json!({"name": "data", "type": kind, "version": version,
                   "mode": "CONTAINER", "accessibility": "PRIVATE"}),
        )
        .await;
    act(client, &db, "deploy", "DEPLOYED").await;
    let credentials = client
        .get(&format!("/database/{db}/masterCredentials"))
        .await;
    assert_eq!(credentials["login"], login, "{credentials}");
    assert_eq!(credentials["port"], port, "{credentials}");
    let container = container_of(&db);
    let seen = docker(&["inspect", "--format", "{{.Config.Image}}", &container]).unwrap();
    assert_eq!(seen, image);
    let password = credentials["password"].as_str().unwrap().to_string();
    (db, password)
}

/// The data lives on its volume: `kept` (run in its container) holds through a redeploy, a
/// restart, a stop and a deploy.
async fn keeps_its_data(client: &Client, db: &str, kept: impl Fn(&str)) {
    for (action, want) in [
        ("redeploy", "DEPLOYED"),
        ("restart-service", "RESTARTED"),
        ("stop", "STOPPED"),
        ("deploy", "DEPLOYED"),
    ] {
        act(client, db, action, want).await;
        if want != "STOPPED" {
            kept(&container_of(db));
        }
    }
}

/// A backup taken: its id and the file it is kept in, once DEPLOYED with a size.
async fn backup_taken(
    client: &Client,
    db: &str,
    backups: &TempDir,
) -> (String, std::path::PathBuf) {
    let taken = post(
        client,
        &format!("/database/{db}/backup"),
        json!({"name": "before"}),
    )
    .await;
    let backup = taken["id"].as_str().unwrap().to_string();
    let listed = backup_ended(client, db).await;
    assert_eq!(
        listed["results"][0]["status"]["state"], "DEPLOYED",
        "{listed}"
    );
    assert!(listed["results"][0]["size_bytes"].as_i64().unwrap() > 0);
    let file = backups.0.join(format!("{}.dump", backup.replace('-', "")));
    (backup, file)
}

/// Restores the backup into the running database.
async fn restored(client: &Client, db: &str, backup: &str) {
    let (status, answer) = client
        .call(
            reqwest::Method::POST,
            &format!("/database/{db}/backup/{backup}/restore"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 204, "{answer}");
}

async fn a_database_keeps_its_data_and_its_applications_reach_it(database: Option<&str>) {
    let (image, version) = postgres_image();
    let backups = TempDir::new();
    // A dump whose backup no store knows (its database deleted while Capstan was down), and a
    // file Capstan did not write.
    let stray = backups
        .0
        .join(format!("{}.dump", uuid::Uuid::new_v4().simple()));
    std::fs::write(&stray, "a deleted database's rows").unwrap();
    let foreign = backups.0.join("notes.dump");
    std::fs::write(&foreign, "the operator's").unwrap();
    let images = "POSTGRESQL=capstan-test/postgres:{version}";
    let case = case_for(database, images, &backups, &[]).await;
    let (client, env) = (&case.client, &case.env);
    let what = ("POSTGRESQL", version.as_str(), image.as_str());
    let (db, password) = deployed(client, env, what, ("superuser", 5432)).await;
    sql(
        &container_of(&db),
        &password,
        "create table notes(t text); insert into notes values ('kept across deploys')",
    );
    let log = deployment_log(client, env).await;
    assert!(!log.contains(&password), "the password is in no log");
    keeps_its_data(client, &db, |container| {
        let rows = sql(container, &password, "select t from notes");
        assert_eq!(rows, "kept across deploys");
    })
    .await;

    // A backup taken by pg_dump in its container, the data changed, the backup restored.
    let (backup, file) = backup_taken(client, &db, &backups).await;
    let dump = std::fs::read_to_string(&file).unwrap();
    assert!(
        dump.contains("kept across deploys"),
        "the dump holds the rows"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "only Capstan's user reads a dump");
    let container = container_of(&db);
    sql(
        &container,
        &password,
        "delete from notes; insert into notes values ('changed')",
    );
    restored(client, &db, &backup).await;
    assert_eq!(
        sql(&container, &password, "select t from notes"),
        "kept across deploys",
        "restored"
    );
    let (status, _) = client
        .call(
            reqwest::Method::DELETE,
            &format!("/database/{db}/backup/{backup}"),
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert!(!file.exists(), "the dump goes with its backup");
    // Reconciliation at start-up took the dump no backup owns, and only it.
    assert!(!stray.exists(), "a dump of no backup is collected");
    assert!(foreign.exists(), "a file Capstan did not write stays");
    let (_, kept) = backup_taken(client, &db, &backups).await;

    // An application beside it connects with the connection variables it was given.
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/reader");
    let commit = repo.commit(
        "reader",
        &[(
            "Dockerfile",
            &format!(
                "FROM {image}\n\
                 ENTRYPOINT []\n\
                 CMD [\"sh\", \"-c\", \"URL=$(env | sed -n 's/^CAPSTAN_POSTGRESQL_Z.*_DATABASE_URL=//p'); \
                 while true; do psql \\\"$URL\\\" -tAc 'select t from notes' && sleep 3600; sleep 1; done\"]\n"
            ),
        )],
    );
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "reader", "git_repository": {"url": server.url("team/reader"),
                   "branch": "main"}}),
        )
        .await;
    post(
        client,
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": commit}),
    )
    .await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let printed = output_of(client, "application", &app, "kept across deploys").await;
    assert!(!printed.contains(&password), "{printed}");

    // Deleted, it takes its volume and its backups' dumps with it.
    let volume = format!("capstan-data-{}", db.replace('-', ""));
    assert!(docker(&["volume", "inspect", &volume]).is_ok());
    assert!(kept.exists());
    delete_asked(client, &format!("/database/{db}")).await;
    eventually(Duration::from_secs(30), || format!("the volume or a backup outlived its database (the volume is there: {}, the dump: {})", docker(&["volume", "inspect", &volume]).is_ok(), kept.exists()), async || {
        (docker(&["volume", "inspect", &volume]).is_err() && !kept.exists()).then_some(())
    })
    .await;
    let _ = docker(&[
        "rmi",
        "-f",
        &format!("capstan-build/{}:{commit}", app.replace('-', "")),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_database_keeps_its_data_and_its_applications_reach_it() {
    if !docker_ready() {
        return;
    }
    a_database_keeps_its_data_and_its_applications_reach_it(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_database_keeps_its_data_and_its_applications_reach_it() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_database_keeps_its_data_and_its_applications_reach_it(Some(&url)).await;
}

/// Runs redis-cli in the database's container, signed in with its password.
fn redis(container: &str, password: &str, args: &[&str]) -> String {
    let mut all = vec![
        "exec",
        "-e",
        &*format!("REDISCLI_AUTH={password}"),
        container,
        "redis-cli",
    ]
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    docker(&all).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Waits until the backup's listing shows it ended; its state.
async fn backup_ended(client: &Client, db: &str) -> serde_json::Value {
    let path = format!("/database/{db}/backup");
    let seen = std::cell::RefCell::new(serde_json::Value::Null);
    eventually(
        Duration::from_secs(60),
        || format!("the backup never ended: {}", seen.borrow()),
        async || {
            let listed = client.get(&path).await;
            let ended = listed["results"][0]["status"]["state"] != "DEPLOYING";
            *seen.borrow_mut() = listed.clone();
            ended.then_some(listed)
        },
    )
    .await
}

async fn a_redis_database_keeps_its_data_and_its_applications_reach_it(database: Option<&str>) {
    let (image, version) = redis_image();
    let backups = TempDir::new();
    let keep = [("CAPSTAN_DOCKER_KEEP_DATABASE_VOLUMES", "true")];
    let case = case_for(
        database,
        "REDIS=capstan-test/redis:{version}",
        &backups,
        &keep,
    )
    .await;
    let (client, env) = (&case.client, &case.env);
    let what = ("REDIS", version.as_str(), image.as_str());
    let (db, password) = deployed(client, env, what, ("default", 6379)).await;
    let container = container_of(&db);
    let shown = docker(&["inspect", &container]).unwrap();
    assert!(
        !shown.contains(&password),
        "the password is not in the container's command or environment"
    );
    assert_eq!(redis(&container, &password, &["SET", "note", "kept"]), "OK");
    let refused = docker(&["exec", &container, "redis-cli", "GET", "note"]).unwrap_or_default();
    assert!(refused.contains("NOAUTH"), "a password is asked: {refused}");
    keeps_its_data(client, &db, |container| {
        assert_eq!(redis(container, &password, &["GET", "note"]), "kept");
    })
    .await;

    // A database moves between the nodes of a Swarm: on one host there is nowhere to go.
    let (status, refused) = client
        .call(
            reqwest::Method::POST,
            &format!("/database/{db}/move"),
            Some(json!({"node": "10.0.0.2"})),
        )
        .await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("is not a Swarm"),
        "{refused}"
    );

    // A backup (the server's RDB, by redis-cli --rdb), the data changed, the backup restored:
    // the restored data is the server's, and what it keeps after a restart.
    let (backup, file) = backup_taken(client, &db, &backups).await;
    assert!(
        std::fs::read(&file).unwrap().starts_with(b"REDIS"),
        "an RDB file"
    );
    let container = container_of(&db);
    redis(&container, &password, &["SET", "note", "changed"]);
    redis(&container, &password, &["SET", "added", "after the backup"]);
    restored(client, &db, &backup).await;
    assert_eq!(redis(&container, &password, &["GET", "note"]), "kept");
    assert_eq!(redis(&container, &password, &["EXISTS", "added"]), "0");
    act(client, &db, "restart-service", "RESTARTED").await;
    assert_eq!(
        redis(&container_of(&db), &password, &["GET", "note"]),
        "kept",
        "the restore outlives a restart"
    );

    // An application beside it reads the key with the connection variables it was given.
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/reader");
    let commit = repo.commit(
        "reader",
        &[(
            "Dockerfile",
            &format!(
                "FROM {image}\n\
                 ENTRYPOINT []\n\
                 CMD [\"sh\", \"-c\", \"HOST=$(env | sed -n 's/^CAPSTAN_REDIS_Z.*_HOST=//p'); \
                 PORT=$(env | sed -n 's/^CAPSTAN_REDIS_Z.*_PORT=//p'); \
                 export REDISCLI_AUTH=$(env | sed -n 's/^CAPSTAN_REDIS_Z.*_PASSWORD=//p'); \
                 while true; do echo read $(redis-cli -h $HOST -p $PORT GET note); sleep 2; done\"]\n"
            ),
        )],
    );
    let reader = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "reader", "git_repository": {"url": server.url("team/reader"),
                   "branch": "main"}}),
        )
        .await;
    post(
        client,
        &format!("/application/{reader}/deploy"),
        json!({"git_commit_id": commit}),
    )
    .await;
    settled_in(client, "application", &reader, "DEPLOYED").await;
    let printed = output_of(client, "application", &reader, "read kept").await;
    assert!(!printed.contains(&password), "{printed}");
    let log = deployment_log(client, env).await;
    assert!(!log.contains(&password), "the password is in no log");
    assert!(
        !case.own_log().contains(&password),
        "the password is not in Capstan's own log"
    );
    let _ = docker(&[
        "rmi",
        "-f",
        &format!("capstan-build/{}:{commit}", reader.replace('-', "")),
    ]);

    // Deleted where the settings keep deleted databases' data: its volume and its dump stay.
    let volume = format!("capstan-data-{}", db.replace('-', ""));
    deleted(client, &format!("/database/{db}")).await;
    assert!(docker(&["volume", "inspect", &volume]).is_ok(), "kept");
    assert!(file.exists(), "the dump is kept with the volume");
    let _ = docker(&["volume", "rm", &volume]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_redis_database_keeps_its_data_and_its_applications_reach_it() {
    if !docker_ready() {
        return;
    }
    a_redis_database_keeps_its_data_and_its_applications_reach_it(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_redis_database_keeps_its_data_and_its_applications_reach_it() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_redis_database_keeps_its_data_and_its_applications_reach_it(Some(&url)).await;
}

/// Runs SQL in a MySQL database's container, signed in with its master credentials.
fn mysql(container: &str, password: &str, statement: &str) -> String {
    docker(&[
        "exec",
        "-e",
        &format!("MYSQL_PWD={password}"),
        container,
        "mysql",
        "-h",
        "127.0.0.1",
        "-u",
        "superuser",
        "-N",
        "-B",
        "-e",
        statement,
    ])
    .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

async fn a_mysql_database_keeps_its_data_and_restores_a_backup(database: Option<&str>) {
    let (image, version) = mysql_image();
    let backups = TempDir::new();
    let case = case_for(
        database,
        "MYSQL=capstan-test/mysql:{version}",
        &backups,
        &[],
    )
    .await;
    let (client, env) = (&case.client, &case.env);
    let what = ("MYSQL", version.as_str(), image.as_str());
    let (db, password) = deployed(client, env, what, ("superuser", 3306)).await;
    mysql(
        &container_of(&db),
        &password,
        "create database shop; create table shop.orders(t text); \
         insert into shop.orders values ('kept across deploys')",
    );
    keeps_its_data(client, &db, |container| {
        let rows = mysql(container, &password, "select t from shop.orders");
        assert_eq!(rows, "kept across deploys");
    })
    .await;

    // A backup by mysqldump, the data changed, the backup restored by the mysql client.
    let (backup, file) = backup_taken(client, &db, &backups).await;
    let dump = std::fs::read_to_string(&file).unwrap();
    assert!(
        dump.contains("kept across deploys"),
        "the dump holds the rows"
    );
    let container = container_of(&db);
    mysql(
        &container,
        &password,
        "delete from shop.orders; insert into shop.orders values ('changed')",
    );
    restored(client, &db, &backup).await;
    assert_eq!(
        mysql(&container, &password, "select t from shop.orders"),
        "kept across deploys",
        "restored"
    );
    let log = deployment_log(client, env).await;
    assert!(!log.contains(&password), "the password is in no log");
    assert!(!case.own_log().contains(&password));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_mysql_database_keeps_its_data_and_restores_a_backup() {
    if !docker_ready() {
        return;
    }
    a_mysql_database_keeps_its_data_and_restores_a_backup(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_mysql_database_keeps_its_data_and_restores_a_backup() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_mysql_database_keeps_its_data_and_restores_a_backup(Some(&url)).await;
}

/// A MANAGED database and a helm chart are refused by the Docker engine, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_database_and_a_helm_chart_are_refused_by_the_docker_engine() {
    if !docker_ready() {
        return;
    }
    let case = Case::start(None, &[]).await;
    let (client, env) = (&case.client, &case.env);
    let db = client
        .create(
            &format!("/environment/{env}/database"),
            json!({"name": "managed", "type": "POSTGRESQL", "version": "16", "mode": "MANAGED"}),
        )
        .await;
    act(client, &db, "deploy", "DEPLOYMENT_ERROR").await;
    let history = client
        .get(&format!("/database/{db}/deploymentHistory"))
        .await;
    let reason = history["results"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("CONTAINER mode only"), "{history}");
    assert!(containers_of(&db).is_empty());

    // So is a helm chart: it needs Kubernetes.
    let chart = client
        .create(
            &format!("/environment/{env}/helm"),
            json!({"name": "redis", "source": {"helm_repository": {"repository": "https://charts.example.com",
                   "chart_name": "redis", "chart_version": "19.0.0"}},
                   "arguments": [], "auto_deploy": false, "values_override": {}}),
        )
        .await;
    post(client, &format!("/helm/{chart}/deploy"), json!({})).await;
    settled_in(client, "helm", &chart, "DEPLOYMENT_ERROR").await;
    let history = client
        .get(&format!("/helm/{chart}/deploymentHistory"))
        .await;
    let reason = history["results"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Kubernetes"), "{history}");
    assert!(containers_of(&chart).is_empty());
}
