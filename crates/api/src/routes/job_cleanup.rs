//! Failed job executions, cleaned: of an environment's jobs, or of one.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, service_id, Auth, OptionalJson};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::ids::ServiceId;
use domain::model::ServiceKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

type St = web::Data<AppState>;

#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CleanFailedJobsRequest {
    /// Only these jobs of the environment; none: every one.
    #[serde(default)]
    pub job_ids: Option<Vec<Uuid>>,
}

#[derive(Serialize, ToSchema)]
pub struct CleanFailedJobsResponse {
    /// The jobs that had failed executions.
    pub clean_job_ids: Vec<Uuid>,
    /// The executions removed (containers, on Docker).
    pub clean_kubernetes_jobs: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct CleanFailedJobResponse {
    pub clean_kubernetes_jobs: Vec<String>,
}

pub fn routes(r: &mut Routes) {
    r.at("/environment/{environmentId}/cleanFailedJobs")
        .post(
            clean_failed_jobs,
            Doc::get::<CleanFailedJobsResponse>(
                "Remove the failed executions kept of the environment's jobs (or of job_ids)",
            )
            .optional_body(Body::of::<CleanFailedJobsRequest>()),
        )
        .add();
    r.at("/job/{jobId}/cleanFailedJob")
        .post(
            clean_failed_job,
            Doc::get::<CleanFailedJobResponse>("Remove the failed executions kept of a job"),
        )
        .add();
}

async fn clean_failed_jobs(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    OptionalJson(input): OptionalJson<CleanFailedJobsRequest>,
) -> ApiResult<HttpResponse> {
    let only: Option<Vec<ServiceId>> = input
        .job_ids
        .map(|ids| ids.into_iter().map(ServiceId).collect());
    let cleaned = st
        .capstan
        .clean_failed_jobs(&p, path_id(&req, "environmentId")?, only.as_deref())
        .await?;
    Ok(ok(CleanFailedJobsResponse {
        clean_job_ids: cleaned.job_ids.into_iter().map(|j| j.0).collect(),
        clean_kubernetes_jobs: cleaned.executions,
    }))
}

async fn clean_failed_job(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let removed = st
        .capstan
        .clean_failed_job(&p, service_id(&req, ServiceKind::Job)?)
        .await?;
    Ok(ok(CleanFailedJobResponse {
        clean_kubernetes_jobs: removed,
    }))
}
