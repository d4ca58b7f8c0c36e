//! What each running replica consumes, from Docker's statistics (one reading: Docker samples
//! twice a second apart to tell CPU use), against the limits its container was given.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::running_replicas::RunningReplica;
use bollard::models::{ContainerInspectResponse, ContainerStatsResponse};
use bollard::query_parameters::StatsOptions;
use bollard::Docker;
use domain::engine::{EngineError, ReplicaUsage};
use domain::model::Service;
use futures_util::StreamExt;

/// CPU used between Docker's two samples, in millicores.
#[allow(clippy::cast_precision_loss)]
fn cpu_millicores(stats: &ContainerStatsResponse) -> f64 {
    let (Some(now), Some(before)) = (&stats.cpu_stats, &stats.precpu_stats) else {
        return 0.0;
    };
    let total = |s: &bollard::models::ContainerCpuStats| {
        s.cpu_usage
            .as_ref()
            .and_then(|u| u.total_usage)
            .unwrap_or(0)
    };
    let used = total(now).saturating_sub(total(before));
    let system = now
        .system_cpu_usage
        .unwrap_or(0)
        .saturating_sub(before.system_cpu_usage.unwrap_or(0));
    let cpus = now.online_cpus.unwrap_or(1).max(1);
    if system == 0 {
        return 0.0;
    }
    used as f64 / system as f64 * f64::from(cpus) * 1000.0
}

/// Memory in use as `docker stats` counts it: less the page cache the kernel may drop
/// (`inactive_file` on cgroup v2, `total_inactive_file` on v1).
fn memory_bytes(stats: &ContainerStatsResponse) -> u64 {
    let Some(memory) = &stats.memory_stats else {
        return 0;
    };
    let usage = memory.usage.unwrap_or(0);
    let cache = memory
        .stats
        .as_ref()
        .and_then(|s| {
            s.get("inactive_file")
                .or_else(|| s.get("total_inactive_file"))
        })
        .copied()
        .unwrap_or(0);
    usage.saturating_sub(cache)
}

/// The container's CPU limit in millicores and memory limit in bytes (none: unlimited).
#[allow(clippy::cast_precision_loss)]
fn limits(seen: &ContainerInspectResponse) -> (Option<f64>, Option<u64>) {
    let host = seen.host_config.clone().unwrap_or_default();
    let nano = host.nano_cpus.filter(|n| *n > 0).map(|n| n as f64 / 1e6);
    let quota = match (host.cpu_quota, host.cpu_period) {
        (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64 * 1000.0),
        _ => None,
    };
    let memory = host
        .memory
        .filter(|m| *m > 0)
        .and_then(|m| u64::try_from(m).ok());
    (nano.or(quota), memory)
}

/// One replica's reading.
async fn usage_of(
    docker: &Docker,
    replica: &RunningReplica<'_>,
) -> Result<ReplicaUsage, EngineError> {
    let reading = StatsOptions {
        stream: false,
        one_shot: false,
    };
    let stats = docker
        .stats(&replica.container, Some(reading))
        .next()
        .await
        .ok_or("Docker gave no statistics")?
        .map_err(|e| said("could not read the replica's statistics", e))?;
    let seen = docker
        .inspect_container(&replica.container, None)
        .await
        .map_err(|e| said("could not inspect the replica", e))?;
    let (cpu_limit, memory_limit) = limits(&seen);
    let storage = volumes_used(docker, &replica.container, &seen).await;
    Ok(ReplicaUsage {
        replica: replica.name.clone(),
        node: replica.node.clone(),
        cpu_millicores: (cpu_millicores(&stats) * 10.0).round() / 10.0,
        cpu_limit_millicores: cpu_limit,
        memory_bytes: memory_bytes(&stats),
        memory_limit_bytes: memory_limit,
        storage,
    })
}

/// How long reading a replica's volumes' use may take.
const DU_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Each named volume the replica mounts, with what `du` inside it says it holds; none when
/// its image has no `du` or it takes too long (Docker itself tells a volume's size only by
/// reckoning every volume of the daemon).
async fn volumes_used(
    docker: &Docker,
    container: &str,
    seen: &ContainerInspectResponse,
) -> Vec<(String, u64)> {
    let mut used = Vec::new();
    let volumes = seen
        .mounts
        .iter()
        .flatten()
        .filter(|m| m.typ.as_deref() == Some("volume"));
    for mount in volumes {
        let (Some(name), Some(at)) = (&mount.name, &mount.destination) else {
            continue;
        };
        let du = ["du".to_string(), "-sk".to_string(), at.clone()];
        let Ok(ran) = crate::exec::run(docker, container, &du, &[], None, DU_TIMEOUT).await else {
            continue;
        };
        let kib = String::from_utf8_lossy(&ran.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok());
        if let (true, Some(kib)) = (ran.succeeded(), kib) {
            used.push((name.clone(), kib * 1024));
        }
    }
    used
}

impl DockerEngine {
    /// Each running replica's reading, taken side by side; a replica Capstan cannot reach
    /// (its node's daemon not named) or that ended meanwhile is left out.
    pub(crate) async fn usage(&self, service: &Service) -> Result<Vec<ReplicaUsage>, EngineError> {
        let replicas = self.running_replicas(service.id).await?;
        let readings = replicas.iter().filter_map(|r| {
            let docker = r.docker.as_ref().ok()?;
            Some(usage_of(docker, r))
        });
        let read = futures_util::future::join_all(readings).await;
        let mut found = Vec::new();
        for reading in read {
            match reading {
                Ok(usage) => found.push(usage),
                Err(e) => tracing::debug!(error = %e, "a replica's statistics could not be read"),
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerCpuStats, ContainerCpuUsage, ContainerMemoryStats, HostConfig};
    use std::collections::HashMap;

    fn cpu(total: u64, system: u64) -> ContainerCpuStats {
        ContainerCpuStats {
            cpu_usage: Some(ContainerCpuUsage {
                total_usage: Some(total),
                ..Default::default()
            }),
            system_cpu_usage: Some(system),
            online_cpus: Some(2),
            ..Default::default()
        }
    }

    #[test]
    fn cpu_and_memory_are_read_as_docker_stats_reads_them() {
        let stats = ContainerStatsResponse {
            // A quarter of the machine's time over two cores: half a core.
            precpu_stats: Some(cpu(1_000, 10_000)),
            cpu_stats: Some(cpu(3_500, 20_000)),
            memory_stats: Some(ContainerMemoryStats {
                usage: Some(100 << 20),
                stats: Some(HashMap::from([("inactive_file".to_string(), 20 << 20)])),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!((cpu_millicores(&stats) - 500.0).abs() < 0.01);
        assert_eq!(memory_bytes(&stats), 80 << 20);
        assert_eq!(cpu_millicores(&ContainerStatsResponse::default()), 0.0);
    }

    #[test]
    fn limits_come_from_the_containers_own() {
        let with = |host: HostConfig| ContainerInspectResponse {
            host_config: Some(host),
            ..Default::default()
        };
        let set = with(HostConfig {
            nano_cpus: Some(250_000_000),
            memory: Some(64 << 20),
            ..Default::default()
        });
        assert_eq!(limits(&set), (Some(250.0), Some(64 << 20)));
        let quota = with(HostConfig {
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            ..Default::default()
        });
        assert_eq!(limits(&quota), (Some(500.0), None));
        assert_eq!(limits(&with(HostConfig::default())), (None, None));
    }
}
