//! A container registry of the tests' own (Debian's docker-registry).

use super::*;

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
        eventually(
            Duration::from_secs(20),
            || "the registry did not start".to_string(),
            async || std::net::TcpStream::connect(&address).ok().map(drop),
        )
        .await;
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
        eventually(
            Duration::from_secs(20),
            || format!("the registry did not start in {namespace}"),
            async || reached().then_some(()),
        )
        .await;
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
