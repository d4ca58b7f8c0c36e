//! Git webhooks: a service's hook status on its provider (endpoint 15), its repair, and the
//! receiver of the provider's deliveries (public: deliveries are authenticated by signature).

use super::{accepted, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::git::WebhookStatus;
use domain::services::Received;
use serde::Serialize;

type St = web::Data<AppState>;

/// What the receiver did with a delivery.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DeliveryResult {
    /// DEPLOYMENT_QUEUED, RECORDED (a tag on the deployed commit) or IGNORED.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_request_id: Option<uuid::Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

pub fn routes(r: &mut Routes) {
    r.at("/service/{serviceId}/gitWebhookStatus")
        .get(
            status,
            Doc::get::<WebhookStatus>(
                "Whether the service's webhook is set up on its git provider (400 without a git source)",
            ),
        )
        .add();
    r.at("/service/{serviceId}/gitWebhook/sync")
        .post(
            sync,
            Doc::answer(
                "Create or repair the service's webhook on its git provider",
                200,
                Some(Body::of::<WebhookStatus>()),
            ),
        )
        .add();
    r.at(domain::git::receiver_route())
        .post(
            receive,
            Doc::answer(
                "A git provider's delivery: 202 when it queues a deployment, 200 when ignored",
                200,
                Some(Body::of::<DeliveryResult>()),
            )
            .or_accepted::<DeliveryResult>()
            .public()
            .fails_with(400, "a malformed service id")
            .fails_with(401, "a missing or wrong signature, or an unknown service")
            .fails_with(413, "body too large")
            .fails_with(429, "rate limit exceeded; see Retry-After"),
        )
        .add();
}

async fn status(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .git_webhook_status(&p, path_id(&req, "serviceId")?)
        .await?;
    Ok(ok(status))
}

async fn sync(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .sync_git_webhook(&p, path_id(&req, "serviceId")?)
        .await?;
    Ok(ok(status))
}

async fn receive(st: St, req: HttpRequest, body: web::Bytes) -> ApiResult<HttpResponse> {
    let delivery = crate::extract::delivery(req.headers(), &body);
    let received = st
        .capstan
        .receive_git_delivery(path_id(&req, "serviceId")?, delivery)
        .await?;
    Ok(match received {
        Received::Deployed(id) => accepted(DeliveryResult {
            result: "DEPLOYMENT_QUEUED".into(),
            deployment_request_id: Some(id.0),
            reason: None,
        }),
        Received::Recorded(reason) => ok(DeliveryResult {
            result: "RECORDED".into(),
            deployment_request_id: None,
            reason: Some(reason),
        }),
        Received::Ignored(reason) => ok(DeliveryResult {
            result: "IGNORED".into(),
            deployment_request_id: None,
            reason: Some(reason),
        }),
    })
}
