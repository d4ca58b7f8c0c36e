//! The advanced settings of services (`/{kind}/{id}/advancedSettings`) and each kind's
//! defaults (`/default{Kind}AdvancedSettings`).

use super::{created, ok};
use crate::error::ApiResult;
use crate::extract::{service_id, Auth, JsonBody};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ServiceKind;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

pub fn routes(r: &mut Routes) {
    for kind in ServiceKind::ALL
        .iter()
        .filter(|k| k.advanced_settings().is_some())
    {
        let segment = kind.path_segment();
        let mut title = segment.to_string();
        title[..1].make_ascii_uppercase();
        r.at(format!("/default{title}AdvancedSettings"))
            .data(*kind)
            .get(
                defaults,
                Doc::answer(
                    format!("Every advanced setting of a {segment}, with its default"),
                    200,
                    Some(Body::of::<serde_json::Value>()),
                ),
            )
            .add();
        r.at(format!("/{segment}/{{{segment}Id}}/advancedSettings"))
            .data(*kind)
            .get(
                settings,
                Doc::answer(
                    format!("Every advanced setting of the {segment}, with its value"),
                    200,
                    Some(Body::of::<serde_json::Value>()),
                ),
            )
            .put(
                edit,
                Doc::answer(
                    "Set advanced settings (each checked, naming the key at fault; those not \
                     sent keep their value); a deployed service becomes OUT_OF_DATE",
                    201,
                    Some(Body::of::<serde_json::Value>()),
                )
                .body(Body::of::<serde_json::Value>()),
            )
            .add();
    }
}

async fn defaults(st: St, kind: Kind, Auth(p): Auth) -> ApiResult<HttpResponse> {
    Ok(ok(st.capstan.default_advanced_settings(&p, **kind)?))
}

async fn settings(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .service_advanced_settings(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(all))
}

async fn edit(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(sent): JsonBody<serde_json::Value>,
) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .edit_service_advanced_settings(&p, **kind, service_id(&req, **kind)?, &sent)
        .await?;
    Ok(created(all))
}
