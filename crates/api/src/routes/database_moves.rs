//! Moving a database to another node of its cluster's Swarm (`/database/{id}/move`, a
//! Capstan addition): a redeploy that carries its data there.

use super::accepted;
use crate::database_views::MoveRequest;
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ServiceStatus;

pub fn routes(r: &mut Routes) {
    r.at("/database/{databaseId}/move")
        .post(
            move_database,
            Doc::answer(
                "Move a deployed database to another node of its cluster's Swarm (a Capstan \
                 addition): it stops, its data is copied to the node, and it starts there, \
                 pinned to it",
                202,
                Some(Body::of::<ServiceStatus>()),
            )
            .body(Body::of::<MoveRequest>()),
        )
        .add();
}

async fn move_database(
    st: web::Data<AppState>,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<MoveRequest>,
) -> ApiResult<HttpResponse> {
    let status = st
        .capstan
        .move_database(&p, path_id(&req, "databaseId")?, &input.node)
        .await?;
    Ok(accepted(status))
}
