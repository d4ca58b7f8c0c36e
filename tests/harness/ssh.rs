//! An SSH host of the tests' own (Debian's openssh-server).

use super::*;

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
