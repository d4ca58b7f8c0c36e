//! The replicas' checks: each replica of a route with a check is checked at its period (an
//! HTTP GET answered below 400, or a TCP connection accepted, within its timeout). One that
//! fails `failure_threshold` checks in a row is left out of its route until one passes.

use crate::Routes;
use bytes::Bytes;
use domain::model::{Backend, RouteCheck};
use http_body_util::Empty;
use hyper::Request;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What the checks found of one replica.
#[derive(Debug, Clone, Default)]
pub(crate) struct Health {
    /// `None`: not checked yet.
    pub up: Option<bool>,
    pub failures: u32,
    pub due: Option<Instant>,
}

/// How often the checker looks for replicas whose check is due.
const TICK: Duration = Duration::from_millis(250);

/// Checks the replicas of `routes` until `stop` ends.
pub async fn check_replicas(routes: Routes, stop: impl Future<Output = ()>) {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    tokio::pin!(stop);
    loop {
        let now = Instant::now();
        let watched = routes.checked();
        let due: Vec<(Backend, RouteCheck)> = match routes.health.lock() {
            Ok(mut health) => {
                health.retain(|b, _| watched.iter().any(|(w, _)| w == b));
                watched
                    .into_iter()
                    .filter(|(b, _)| health.get(b).and_then(|h| h.due).is_none_or(|d| d <= now))
                    .collect()
            }
            Err(_) => return,
        };
        let verdicts =
            futures_util::future::join_all(due.iter().map(|(b, check)| passes(&client, b, check)))
                .await;
        if let Ok(mut health) = routes.health.lock() {
            for ((backend, check), passed) in due.into_iter().zip(verdicts) {
                let h = health.entry(backend).or_default();
                h.due = Some(now + Duration::from_secs(check.period_seconds));
                if passed {
                    h.failures = 0;
                    h.up = Some(true);
                } else {
                    h.failures += 1;
                    if h.failures >= check.failure_threshold {
                        h.up = Some(false);
                    }
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(TICK) => {}
            () = &mut stop => return,
        }
    }
}

async fn passes(
    client: &Client<HttpConnector, Empty<Bytes>>,
    backend: &Backend,
    check: &RouteCheck,
) -> bool {
    let limit = Duration::from_secs(check.timeout_seconds);
    let address = format!("{}:{}", backend.host, backend.port);
    match &check.http_path {
        None => matches!(
            tokio::time::timeout(limit, TcpStream::connect(&address)).await,
            Ok(Ok(_))
        ),
        Some(path) => {
            let Ok(request) = Request::get(format!("http://{address}{path}"))
                .header("user-agent", "capstan-router-check")
                .body(Empty::new())
            else {
                return false;
            };
            matches!(
                tokio::time::timeout(limit, client.request(request)).await,
                Ok(Ok(answer)) if answer.status().as_u16() < 400
            )
        }
    }
}
