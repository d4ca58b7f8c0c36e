//! A Docker Swarm of several nodes on this machine, each a dockerd in a network namespace.

use super::*;

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
    /// A registry served in the first node's namespace, once asked for.
    registry: Option<Child>,
    /// The nodes pull their tasks' images (else they use their own copies, and never pull).
    pulling: bool,
}

impl SwarmLab {
    pub async fn start(nodes: usize) -> SwarmLab {
        Self::made(nodes, None, true, false).await
    }

    /// A Swarm whose nodes pull their tasks' images from their registry, as Swarm does by
    /// default (the others prefer their own copies, as nothing here reaches a public registry).
    pub async fn pulling(nodes: usize) -> SwarmLab {
        Self::made(nodes, None, true, true).await
    }

    /// Daemons in namespaces of their own that form no Swarm: plain Docker hosts.
    pub async fn daemons(nodes: usize) -> SwarmLab {
        Self::made(nodes, None, false, false).await
    }

    /// Plain daemons (no Swarm) that keep their data (images, containers, volumes) on a tmpfs
    /// of `size` (`mount`'s words: `96m`) each.
    pub async fn small(nodes: usize, size: &str) -> SwarmLab {
        Self::made(nodes, Some(size.to_string()), false, false).await
    }

    async fn made(nodes: usize, data_size: Option<String>, swarm: bool, pulling: bool) -> SwarmLab {
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
            registry: None,
            pulling,
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
        if !swarm {
            return lab;
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

    pub fn namespace(&self, node: usize) -> String {
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
            // A registry on the lab's network speaks plain HTTP.
            .arg("--insecure-registry")
            .arg("10.213.250.0/24")
            .env(
                "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE",
                if self.pulling { "0" } else { "1" },
            )
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

    /// Serves a registry (Debian's `docker-registry`, no authentication) in the first node's
    /// namespace, at its address on port 5000: its `host:port`.
    pub async fn serve_registry(&mut self) -> String {
        let address = format!("{}:5000", self.address(1));
        let config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: {address}\n",
            self.dir.0.join("registry").display()
        );
        let file = self.dir.0.join("registry.yml");
        std::fs::write(&file, config).unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.namespace(1),
                "docker-registry",
                "serve",
            ])
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry runs");
        self.registry = Some(child);
        let catalog = format!("http://{address}/v2/_catalog");
        eventually(
            Duration::from_secs(20),
            || "the lab's registry did not start".to_string(),
            async || {
                let out = Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        &self.namespace(2),
                        "busybox",
                        "wget",
                        "-qO-",
                        &catalog,
                    ])
                    .output()
                    .ok()?;
                out.status.success().then_some(())
            },
        )
        .await;
        address
    }

    /// Loads `image` from the main daemon into node `node`.
    pub fn load(&self, node: usize, image: &str) {
        load_image(&self.socket(node), image);
    }

    /// Links this host to the lab's network at 10.213.250.1, so that what the nodes publish
    /// is reached at their addresses (one lab at a time may be reachable).
    pub fn reachable(&self) {
        let host = self.host_link();
        let _ = Command::new("ip").args(["link", "del", &host]).output();
        let switch = format!("capswarm-{}-sw", self.run);
        ip(&[
            "link", "add", &host, "type", "veth", "peer", "name", "p0", "netns", &switch,
        ]);
        ip(&["-n", &switch, "link", "set", "p0", "master", "br0", "up"]);
        ip(&["addr", "add", "10.213.250.1/24", "dev", &host]);
        ip(&["link", "set", &host, "up"]);
    }

    fn host_link(&self) -> String {
        format!("csw{}h", self.run)
    }

    /// Node `node` lost: its dockerd frozen (no heartbeat) and its link cut (its containers,
    /// which freezing leaves running, no longer reached).
    pub fn freeze(&self, node: usize) {
        self.signal(node, "-STOP");
        let switch = format!("capswarm-{}-sw", self.run);
        ip(&["-n", &switch, "link", "set", &format!("p{node}"), "down"]);
    }

    /// Node `node` back: its link up, its dockerd going on.
    pub fn thaw(&self, node: usize) {
        let switch = format!("capswarm-{}-sw", self.run);
        ip(&["-n", &switch, "link", "set", &format!("p{node}"), "up"]);
        self.signal(node, "-CONT");
    }

    fn signal(&self, node: usize, signal: &str) {
        let pid = std::fs::read_to_string(self.dir.0.join(format!("n{node}/dockerd.pid")))
            .expect("the node's dockerd pid");
        let sent = Command::new("kill")
            .args([signal, pid.trim()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill {signal} node {node}'s dockerd");
    }

    /// The node's address on the lab's network.
    pub fn address(&self, node: usize) -> String {
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
        if let Some(mut registry) = self.registry.take() {
            let _ = registry.kill();
            let _ = registry.wait();
        }
        for node in 1..=self.nodes.len() {
            if let Ok(pid) =
                std::fs::read_to_string(self.dir.0.join(format!("n{node}/dockerd.pid")))
            {
                let _ = Command::new("kill").args(["-CONT", pid.trim()]).status();
            }
        }
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
            .args(["link", "del", &self.host_link()])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &format!("capswarm-{}-sw", self.run)])
            .output();
    }
}

/// Whether a filesystem is mounted at `at`.
pub fn mounted(at: &std::path::Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(&*at.display().to_string()))
}
