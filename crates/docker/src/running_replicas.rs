//! The running replicas of a service, each with the daemon that runs its container (on a
//! Swarm, its node's): what a shell or a reading of statistics reaches.

use crate::engine::DockerEngine;
use bollard::models::ContainerSummaryStateEnum;
use bollard::Docker;
use domain::engine::EngineError;
use domain::ids::ServiceId;

/// A running replica, named as the live API shows it.
pub(crate) struct RunningReplica<'a> {
    pub name: String,
    /// The daemon that runs it; none: its node's daemon is not one the cluster names (the
    /// reason says so).
    pub docker: Result<&'a Docker, String>,
    pub container: String,
    /// The node it runs on, on a Swarm (its host name).
    pub node: Option<String>,
}

impl DockerEngine {
    /// Every running replica of `service`, whatever its role (a job's running execution
    /// included).
    pub(crate) async fn running_replicas(
        &self,
        service: ServiceId,
    ) -> Result<Vec<RunningReplica<'_>>, EngineError> {
        if self.settings.swarm {
            return self.running_tasks(service).await;
        }
        Ok(self
            .owned(service, None)
            .await?
            .into_iter()
            .filter(|c| c.state == Some(ContainerSummaryStateEnum::RUNNING))
            .filter_map(|c| {
                let name = c.names?.into_iter().next()?;
                Some(RunningReplica {
                    name: name.trim_start_matches('/').to_string(),
                    docker: Ok(&self.docker),
                    container: c.id?,
                    node: None,
                })
            })
            .collect())
    }
}
