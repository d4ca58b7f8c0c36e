//! The router: listeners of its own (HTTP, and HTTPS with certificates chosen by name) that
//! send each request to a replica of the service whose public port or custom domain its Host
//! header names, balanced over the replicas that run and pass their checks, WebSockets and
//! other upgrades passed through. What it routes is a [`RouteTable`] the caller replaces as
//! services come and go; the proxying itself is hyper's (server and client), not hand-written
//! HTTP.

mod acme;
mod health;
mod proxy;
mod tls;

pub use acme::{
    ordered_folder, read_roots, Acme, AcmeSettings, LETS_ENCRYPT_PRODUCTION_DIRECTORY,
    LETS_ENCRYPT_STAGING_DIRECTORY,
};
pub use health::check_replicas;
pub use proxy::{serve, serve_tls, TrustedProxies};
pub use tls::Certificates;

use domain::model::{Backend, Route, RouteTable};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// What the router serves, shared between its connections and whoever keeps it current.
#[derive(Clone, Default)]
pub struct Routes {
    table: Arc<RwLock<RouteTable>>,
    /// What the checks last found of each replica; one not yet checked is absent.
    health: Arc<Mutex<HashMap<Backend, health::Health>>>,
    turn: Arc<AtomicUsize>,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// To this replica; `stick`: the cookie that keeps the client on it (sticky sessions).
    To {
        backend: Backend,
        stick: Option<String>,
    },
    /// The name is served, but none of its replicas runs.
    NotRunning,
    /// Replicas run, but every one fails its checks.
    Unhealthy,
    /// No service answers at this name.
    Unknown,
}

/// The cookie a sticky route keeps its client's replica in.
pub const STICKY_COOKIE: &str = "capstan_replica";

impl Routes {
    /// Always takes: a lock poisoned by a panic elsewhere is taken back (the table is only
    /// ever replaced whole, so what it held is never half-written), and said so.
    pub fn replace(&self, table: RouteTable) {
        let mut held = self.table.write().unwrap_or_else(|poisoned| {
            tracing::warn!("the router's route table lock was poisoned; taking it back");
            poisoned.into_inner()
        });
        *held = table;
    }

    /// The table, read even after a panic elsewhere poisoned its lock.
    fn table(&self) -> std::sync::RwLockReadGuard<'_, RouteTable> {
        self.table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The replica the next request for `host` goes to: among those passing their checks
    /// (those not checked yet only when none passes), in turn, or the one `cookie` names on
    /// a sticky route; never one in `tried`.
    pub fn pick(&self, host: &str, cookie: Option<&str>, tried: &[Backend]) -> Pick {
        let table = self.table();
        let Some(route) = table.route(host) else {
            return Pick::Unknown;
        };
        if route.backends.is_empty() {
            return Pick::NotRunning;
        }
        let candidates = self.serving(route, tried);
        if candidates.is_empty() {
            return Pick::Unhealthy;
        }
        if route.sticky {
            if let Some(kept) = cookie.and_then(|c| candidates.iter().find(|b| token(b) == c)) {
                return Pick::To {
                    backend: (*kept).clone(),
                    stick: None,
                };
            }
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let backend = candidates[turn % candidates.len()].clone();
        let stick = route.sticky.then(|| token(&backend));
        Pick::To { backend, stick }
    }

    /// The replicas of `route` a request may go to.
    fn serving<'a>(&self, route: &'a Route, tried: &[Backend]) -> Vec<&'a Backend> {
        let open: Vec<&Backend> = route
            .backends
            .iter()
            .filter(|b| !tried.contains(b))
            .collect();
        if route.check.is_none() {
            return open;
        }
        let Ok(health) = self.health.lock() else {
            return open;
        };
        let verdict = |b: &Backend| health.get(b).and_then(|h| h.up);
        let passing: Vec<&Backend> = open
            .iter()
            .copied()
            .filter(|b| verdict(b) == Some(true))
            .collect();
        if !passing.is_empty() {
            return passing;
        }
        open.into_iter().filter(|b| verdict(b).is_none()).collect()
    }

    /// A replica refused a connection: it takes no more requests until a check passes.
    pub fn refused(&self, backend: &Backend) {
        if let Ok(mut health) = self.health.lock() {
            health.entry(backend.clone()).or_default().up = Some(false);
        }
    }

    /// Every replica a check watches, with its check.
    fn checked(&self) -> Vec<(Backend, domain::model::RouteCheck)> {
        let table = self.table();
        let mut out: Vec<(Backend, domain::model::RouteCheck)> = table
            .routes
            .values()
            .filter_map(|r| Some((r, r.check.clone()?)))
            .flat_map(|(r, check)| r.backends.iter().map(move |b| (b.clone(), check.clone())))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out.dedup_by(|a, b| a.0 == b.0);
        out
    }
}

/// A replica's name in a sticky cookie: the same on every instance, and not its address.
fn token(backend: &Backend) -> String {
    // FNV-1a: stable across processes and versions, unlike the standard library's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in format!("{}:{}", backend.host, backend.port).bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::model::RouteCheck;

    fn backend(port: u16) -> Backend {
        Backend {
            host: "127.0.0.1".into(),
            port,
        }
    }

    fn route(ports: &[u16], checked: bool, sticky: bool) -> Route {
        Route {
            backends: ports.iter().copied().map(backend).collect(),
            check: checked.then_some(RouteCheck {
                http_path: None,
                period_seconds: 1,
                timeout_seconds: 1,
                failure_threshold: 1,
            }),
            sticky,
            certify: false,
        }
    }

    fn to(port: u16) -> Pick {
        Pick::To {
            backend: backend(port),
            stick: None,
        }
    }

    #[test]
    fn a_table_poisoned_by_a_panic_is_still_read_and_replaced() {
        let routes = Routes::default();
        let held = routes.table.clone();
        let _ = std::thread::spawn(move || {
            let _writing = held.write();
            panic!("a panic while the table is held");
        })
        .join();
        assert!(routes.table.is_poisoned());
        let mut table = RouteTable::default();
        table
            .routes
            .insert("web.localhost".into(), route(&[8080], false, false));
        routes.replace(table);
        assert_eq!(routes.pick("web.localhost", None, &[]), to(8080));
    }

    fn routes(entries: &[(&str, Route)]) -> Routes {
        let routes = Routes::default();
        let mut table = RouteTable::default();
        for (name, route) in entries {
            table.routes.insert((*name).to_string(), route.clone());
        }
        routes.replace(table);
        routes
    }

    #[test]
    fn requests_take_the_replicas_in_turn() {
        let routes = routes(&[
            ("a.localhost", route(&[1, 2], false, false)),
            ("b.localhost", route(&[], false, false)),
        ]);
        let picked: Vec<Pick> = (0..4)
            .map(|_| routes.pick("A.localhost:8000", None, &[]))
            .collect();
        assert_eq!(picked, [to(1), to(2), to(1), to(2)]);
        assert_eq!(routes.pick("a.localhost", None, &[backend(1)]), to(2));
        assert_eq!(routes.pick("b.localhost", None, &[]), Pick::NotRunning);
        assert_eq!(routes.pick("c.localhost", None, &[]), Pick::Unknown);
    }

    #[test]
    fn replicas_failing_their_checks_are_left_out_and_new_ones_wait_for_theirs() {
        let routes = routes(&[("a.localhost", route(&[1, 2, 3], true, false))]);
        let seen = |routes: &Routes| -> Vec<Pick> {
            (0..4)
                .map(|_| routes.pick("a.localhost", None, &[]))
                .collect()
        };
        assert_eq!(
            seen(&routes).len(),
            4,
            "none checked yet: every replica may answer"
        );
        routes.health.lock().unwrap().insert(
            backend(1),
            health::Health {
                up: Some(true),
                ..Default::default()
            },
        );
        assert!(
            seen(&routes).iter().all(|p| *p == to(1)),
            "one passing: only it, the others wait for their first check"
        );
        routes.refused(&backend(1));
        let left: Vec<Pick> = seen(&routes);
        assert!(left.contains(&to(2)) && left.contains(&to(3)) && !left.contains(&to(1)));
        routes.refused(&backend(2));
        routes.refused(&backend(3));
        assert_eq!(routes.pick("a.localhost", None, &[]), Pick::Unhealthy);
    }

    #[test]
    fn a_sticky_route_keeps_a_client_on_the_replica_its_cookie_names() {
        let routes = routes(&[("a.localhost", route(&[1, 2], false, true))]);
        let Pick::To {
            backend: first,
            stick: Some(cookie),
        } = routes.pick("a.localhost", None, &[])
        else {
            panic!("a sticky route sets its cookie");
        };
        for _ in 0..3 {
            assert_eq!(
                routes.pick("a.localhost", Some(&cookie), &[]),
                Pick::To {
                    backend: first.clone(),
                    stick: None
                }
            );
        }
        let Pick::To {
            backend: other,
            stick: Some(_),
        } = routes.pick("a.localhost", Some(&cookie), std::slice::from_ref(&first))
        else {
            panic!("a replica gone: another, with a new cookie");
        };
        assert_ne!(other, first);
        assert_ne!(token(&backend(1)), token(&backend(2)));
    }
}
