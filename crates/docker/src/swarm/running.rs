//! A task's container, reached through the daemon of the node it runs on: what only that
//! daemon can do in it (a check run inside, a database's dump or restore).

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::running_replicas::RunningReplica;
use bollard::models::{Task, TaskState};
use bollard::Docker;
use domain::engine::EngineError;
use domain::ids::ServiceId;

/// The container of a task, once it has one.
fn container_of(task: &Task) -> Option<&str> {
    task.status
        .as_ref()?
        .container_status
        .as_ref()?
        .container_id
        .as_deref()
}

impl DockerEngine {
    /// The daemon of `task`'s node and its container: none when the task has no container yet
    /// or Capstan reaches no daemon of its node.
    pub(crate) async fn task_container(
        &self,
        task: &Task,
    ) -> Result<Option<(&Docker, String)>, EngineError> {
        let (Some(container), Some(node)) = (container_of(task), task.node_id.as_deref()) else {
            return Ok(None);
        };
        Ok(self
            .daemon_of_node(node)
            .await?
            .map(|docker| (docker, container.to_string())))
    }

    /// A running container of `service`'s serving generation, with the daemon that reaches
    /// it; said why not when none runs, or its node's daemon is not one the cluster names.
    pub(crate) async fn running_task_container(
        &self,
        service: ServiceId,
    ) -> Result<(&Docker, String), EngineError> {
        for generation in self.swarm_services(Some(service)).await? {
            let tasks = self.tasks_of(super::tasks::name_of(&generation)).await?;
            let running = tasks.iter().find(|t| {
                t.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING)
                    && container_of(t).is_some()
            });
            if let Some(task) = running {
                return self.task_container(task).await?.ok_or_else(|| {
                    format!(
                        "its task runs on the node {}, and the cluster names no daemon of that node",
                        task.node_id.as_deref().unwrap_or_default()
                    )
                    .into()
                });
            }
        }
        Err("it does not run: deploy it first".into())
    }

    /// Every running task of `service`'s Swarm services, as replicas named as the live API
    /// shows them (`<Swarm service>.<slot>`), each with its node's daemon where the cluster
    /// names it.
    pub(crate) async fn running_tasks(
        &self,
        service: ServiceId,
    ) -> Result<Vec<RunningReplica<'_>>, EngineError> {
        let nodes = self
            .docker
            .list_nodes(None)
            .await
            .map_err(|e| said("could not list the Swarm's nodes", e))?;
        // Each node's host name and daemon, read once for every task.
        let own = self.own_node_id().await?;
        let node_of = |id: &str| {
            let seen = nodes.iter().find(|n| n.id.as_deref() == Some(id));
            let hostname = seen
                .and_then(|n| n.description.as_ref()?.hostname.clone())
                .unwrap_or_else(|| id.to_string());
            let docker = if id == own {
                Some(&self.docker)
            } else {
                seen.and_then(|n| n.status.as_ref()?.addr.as_deref())
                    .and_then(|address| self.daemon_at(address))
            };
            (hostname, docker)
        };
        let mut found = Vec::new();
        for generation in self.swarm_services(Some(service)).await? {
            let name = super::tasks::name_of(&generation).to_string();
            for task in self.tasks_of(&name).await? {
                let running =
                    task.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING);
                let (Some(container), Some(node), true) =
                    (container_of(&task), task.node_id.as_deref(), running)
                else {
                    continue;
                };
                let (node, docker) = node_of(node);
                let docker = docker.ok_or_else(|| {
                    format!(
                        "it runs on the node {node}, and the cluster names no daemon of that node"
                    )
                });
                found.push(RunningReplica {
                    name: format!("{name}.{}", task.slot.unwrap_or(0)),
                    docker,
                    container: container.to_string(),
                    node: Some(node),
                });
            }
        }
        Ok(found)
    }
}
