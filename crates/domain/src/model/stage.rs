//! Deployment stages: the ordered groups an environment's deployment runs one after another.
//! Every service is in one stage of its environment.

use super::{Name, Record};
use crate::ids::*;
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentStage {
    pub id: DeploymentStageId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub name: Name,
    pub description: Option<String>,
    /// Its place in the environment: stages run in increasing order, from 1.
    pub deployment_order: i32,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for DeploymentStage {
    type Id = DeploymentStageId;
    type Parent = EnvironmentId;
    const KIND: &'static str = "deployment stage";
    fn id(&self) -> DeploymentStageId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The name of the stage a new environment gets.
pub const DEFAULT_STAGE: &str = "DEFAULT";

impl DeploymentStage {
    pub fn new(
        environment: &super::Environment,
        name: Name,
        description: Option<String>,
        deployment_order: i32,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            id: DeploymentStageId::generate(),
            organization_id: environment.organization_id,
            environment_id: environment.id,
            name,
            description,
            deployment_order,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A service's place in a stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageMember {
    /// The attachment's own id (the public description gives it one).
    pub id: uuid::Uuid,
    pub service_id: ServiceId,
    pub stage_id: DeploymentStageId,
    pub environment_id: EnvironmentId,
    /// Left out of environment-level deployments while it stays in the stage.
    pub is_skipped: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl StageMember {
    pub fn new(
        service: ServiceId,
        stage: &DeploymentStage,
        is_skipped: bool,
        now: OffsetDateTime,
    ) -> Self {
        Self {
            id: crate::ids::fresh("StagedService"),
            service_id: service,
            stage_id: stage.id,
            environment_id: stage.environment_id,
            is_skipped,
            created_at: now,
            updated_at: now,
        }
    }
}

/// Where `moving` goes relative to `anchor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Before,
    After,
}

/// The stages in their new order once `moving` is placed before or after `anchor`, numbered
/// from 1; `None` when either is not among `stages`.
pub fn reorder(
    stages: &[DeploymentStage],
    moving: DeploymentStageId,
    anchor: DeploymentStageId,
    placement: Placement,
) -> Option<Vec<(DeploymentStageId, i32)>> {
    let mut ids: Vec<DeploymentStageId> = {
        let mut sorted: Vec<&DeploymentStage> = stages.iter().collect();
        sorted.sort_by_key(|s| (s.deployment_order, s.created_at, s.id));
        sorted.iter().map(|s| s.id).collect()
    };
    let from = ids.iter().position(|id| *id == moving)?;
    ids.iter().position(|id| *id == anchor)?;
    let moved = ids.remove(from);
    if moving != anchor {
        let at = ids.iter().position(|id| *id == anchor)?;
        let at = match placement {
            Placement::Before => at,
            Placement::After => at + 1,
        };
        ids.insert(at, moved);
    } else {
        ids.insert(from, moved);
    }
    Some(
        ids.into_iter()
            .enumerate()
            .map(|(i, id)| (id, i as i32 + 1))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stages(n: usize) -> Vec<DeploymentStage> {
        let env = EnvironmentId::generate();
        (0..n)
            .map(|i| DeploymentStage {
                id: DeploymentStageId::generate(),
                organization_id: OrganizationId::generate(),
                environment_id: env,
                name: Name::parse("name", &format!("s{i}")).unwrap(),
                description: None,
                deployment_order: i as i32 + 1,
                created_at: OffsetDateTime::UNIX_EPOCH,
                updated_at: OffsetDateTime::UNIX_EPOCH,
            })
            .collect()
    }

    fn order(all: &[DeploymentStage], moved: Vec<(DeploymentStageId, i32)>) -> Vec<usize> {
        moved
            .iter()
            .map(|(id, _)| all.iter().position(|s| s.id == *id).unwrap())
            .collect()
    }

    #[test]
    fn a_stage_moves_before_or_after_another_and_orders_stay_dense() {
        let s = stages(4);
        let before = reorder(&s, s[3].id, s[1].id, Placement::Before).unwrap();
        assert_eq!(order(&s, before.clone()), [0, 3, 1, 2]);
        assert_eq!(
            before.iter().map(|(_, o)| *o).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let after = reorder(&s, s[0].id, s[2].id, Placement::After).unwrap();
        assert_eq!(order(&s, after), [1, 2, 0, 3]);
        let last = reorder(&s, s[1].id, s[3].id, Placement::After).unwrap();
        assert_eq!(order(&s, last), [0, 2, 3, 1]);
        let itself = reorder(&s, s[2].id, s[2].id, Placement::Before).unwrap();
        assert_eq!(order(&s, itself), [0, 1, 2, 3]);
        assert!(reorder(&s, s[0].id, DeploymentStageId::generate(), Placement::After).is_none());
    }
}
