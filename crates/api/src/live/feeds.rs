//! What each live endpoint sends: its first read, then what changed since the last one.

use super::messages::{ClusterHosts, ServiceLog, ServiceMetrics, ServicePods, ServiceStatus};
use crate::error::ApiError;
use crate::log_views::EnvironmentLogs;
use crate::stage_views::StatusesWithStages;
use domain::auth::Principal;
use domain::changes::Change;
use domain::ids::*;
use domain::model::{OutputQuery, OUTPUT_KEPT_LINES, OUTPUT_LISTED_LINES};
use domain::services::{Capstan, EnvironmentLog, LiveScope};
use std::collections::{HashMap, HashSet};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use uuid::Uuid;

/// One endpoint's messages.
pub(super) trait Feed {
    /// The changes after which it reads again.
    const CHANGES: &'static [Change];
    /// The messages to send now: all of the state the first time, then what changed.
    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError>;
    /// Who reads from now on (the socket's credential checked again: its role may have
    /// changed).
    fn principal(&mut self) -> &mut Principal;
    /// What else wakes it to read again, besides [`Feed::CHANGES`] (a reading of usage).
    fn woken(&self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        None
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// A whole state to send, unless it is what was sent last.
fn unless_sent(sent: &mut Option<String>, message: String) -> Vec<String> {
    if sent.as_ref() == Some(&message) {
        return Vec::new();
    }
    *sent = Some(message.clone());
    vec![message]
}

/// A query parameter's value, unless it is absent, empty or `null` (the published client's
/// "or null").
pub(super) fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.is_empty() && v != "null")
}

/// `/service/status`: the whole state each time it differs from what was sent.
pub(super) struct Status {
    principal: Principal,
    organization: OrganizationId,
    scope: LiveScope,
    sent: Option<String>,
}

impl Status {
    pub fn new(principal: Principal, organization: OrganizationId, scope: LiveScope) -> Self {
        Self {
            principal,
            organization,
            scope,
            sent: None,
        }
    }
}

impl Feed for Status {
    // Running states, and deployment states (what runs where an engine reports nothing).
    const CHANGES: &'static [Change] = &[Change::Running, Change::Sequenced];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let live = capstan
            .live_statuses(&self.principal, self.organization, self.scope)
            .await?;
        Ok(unless_sent(&mut self.sent, json(&ServiceStatus::of(&live))))
    }
}

/// `/service/pods`: one service's replicas, each time they differ.
pub(super) struct Pods {
    principal: Principal,
    service: ServiceId,
    sent: Option<String>,
}

impl Pods {
    pub fn new(principal: Principal, service: ServiceId) -> Self {
        Self {
            principal,
            service,
            sent: None,
        }
    }
}

impl Feed for Pods {
    const CHANGES: &'static [Change] = &[Change::Running, Change::Sequenced];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let live = capstan.live_service(&self.principal, self.service).await?;
        Ok(unless_sent(&mut self.sent, json(&ServicePods::of(&live))))
    }
}

/// `/service/metrics`: each reading of what the service's replicas consume, as it comes
/// (readings are shared by every socket watching the service).
pub(super) struct Metrics {
    principal: Principal,
    service: ServiceId,
    watch: Option<domain::services::UsageWatch>,
    /// The rights it was last admitted with.
    admitted: Option<Vec<(OrganizationId, domain::auth::Role)>>,
}

impl Metrics {
    pub fn new(principal: Principal, service: ServiceId) -> Self {
        Self {
            principal,
            service,
            watch: None,
            admitted: None,
        }
    }
}

impl Feed for Metrics {
    // Only to read the principal's rights again; readings wake it themselves.
    const CHANGES: &'static [Change] = &[];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    fn woken(&self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        use futures_util::FutureExt;
        self.watch.as_ref().map(|w| w.next_reading().boxed())
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        // Admitted again only when the principal's rights changed: a right lost ends the
        // socket, and a reading alone reads nothing of the store.
        if self.admitted.as_ref() != Some(&self.principal.memberships) {
            if self.watch.is_some() {
                capstan.live_service(&self.principal, self.service).await?;
            }
            self.admitted = Some(self.principal.memberships.clone());
        }
        let watch = match &mut self.watch {
            Some(watch) => watch,
            None => self
                .watch
                .insert(capstan.watch_usage(&self.principal, self.service).await?),
        };
        Ok(watch
            .latest()
            .map(|sample| json(&ServiceMetrics::of(self.service, &sample)))
            .into_iter()
            .collect())
    }
}

/// How often a cluster's hosts are looked at while a socket watches them.
const HOSTS_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);

/// `/cluster/status`: the cluster's hosts and what each holds, looked at every
/// [`HOSTS_PERIOD`] and sent when they differ.
pub(super) struct ClusterStatus {
    principal: Principal,
    organization: OrganizationId,
    cluster: ClusterId,
    sent: Option<String>,
}

impl ClusterStatus {
    pub fn new(principal: Principal, organization: OrganizationId, cluster: ClusterId) -> Self {
        Self {
            principal,
            organization,
            cluster,
            sent: None,
        }
    }
}

impl Feed for ClusterStatus {
    const CHANGES: &'static [Change] = &[];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    fn woken(&self) -> Option<futures_util::future::BoxFuture<'static, ()>> {
        use futures_util::FutureExt;
        Some(tokio::time::sleep(HOSTS_PERIOD).boxed())
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let (cluster, hosts) = capstan
            .cluster_hosts(&self.principal, self.organization, self.cluster)
            .await?;
        Ok(unless_sent(
            &mut self.sent,
            json(&ClusterHosts::of(&cluster, hosts)),
        ))
    }
}

/// `/deployment/status`: the environment's statuses with its stages, each time they differ.
pub(super) struct DeploymentStatus {
    principal: Principal,
    environment: EnvironmentId,
    sent: Option<String>,
}

impl DeploymentStatus {
    pub fn new(principal: Principal, environment: EnvironmentId) -> Self {
        Self {
            principal,
            environment,
            sent: None,
        }
    }
}

impl Feed for DeploymentStatus {
    const CHANGES: &'static [Change] = &[Change::Sequenced, Change::Queue];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let staged = capstan
            .environment_statuses_with_stages(&self.principal, self.environment)
            .await?;
        Ok(unless_sent(
            &mut self.sent,
            json(&StatusesWithStages::of(staged)),
        ))
    }
}

/// `/deployment/logs`: each line of the environment's deployments (of one request, with
/// `version`) once.
pub(super) struct DeploymentLogs {
    principal: Principal,
    environment: EnvironmentId,
    version: Option<Uuid>,
    /// The last position sent of each request.
    sent: HashMap<DeploymentRequestId, i64>,
}

impl DeploymentLogs {
    pub fn new(principal: Principal, environment: EnvironmentId, version: Option<Uuid>) -> Self {
        Self {
            principal,
            environment,
            version,
            sent: HashMap::new(),
        }
    }
}

impl Feed for DeploymentLogs {
    const CHANGES: &'static [Change] = &[Change::Logs];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let log = capstan
            .environment_logs(&self.principal, self.environment)
            .await?;
        let mut fresh = Vec::new();
        for named in log.lines {
            let line = &named.line;
            if self.version.is_some_and(|v| v != line.request_id.0) {
                continue;
            }
            let last = self.sent.entry(line.request_id).or_insert(i64::MIN);
            if line.position > *last {
                *last = line.position;
                fresh.push(named);
            }
        }
        let lines = EnvironmentLogs::all(EnvironmentLog {
            lines: fresh,
            ..log
        });
        Ok(lines.iter().map(json).collect())
    }
}

/// What a `/service/logs` reader asked for, as its query parameters came.
pub(super) struct LogFilter {
    pub pod_name: Option<String>,
    pub deployment_id: Option<Uuid>,
    pub query: Option<String>,
    /// Where to start: Unix milliseconds, or an RFC 3339 time.
    pub start: Option<String>,
    pub limit: Option<String>,
}

/// How far back a new line may be placed and still be sent: lines of several replicas reach
/// the store in batches, not strictly in time order (a line kept later than this after the
/// newest one sent is not sent; `GET /{kind}/{id}/log` has it).
const LATE_NANOS: i64 = 30 * 1_000_000_000;

/// `/service/logs`: each line the service's replicas print, once.
pub(super) struct ServiceLogs {
    principal: Principal,
    service: ServiceId,
    query: OutputQuery,
    containing: Option<String>,
    /// How many lines the first read sends (later reads send every new one).
    limit: i64,
    /// The lines sent within the last [`LATE_NANOS`] of the newest one.
    seen: HashSet<(String, i64)>,
    newest: Option<i64>,
}

impl ServiceLogs {
    pub fn new(principal: Principal, service: ServiceId, f: &LogFilter) -> Result<Self, ApiError> {
        let limit = match given(f.limit.clone()).as_deref() {
            None => OUTPUT_LISTED_LINES,
            Some(raw) => raw
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=OUTPUT_LISTED_LINES).contains(n))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "limit: '{raw}' must be a number from 1 to {OUTPUT_LISTED_LINES}"
                    ))
                })?,
        };
        let since = match given(f.start.clone()).as_deref() {
            None => None,
            Some(raw) => Some(start_of(raw).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "start: '{raw}' is not a time (Unix milliseconds, or RFC 3339)"
                ))
            })?),
        };
        Ok(Self {
            principal,
            service,
            query: OutputQuery {
                after: None,
                replica: given(f.pod_name.clone()),
                request: f.deployment_id.map(DeploymentRequestId),
                since,
            },
            containing: given(f.query.clone()),
            limit,
            seen: HashSet::new(),
            newest: None,
        })
    }
}

fn start_of(raw: &str) -> Option<OffsetDateTime> {
    if let Ok(ms) = raw.parse::<i64>() {
        return OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok();
    }
    OffsetDateTime::parse(raw, &Rfc3339).ok()
}

impl Feed for ServiceLogs {
    const CHANGES: &'static [Change] = &[Change::Output];

    fn principal(&mut self) -> &mut Principal {
        &mut self.principal
    }

    async fn next(&mut self, capstan: &Capstan) -> Result<Vec<String>, ApiError> {
        let query = OutputQuery {
            after: self.newest.map(|n| n.saturating_sub(LATE_NANOS)),
            ..self.query.clone()
        };
        let lines = capstan
            .follow_output(
                &self.principal,
                self.service,
                &query,
                self.containing.as_deref(),
                if self.newest.is_none() {
                    self.limit
                } else {
                    OUTPUT_KEPT_LINES
                },
            )
            .await?;
        let mut out = Vec::new();
        for line in lines {
            if !self.seen.insert((line.replica.clone(), line.position)) {
                continue;
            }
            self.newest = Some(self.newest.map_or(line.position, |n| n.max(line.position)));
            out.push(json(&ServiceLog::from(line)));
        }
        if let Some(newest) = self.newest {
            let floor = newest.saturating_sub(LATE_NANOS);
            self.seen.retain(|(_, p)| *p > floor);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_milliseconds_or_a_time() {
        let t = start_of("1795773600000").unwrap();
        assert_eq!(t.unix_timestamp(), 1_795_773_600);
        assert_eq!(start_of("2026-11-27T10:00:00Z"), Some(t));
        assert_eq!(start_of("yesterday"), None);
    }
}
