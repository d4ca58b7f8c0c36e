//! Git webhooks: a service's hook status on its provider (endpoint 15), its repair, and the
//! receiver of the provider's deliveries (public: deliveries are authenticated by signature).

use super::{accepted, ok};
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, Auth};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::git::WebhookStatus;
use domain::services::{Previewed, Received};
use serde::Serialize;

type St = web::Data<AppState>;

/// What the receiver did with a delivery.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DeliveryResult {
    /// DEPLOYMENT_QUEUED, RECORDED (a tag on the deployed commit), PREVIEW_CREATED,
    /// PREVIEW_UPDATED, PREVIEW_DELETED (a pull request's preview environment) or IGNORED.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment_request_id: Option<uuid::Uuid>,
    /// The preview environment a pull-request event acted on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<uuid::Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl DeliveryResult {
    fn of(result: &str) -> Self {
        Self {
            result: result.into(),
            deployment_request_id: None,
            environment_id: None,
            reason: None,
        }
    }

    /// What previews did, as a result.
    fn preview(done: Previewed) -> Self {
        let (result, environment) = match done {
            Previewed::Created(e) => ("PREVIEW_CREATED", e),
            Previewed::Updated(e) => ("PREVIEW_UPDATED", e),
            Previewed::Deleted(e) => ("PREVIEW_DELETED", e),
            Previewed::Ignored(why) => {
                return Self {
                    reason: Some(why),
                    ..Self::of("IGNORED")
                }
            }
        };
        Self {
            environment_id: Some(environment.0),
            ..Self::of(result)
        }
    }
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
    r.at("/service/{serviceId}/pullRequest/{number}/preview")
        .post(
            preview,
            Doc::answer(
                "Open (or update) the preview environment of a pull request of the service's \
                 repository, as the comment command does (a Capstan addition)",
                202,
                Some(Body::of::<DeliveryResult>()),
            )
            .fails_with(
                400,
                "the service has no git source, or the number is no pull request's",
            )
            .fails_with(
                409,
                "the environment's deployment rule previews nothing, a fork, or the limit",
            )
            .fails_with(502, "the git provider could not be asked"),
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
            deployment_request_id: Some(id.0),
            ..DeliveryResult::of("DEPLOYMENT_QUEUED")
        }),
        Received::Preview(done) => accepted(DeliveryResult::preview(done)),
        Received::Recorded(reason) => ok(DeliveryResult {
            reason: Some(reason),
            ..DeliveryResult::of("RECORDED")
        }),
        Received::Ignored(reason) => ok(DeliveryResult {
            reason: Some(reason),
            ..DeliveryResult::of("IGNORED")
        }),
    })
}

/// Capstan's addition: a preview of the pull request asked for, as its comment command asks.
async fn preview(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let raw = req.match_info().get("number").unwrap_or_default();
    let number: i64 = raw.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
        ApiError::bad_request(format!("number: '{raw}' is not a pull request number"))
    })?;
    let done = st
        .capstan
        .preview_pull_request(&p, path_id(&req, "serviceId")?, number)
        .await?;
    Ok(accepted(DeliveryResult::preview(done)))
}
