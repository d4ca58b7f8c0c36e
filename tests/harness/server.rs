//! The built binary run as a server: a scratch directory, a process on a free port, the
//! CLI beside it.

use super::*;

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
pub fn with_env(command: &mut Command, env: &[(&str, &str)]) {
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
