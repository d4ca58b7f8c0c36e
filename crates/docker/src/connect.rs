//! How a cluster's Docker host is reached: over its socket, TCP with the cluster's TLS
//! material, or an SSH tunnel with its key, the host's key pinned or met first; and whether
//! what answers there is a Docker daemon new enough, and whose.

use crate::daemon::{daemon_of, Daemon};
use crate::errors::failure_words;
use crate::tunnel::{Destination, Tunnel};
use bollard::Docker;
use domain::engine::EngineError;
use domain::model::{DockerEndpoint, DockerHost};
use std::time::Duration;

/// How long a host has to answer a ping.
pub(crate) const ANSWER: Duration = Duration::from_secs(5);
/// The oldest Docker API a host may speak (Docker 20.10).
const OLDEST_API: (u32, u32) = (1, 41);
/// A request's timeout on a host, in seconds (a build or a pull can take minutes).
pub(crate) const REQUEST_TIMEOUT: u64 = 600;

/// What a host is reached through, besides its client: dropped, the tunnel ends (first), then
/// the files go.
#[derive(Default)]
pub(crate) struct Reach {
    tunnel: Option<Tunnel>,
    _files: Option<Material>,
}

impl Reach {
    /// Whether it still reaches the host (an SSH tunnel ends with its connection).
    pub(crate) fn holds(&mut self) -> bool {
        self.tunnel.as_mut().is_none_or(Tunnel::is_open)
    }
}

/// Who the daemon is, as `docker info` tells it (see [`crate::daemon`]).
pub(crate) async fn daemon_id(docker: &Docker) -> Result<Daemon, EngineError> {
    let info = tokio::time::timeout(ANSWER, docker.info())
        .await
        .map_err(|_| format!("it did not tell who it is within {}s", ANSWER.as_secs()))?
        .map_err(|e| failure_words(&e))?;
    daemon_of(info)
}

pub(crate) fn does_not_answer(host: &DockerHost) -> String {
    format!("the Docker host {} does not answer", host.describe())
}

pub(crate) fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The files of what reaches a host (a TLS client's key and certificate; an SSH key and the
/// tunnel's socket), in a folder only this user reads; removed when dropped.
struct Material(std::path::PathBuf);

impl Drop for Material {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Material {
    fn folder() -> Result<Self, EngineError> {
        let dir = std::env::temp_dir().join(format!("capstan-host-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        }
        Ok(Self(dir))
    }

    fn write(&self, name: &str, contents: &str) -> Result<std::path::PathBuf, EngineError> {
        let path = self.0.join(name);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(&path)
            .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        std::io::Write::write_all(&mut file, contents.as_bytes())
            .map_err(|e| format!("cannot keep a host's keys: {e}"))?;
        Ok(path)
    }
}

/// Where the host key a cluster's SSH host showed first is kept (owner-only, one file per
/// cluster, for as long as the machine keeps its temporary files): met again, the host must
/// show the same.
fn first_met_keys(host: &DockerHost) -> Result<std::path::PathBuf, EngineError> {
    let dir = std::env::temp_dir().join("capstan-ssh-known-hosts");
    let failed = |e: std::io::Error| format!("cannot keep the SSH host keys met: {e}");
    std::fs::create_dir_all(&dir).map_err(failed)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    Ok(dir.join(format!("cluster-{}", host.cluster_id.0)))
}

/// A client of `host`'s daemon (not yet asked anything), and what it reaches it through.
pub(crate) async fn connect(host: &DockerHost) -> Result<(Docker, Reach), EngineError> {
    let version = bollard::API_DEFAULT_VERSION;
    let failed = |e: bollard::errors::Error| {
        failure_words(&e).context(&format!("cannot reach {}", host.describe()))
    };
    match &host.endpoint {
        DockerEndpoint::Local => Docker::connect_with_defaults()
            .map(|d| (d, Reach::default()))
            .map_err(failed),
        DockerEndpoint::Unix { socket } => {
            Docker::connect_with_unix(socket, REQUEST_TIMEOUT, version)
                .map(|d| (d, Reach::default()))
                .map_err(failed)
        }
        DockerEndpoint::Tcp { address } => match &host.access.tls {
            None => Docker::connect_with_http(address, REQUEST_TIMEOUT, version)
                .map(|d| (d, Reach::default()))
                .map_err(failed),
            // bollard reads the client's key and certificate at each handshake: they stay
            // while the host is attached.
            Some(tls) => {
                let files = Material::folder()?;
                let key = files.write("key.pem", tls.key.expose())?;
                let cert = files.write("cert.pem", &tls.certificate)?;
                let ca = files.write("ca.pem", &tls.ca)?;
                let docker =
                    Docker::connect_with_ssl(address, &key, &cert, &ca, REQUEST_TIMEOUT, version)
                        .map_err(failed)?;
                let reach = Reach {
                    tunnel: None,
                    _files: Some(files),
                };
                Ok((docker, reach))
            }
        },
        DockerEndpoint::Ssh {
            user,
            host: name,
            port,
            socket,
        } => {
            let files = Material::folder()?;
            let key = match &host.access.ssh_private_key {
                // OpenSSH refuses a key file that does not end its last line.
                Some(key) => Some(files.write("id", &format!("{}\n", key.expose().trim_end()))?),
                None => None,
            };
            let (known_hosts, accept_new) = match &host.access.ssh_host_key {
                Some(pinned) => {
                    let pattern = match port {
                        Some(p) if *p != 22 => format!("[{name}]:{p}"),
                        _ => name.clone(),
                    };
                    let line = format!("{pattern} {}\n", pinned.trim());
                    (files.write("known_hosts", &line)?, false)
                }
                None => (first_met_keys(host)?, true),
            };
            let destination = Destination {
                user: user.as_deref(),
                host: name,
                port: *port,
                socket,
                key: key.as_deref(),
                known_hosts: &known_hosts,
                accept_new,
            };
            let tunnel = Tunnel::open(&files.0, &destination)
                .await
                .map_err(|why| why.context(&does_not_answer(host)))?;
            let docker = Docker::connect_with_unix(
                &tunnel.socket.to_string_lossy(),
                REQUEST_TIMEOUT,
                version,
            )
            .map_err(failed)?;
            let reach = Reach {
                tunnel: Some(tunnel),
                _files: Some(files),
            };
            Ok((docker, reach))
        }
    }
}

/// What `host` answers to `call` within [`ANSWER`]; why not, naming the host: a call not
/// answered in time may be answered if made again.
pub(crate) async fn answer_of<T>(
    host: &DockerHost,
    call: impl std::future::Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, EngineError> {
    match tokio::time::timeout(ANSWER, call).await {
        Ok(answer) => answer.map_err(|e| failure_words(&e).context(&does_not_answer(host))),
        Err(_) => Err(EngineError::transient(format!(
            "{} within {}s",
            does_not_answer(host),
            ANSWER.as_secs()
        ))),
    }
}

/// `docker`, once it answers and speaks an API new enough; its version agreed.
pub(crate) async fn answering(docker: Docker, host: &DockerHost) -> Result<Docker, EngineError> {
    let docker = answer_of(host, docker.negotiate_version()).await?;
    let version = docker.client_version();
    if (version.major_version as u32, version.minor_version as u32) < OLDEST_API {
        return Err(format!(
            "the Docker host {} speaks API {}.{}: Capstan needs {}.{} or newer (Docker 20.10)",
            host.describe(),
            version.major_version,
            version.minor_version,
            OLDEST_API.0,
            OLDEST_API.1
        )
        .into());
    }
    Ok(docker)
}
