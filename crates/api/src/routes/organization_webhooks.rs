//! Organization webhooks (`/organization/{id}/webhook`) and their delivery log
//! (`/webhook/{id}/event`).

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{base, Base, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{
    EnvironmentMode, OrganizationWebhook, OrganizationWebhookEvent, OrganizationWebhookKind,
    WebhookAttempt, WebhookInput,
};
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

type St = web::Data<AppState>;
const ORG: &str = "organizationId";
const WEBHOOK: &str = "webhookId";

/// The public `OrganizationWebhookResponse`: the secret shows only as whether one is set.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookView {
    #[serde(flatten)]
    pub base: Base,
    pub kind: OrganizationWebhookKind,
    pub target_url: String,
    pub target_secret_set: bool,
    /// Left out when none was given (the description has no null here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub enabled: bool,
    pub events: Vec<OrganizationWebhookEvent>,
    pub project_names_filter: Vec<String>,
    pub environment_types_filter: Vec<EnvironmentMode>,
}

impl From<OrganizationWebhook> for WebhookView {
    fn from(h: OrganizationWebhook) -> Self {
        Self {
            base: base(h.id.0, h.created_at, h.updated_at),
            kind: h.kind,
            target_url: h.target_url,
            target_secret_set: h.target_secret.is_some(),
            description: h.description,
            enabled: h.enabled,
            events: h.events,
            project_names_filter: h.project_names_filter,
            environment_types_filter: h.environment_types_filter,
        }
    }
}

/// The public `WebhookEventResponse`: one attempt of a delivery, with the delivery it belongs
/// to (`delivery_id`, the `webhook-id` the receiver saw), its number, how long it took and,
/// when no answer came, why.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookEventView {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub kind: OrganizationWebhookKind,
    pub matched_event: OrganizationWebhookEvent,
    pub target_url_used: String,
    #[schema(value_type = Object)]
    pub request: serde_json::Value,
    /// 0 when no answer came (`error` says why).
    pub target_response_status_code: i32,
    pub target_response_body: Option<String>,
    pub delivery_id: Uuid,
    pub attempt: i32,
    pub duration_ms: i64,
    pub error: Option<String>,
}

impl From<WebhookAttempt> for WebhookEventView {
    fn from(a: WebhookAttempt) -> Self {
        Self {
            id: a.id.0,
            created_at: a.created_at,
            kind: a.kind,
            matched_event: a.matched_event,
            target_url_used: a.target_url,
            request: a.request,
            target_response_status_code: a.status_code,
            target_response_body: a.response_body,
            delivery_id: a.delivery_id.0,
            attempt: a.attempt,
            duration_ms: a.duration_ms,
            error: a.error,
        }
    }
}

pub fn routes(r: &mut Routes) {
    r.at("/organization/{organizationId}/webhook")
        .get(
            list,
            Doc::list::<WebhookView>("The organization's webhooks, oldest first"),
        )
        .post(
            create,
            Doc::create::<WebhookView, WebhookInput>(
                "Add a webhook: the deployment events it hears are POSTed to its target, signed",
            ),
        )
        .add();
    r.at("/organization/{organizationId}/webhook/{webhookId}")
        .get(get, Doc::get::<WebhookView>("An organization webhook"))
        .put(
            edit,
            Doc::edit::<WebhookView, WebhookInput>(
                "Edit a webhook (without target_secret, its secret stays)",
            ),
        )
        .delete(
            remove,
            Doc::delete("Delete a webhook, its pending deliveries and their log"),
        )
        .add();
    r.at("/organization/{organizationId}/webhook/{webhookId}/event")
        .get(
            attempts,
            Doc::list::<WebhookEventView>(
                "A webhook's delivery log: every attempt, with the request, the answer's status \
                 and the start of its body",
            ),
        )
        .add();
}

async fn list(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st.capstan.list_webhooks(&p, path_id(&req, ORG)?).await?;
    Ok(ok(Paged::from_vec(all, page, WebhookView::from)))
}

async fn create(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<WebhookInput>,
) -> ApiResult<HttpResponse> {
    let hook = st
        .capstan
        .create_webhook(&p, path_id(&req, ORG)?, input)
        .await?;
    Ok(created(WebhookView::from(hook)))
}

async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let hook = st
        .capstan
        .get_webhook(&p, path_id(&req, ORG)?, path_id(&req, WEBHOOK)?)
        .await?;
    Ok(ok(WebhookView::from(hook)))
}

async fn edit(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<WebhookInput>,
) -> ApiResult<HttpResponse> {
    let hook = st
        .capstan
        .edit_webhook(&p, path_id(&req, ORG)?, path_id(&req, WEBHOOK)?, input)
        .await?;
    Ok(ok(WebhookView::from(hook)))
}

async fn remove(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_webhook(&p, path_id(&req, ORG)?, path_id(&req, WEBHOOK)?)
        .await?;
    Ok(no_content())
}

async fn attempts(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let found = st
        .capstan
        .webhook_attempts(&p, path_id(&req, ORG)?, path_id(&req, WEBHOOK)?, page)
        .await?;
    Ok(ok(Paged::from_page(found, WebhookEventView::from)))
}
