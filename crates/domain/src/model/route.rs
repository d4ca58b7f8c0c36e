//! Where the router sends requests: a host name for each public port of a service (generated
//! under the router's domain, the same for the service and port across redeploys) and the
//! replicas that answer it.

use super::{RunState, RunningState, Service};
use crate::ids::ServiceId;
use std::collections::BTreeMap;

/// How clients reach the router: the links it answers name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterAddress {
    /// The domain the generated host names are under (`localhost`: names that resolve to the
    /// machine itself, RFC 6761).
    pub domain: String,
    /// The port it listens on; a link leaves out 80.
    pub port: u16,
}

impl RouterAddress {
    /// The host name of a service's public port.
    pub fn host_of(&self, service: ServiceId, internal_port: i64) -> String {
        format!("p{internal_port}-z{}.{}", service.0.simple(), self.domain)
    }

    /// The URL of a host name it serves.
    pub fn url_of(&self, host: &str) -> String {
        match self.port {
            80 => format!("http://{host}"),
            port => format!("http://{host}:{port}"),
        }
    }
}

/// Where one replica answers a port, as the host reaches it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Backend {
    pub host: String,
    pub port: u16,
}

/// Every host name the router serves, with the replicas answering it (none: the service does
/// not run, and the router says so rather than "unknown host").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTable {
    pub routes: BTreeMap<String, Vec<Backend>>,
}

impl RouteTable {
    /// The table of `services` as their engines last saw them run.
    pub fn of(router: &RouterAddress, services: &[(Service, Option<RunningState>)]) -> Self {
        let mut routes = BTreeMap::new();
        for (service, seen) in services {
            for port in service
                .spec
                .ports()
                .iter()
                .filter(|p| p.publicly_accessible)
            {
                let backends = seen
                    .as_ref()
                    .map(|s| backends_of(s, port.internal_port))
                    .unwrap_or_default();
                routes.insert(router.host_of(service.id, port.internal_port), backends);
            }
        }
        RouteTable { routes }
    }

    /// The replicas answering `host` (a Host header: any port and letter case); `None`: the
    /// router serves no such name.
    pub fn backends(&self, host: &str) -> Option<&[Backend]> {
        let name = host_name_of(host);
        self.routes.get(&name).map(Vec::as_slice)
    }
}

/// A Host header's name: lower case, without its port or a trailing dot.
pub fn host_name_of(header: &str) -> String {
    let name = match header.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => header,
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The replicas of a running service answering `internal_port`.
fn backends_of(seen: &RunningState, internal_port: i64) -> Vec<Backend> {
    if matches!(seen.state, RunState::Stopped | RunState::Stopping) {
        return Vec::new();
    }
    let mut out: Vec<Backend> = seen
        .endpoints
        .iter()
        .filter(|e| i64::from(e.internal_port) == internal_port)
        .map(|e| Backend {
            host: e.host.clone(),
            port: e.port,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_header_names_its_route_whatever_its_port_and_case() {
        assert_eq!(host_name_of("P80-Zab.Localhost:8000"), "p80-zab.localhost");
        assert_eq!(host_name_of("p80-zab.localhost."), "p80-zab.localhost");
        assert_eq!(host_name_of("app.example.com"), "app.example.com");
    }

    #[test]
    fn generated_names_are_per_service_and_port() {
        let router = RouterAddress {
            domain: "localhost".into(),
            port: 8000,
        };
        let id = ServiceId::generate();
        let host = router.host_of(id, 8080);
        assert_eq!(host, format!("p8080-z{}.localhost", id.0.simple()));
        assert!(host.split('.').all(|label| label.len() <= 63));
        assert_ne!(host, router.host_of(id, 80));
        assert_eq!(router.url_of(&host), format!("http://{host}:8000"));
        let default_port = RouterAddress {
            domain: "apps.example.com".into(),
            port: 80,
        };
        assert_eq!(
            default_port.url_of("a.apps.example.com"),
            "http://a.apps.example.com"
        );
    }
}
