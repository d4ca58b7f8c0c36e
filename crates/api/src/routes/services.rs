//! Services of the six kinds: one set of handlers, told their kind by the route.

use super::{accepted, created, ok, Deleted};
use crate::error::{ApiError, ApiResult};
use crate::extract::{path_id, query_value, service_id, Auth, JsonBody, Paging};
use crate::openapi::{shown_schema, Body, Doc, Query, Routes};
use crate::views::ServiceCommon;
use crate::views::{Paged, ServiceView};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::model::ServiceKind;
use domain::services::CloneServiceInput;

type St = web::Data<AppState>;
type Kind = web::Data<ServiceKind>;

/// The documented shape of a service of `kind`, and of its create and edit request.
fn shapes(kind: ServiceKind) -> (Body, Body) {
    use domain::model::*;
    let common = || Body::of::<ServiceCommon>();
    let named = || Body::of::<ServiceNameInput>();
    let runtime = || Body::of::<RuntimeInput>();
    match kind {
        ServiceKind::Application => (
            Body::all_of(vec![common(), Body::of::<ApplicationSpec>()]),
            Body::all_of(vec![named(), Body::of::<ApplicationInput>(), runtime()]),
        ),
        ServiceKind::Container => (
            Body::all_of(vec![common(), Body::of::<ContainerSpec>()]),
            Body::all_of(vec![named(), Body::of::<ContainerInput>(), runtime()]),
        ),
        ServiceKind::Database => (
            Body::all_of(vec![common(), Body::of::<DatabaseSpec>()]),
            Body::all_of(vec![named(), Body::of::<DatabaseInput>()]),
        ),
        ServiceKind::Job => (
            Body::all_of(vec![common(), Body::of::<JobSpec>()]),
            Body::all_of(vec![named(), Body::of::<JobInput>()]),
        ),
        ServiceKind::Helm => (
            Body::all_of(vec![common(), Body::of::<HelmSpec>()]),
            Body::all_of(vec![named(), Body::of::<HelmInput>()]),
        ),
        ServiceKind::Terraform => (
            Body::all_of(vec![common(), Body::of::<TerraformSpec>()]),
            Body::all_of(vec![named(), Body::of::<TerraformInput>()]),
        ),
    }
}

/// The members every service request has.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ServiceNameInput {
    pub name: String,
    pub description: Option<String>,
}

pub fn routes(r: &mut Routes) {
    for kind in ServiceKind::ALL {
        let segment = kind.path_segment();
        let (shown, request) = shapes(*kind);
        let page = Body::inline(
            utoipa::openapi::ObjectBuilder::new()
                .property(
                    "results",
                    utoipa::openapi::schema::ArrayBuilder::new().items(shown_schema(&shown)),
                )
                .property(
                    "pagination",
                    utoipa::openapi::Ref::from_schema_name("Pagination"),
                )
                .required("results")
                .required("pagination")
                .into(),
        );
        r.at(format!("/environment/{{environmentId}}/{segment}"))
            .data(*kind)
            .get(
                list,
                Doc::answer(
                    format!("List the {segment} services of an environment"),
                    200,
                    Some(page.with_components(&shown)),
                )
                .paged()
                .query(Query::boolean("toUpdate")),
            )
            .post(
                create,
                Doc::answer(format!("Create a {segment}"), 201, Some(shown.clone()))
                    .body(request.clone()),
            )
            .add();
        r.at(format!("/{segment}/{{{segment}Id}}"))
            .data(*kind)
            .get(
                get,
                Doc::answer(format!("Get a {segment}"), 200, Some(shown.clone())),
            )
            .put(
                update,
                Doc::answer(
                    format!("Edit a {segment} (the same members as creation)"),
                    200,
                    Some(shown),
                )
                .body(request),
            )
            .delete(
                delete,
                Doc::delete_or_accept::<domain::model::ServiceStatus>(format!(
                    "Delete a {segment}: 204 when never deployed, else 202 and the engine deletes it"
                )),
            )
            .add();
        r.at(format!("/{segment}/{{{segment}Id}}/clone"))
            .data(*kind)
            .post(
                clone,
                Doc::answer(
                    format!(
                        "Copy a {segment} into its environment or another of the organization \
                         (configuration, settings, variables, secrets, restrictions, domains \
                         renamed); never deployed"
                    ),
                    202,
                    Some(shapes(*kind).0),
                )
                .body(Body::of::<CloneServiceInput>()),
            )
            .add();
    }
}

async fn list(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let to_update = match query_value(&req, "toUpdate")?.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::bad_request("toUpdate: must be true or false")),
    };
    let services = st
        .capstan
        .list_services(&p, path_id(&req, "environmentId")?, **kind, to_update, page)
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

async fn clone(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<CloneServiceInput>,
) -> ApiResult<HttpResponse> {
    let copy = st
        .capstan
        .clone_service(&p, **kind, service_id(&req, **kind)?, input)
        .await?;
    Ok(accepted(ServiceView::from(copy)))
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
    Ok(st
        .capstan
        .delete_service(&p, **kind, service_id(&req, **kind)?)
        .await?
        .response())
}
