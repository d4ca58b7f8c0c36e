//! A database's backups (`/database/{id}/backup`): taken, listed, removed, and restored (a
//! Capstan addition).

use super::{created, no_content, ok};
use crate::database_views::{BackupList, BackupRequest, BackupView};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};

type St = web::Data<AppState>;
const DATABASE: &str = "databaseId";
const BACKUP: &str = "backupId";

pub fn routes(r: &mut Routes) {
    r.at("/database/{databaseId}/backup")
        .get(
            list,
            Doc::get::<BackupList>("The database's backups, newest first").paged(),
        )
        .post(
            create,
            Doc::create::<BackupView, BackupRequest>(
                "Take a backup with the database type's own dump tool (it runs in the \
                 background: the listing follows it to DEPLOYED or DEPLOYMENT_ERROR)",
            ),
        )
        .add();
    r.at("/database/{databaseId}/backup/{backupId}")
        .delete(remove, Doc::delete("Remove a backup and its dump"))
        .add();
    r.at("/database/{databaseId}/backup/{backupId}/restore")
        .post(
            restore,
            Doc::delete(
                "Load a backup back into the running database (a Capstan addition); what the \
                 database holds is replaced by what the dump holds",
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
    let found = st
        .capstan
        .list_backups(&p, path_id(&req, DATABASE)?, page)
        .await?;
    Ok(ok(BackupList {
        page: found.request.page(),
        page_size: found.request.page_size(),
        results: found.items.into_iter().map(BackupView::from).collect(),
    }))
}

async fn create(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<BackupRequest>,
) -> ApiResult<HttpResponse> {
    let backup = st
        .capstan
        .create_backup(&p, path_id(&req, DATABASE)?, input.name, input.message)
        .await?;
    Ok(created(BackupView::from(backup)))
}

async fn remove(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_backup(&p, path_id(&req, DATABASE)?, path_id(&req, BACKUP)?)
        .await?;
    Ok(no_content())
}

async fn restore(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .restore_backup(&p, path_id(&req, DATABASE)?, path_id(&req, BACKUP)?)
        .await?;
    Ok(no_content())
}
