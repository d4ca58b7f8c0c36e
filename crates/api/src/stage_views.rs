//! An environment's statuses stage by stage (the public `EnvironmentStatusesWithStages`).

use domain::model::ServiceStatus;
use domain::services::{EnvironmentStatus, StagedStatuses};
use serde::Serialize;
use std::collections::HashMap;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Serialize, ToSchema)]
pub struct StageRef {
    pub id: Uuid,
    pub name: String,
    pub description: String,
}

/// The public `DeploymentStageWithServicesStatuses`.
#[derive(Serialize, ToSchema)]
pub struct StageWithStatuses {
    pub stage: StageRef,
    pub applications: Vec<ServiceStatus>,
    pub containers: Vec<ServiceStatus>,
    pub jobs: Vec<ServiceStatus>,
    pub databases: Vec<ServiceStatus>,
    pub helms: Vec<ServiceStatus>,
    pub terraforms: Vec<ServiceStatus>,
}

#[derive(Serialize, ToSchema)]
pub struct StatusesWithStages {
    pub environment: EnvironmentStatus,
    pub stages: Vec<StageWithStatuses>,
}

impl StatusesWithStages {
    pub fn of(staged: StagedStatuses) -> Self {
        let StagedStatuses {
            statuses,
            stages,
            members,
        } = staged;
        let stage_of: HashMap<_, _> = members.iter().map(|m| (m.service_id, m.stage_id)).collect();
        let stages = stages
            .into_iter()
            .map(|stage| {
                let here = |kind: &[ServiceStatus]| -> Vec<ServiceStatus> {
                    kind.iter()
                        .filter(|s| stage_of.get(&s.id) == Some(&stage.id))
                        .cloned()
                        .collect()
                };
                StageWithStatuses {
                    applications: here(&statuses.applications),
                    containers: here(&statuses.containers),
                    jobs: here(&statuses.jobs),
                    databases: here(&statuses.databases),
                    helms: here(&statuses.helms),
                    terraforms: here(&statuses.terraforms),
                    stage: StageRef {
                        id: stage.id.0,
                        name: stage.name.to_string(),
                        description: stage.description.unwrap_or_default(),
                    },
                }
            })
            .collect();
        Self {
            environment: statuses.environment,
            stages,
        }
    }
}
