//! Where a cluster's workloads run: a Docker daemon, named by the cluster (`docker.endpoint`,
//! Capstan's addition to ON_PREMISE clusters), reached with what its on-premise credentials
//! hold (a TLS client's certificate and key, or an SSH key), which are sealed like secrets.
//! A cluster naming none runs on the daemon Capstan itself uses.

use crate::error::DomainError;
use crate::ids::ClusterId;
use crate::secret::Secret;
use serde::{Deserialize, Serialize};

/// A cluster's Docker daemon, as its request names it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerEndpointSpec {
    /// `unix:///path/to/docker.sock`, `tcp://host:port` (TLS, from the cluster's on-premise
    /// credentials; plain only on a loopback address) or `ssh://user@host[:port][/socket]`
    /// (the daemon's socket there, `/var/run/docker.sock` by default).
    pub endpoint: String,
    /// The address the host publishes workloads' ports on, which Capstan's router reaches;
    /// by default the endpoint's host (its own address for a socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_address: Option<String>,
    /// When `endpoint` is a Swarm manager: the nodes' own daemons, for the work only a node's
    /// daemon can do (loading an image built from git onto it); a node named by none is
    /// spared that work, its reason saying so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeDaemonSpec>,
    /// When `endpoint` is a Swarm manager: a registry every node pulls from
    /// (`host[:port][/path]`), which the manager's daemon pushes images built from git to,
    /// instead of Capstan loading them onto each node's daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_registry: Option<String>,
}

/// A Swarm node's own daemon, as a cluster's request names it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDaemonSpec {
    /// The node's address in its Swarm, as the cluster's status lists it.
    pub address: String,
    /// Its daemon, named as `endpoint` names the manager's (reached with the same
    /// credentials).
    pub endpoint: String,
}

/// A Swarm node's own daemon: the node's address in its Swarm, and how its daemon is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDaemon {
    pub address: String,
    pub endpoint: DockerEndpoint,
}

/// Where a daemon listens on its own machine, unless told otherwise.
const DEFAULT_SOCKET: &str = "/var/run/docker.sock";

/// How a daemon is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DockerEndpoint {
    /// The daemon Capstan itself uses (`DOCKER_HOST`, or the default socket).
    Local,
    Unix {
        socket: String,
    },
    /// `host:port`, over TLS when the credentials hold a client certificate.
    Tcp {
        address: String,
    },
    /// The daemon's socket on `host` (`/var/run/docker.sock` unless the URL's path names
    /// another), reached through an SSH tunnel.
    Ssh {
        user: Option<String>,
        host: String,
        port: Option<u16>,
        socket: String,
    },
}

impl DockerEndpoint {
    /// Reads an endpoint URL (`unix://`, `tcp://`, `ssh://`).
    pub fn parse(url: &str) -> Result<Self, DomainError> {
        let bad = |why: &str| DomainError::invalid("docker.endpoint", why.to_string());
        let url = url.trim();
        if let Some(path) = url.strip_prefix("unix://") {
            if !path.starts_with('/') || path.contains("..") {
                return Err(bad("a unix:// endpoint names an absolute socket path"));
            }
            return Ok(Self::Unix {
                socket: path.to_string(),
            });
        }
        if let Some(rest) = url.strip_prefix("tcp://") {
            let (host, port) = split_port(rest.trim_end_matches('/')).ok_or_else(|| {
                bad("a tcp:// endpoint names a host and a port, e.g. tcp://10.0.0.5:2376")
            })?;
            let port = port.ok_or_else(|| bad("a tcp:// endpoint names its port"))?;
            return Ok(Self::Tcp {
                address: format!("{host}:{port}"),
            });
        }
        if let Some(rest) = url.strip_prefix("ssh://") {
            let (authority, socket) = match rest.find('/') {
                Some(at) if at + 1 < rest.len() => (&rest[..at], rest[at..].to_string()),
                Some(at) => (&rest[..at], DEFAULT_SOCKET.to_string()),
                None => (rest, DEFAULT_SOCKET.to_string()),
            };
            if socket.contains("..") {
                return Err(bad("an ssh:// endpoint's socket path contains '..'"));
            }
            let (user, at) = match authority.split_once('@') {
                Some((user, at)) if is_ssh_user(user) => (Some(user.to_string()), at),
                Some(_) => {
                    return Err(bad(
                        "an ssh:// endpoint's user is letters, digits, '.', '_' and '-', \
                         not first",
                    ))
                }
                None => (None, authority),
            };
            let (host, port) =
                split_port(at).ok_or_else(|| bad("an ssh:// endpoint names a host"))?;
            // ssh would read a destination starting with '-' as an option.
            if host.starts_with('-') {
                return Err(bad("an ssh:// endpoint's host cannot start with '-'"));
            }
            return Ok(Self::Ssh {
                user,
                host: host.to_string(),
                port,
                socket,
            });
        }
        Err(bad("must start with unix://, tcp:// or ssh://"))
    }

    /// The endpoint as a URL again (for messages and the record).
    pub fn url(&self) -> String {
        match self {
            Self::Local => "the local Docker daemon".into(),
            Self::Unix { socket } => format!("unix://{socket}"),
            Self::Tcp { address } => format!("tcp://{address}"),
            Self::Ssh {
                user,
                host,
                port,
                socket,
            } => format!(
                "ssh://{}{host}{}{}",
                user.as_ref().map(|u| format!("{u}@")).unwrap_or_default(),
                port.map(|p| format!(":{p}")).unwrap_or_default(),
                if socket == DEFAULT_SOCKET { "" } else { socket }
            ),
        }
    }

    /// The host's name or address as this machine reaches it; none for a socket here.
    pub fn remote_host(&self) -> Option<&str> {
        match self {
            Self::Local | Self::Unix { .. } => None,
            Self::Tcp { address } => split_port(address).map(|(host, _)| host),
            Self::Ssh { host, .. } => Some(host),
        }
    }
}

/// A user name as `ssh` takes it after `--`: nothing it could read as an option or a
/// second destination.
fn is_ssh_user(user: &str) -> bool {
    !user.is_empty()
        && !user.starts_with('-')
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `host[:port]`, an IPv6 address in brackets; `None` when the host is empty or the port is
/// not a number.
fn split_port(at: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if let Some(rest) = at.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match at.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (at, None),
        }
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_');
    if host.is_empty() || !host.chars().all(valid) {
        return None;
    }
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok().filter(|p| *p > 0)?),
    };
    Some((host, port))
}

/// Whether `host` is this machine's loopback (where plain TCP to a daemon is tolerated).
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What on-premise credentials hold to reach a daemon (sealed in the store, never answered).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerAccess {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<DockerTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_private_key: Option<Secret>,
    /// The SSH host's public key (`ssh-ed25519 AAAA...`, as its `.pub` file holds it): only
    /// a host holding its private half is spoken to. None: the key met first is recorded and
    /// then required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_host_key: Option<String>,
}

/// A TLS client's material for a `tcp://` daemon started with `--tlsverify`: the authority its
/// certificate is checked against, and the client's own certificate and key (all PEM).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DockerTls {
    pub ca: String,
    pub certificate: String,
    pub key: Secret,
}

impl DockerAccess {
    /// Reads the sealed form (empty: nothing).
    pub fn unseal(sealed: &Secret) -> Self {
        serde_json::from_str(sealed.expose()).unwrap_or_default()
    }

    pub fn seal(&self) -> Secret {
        Secret::new(serde_json::to_string(self).unwrap_or_default())
    }

    pub fn validate(mut self) -> Result<Self, DomainError> {
        self.ssh_host_key = self.ssh_host_key.map(|k| k.trim().to_string());
        if let Some(tls) = &self.tls {
            for (field, pem) in [
                ("docker_tls.ca", tls.ca.as_str()),
                ("docker_tls.certificate", tls.certificate.as_str()),
            ] {
                if !pem.contains("-----BEGIN CERTIFICATE-----") {
                    return Err(DomainError::invalid(field, "must be a PEM certificate"));
                }
            }
            if !is_private_key(tls.key.expose()) {
                return Err(DomainError::invalid(
                    "docker_tls.key",
                    "must be a PEM private key",
                ));
            }
        }
        if let Some(key) = &self.ssh_host_key {
            let parts: Vec<&str> = key.split_whitespace().collect();
            let one_line = !key.contains(['\r', '\n']);
            if !one_line || parts.len() < 2 || !is_host_key_type(parts[0]) {
                return Err(DomainError::invalid(
                    "ssh_host_key",
                    "must be one public host key, e.g. 'ssh-ed25519 AAAA...'",
                ));
            }
        }
        if let Some(key) = &self.ssh_private_key {
            if !is_private_key(key.expose()) {
                return Err(DomainError::invalid(
                    "ssh_private_key",
                    "must be a private key (PEM or OpenSSH)",
                ));
            }
        }
        Ok(self)
    }
}

fn is_host_key_type(kind: &str) -> bool {
    kind.starts_with("ssh-") || kind.starts_with("ecdsa-sha2-") || kind.starts_with("sk-")
}

fn is_private_key(pem: &str) -> bool {
    pem.contains("-----BEGIN") && pem.contains("PRIVATE KEY-----")
}

/// Where an environment's workloads run: its cluster's daemon, how it is reached, and the
/// address its published ports answer at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerHost {
    pub cluster_id: ClusterId,
    pub endpoint: DockerEndpoint,
    pub access: DockerAccess,
    /// None: the engine's own (for the local daemon) or the endpoint's host.
    pub publish_address: Option<String>,
    /// The daemon the cluster was deployed on (deploying checks whose it is): the engine
    /// talks to the endpoint only while the same daemon answers there. None: not checked yet
    /// (never for the local daemon, which is the installation's).
    pub daemon: Option<ClaimedDaemon>,
    /// The own daemons of the Swarm's nodes the cluster names (none for a plain host).
    pub nodes: Vec<NodeDaemon>,
    /// The registry images built from git are pushed to, for a Swarm's nodes to pull.
    pub image_registry: Option<String>,
}

/// Who answers at a cluster's endpoint, and whether it is the daemon this installation itself
/// uses (or a node of the same Swarm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonIdentity {
    pub claim: ClaimedDaemon,
    pub installations_own: bool,
}

string_enum!(
    /// What answers at a cluster's Docker endpoint: one Docker host, or a manager of a Swarm
    /// (whose services then run as Swarm runs them).
    DockerHostKind {
        Host => "DOCKER_HOST",
        Swarm => "DOCKER_SWARM",
    }
);

/// The daemon a cluster was deployed on, as its deployment found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDaemon {
    /// The daemon's own ID (`docker info`), or for a node of a Swarm the Swarm's, so that its
    /// managers and workers are one daemon to claim.
    pub id: String,
    pub kind: DockerHostKind,
}

/// Where an organization may point a cluster: sockets under one directory of the operator's,
/// remote hosts as the outbound policy lets calls made for users reach them.
#[derive(Debug, Clone, Default)]
pub struct DockerHostsPolicy {
    /// The directory whose sockets `unix://` endpoints may name
    /// (CAPSTAN_DOCKER_SOCKETS_DIR); none: no `unix://` endpoint.
    pub sockets_dir: Option<String>,
    pub outbound: crate::outbound_policy::OutboundPolicy,
}

impl DockerHostsPolicy {
    /// Refuses a socket outside the operator's directory; the host name (or address) a
    /// remote endpoint reaches, for the caller to check against the outbound policy.
    pub fn check<'a>(&self, endpoint: &'a DockerEndpoint) -> Result<Option<&'a str>, DomainError> {
        match endpoint {
            DockerEndpoint::Local => Ok(None),
            DockerEndpoint::Unix { socket } => {
                let within = self.sockets_dir.as_deref().is_some_and(|dir| {
                    let dir = dir.trim_end_matches('/');
                    !dir.is_empty() && socket.starts_with(&format!("{dir}/"))
                });
                if within {
                    Ok(None)
                } else {
                    Err(DomainError::invalid(
                        "docker.endpoint",
                        "a unix:// endpoint must name a socket under the directory the \
                         operator allows (CAPSTAN_DOCKER_SOCKETS_DIR)",
                    ))
                }
            }
            other => Ok(other.remote_host()),
        }
    }
}

impl DockerHost {
    /// The daemon Capstan itself uses, for a cluster that names none.
    pub fn local(cluster_id: ClusterId) -> Self {
        Self {
            cluster_id,
            endpoint: DockerEndpoint::Local,
            access: DockerAccess::default(),
            publish_address: None,
            daemon: None,
            nodes: Vec::new(),
            image_registry: None,
        }
    }

    /// The host a cluster names with `spec`, reached with `access`; why it cannot be, when
    /// the endpoint needs what the access lacks.
    pub fn named(
        cluster_id: ClusterId,
        spec: &DockerEndpointSpec,
        access: DockerAccess,
    ) -> Result<Self, DomainError> {
        let endpoint = DockerEndpoint::parse(&spec.endpoint)?;
        let reachable = |endpoint: &DockerEndpoint| {
            if let DockerEndpoint::Tcp { address } = endpoint {
                let host = split_port(address).map_or("", |(h, _)| h);
                if access.tls.is_none() && !is_loopback(host) {
                    return Err(DomainError::invalid(
                        "cloud_provider_credentials",
                        "a tcp:// endpoint off this machine needs TLS: on-premise credentials \
                         with docker_tls",
                    ));
                }
            }
            Ok(())
        };
        reachable(&endpoint)?;
        let mut nodes = Vec::with_capacity(spec.nodes.len());
        for node in &spec.nodes {
            if node.address.parse::<std::net::IpAddr>().is_err() {
                return Err(DomainError::invalid(
                    "docker.nodes.address",
                    "must be an IP address (the node's address in its Swarm)",
                ));
            }
            if nodes.iter().any(|n: &NodeDaemon| n.address == node.address) {
                return Err(DomainError::invalid(
                    "docker.nodes.address",
                    format!("{} is named twice", node.address),
                ));
            }
            let at = DockerEndpoint::parse(&node.endpoint).map_err(|_| {
                DomainError::invalid(
                    "docker.nodes.endpoint",
                    "is not a Docker endpoint URL (unix://, tcp://host:port, ssh://)",
                )
            })?;
            reachable(&at)?;
            nodes.push(NodeDaemon {
                address: node.address.clone(),
                endpoint: at,
            });
        }
        if let Some(registry) = &spec.image_registry {
            registry_reference(registry)?;
        }
        if let Some(address) = &spec.publish_address {
            if address.parse::<std::net::IpAddr>().is_err() {
                return Err(DomainError::invalid(
                    "docker.publish_address",
                    "must be an IP address",
                ));
            }
        }
        Ok(Self {
            cluster_id,
            endpoint,
            access,
            publish_address: spec.publish_address.clone(),
            daemon: None,
            nodes,
            image_registry: spec.image_registry.clone(),
        })
    }

    /// The host for messages: its endpoint.
    pub fn describe(&self) -> String {
        self.endpoint.url()
    }
}

/// A registry as an image's name starts with it: `host[:port]`, then an optional path of
/// lowercase components; no scheme, no credentials.
fn registry_reference(registry: &str) -> Result<(), DomainError> {
    let bad = |why: &str| DomainError::invalid("docker.image_registry", why.to_string());
    let (host, path) = registry.split_once('/').unwrap_or((registry, ""));
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let host_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        && !name.starts_with(['.', '-']);
    if !host_ok || port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return Err(bad(
            "must be a registry's host[:port], optionally with a path (registry.example.com:5000/team)",
        ));
    }
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.chars()
                .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
    };
    if !path.is_empty() && !path.split('/').all(component_ok) {
        return Err(bad(
            "its path must be lowercase components (letters, digits, '.', '_', '-') separated by '/'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_read_as_their_scheme_says() {
        assert_eq!(
            DockerEndpoint::parse("unix:///run/docker-2.sock").unwrap(),
            DockerEndpoint::Unix {
                socket: "/run/docker-2.sock".into()
            }
        );
        assert_eq!(
            DockerEndpoint::parse("tcp://10.0.0.5:2376").unwrap(),
            DockerEndpoint::Tcp {
                address: "10.0.0.5:2376".into()
            }
        );
        let ssh = DockerEndpoint::parse("ssh://deploy@box.example.com:2222").unwrap();
        assert_eq!(
            ssh,
            DockerEndpoint::Ssh {
                user: Some("deploy".into()),
                host: "box.example.com".into(),
                port: Some(2222),
                socket: "/var/run/docker.sock".into()
            }
        );
        assert_eq!(ssh.url(), "ssh://deploy@box.example.com:2222");
        let elsewhere = DockerEndpoint::parse("ssh://box/run/user/1000/docker.sock").unwrap();
        assert_eq!(elsewhere.url(), "ssh://box/run/user/1000/docker.sock");
        assert_eq!(ssh.remote_host(), Some("box.example.com"));
        for bad in [
            "http://x:1",
            "unix://relative.sock",
            "tcp://10.0.0.5",
            "tcp://:2376",
            "tcp://a b:1",
            "ssh://@host",
            "ssh://host/../etc",
            "tcp://10.0.0.5:99999",
            "ssh://-oProxyCommand=touch@host",
            "ssh://-oProxyCommand=x",
            "ssh://a b@host",
            "ssh://user@-host",
        ] {
            assert!(DockerEndpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tcp_off_this_machine_needs_tls() {
        let spec = |endpoint: &str| DockerEndpointSpec {
            endpoint: endpoint.into(),
            publish_address: None,
            nodes: Vec::new(),
            image_registry: None,
        };
        let id = ClusterId::generate();
        assert!(
            DockerHost::named(id, &spec("tcp://10.0.0.5:2375"), DockerAccess::default()).is_err()
        );
        assert!(
            DockerHost::named(id, &spec("tcp://127.0.0.1:2375"), DockerAccess::default()).is_ok()
        );
        let tls = DockerAccess {
            tls: Some(DockerTls {
                ca: "-----BEGIN CERTIFICATE-----".into(),
                certificate: "-----BEGIN CERTIFICATE-----".into(),
                key: Secret::new("-----BEGIN PRIVATE KEY-----"),
            }),
            ssh_private_key: None,
            ssh_host_key: None,
        };
        assert!(DockerHost::named(id, &spec("tcp://10.0.0.5:2376"), tls.clone()).is_ok());
        let sealed = tls.seal();
        assert_eq!(DockerAccess::unseal(&sealed), tls);
        assert!(
            !format!("{tls:?}").contains("BEGIN PRIVATE KEY"),
            "the key is hidden"
        );
    }

    #[test]
    fn a_swarms_node_daemons_are_named_by_address_and_reached_alike() {
        let id = ClusterId::generate();
        let with = |nodes: Vec<(&str, &str)>| DockerEndpointSpec {
            endpoint: "unix:///run/capstan/n1.sock".into(),
            publish_address: None,
            image_registry: None,
            nodes: nodes
                .into_iter()
                .map(|(address, endpoint)| NodeDaemonSpec {
                    address: address.into(),
                    endpoint: endpoint.into(),
                })
                .collect(),
        };
        let host = DockerHost::named(
            id,
            &with(vec![("10.0.0.12", "unix:///run/capstan/n2.sock")]),
            DockerAccess::default(),
        )
        .unwrap();
        assert_eq!(
            host.nodes,
            [NodeDaemon {
                address: "10.0.0.12".into(),
                endpoint: DockerEndpoint::Unix {
                    socket: "/run/capstan/n2.sock".into()
                }
            }]
        );
        for (nodes, field) in [
            (
                vec![("node-2", "unix:///run/n2.sock")],
                "docker.nodes.address",
            ),
            (vec![("10.0.0.12", "http://x:1")], "docker.nodes.endpoint"),
            (
                vec![
                    ("10.0.0.12", "unix:///a.sock"),
                    ("10.0.0.12", "unix:///b.sock"),
                ],
                "docker.nodes.address",
            ),
            // Reached with the cluster's credentials: no TLS, no tcp:// off this machine.
            (
                vec![("10.0.0.12", "tcp://10.0.0.12:2375")],
                "cloud_provider_credentials",
            ),
        ] {
            let refused = DockerHost::named(id, &with(nodes), DockerAccess::default())
                .unwrap_err()
                .to_string();
            assert!(refused.starts_with(field), "{refused}");
        }
    }

    #[test]
    fn a_pinned_host_key_is_one_public_key_line() {
        let with = |key: &str| DockerAccess {
            ssh_host_key: Some(key.into()),
            ..DockerAccess::default()
        };
        assert!(with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA")
            .validate()
            .is_ok());
        for bad in ["AAAA", "ssh-ed25519", "ssh-ed25519 AAAA\nother AAAA", "x y"] {
            let err = with(bad).validate().unwrap_err().to_string();
            assert!(err.starts_with("ssh_host_key: "), "{bad}: {err}");
        }
    }

    #[test]
    fn sockets_only_under_the_operators_directory() {
        let socket = |path: &str| DockerEndpoint::Unix {
            socket: path.into(),
        };
        let none = DockerHostsPolicy::default();
        assert!(none.check(&socket("/run/docker.sock")).is_err());
        let dir = DockerHostsPolicy {
            sockets_dir: Some("/srv/daemons/".into()),
            ..DockerHostsPolicy::default()
        };
        assert!(dir.check(&socket("/srv/daemons/a/docker.sock")).is_ok());
        for outside in [
            "/var/run/docker.sock",
            "/srv/daemons-2/docker.sock",
            "/srv/daemons",
        ] {
            let err = dir.check(&socket(outside)).unwrap_err().to_string();
            assert!(
                err.contains("CAPSTAN_DOCKER_SOCKETS_DIR"),
                "{outside}: {err}"
            );
        }
        let remote = DockerEndpoint::parse("ssh://u@box.example.com").unwrap();
        assert_eq!(dir.check(&remote).unwrap(), Some("box.example.com"));
    }

    #[test]
    fn a_swarms_image_registry_is_a_registry_reference() {
        let id = ClusterId::generate();
        let with = |registry: &str| DockerEndpointSpec {
            endpoint: "unix:///run/capstan/n1.sock".into(),
            publish_address: None,
            nodes: Vec::new(),
            image_registry: Some(registry.into()),
        };
        for good in [
            "10.0.0.2:5000",
            "registry.example.com/team/builds",
            "localhost",
        ] {
            let host = DockerHost::named(id, &with(good), DockerAccess::default()).unwrap();
            assert_eq!(host.image_registry.as_deref(), Some(good));
        }
        for bad in [
            "",
            "https://registry.example.com",
            "user:pw@registry.example.com",
            "registry.example.com:port",
            "registry.example.com:",
            "registry.example.com/Team",
            "registry.example.com//x",
            "-registry",
        ] {
            let refused = DockerHost::named(id, &with(bad), DockerAccess::default()).unwrap_err();
            assert!(
                format!("{refused:?}").contains("docker.image_registry"),
                "{bad}: {refused:?}"
            );
        }
    }
}
