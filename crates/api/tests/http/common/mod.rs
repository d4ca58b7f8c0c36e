//! The HTTP test harness: the production app factory over a fresh database of either backend,
//! with an organization and an ADMIN token ready.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use actix_http::Request;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::header::HeaderMap;
use actix_web::http::Method;
use actix_web::test;
use capstan_api::{self as api, AppState};
use domain::auth::Role;
use domain::clock::SystemClock;
use domain::Capstan;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long a test waits for what the simulated engine or a scheduler does (steps of
/// milliseconds here).
pub const WITHIN: Duration = Duration::from_secs(20);

/// Asks `look` until it answers `Some`, and returns that, looking again every 10 ms (steps
/// take milliseconds here); once `within` has passed, fails the test with `what` (made then,
/// so that it can say what is seen at that moment).
pub async fn eventually<T>(
    within: Duration,
    what: impl Fn() -> String,
    mut look: impl AsyncFnMut() -> Option<T>,
) -> T {
    let started = std::time::Instant::now();
    loop {
        if let Some(found) = look().await {
            return found;
        }
        assert!(started.elapsed() < within, "{}", what());
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
}

pub struct Backend {
    pub capstan: Capstan,
    _guard: Option<storage::testing::TempFile>,
}

pub async fn sqlite() -> Option<Backend> {
    let (db, _url, guard) = storage::testing::sqlite().await;
    Some(Backend {
        capstan: Capstan::new(Arc::new(db), Arc::new(SystemClock)),
        _guard: Some(guard),
    })
}

/// `sqlite::memory:`: the one-connection store of `capstan serve` for quick local use.
pub async fn sqlite_memory() -> Option<Backend> {
    let db = storage::testing::sqlite_memory().await;
    Some(Backend {
        capstan: Capstan::new(Arc::new(db), Arc::new(SystemClock)),
        _guard: None,
    })
}

/// A copy of the SQLite database file `fixture`, migrated as a server starting on it would.
pub async fn sqlite_copy_of(fixture: &std::path::Path) -> Backend {
    let (db, _url, guard) = storage::testing::sqlite_copy_of(fixture).await;
    Backend {
        capstan: Capstan::new(Arc::new(db), Arc::new(SystemClock)),
        _guard: Some(guard),
    }
}

/// A fresh PostgreSQL database loaded with `dump` (plain SQL), migrated as a server starting
/// on it would.
pub async fn postgres_loaded(dump: &str) -> Option<Backend> {
    let (db, _url) = storage::testing::postgres_loaded(dump).await?;
    Some(Backend {
        capstan: Capstan::new(Arc::new(db), Arc::new(SystemClock)),
        _guard: None,
    })
}

impl Backend {
    /// The same store, with the use cases adjusted (e.g. given a git integration).
    pub fn map(mut self, f: impl FnOnce(Capstan) -> Capstan) -> Self {
        self.capstan = f(self.capstan);
        self
    }
}

pub async fn postgres() -> Option<Backend> {
    let (db, _url) = storage::testing::postgres().await?;
    Some(Backend {
        capstan: Capstan::new(Arc::new(db), Arc::new(SystemClock)),
        _guard: None,
    })
}

pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Resp {
    pub fn id(&self) -> String {
        self.body["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {}", self.text))
            .to_string()
    }
    /// Asserts the status, showing the body when it differs.
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.text
        );
        self
    }
    /// Asserts an error answer: status, the JSON error body, and a message starting with `prefix`.
    pub fn expect_error(self, status: u16, prefix: &str) -> Self {
        let s = self.expect(status);
        assert_eq!(s.body["status"], json!(status), "{}", s.text);
        assert!(s.body["error"].is_string(), "{}", s.text);
        let message = s.body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(prefix),
            "message {message:?} should start with {prefix:?}"
        );
        s
    }
}

pub struct T<S> {
    pub svc: S,
    pub token: String,
    pub org: String,
    pub capstan: Capstan,
    _workers: engine::WorkerPool,
    _backend: Backend,
}

/// How long each step of the simulated engine takes in HTTP tests.
pub const STEP: std::time::Duration = std::time::Duration::from_millis(50);

pub async fn setup(
    backend: Backend,
) -> T<impl Service<Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error>>
{
    // Suites poll statuses; the rate limit has suites of its own.
    setup_with(backend, |s| {
        s.with_limiter(api::limits::RateLimiter::local(1_000_000))
    })
    .await
}

/// As `setup`, with the app's settings adjusted by `adjust`.
pub async fn setup_with(
    backend: Backend,
    adjust: impl FnOnce(AppState) -> AppState,
) -> T<impl Service<Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error>>
{
    setup_with_step(backend, adjust, STEP).await
}

/// As `setup_with`, with the simulated engine taking `step` for each step.
pub async fn setup_with_step(
    backend: Backend,
    adjust: impl FnOnce(AppState) -> AppState,
    step: std::time::Duration,
) -> T<impl Service<Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error>>
{
    let backend = backend.map(with_test_webhooks);
    let (org, token) = backend
        .capstan
        .bootstrap_organization("Acme", Role::Admin, "tests")
        .await
        .unwrap();
    let simulated: Arc<dyn domain::engine::Engine> = Arc::new(engine::Engines::every_kind(
        Arc::new(engine::SimulatedEngine::new(step)),
    ));
    let with_engine = backend.capstan.clone().with_engine(simulated.clone());
    let state = actix_web::web::Data::new(adjust(AppState::new(with_engine)));
    // The state's use cases report to its metrics: the workers run those.
    let capstan = state.capstan.clone();
    let svc = test::init_service(api::app(state)).await;
    let workers = engine::WorkerPool::start(
        capstan,
        simulated,
        engine::PoolSettings { workers: 2, step },
    );
    T {
        svc,
        token: token.value,
        org: org.id.to_string(),
        capstan: backend.capstan.clone(),
        _workers: workers,
        _backend: backend,
    }
}

/// The outbound policy of tests whose fakes listen on this machine: loopback named.
pub fn loopback_allowed() -> domain::outbound_policy::OutboundPolicy {
    domain::outbound_policy::OutboundPolicy::parse("127.0.0.1").unwrap()
}

/// Webhooks sent for real (to receivers on this machine), retried quickly.
pub fn with_test_webhooks(capstan: Capstan) -> Capstan {
    let sender =
        delivery::HttpSender::new(std::time::Duration::from_secs(2), loopback_allowed()).unwrap();
    capstan.with_outbound(domain::services::Outbound {
        sender: Arc::new(sender),
        retry: TEST_RETRY,
        batch: 16,
        timeout: std::time::Duration::from_secs(2),
    })
}

/// Retries after 100 ms, 200 ms, 400 ms (less jitter), for at most 3 seconds.
pub const TEST_RETRY: domain::outbound::RetryPolicy = domain::outbound::RetryPolicy {
    base: std::time::Duration::from_millis(100),
    max_wait: std::time::Duration::from_millis(400),
    give_up_after: std::time::Duration::from_secs(3),
};

/// The app under test, whatever its concrete type.
pub trait App:
    Service<Request, Response = ServiceResponse<Self::Body>, Error = actix_web::Error>
{
    type Body: MessageBody;
}

impl<S, B> App for S
where
    S: Service<Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    type Body = B;
}

impl<S: App> T<S> {
    pub async fn call(
        &self,
        token: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Resp {
        let mut req = test::TestRequest::default().method(method).uri(path);
        if let Some(t) = token {
            req = req.insert_header(("Authorization", format!("Token {t}")));
        }
        if let Some(b) = body {
            req = req.set_json(b);
        }
        self.send(req.to_request()).await
    }

    pub async fn send(&self, req: Request) -> Resp {
        let res = test::call_service(&self.svc, req).await;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = test::read_body(res).await;
        let text = String::from_utf8_lossy(&bytes).to_string();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Resp {
            status,
            headers,
            body,
            text,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Some(&self.token.clone()), Method::GET, path, None)
            .await
    }
    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Some(&self.token.clone()), Method::POST, path, Some(body))
            .await
    }
    pub async fn put(&self, path: &str, body: Value) -> Resp {
        self.call(Some(&self.token.clone()), Method::PUT, path, Some(body))
            .await
    }
    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Some(&self.token.clone()), Method::DELETE, path, None)
            .await
    }

    /// Polls a status until nothing waits or runs (a settled state), and returns it.
    pub async fn settle(&self, status_path: &str) -> Value {
        let seen = std::cell::RefCell::new(String::new());
        eventually(
            WITHIN,
            || format!("{status_path} never settled: {}", seen.borrow()),
            async || {
                let r = self.get(status_path).await.expect(200);
                let settled = r.body["deployment_requests_count"] == json!(0);
                *seen.borrow_mut() = r.text;
                settled.then_some(r.body)
            },
        )
        .await
    }

    /// Polls until `path` answers 404 (a deletion the engine carries out).
    pub async fn gone(&self, path: &str) {
        eventually(
            WITHIN,
            || format!("{path} was never deleted"),
            async || (self.get(path).await.status == 404).then_some(()),
        )
        .await
    }

    /// A cluster, a project and an environment; returns (cluster, project, environment) ids.
    pub async fn hierarchy(&self) -> (String, String, String) {
        let org = self.org.clone();
        let cluster = self
            .post(
                &format!("/organization/{org}/cluster"),
                json!({"name": "main", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
            )
            .await
            .expect(201)
            .id();
        let project = self
            .post(
                &format!("/organization/{org}/project"),
                json!({"name": "shop"}),
            )
            .await
            .expect(201)
            .id();
        let env = self
            .post(
                &format!("/project/{project}/environment"),
                json!({"name": "prod", "mode": "PRODUCTION"}),
            )
            .await
            .expect(201)
            .id();
        (cluster, project, env)
    }

    pub async fn registry(&self) -> String {
        self.post(
            &format!("/organization/{}/containerRegistry", self.org),
            json!({"name": format!("hub-{}", uuid::Uuid::new_v4()), "kind": "DOCKER_HUB", "config": {"username": "bob", "password": "hunter2-registry"}}),
        )
        .await
        .expect(201)
        .id()
    }

    /// A container named `name` in `env`, pulling from a registry of its own; its id.
    pub async fn container(&self, env: &str, name: &str) -> String {
        let registry = self.registry().await;
        self.post(
            &format!("/environment/{env}/container"),
            json!({"name": name, "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
        .expect(201)
        .id()
    }

    /// An ADMIN token of another organization.
    pub async fn other_org_token(&self) -> String {
        self.capstan
            .bootstrap_organization("Other", Role::Admin, "o")
            .await
            .unwrap()
            .1
            .value
    }

    /// An ADMIN token of another organization, and an environment there (on a cluster of its
    /// own, in a project of its own).
    #[allow(dead_code)]
    pub async fn other_org_environment(&self) -> (String, String) {
        let token = self.other_org_token().await;
        let as_them = |method: Method, path: String, body: Option<Value>| {
            let token = token.clone();
            async move { self.call(Some(&token), method, &path, body).await }
        };
        let org = as_them(Method::GET, "/organization".into(), None)
            .await
            .body["results"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        as_them(
            Method::POST,
            format!("/organization/{org}/cluster"),
            Some(json!({"name": "c", "region": "eu-west-3", "cloud_provider": "CLOUDA"})),
        )
        .await
        .expect(201);
        let project = as_them(
            Method::POST,
            format!("/organization/{org}/project"),
            Some(json!({"name": "p"})),
        )
        .await
        .expect(201)
        .id();
        let env = as_them(
            Method::POST,
            format!("/project/{project}/environment"),
            Some(json!({"name": "e"})),
        )
        .await
        .expect(201)
        .id();
        (token, env)
    }

    /// A token of another role in the same organization.
    pub async fn token_with_role(&self, role: Role) -> String {
        let org = self.org.parse().unwrap();
        self.capstan
            .issue_token(org, role, role.name())
            .await
            .unwrap()
            .value
    }
}

/// A minimal valid creation body of each kind.
pub fn service_bodies(registry: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "application",
            json!({"name": "api", "git_repository": {"url": "https://github.com/acme/api.git", "branch": "main"}, "ports": [{"internal_port": 8080}]}),
        ),
        (
            "container",
            json!({"name": "web", "registry_id": registry, "image_name": "nginx", "tag": "1.27", "arguments": ["-g", "daemon off;"], "entrypoint": "/docker-entrypoint.sh"}),
        ),
        (
            "database",
            json!({"name": "db", "type": "POSTGRESQL", "version": "16", "mode": "CONTAINER"}),
        ),
        (
            "job",
            json!({"name": "cron", "schedule": {"cronjob": {"scheduled_at": "0 * * * *"}}, "source": {"image": {"image_name": "busybox", "tag": "1", "registry_id": registry}}}),
        ),
        (
            "helm",
            json!({"name": "redis", "source": {"helm_repository": {"repository": "https://charts.example.com", "chart_name": "redis", "chart_version": "19.0.0"}}, "arguments": [], "auto_deploy": false, "values_override": {}}),
        ),
        (
            "terraform",
            json!({"name": "infra", "terraform_files_source": {"git_repository": {"url": "https://gitlab.com/acme/infra"}}}),
        ),
    ]
}

/// Runs each listed test against SQLite and PostgreSQL.
#[macro_export]
macro_rules! http_suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let backend = $crate::common::sqlite().await.unwrap();
                    super::$name($crate::common::setup(backend).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(backend) = $crate::common::postgres().await else { return };
                    super::$name($crate::common::setup(backend).await).await;
                }
            )*
        }
    };
}

/// As `http_suite!`, each backend's Capstan first given what the suite needs by `$with`, a
/// function of the suite's module (`fn(Capstan) -> Capstan`).
#[macro_export]
macro_rules! http_suite_with {
    ($with:ident; $($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let b = $crate::common::sqlite().await.unwrap().map(super::$with);
                    super::$name($crate::common::setup(b).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let Some(b) = $crate::common::postgres().await else { return };
                    super::$name($crate::common::setup(b.map(super::$with)).await).await;
                }
            )*
        }
    };
}

/// As `http_suite!`, and on an in-memory SQLite database too (one connection for everything).
#[macro_export]
macro_rules! http_suite_with_memory {
    ($($name:ident),* $(,)?) => {
        http_suite!($($name),*);
        mod memory {
            $(
                #[actix_rt::test]
                async fn $name() {
                    let backend = $crate::common::sqlite_memory().await.unwrap();
                    super::$name($crate::common::setup(backend).await).await;
                }
            )*
        }
    };
}
