//! The event log: events written with the changes they tell of, given their stream positions
//! by one sequencer at a time, routed to the organization's webhooks, and read back by the
//! audit log and the stream.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::{DeliveryId, EventId, OrganizationId};
use crate::model::*;
use crate::ports::{Repo, Scope, Unit};
use serde_json::{json, Value};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use time::OffsetDateTime;

/// How many events one sequencer pass takes.
const SEQUENCE_BATCH: i64 = 256;

/// How many of the latest events a list of targets looks through.
const TARGETS_SCANNED: i64 = 10_000;

/// How many events a stream read takes at most.
pub const STREAM_BATCH: i64 = 200;

/// A page of the audit log, newest first, with the tokens of the pages around it.
#[derive(Debug, Clone)]
pub struct AuditPage {
    pub events: Vec<OrgEvent>,
    /// Older events exist: pass this as `continueToken`.
    pub next: Option<OffsetDateTime>,
    /// Newer events exist: pass this as `stepBackToken`.
    pub previous: Option<OffsetDateTime>,
}

/// Where an audit page starts.
#[derive(Debug, Clone, Copy)]
pub enum AuditCursor {
    Newest,
    /// The events strictly older than this (`continueToken`).
    Before(OffsetDateTime),
    /// The events strictly newer than this (`stepBackToken`).
    After(OffsetDateTime),
}

/// Event times are kept to the microsecond, what both databases store: a page token names
/// exactly the time the store compares.
pub(super) fn event_time(t: OffsetDateTime) -> OffsetDateTime {
    let micros = t.microsecond();
    t.replace_microsecond(micros).unwrap_or(t)
}

impl Capstan {
    /// Adds `event` to the log in `tx`.
    pub(super) async fn emit(&self, tx: &mut Unit, event: OrgEvent) -> DomainResult<()> {
        tx.append_event(&event).await?;
        Ok(())
    }

    /// The events of requests a cancel ended before they started.
    pub(super) async fn emit_canceled(
        &self,
        tx: &mut Unit,
        ended: &[crate::ids::DeploymentRequestId],
    ) -> DomainResult<()> {
        if ended.is_empty() {
            return Ok(());
        }
        let ids: Vec<uuid::Uuid> = ended.iter().map(|i| i.0).collect();
        let requests: Vec<DeploymentRequest> = tx
            .batch_requests(&ids)
            .await?
            .into_iter()
            .filter(|r| ended.contains(&r.id))
            .collect();
        // A cancel ends requests of one environment: its records are read once.
        let Some(first) = requests.first() else {
            return Ok(());
        };
        let place = self.place_of(tx, first.environment_id).await?;
        for r in &requests {
            self.emit(tx, deployment_event_in(r, &place, self.now()))
                .await?;
        }
        Ok(())
    }

    /// The event a deployment request's progress makes.
    pub(super) async fn deployment_event(
        &self,
        tx: &mut Unit,
        r: &DeploymentRequest,
    ) -> DomainResult<OrgEvent> {
        let place = self.place_of(tx, r.environment_id).await?;
        Ok(deployment_event_in(r, &place, self.now()))
    }

    /// An environment with its project (either may be gone: a deletion's last request).
    async fn place_of(
        &self,
        tx: &mut Unit,
        environment: crate::ids::EnvironmentId,
    ) -> DomainResult<(Option<Environment>, Option<Project>)> {
        let environment = Repo::<Environment>::get(tx, environment).await?;
        let project = match &environment {
            Some(e) => Repo::<Project>::get(tx, e.project_id).await?,
            None => None,
        };
        Ok((environment, project))
    }

    /// Gives the committed events without a position theirs, in the order they became
    /// visible, and routes those webhooks hear to them, all in one unit under the sequencer's
    /// lock: several instances may run this, and each event is routed once. Returns how many
    /// events it sequenced.
    pub async fn sequence_events(&self) -> DomainResult<usize> {
        if !self.store.has_unsequenced_events().await? {
            return Ok(0);
        }
        self.in_unit(&[Scope::EventLog], async |tx| {
            let events = tx.unsequenced_events(SEQUENCE_BATCH).await?;
            if events.is_empty() {
                return Ok(0);
            }
            let ids: Vec<EventId> = events.iter().map(|e| e.id).collect();
            tx.sequence_events(&ids).await?;
            let mut hooks: HashMap<OrganizationId, Vec<OrganizationWebhook>> = HashMap::new();
            let mut deliveries = Vec::new();
            for event in &events {
                let Some(heard) = event.deployment.as_ref().and_then(|d| d.webhook_event) else {
                    continue;
                };
                if let Entry::Vacant(slot) = hooks.entry(event.organization_id) {
                    slot.insert(
                        self.every::<OrganizationWebhook>(tx, event.organization_id)
                            .await?,
                    );
                }
                let listening = hooks.get(&event.organization_id).into_iter().flatten();
                for hook in listening
                    .filter(|h| h.hears(heard, &event.project_name, event.environment_mode))
                {
                    let id = DeliveryId::generate();
                    deliveries.push(WebhookDelivery {
                        id,
                        webhook_id: hook.id,
                        organization_id: event.organization_id,
                        event_id: event.id,
                        matched_event: heard,
                        payload: payload(hook.kind, id, heard, event),
                        state: DeliveryState::Pending,
                        attempts: 0,
                        next_attempt_at: event.created_at,
                        created_at: self.now(),
                    });
                }
            }
            tx.insert_deliveries(&deliveries).await?;
            Ok(events.len())
        })
        .await
    }

    /// A page of the organization's audit log (VIEWER may read it).
    pub async fn audit_log(
        &self,
        p: &Principal,
        org: OrganizationId,
        filter: &EventFilter,
        cursor: AuditCursor,
        page_size: u32,
    ) -> DomainResult<AuditPage> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let limit = i64::from(page_size);
        // One more than asked says whether a page follows.
        let (mut events, mut more) = match cursor {
            AuditCursor::Newest | AuditCursor::Before(_) => {
                let bound = match cursor {
                    AuditCursor::Before(t) => Some(t),
                    _ => None,
                };
                let mut found = tx
                    .audit_events(org, filter, bound, false, limit + 1)
                    .await?;
                let more = found.len() as i64 > limit;
                found.truncate(page_size as usize);
                (found, more)
            }
            AuditCursor::After(t) => {
                let mut found = tx
                    .audit_events(org, filter, Some(t), true, limit + 1)
                    .await?;
                let more = found.len() as i64 > limit;
                found.truncate(page_size as usize);
                found.reverse();
                (found, more)
            }
        };
        // A page never ends inside a run of events of one instant: the tokens are times, and
        // the next page starts strictly past the last one shown.
        if let (true, Some(edge)) = (
            more,
            match cursor {
                AuditCursor::After(_) => events.first().map(|e| e.created_at),
                _ => events.last().map(|e| e.created_at),
            },
        ) {
            let newer = matches!(cursor, AuditCursor::After(_));
            let same = tx
                .audit_events(
                    org,
                    &EventFilter {
                        from: Some(edge),
                        to: Some(edge),
                        ..filter.clone()
                    },
                    None,
                    newer,
                    i64::from(crate::pagination::MAX_PAGE_SIZE) * 10,
                )
                .await?;
            for e in same {
                if !events.iter().any(|x| x.id == e.id) {
                    if newer {
                        events.insert(0, e);
                    } else {
                        events.push(e);
                    }
                }
            }
            // The one more read may have been of that instant: look past it.
            more = !tx
                .audit_events(org, filter, Some(edge), newer, 1)
                .await?
                .is_empty();
        }
        let (older, newer) = match cursor {
            AuditCursor::Newest => (more, false),
            AuditCursor::Before(_) => (more, true),
            AuditCursor::After(_) => (true, more),
        };
        Ok(AuditPage {
            next: older.then(|| events.last().map(|e| e.created_at)).flatten(),
            previous: newer
                .then(|| events.first().map(|e| e.created_at))
                .flatten(),
            events,
        })
    }

    /// The resources the organization's audit events that pass `filter` are about, each once,
    /// most recent first (`/organization/{id}/targets`): their targets, or with `level` the
    /// projects or environments they happened in.
    pub async fn event_targets(
        &self,
        p: &Principal,
        org: OrganizationId,
        filter: &EventFilter,
        level: Option<TargetLevel>,
    ) -> DomainResult<Vec<(uuid::Uuid, String)>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let events = tx
            .audit_events(org, filter, None, false, TARGETS_SCANNED)
            .await?;
        let mut seen = std::collections::HashSet::new();
        Ok(events
            .into_iter()
            .filter_map(|e| match level {
                None => e.target_id.map(|id| (id, e.target_name)),
                Some(TargetLevel::Project) => e.project_id.map(|id| (id.0, e.project_name)),
                Some(TargetLevel::Environment) => {
                    e.environment_id.map(|id| (id.0, e.environment_name))
                }
            })
            .filter(|(id, _)| seen.insert(*id))
            .collect())
    }

    /// The organization's events after stream position `after`, in order (the stream).
    pub async fn events_after(
        &self,
        p: &Principal,
        org: OrganizationId,
        after: i64,
    ) -> DomainResult<Vec<OrgEvent>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        Ok(tx.events_after(org, after, STREAM_BATCH).await?)
    }

    /// The organization's last stream position (where a new subscriber starts).
    pub async fn last_event_position(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<i64> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        Ok(tx.last_position(org).await?)
    }
}

/// What a delivery sends: the event as JSON for STANDARD receivers, a Slack message for
/// SLACK ones.
fn payload(
    kind: OrganizationWebhookKind,
    delivery: DeliveryId,
    heard: OrganizationWebhookEvent,
    event: &OrgEvent,
) -> Value {
    let d = event.deployment.as_ref();
    match kind {
        OrganizationWebhookKind::Slack => {
            let what = match heard {
                OrganizationWebhookEvent::DeploymentStarted => "started",
                OrganizationWebhookEvent::DeploymentSuccessful => "succeeded",
                OrganizationWebhookEvent::DeploymentFailure => "failed",
                OrganizationWebhookEvent::DeploymentCancelled => "was cancelled",
            };
            let action = d.map(|d| d.action.as_str()).unwrap_or("DEPLOY");
            json!({
                "text": format!(
                    "{action} of {} in {} / {} {what}",
                    event.target_name, event.project_name, event.environment_name
                )
            })
        }
        OrganizationWebhookKind::Standard => json!({
            "id": delivery,
            "event_id": event.id,
            "type": heard,
            "timestamp": event.created_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
            "organization_id": event.organization_id,
            "project_id": event.project_id,
            "project_name": event.project_name,
            "environment_id": event.environment_id,
            "environment_name": event.environment_name,
            "environment_type": event.environment_mode,
            "service_id": event.service_id,
            "service_name": event.target_name,
            "service_type": d.map(|d| d.service_kind),
            "deployment_request_id": d.map(|d| d.request_id),
            "action": d.map(|d| d.action),
            "status": d.map(|d| d.status),
            "state": d.map(|d| d.state),
            "message": d.and_then(|d| d.reason.clone()),
            "triggered_by": event.triggered_by,
            "origin": event.origin,
        }),
    }
}

/// The event of a deployment request's progress, where it runs: its start, each state it goes
/// through, and its end (webhooks hear of the start and the end).
fn deployment_event_in(
    r: &DeploymentRequest,
    (environment, project): &(Option<Environment>, Option<Project>),
    now: OffsetDateTime,
) -> OrgEvent {
    let webhook_event = match r.status {
        RequestStatus::Success => Some(OrganizationWebhookEvent::DeploymentSuccessful),
        RequestStatus::Error => Some(OrganizationWebhookEvent::DeploymentFailure),
        RequestStatus::Canceled => Some(OrganizationWebhookEvent::DeploymentCancelled),
        RequestStatus::Running if r.steps.len() == 1 => {
            Some(OrganizationWebhookEvent::DeploymentStarted)
        }
        _ => None,
    };
    let kind = r.snapshot.kind.unwrap_or(ServiceKind::Application);
    let change = match webhook_event {
        Some(e) => format!("{} {}: {}", r.action, r.snapshot.name, e),
        None => format!("{} {}: {}", r.action, r.snapshot.name, r.state),
    };
    OrgEvent {
        id: EventId::generate(),
        organization_id: r.organization_id,
        position: None,
        created_at: event_time(now),
        event_type: EventType::of_outcome(r.action, r.snapshot.terraform_action, r.status),
        target_type: TargetType::of_service(kind),
        target_id: Some(r.service_id.0),
        target_name: r.snapshot.name.clone(),
        sub_target_type: None,
        change,
        origin: r.origin,
        triggered_by: r.requested_by.clone(),
        project_id: environment.as_ref().map(|e| e.project_id),
        project_name: project
            .as_ref()
            .map(|p| p.name.to_string())
            .unwrap_or_default(),
        environment_id: Some(r.environment_id),
        environment_name: environment
            .as_ref()
            .map(|e| e.name.to_string())
            .unwrap_or_default(),
        environment_mode: environment.as_ref().map(|e| e.mode),
        service_id: Some(r.service_id),
        user_agent: None,
        deployment: Some(DeploymentChange {
            // Clients know a deployment by the id its action answered.
            request_id: r.deployment_id(),
            service_id: r.service_id,
            service_kind: kind,
            action: r.action,
            status: r.status,
            state: r.state,
            reason: r.reason.clone(),
            webhook_event,
        }),
    }
}
