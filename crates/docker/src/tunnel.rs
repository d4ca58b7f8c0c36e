//! A Docker host reached over SSH: OpenSSH's `ssh` forwards a socket of Capstan's own (in an
//! owner-only folder) to the daemon's socket on the host, and the Docker client talks to that
//! socket as to a local daemon. `ssh` reads none of the operator's own files: it offers only
//! the credentials' private key (kept beside the socket while the tunnel runs) and checks the
//! host's key against the one the credentials pin, or the one recorded for that host when it
//! was first met.

use domain::engine::EngineError;
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
    /// The host keys the host must hold one of (owner-only).
    pub known_hosts: &'a Path,
    /// Whether a host not in `known_hosts` yet is recorded there (its key met first).
    pub accept_new: bool,
}

/// The options every tunnel runs with: none of the operator's own SSH files (configuration,
/// keys, agent, known hosts) is read, only the cluster's key is offered, nothing but the
/// socket is forwarded, and the host must hold the key `known_hosts` pins (or, with
/// `accept_new`, the key met first is recorded there and required after).
fn ssh_args(socket: &Path, to: &Destination<'_>) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(Into::into));
    push(&["-N", "-T", "-a", "-x", "-F", "/dev/null"]);
    for option in [
        "BatchMode=yes",
        "ExitOnForwardFailure=yes",
        "ServerAliveInterval=10",
        "ServerAliveCountMax=3",
        "IdentitiesOnly=yes",
        "IdentityAgent=none",
        "ForwardAgent=no",
        "PasswordAuthentication=no",
        "KbdInteractiveAuthentication=no",
        "GlobalKnownHostsFile=/dev/null",
        "UpdateHostKeys=no",
        "PermitLocalCommand=no",
    ] {
        push(&["-o", option]);
    }
    let checking = if to.accept_new {
        "StrictHostKeyChecking=accept-new"
    } else {
        "StrictHostKeyChecking=yes"
    };
    push(&["-o", checking]);
    args.push("-o".into());
    args.push(format!("UserKnownHostsFile={}", to.known_hosts.display()).into());
    // Without a key of the cluster's, an empty one: ssh adds the user's default keys only
    // when it is given none.
    args.push("-i".into());
    args.push(
        to.key
            .unwrap_or(Path::new("/dev/null"))
            .as_os_str()
            .to_owned(),
    );
    if let Some(port) = to.port {
        args.push("-p".into());
        args.push(port.to_string().into());
    }
    args.push("-L".into());
    args.push(format!("{}:{}", socket.display(), to.socket).into());
    args.push("--".into());
    args.push(match to.user {
        Some(user) => format!("{user}@{}", to.host).into(),
        None => to.host.into(),
    });
    args
}

/// What `ssh` failed at, in Capstan's words: its own messages are told apart, but nothing it
/// relays from the host (a banner, a refusal's text) reaches the user.
fn ssh_failure(said: &str) -> &'static str {
    let has = |text: &str| said.contains(text);
    if has("Host key verification failed") || has("IDENTIFICATION HAS CHANGED") {
        "the host's key is not the one pinned (ssh_host_key) or met first"
    } else if has("Permission denied") {
        "the host refused the credentials' key"
    } else if has("Connection refused") {
        "the connection was refused"
    } else if has("timed out") {
        "the connection timed out"
    } else if has("Could not resolve hostname") {
        "the host name does not resolve"
    } else {
        "ssh could not open the tunnel"
    }
}

impl Tunnel {
    /// Opens a tunnel in `folder` (owner-only), once its local socket is there; why not, with
    /// what `ssh` said, otherwise.
    pub(crate) async fn open(folder: &Path, to: &Destination<'_>) -> Result<Self, EngineError> {
        let socket = folder.join("docker.sock");
        let said = folder.join("ssh.err");
        let mut ssh = tokio::process::Command::new("ssh");
        ssh.args(ssh_args(&socket, to));
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
                return Err(format!("ssh ended ({status}): {}", ssh_failure(&why)).into());
            }
            if started.elapsed() > OPENS {
                return Err(
                    format!("the SSH tunnel did not open within {}s", OPENS.as_secs()).into(),
                );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_ssh_said_is_told_in_capstans_words() {
        assert_eq!(
            ssh_failure("Host key verification failed.\r\n"),
            "the host's key is not the one pinned (ssh_host_key) or met first"
        );
        assert_eq!(
            ssh_failure("Welcome to evil, secret=abc\nPermission denied (publickey)."),
            "the host refused the credentials' key"
        );
        assert_eq!(
            ssh_failure("secret banner"),
            "ssh could not open the tunnel"
        );
    }

    fn argv(to: &Destination<'_>) -> Vec<String> {
        ssh_args(Path::new("/run/t/docker.sock"), to)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn ssh_reads_none_of_the_operators_files_and_the_destination_follows_a_double_dash() {
        let known = Path::new("/run/t/known_hosts");
        let to = Destination {
            user: Some("deploy"),
            host: "box.example.com",
            port: Some(2222),
            socket: "/var/run/docker.sock",
            key: Some(Path::new("/run/t/id")),
            known_hosts: known,
            accept_new: false,
        };
        let args = argv(&to);
        let joined = args.join(" ");
        for wanted in [
            "-F /dev/null",
            "-o IdentitiesOnly=yes",
            "-o IdentityAgent=none",
            "-o GlobalKnownHostsFile=/dev/null",
            "-o UserKnownHostsFile=/run/t/known_hosts",
            "-o StrictHostKeyChecking=yes",
            "-i /run/t/id",
            "-p 2222",
            "-L /run/t/docker.sock:/var/run/docker.sock",
        ] {
            assert!(joined.contains(wanted), "{wanted} in {joined}");
        }
        assert_eq!(&args[args.len() - 2..], ["--", "deploy@box.example.com"]);
        let first_met = Destination {
            user: None,
            key: None,
            accept_new: true,
            ..to
        };
        let args = argv(&first_met);
        let joined = args.join(" ");
        assert!(
            joined.contains("-o StrictHostKeyChecking=accept-new"),
            "{joined}"
        );
        assert!(joined.contains("-i /dev/null"), "no default key: {joined}");
        assert_eq!(&args[args.len() - 2..], ["--", "box.example.com"]);
    }
}
