//! Pull requests' preview environments over HTTP, on both backends, against a local fake of
//! each provider's API: the events that open, update and close a preview (parsed, signed,
//! deduplicated), what a preview holds, on-demand previews (a comment, the API), the limit,
//! forks, and a preview following its blueprint's deployment rule on a clock the test moves.

use crate::common;

use actix_web::http::Method;
use actix_web::test::TestRequest;
use common::{eventually, App, T, WITHIN};
use domain::clock::ManualClock;
use domain::services::{Capstan, GitIntegration, PreviewSettings};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use std::sync::Arc;
use time::macros::datetime;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

http_suite_with!(with_previews;
    a_pull_request_opens_updates_and_closes_its_preview,
    the_rule_and_the_service_decide_what_is_previewed,
    a_preview_is_asked_for_by_comment_or_by_the_api,
    previews_stop_at_the_limit_with_a_comment_saying_why,
    hostb_and_hostc_pull_requests_drive_previews,
    a_provider_that_cannot_be_told_fails_no_deployment,
    two_repositories_pull_requests_of_one_number_are_told_apart,
);

mod clocked {
    #[actix_rt::test]
    async fn sqlite() {
        let clock = super::clock();
        let b = crate::common::sqlite()
            .await
            .unwrap()
            .map(super::clocked(&clock));
        super::a_preview_follows_its_blueprint_s_rule_hours(crate::common::setup(b).await, clock)
            .await;
    }

    #[actix_rt::test]
    async fn postgres() {
        let Some(b) = crate::common::postgres().await else {
            return;
        };
        let clock = super::clock();
        let b = b.map(super::clocked(&clock));
        super::a_preview_follows_its_blueprint_s_rule_hours(crate::common::setup(b).await, clock)
            .await;
    }
}

const PUBLIC: &str = "https://capstan.example";

fn integration() -> GitIntegration {
    GitIntegration::new(
        Arc::new(
            git::HttpGitHosting::new(
                std::time::Duration::from_millis(500),
                common::loopback_allowed(),
            )
            .unwrap(),
        ),
        PUBLIC,
        domain::secret::Secret::new("test-signing-key"),
        time::Duration::seconds(0),
    )
}

fn settings() -> PreviewSettings {
    PreviewSettings {
        most_per_environment: 2,
        ..PreviewSettings::default()
    }
}

fn with_previews(capstan: Capstan) -> Capstan {
    capstan.with_git(integration()).with_previews(settings())
}

/// Monday 2026-11-23, 18:00 UTC: an hour before the rule's stop.
fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::at(datetime!(2026-11-23 18:00 UTC)))
}

fn clocked(clock: &Arc<ManualClock>) -> impl FnOnce(Capstan) -> Capstan {
    let clock = clock.clone();
    move |c| with_previews(Capstan::new(c.store().clone(), clock))
}

fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let bytes = mac.finalize().into_bytes();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fake provider's answers to what previews ask: comments (written, then edited),
/// commit statuses, who may write, and the pull requests the API is asked for.
async fn provider() -> MockServer {
    let fake = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/repos/acme/api/issues/\d+/comments$"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 501})))
        .mount(&fake)
        .await;
    Mock::given(method("PATCH"))
        .and(path("/repos/acme/api/issues/comments/501"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": 501})))
        .mount(&fake)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/repos/acme/api/statuses/\w+$"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({})))
        .mount(&fake)
        .await;
    for (user, permission) in [("ada", "write"), ("eve", "read")] {
        Mock::given(method("GET"))
            .and(path(format!(
                "/repos/acme/api/collaborators/{user}/permission"
            )))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"permission": permission})),
            )
            .mount(&fake)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/repos/acme/api/pulls/7"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(pull_request(7, "feature", "f00d01", false)),
        )
        .mount(&fake)
        .await;
    fake
}

fn pull_request(number: i64, head: &str, sha: &str, fork: bool) -> Value {
    let head_repo = if fork { "mallory/api" } else { "acme/api" };
    json!({
        "number": number,
        "title": "A change",
        "html_url": format!("https://github.com/acme/api/pull/{number}"),
        "merged": false,
        "head": {"ref": head, "sha": sha, "repo": {"full_name": head_repo}},
        "base": {"ref": "main", "sha": "0ld", "repo": {"full_name": "acme/api"}},
    })
}

/// A HOSTA `pull_request` event.
fn opened(action: &str, number: i64, sha: &str, fork: bool, merged: bool) -> Value {
    let mut pr = pull_request(number, "feature", sha, fork);
    pr["merged"] = json!(merged);
    json!({"action": action, "number": number, "pull_request": pr,
           "repository": {"full_name": "acme/api"}})
}

/// The blueprint: an environment whose rule previews pull requests (`rule`'s members), an
/// application from acme/api (auto_preview on, as applications have it), a container with
/// auto_preview off and a database; returns (environment, application, container, database).
async fn blueprint<S: App>(
    t: &T<S>,
    fake: &MockServer,
    rule: Value,
) -> (String, String, String, String) {
    let env = t.hierarchy().await.2;
    let token = t
        .post(
            &format!("/organization/{}/gitToken", t.org),
            json!({"name": "gh", "type": "HOSTA", "token": "ghp_secret", "git_api_url": fake.uri()}),
        )
        .await
        .expect(201)
        .id();
    let app = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "api", "auto_deploy": true,
                   "git_repository": {"url": "https://github.com/acme/api", "branch": "main",
                                      "git_token_id": token},
                   "ports": [{"internal_port": 8080, "publicly_accessible": true}]}),
        )
        .await
        .expect(201)
        .id();
    let container = t.container(&env, "cache").await;
    let database = t
        .post(
            &format!("/environment/{env}/database"),
            json!({"name": "db", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER",
                   "accessibility": "PRIVATE"}),
        )
        .await
        .expect(201)
        .id();
    t.post(
        &format!("/environment/{env}/environmentVariable"),
        json!({"key": "GREETING", "value": "hello"}),
    )
    .await
    .expect(201);
    let mut body = json!({"timezone": "UTC", "start_time": "08:00", "stop_time": "19:00",
                          "weekdays": ["MONDAY"]});
    for (k, v) in rule.as_object().unwrap() {
        body[k] = v.clone();
    }
    t.put(&format!("/environment/{env}/deploymentRule/{env}"), body)
        .await
        .expect(200);
    (env, app, container, database)
}

/// Sends a signed HOSTA delivery of `event` to the application's receiver.
async fn deliver<S: App>(t: &T<S>, app: &str, event: &str, id: &str, body: &Value) -> common::Resp {
    let secret = integration().secret_for(app.parse().unwrap());
    let bytes = serde_json::to_vec(body).unwrap();
    let req = TestRequest::default()
        .method(Method::POST)
        .uri(&format!("/git/webhook/{app}"))
        .insert_header(("Content-Type", "application/json"))
        .insert_header(("X-GitHub-Event", event.to_string()))
        .insert_header(("X-GitHub-Delivery", id.to_string()))
        .insert_header((
            "X-Hub-Signature-256",
            format!("sha256={}", sign(secret.expose(), &bytes)),
        ))
        .set_payload(bytes)
        .to_request();
    t.send(req).await
}

fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

/// The JSON bodies the fake received at `at` by `verb`.
async fn sent(fake: &MockServer, verb: &str, at: &str) -> Vec<Value> {
    fake.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == verb && r.url.path() == at)
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

async fn a_pull_request_opens_updates_and_closes_its_preview<S: App>(t: T<S>) {
    let fake = provider().await;
    let (env, app, _, _) = blueprint(&t, &fake, json!({"auto_preview": true})).await;
    let blueprint_before = t.get(&format!("/application/{app}")).await.body;

    let created = deliver(
        &t,
        &app,
        "pull_request",
        "pr-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(202);
    assert_eq!(
        created.body["result"], "PREVIEW_CREATED",
        "{}",
        created.text
    );
    let preview = created.body["environment_id"].as_str().unwrap().to_string();

    // The same delivery again: nothing more.
    let again = deliver(
        &t,
        &app,
        "pull_request",
        "pr-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(again.body["result"], "IGNORED");

    let shown = t
        .get(&format!("/environment/{preview}"))
        .await
        .expect(200)
        .body;
    let env_name = t.get(&format!("/environment/{env}")).await.body["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(shown["mode"], "PREVIEW");
    assert_eq!(shown["name"], format!("{env_name} (preview #7)"));
    assert_eq!(
        shown["pull_request"],
        json!({"provider": "HOSTA", "repository": "acme/api", "number": 7,
               "url": "https://github.com/acme/api/pull/7", "head_branch": "feature",
               "head_commit": "f00d01", "blueprint_environment_id": env}),
    );
    let project = shown["project"]["id"].as_str().unwrap().to_string();
    let listed = t.get(&format!("/project/{project}/environment")).await.body;
    assert_eq!(listed["results"].as_array().unwrap().len(), 2, "{listed}");

    // The application (auto_preview on) and the database are copied; the container is not.
    let apps = t
        .get(&format!("/environment/{preview}/application"))
        .await
        .body;
    assert_eq!(names(&apps), ["api"]);
    let copy = apps["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(apps["results"][0]["git_repository"]["branch"], "feature");
    let containers = t
        .get(&format!("/environment/{preview}/container"))
        .await
        .body;
    assert!(names(&containers).is_empty(), "{containers}");
    let databases = t
        .get(&format!("/environment/{preview}/database"))
        .await
        .body;
    assert_eq!(names(&databases), ["db"]);

    // Variables: the blueprint's, and the built-in ones naming the pull request.
    let variables = t
        .get(&format!("/application/{copy}/environmentVariable"))
        .await
        .body;
    let value_of = |key: &str| {
        variables["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["key"] == key)
            .map(|v| (v["value"].clone(), v["scope"].clone()))
    };
    assert_eq!(
        value_of("GREETING"),
        Some((json!("hello"), json!("ENVIRONMENT")))
    );
    assert_eq!(
        value_of("CAPSTAN_PULL_REQUEST_NUMBER"),
        Some((json!("7"), json!("BUILT_IN")))
    );
    assert_eq!(
        value_of("CAPSTAN_PULL_REQUEST_BRANCH"),
        Some((json!("feature"), json!("BUILT_IN")))
    );
    assert_eq!(
        value_of("CAPSTAN_PULL_REQUEST_COMMIT_ID"),
        Some((json!("f00d01"), json!("BUILT_IN")))
    );

    // Deployed at once, at the head commit; the pull request is told (comment, status).
    let done = t.settle(&format!("/application/{copy}/status")).await;
    assert_eq!(done["state"], "DEPLOYED", "{done}");
    let deployed = t.get(&format!("/application/{copy}")).await.body;
    assert_eq!(deployed["git_repository"]["deployed_commit_id"], "f00d01");
    eventually(
        WITHIN,
        || "no success status".into(),
        async || {
            sent(&fake, "POST", "/repos/acme/api/statuses/f00d01")
                .await
                .iter()
                .any(|s| s["state"] == "success" && s["context"] == "capstan/preview")
                .then_some(())
        },
    )
    .await;
    let statuses = sent(&fake, "POST", "/repos/acme/api/statuses/f00d01").await;
    assert_eq!(statuses[0]["state"], "pending", "{statuses:?}");
    let comments = sent(&fake, "POST", "/repos/acme/api/issues/7/comments").await;
    assert_eq!(comments.len(), 1, "one comment, edited after: {comments:?}");
    assert!(comments[0]["body"]
        .as_str()
        .unwrap()
        .contains("(preview #7)"));

    // A new head commit: the preview's application deploys it; the blueprint stays.
    let updated = deliver(
        &t,
        &app,
        "pull_request",
        "pr-2",
        &opened("synchronize", 7, "f00d02", false, false),
    )
    .await
    .expect(202);
    assert_eq!(updated.body["result"], "PREVIEW_UPDATED");
    eventually(
        WITHIN,
        || "the new head was never deployed".into(),
        async || {
            let shown = t.get(&format!("/application/{copy}")).await.body;
            (shown["git_repository"]["deployed_commit_id"] == "f00d02"
                && t.settle(&format!("/application/{copy}/status")).await["state"] == "DEPLOYED")
                .then_some(())
        },
    )
    .await;
    let shown = t.get(&format!("/environment/{preview}")).await.body;
    assert_eq!(shown["pull_request"]["head_commit"], "f00d02");
    let edited = sent(&fake, "PATCH", "/repos/acme/api/issues/comments/501").await;
    assert!(!edited.is_empty(), "the comment is edited in place");

    // A fork's pull request is not previewed (the setting's default).
    let fork = deliver(
        &t,
        &app,
        "pull_request",
        "pr-3",
        &opened("opened", 8, "bad000", true, false),
    )
    .await
    .expect(200);
    assert_eq!(fork.body["result"], "IGNORED");
    assert!(fork.body["reason"].as_str().unwrap().contains("fork"));

    // Merged: the preview goes, with everything it held.
    let closed = deliver(
        &t,
        &app,
        "pull_request",
        "pr-4",
        &opened("closed", 7, "f00d02", false, true),
    )
    .await
    .expect(202);
    assert_eq!(closed.body["result"], "PREVIEW_DELETED");
    t.gone(&format!("/environment/{preview}")).await;
    t.get(&format!("/application/{copy}")).await.expect(404);
    let listed = t.get(&format!("/project/{project}/environment")).await.body;
    assert_eq!(listed["results"].as_array().unwrap().len(), 1, "{listed}");

    // The blueprint was never changed.
    let blueprint_after = t.get(&format!("/application/{app}")).await.body;
    assert_eq!(
        blueprint_after["git_repository"],
        blueprint_before["git_repository"]
    );

    // Reopened: a preview again.
    let reopened = deliver(
        &t,
        &app,
        "pull_request",
        "pr-5",
        &opened("reopened", 7, "f00d02", false, false),
    )
    .await
    .expect(202);
    assert_eq!(reopened.body["result"], "PREVIEW_CREATED");
}

async fn the_rule_and_the_service_decide_what_is_previewed<S: App>(t: T<S>) {
    let fake = provider().await;
    let (env, app, _, _) = blueprint(&t, &fake, json!({"auto_preview": false})).await;
    let off = deliver(
        &t,
        &app,
        "pull_request",
        "r-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(off.body["result"], "IGNORED");
    assert!(
        off.body["reason"]
            .as_str()
            .unwrap()
            .contains("auto_preview"),
        "{}",
        off.text
    );

    // The rule on, the service's own auto_preview off.
    t.put(
        &format!("/environment/{env}/deploymentRule/{env}"),
        json!({"auto_preview": true, "timezone": "UTC", "start_time": "08:00",
               "stop_time": "19:00", "weekdays": ["MONDAY"]}),
    )
    .await
    .expect(200);
    let token =
        t.get(&format!("/application/{app}")).await.body["git_repository"]["git_token_id"].clone();
    let unpreviewed = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "worker", "auto_preview": false,
                   "git_repository": {"url": "https://github.com/acme/api", "branch": "main",
                                      "git_token_id": token}}),
        )
        .await
        .expect(201)
        .id();
    let off = deliver(
        &t,
        &unpreviewed,
        "pull_request",
        "r-2",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert!(
        off.body["reason"].as_str().unwrap().contains("service"),
        "{}",
        off.text
    );

    // A pull request into another branch than the service's.
    let mut elsewhere = opened("opened", 9, "f00d01", false, false);
    elsewhere["pull_request"]["base"]["ref"] = json!("release");
    let ignored = deliver(&t, &app, "pull_request", "r-3", &elsewhere)
        .await
        .expect(200);
    assert!(ignored.body["reason"].as_str().unwrap().contains("release"));

    // Another action (a label) and another event are acknowledged and ignored.
    let labeled = deliver(
        &t,
        &app,
        "pull_request",
        "r-4",
        &opened("labeled", 7, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(labeled.body["result"], "IGNORED");
    let unknown_close = deliver(
        &t,
        &app,
        "pull_request",
        "r-5",
        &opened("closed", 11, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(
        unknown_close.body["reason"],
        "the pull request has no preview"
    );
    // The same pull request event, unsigned: refused.
    let bytes = serde_json::to_vec(&opened("opened", 7, "f00d01", false, false)).unwrap();
    let req = TestRequest::default()
        .method(Method::POST)
        .uri(&format!("/git/webhook/{app}"))
        .insert_header(("X-GitHub-Event", "pull_request"))
        .insert_header(("X-GitHub-Delivery", "r-6"))
        .set_payload(bytes)
        .to_request();
    t.send(req).await.expect(401);
}

async fn a_preview_is_asked_for_by_comment_or_by_the_api<S: App>(t: T<S>) {
    let fake = provider().await;
    let (_, app, _, _) = blueprint(&t, &fake, json!({"on_demand_preview": true})).await;
    // Opened: nothing, the rule previews on demand only.
    let on_open = deliver(
        &t,
        &app,
        "pull_request",
        "c-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(on_open.body["result"], "IGNORED");

    let comment = |user: &str, body: &str| {
        json!({"action": "created",
               "issue": {"number": 7, "pull_request": {"url": "x"}},
               "comment": {"body": body, "user": {"login": user}},
               "repository": {"full_name": "acme/api"}})
    };
    // From a user who may only read: no preview.
    let refused = deliver(
        &t,
        &app,
        "issue_comment",
        "c-2",
        &comment("eve", "/capstan preview"),
    )
    .await
    .expect(200);
    assert!(
        refused.body["reason"].as_str().unwrap().contains("eve"),
        "{}",
        refused.text
    );
    // Another comment: nothing.
    let chatter = deliver(
        &t,
        &app,
        "issue_comment",
        "c-3",
        &comment("ada", "looks good"),
    )
    .await
    .expect(200);
    assert_eq!(chatter.body["result"], "IGNORED");
    // The command from a writer: the preview, at the head the provider's API gives.
    let asked = deliver(
        &t,
        &app,
        "issue_comment",
        "c-4",
        &comment("ada", "/capstan preview\nplease"),
    )
    .await
    .expect(202);
    assert_eq!(asked.body["result"], "PREVIEW_CREATED", "{}", asked.text);
    let preview = asked.body["environment_id"].as_str().unwrap().to_string();
    let shown = t.get(&format!("/environment/{preview}")).await.body;
    assert_eq!(shown["pull_request"]["head_commit"], "f00d01");

    // The API call asks the same: the open preview is the one answered.
    let again = t
        .post(&format!("/service/{app}/pullRequest/7/preview"), json!({}))
        .await
        .expect(202);
    assert_eq!(again.body["result"], "PREVIEW_UPDATED");
    assert_eq!(again.body["environment_id"], json!(preview));
    t.post(
        &format!("/service/{app}/pullRequest/nope/preview"),
        json!({}),
    )
    .await
    .expect(400);
    // A viewer may not ask.
    let viewer = t.token_with_role(domain::auth::Role::Viewer).await;
    t.call(
        Some(&viewer),
        Method::POST,
        &format!("/service/{app}/pullRequest/7/preview"),
        Some(json!({})),
    )
    .await
    .expect(403);
}

async fn previews_stop_at_the_limit_with_a_comment_saying_why<S: App>(t: T<S>) {
    let fake = provider().await;
    let (_, app, _, _) = blueprint(&t, &fake, json!({"auto_preview": true})).await;
    for (n, delivery) in [(1, "l-1"), (2, "l-2")] {
        let created = deliver(
            &t,
            &app,
            "pull_request",
            delivery,
            &opened("opened", n, "f00d01", false, false),
        )
        .await
        .expect(202);
        assert_eq!(created.body["result"], "PREVIEW_CREATED");
    }
    let third = deliver(
        &t,
        &app,
        "pull_request",
        "l-3",
        &opened("opened", 3, "f00d01", false, false),
    )
    .await
    .expect(200);
    assert_eq!(third.body["result"], "IGNORED");
    assert!(third.body["reason"]
        .as_str()
        .unwrap()
        .contains("CAPSTAN_PREVIEW_LIMIT"));
    let told = sent(&fake, "POST", "/repos/acme/api/issues/3/comments").await;
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0]["body"].as_str().unwrap().contains("no preview"));
}

/// How one provider speaks: its repository, the events of a pull request (number 4, from
/// `topic` at `ab12`) and of a comment, the API's answers previews ask for, and how its
/// deliveries are signed.
struct Provider {
    kind: &'static str,
    url: &'static str,
    event_header: &'static str,
    open: (&'static str, Value),
    close: (&'static str, Value),
    /// A comment by `ada` asking for a preview.
    comment: (&'static str, Value),
    /// (path, answer) of the provider's API: who may write, the pull request.
    api: [(&'static str, Value); 2],
}

fn hostb() -> Provider {
    let mr = |action: &str| {
        json!({"object_kind": "merge_request", "object_attributes": {
            "action": action, "iid": 4, "title": "t",
            "url": "https://git.acme.internal/acme/lab/-/merge_requests/4",
            "target_branch": "main", "source_branch": "topic", "source_project_id": 1,
            "target_project_id": 1, "last_commit": {"id": "ab12"}}})
    };
    Provider {
        kind: "HOSTB",
        url: "https://git.acme.internal/acme/lab",
        event_header: "X-Gitlab-Event",
        open: ("Merge Request Hook", mr("open")),
        close: ("Merge Request Hook", mr("merge")),
        comment: (
            "Note Hook",
            json!({"object_kind": "note", "user": {"username": "ada"},
                   "object_attributes": {"noteable_type": "MergeRequest", "note": "/capstan preview"},
                   "merge_request": {"iid": 4}}),
        ),
        api: [
            (
                "/projects/acme%2Flab/members/all",
                json!([{"username": "adam", "access_level": 50}, {"username": "ada", "access_level": 30}]),
            ),
            (
                "/projects/acme%2Flab/merge_requests/4",
                json!({"iid": 4, "title": "t", "web_url": "https://git.acme.internal/acme/lab/-/merge_requests/4",
                       "target_branch": "main", "source_branch": "topic", "sha": "ab12",
                       "source_project_id": 1, "target_project_id": 1}),
            ),
        ],
    }
}

fn hostc() -> Provider {
    let pr = json!({"id": 4, "title": "t",
        "links": {"html": {"href": "https://bitbucket.org/acme/bucket/pull-requests/4"}},
        "source": {"branch": {"name": "topic"}, "commit": {"hash": "ab12"},
                   "repository": {"full_name": "acme/bucket"}},
        "destination": {"branch": {"name": "main"}, "commit": {"hash": "0"},
                        "repository": {"full_name": "acme/bucket"}}});
    Provider {
        kind: "HOSTC",
        url: "https://bitbucket.org/acme/bucket",
        event_header: "X-Event-Key",
        open: ("pullrequest:created", json!({"pullrequest": pr})),
        close: ("pullrequest:rejected", json!({"pullrequest": pr})),
        comment: (
            "pullrequest:comment_created",
            json!({"actor": {"nickname": "ada"}, "pullrequest": pr,
                   "comment": {"content": {"raw": "/capstan preview"}}}),
        ),
        api: [
            (
                "/workspaces/acme/permissions/repositories/bucket",
                json!({"values": [{"permission": "write", "user": {"nickname": "ada"}}]}),
            ),
            ("/repositories/acme/bucket/pullrequests/4", pr),
        ],
    }
}

async fn hostb_and_hostc_pull_requests_drive_previews<S: App>(t: T<S>) {
    let env = t.hierarchy().await.2;
    t.put(
        &format!("/environment/{env}/deploymentRule/{env}"),
        json!({"auto_preview": true, "timezone": "UTC", "start_time": "08:00",
               "stop_time": "19:00", "weekdays": ["MONDAY"]}),
    )
    .await
    .expect(200);
    for provider in [hostb(), hostc()] {
        let kind = provider.kind;
        let fake = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": 9})))
            .mount(&fake)
            .await;
        for (at, answer) in &provider.api {
            Mock::given(method("GET"))
                .and(path(*at))
                .respond_with(ResponseTemplate::new(200).set_body_json(answer))
                .mount(&fake)
                .await;
        }
        let token = t
            .post(
                &format!("/organization/{}/gitToken", t.org),
                json!({"name": kind.to_lowercase(), "type": kind, "token": "tok", "git_api_url": fake.uri()}),
            )
            .await
            .expect(201)
            .id();
        let app = t
            .post(
                &format!("/environment/{env}/application"),
                json!({"name": kind.to_lowercase(),
                       "git_repository": {"url": provider.url, "branch": "main", "git_token_id": token}}),
            )
            .await
            .expect(201)
            .id();
        let secret = integration().secret_for(app.parse().unwrap());
        let send = |(event, body): &(&'static str, Value), id: &'static str| {
            let bytes = serde_json::to_vec(body).unwrap();
            let mut req = TestRequest::default()
                .method(Method::POST)
                .uri(&format!("/git/webhook/{app}"))
                .insert_header((provider.event_header, *event));
            req = if kind == "HOSTB" {
                req.insert_header(("X-Gitlab-Token", secret.expose().to_string()))
                    .insert_header(("X-Gitlab-Event-UUID", id))
            } else {
                req.insert_header((
                    "X-Hub-Signature",
                    format!("sha256={}", sign(secret.expose(), &bytes)),
                ))
                .insert_header(("X-Request-UUID", id))
            };
            t.send(req.set_payload(bytes).to_request())
        };
        // Opened, then closed; then asked for by a writer's comment, and closed again.
        for (asked, id, closing) in [
            (&provider.open, "o-1", "o-2"),
            (&provider.comment, "o-3", "o-4"),
        ] {
            let created = send(asked, id).await.expect(202);
            assert_eq!(
                created.body["result"], "PREVIEW_CREATED",
                "{kind}: {}",
                created.text
            );
            let preview = created.body["environment_id"].as_str().unwrap().to_string();
            let again = send(asked, id).await.expect(200);
            assert_eq!(again.body["result"], "IGNORED", "{kind}: the same delivery");
            let shown = t.get(&format!("/environment/{preview}")).await.body;
            assert_eq!(shown["pull_request"]["provider"], kind);
            assert_eq!(shown["pull_request"]["number"], 4);
            assert_eq!(shown["pull_request"]["head_branch"], "topic");
            assert_eq!(shown["pull_request"]["head_commit"], "ab12");
            t.settle(&format!("/environment/{preview}/status")).await;
            let closed = send(&provider.close, closing).await.expect(202);
            assert_eq!(
                closed.body["result"], "PREVIEW_DELETED",
                "{kind}: {}",
                closed.text
            );
            t.gone(&format!("/environment/{preview}")).await;
        }
    }
}

async fn two_repositories_pull_requests_of_one_number_are_told_apart<S: App>(t: T<S>) {
    let fake = provider().await;
    let (env, app, _, _) = blueprint(&t, &fake, json!({"auto_preview": true})).await;
    let token =
        t.get(&format!("/application/{app}")).await.body["git_repository"]["git_token_id"].clone();
    let site = t
        .post(
            &format!("/environment/{env}/application"),
            json!({"name": "site",
                   "git_repository": {"url": "https://github.com/acme/site", "branch": "main",
                                      "git_token_id": token}}),
        )
        .await
        .expect(201)
        .id();
    let env_name = t.get(&format!("/environment/{env}")).await.body["name"]
        .as_str()
        .unwrap()
        .to_string();
    let mut names = Vec::new();
    for (service, id) in [(&app, "n-1"), (&site, "n-2")] {
        let created = deliver(
            &t,
            service,
            "pull_request",
            id,
            &opened("opened", 7, "f00d01", false, false),
        )
        .await
        .expect(202);
        let preview = created.body["environment_id"].as_str().unwrap().to_string();
        let shown = t.get(&format!("/environment/{preview}")).await.body;
        names.push(shown["name"].as_str().unwrap().to_string());
    }
    assert_eq!(
        names,
        [
            format!("{env_name} (preview #7)"),
            format!("{env_name} (preview site#7)")
        ]
    );
}

async fn a_provider_that_cannot_be_told_fails_no_deployment<S: App>(t: T<S>) {
    let fake = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&fake)
        .await;
    let (_, app, _, _) = blueprint(&t, &fake, json!({"auto_preview": true})).await;
    let created = deliver(
        &t,
        &app,
        "pull_request",
        "f-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(202);
    let preview = created.body["environment_id"].as_str().unwrap().to_string();
    let done = t.settle(&format!("/environment/{preview}/status")).await;
    assert_eq!(done["state"], "DEPLOYED", "{done}");
    eventually(
        WITHIN,
        || "the failure to tell is not in the preview's logs".into(),
        async || {
            let logs = t.get(&format!("/environment/{preview}/logs")).await.text;
            (logs.contains("could not comment on the pull request")
                && logs.contains("could not set the commit's status"))
            .then_some(())
        },
    )
    .await;
}

async fn a_preview_follows_its_blueprint_s_rule_hours<S: App>(t: T<S>, clock: Arc<ManualClock>) {
    let fake = provider().await;
    let (_, app, _, _) = blueprint(
        &t,
        &fake,
        json!({"auto_preview": true, "auto_stop": true, "start_time": "08:00", "stop_time": "19:00",
               "weekdays": ["MONDAY", "TUESDAY"]}),
    )
    .await;
    let created = deliver(
        &t,
        &app,
        "pull_request",
        "h-1",
        &opened("opened", 7, "f00d01", false, false),
    )
    .await
    .expect(202);
    let preview = created.body["environment_id"].as_str().unwrap().to_string();
    let rule = t
        .get(&format!("/environment/{preview}/deploymentRule"))
        .await
        .expect(200)
        .body;
    assert_eq!(rule["auto_stop"], true, "{rule}");
    let status = format!("/environment/{preview}/status");
    assert_eq!(t.settle(&status).await["state"], "DEPLOYED");

    // The rule's stop hour: the preview stops; its start hour: it runs again.
    clock.set(datetime!(2026-11-23 19:00:01 UTC));
    let reaches = |want: &'static str| {
        let status = status.clone();
        let t = &t;
        async move {
            eventually(
                WITHIN,
                || format!("the preview never reached {want}"),
                async || (t.get(&status).await.body["state"] == want).then_some(()),
            )
            .await
        }
    };
    reaches("STOPPED").await;
    clock.set(datetime!(2026-11-24 08:00:01 UTC));
    reaches("DEPLOYED").await;

    // A week without activity on the pull request: the preview is deleted.
    clock.set(datetime!(2026-12-01 08:00:02 UTC));
    t.gone(&format!("/environment/{preview}")).await;
}
