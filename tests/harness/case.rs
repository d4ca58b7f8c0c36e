//! A Docker test case: a server on the shared daemon with an organization, its registry
//! and an environment, cleaned up when dropped.

use super::*;

pub struct Case {
    server: Option<Server>,
    pub client: Client,
    pub env: String,
    pub org: String,
    pub registry: String,
    database: String,
    settings: Vec<(String, String)>,
    log: std::path::PathBuf,
    dir: TempDir,
}

impl Case {
    pub async fn start(database: Option<&str>, extra: &[(&str, &str)]) -> Case {
        let dir = TempDir::new();
        let database = database.map_or_else(
            || format!("sqlite://{}", dir.0.join("data.db").display()),
            str::to_string,
        );
        // The router keeps its port across a restart, as links name it.
        let router = format!("127.0.0.1:{}", free_port());
        // The router's names one level down, so that other names under `localhost` (which
        // resolve to this machine) can be custom domains.
        let settings: Vec<(String, String)> = [
            ("CAPSTAN_ENGINE", "docker"),
            ("CAPSTAN_ROUTER_LISTEN", router.as_str()),
            ("CAPSTAN_ROUTER_DOMAIN", ROUTER_DOMAIN),
            // The tests' images are made on this machine, as an operator's shared ones.
            ("CAPSTAN_HOST_IMAGES", "capstan-test/"),
        ]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let log = dir.0.join("capstan.log");
        let server = Self::serve(&dir, &database, &log, &settings).await;
        let (client, env) = environment(&dir, &database, &server).await;
        let org = hierarchy_org(&client).await;
        let registry = client
            .create(
                &format!("/organization/{org}/containerRegistry"),
                json!({"name": "hub", "kind": "DOCKER_HUB", "url": "https://docker.io", "config": {}}),
            )
            .await;
        Case {
            server: Some(server),
            client,
            env,
            org,
            registry,
            database,
            settings,
            log,
            dir,
        }
    }

    async fn serve(
        dir: &TempDir,
        database: &str,
        log: &std::path::Path,
        settings: &[(String, String)],
    ) -> Server {
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Server::start_with(dir, database, Some(log), &settings).await
    }

    pub fn base(&self) -> &str {
        &self.server.as_ref().expect("a server runs").base
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.server.as_ref().expect("a server runs").pid()
    }

    /// kill -9 of the server.
    pub fn crash(&mut self) {
        if let Some(server) = self.server.take() {
            server.crash();
        }
    }

    /// A new server on the same database and settings; the client calls it.
    pub async fn restart(&mut self) {
        let server = Self::serve(&self.dir, &self.database, &self.log, &self.settings).await;
        self.client.base = server.base.clone();
        self.server = Some(server);
    }

    /// A second instance on the same database (PostgreSQL: several instances share it), with
    /// its router on a port of its own; that port.
    pub async fn another_instance(&self) -> (Server, u16) {
        let port = free_port();
        let settings: Vec<(String, String)> = self
            .settings
            .iter()
            .map(|(k, v)| match k.as_str() {
                "CAPSTAN_ROUTER_LISTEN" => (k.clone(), format!("127.0.0.1:{port}")),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let log = self.dir.0.join("capstan-2.log");
        (
            Self::serve(&self.dir, &self.database, &log, &settings).await,
            port,
        )
    }

    /// A client of another organization of this installation (an ADMIN token of its own),
    /// and that organization.
    pub async fn stranger(&self, name: &str) -> (Client, String) {
        let token = create_token(&self.dir, &self.database, &["--organization-name", name]);
        let client = Client {
            http: reqwest::Client::new(),
            base: self.client.base.clone(),
            token,
        };
        let org = hierarchy_org(&client).await;
        (client, org)
    }

    /// Another organization of this installation with an environment (on a cluster naming no
    /// endpoint) and a Docker Hub registry of its own.
    pub async fn stranger_with_environment(&self, name: &str) -> Stranger {
        let (client, org) = self.stranger(name).await;
        let (_, env) = hierarchy(&client).await;
        let registry = client
            .create(
                &format!("/organization/{org}/containerRegistry"),
                json!({"name": "hub", "kind": "DOCKER_HUB", "url": "https://docker.io", "config": {}}),
            )
            .await;
        Stranger {
            client,
            org,
            env,
            registry,
        }
    }

    /// What Capstan wrote of its own, at debug level.
    pub fn own_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Moves the application's clock `seconds` ahead through the controls: the case started
    /// with `CAPSTAN_CLOCK=manual`, `CAPSTAN_CONTROLS=on` and [`CONTROLS_TOKEN`] as
    /// `CAPSTAN_CONTROLS_TOKEN`.
    pub async fn advance_clock(&self, seconds: u64) {
        let moved = self
            .client
            .http
            .post(format!("{}/_capstan/clock", self.base()))
            .header("Authorization", format!("Token {CONTROLS_TOKEN}"))
            .json(&serde_json::json!({ "advance_seconds": seconds }))
            .send()
            .await
            .unwrap();
        assert_eq!(moved.status(), 200, "the clock moves");
    }

    /// A new API token of the case's organization with the role `role` (`VIEWER`, ...).
    pub async fn token_with_role(&self, role: &str) -> String {
        let id = match role {
            "ADMIN" => 1,
            "DEVOPS" => 2,
            "VIEWER" => 3,
            other => panic!("no role {other}"),
        };
        let path = format!("/organization/{}/apiToken", self.org);
        let body = serde_json::json!({"name": format!("{role}-token"),
                                      "role_id": format!("7e57ca95-0000-4000-8000-00000000000{id}")});
        let (status, issued) = self
            .client
            .call(reqwest::Method::POST, &path, Some(body))
            .await;
        assert_eq!(status, 201, "POST {path}: {issued}");
        issued["token"]
            .as_str()
            .expect("a token shown once")
            .to_string()
    }

    /// The environment's cluster and project.
    pub async fn cluster_and_project(&self) -> (String, String) {
        let details = self.client.get(&format!("/environment/{}", self.env)).await;
        (
            details["cluster_id"].as_str().unwrap().to_string(),
            details["project"]["id"].as_str().unwrap().to_string(),
        )
    }
}

/// The controls' token of a case whose clock a test moves (see [`Case::advance_clock`]).
pub const CONTROLS_TOKEN: &str = "controls-token-of-the-test";

/// Another organization of a case's installation, ready to deploy (see
/// [`Case::stranger_with_environment`]); what it ran goes when dropped.
pub struct Stranger {
    pub client: Client,
    pub org: String,
    pub env: String,
    pub registry: String,
}

impl Drop for Stranger {
    fn drop(&mut self) {
        docker_cleanup(&self.org);
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        drop(self.server.take());
        docker_cleanup(&self.org);
    }
}
