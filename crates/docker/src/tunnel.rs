//! A Docker host reached over SSH: OpenSSH's `ssh` forwards a socket of Capstan's own (in an
//! owner-only folder) to the daemon's socket on the host, and the Docker client talks to that
//! socket as to a local daemon. `ssh` checks the host's key against the user's known hosts
//! (a host met for the first time is added, as `accept-new` does) and uses the credentials'
//! private key, kept beside the socket while the tunnel runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long the tunnel has to come up.
const OPENS: Duration = Duration::from_secs(10);

/// A running tunnel: the `ssh` process (killed when dropped) and its local socket.
pub(crate) struct Tunnel {
    ssh: tokio::process::Child,
    pub(crate) socket: PathBuf,
}

/// Where an SSH tunnel goes.
pub(crate) struct Destination<'a> {
    pub user: Option<&'a str>,
    pub host: &'a str,
    pub port: Option<u16>,
    /// The daemon's socket on the host.
    pub socket: &'a str,
    /// The file of the private key to use (owner-only).
    pub key: Option<&'a Path>,
}

impl Tunnel {
    /// Opens a tunnel in `folder` (owner-only), once its local socket is there; why not, with
    /// what `ssh` said, otherwise.
    pub(crate) async fn open(folder: &Path, to: &Destination<'_>) -> Result<Self, String> {
        let socket = folder.join("docker.sock");
        let said = folder.join("ssh.err");
        let mut ssh = tokio::process::Command::new("ssh");
        ssh.args([
            "-N",
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "ExitOnForwardFailure=yes",
        ])
        .args(["-o", "StrictHostKeyChecking=accept-new"])
        .args([
            "-o",
            "ServerAliveInterval=10",
            "-o",
            "ServerAliveCountMax=3",
        ])
        .arg("-L")
        .arg(format!("{}:{}", socket.display(), to.socket));
        if let Some(key) = to.key {
            ssh.arg("-i").arg(key).args(["-o", "IdentitiesOnly=yes"]);
        }
        if let Some(port) = to.port {
            ssh.arg("-p").arg(port.to_string());
        }
        match to.user {
            Some(user) => ssh.arg(format!("{user}@{}", to.host)),
            None => ssh.arg(to.host),
        };
        let log = std::fs::File::create(&said).map_err(|e| format!("cannot run ssh: {e}"))?;
        let mut child = ssh
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run ssh (OpenSSH's client): {e}"))?;
        let started = std::time::Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                let why = std::fs::read_to_string(&said).unwrap_or_default();
                return Err(format!("ssh ended ({status}): {}", why.trim()));
            }
            if started.elapsed() > OPENS {
                return Err(format!(
                    "the SSH tunnel did not open within {}s",
                    OPENS.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Self { ssh: child, socket })
    }

    /// Whether `ssh` still runs (a tunnel whose host went away has ended).
    pub(crate) fn is_open(&mut self) -> bool {
        matches!(self.ssh.try_wait(), Ok(None))
    }
}
