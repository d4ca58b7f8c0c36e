//! Where services answer: the links of their public ports, as their engine published them.

use super::ok;
use crate::error::ApiResult;
use crate::extract::{path_id, service_id, Auth};
use crate::openapi::{Doc, Routes};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::{ServiceKind, ServiceState};
use domain::services::PublicLink;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

/// The public `Link`.
#[derive(Serialize, ToSchema)]
pub struct Link {
    pub service_id: Uuid,
    pub service_type: ServiceKind,
    pub url: String,
    pub internal_port: i64,
    pub external_port: i64,
    /// Whether Capstan made the address (true) or it is a custom domain (false).
    pub is_qovery_domain: bool,
    pub is_default: bool,
}

/// The public `IngressDeploymentStatusResponse`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngressDeploymentStatus {
    /// The router serving the service: its environment's.
    pub router_id: Uuid,
    pub status: ServiceState,
}

#[derive(Serialize, ToSchema)]
pub struct LinkList {
    pub results: Vec<Link>,
}

impl LinkList {
    fn of(links: Vec<PublicLink>) -> Self {
        Self {
            results: links
                .into_iter()
                .map(|l| Link {
                    service_id: l.service_id.0,
                    service_type: l.kind,
                    url: l.url,
                    internal_port: l.internal_port,
                    external_port: l.external_port,
                    is_qovery_domain: l.generated,
                    is_default: l.is_default,
                })
                .collect(),
        }
    }
}

pub fn routes(r: &mut Routes) {
    for kind in [
        ServiceKind::Application,
        ServiceKind::Container,
        ServiceKind::Helm,
    ] {
        let seg = kind.path_segment();
        r.at(format!("/{seg}/{{{seg}Id}}/link"))
            .data(kind)
            .get(
                service_links,
                Doc::get::<LinkList>(format!(
                    "Where the {seg}'s public ports answer, as its engine published them (none \
                     before it runs)"
                )),
            )
            .add();
    }
    for kind in [
        ServiceKind::Application,
        ServiceKind::Container,
        ServiceKind::Helm,
    ] {
        let seg = kind.path_segment();
        r.at(format!(
            "/{}/{{serviceId}}/ingressDeploymentStatus",
            kind.as_str()
        ))
        .data(kind)
        .get(
            ingress_status,
            Doc::get::<IngressDeploymentStatus>(format!(
                "How the {seg}'s ingress (its published ports, until a router exists) is \
                     deployed"
            )),
        )
        .add();
    }
    r.at("/environment/{environmentId}/link")
        .get(
            environment_links,
            Doc::get::<LinkList>("Where the environment's services' public ports answer"),
        )
        .add();
}

async fn service_links(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let kind = **kind;
    let links = st
        .capstan
        .service_links(&p, kind, service_id(&req, kind)?)
        .await?;
    Ok(ok(LinkList::of(links)))
}

async fn ingress_status(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let kind = **kind;
    let (router, status) = st
        .capstan
        .ingress_status(&p, kind, path_id(&req, "serviceId")?)
        .await?;
    Ok(ok(IngressDeploymentStatus {
        router_id: router.0,
        status,
    }))
}

async fn environment_links(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let links = st
        .capstan
        .environment_links(&p, path_id(&req, "environmentId")?)
        .await?;
    Ok(ok(LinkList::of(links)))
}
