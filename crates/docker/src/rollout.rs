//! Redeploys that drop no request, for the services a router serves. The new replicas start
//! beside the old ones, under names of their own generation, on ports of their own; once they
//! are ready, the router's switch (the ROUTER_DEPLOYMENT step) waits for every instance's
//! router to see and check them, retires the old replicas (renamed `…-retiring`, which takes
//! them out of the routes), waits for the routers to stop sending them requests, and only then
//! stops them, with time to finish the requests in flight.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::ContainerPlan;
use bollard::models::{ContainerSummary, ContainerSummaryStateEnum};
use bollard::query_parameters::{RenameContainerOptions, StopContainerOptions};
use domain::engine::EngineError;
use domain::engine::StepWork;
use domain::model::{is_routed, DeploymentRequest, Service};
use std::time::Duration;

/// The end of a retired replica's name: the observer leaves it out of the routes.
const RETIRING: &str = "-retiring";

/// Whether a container's name (Docker's, with or without its `/`) marks it retired.
pub(crate) fn is_retiring(name: &str) -> bool {
    name.ends_with(RETIRING)
}

/// The generation a request's replicas are named for.
pub(crate) fn generation(request: &DeploymentRequest) -> String {
    request.id.0.simple().to_string()[..8].to_string()
}

fn name_of(c: &ContainerSummary) -> String {
    c.names
        .as_ref()
        .and_then(|n| n.first())
        .map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_default()
}

impl DockerEngine {
    /// Whether a deploy of `service` starts its new replicas beside the old ones: with a
    /// router in front of it, and no volume the old and new would share.
    pub(crate) fn rolls(&self, service: &Service, plans: &[ContainerPlan]) -> bool {
        self.settings.switch_settle.is_some()
            && is_routed(service)
            && plans.iter().all(|p| p.volume.is_none())
    }

    /// Names the plans for the request's generation and lets Docker choose their ports (the
    /// old replicas still hold theirs); the containers of an earlier attempt at the same
    /// request go.
    pub(crate) async fn beside_the_old(
        &self,
        work: &StepWork<'_>,
        old: &[ContainerSummary],
        plans: &mut [ContainerPlan],
    ) -> Result<(), EngineError> {
        let generation = generation(work.request);
        for p in plans.iter_mut() {
            p.name = format!("{}-{generation}", p.name);
            for port in &mut p.ports {
                port.host = None;
            }
        }
        let earlier: Vec<String> = old
            .iter()
            .filter(|c| name_of(c).ends_with(&generation))
            .filter_map(|c| c.id.clone())
            .collect();
        self.remove_all(&earlier).await;
        Ok(())
    }

    /// The router's switch to the new replicas, then the old ones' retirement.
    pub(crate) async fn switch_routes(&self, work: &StepWork<'_>) -> Result<(), EngineError> {
        let log = work.log;
        let generation = generation(work.request);
        let old: Vec<ContainerSummary> = self
            .owned(work.service.id, Some("service"))
            .await?
            .into_iter()
            .filter(|c| !name_of(c).ends_with(&generation))
            .collect();
        // Only running replicas are routed to: the others go at once.
        let serving = old
            .iter()
            .any(|c| c.state == Some(ContainerSummaryStateEnum::RUNNING));
        let Some(settle) = self.settings.switch_settle.filter(|_| serving) else {
            let ids: Vec<String> = old.iter().filter_map(|c| c.id.clone()).collect();
            self.remove_all(&ids).await;
            log.info("the router sends requests to the new replicas");
            if !ids.is_empty() {
                log.info(&format!("removed {} previous container(s)", ids.len()));
            }
            return Ok(());
        };
        // Every instance's router reads the new replicas and checks them.
        tokio::time::sleep(settle).await;
        for c in &old {
            let (Some(id), name) = (&c.id, name_of(c)) else {
                continue;
            };
            if is_retiring(&name) {
                continue;
            }
            let options = RenameContainerOptions {
                name: format!("{name}{RETIRING}"),
            };
            self.docker
                .rename_container(id, options)
                .await
                .map_err(|e| said("could not retire a previous container", e))?;
        }
        log.info(&format!(
            "the router sends requests to the new replicas; {} previous container(s) finish theirs",
            old.len()
        ));
        // Every instance's router reads that the old replicas are gone.
        tokio::time::sleep(settle).await;
        let ids: Vec<String> = old.iter().filter_map(|c| c.id.clone()).collect();
        let grace = i32::try_from(work.service.termination_grace_seconds()).unwrap_or(i32::MAX);
        futures_util::future::join_all(ids.iter().map(|id| async move {
            let options = StopContainerOptions {
                t: Some(grace),
                ..Default::default()
            };
            if let Err(e) = self.docker.stop_container(id, Some(options)).await {
                tracing::debug!(container = %id, error = %e, "a retired container did not stop");
            }
        }))
        .await;
        self.remove_all(&ids).await;
        log.info(&format!("removed {} previous container(s)", ids.len()));
        Ok(())
    }

    /// Waits this long at each turn of a switch; none: no router, and redeploys replace the
    /// replicas in place (keeping their ports).
    pub fn with_router(mut self, settle: Duration) -> Self {
        self.settings.switch_settle = Some(settle);
        self
    }
}
