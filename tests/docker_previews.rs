//! The built binary previewing pull requests with the Docker engine and the router, on SQLite
//! and PostgreSQL: a repository with two branches served on 127.0.0.1, a fake provider API on
//! 127.0.0.1 (the git token's `git_api_url`) that takes the hook, comments and statuses, and
//! signed deliveries of the pull request's life.

use crate::git_http::{GitServer, Repository};
use crate::harness::*;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::time::Duration;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A Dockerfile serving `page` on port 8080.
fn serving(page: &str) -> String {
    format!(
        "FROM {IMAGE}:{TAG}\n\
         RUN mkdir -p /www && echo \"{page}\" > /www/index.html\n\
         CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n"
    )
}

/// The fake provider: hooks (none, then the one made), comments and statuses taken.
async fn provider() -> MockServer {
    let fake = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/team/web/hooks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([])))
        .mount(&fake)
        .await;
    Mock::given(method("POST"))
        .and(path("/repos/team/web/hooks"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 1})))
        .mount(&fake)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/repos/team/web/issues/\d+/comments$"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 77})))
        .mount(&fake)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/team/web/issues/comments/77"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 77})))
        .mount(&fake)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/repos/team/web/statuses/[0-9a-f]+$"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({})))
        .mount(&fake)
        .await;
    fake
}

/// The bodies the fake took at `at` by `verb`.
async fn taken(fake: &MockServer, verb: &str, at: &str) -> Vec<Value> {
    fake.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == at)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// A HOSTA `pull_request` event of pull request `number` from `head_repo`'s `feature`.
fn event(action: &str, number: i64, sha: &str, head_repo: &str, merged: bool) -> Value {
    json!({
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "title": "A feature",
            "html_url": format!("https://git.example.com/team/web/pull/{number}"),
            "merged": merged,
            "head": {"ref": "feature", "sha": sha, "repo": {"full_name": head_repo}},
            "base": {"ref": "main", "sha": "0", "repo": {"full_name": "team/web"}},
        },
        "repository": {"full_name": "team/web"},
    })
}

/// Delivers `body` signed with `secret` as the provider would; (status, answer).
async fn deliver(case: &Case, app: &str, secret: &str, id: &str, body: &Value) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&bytes);
    let signature: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let answer = reqwest::Client::new()
        .post(format!("{}/git/webhook/{app}", case.base()))
        .header("Content-Type", "application/json")
        .header("X-GitHub-Event", "pull_request")
        .header("X-GitHub-Delivery", id)
        .header("X-Hub-Signature-256", format!("sha256={signature}"))
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

/// The router's link of an application, once it has one.
async fn link_of(client: &Client, app: &str) -> String {
    let path = format!("/application/{app}/link");
    eventually(
        Duration::from_secs(30),
        || format!("no link for {app}"),
        async || {
            let links = client.get(&path).await;
            links["results"][0]["url"].as_str().map(str::to_string)
        },
    )
    .await
}

/// What the router answers at `link` once it answers `want`.
async fn serves(link: &str, want: &str) {
    let seen = std::cell::RefCell::new(String::new());
    eventually(
        Duration::from_secs(60),
        || format!("{link} answers {:?}, not {want}", seen.borrow()),
        async || {
            let text = through_router(link, "/").await.text().await.unwrap();
            let served = text.trim() == want;
            *seen.borrow_mut() = text;
            served.then_some(())
        },
    )
    .await;
}

async fn a_pull_request_drives_its_preview(database: Option<&str>) {
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/web");
    let main = repo.commit("main", &[("Dockerfile", &serving("main"))]);
    repo.branch_off("feature");
    let first = repo.commit("first", &[("Dockerfile", &serving("feature one"))]);
    let fake = provider().await;
    let case = Case::start(database, &[("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1")]).await;
    let (client, env, org) = (&case.client, &case.env, &case.org);

    let token = client
        .create(
            &format!("/organization/{org}/gitToken"),
            json!({"name": "hub", "type": "HOSTA", "token": "ghp_preview_token", "git_api_url": fake.uri()}),
        )
        .await;
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "web", "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                   "git_repository": {"url": server.url("team/web"), "branch": "main",
                                      "provider": "HOSTA", "git_token_id": token},
                   "ports": [{"internal_port": 8080, "publicly_accessible": true,
                              "protocol": "HTTP"}]}),
        )
        .await;
    post(
        client,
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": main}),
    )
    .await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let blueprint_link = link_of(client, &app).await;
    serves(&blueprint_link, "main").await;
    let (status, _) = client
        .call(
            reqwest::Method::PUT,
            &format!("/environment/{env}/deploymentRule/{env}"),
            Some(
                json!({"auto_preview": true, "timezone": "UTC", "start_time": "08:00",
                        "stop_time": "19:00", "weekdays": ["MONDAY"]}),
            ),
        )
        .await;
    assert_eq!(status, 200);
    post(
        client,
        &format!("/service/{app}/gitWebhook/sync"),
        json!({}),
    )
    .await;
    let hook = &taken(&fake, "POST", "/repos/team/web/hooks").await[0];
    let events: Vec<&str> = hook["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(events.contains(&"pull_request"), "{hook}");
    let secret = hook["config"]["secret"].as_str().unwrap().to_string();

    // Opened: a preview, built from the pull request's head, served at its own name.
    let opened = event("opened", 7, &first, "team/web", false);
    let (status, answer) = deliver(&case, &app, &secret, "d-open", &opened).await;
    assert_eq!(
        (status, &answer["result"]),
        (202, &json!("PREVIEW_CREATED")),
        "{answer}"
    );
    let preview = answer["environment_id"].as_str().unwrap().to_string();
    // Delivered again: nothing more.
    let (status, again) = deliver(&case, &app, &secret, "d-open", &opened).await;
    assert_eq!(
        (status, &again["result"]),
        (200, &json!("IGNORED")),
        "{again}"
    );
    let copies = client
        .get(&format!("/environment/{preview}/application"))
        .await;
    assert_eq!(copies["results"].as_array().unwrap().len(), 1, "{copies}");
    let copy = copies["results"][0]["id"].as_str().unwrap().to_string();
    settled_in(client, "application", &copy, "DEPLOYED").await;
    let preview_link = link_of(client, &copy).await;
    assert_ne!(preview_link, blueprint_link);
    serves(&preview_link, "feature one").await;
    serves(&blueprint_link, "main").await;
    let history = client
        .get(&format!("/application/{copy}/deploymentHistory"))
        .await;
    assert_eq!(history["results"].as_array().unwrap().len(), 1, "{history}");
    let project = client.get(&format!("/environment/{env}")).await["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let environments = client.get(&format!("/project/{project}/environment")).await;
    assert_eq!(environments["results"].as_array().unwrap().len(), 2);

    // The pull request is told: its comment names the link, its head's status says success.
    let status_path = format!("/repos/team/web/statuses/{first}");
    eventually(
        Duration::from_secs(30),
        || "the head commit's status never said success".into(),
        async || {
            taken(&fake, "POST", &status_path)
                .await
                .iter()
                .any(|s| s["state"] == "success")
                .then_some(())
        },
    )
    .await;
    let mut comments = taken(&fake, "POST", "/repos/team/web/issues/7/comments").await;
    comments.extend(taken(&fake, "PATCH", "/repos/team/web/issues/comments/77").await);
    assert!(
        comments
            .iter()
            .any(|c| c["body"].as_str().unwrap().contains(&preview_link)),
        "{comments:?}"
    );

    // A fork's pull request: no preview.
    let (status, fork) = deliver(
        &case,
        &app,
        &secret,
        "d-fork",
        &event("opened", 8, &first, "mallory/web", false),
    )
    .await;
    assert_eq!(
        (status, &fork["result"]),
        (200, &json!("IGNORED")),
        "{fork}"
    );

    // A new commit on the branch: the preview serves it, the blueprint its own.
    let second = repo.commit("second", &[("Dockerfile", &serving("feature two"))]);
    let (status, updated) = deliver(
        &case,
        &app,
        &secret,
        "d-sync",
        &event("synchronize", 7, &second, "team/web", false),
    )
    .await;
    assert_eq!(
        (status, &updated["result"]),
        (202, &json!("PREVIEW_UPDATED")),
        "{updated}"
    );
    serves(&preview_link, "feature two").await;
    serves(&blueprint_link, "main").await;

    // Merged as it is: the blueprint deploys the commit its preview built, without a build.
    post(
        client,
        &format!("/application/{app}/deploy"),
        json!({"git_commit_id": second}),
    )
    .await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let log = deployment_log(client, env).await;
    assert!(log.contains("reuses it, no build"), "{log}");
    serves(&blueprint_link, "feature two").await;

    // Closed: nothing of the preview remains, in the store or on Docker.
    let (status, closed) = deliver(
        &case,
        &app,
        &secret,
        "d-close",
        &event("closed", 7, &second, "team/web", true),
    )
    .await;
    assert_eq!(
        (status, &closed["result"]),
        (202, &json!("PREVIEW_DELETED")),
        "{closed}"
    );
    eventually(
        Duration::from_secs(120),
        || "the preview environment stays".into(),
        async || {
            let (status, _) = client
                .call(
                    reqwest::Method::GET,
                    &format!("/environment/{preview}"),
                    None,
                )
                .await;
            (status == 404).then_some(())
        },
    )
    .await;
    assert!(
        containers_of(&copy).is_empty(),
        "{:?}",
        containers_of(&copy)
    );
    // The image built only for the preview is gone, and so is every tag it held; the one
    // the blueprint took stays under the blueprint's tag alone.
    let images = |filter: String| docker(&["images", "-q", "--filter", &filter]).unwrap();
    // (The commit and the service: the other backend's run makes the same commits.)
    let only_its = docker(&[
        "images",
        "-q",
        "--filter",
        &format!("label=capstan.commit={first}"),
        "--filter",
        &format!("label=capstan.service={copy}"),
    ])
    .unwrap();
    assert!(
        only_its.trim().is_empty(),
        "the first head's image: {only_its}"
    );
    let tagged = images(format!("reference=capstan-build/{}", copy.replace('-', "")));
    assert!(
        tagged.trim().is_empty(),
        "images tagged for the preview: {tagged}"
    );
    eventually(
        Duration::from_secs(30),
        || "the preview's network stays".into(),
        async || {
            docker(&[
                "network",
                "ls",
                "-q",
                "--filter",
                &format!("label=capstan.environment={preview}"),
            ])
            .unwrap()
            .trim()
            .is_empty()
            .then_some(())
        },
    )
    .await;
    let environments = client.get(&format!("/project/{project}/environment")).await;
    assert_eq!(environments["results"].as_array().unwrap().len(), 1);
    // The image the blueprint took from the preview's build stays with it.
    serves(&blueprint_link, "feature two").await;
    for commit in [&main, &second] {
        let _ = docker(&[
            "rmi",
            "-f",
            &format!("capstan-build/{}:{commit}", app.replace('-', "")),
        ]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_pull_request_drives_its_preview() {
    if !docker_ready() {
        return;
    }
    a_pull_request_drives_its_preview(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_pull_request_drives_its_preview() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    a_pull_request_drives_its_preview(Some(&url)).await;
}
