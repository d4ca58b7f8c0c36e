//! Organization webhooks (`/organization/{id}/webhook`), their delivery log, and the senders
//! that work through the deliveries the sequencer routes to them.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::{AttemptId, OrganizationId, WebhookId};
use crate::model::*;
use crate::outbound::{standard_signature, Answer, Outgoing, RetryPolicy, WebhookSender};
use crate::pagination::{Page, PageRequest};
use crate::ports::{Reference, Repo, Scope};
use crate::secret::Secret;
use std::sync::Arc;
use time::Duration;

/// What delivering webhooks needs: the sender and how it retries.
#[derive(Clone)]
pub struct Outbound {
    pub sender: Arc<dyn WebhookSender>,
    pub retry: RetryPolicy,
    /// How many deliveries one pass sends at once.
    pub batch: i64,
    /// How long one attempt may take (the sender's timeout): claims outlast it.
    pub timeout: std::time::Duration,
}

/// What one pass of a webhook sender did.
#[derive(Debug, Default)]
pub struct DeliveryPass {
    /// Deliveries attempted.
    pub sent: usize,
    /// When none was sent: when the first waiting delivery may be sent (none: none waits).
    pub next_due: Option<time::OffsetDateTime>,
}

impl Capstan {
    /// Sends webhook deliveries through `outbound`.
    pub fn with_outbound(mut self, outbound: Outbound) -> Self {
        self.outbound = Some(Arc::new(outbound));
        self
    }

    pub async fn list_webhooks(
        &self,
        p: &Principal,
        org: OrganizationId,
    ) -> DomainResult<Vec<OrganizationWebhook>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, org, Action::Read).await?;
        let mut hooks = self.every::<OrganizationWebhook>(tx, org).await?;
        hooks.sort_by_key(|h| (h.created_at, h.id));
        Ok(hooks)
    }

    pub async fn get_webhook(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: WebhookId,
    ) -> DomainResult<OrganizationWebhook> {
        let mut unit = self.reading().await?;
        self.load_in_org(&mut *unit, p, org, id, Action::Read).await
    }

    pub async fn create_webhook(
        &self,
        p: &Principal,
        org: OrganizationId,
        mut input: WebhookInput,
    ) -> DomainResult<OrganizationWebhook> {
        input.check()?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            self.load::<Organization>(tx, p, org, Action::Administer)
                .await?;
            let now = self.now();
            let hook = OrganizationWebhook {
                id: WebhookId::generate(),
                organization_id: org,
                kind: input.kind,
                target_url: input.target_url,
                target_secret: input
                    .target_secret
                    .filter(|s| !s.is_empty())
                    .map(Secret::new),
                description: input.description,
                enabled: input.enabled.unwrap_or(true),
                events: input.events,
                project_names_filter: input.project_names_filter.unwrap_or_default(),
                environment_types_filter: input.environment_types_filter.unwrap_or_default(),
                created_at: now,
                updated_at: now,
            };
            Repo::<OrganizationWebhook>::insert(tx, &hook).await?;
            self.audit(tx, p, EventType::Create, &hook).await?;
            Ok(hook)
        })
        .await
    }

    /// Replaces a webhook's settings; a request without `target_secret` keeps the secret, as
    /// long as it does not change `target_url`.
    pub async fn edit_webhook(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: WebhookId,
        mut input: WebhookInput,
    ) -> DomainResult<OrganizationWebhook> {
        input.check()?;
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let mut hook: OrganizationWebhook =
                self.load_in_org(tx, p, org, id, Action::Administer).await?;
            // Sending the stored secret to a new address takes the secret.
            if input.target_url != hook.target_url
                && hook.target_secret.is_some()
                && input.target_secret.is_none()
            {
                return Err(crate::DomainError::invalid(
                    "target_secret",
                    "is required when target_url changes: the stored secret is never sent to a new address",
                ));
            }
            hook.kind = input.kind;
            hook.target_url = input.target_url;
            if let Some(secret) = input.target_secret {
                hook.target_secret = Some(secret).filter(|s| !s.is_empty()).map(Secret::new);
            }
            hook.description = input.description;
            hook.enabled = input.enabled.unwrap_or(hook.enabled);
            hook.events = input.events;
            hook.project_names_filter = input.project_names_filter.unwrap_or_default();
            hook.environment_types_filter = input.environment_types_filter.unwrap_or_default();
            hook.updated_at = self.now();
            Repo::<OrganizationWebhook>::update(tx, &hook).await?;
            self.audit(tx, p, EventType::Update, &hook).await?;
            Ok(hook)
        })
        .await
    }

    /// Deletes a webhook with its deliveries and their log.
    pub async fn delete_webhook(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: WebhookId,
    ) -> DomainResult<()> {
        self.in_unit(&[Scope::Organization(org)], async |tx| {
            let hook: OrganizationWebhook =
                self.load_in_org(tx, p, org, id, Action::Administer).await?;
            self.audit(tx, p, EventType::Delete, &hook).await?;
            self.delete::<OrganizationWebhook>(tx, id, "").await?;
            Ok(())
        })
        .await
    }

    /// A webhook's delivery log, oldest attempt first.
    pub async fn webhook_attempts(
        &self,
        p: &Principal,
        org: OrganizationId,
        id: WebhookId,
        page: PageRequest,
    ) -> DomainResult<Page<WebhookAttempt>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        self.load_in_org::<OrganizationWebhook>(tx, p, org, id, Action::Read)
            .await?;
        Ok(Repo::<WebhookAttempt>::list(tx, id, page).await?)
    }

    /// Claims the deliveries due and sends them, all at once; answers how many it attempted,
    /// or, when none was due, when one next falls due. Another sender's claim is left alone; a
    /// sender that dies leaves its claims to lapse, and they are sent again (receivers drop
    /// repeats by `webhook-id`).
    pub async fn deliver_due(&self, worker: &str) -> DomainResult<DeliveryPass> {
        let Some(outbound) = self.outbound.clone() else {
            // Nothing is ever sent from here.
            return Ok(DeliveryPass::default());
        };
        let now = self.now();
        // A read first keeps idle senders off the writer (SQLite) and out of row locks
        // (PostgreSQL), and tells them how long to sleep.
        let next_due = self.store.next_delivery_due(now).await?;
        if next_due.is_none_or(|at| at > now) {
            return Ok(DeliveryPass { sent: 0, next_due });
        }
        // Long enough for every request of the batch to time out, with room to record it:
        // a claim that ran out mid-send would let another sender send it too.
        let lease = Duration::try_from(outbound.timeout * 2).unwrap_or(Duration::MINUTE)
            + Duration::seconds(30);
        let claimed = self
            .store
            .claim_deliveries(worker, now, now + lease, outbound.batch)
            .await?;
        if claimed.is_empty() {
            // Another sender was first.
            return Ok(DeliveryPass { sent: 0, next_due });
        }
        let hooks = {
            let mut unit = self.reading().await?;
            self.by_id::<OrganizationWebhook>(&mut *unit, claimed.iter().map(|d| d.webhook_id))
                .await?
        };
        let count = claimed.len();
        let attempts = claimed.into_iter().map(|d| {
            let hook = hooks.get(&d.webhook_id).cloned();
            let outbound = outbound.clone();
            async move { self.attempt(&outbound, worker, d, hook).await }
        });
        for result in futures_util::future::join_all(attempts).await {
            result?;
        }
        Ok(DeliveryPass {
            sent: count,
            next_due: None,
        })
    }

    /// Sends one delivery and records the attempt and where the delivery is now, in one unit.
    async fn attempt(
        &self,
        outbound: &Outbound,
        worker: &str,
        mut delivery: WebhookDelivery,
        hook: Option<OrganizationWebhook>,
    ) -> DomainResult<()> {
        let Some(hook) = hook.filter(|h| h.enabled) else {
            // Deleted (its deliveries go with it) or turned off since: nothing is sent.
            delivery.state = DeliveryState::Failed;
            return self
                .in_unit(&[], async |tx| {
                    tx.settle_delivery(&delivery, worker).await?;
                    Ok(())
                })
                .await;
        };
        let body = serde_json::to_vec(&delivery.payload)
            .map_err(|e| crate::error::DomainError::Internal(e.to_string()))?;
        let sent_at = self.now();
        let request = signed(&hook, &delivery, sent_at.unix_timestamp(), body);
        let answer: Answer = outbound.sender.send(request).await;
        let now = self.now();
        delivery.attempts += 1;
        let outcome = if answer.delivered() {
            delivery.state = DeliveryState::Delivered;
            "delivered"
        } else {
            let wait = outbound
                .retry
                .wait_after(delivery.attempts, rand::random::<f64>());
            let next = now + wait;
            let give_up = delivery.created_at + outbound.retry.give_up_after;
            if next > give_up {
                delivery.state = DeliveryState::Failed;
                "failed"
            } else {
                delivery.next_attempt_at = next;
                "retrying"
            }
        };
        let attempt = WebhookAttempt {
            id: AttemptId::generate(),
            delivery_id: delivery.id,
            webhook_id: hook.id,
            organization_id: hook.organization_id,
            created_at: sent_at,
            kind: hook.kind,
            matched_event: delivery.matched_event,
            target_url: hook.target_url.clone(),
            request: delivery.payload.clone(),
            status_code: answer.status.map(i32::from).unwrap_or(0),
            response_body: answer.body.map(|b| cap(b, RESPONSE_BODY_CAP)),
            error: answer.error,
            duration_ms: i64::try_from(answer.duration.as_millis()).unwrap_or(i64::MAX),
            attempt: delivery.attempts,
        };
        self.in_unit(&[], async |tx| {
            // Deleted while it was being sent: its log went with it.
            tx.share(Scope::Referenced(Reference::Webhook(hook.id)))
                .await?;
            if Repo::<OrganizationWebhook>::get(tx, hook.id)
                .await?
                .is_some()
            {
                Repo::<WebhookAttempt>::insert(tx, &attempt).await?;
                tx.settle_delivery(&delivery, worker).await?;
            }
            Ok(())
        })
        .await?;
        self.observer.webhook_attempt(outcome);
        Ok(())
    }
}

/// The request of one attempt, signed both ways when the webhook has a secret: the public
/// API's `Qovery-Signature` (the secret itself, as existing receivers expect) and Standard
/// Webhooks' `webhook-signature` (an HMAC, so the secret does not travel).
fn signed(
    hook: &OrganizationWebhook,
    delivery: &WebhookDelivery,
    timestamp: i64,
    body: Vec<u8>,
) -> Outgoing {
    let id = delivery.id.to_string();
    let mut headers = vec![
        ("content-type", "application/json".to_string()),
        ("webhook-id", id.clone()),
        ("webhook-timestamp", timestamp.to_string()),
    ];
    if let Some(secret) = &hook.target_secret {
        headers.push((
            "webhook-signature",
            standard_signature(secret.expose(), &id, timestamp, &body),
        ));
        headers.push(("qovery-signature", secret.expose().to_string()));
    }
    Outgoing {
        url: hook.target_url.clone(),
        headers,
        body,
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cap(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}
