//! A second Docker daemon on this machine, reached over its socket or TLS.

use super::*;

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
        let log = self.dir.0.join("dockerd.log");
        eventually(
            Duration::from_secs(60),
            || {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                format!("the second daemon did not start: {said}")
            },
            async || self.docker(&["version"]).ok().map(drop),
        )
        .await;
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
