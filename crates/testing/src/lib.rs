//! Starts a Capstan server inside a Rust test: in memory, on a free port, with its controls
//! on and a fixture loaded; it stops when dropped.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use capstan_testing::Capstan;
//!
//! let capstan = Capstan::builder()
//!     .fixture(
//!         "organizations:
//!            - name: Acme
//!              tokens: [{name: ci, value: cap_my_test_token}]
//!              clusters: [{name: main, region: eu-west-3, cloud_provider: CLOUDA}]
//!              projects: [{name: shop, environments: [{name: prod}]}]",
//!     )
//!     .start()
//!     .await?;
//! let http = reqwest::Client::new();
//! let organizations = http
//!     .get(format!("{}/organization", capstan.base_url()))
//!     .header("Authorization", format!("Token {}", capstan.admin_token()))
//!     .send()
//!     .await?;
//! assert_eq!(organizations.status(), 200);
//! // Between tests: back to the fixture's world.
//! capstan.reset_to_fixture().await?;
//! # Ok(()) }
//! ```
//!
//! Every control of `docs/testing-with-capstan.md` is at [`Capstan::control`]. Ids drawn by a
//! seed ([`Builder::id_seed`]) come from one source per process: give every server of a
//! process the same seed, or none.

use anyhow::Context;
use capstan_server::Lifetime;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A running server; dropping it stops it (requests in flight finish first).
pub struct Capstan {
    base_url: String,
    admin_token: String,
    controls_token: String,
    fixture: String,
    seeded: Value,
    http: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

/// How to start a [`Capstan`].
pub struct Builder {
    fixture: Option<String>,
    database_url: String,
    id_seed: Option<u64>,
    manual_clock: bool,
    engine_step_ms: u64,
}

impl Capstan {
    pub fn builder() -> Builder {
        Builder {
            fixture: None,
            database_url: "sqlite::memory:".into(),
            id_seed: None,
            manual_clock: false,
            engine_step_ms: 50,
        }
    }

    /// A server with the default fixture: one organization and an ADMIN token.
    pub async fn start() -> anyhow::Result<Self> {
        Self::builder().start().await
    }

    /// Where the API is: `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The value of the first token of the fixture's first organization (the default
    /// fixture's is an ADMIN's).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The token the controls under `/_capstan/` take.
    pub fn controls_token(&self) -> &str {
        &self.controls_token
    }

    /// What `POST /_capstan/seed` answered: the organizations made, with their tokens.
    pub fn seeded(&self) -> &Value {
        &self.seeded
    }

    /// Calls a control (`/_capstan/...`) with the controls' token; its status and JSON body.
    pub async fn control(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base_url))
            .header("Authorization", format!("Token {}", self.controls_token));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = request.send().await?;
        let status = answer.status().as_u16();
        Ok((status, answer.json().await.unwrap_or(Value::Null)))
    }

    /// Empties everything and loads the fixture again (its tokens keep their values when the
    /// fixture gives them).
    pub async fn reset_to_fixture(&self) -> anyhow::Result<()> {
        let (status, body) = self
            .control(reqwest::Method::POST, "/_capstan/reset", None)
            .await?;
        anyhow::ensure!(status == 204, "reset answered {status}: {body}");
        seed(
            &self.http,
            &self.base_url,
            &self.controls_token,
            &self.fixture,
        )
        .await?;
        Ok(())
    }
}

impl Builder {
    /// The fixture to load (JSON or YAML; see `docs/testing-with-capstan.md`).
    pub fn fixture(mut self, fixture: impl Into<String>) -> Self {
        self.fixture = Some(fixture.into());
        self
    }

    /// Another database than a fresh one in memory (`postgres://...`, `sqlite://PATH`).
    pub fn database_url(mut self, url: impl Into<String>) -> Self {
        self.database_url = url.into();
        self
    }

    /// Ids drawn from `seed`: the same calls in the same order get the same ids.
    pub fn id_seed(mut self, seed: u64) -> Self {
        self.id_seed = Some(seed);
        self
    }

    /// A clock the `/_capstan/clock` control moves.
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    /// How long each step of the simulated engine takes (default 50 ms).
    pub fn engine_step_ms(mut self, ms: u64) -> Self {
        self.engine_step_ms = ms;
        self
    }

    pub async fn start(self) -> anyhow::Result<Capstan> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let controls_token = format!("cap_controls_{}", uuid::Uuid::new_v4().simple());
        let mut args = vec![
            "--database-url".to_string(),
            self.database_url.clone(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--controls".into(),
            "on".into(),
            "--controls-token".into(),
            controls_token.clone(),
            // The stand-in runs nothing: its engine is the simulated one, Docker or not.
            "--engine".into(),
            "simulated".into(),
            "--engine-step-ms".into(),
            self.engine_step_ms.to_string(),
            "--clock".into(),
            if self.manual_clock {
                "manual"
            } else {
                "system"
            }
            .into(),
            // A test's own calls are not rate limited.
            "--rate-limit-per-hour".into(),
            "1000000000".into(),
        ];
        if let Some(seed) = self.id_seed {
            args.extend(["--id-seed".into(), seed.to_string()]);
        }
        let settings = capstan_server::settings::from_args(&args).map_err(anyhow::Error::msg)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("capstan-{port}"))
            .spawn(move || {
                actix_rt::System::new().block_on(capstan_server::serve(
                    settings,
                    None,
                    Some(listener),
                    Lifetime::Until(Box::pin(async move {
                        let _ = stopped.await;
                    })),
                ))
            })?;
        let base_url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let mut capstan = Capstan {
            base_url,
            admin_token: String::new(),
            controls_token,
            fixture: String::new(),
            seeded: Value::Null,
            http,
            stop: Some(stop),
            thread: Some(thread),
        };
        capstan.ready().await?;
        capstan.fixture = self.fixture.unwrap_or_else(|| {
            format!(
                "organizations:\n  - name: Capstan tests\n    tokens: [{{name: admin, value: cap_test_{}}}]\n",
                uuid::Uuid::new_v4().simple()
            )
        });
        capstan.seeded = seed(
            &capstan.http,
            &capstan.base_url,
            &capstan.controls_token,
            &capstan.fixture,
        )
        .await?;
        capstan.admin_token = capstan.seeded["organizations"][0]["tokens"][0]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        Ok(capstan)
    }
}

impl Capstan {
    /// Waits for `/readyz`; a server that stopped instead says why.
    async fn ready(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            if let Ok(answer) = self
                .http
                .get(format!("{}/readyz", self.base_url))
                .send()
                .await
            {
                if answer.status().is_success() {
                    return Ok(());
                }
            }
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let ended = self.thread.take().map(|t| t.join());
                return match ended {
                    Some(Ok(Err(e))) => Err(e.context("capstan did not start")),
                    _ => Err(anyhow::anyhow!("capstan stopped before it was ready")),
                };
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(30),
                "capstan was not ready within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

async fn seed(
    http: &reqwest::Client,
    base_url: &str,
    controls_token: &str,
    fixture: &str,
) -> anyhow::Result<Value> {
    let answer = http
        .post(format!("{base_url}/_capstan/seed"))
        .header("Authorization", format!("Token {controls_token}"))
        .header("Content-Type", "application/yaml")
        .body(fixture.to_string())
        .send()
        .await
        .context("the fixture could not be sent")?;
    let status = answer.status().as_u16();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    anyhow::ensure!(status == 201, "the fixture was refused ({status}): {body}");
    Ok(body)
}

impl Drop for Capstan {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
