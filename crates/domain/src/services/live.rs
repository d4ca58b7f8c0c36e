//! What the live API shows: what runs of an organization's environments, read from what its
//! engines last reported (or, where they report nothing, from deployment states).

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;

/// What runs of one service.
#[derive(Debug, Clone)]
pub struct LiveService {
    pub id: ServiceId,
    pub kind: ServiceKind,
    pub state: RunState,
    /// Its replicas, as its engine last saw them (none from an engine that reports nothing).
    pub replicas: Vec<Replica>,
    /// The deployment request it runs, when one deployed it.
    pub version: Option<String>,
}

/// What runs of one environment.
#[derive(Debug, Clone)]
pub struct LiveEnvironment {
    pub id: EnvironmentId,
    pub project_id: ProjectId,
    pub state: RunState,
    pub services: Vec<LiveService>,
}

/// Which environments a live reader watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveScope {
    pub cluster: Option<ClusterId>,
    pub project: Option<ProjectId>,
    pub environment: Option<EnvironmentId>,
}

/// What runs of `s`: as its engine last saw it, or by its deployment state where its engine
/// reports nothing.
fn live_service(s: &Service, statuses: &[ServiceStatus], seen: &[RunningState]) -> LiveService {
    let status = statuses.iter().find(|st| st.id == s.id);
    let version = status
        .and_then(|st| st.deployment_request_id)
        .map(|r| r.to_string());
    match seen.iter().find(|r| r.service_id == s.id) {
        Some(r) => LiveService {
            id: s.id,
            kind: s.kind(),
            state: r.state,
            replicas: r.replicas.clone(),
            version,
        },
        None => LiveService {
            id: s.id,
            kind: s.kind(),
            state: status.map_or(RunState::Stopped, |st| {
                RunState::following(st.state, s.kind() == ServiceKind::Job)
            }),
            replicas: Vec::new(),
            version,
        },
    }
}

impl Capstan {
    /// What runs of one service of any kind (the live API's pods).
    pub async fn live_service(&self, p: &Principal, id: ServiceId) -> DomainResult<LiveService> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let service = self.load::<Service>(tx, p, id, Action::Read).await?;
        let (_, statuses) = self
            .statuses(tx, service.environment_id, std::slice::from_ref(&service))
            .await?;
        let seen = tx.running_states(&[id]).await?;
        Ok(live_service(&service, &statuses, &seen))
    }

    /// What runs of the organization's environments in `scope`, each from one read.
    pub async fn live_statuses(
        &self,
        p: &Principal,
        organization: OrganizationId,
        scope: LiveScope,
    ) -> DomainResult<Vec<LiveEnvironment>> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        self.load::<Organization>(tx, p, organization, Action::Read)
            .await?;
        let mut out = Vec::new();
        for project in self.every::<Project>(tx, organization).await? {
            if scope.project.is_some_and(|p| p != project.id) {
                continue;
            }
            for env in self.every::<Environment>(tx, project.id).await? {
                let admitted = scope.environment.is_none_or(|e| e == env.id)
                    && scope.cluster.is_none_or(|c| c == env.cluster_id);
                if !admitted {
                    continue;
                }
                let services = self.services_of(tx, env.id).await?;
                let (_, statuses) = self.statuses(tx, env.id, &services).await?;
                let ids: Vec<ServiceId> = services.iter().map(|s| s.id).collect();
                let seen = tx.running_states(&ids).await?;
                let live: Vec<LiveService> = services
                    .iter()
                    .map(|s| live_service(s, &statuses, &seen))
                    .collect();
                out.push(LiveEnvironment {
                    id: env.id,
                    project_id: project.id,
                    state: RunState::of_all(live.iter().map(|l| l.state)),
                    services: live,
                });
            }
        }
        Ok(out)
    }
}
