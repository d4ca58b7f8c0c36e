//! How deployments are shown: stages, the queue, and the deployment histories (the public
//! description's shapes).

use crate::view_parts::{Base, Reference};
use domain::model::*;
use domain::services::{BatchHistory, HistoryEntry, StageDetails};
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

/// The icon a service kind is shown with (the public description requires one).
pub fn icon_uri(kind: ServiceKind) -> String {
    format!("app://capstan/services/{}", kind.path_segment())
}

/// A duration as ISO 8601 (`PT42S`), the description's `format: duration`.
fn iso_duration(seconds: i64) -> String {
    format!("PT{}S", seconds.max(0))
}

fn seconds(from: OffsetDateTime, to: OffsetDateTime) -> i64 {
    (to - from).whole_seconds().max(0)
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct StageServiceView {
    #[serde(flatten)]
    pub base: Base,
    pub service_id: Uuid,
    pub service_type: ServiceKind,
    /// Left out of environment-level deployments.
    pub is_skipped: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct StageView {
    #[serde(flatten)]
    pub base: Base,
    pub environment: Reference,
    pub name: String,
    /// Empty when none was given (clients read it as a string).
    pub description: String,
    /// Stages run in increasing order, from 1.
    pub deployment_order: i32,
    pub services: Vec<StageServiceView>,
}

impl From<StageDetails> for StageView {
    fn from(d: StageDetails) -> Self {
        let s = d.stage;
        Self {
            base: Base {
                id: s.id.0,
                created_at: s.created_at,
                updated_at: s.updated_at,
            },
            environment: Reference {
                id: s.environment_id.0,
            },
            name: s.name.to_string(),
            description: s.description.unwrap_or_default(),
            deployment_order: s.deployment_order,
            services: d
                .services
                .into_iter()
                .map(|m| StageServiceView {
                    base: Base {
                        id: m.member.id,
                        created_at: m.member.created_at,
                        updated_at: m.member.updated_at,
                    },
                    service_id: m.member.service_id.0,
                    service_type: m.kind,
                    is_skipped: m.member.is_skipped,
                })
                .collect(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct StageList {
    pub results: Vec<StageView>,
}

impl StageList {
    pub fn of(stages: Vec<StageDetails>) -> Self {
        Self {
            results: stages.into_iter().map(Into::into).collect(),
        }
    }
}

/// Where one deployment is (the public `EnvDeploymentStatus`), running or ended.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvDeploymentStatus {
    pub deployment_request_id: Uuid,
    pub environment_id: Uuid,
    /// The deployment's state as its environment's status shows it while it is the latest.
    pub status: ServiceState,
}

impl From<domain::services::EnvironmentStatus> for EnvDeploymentStatus {
    fn from(s: domain::services::EnvironmentStatus) -> Self {
        Self {
            deployment_request_id: s.deployment_request_id.unwrap_or_default(),
            environment_id: s.id.0,
            status: s.state,
        }
    }
}

/// Who asked for a queued deployment, and from where.
#[derive(Serialize, utoipa::ToSchema)]
pub struct QueueAuditing {
    pub origin: Origin,
    pub triggered_by: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ServiceIdentifier {
    pub service_id: Uuid,
    pub service_type: ServiceKind,
    pub name: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedStageService {
    pub identifier: ServiceIdentifier,
    pub status: StageStatus,
    pub icon_uri: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedStage {
    pub name: String,
    pub status: StageStatus,
    pub services: Vec<QueuedStageService>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueueIdentifier {
    pub deployment_request_id: Uuid,
    pub environment_id: Uuid,
}

/// One deployment waiting or running in an environment, stage by stage.
#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedDeployment {
    pub identifier: QueueIdentifier,
    pub auditing_data: QueueAuditing,
    pub trigger_action: TriggerAction,
    pub stages: Vec<QueuedStage>,
}

/// The entries of a batch grouped by the stage they were in, in running order.
fn by_stage(entries: &[HistoryEntry]) -> Vec<(String, Vec<&HistoryEntry>)> {
    let mut groups: Vec<((i32, String), Vec<&HistoryEntry>)> = Vec::new();
    for e in entries {
        let name = e
            .request
            .snapshot
            .stage_name
            .clone()
            .unwrap_or_else(|| DEFAULT_STAGE.to_string());
        let key = (e.request.position, name);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(e),
            None => groups.push((key, vec![e])),
        }
    }
    groups.sort_by_key(|((position, _), _)| *position);
    groups
        .into_iter()
        .map(|((_, name), list)| (name, list))
        .collect()
}

fn stage_status(list: &[&HistoryEntry]) -> StageStatus {
    let requests: Vec<&DeploymentRequest> = list.iter().map(|e| &e.request).collect();
    StageStatus::of_stage(&requests)
}

fn identifier(e: &HistoryEntry) -> ServiceIdentifier {
    ServiceIdentifier {
        service_id: e.request.service_id.0,
        service_type: e.kind,
        name: e.request.snapshot.name.clone(),
    }
}

impl From<BatchHistory> for QueuedDeployment {
    fn from(b: BatchHistory) -> Self {
        let stages = by_stage(&b.entries)
            .into_iter()
            .map(|(name, list)| QueuedStage {
                status: stage_status(&list),
                services: list
                    .iter()
                    .map(|e| QueuedStageService {
                        identifier: identifier(e),
                        status: StageStatus::of_request(&e.request),
                        icon_uri: icon_uri(e.kind),
                    })
                    .collect(),
                name,
            })
            .collect();
        Self {
            identifier: QueueIdentifier {
                deployment_request_id: b.summary.id,
                environment_id: b.environment_id.0,
            },
            auditing_data: QueueAuditing {
                origin: b.summary.origin,
                triggered_by: b.summary.requested_by,
            },
            trigger_action: TriggerAction::of(b.summary.action, b.summary.terraform_action),
            stages,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedDeploymentList {
    pub results: Vec<QueuedDeployment>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedRequestIdentifier {
    /// The deployment (batch) the request belongs to.
    pub deployment_request_id: Uuid,
    pub service_id: Uuid,
    pub service_type: ServiceKind,
    pub name: String,
}

/// One request of a service that waits or runs.
#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedServiceRequest {
    pub identifier: QueuedRequestIdentifier,
    pub auditing_data: QueueAuditing,
    pub status_details: StatusDetails,
    pub icon_uri: String,
}

impl From<HistoryEntry> for QueuedServiceRequest {
    fn from(e: HistoryEntry) -> Self {
        let r = &e.request;
        Self {
            identifier: QueuedRequestIdentifier {
                deployment_request_id: r.batch_id,
                service_id: r.service_id.0,
                service_type: e.kind,
                name: r.snapshot.name.clone(),
            },
            auditing_data: QueueAuditing {
                origin: r.origin,
                triggered_by: r.requested_by.clone(),
            },
            status_details: StatusDetails::of(r),
            icon_uri: icon_uri(e.kind),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct QueuedServiceRequestList {
    pub results: Vec<QueuedServiceRequest>,
}

/// Who asked, when, from where, and when it last moved.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryAuditing {
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub triggered_by: String,
    pub origin: Origin,
}

fn updated_at(r: &DeploymentRequest) -> OffsetDateTime {
    r.finished_at.or(r.started_at).unwrap_or(r.created_at)
}

/// A deployed commit (the members the description requires; the author and message are not
/// known to Capstan and are empty).
#[derive(Serialize, utoipa::ToSchema)]
pub struct CommitView {
    pub git_commit_id: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    pub author_name: String,
    pub message: String,
    pub tag: String,
}

fn commit(r: &DeploymentRequest) -> Option<CommitView> {
    r.snapshot.git_commit_id.as_ref().map(|id| CommitView {
        git_commit_id: id.clone(),
        created_at: r.created_at,
        author_name: String::new(),
        message: String::new(),
        tag: String::new(),
    })
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryServiceIdentifier {
    pub name: String,
    pub service_id: Uuid,
    pub service_type: ServiceKind,
    /// The deployment (batch) it was part of.
    pub execution_id: String,
}

/// One service's part in a deployment.
#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryService {
    pub identifier: HistoryServiceIdentifier,
    /// The state it brought (or is bringing) the service to.
    pub status: ServiceState,
    pub auditing_data: HistoryAuditing,
    /// What was deployed, as the kind has it.
    #[schema(value_type = Object)]
    pub details: serde_json::Value,
    pub icon_uri: String,
    pub status_details: StatusDetails,
    /// ISO 8601, once it has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_duration: Option<String>,
    /// Why it failed or was canceled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The kind's deployment details (the description's `DeploymentHistoryServiceDetails`).
fn history_details(e: &HistoryEntry) -> serde_json::Value {
    let r = &e.request;
    let s = &r.snapshot;
    let commit = serde_json::to_value(commit(r)).unwrap_or_default();
    match e.kind {
        ServiceKind::Application => serde_json::json!({
            "commit": commit,
            "build_pod_name": format!("build-{}-0", r.batch_id),
        }),
        ServiceKind::Container => serde_json::json!({
            "image_name": s.image_name.clone().unwrap_or_default(),
            "tag": s.tag.clone().unwrap_or_default(),
            "arguments": s.arguments.clone().unwrap_or_default(),
            "entrypoint": s.entrypoint.clone().unwrap_or_default(),
        }),
        ServiceKind::Job => serde_json::json!({
            "image_name": s.image_name.clone().unwrap_or_else(|| s.name.clone()),
            "tag": s.tag.clone().or_else(|| s.git_commit_id.clone()).unwrap_or_default(),
            "job_type": s.job_type.clone().unwrap_or_else(|| "LIFECYCLE".into()),
            "commit": commit,
        }),
        ServiceKind::Helm => match (&s.chart_name, &s.chart_version) {
            (Some(name), Some(version)) => serde_json::json!({
                "repository": {"chart_name": name, "chart_version": version},
            }),
            _ => serde_json::json!({ "commit": commit }),
        },
        ServiceKind::Database | ServiceKind::Terraform => serde_json::json!({}),
    }
}

impl From<&HistoryEntry> for HistoryService {
    fn from(e: &HistoryEntry) -> Self {
        let r = &e.request;
        Self {
            identifier: HistoryServiceIdentifier {
                name: r.snapshot.name.clone(),
                service_id: r.service_id.0,
                service_type: e.kind,
                execution_id: r.batch_id.to_string(),
            },
            status: r.state,
            auditing_data: HistoryAuditing {
                created_at: r.created_at,
                updated_at: updated_at(r),
                triggered_by: r.requested_by.clone(),
                origin: r.origin,
            },
            details: history_details(e),
            icon_uri: icon_uri(e.kind),
            status_details: StatusDetails::of(r),
            total_duration: r
                .finished_at
                .map(|end| iso_duration(seconds(r.created_at, end))),
            reason: r.reason.clone(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HistoryStage {
    pub name: String,
    pub status: StageStatus,
    /// ISO 8601: from the first start to the last end of its services (so far).
    pub duration: String,
    pub services: Vec<HistoryService>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentHistoryIdentifier {
    pub environment_id: Uuid,
    /// The deployment's id (as the queue and cancelDeployment take it).
    pub execution_id: String,
}

/// One deployment of an environment, stage by stage.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentHistoryItem {
    pub identifier: EnvironmentHistoryIdentifier,
    pub auditing_data: HistoryAuditing,
    pub status: ServiceState,
    pub trigger_action: TriggerAction,
    /// ISO 8601, so far while it runs.
    pub total_duration: String,
    pub stages: Vec<HistoryStage>,
    pub action_status: ServiceActionStatus,
}

impl EnvironmentHistoryItem {
    pub fn of(b: BatchHistory, now: OffsetDateTime) -> Self {
        let stages = by_stage(&b.entries)
            .into_iter()
            .map(|(name, list)| {
                let start = list.iter().filter_map(|e| e.request.started_at).min();
                let end = list
                    .iter()
                    .map(|e| e.request.finished_at.unwrap_or(now))
                    .max();
                HistoryStage {
                    status: stage_status(&list),
                    duration: iso_duration(match (start, end) {
                        (Some(s), Some(e)) => seconds(s, e),
                        _ => 0,
                    }),
                    services: list.iter().map(|e| HistoryService::from(*e)).collect(),
                    name,
                }
            })
            .collect();
        let updated = b
            .entries
            .iter()
            .map(|e| updated_at(&e.request))
            .max()
            .unwrap_or(b.summary.created_at);
        Self {
            identifier: EnvironmentHistoryIdentifier {
                environment_id: b.environment_id.0,
                execution_id: b.summary.id.to_string(),
            },
            auditing_data: HistoryAuditing {
                created_at: b.summary.created_at,
                updated_at: updated,
                triggered_by: b.summary.requested_by.clone(),
                origin: b.summary.origin,
            },
            status: b.summary.state,
            trigger_action: TriggerAction::of(b.summary.action, b.summary.terraform_action),
            total_duration: iso_duration(seconds(
                b.summary.created_at,
                b.summary.finished_at.unwrap_or(now),
            )),
            stages,
            action_status: b.summary.details.status,
        }
    }
}

/// Pages of histories: `page` and `page_size` beside `results`. One named type per item type,
/// so that each has a schema of its own in the OpenAPI document.
macro_rules! history_page {
    ($($name:ident of $item:ty),* $(,)?) => {$(
        #[derive(Serialize, utoipa::ToSchema)]
        pub struct $name {
            pub page: u32,
            pub page_size: u32,
            pub results: Vec<$item>,
        }

        impl $name {
            pub fn of<T>(page: domain::services::HistoryPage<T>, f: impl FnMut(T) -> $item) -> Self {
                Self {
                    page: page.page,
                    page_size: page.page_size,
                    results: page.items.into_iter().map(f).collect(),
                }
            }
        }
    )*};
}

history_page!(
    ServiceHistoryPage of HistoryService,
    EnvironmentHistoryPage of EnvironmentHistoryItem,
    EnvironmentHistoryPageV1 of EnvironmentHistoryV1,
);

/// One service in an environment's deployment, as the older history shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentHistoryService {
    #[serde(flatten)]
    pub base: Base,
    pub name: String,
    pub status: ServiceState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<CommitView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
}

/// One deployment of an environment, as the older history shows it: its services by kind.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EnvironmentHistoryV1 {
    #[serde(flatten)]
    pub base: Base,
    pub status: ServiceState,
    pub origin: Origin,
    pub triggered_by: String,
    pub applications: Vec<EnvironmentHistoryService>,
    pub containers: Vec<EnvironmentHistoryService>,
    pub databases: Vec<EnvironmentHistoryService>,
    pub helms: Vec<EnvironmentHistoryService>,
    pub jobs: Vec<EnvironmentHistoryService>,
}

impl From<BatchHistory> for EnvironmentHistoryV1 {
    fn from(b: BatchHistory) -> Self {
        let of_kind = |kind: ServiceKind| -> Vec<EnvironmentHistoryService> {
            b.entries
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| {
                    let r = &e.request;
                    let s = &r.snapshot;
                    let image = matches!(kind, ServiceKind::Container | ServiceKind::Job);
                    EnvironmentHistoryService {
                        base: Base {
                            id: r.service_id.0,
                            created_at: r.created_at,
                            updated_at: updated_at(r),
                        },
                        name: s.name.clone(),
                        status: r.state,
                        commit: commit(r).filter(|_| kind != ServiceKind::Container),
                        image_name: s.image_name.clone().filter(|_| image),
                        tag: s.tag.clone().filter(|_| image),
                        arguments: s.arguments.clone().filter(|_| image),
                        entrypoint: s.entrypoint.clone().filter(|_| image),
                    }
                })
                .collect()
        };
        let updated = b
            .entries
            .iter()
            .map(|e| updated_at(&e.request))
            .max()
            .unwrap_or(b.summary.created_at);
        Self {
            base: Base {
                id: b.summary.id,
                created_at: b.summary.created_at,
                updated_at: updated,
            },
            status: b.summary.state,
            origin: b.summary.origin,
            triggered_by: b.summary.requested_by.clone(),
            applications: of_kind(ServiceKind::Application),
            containers: of_kind(ServiceKind::Container),
            databases: of_kind(ServiceKind::Database),
            helms: of_kind(ServiceKind::Helm),
            jobs: of_kind(ServiceKind::Job),
        }
    }
}
