//! What deployments wrote: an environment's deployment log, in the public API's two shapes.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, Auth};
use crate::log_views::{EnvironmentLogV1List, EnvironmentLogs};
use crate::openapi::{Doc, Query, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};

type St = web::Data<AppState>;

pub fn routes(r: &mut Routes) {
    r.at("/environment/{environmentId}/logs")
        .get(
            environment_logs,
            Doc::array::<EnvironmentLogs>(
                "The last 1000 lines the environment's deployments wrote, oldest first",
            )
            // Accepted and ignored: one version of the log is kept.
            .query(Query::string("version")),
        )
        .add();
    r.at("/environment/{environmentId}/log")
        .get(
            environment_log,
            Doc::get::<EnvironmentLogV1List>(
                "The last 1000 lines the environment's deployments wrote, oldest first (v1)",
            ),
        )
        .add();
}

async fn environment_logs(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let log = st
        .capstan
        .environment_logs(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(EnvironmentLogs::all(log)))
}

async fn environment_log(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let log = st
        .capstan
        .environment_logs(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(EnvironmentLogV1List::of(log)))
}
