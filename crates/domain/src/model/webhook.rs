//! Organization webhooks: where an organization's deployment events are sent, and the
//! deliveries and attempts that carry them there.

use super::deployment_rule::matches_wildcard;
use super::{EnvironmentMode, Record};
use crate::error::DomainError;
use crate::ids::*;
use crate::secret::Secret;
use serde::Deserialize;
use time::OffsetDateTime;

string_enum!(
    /// The public `OrganizationWebhookKindEnum`: SLACK receivers get Slack's message shape.
    OrganizationWebhookKind {
        Standard => "STANDARD",
        Slack => "SLACK",
    }
);

string_enum!(
    /// The public `OrganizationWebhookEventEnum`.
    OrganizationWebhookEvent {
        DeploymentStarted => "DEPLOYMENT_STARTED",
        DeploymentCancelled => "DEPLOYMENT_CANCELLED",
        DeploymentFailure => "DEPLOYMENT_FAILURE",
        DeploymentSuccessful => "DEPLOYMENT_SUCCESSFUL",
    }
);

#[derive(Debug, Clone)]
pub struct OrganizationWebhook {
    pub id: WebhookId,
    pub organization_id: OrganizationId,
    pub kind: OrganizationWebhookKind,
    pub target_url: String,
    /// Sent as `Qovery-Signature` and the key of the Standard Webhooks signature; never shown.
    pub target_secret: Option<Secret>,
    pub description: Option<String>,
    pub enabled: bool,
    pub events: Vec<OrganizationWebhookEvent>,
    pub project_names_filter: Vec<String>,
    pub environment_types_filter: Vec<EnvironmentMode>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for OrganizationWebhook {
    type Id = WebhookId;
    type Parent = OrganizationId;
    const KIND: &'static str = "webhook";
    fn id(&self) -> WebhookId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

impl OrganizationWebhook {
    /// Whether this webhook hears `event` of an environment of `mode` in project `project`:
    /// enabled, subscribed, and passing both filters (an empty filter passes everything).
    pub fn hears(
        &self,
        event: OrganizationWebhookEvent,
        project: &str,
        mode: Option<EnvironmentMode>,
    ) -> bool {
        self.enabled
            && self.events.contains(&event)
            && (self.project_names_filter.is_empty()
                || self
                    .project_names_filter
                    .iter()
                    .any(|w| matches_wildcard(w, project)))
            && (self.environment_types_filter.is_empty()
                || mode.is_some_and(|m| self.environment_types_filter.contains(&m)))
    }
}

/// The public `OrganizationWebhookCreateRequest` (create and edit alike). Its `Debug` leaves
/// the secret out.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Deserialize)]
pub struct WebhookInput {
    pub kind: OrganizationWebhookKind,
    pub target_url: String,
    /// Absent on an edit: the secret stays as it is. Empty: no secret.
    #[serde(default)]
    pub target_secret: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    pub events: Vec<OrganizationWebhookEvent>,
    #[serde(default)]
    pub project_names_filter: Option<Vec<String>>,
    #[serde(default)]
    pub environment_types_filter: Option<Vec<EnvironmentMode>>,
}

impl std::fmt::Debug for WebhookInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookInput")
            .field("kind", &self.kind)
            .field("target_url", &self.target_url)
            .field("target_secret", &self.target_secret.as_ref().map(|_| "***"))
            .field("enabled", &self.enabled)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl WebhookInput {
    /// Checks the request: an http(s) URL without credentials, at least one event, filters
    /// without empty names; repeats are dropped.
    pub fn check(&mut self) -> Result<(), DomainError> {
        let url = crate::validate::http_url("target_url", &self.target_url)?;
        self.target_url = url.to_string();
        if self.target_url.len() > 2048 {
            return Err(DomainError::invalid(
                "target_url",
                "must be at most 2048 characters",
            ));
        }
        if self.events.is_empty() {
            return Err(DomainError::invalid(
                "events",
                "must name at least one event",
            ));
        }
        dedup(&mut self.events);
        if let Some(names) = &mut self.project_names_filter {
            for (i, n) in names.iter_mut().enumerate() {
                *n = n.trim().to_string();
                if n.is_empty() || n.len() > 255 {
                    return Err(DomainError::invalid(
                        format!("project_names_filter[{i}]"),
                        "must be a name or wildcard of 1 to 255 characters",
                    ));
                }
            }
            dedup(names);
        }
        if let Some(modes) = &mut self.environment_types_filter {
            dedup(modes);
        }
        if let Some(d) = &self.description {
            if d.len() > 1024 {
                return Err(DomainError::invalid(
                    "description",
                    "must be at most 1024 characters",
                ));
            }
        }
        if let Some(s) = &self.target_secret {
            if s.len() > 1024 {
                return Err(DomainError::invalid(
                    "target_secret",
                    "must be at most 1024 characters",
                ));
            }
        }
        Ok(())
    }
}

fn dedup<T: PartialEq + Clone>(items: &mut Vec<T>) {
    let mut seen: Vec<T> = Vec::with_capacity(items.len());
    items.retain(|i| {
        if seen.contains(i) {
            false
        } else {
            seen.push(i.clone());
            true
        }
    });
}

string_enum!(
    /// Where a delivery is: waiting for its next attempt, delivered (a 2xx), or given up.
    DeliveryState {
        Pending => "PENDING",
        Delivered => "DELIVERED",
        Failed => "FAILED",
    }
);

/// One event on its way to one webhook. Its id is the `webhook-id` every attempt carries, so
/// a receiver drops what it already has.
#[derive(Debug, Clone)]
pub struct WebhookDelivery {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub organization_id: OrganizationId,
    pub event_id: EventId,
    pub matched_event: OrganizationWebhookEvent,
    /// The body every attempt sends (JSON).
    pub payload: serde_json::Value,
    pub state: DeliveryState,
    pub attempts: i32,
    pub next_attempt_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
}

/// One attempt of a delivery, as the delivery log (`/webhook/{id}/event`) shows it.
#[derive(Debug, Clone)]
pub struct WebhookAttempt {
    pub id: AttemptId,
    pub delivery_id: DeliveryId,
    pub webhook_id: WebhookId,
    pub organization_id: OrganizationId,
    pub created_at: OffsetDateTime,
    pub kind: OrganizationWebhookKind,
    pub matched_event: OrganizationWebhookEvent,
    pub target_url: String,
    pub request: serde_json::Value,
    /// 0 when no answer came (the error says why).
    pub status_code: i32,
    /// The start of the answer's body (at most [`RESPONSE_BODY_CAP`] bytes).
    pub response_body: Option<String>,
    pub error: Option<String>,
    pub duration_ms: i64,
    pub attempt: i32,
}

impl Record for WebhookAttempt {
    type Id = AttemptId;
    type Parent = WebhookId;
    const KIND: &'static str = "webhook event";
    fn id(&self) -> AttemptId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// How much of a receiver's answer the delivery log keeps.
pub const RESPONSE_BODY_CAP: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> OrganizationWebhook {
        OrganizationWebhook {
            id: WebhookId::generate(),
            organization_id: OrganizationId::generate(),
            kind: OrganizationWebhookKind::Standard,
            target_url: "https://hooks.example.com".into(),
            target_secret: None,
            description: None,
            enabled: true,
            events: vec![OrganizationWebhookEvent::DeploymentSuccessful],
            project_names_filter: vec!["shop*".into(), "b?lling".into()],
            environment_types_filter: vec![EnvironmentMode::Production],
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_webhook_hears_its_events_of_its_projects_and_modes() {
        use OrganizationWebhookEvent::*;
        let prod = Some(EnvironmentMode::Production);
        let h = hook();
        assert!(h.hears(DeploymentSuccessful, "Shop-EU", prod));
        assert!(h.hears(DeploymentSuccessful, "billing", prod));
        assert!(!h.hears(DeploymentStarted, "shop", prod), "not subscribed");
        assert!(
            !h.hears(DeploymentSuccessful, "blog", prod),
            "another project"
        );
        assert!(!h.hears(
            DeploymentSuccessful,
            "shop",
            Some(EnvironmentMode::Development)
        ));
        assert!(!h.hears(DeploymentSuccessful, "shop", None), "mode unknown");
        let open = OrganizationWebhook {
            project_names_filter: vec![],
            environment_types_filter: vec![],
            ..hook()
        };
        assert!(open.hears(DeploymentSuccessful, "anything", None));
        let off = OrganizationWebhook {
            enabled: false,
            ..hook()
        };
        assert!(!off.hears(DeploymentSuccessful, "shop", prod));
    }

    #[test]
    fn a_webhook_request_is_checked_and_its_secret_kept_out_of_debug() {
        let mut input: WebhookInput = serde_json::from_value(serde_json::json!({
            "kind": "STANDARD",
            "target_url": " https://hooks.example.com/in ",
            "target_secret": "s3cr3t-value",
            "events": ["DEPLOYMENT_STARTED", "DEPLOYMENT_STARTED"],
            "project_names_filter": [" shop* ", "shop*"]
        }))
        .unwrap();
        input.check().unwrap();
        assert_eq!(input.target_url, "https://hooks.example.com/in");
        assert_eq!(input.events, [OrganizationWebhookEvent::DeploymentStarted]);
        assert_eq!(
            input.project_names_filter.as_deref(),
            Some(&["shop*".to_string()][..])
        );
        assert!(!format!("{input:?}").contains("s3cr3t"));
        input.events.clear();
        assert!(input.check().is_err());
    }
}
