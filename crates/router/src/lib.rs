//! The router: a listener of its own that sends each request to a replica of the service whose
//! public port its Host header names, balanced over the replicas that run, WebSockets and other
//! upgrades passed through. What it routes is a [`RouteTable`] the caller replaces as services
//! come and go; the proxying itself is hyper's (server and client), not hand-written HTTP.

mod proxy;

pub use proxy::serve;

use domain::model::{Backend, RouteTable};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

/// What the router serves, shared between its connections and whoever keeps it current.
#[derive(Clone, Default)]
pub struct Routes {
    table: Arc<RwLock<RouteTable>>,
    turn: Arc<AtomicUsize>,
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    To(Backend),
    /// The name is served, but none of its replicas runs.
    NotRunning,
    /// No service answers at this name.
    Unknown,
}

impl Routes {
    pub fn replace(&self, table: RouteTable) {
        if let Ok(mut held) = self.table.write() {
            *held = table;
        }
    }

    /// The replica the next request for `host` goes to, in turn.
    pub fn pick(&self, host: &str) -> Pick {
        let Ok(table) = self.table.read() else {
            return Pick::Unknown;
        };
        match table.backends(host) {
            None => Pick::Unknown,
            Some([]) => Pick::NotRunning,
            Some(backends) => {
                let turn = self.turn.fetch_add(1, Ordering::Relaxed);
                Pick::To(backends[turn % backends.len()].clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(port: u16) -> Backend {
        Backend {
            host: "127.0.0.1".into(),
            port,
        }
    }

    #[test]
    fn requests_take_the_replicas_in_turn() {
        let routes = Routes::default();
        let mut table = RouteTable::default();
        table
            .routes
            .insert("a.localhost".into(), vec![backend(1), backend(2)]);
        table.routes.insert("b.localhost".into(), Vec::new());
        routes.replace(table);
        let picked: Vec<Pick> = (0..4).map(|_| routes.pick("A.localhost:8000")).collect();
        assert_eq!(
            picked,
            [
                Pick::To(backend(1)),
                Pick::To(backend(2)),
                Pick::To(backend(1)),
                Pick::To(backend(2))
            ]
        );
        assert_eq!(routes.pick("b.localhost"), Pick::NotRunning);
        assert_eq!(routes.pick("c.localhost"), Pick::Unknown);
    }
}
