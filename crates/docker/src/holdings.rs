//! What each host of a place holds against what it has (the live API's cluster status): the
//! Docker host itself, or every node of the Swarm it manages, with Capstan's replicas there and
//! the CPU and memory their limits reserve.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{self, LABEL_SERVICE};
use crate::swarm::nodes::{role_of, state_of};
use bollard::models::{ContainerSummaryStateEnum, TaskState};
use bollard::query_parameters::ListTasksOptions;
use domain::engine::EngineError;
use domain::model::{ClusterHost, NodeState};
use std::collections::{HashMap, HashSet};

/// Nanoseconds of CPU per second, in millicores.
fn millicores(nano_cpus: i64) -> i64 {
    nano_cpus / 1_000_000
}

impl DockerEngine {
    pub(crate) async fn holdings(&self) -> Result<Vec<ClusterHost>, EngineError> {
        if self.settings.swarm {
            return self.nodes_holding().await;
        }
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| said("could not ask the daemon what it is", e))?;
        let mut options = plan::labelled(self.scoped(vec![LABEL_SERVICE.to_string()]));
        options.all = false;
        let running = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(|e| said("could not list Capstan's containers", e))?;
        let (mut cpu, mut memory, mut replicas) = (0, 0, 0u32);
        for container in running {
            if container.state != Some(ContainerSummaryStateEnum::RUNNING) {
                continue;
            }
            let Some(id) = container.id else { continue };
            // One that went meanwhile holds nothing.
            let Ok(seen) = self.docker.inspect_container(&id, None).await else {
                continue;
            };
            let host = seen.host_config.unwrap_or_default();
            replicas += 1;
            cpu += millicores(host.nano_cpus.unwrap_or(0));
            memory += host.memory.unwrap_or(0);
        }
        Ok(vec![ClusterHost {
            name: info.name.unwrap_or_default(),
            address: self.publish_address().to_string(),
            role: None,
            state: NodeState::Ready,
            replicas,
            cpu_millicores: info.ncpu.unwrap_or(0) * 1000,
            memory_bytes: info.mem_total.unwrap_or(0),
            reserved_cpu_millicores: cpu,
            reserved_memory_bytes: memory,
        }])
    }

    /// Each node of the Swarm, with the running tasks of Capstan's services there.
    async fn nodes_holding(&self) -> Result<Vec<ClusterHost>, EngineError> {
        let ours: HashSet<String> = self
            .swarm_services(None)
            .await?
            .into_iter()
            .filter_map(|s| s.id)
            .collect();
        let running = ListTasksOptions {
            filters: Some(HashMap::from([(
                "desired-state".to_string(),
                vec!["running".to_string()],
            )])),
        };
        let tasks = self
            .docker
            .list_tasks(Some(running))
            .await
            .map_err(|e| said("could not list the Swarm's tasks", e))?;
        let mut held: HashMap<String, (u32, i64, i64)> = HashMap::new();
        for task in tasks {
            let runs = task.status.as_ref().and_then(|s| s.state) == Some(TaskState::RUNNING);
            let theirs = task.service_id.as_ref().is_some_and(|s| ours.contains(s));
            let (Some(node), true, true) = (task.node_id.clone(), runs, theirs) else {
                continue;
            };
            let limits = task
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.limits)
                .unwrap_or_default();
            let entry = held.entry(node).or_default();
            entry.0 += 1;
            entry.1 += millicores(limits.nano_cpus.unwrap_or(0));
            entry.2 += limits.memory_bytes.unwrap_or(0);
        }
        let nodes = self
            .docker
            .list_nodes(None)
            .await
            .map_err(|e| said("could not list the Swarm's nodes", e))?;
        Ok(nodes
            .into_iter()
            .map(|node| {
                let id = node.id.unwrap_or_default();
                let (replicas, cpu, memory) = held.get(&id).copied().unwrap_or_default();
                let description = node.description.unwrap_or_default();
                let resources = description.resources.unwrap_or_default();
                let status = node.status.unwrap_or_default();
                ClusterHost {
                    name: description.hostname.unwrap_or(id),
                    address: status.addr.unwrap_or_default(),
                    role: Some(role_of(node.spec.and_then(|s| s.role))),
                    state: state_of(status.state),
                    replicas,
                    cpu_millicores: millicores(resources.nano_cpus.unwrap_or(0)),
                    memory_bytes: resources.memory_bytes.unwrap_or(0),
                    reserved_cpu_millicores: cpu,
                    reserved_memory_bytes: memory,
                }
            })
            .collect())
    }
}
