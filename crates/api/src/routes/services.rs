//! Services of the six kinds: one set of handlers, told their kind by the route.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::views::{Paged, ServiceView};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ServiceKind;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

/// The id parameter is named for the kind (`applicationId`, `helmId`, ...), as clients know it.
fn service_id(
    req: &HttpRequest,
    kind: ServiceKind,
) -> Result<domain::ids::ServiceId, crate::error::ApiError> {
    path_id(req, &format!("{}Id", kind.path_segment()))
}

pub fn routes(cfg: &mut web::ServiceConfig) {
    for kind in ServiceKind::ALL {
        let segment = kind.path_segment();
        cfg.service(
            web::resource(format!("/environment/{{environmentId}}/{segment}"))
                .app_data(web::Data::new(*kind))
                .route(web::get().to(list))
                .route(web::post().to(create)),
        )
        .service(
            web::resource(format!("/{segment}/{{{segment}Id}}"))
                .app_data(web::Data::new(*kind))
                .route(web::get().to(get))
                .route(web::put().to(update))
                .route(web::delete().to(delete)),
        );
    }
}

async fn list(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let services = st
        .capstan
        .list_services(&p, path_id(&req, "environmentId")?, **kind, page)
        .await?;
    Ok(ok(Paged::from_page(services, ServiceView::from)))
}

async fn create(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let service = st
        .capstan
        .create_service(&p, path_id(&req, "environmentId")?, **kind, &body)
        .await?;
    Ok(created(ServiceView::from(service)))
}

async fn get(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let service = st
        .capstan
        .get_service(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(ServiceView::from(service)))
}

async fn update(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(body): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let service = st
        .capstan
        .update_service(&p, **kind, service_id(&req, **kind)?, &body)
        .await?;
    Ok(ok(ServiceView::from(service)))
}

async fn delete(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_service(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(no_content())
}
