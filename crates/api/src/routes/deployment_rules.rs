//! Deployment rules: a project's rules for its new environments
//! (`/project/{id}/deploymentRule`) and the rule an environment runs by
//! (`/environment/{id}/deploymentRule`).

use super::{created, no_content, ok};
use crate::error::ApiResult;
use crate::extract::{path_id, Auth, JsonBody, Paging};
use crate::openapi::{Body, Doc, Routes};
use crate::views::{base, Base, Paged};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use domain::ids::ClusterId;
use domain::model::{
    EnvironmentDeploymentRule, EnvironmentMode, EnvironmentRuleInput, ProjectDeploymentRule,
    ProjectRuleInput, RuleOrderInput, Schedule, Weekday,
};
use serde::Serialize;
use time::OffsetDateTime;

type St = web::Data<AppState>;
const PROJECT: &str = "projectId";
const RULE: &str = "deploymentRuleId";
const ENVIRONMENT: &str = "environmentId";

/// A rule's hours as the public members have them: times of day on 1970-01-01.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ScheduleView {
    pub auto_stop: bool,
    pub timezone: String,
    #[serde(with = "time::serde::rfc3339")]
    pub start_time: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub stop_time: OffsetDateTime,
    pub weekdays: Vec<Weekday>,
}

impl From<Schedule> for ScheduleView {
    fn from(s: Schedule) -> Self {
        let on_epoch = |t| OffsetDateTime::UNIX_EPOCH.replace_time(t);
        Self {
            auto_stop: s.auto_stop,
            timezone: s.timezone,
            start_time: on_epoch(s.start),
            stop_time: on_epoch(s.stop),
            weekdays: s.weekdays,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ProjectRuleView {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub description: Option<String>,
    pub mode: EnvironmentMode,
    pub cluster_id: ClusterId,
    pub wildcard: String,
    pub priority_index: i32,
    #[serde(flatten)]
    pub schedule: ScheduleView,
}

impl From<ProjectDeploymentRule> for ProjectRuleView {
    fn from(r: ProjectDeploymentRule) -> Self {
        Self {
            base: base(r.id.0, r.created_at, r.updated_at),
            name: r.name.to_string(),
            description: r.description,
            mode: r.mode,
            cluster_id: r.cluster_id,
            wildcard: r.wildcard,
            priority_index: r.priority_index,
            schedule: r.schedule.into(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentRuleView {
    #[serde(flatten)]
    pub base: Base,
    pub on_demand_preview: bool,
    pub auto_preview: bool,
    #[serde(flatten)]
    pub schedule: ScheduleView,
}

impl From<EnvironmentDeploymentRule> for EnvironmentRuleView {
    fn from(r: EnvironmentDeploymentRule) -> Self {
        Self {
            base: base(r.environment_id.0, r.created_at, r.updated_at),
            on_demand_preview: r.on_demand_preview,
            auto_preview: r.auto_preview,
            schedule: r.schedule.into(),
        }
    }
}

pub fn routes(r: &mut Routes) {
    r.at("/project/{projectId}/deploymentRule")
        .get(
            list,
            Doc::list::<ProjectRuleView>("A project's deployment rules, by priority"),
        )
        .post(
            create,
            Doc::create::<ProjectRuleView, ProjectRuleInput>(
                "Add a deployment rule for the project's new environments, last in priority",
            ),
        )
        .add();
    // Before `{deploymentRuleId}`, which would take `order`.
    r.at("/project/{projectId}/deploymentRule/order")
        .put(
            order,
            Doc::answer(
                "Set the priority of the project's rules (every rule, the first applies first); \
                 answers them in their new order",
                200,
                Some(Body::page_of::<ProjectRuleView>()),
            )
            .body(Body::of::<RuleOrderInput>()),
        )
        .add();
    r.at("/project/{projectId}/deploymentRule/{deploymentRuleId}")
        .get(
            get,
            Doc::get::<ProjectRuleView>("A project deployment rule"),
        )
        .put(
            edit,
            Doc::edit::<ProjectRuleView, ProjectRuleInput>("Edit a project deployment rule"),
        )
        .delete(remove, Doc::delete("Delete a project deployment rule"))
        .add();
    r.at("/environment/{environmentId}/deploymentRule")
        .get(
            environment_rule,
            Doc::get::<EnvironmentRuleView>(
                "The rule an environment runs by: when it is started and stopped",
            ),
        )
        .add();
    r.at("/environment/{environmentId}/deploymentRule/{deploymentRuleId}")
        .put(
            edit_environment_rule,
            Doc::edit::<EnvironmentRuleView, EnvironmentRuleInput>(
                "Set the rule an environment runs by (the rule's id is the environment's)",
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
    let all = st
        .capstan
        .list_project_rules(&p, path_id(&req, PROJECT)?)
        .await?;
    Ok(ok(Paged::from_vec(all, page, ProjectRuleView::from)))
}

async fn create(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ProjectRuleInput>,
) -> ApiResult<HttpResponse> {
    let rule = st
        .capstan
        .create_project_rule(&p, path_id(&req, PROJECT)?, input)
        .await?;
    Ok(created(ProjectRuleView::from(rule)))
}

async fn get(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let rule = st
        .capstan
        .get_project_rule(&p, path_id(&req, PROJECT)?, path_id(&req, RULE)?)
        .await?;
    Ok(ok(ProjectRuleView::from(rule)))
}

async fn edit(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<ProjectRuleInput>,
) -> ApiResult<HttpResponse> {
    let rule = st
        .capstan
        .edit_project_rule(&p, path_id(&req, PROJECT)?, path_id(&req, RULE)?, input)
        .await?;
    Ok(ok(ProjectRuleView::from(rule)))
}

async fn remove(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    st.capstan
        .delete_project_rule(&p, path_id(&req, PROJECT)?, path_id(&req, RULE)?)
        .await?;
    Ok(no_content())
}

async fn order(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<RuleOrderInput>,
) -> ApiResult<HttpResponse> {
    let rules = st
        .capstan
        .order_project_rules(&p, path_id(&req, PROJECT)?, input)
        .await?;
    let all = domain::pagination::PageRequest::all();
    Ok(ok(Paged::from_vec(rules, all, ProjectRuleView::from)))
}

async fn environment_rule(st: St, Auth(p): Auth, req: HttpRequest) -> ApiResult<HttpResponse> {
    let rule = st
        .capstan
        .get_environment_rule(&p, path_id(&req, ENVIRONMENT)?)
        .await?;
    Ok(ok(EnvironmentRuleView::from(rule)))
}

async fn edit_environment_rule(
    st: St,
    Auth(p): Auth,
    req: HttpRequest,
    JsonBody(input): JsonBody<EnvironmentRuleInput>,
) -> ApiResult<HttpResponse> {
    let rule = st
        .capstan
        .edit_environment_rule(&p, path_id(&req, ENVIRONMENT)?, path_id(&req, RULE)?, input)
        .await?;
    Ok(ok(EnvironmentRuleView::from(rule)))
}
