//! `GET /metrics`: Prometheus text format. Requests by route and status with their latency,
//! rate-limit refusals, how deployments end and how long they take, webhook deliveries by
//! outcome, and the queue's depth
//! (read from the store when scraped, so it is the installation's, not this instance's);
//! with `CAPSTAN_METRICS_REPLICAS`, what every running replica consumes, read when scraped.

use crate::AppState;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use domain::model::{DeploymentAction, RequestStatus};
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::time::Instant;

/// Every metric this process keeps, in one registry.
pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    latency: HistogramVec,
    refusals: IntCounter,
    deployments: IntCounterVec,
    deployment_seconds: HistogramVec,
    queue: IntGaugeVec,
    webhook_attempts: IntCounterVec,
    connections: IntCounter,
    routes_age: prometheus::Gauge,
    /// When the router's routes were last read; none: no router, or not yet.
    routes_read_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// What running replicas consume, read at each scrape once enabled
    /// (`CAPSTAN_METRICS_REPLICAS`).
    replicas: std::sync::OnceLock<ReplicaGauges>,
}

/// One gauge per figure, a series per running replica (labels `organization`, `service`,
/// `replica`).
struct ReplicaGauges {
    cpu: GaugeVec,
    cpu_limit: GaugeVec,
    memory: GaugeVec,
    memory_limit: GaugeVec,
}

const REPLICA_LABELS: [&str; 3] = ["organization", "service", "replica"];

/// Registers a metric with the registry.
fn registered<M: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    m: M,
) -> prometheus::Result<M> {
    registry.register(Box::new(m.clone()))?;
    Ok(m)
}

impl Metrics {
    /// Fails only on a metric badly named here (the tests build one).
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new_custom(Some("capstan".into()), None)?;
        let counter = |name: &str, help: &str, labels: &[&str]| {
            registered(
                &registry,
                IntCounterVec::new(Opts::new(name, help), labels)?,
            )
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: Vec<f64>| {
            let opts = HistogramOpts::new(name, help).buckets(buckets);
            registered(&registry, HistogramVec::new(opts, labels)?)
        };
        Ok(Self {
            requests: counter(
                "http_requests_total",
                "HTTP requests answered, by method, route template and status",
                &["method", "route", "status"],
            )?,
            latency: histogram(
                "http_request_duration_seconds",
                "Time to answer an HTTP request, by method and route template",
                &["method", "route"],
                prometheus::exponential_buckets(0.0005, 2.5, 12)?,
            )?,
            refusals: registered(
                &registry,
                IntCounter::new(
                    "rate_limit_refusals_total",
                    "Requests refused with 429 by the rate limit",
                )?,
            )?,
            deployments: counter(
                "deployments_finished_total",
                "Deployment requests that ended, by action and outcome",
                &["action", "status"],
            )?,
            deployment_seconds: histogram(
                "deployment_duration_seconds",
                "How long deployment requests ran, by action and outcome",
                &["action", "status"],
                prometheus::exponential_buckets(0.05, 2.0, 16)?,
            )?,
            queue: registered(
                &registry,
                IntGaugeVec::new(
                    Opts::new(
                        "deployment_queue_depth",
                        "Deployment requests waiting (QUEUED) and running (RUNNING), across the \
                         installation",
                    ),
                    &["status"],
                )?,
            )?,
            webhook_attempts: counter(
                "webhook_deliveries_total",
                "Webhook delivery attempts, by outcome: delivered, retrying (a retry is \
                 planned) or failed (given up)",
                &["outcome"],
            )?,
            connections: registered(
                &registry,
                IntCounter::new(
                    "store_connections_lent_total",
                    "Times this process used a database connection (a unit of work, a claim): \
                     the load it puts on the database, near zero when idle",
                )?,
            )?,
            routes_age: registered(
                &registry,
                prometheus::Gauge::new(
                    "router_routes_age_seconds",
                    "Seconds since this instance's router last read its routes (read every \
                     second: a growing age is a router serving stale routes); absent without \
                     a router",
                )?,
            )?,
            routes_read_at: std::sync::Mutex::new(None),
            replicas: std::sync::OnceLock::new(),
            registry,
        })
    }

    /// Adds what running replicas consume to every scrape from now on.
    pub fn read_replicas(&self) -> prometheus::Result<()> {
        if self.replicas.get().is_some() {
            return Ok(());
        }
        let gauge = |name: &str, help: &str| {
            registered(
                &self.registry,
                GaugeVec::new(Opts::new(name, help), &REPLICA_LABELS)?,
            )
        };
        let gauges = ReplicaGauges {
            cpu: gauge(
                "replica_cpu_millicores",
                "CPU a running replica uses, in thousandths of a core",
            )?,
            cpu_limit: gauge(
                "replica_cpu_limit_millicores",
                "A running replica's CPU limit, in thousandths of a core",
            )?,
            memory: gauge("replica_memory_bytes", "Memory a running replica uses")?,
            memory_limit: gauge(
                "replica_memory_limit_bytes",
                "A running replica's memory limit",
            )?,
        };
        // Enabled twice at once: the first gauges stay.
        let _ = self.replicas.set(gauges);
        Ok(())
    }

    /// Sets the replica gauges to what every running replica consumes now; the series of a
    /// replica gone since the last scrape go with it.
    #[allow(clippy::cast_precision_loss)]
    async fn read_replica_usage(&self, gauges: &ReplicaGauges, capstan: &domain::Capstan) {
        let read = match capstan.usage_of_running().await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, "what replicas consume could not be read");
                return;
            }
        };
        for g in [
            &gauges.cpu,
            &gauges.cpu_limit,
            &gauges.memory,
            &gauges.memory_limit,
        ] {
            g.reset();
        }
        for (service, replicas) in read {
            let (org, id) = (service.organization_id.to_string(), service.id.to_string());
            for r in replicas {
                let labels = [org.as_str(), id.as_str(), r.replica.as_str()];
                gauges.cpu.with_label_values(&labels).set(r.cpu_millicores);
                gauges
                    .memory
                    .with_label_values(&labels)
                    .set(r.memory_bytes as f64);
                if let Some(limit) = r.cpu_limit_millicores {
                    gauges.cpu_limit.with_label_values(&labels).set(limit);
                }
                if let Some(limit) = r.memory_limit_bytes {
                    gauges
                        .memory_limit
                        .with_label_values(&labels)
                        .set(limit as f64);
                }
            }
        }
    }

    /// A request refused by the rate limit.
    pub fn refused(&self) {
        self.refusals.inc();
    }

    /// The text a scrape reads, with the queue's depth as the store has it now.
    pub async fn render(&self, capstan: &domain::Capstan) -> String {
        if let Some(gauges) = self.replicas.get() {
            self.read_replica_usage(gauges, capstan).await;
        }
        match capstan.queue_depth().await {
            Ok(depth) => {
                self.queue
                    .with_label_values(&["QUEUED"])
                    .set(depth.queued as i64);
                self.queue
                    .with_label_values(&["RUNNING"])
                    .set(depth.running as i64);
            }
            Err(e) => tracing::warn!(error = %e, "the queue's depth could not be read"),
        }
        // The store counts; the counter catches up with it (it never goes back).
        let lent = capstan.connections_lent();
        self.connections
            .inc_by(lent.saturating_sub(self.connections.get()));
        let read_at = *self
            .routes_read_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut families = self.registry.gather();
        match read_at {
            Some(at) => self.routes_age.set(at.elapsed().as_secs_f64()),
            None => families.retain(|f| f.name() != "capstan_router_routes_age_seconds"),
        }
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&families, &mut out) {
            tracing::error!(error = %e, "metrics could not be encoded");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl domain::observe::Observer for Metrics {
    fn deployment_finished(&self, action: DeploymentAction, status: RequestStatus, seconds: f64) {
        let labels = [action.as_str(), status.as_str()];
        self.deployments.with_label_values(&labels).inc();
        self.deployment_seconds
            .with_label_values(&labels)
            .observe(seconds);
    }

    fn routes_read(&self) {
        *self
            .routes_read_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
    }

    fn webhook_attempt(&self, outcome: &'static str) {
        self.webhook_attempts.with_label_values(&[outcome]).inc();
    }
}

/// Counts every answer by its route template (bounded: never the raw path) and times it.
pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let state = req.app_data::<web::Data<AppState>>().cloned();
    // Standard methods clone without allocating.
    let method = req.method().clone();
    let started = Instant::now();
    let res = next.call(req).await?;
    if let Some(m) = state.as_ref().and_then(|s| s.metrics.as_ref()) {
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".into());
        let status = res.status();
        m.requests
            .with_label_values(&[method.as_str(), route.as_str(), status.as_str()])
            .inc();
        m.latency
            .with_label_values(&[method.as_str(), route.as_str()])
            .observe(started.elapsed().as_secs_f64());
    }
    Ok(res)
}

pub async fn scrape(state: web::Data<AppState>) -> HttpResponse {
    match &state.metrics {
        Some(m) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .body(m.render(&state.capstan).await),
        None => HttpResponse::ServiceUnavailable().finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::observe::Observer;

    #[test]
    fn every_metric_is_registered() {
        let m = Metrics::new().unwrap_or_else(|e| unreachable!("{e}"));
        m.refused();
        m.deployment_finished(DeploymentAction::Deploy, RequestStatus::Success, 1.5);
        // Enabled twice (a second call changes nothing).
        m.read_replicas().unwrap_or_else(|e| unreachable!("{e}"));
        m.read_replicas().unwrap_or_else(|e| unreachable!("{e}"));
        let labels = ["o", "s", "r"];
        let gauges = m.replicas.get().unwrap_or_else(|| unreachable!());
        gauges.memory.with_label_values(&labels).set(1.0);
        let names: Vec<String> = m
            .registry
            .gather()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        for name in [
            "capstan_replica_memory_bytes",
            "capstan_rate_limit_refusals_total",
            "capstan_deployments_finished_total",
            "capstan_deployment_duration_seconds",
            "capstan_router_routes_age_seconds",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
    }
}
