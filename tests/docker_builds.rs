//! The built binary with the Docker engine building services from git, on SQLite and
//! PostgreSQL: repositories served on 127.0.0.1 by `git http-backend`, Dockerfiles FROM the
//! local test image, workloads reached at their published ports on 127.0.0.1; and pull
//! requests previewed (`docker_previews`), in this binary to spare a link.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod docker_previews;
mod git_http;
mod harness;

use git_http::{GitServer, Repository, TlsFront};
use harness::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const BUILD_SECRET: &str = "build-arg-s3cret-value";

/// A Dockerfile serving `version` on port 8080, declaring build arguments (one secret, one
/// not), whose first step every version shares (a layer reused between builds).
fn dockerfile(version: &str, extra: &str) -> String {
    format!(
        "FROM {IMAGE}:{TAG}\n\
         RUN mkdir -p /www\n\
         ARG GREETING\n\
         ARG BUILD_TOKEN=none\n\
         RUN echo \"building with token $BUILD_TOKEN\"\n\
         {extra}\
         RUN echo \"$GREETING {version}\" > /www/index.html\n\
         CMD [\"httpd\", \"-f\", \"-p\", \"8080\", \"-h\", \"/www\"]\n"
    )
}

async fn deploy(client: &Client, id: &str, commit: &str) {
    post(
        client,
        &format!("/application/{id}/deploy"),
        json!({"git_commit_id": commit}),
    )
    .await;
}

/// Waits until a build's step printing `marker` runs (its output is in the log).
async fn build_begun(client: &Client, env: &str, marker: &str) {
    eventually(
        Duration::from_secs(60),
        || "the build never began".to_string(),
        async || (deployment_log(client, env).await.contains(marker)).then_some(()),
    )
    .await;
}

/// Waits until no container runs a build step whose command holds `marker`.
async fn build_stopped(marker: &str) {
    let running = || docker(&["ps", "--format", "{{.Command}}"]).unwrap();
    eventually(
        Duration::from_secs(30),
        || format!("the build still runs: {}", running()),
        async || (!running().contains(marker)).then_some(()),
    )
    .await
}

/// The last deployment's reason (why it failed).
async fn last_reason(client: &Client, kind: &str, id: &str) -> String {
    let history = client.get(&format!("/{kind}/{id}/deploymentHistory")).await;
    history["results"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn image_of(service: &str, commit: &str) -> String {
    format!("capstan-build/{}:{commit}", service.replace('-', ""))
}

/// Another organization of the installation may not run `image` (built for the case's
/// organization): not by its name, not by its id; and checking for it answers as for an image
/// that does not exist.
async fn another_organization_cannot_have(case: &Case, image: &str) {
    let them = case.stranger_with_environment("Strangers").await;
    let (stranger, their_env, registry) = (&them.client, &them.env, &them.registry);
    let id = docker(&["image", "inspect", "--format", "{{.Id}}", image]).unwrap();
    let (name, tag) = image.rsplit_once(':').unwrap();
    let id = id.trim_start_matches("sha256:");
    let unknown = format!("capstan-build/{}", "0".repeat(32));
    let check = |name: String, tag: String| async move {
        stranger
            .call(
                reqwest::Method::POST,
                &format!("/environment/{their_env}/checkContainerImage"),
                Some(json!({"registry_id": registry, "image_name": name, "tag": tag})),
            )
            .await
    };
    for (n, (name, tag, unknown_name, unknown_tag, why)) in [
        (
            name,
            tag,
            unknown.as_str(),
            tag,
            "holds the images Capstan builds",
        ),
        (
            "sha256",
            id,
            "sha256",
            &*"0".repeat(64),
            "an image id names",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let taken = stranger
            .create(
                &format!("/environment/{their_env}/container"),
                json!({"name": format!("taken{n}"), "registry_id": registry,
                       "image_name": name, "tag": tag}),
            )
            .await;
        post(stranger, &format!("/container/{taken}/deploy"), json!({})).await;
        settled_in(stranger, "container", &taken, "DEPLOYMENT_ERROR").await;
        let reason = last_reason(stranger, "container", &taken).await;
        assert!(reason.contains(why), "{reason}");
        assert!(containers_of(&taken).is_empty());
        let there = check(name.to_string(), tag.to_string()).await;
        let not_there = check(unknown_name.to_string(), unknown_tag.to_string()).await;
        assert_eq!(there.0, not_there.0, "{there:?} {not_there:?}");
        assert!(there.0 >= 400, "{there:?}");
    }
}

async fn an_application_is_built_from_git_and_deployed(database: Option<&str>) {
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/web");
    let first = repo.commit("one", &[("Dockerfile", &dockerfile("v1", ""))]);
    let mut case = Case::start(
        database,
        &[
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
            ("CAPSTAN_DOCKER_IMAGES_KEPT", "2"),
        ],
    )
    .await;
    let (client, env) = (&case.client, &case.env);
    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "web", "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                   "git_repository": {"url": server.url("team/web"), "branch": "main",
                                      "root_path": "/"},
                   "ports": [{"internal_port": 8080, "publicly_accessible": true,
                              "protocol": "HTTP"}]}),
        )
        .await;
    post(
        client,
        &format!("/application/{app}/environmentVariable"),
        json!({"key": "GREETING", "value": "hello"}),
    )
    .await;
    post(
        client,
        &format!("/application/{app}/secret"),
        json!({"key": "BUILD_TOKEN", "value": BUILD_SECRET}),
    )
    .await;

    // Built from the commit, with the build arguments its Dockerfile declares, and served.
    deploy(client, &app, &first).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v1");
    let log = deployment_log(client, env).await;
    assert!(
        log.contains("Step 1/"),
        "the build's output is logged: {log}"
    );
    assert!(
        log.contains("build arguments: BUILD_TOKEN, GREETING"),
        "{log}"
    );
    assert!(log.contains("building with token"), "{log}");
    assert!(
        !log.contains(BUILD_SECRET),
        "a secret build argument is masked"
    );
    assert!(docker(&["image", "inspect", &image_of(&app, &first)]).is_ok());
    let shown = client.get(&format!("/application/{app}")).await;
    assert_eq!(shown["git_repository"]["deployed_commit_id"], first);
    another_organization_cannot_have(&case, &image_of(&app, &first)).await;

    // A second commit: built (its first step from the cache) and served.
    let second = repo.commit("two", &[("Dockerfile", &dockerfile("v2", ""))]);
    deploy(client, &app, &second).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v2");
    let log = deployment_log(client, env).await;
    assert!(log.contains("Using cache"), "a layer is reused: {log}");

    // The first commit again: its image is reused, nothing is built.
    let builds = log.matches("Step 1/").count();
    deploy(client, &app, &first).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v1");
    let log = deployment_log(client, env).await;
    assert_eq!(log.matches("Step 1/").count(), builds, "no build: {log}");
    assert!(
        log.contains(&format!(
            "of commit {first} is on the Docker host: no build"
        )),
        "{log}"
    );

    // A Dockerfile that fails: BUILD_ERROR, with the failing instruction and its output; what
    // ran before still runs.
    let failing = repo.commit(
        "broken",
        &[(
            "Dockerfile",
            &dockerfile("v3", "RUN echo \"about to fail\" && exit 3\n"),
        )],
    );
    deploy(client, &app, &failing).await;
    settled_in(client, "application", &app, "BUILD_ERROR").await;
    let reason = last_reason(client, "application", &app).await;
    assert!(
        reason.contains("RUN echo \"about to fail\" && exit 3") && reason.contains("about to fail"),
        "{reason}"
    );
    assert!(reason.contains("returned a non-zero code: 3"), "{reason}");
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v1");

    // A cancel during a build stops it.
    let slow = repo.commit(
        "slow",
        &[(
            "Dockerfile",
            &dockerfile("v4", "RUN echo sleeping-in-build && sleep 120\n"),
        )],
    );
    deploy(client, &app, &slow).await;
    build_begun(client, env, "sleeping-in-build").await;
    post(
        client,
        &format!("/environment/{env}/cancelDeployment"),
        json!({}),
    )
    .await;
    let status = settle(
        client,
        &format!("/application/{app}/status"),
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(status["state"], "CANCELED", "{status}");
    build_stopped("sleeping-in-build").await;
    assert!(docker(&["image", "inspect", &image_of(&app, &slow)]).is_err());

    // Capstan killed during a build, before any new container starts: the request ends
    // BUILD_ERROR once its claim lapses, the previous replica alone runs and answers, the
    // build stops and its commit has no image.
    let cut = repo.commit(
        "cut",
        &[(
            "Dockerfile",
            &dockerfile("v4", "RUN echo cut-in-build && sleep 120\n"),
        )],
    );
    deploy(client, &app, &cut).await;
    build_begun(client, env, "cut-in-build").await;
    let before = container_ids(&app);
    case.crash();
    case.restart().await;
    let (client, env) = (&case.client, &case.env);
    let status = settle(
        client,
        &format!("/application/{app}/status"),
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(status["state"], "BUILD_ERROR", "{status}");
    assert_eq!(container_ids(&app), before, "the previous set only");
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v1");
    build_stopped("cut-in-build").await;
    assert!(docker(&["image", "inspect", &image_of(&app, &cut)]).is_err());

    // Two more builds: only the newest two images of the service are kept (one a container
    // runs is kept too).
    let fifth = repo.commit("five", &[("Dockerfile", &dockerfile("v5", ""))]);
    deploy(client, &app, &fifth).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    let sixth = repo.commit("six", &[("Dockerfile", &dockerfile("v6", ""))]);
    deploy(client, &app, &sixth).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "hello v6");
    for (commit, kept) in [
        (&first, false),
        (&second, false),
        (&fifth, true),
        (&sixth, true),
    ] {
        assert_eq!(
            docker(&["image", "inspect", &image_of(&app, commit)]).is_ok(),
            kept,
            "image of {commit}"
        );
    }

    // A job built from its repository runs its command in the image built.
    let job = client
        .create(
            &format!("/environment/{env}/job"),
            json!({"name": "task", "source": {"docker": {
                       "git_repository": {"url": server.url("team/web"), "branch": "main"},
                       "dockerfile_path": "Dockerfile"}},
                   "schedule": {"on_start": {"entrypoint": "sh",
                                             "arguments": ["-c", "cat /www/index.html"]}}}),
        )
        .await;
    post(
        client,
        &format!("/job/{job}/deploy"),
        json!({"git_commit_id": sixth}),
    )
    .await;
    settled_in(client, "job", &job, "DEPLOYED").await;
    let printed = output_of(client, "job", &job, "v6").await;
    assert!(printed.contains(" v6"), "{printed}");
    for image in [
        image_of(&app, &fifth),
        image_of(&app, &sixth),
        image_of(&job, &sixth),
    ] {
        let _ = docker(&["rmi", "-f", &image]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_an_application_is_built_from_git_and_deployed() {
    if !docker_ready() {
        return;
    }
    an_application_is_built_from_git_and_deployed(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_application_is_built_from_git_and_deployed() {
    if !docker_ready() {
        return;
    }
    let Some(storage::DatabaseUrl::Postgres(url)) = storage::testing::postgres_database().await
    else {
        return;
    };
    an_application_is_built_from_git_and_deployed(Some(&url)).await;
}

/// Clones reach only what the outbound policy permits, a private repository takes its git
/// token, and a non-http repository is refused when it is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_follow_the_outbound_policy_and_take_the_git_token() {
    if !docker_ready() {
        return;
    }
    const TOKEN: &str = "git-token-s3cret";
    let root = TempDir::new();
    let server = GitServer::start(&root.0, Some(TOKEN));
    let repo = Repository::create(&server, "team/private");
    let commit = repo.commit("one", &[("Dockerfile", &dockerfile("private", ""))]);
    let body = |name: &str, token: Option<&str>| {
        json!({"name": name, "git_repository": {"url": server.url("team/private"),
               "branch": "main", "git_token_id": token},
               "ports": [{"internal_port": 8080, "publicly_accessible": true}]})
    };

    let closed = Case::start(None, &[]).await;
    let app = closed
        .client
        .create(
            &format!("/environment/{}/application", closed.env),
            body("without", None),
        )
        .await;
    deploy(&closed.client, &app, &commit).await;
    settled_in(&closed.client, "application", &app, "BUILD_ERROR").await;
    let reason = last_reason(&closed.client, "application", &app).await;
    assert!(
        reason.contains("refused by the outbound policy")
            && reason.contains("CAPSTAN_OUTBOUND_ALLOW"),
        "{reason}"
    );
    let (status, answer) = closed
        .client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{}/application", closed.env),
            Some(json!({"name": "local", "git_repository": {"url": "file:///srv/repo/x"}})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    let (status, answer) = closed
        .client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{}/application", closed.env),
            Some(json!({"name": "packs", "build_mode": "BUILDPACKS",
                        "git_repository": {"url": server.url("team/private")}})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("build_mode"), "{answer}");
    drop(closed);

    let open = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1")]).await;
    let (client, env, org) = (&open.client, &open.env, &open.org);
    let without = client
        .create(
            &format!("/environment/{env}/application"),
            body("without", None),
        )
        .await;
    deploy(client, &without, &commit).await;
    settled_in(client, "application", &without, "BUILD_ERROR").await;
    let reason = last_reason(client, "application", &without).await;
    assert!(reason.contains("refused the token"), "{reason}");
    let token: Value = post(
        client,
        &format!("/organization/{org}/gitToken"),
        json!({"name": "local", "type": "HOSTA", "token": TOKEN}),
    )
    .await;
    let token = token["id"].as_str().unwrap();
    let with = client
        .create(
            &format!("/environment/{env}/application"),
            body("with", Some(token)),
        )
        .await;
    deploy(client, &with, &commit).await;
    settled_in(client, "application", &with, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&with), "/").await.trim(), "private");
    let log = deployment_log(client, env).await;
    assert!(!log.contains(TOKEN), "the token is in no log");
    assert!(!open.own_log().contains(TOKEN), "nor in Capstan's own");
    let _ = docker(&["rmi", "-f", &image_of(&with, &commit)]);

    // Each provider's token goes under the user name that provider takes it with (HOSTA's is
    // above): read through the API, a branch's commits.
    let hosted = TempDir::new();
    let providers = GitServer::start_for(
        &hosted.0,
        &[("oauth2", "hostb-s3cret"), ("x-token-auth", "hostc-s3cret")],
    );
    let repo = Repository::create(&providers, "team/hosted");
    let commit = repo.commit("one", &[("README", "hosted")]);
    for (provider, value, readable) in [
        ("HOSTB", "hostb-s3cret", true),
        ("HOSTC", "hostc-s3cret", true),
        ("HOSTA", "hostb-s3cret", false),
    ] {
        let token: Value = post(
            client,
            &format!("/organization/{org}/gitToken"),
            json!({"name": format!("{provider}-{readable}"), "type": provider, "token": value}),
        )
        .await;
        let app = client
            .create(
                &format!("/environment/{env}/application"),
                json!({"name": format!("on-{provider}"), "git_repository": {
                    "url": providers.url("team/hosted"), "branch": "main",
                    "git_token_id": token["id"]}}),
            )
            .await;
        let (status, commits) = client
            .call(
                reqwest::Method::GET,
                &format!("/application/{app}/commit"),
                None,
            )
            .await;
        if readable {
            assert_eq!(status, 200, "{provider}: {commits}");
            assert_eq!(commits["results"][0]["git_commit_id"], commit, "{commits}");
        } else {
            assert_ne!(status, 200, "under another provider's user name: {commits}");
        }
    }
}

/// What the API reads of a repository: a Dockerfile's ARGs and base images, files, the
/// directories under a root path, a branch's commits and their authors; and whether an image
/// can be run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_and_an_image_are_read_through_the_api() {
    if !docker_ready() {
        return;
    }
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/mono");
    repo.commit(
        "first",
        &[("infra/main.tf", "output \"x\" { value = 1 }\n")],
    );
    let last = repo.commit(
        "second",
        &[(
            "app/Dockerfile",
            &format!("ARG BASE_TAG=1\nFROM {IMAGE}:{TAG} AS base\nARG GREETING\nFROM base\n"),
        )],
    );
    let case = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1")]).await;
    let (client, env, org) = (&case.client, &case.env, &case.org);
    let git = |root_path: &str| {
        json!({"url": server.url("team/mono"), "branch": "main", "root_path": root_path,
               "owner": "team", "name": "mono", "provider": "HOSTA"})
    };
    let checked = post(
        client,
        &format!("/environment/{env}/checkDockerfile"),
        json!({"git_repository": git("/app"), "dockerfile_path": "Dockerfile"}),
    )
    .await;
    assert_eq!(checked["arg"], json!(["BASE_TAG", "GREETING"]), "{checked}");
    assert_eq!(checked["repositories"], json!([format!("{IMAGE}:{TAG}")]));
    assert_eq!(checked["git_repository"]["url"], server.url("team/mono"));
    let (status, answer) = client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{env}/checkDockerfile"),
            Some(json!({"git_repository": git("/"), "dockerfile_path": "Dockerfile"})),
        )
        .await;
    assert_eq!(status, 400, "no Dockerfile at the root: {answer}");

    post(
        client,
        &format!("/environment/{env}/checkGitFile"),
        json!({"git_repository": git("/infra"), "files": ["main.tf"]}),
    )
    .await;
    let (status, answer) = client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{env}/checkGitFile"),
            Some(json!({"git_repository": git("/"), "files": ["main.tf"]})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("main.tf"), "{answer}");

    let listed = post(
        client,
        &format!("/organization/{org}/listDirectoriesFromGitRepository"),
        git("/"),
    )
    .await;
    assert_eq!(listed["results"], json!(["app", "infra"]));

    let app = client
        .create(
            &format!("/environment/{env}/application"),
            json!({"name": "mono", "git_repository": git("/app")}),
        )
        .await;
    let commits = client.get(&format!("/application/{app}/commit")).await;
    let results = commits["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{commits}");
    assert_eq!(results[0]["git_commit_id"], last);
    assert_eq!(results[0]["message"], "second");
    assert_eq!(results[1]["message"], "first");
    assert_eq!(results[0]["author_name"], "Ada Tester");
    let contributors = client.get(&format!("/application/{app}/contributor")).await;
    assert_eq!(
        contributors["results"],
        json!([{"first_name": "Ada Tester", "last_name": "", "email": "ada@example.com"}])
    );

    // An image on the host can be run; a registry on a private address is not asked.
    post(
        client,
        &format!("/environment/{env}/checkContainerImage"),
        json!({"registry_id": case.registry, "image_name": IMAGE, "tag": TAG}),
    )
    .await;
    let private = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": "private", "kind": "GENERIC_CR", "url": "http://10.255.255.1:5000",
                   "config": {}}),
        )
        .await;
    let (status, answer) = client
        .call(
            reqwest::Method::POST,
            &format!("/environment/{env}/checkContainerImage"),
            Some(json!({"registry_id": private, "image_name": "team/absent", "tag": "1"})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer
            .to_string()
            .contains("refused by the outbound policy"),
        "{answer}"
    );
}

/// A repository served over https, by a server whose certificate only CAPSTAN_GIT_CA_FILE
/// vouches for: refused without it, read and built with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_repository_is_fetched_with_the_authority_given() {
    if !docker_ready() {
        return;
    }
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/secure");
    let commit = repo.commit("one", &[("Dockerfile", &dockerfile("secure", ""))]);
    let tls_dir = TempDir::new();
    let front = TlsFront::start(&server, &tls_dir.0);
    let body = json!({"name": "secure", "git_repository": {"url": front.url("team/secure"),
                      "branch": "main"},
                      "ports": [{"internal_port": 8080, "publicly_accessible": true}]});

    let untrusting = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1")]).await;
    let app = untrusting
        .client
        .create(
            &format!("/environment/{}/application", untrusting.env),
            body.clone(),
        )
        .await;
    let (status, answer) = untrusting
        .client
        .call(
            reqwest::Method::GET,
            &format!("/application/{app}/commit"),
            None,
        )
        .await;
    assert_ne!(status, 200, "an unknown authority is not trusted: {answer}");
    assert!(
        answer.to_string().contains("CAPSTAN_GIT_CA_FILE"),
        "the answer says which setting trusts it: {answer}"
    );
    drop(untrusting);

    let ca = front.certificate.display().to_string();
    let trusting = Case::start(
        None,
        &[
            ("CAPSTAN_OUTBOUND_ALLOW", "127.0.0.1"),
            ("CAPSTAN_GIT_CA_FILE", &ca),
        ],
    )
    .await;
    let (client, env) = (&trusting.client, &trusting.env);
    let app = client
        .create(&format!("/environment/{env}/application"), body)
        .await;
    let commits = client.get(&format!("/application/{app}/commit")).await;
    assert_eq!(commits["results"][0]["git_commit_id"], commit, "{commits}");
    deploy(client, &app, &commit).await;
    settled_in(client, "application", &app, "DEPLOYED").await;
    assert_eq!(fetch(host_port(&app), "/").await.trim(), "secure");
    let _ = docker(&["rmi", "-f", &image_of(&app, &commit)]);
}

/// A listener on 127.0.0.1 standing for a registry: it answers nothing and counts the
/// connections made to it.
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for _ in listener.incoming() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, accepted)
}

/// A Dockerfile makes the daemon pull nothing past the outbound policy: not an image named by
/// a build argument, nor one a COPY --from or a RUN --mount takes files from, nor a FROM only
/// Docker's reading of the escape directive sees, nor a BuildKit frontend; nor does it fetch
/// a URL an ADD names (as written, or made of a build argument). The repository is
/// reached as `localhost` (the only name the policy allows), the registry as 127.0.0.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dockerfile_makes_the_daemon_pull_nothing_past_the_outbound_policy() {
    if !docker_ready() {
        return;
    }
    let (port, accepted) = counting_listener();
    let registry = format!("127.0.0.1:{port}/x");
    let refused_by_policy = "refused by the outbound policy";
    let refused_as_dockerfile = "the Dockerfile cannot be built";
    let tricks = [
        (
            "argument",
            format!("ARG BASE={registry}:1\nFROM ${{BASE}}\n"),
            refused_by_policy,
            Some(format!("{registry}:1")),
        ),
        (
            "copy",
            format!("FROM {IMAGE}:{TAG}\nCOPY --from={registry}:2 /bin/sh /sh\n"),
            refused_by_policy,
            Some(format!("{registry}:2")),
        ),
        (
            "mount",
            format!("FROM {IMAGE}:{TAG}\nRUN --mount=type=bind,from={registry}:3,target=/m true\n"),
            refused_by_policy,
            Some(format!("{registry}:3")),
        ),
        (
            "escape",
            format!("# escape=`\nFROM {IMAGE}:{TAG}\nRUN echo \\\nFROM {registry}:4\n"),
            refused_by_policy,
            Some(format!("{registry}:4")),
        ),
        (
            "syntax",
            format!("# syntax={registry}:5\nFROM {IMAGE}:{TAG}\n"),
            refused_as_dockerfile,
            Some("# syntax".to_string()),
        ),
        (
            "add",
            format!("FROM {IMAGE}:{TAG}\nADD http://127.0.0.1:{port}/x.tgz /x\n"),
            refused_by_policy,
            Some(format!("http://127.0.0.1:{port}/x.tgz")),
        ),
        (
            "add-argument",
            format!("FROM {IMAGE}:{TAG}\nARG U=http://127.0.0.1:{port}/y\nADD $U /y\n"),
            refused_as_dockerfile,
            Some("ADD $U /y".to_string()),
        ),
    ];
    let root = TempDir::new();
    let server = GitServer::start(&root.0, None);
    let repo = Repository::create(&server, "team/tricks");
    let paths: Vec<String> = tricks
        .iter()
        .map(|(name, ..)| format!("{name}/Dockerfile"))
        .collect();
    let files: Vec<(&str, &str)> = paths
        .iter()
        .zip(&tricks)
        .map(|(path, (_, text, ..))| (path.as_str(), text.as_str()))
        .collect();
    let commit = repo.commit("tricks", &files);
    let url = server.url("team/tricks").replace("127.0.0.1", "localhost");
    let case = Case::start(None, &[("CAPSTAN_OUTBOUND_ALLOW", "localhost")]).await;
    let (client, env) = (&case.client, &case.env);

    for (name, _, refusal, image) in &tricks {
        let app = client
            .create(
                &format!("/environment/{env}/application"),
                json!({"name": name, "build_mode": "DOCKER", "dockerfile_path": "Dockerfile",
                       "git_repository": {"url": url, "branch": "main",
                                          "root_path": format!("/{name}")}}),
            )
            .await;
        deploy(client, &app, &commit).await;
        settled_in(client, "application", &app, "BUILD_ERROR").await;
        let reason = last_reason(client, "application", &app).await;
        assert!(reason.contains(refusal), "{name}: {reason}");
        if let Some(named) = image {
            assert!(reason.contains(named.as_str()), "{name}: {reason}");
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the daemon reached the registry"
    );
    // The listener does count: a connection of the test's own.
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    eventually(
        Duration::from_secs(10),
        || "never counted".to_string(),
        async || (accepted.load(Ordering::SeqCst) != 0).then_some(()),
    )
    .await;
}
