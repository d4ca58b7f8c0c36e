//! Where the router sends requests: a host name for each public port of a service (generated
//! under the router's domain, the same for the service and port across redeploys) and the
//! replicas that answer it.

use super::{CustomDomain, Port, RunState, RunningState, Service, ServiceSpec};
use crate::ids::ServiceId;
use std::collections::{BTreeMap, BTreeSet};

/// Whether the router serves a service: an application or container with a public port
/// (whose redeploys then switch the router to the new replicas before the old ones stop).
pub fn is_routed(service: &Service) -> bool {
    matches!(
        service.spec,
        ServiceSpec::Application(_) | ServiceSpec::Container(_)
    ) && service.spec.ports().iter().any(|p| p.publicly_accessible)
}

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
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Backend {
    pub host: String,
    pub port: u16,
}

/// How the router checks that a replica still answers, from the service's readiness probe:
/// a replica that fails `failure_threshold` checks in a row is taken out of its route until
/// one passes again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteCheck {
    /// `Some(path)`: an HTTP GET answered below 400; `None`: a TCP connection accepted.
    pub http_path: Option<String>,
    pub period_seconds: u64,
    pub timeout_seconds: u64,
    pub failure_threshold: u32,
}

impl RouteCheck {
    /// The check of a route to `internal_port`: the readiness probe when it probes that port
    /// over HTTP or TCP; a TCP check at the probe's timings otherwise (an exec or gRPC probe,
    /// or one on another port, cannot be run at the route's address).
    fn of(service: &Service, internal_port: i64) -> Option<Self> {
        let probe = service.spec.healthchecks()?.readiness_probe.as_ref()?;
        let http_path = probe
            .probe_type
            .http
            .as_ref()
            .filter(|h| h.port == internal_port && h.scheme.eq_ignore_ascii_case("http"))
            .map(|h| h.path.clone());
        let seconds = |n: i64| u64::try_from(n.max(1)).unwrap_or(1);
        Some(RouteCheck {
            http_path,
            period_seconds: seconds(probe.period_seconds),
            timeout_seconds: seconds(probe.timeout_seconds),
            failure_threshold: u32::try_from(probe.failure_threshold.max(1)).unwrap_or(1),
        })
    }
}

/// One host name's route: the replicas answering it, how they are checked, whether a client
/// keeps to the replica it first reached (sticky sessions, by a cookie), and whether the
/// router may obtain the name's certificate itself (ACME).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    pub backends: Vec<Backend>,
    pub check: Option<RouteCheck>,
    pub sticky: bool,
    /// A generated name's always; a custom domain's when its `generate_certificate` asks
    /// (not when a CDN in front holds the certificate).
    pub certify: bool,
}

/// Every host name the router serves, with the replicas answering it (none: the service does
/// not run, and the router says so rather than "unknown host"). A name may be a wildcard
/// (`*.example.com`), which answers for the names one label under it that no service claims.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTable {
    pub routes: BTreeMap<String, Route>,
    /// Names some service holds though they are not routed now (a custom domain whose check
    /// fails, of a service not running, the router's own domain): no wildcard answers them,
    /// or one organization's wildcard would serve the name another's users go to.
    pub claimed: BTreeSet<String>,
}

/// The advanced setting that keeps a client on one replica (the `network` operations' sticky
/// sessions).
pub const STICKY_SESSION: &str = "network.ingress.enable_sticky_session";

impl RouteTable {
    /// The table of `services` as their engines last saw them run, with the custom domains
    /// whose DNS check passed (each to its service's default public port; none under the
    /// router's own domain, which only generated names are), `claimed` every custom domain's
    /// name.
    pub fn of(
        router: &RouterAddress,
        services: &[(Service, Option<RunningState>)],
        domains: &[CustomDomain],
        claimed: &[String],
    ) -> Self {
        let mut routes = BTreeMap::new();
        for (service, seen) in services {
            let sticky = service.advanced_settings.get(STICKY_SESSION)
                == Some(&serde_json::Value::Bool(true));
            let public: Vec<&Port> = service
                .spec
                .ports()
                .iter()
                .filter(|p| p.publicly_accessible)
                .collect();
            let route_to = |port: &Port| Route {
                backends: seen
                    .as_ref()
                    .map(|s| backends_of(s, port.internal_port))
                    .unwrap_or_default(),
                check: RouteCheck::of(service, port.internal_port),
                sticky,
                certify: true,
            };
            for port in &public {
                routes.insert(
                    router.host_of(service.id, port.internal_port),
                    route_to(port),
                );
            }
            let default = public.iter().find(|p| p.is_default).or(public.first());
            if let Some(port) = default {
                let own = |d: &&CustomDomain| {
                    d.service_id == service.id && !is_within(&d.domain, &router.domain)
                };
                for d in domains.iter().filter(own) {
                    let route = Route {
                        certify: d.generate_certificate,
                        ..route_to(port)
                    };
                    routes.insert(d.domain.clone(), route);
                }
            }
        }
        let mut claimed: BTreeSet<String> = claimed
            .iter()
            .filter(|name| !name.starts_with("*.") && !routes.contains_key(*name))
            .cloned()
            .collect();
        claimed.insert(router.domain.clone());
        RouteTable { routes, claimed }
    }

    /// The route answering `host` (a Host header: any port and letter case): its own name's,
    /// else a wildcard's one label up when no service claims the name; `None`: the router
    /// serves no such name.
    pub fn route(&self, host: &str) -> Option<&Route> {
        let name = host_name_of(host);
        if let Some(route) = self.routes.get(&name) {
            return Some(route);
        }
        if self.claimed.contains(&name) {
            return None;
        }
        self.routes.get(&wildcard_over(&name)?)
    }
}

/// Whether `name` (a wildcard's too) is `domain` or a name under it.
pub fn is_within(name: &str, domain: &str) -> bool {
    let name = name.strip_prefix("*.").map_or(name, |rest| rest);
    name == domain || name.ends_with(&format!(".{domain}"))
}

/// The wildcard name that answers for `name` (one label up): `*.example.com` for
/// `shop.example.com`.
pub fn wildcard_over(name: &str) -> Option<String> {
    let (_, parent) = name.split_once('.')?;
    Some(format!("*.{parent}"))
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
    use crate::ids::*;
    use crate::model::{DeploymentStatus, Endpoint, ServiceDraft, ServiceKind};
    use time::OffsetDateTime;

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

    fn container(healthchecks: serde_json::Value) -> Service {
        let body = serde_json::json!({
            "name": "web", "registry_id": uuid::Uuid::new_v4(), "image_name": "web", "tag": "1",
            "ports": [
                {"internal_port": 80, "publicly_accessible": true, "is_default": false},
                {"internal_port": 81, "publicly_accessible": true, "is_default": true},
                {"internal_port": 82, "publicly_accessible": false}
            ],
            "healthchecks": healthchecks,
        });
        let draft = ServiceDraft::parse(ServiceKind::Container, &body, None).unwrap();
        let now = OffsetDateTime::UNIX_EPOCH;
        Service {
            id: ServiceId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: EnvironmentId::generate(),
            name: draft.name,
            description: None,
            spec: draft.spec,
            deployment_status: DeploymentStatus::UpToDate,
            advanced_settings: Default::default(),
            groups: Vec::new(),
            created_at: now,
            updated_at: now,
        }
    }

    fn running(service: &Service, state: RunState, ports: &[(u16, u16)]) -> RunningState {
        RunningState {
            service_id: service.id,
            environment_id: service.environment_id,
            state,
            replicas: Vec::new(),
            endpoints: ports
                .iter()
                .map(|(internal, port)| Endpoint {
                    internal_port: *internal,
                    host: "127.0.0.1".into(),
                    port: *port,
                })
                .collect(),
            observed_at: OffsetDateTime::UNIX_EPOCH,
            reported_by: None,
        }
    }

    fn backend(port: u16) -> Backend {
        Backend {
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn domain(service: &Service, name: &str) -> CustomDomain {
        CustomDomain {
            id: CustomDomainId::generate(),
            organization_id: service.organization_id,
            service_id: service.id,
            domain: name.into(),
            generate_certificate: false,
            use_cdn: false,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn public_ports_and_checked_domains_route_to_the_replicas_that_run() {
        let router = RouterAddress {
            domain: "localhost".into(),
            port: 8000,
        };
        let web = container(serde_json::json!({
            "readiness_probe": {"type": {"http": {"port": 81, "path": "/ready"}},
                                "period_seconds": 2, "failure_threshold": 3}
        }));
        let mut sticky = container(serde_json::Value::Null);
        sticky
            .advanced_settings
            .insert(STICKY_SESSION.into(), serde_json::Value::Bool(true));
        let services = [
            (
                web.clone(),
                Some(running(
                    &web,
                    RunState::Running,
                    &[(80, 5001), (81, 5002), (81, 6002), (82, 5003)],
                )),
            ),
            (
                sticky.clone(),
                Some(running(&sticky, RunState::Stopped, &[(80, 7001)])),
            ),
        ];
        let domains = [
            CustomDomain {
                generate_certificate: true,
                ..domain(&web, "shop.example.com")
            },
            domain(&web, "*.apps.example.com"),
        ];
        let table = RouteTable::of(&router, &services, &domains, &[]);
        let certified: Vec<&str> = table
            .routes
            .iter()
            .filter(|(_, route)| route.certify)
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(
            certified.len(),
            5,
            "generated names and the domain asking for a certificate: {certified:?}"
        );
        assert!(certified.contains(&"shop.example.com"));
        assert_eq!(table.routes.len(), 6, "two public ports each, two domains");
        let on_81 = table.route(&router.host_of(web.id, 81)).unwrap();
        assert_eq!(on_81.backends, [backend(5002), backend(6002)]);
        let check = on_81.check.as_ref().unwrap();
        assert_eq!(
            (
                check.http_path.as_deref(),
                check.period_seconds,
                check.failure_threshold
            ),
            (Some("/ready"), 2, 3)
        );
        let on_80 = table.route(&router.host_of(web.id, 80)).unwrap();
        assert_eq!(on_80.backends, [backend(5001)]);
        assert_eq!(
            on_80.check.as_ref().unwrap().http_path,
            None,
            "a probe of another port is a TCP check here"
        );
        assert!(
            table.route(&router.host_of(web.id, 82)).is_none(),
            "not public"
        );
        assert_eq!(
            table.route("SHOP.example.com:443").unwrap().backends,
            on_81.backends,
            "a custom domain goes to the default port"
        );
        assert_eq!(
            table.route("a.apps.example.com").unwrap().backends,
            on_81.backends
        );
        assert!(
            table.route("a.b.apps.example.com").is_none(),
            "one label only"
        );
        assert!(table.route("apps.example.com").is_none());
        let stopped = table.route(&router.host_of(sticky.id, 80)).unwrap();
        assert!(stopped.backends.is_empty() && stopped.sticky && !on_80.sticky);
        assert_eq!(
            stopped.check.as_ref().unwrap().http_path,
            None,
            "the default readiness probe is TCP"
        );
    }

    #[test]
    fn a_wildcard_answers_only_names_no_service_claims_and_never_the_routers_own() {
        let router = RouterAddress {
            domain: "apps.localhost".into(),
            port: 8000,
        };
        let (a, b) = (
            container(serde_json::Value::Null),
            container(serde_json::Value::Null),
        );
        let services = [
            (
                a.clone(),
                Some(running(&a, RunState::Running, &[(81, 5001)])),
            ),
            (
                b.clone(),
                Some(running(&b, RunState::Running, &[(81, 6001)])),
            ),
        ];
        let domains = [
            domain(&a, "*.localhost"),
            domain(&a, "*.apps.localhost"),
            domain(&a, &router.host_of(b.id, 81)),
            domain(&b, "shop.localhost"),
        ];
        let claimed = ["pending.localhost".to_string(), "shop.localhost".into()];
        let table = RouteTable::of(&router, &services, &domains, &claimed);
        let a_route = [backend(5001)];
        assert_eq!(table.route("anything.localhost").unwrap().backends, a_route);
        assert_eq!(
            table.route("shop.localhost").unwrap().backends,
            [backend(6001)],
            "the exact name first"
        );
        assert!(
            table.route("pending.localhost").is_none(),
            "claimed by a domain not routed now"
        );
        assert!(table.route("apps.localhost").is_none(), "the router's own");
        assert_eq!(
            table.route(&router.host_of(b.id, 81)).unwrap().backends,
            [backend(6001)],
            "a generated name is never another service's custom domain"
        );
        assert!(
            table.route("p1-zunknown.apps.localhost").is_none(),
            "no wildcard under the router's domain"
        );
        assert!(is_within("*.apps.localhost", "apps.localhost"));
        assert!(is_within("x.y.apps.localhost", "apps.localhost"));
        assert!(!is_within("*.localhost", "apps.localhost"));
        assert!(!is_within("myapps.localhost", "apps.localhost"));
    }
}
