//! What one generation of a service's replicas is on a Swarm: a replicated Swarm service made
//! from the plan of its replicas on one host, its ports published in host mode on each task's
//! node (no ingress mesh: it needs IPVS), found by name on its environment's overlay network
//! through DNS round-robin (no virtual IP, for the same reason).

use crate::plan::{ContainerPlan, LABEL_REPLICA};
use bollard::models::{
    EndpointPortConfig, EndpointPortConfigProtocolEnum, EndpointPortConfigPublishModeEnum,
    EndpointSpec, EndpointSpecModeEnum, Limit, Mount, MountType, MountVolumeOptions,
    NetworkAttachmentConfig, ResourceObject, ServiceSpec, ServiceSpecMode,
    ServiceSpecModeReplicated, ServiceSpecModeReplicatedJob, ServiceSpecRollbackConfig,
    ServiceSpecRollbackConfigFailureActionEnum, ServiceSpecRollbackConfigOrderEnum,
    ServiceSpecUpdateConfig, ServiceSpecUpdateConfigFailureActionEnum,
    ServiceSpecUpdateConfigOrderEnum, TaskSpec, TaskSpecContainerSpec, TaskSpecResources,
    TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum,
};
use domain::ids::ServiceId;
use std::time::Duration;

/// Set on a generation the router no longer sends requests to: it finishes those in flight,
/// then goes.
pub(crate) const LABEL_RETIRING: &str = "capstan.retiring";

/// How long Swarm waits before it starts a task again, on its node or (the node lost)
/// elsewhere: a second, where its default of five would add four to every failover.
pub(crate) const RESTART_DELAY: Duration = Duration::from_secs(1);

/// How long an updated task must run before Swarm updates the next one (or rolls back).
const UPDATE_MONITOR: Duration = Duration::from_secs(5);

/// The Swarm service of one generation of a service's replicas.
pub(crate) fn service_name(service: ServiceId, generation: &str) -> String {
    format!("capstan-{}-{generation}", service.0.simple())
}

/// The name the other services of its environment reach every generation of it at (the
/// name its replicas have on one host, without their number).
pub(crate) fn alias(service: ServiceId) -> String {
    format!("capstan-{}", service.0.simple())
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The Swarm service running `plans` (the replicas of one generation, which differ only in
/// their number) as `name`, reached at `alias` on their environment's network; a task stopped
/// is given `grace_seconds` to finish. None: nothing to run.
pub(crate) fn service_spec(
    plans: &[ContainerPlan],
    name: &str,
    alias: &str,
    grace_seconds: i64,
) -> Option<ServiceSpec> {
    let first = plans.first()?;
    let mut labels = first.labels.clone();
    labels.remove(LABEL_REPLICA);
    let ports = first
        .ports
        .iter()
        .map(|p| EndpointPortConfig {
            protocol: Some(EndpointPortConfigProtocolEnum::TCP),
            target_port: Some(i64::from(p.internal)),
            // None: each task gets a port of its own, so two can share a node.
            published_port: None,
            publish_mode: Some(EndpointPortConfigPublishModeEnum::HOST),
            ..Default::default()
        })
        .collect();
    let mut aliases = vec![alias.to_string()];
    aliases.extend(first.aliases.iter().cloned());
    let container = TaskSpecContainerSpec {
        image: Some(first.image.clone()),
        // Its containers carry Capstan's labels too: each node's daemon follows their output.
        labels: Some(labels.clone()),
        command: first.entrypoint.clone(),
        args: first.cmd.clone(),
        env: Some(first.env.clone()),
        init: Some(first.init),
        stop_grace_period: Some(grace_seconds.max(0).saturating_mul(1_000_000_000)),
        // A named volume of the node the task runs on (a pinned database's data), never a
        // host path.
        mounts: first.volume.as_ref().map(|v| {
            vec![Mount {
                typ: Some(MountType::VOLUME),
                source: Some(v.name.clone()),
                target: Some(v.target.clone()),
                volume_options: Some(MountVolumeOptions {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }]
        }),
        ..Default::default()
    };
    let resources = TaskSpecResources {
        limits: Some(Limit {
            nano_cpus: Some(first.nano_cpus),
            memory_bytes: Some(first.memory_bytes),
            ..Default::default()
        }),
        reservations: Some(ResourceObject {
            nano_cpus: Some(first.nano_cpus),
            memory_bytes: Some(first.memory_bytes),
            ..Default::default()
        }),
        ..Default::default()
    };
    Some(ServiceSpec {
        name: Some(name.to_string()),
        labels: Some(labels),
        task_template: Some(TaskSpec {
            container_spec: Some(container),
            resources: Some(resources),
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::ANY),
                delay: Some(nanos(RESTART_DELAY)),
                max_attempts: Some(0),
                ..Default::default()
            }),
            networks: Some(vec![NetworkAttachmentConfig {
                target: Some(first.network.clone()),
                aliases: Some(aliases),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated {
                replicas: Some(i64::try_from(plans.len()).unwrap_or(1)),
            }),
            ..Default::default()
        }),
        // What Swarm itself updates (a restart, a task moved) starts the new task first and
        // rolls back when it fails.
        update_config: Some(ServiceSpecUpdateConfig {
            parallelism: Some(1),
            order: Some(ServiceSpecUpdateConfigOrderEnum::START_FIRST),
            failure_action: Some(ServiceSpecUpdateConfigFailureActionEnum::ROLLBACK),
            monitor: Some(nanos(UPDATE_MONITOR)),
            ..Default::default()
        }),
        rollback_config: Some(ServiceSpecRollbackConfig {
            parallelism: Some(1),
            order: Some(ServiceSpecRollbackConfigOrderEnum::START_FIRST),
            failure_action: Some(ServiceSpecRollbackConfigFailureActionEnum::PAUSE),
            ..Default::default()
        }),
        endpoint_spec: Some(EndpointSpec {
            mode: Some(EndpointSpecModeEnum::DNSRR),
            ports: Some(ports),
        }),
        ..Default::default()
    })
}

/// The replicated-job Swarm service of one run of a job: one task run to its end, started
/// again on failure up to `restarts` times; its port (Capstan's probe's) not published.
pub(crate) fn job_spec(
    execution: &ContainerPlan,
    name: &str,
    alias: &str,
    grace_seconds: i64,
    restarts: i64,
) -> Option<ServiceSpec> {
    let mut spec = service_spec(std::slice::from_ref(execution), name, alias, grace_seconds)?;
    spec.mode = Some(ServiceSpecMode {
        replicated_job: Some(ServiceSpecModeReplicatedJob {
            max_concurrent: Some(1),
            total_completions: Some(1),
        }),
        ..Default::default()
    });
    // Swarm refuses an update policy for a job; a job is run anew, never updated.
    spec.update_config = None;
    spec.rollback_config = None;
    spec.endpoint_spec = Some(EndpointSpec {
        mode: Some(EndpointSpecModeEnum::DNSRR),
        ports: None,
    });
    if let Some(task) = spec.task_template.as_mut() {
        task.restart_policy = Some(TaskSpecRestartPolicy {
            condition: Some(TaskSpecRestartPolicyConditionEnum::ON_FAILURE),
            delay: Some(0),
            max_attempts: Some(restarts.max(0)),
            ..Default::default()
        });
    }
    Some(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{PlannedPort, LABEL_SERVICE};
    use std::collections::HashMap;

    fn replica(number: usize) -> ContainerPlan {
        ContainerPlan {
            name: format!("capstan-x-{number}"),
            image: "busybox:1".into(),
            entrypoint: Some(vec!["sh".into()]),
            cmd: Some(vec!["-c".into(), "httpd -f".into()]),
            env: vec!["A=1".into()],
            labels: HashMap::from([
                (LABEL_SERVICE.to_string(), "s".to_string()),
                (LABEL_REPLICA.to_string(), number.to_string()),
            ]),
            ports: vec![PlannedPort {
                internal: 8080,
                host: Some(30000),
                public: true,
            }],
            files: Vec::new(),
            nano_cpus: 500_000_000,
            memory_bytes: 256 << 20,
            restarts: true,
            init: true,
            publish_address: "0.0.0.0".into(),
            volume: None,
            network: "capstan-env-e".into(),
            aliases: vec!["db-host".into()],
        }
    }

    #[test]
    fn replicas_become_one_replicated_service_published_in_host_mode() {
        let spec = service_spec(&[replica(0), replica(1)], "capstan-s-gen", "capstan-s", 30)
            .expect("a spec");
        assert_eq!(spec.name.as_deref(), Some("capstan-s-gen"));
        let labels = spec.labels.unwrap();
        assert_eq!(labels.get(LABEL_SERVICE).map(String::as_str), Some("s"));
        assert!(!labels.contains_key(LABEL_REPLICA), "one service for all");
        let mode = spec.mode.unwrap().replicated.unwrap();
        assert_eq!(mode.replicas, Some(2));
        let endpoint = spec.endpoint_spec.unwrap();
        assert_eq!(endpoint.mode, Some(EndpointSpecModeEnum::DNSRR));
        let port = &endpoint.ports.unwrap()[0];
        assert_eq!(port.target_port, Some(8080));
        assert_eq!(port.published_port, None, "each task a port of its own");
        assert_eq!(
            port.publish_mode,
            Some(EndpointPortConfigPublishModeEnum::HOST)
        );
        let task = spec.task_template.unwrap();
        let container = task.container_spec.unwrap();
        assert_eq!(container.command, Some(vec!["sh".to_string()]));
        assert_eq!(container.stop_grace_period, Some(30_000_000_000));
        assert_eq!(container.init, Some(true));
        let network = &task.networks.unwrap()[0];
        assert_eq!(network.target.as_deref(), Some("capstan-env-e"));
        assert_eq!(
            network.aliases,
            Some(vec!["capstan-s".to_string(), "db-host".to_string()])
        );
        let resources = task.resources.unwrap();
        assert_eq!(resources.limits.unwrap().nano_cpus, Some(500_000_000));
        assert_eq!(
            resources.reservations.unwrap().memory_bytes,
            Some(256 << 20)
        );
        let restart = task.restart_policy.unwrap();
        assert_eq!(
            restart.condition,
            Some(TaskSpecRestartPolicyConditionEnum::ANY)
        );
        assert_eq!(restart.delay, Some(1_000_000_000));
        let update = spec.update_config.unwrap();
        assert_eq!(
            update.order,
            Some(ServiceSpecUpdateConfigOrderEnum::START_FIRST)
        );
        assert_eq!(
            update.failure_action,
            Some(ServiceSpecUpdateConfigFailureActionEnum::ROLLBACK)
        );
    }

    #[test]
    fn a_jobs_run_is_one_replicated_job_restarted_on_failure() {
        let spec = job_spec(&replica(0), "capstan-j-run", "capstan-j", 10, 2).expect("a spec");
        let job = spec.mode.unwrap().replicated_job.unwrap();
        assert_eq!(
            (job.max_concurrent, job.total_completions),
            (Some(1), Some(1))
        );
        assert!(spec.update_config.is_none(), "Swarm refuses it for a job");
        assert_eq!(spec.endpoint_spec.unwrap().ports, None, "nothing published");
        let restart = spec.task_template.unwrap().restart_policy.unwrap();
        assert_eq!(
            restart.condition,
            Some(TaskSpecRestartPolicyConditionEnum::ON_FAILURE)
        );
        assert_eq!(restart.max_attempts, Some(2));
    }

    #[test]
    fn nothing_to_run_is_no_service() {
        assert!(service_spec(&[], "n", "a", 1).is_none());
    }
}
