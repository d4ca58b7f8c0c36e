//! The advanced settings of services (`/{kind}/{id}/advancedSettings`) and each kind's
//! defaults (`/default{Kind}AdvancedSettings`).

use super::{created, ok};
use crate::error::ApiResult;
use crate::extract::{service_id, Auth, JsonBody};
use crate::openapi::{Body, Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ServiceKind;
use serde::{Deserialize, Serialize};

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
    for kind in [ServiceKind::Application, ServiceKind::Container] {
        let segment = kind.path_segment();
        r.at(format!("/{segment}/{{{segment}Id}}/network"))
            .data(kind)
            .get(
                network,
                Doc::get::<Network>(format!(
                    "Whether the router keeps each client on one replica of the {segment}"
                )),
            )
            .put(
                edit_network,
                Doc::answer(
                    "Set sticky sessions (the advanced setting \
                     network.ingress.enable_sticky_session); the router applies it at once",
                    201,
                    Some(Body::of::<Network>()),
                )
                .body(Body::of::<NetworkRequest>()),
            )
            .add();
    }
}

/// The public description's `ApplicationNetwork`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Network {
    sticky_session: bool,
}

#[derive(Deserialize, utoipa::ToSchema)]
pub struct NetworkRequest {
    #[serde(default)]
    sticky_session: Option<bool>,
}

async fn network(st: St, kind: Kind, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let sticky_session = st
        .capstan
        .service_network(&p, **kind, service_id(&req, **kind)?)
        .await?;
    Ok(ok(Network { sticky_session }))
}

async fn edit_network(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(sent): JsonBody<NetworkRequest>,
) -> ApiResult<HttpResponse> {
    let sticky_session = st
        .capstan
        .edit_service_network(&p, **kind, service_id(&req, **kind)?, sent.sticky_session)
        .await?;
    Ok(created(Network { sticky_session }))
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
