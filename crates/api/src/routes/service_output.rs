//! What services' workloads print: the newest lines of a service's output, masked.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{service_id, Auth};
use crate::openapi::{Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{OutputLine, ServiceKind};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

/// The public `Log`: one line a replica printed.
#[derive(Serialize, ToSchema)]
pub struct Log {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub message: String,
    /// The replica (container) that printed it.
    pub pod_name: String,
    /// What ran: the image tag.
    pub version: String,
}

/// The public `LogResponseList`.
#[derive(Serialize, ToSchema)]
pub struct LogResponseList {
    pub results: Vec<Log>,
}

impl From<OutputLine> for Log {
    fn from(l: OutputLine) -> Self {
        Self {
            id: l.id,
            created_at: l.at,
            message: l.message,
            pod_name: l.replica,
            version: l.version,
        }
    }
}

pub fn routes(r: &mut Routes) {
    for kind in [
        ServiceKind::Application,
        ServiceKind::Container,
        ServiceKind::Job,
    ] {
        let seg = kind.path_segment();
        r.at(format!("/{seg}/{{{seg}Id}}/log"))
            .data(kind)
            .get(
                service_output,
                Doc::get::<LogResponseList>(format!(
                    "The newest 1000 lines the {seg}'s replicas printed, oldest first, secret \
                     values masked (each service keeps its newest 5000)"
                )),
            )
            .add();
    }
}

async fn service_output(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let kind = **kind;
    let lines = st
        .capstan
        .service_output(&p, kind, service_id(&req, kind)?)
        .await?;
    Ok(ok(LogResponseList {
        results: lines.into_iter().map(Log::from).collect(),
    }))
}
