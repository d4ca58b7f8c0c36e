//! Labels and annotations groups of an organization (`/organization/{id}/labelsGroups`,
//! `/annotationsGroups`): one set of handlers for both kinds.

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Doc, Routes};
use crate::views::{GroupView, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::error::DomainResult;
use domain::model::{
    AnnotationsGroupInput, GroupDraft, GroupKind, JobType, LabelsGroupInput, ServiceSpec,
};
use domain::services::AssociatedService;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

type St = web::Data<AppState>;
const ORG: &str = "organizationId";

/// A service carrying a group, and where it lives.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AssociatedItemView {
    pub item_id: Uuid,
    pub item_name: String,
    /// APPLICATION, CONTAINER, DATABASE, and CRON or LIFECYCLE for jobs.
    pub item_type: String,
    pub environment_id: Uuid,
    pub environment_name: String,
    pub project_id: Uuid,
    pub project_name: String,
}

impl From<AssociatedService> for AssociatedItemView {
    fn from(a: AssociatedService) -> Self {
        let item_type = match &a.service.spec {
            ServiceSpec::Job(j) if j.job_type == JobType::Cron => "CRON".to_string(),
            ServiceSpec::Job(_) => "LIFECYCLE".to_string(),
            other => other.kind().as_str().to_string(),
        };
        Self {
            item_id: a.service.id.0,
            item_name: a.service.name.into(),
            item_type,
            environment_id: a.environment_id.0,
            environment_name: a.environment_name,
            project_id: a.project_id.0,
            project_name: a.project_name,
        }
    }
}

/// A group request body of either kind.
trait GroupInput: DeserializeOwned + utoipa::ToSchema + 'static {
    fn draft(self) -> DomainResult<GroupDraft>;
}

impl GroupInput for LabelsGroupInput {
    fn draft(self) -> DomainResult<GroupDraft> {
        self.validate()
    }
}

impl GroupInput for AnnotationsGroupInput {
    fn draft(self) -> DomainResult<GroupDraft> {
        self.validate()
    }
}

pub fn routes(r: &mut Routes) {
    kind_routes::<LabelsGroupInput>(r, "labelsGroups", "labelsGroupId", GroupKind::Labels);
    kind_routes::<AnnotationsGroupInput>(
        r,
        "annotationsGroups",
        "annotationsGroupId",
        GroupKind::Annotations,
    );
}

/// The id parameter of the kind's routes.
struct IdParam(&'static str);

fn kind_routes<I: GroupInput>(r: &mut Routes, segment: &str, id: &'static str, kind: GroupKind) {
    let noun = kind.as_str().to_lowercase();
    r.at(format!("/organization/{{organizationId}}/{segment}"))
        .data(kind)
        .get(
            list,
            Doc::list::<GroupView>(format!(
                "The organization's {noun} groups, oldest first, with how many services carry each"
            )),
        )
        .post(
            create::<I>,
            Doc::create::<GroupView, I>(format!("Create a {noun} group")),
        )
        .add();
    r.at(format!(
        "/organization/{{organizationId}}/{segment}/{{{id}}}"
    ))
    .data(kind)
    .data(IdParam(id))
    .get(get, Doc::get::<GroupView>(format!("A {noun} group")))
    .put(
        edit::<I>,
        Doc::edit::<GroupView, I>(format!(
            "Replace a {noun} group; deployed services carrying it become OUT_OF_DATE"
        )),
    )
    .delete(
        remove,
        Doc::delete(format!(
            "Delete a {noun} group no service carries (409 otherwise)"
        )),
    )
    .add();
    r.at(format!(
        "/organization/{{organizationId}}/{segment}/{{{id}}}/associatedItems"
    ))
    .data(kind)
    .data(IdParam(id))
    .get(
        associated,
        Doc::list::<AssociatedItemView>(format!(
            "The services carrying a {noun} group, oldest first"
        )),
    )
    .add();
}

type Kind = web::Data<GroupKind>;
type Id = web::Data<IdParam>;

async fn list(
    st: St,
    kind: Kind,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let all = st
        .capstan
        .list_groups(&p, path_id(&req, ORG)?, **kind)
        .await?;
    Ok(ok(Paged::from_vec(all, page, GroupView::from)))
}

async fn create<I: GroupInput>(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<I>,
) -> ApiResult<HttpResponse> {
    let group = st
        .capstan
        .create_group(&p, path_id(&req, ORG)?, input.draft()?)
        .await?;
    Ok(created(GroupView::from(group)))
}

async fn get(
    st: St,
    kind: Kind,
    id: Id,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    let group = st
        .capstan
        .get_group(&p, path_id(&req, ORG)?, **kind, path_id(&req, id.0)?)
        .await?;
    Ok(ok(GroupView::from(group)))
}

async fn edit<I: GroupInput>(
    st: St,
    id: Id,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<I>,
) -> ApiResult<HttpResponse> {
    let group = st
        .capstan
        .edit_group(
            &p,
            path_id(&req, ORG)?,
            path_id(&req, id.0)?,
            input.draft()?,
        )
        .await?;
    Ok(ok(GroupView::from(group)))
}

async fn remove(
    st: St,
    kind: Kind,
    id: Id,
    Auth(p): Auth,
    req: HttpRequest,
) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_group(&p, path_id(&req, ORG)?, **kind, path_id(&req, id.0)?)
        .await?;
    Ok(no_content())
}

async fn associated(
    st: St,
    kind: Kind,
    id: Id,
    Auth(p): Auth,
    req: HttpRequest,
    Paging(page): Paging,
) -> ApiResult<HttpResponse> {
    let items = st
        .capstan
        .group_associated_items(&p, path_id(&req, ORG)?, **kind, path_id(&req, id.0)?)
        .await?;
    Ok(ok(Paged::from_vec(items, page, AssociatedItemView::from)))
}
