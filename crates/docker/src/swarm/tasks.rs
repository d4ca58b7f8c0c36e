//! What runs of Capstan's services on a Swarm, as its managers see it: each service's current
//! tasks as its replicas (with the node each runs on), and where the router reaches them: each
//! running task's host-mode ports at its node's address, while its node answers.

use super::spec::LABEL_RETIRING;
use crate::plan::{self, LABEL_ENVIRONMENT, LABEL_ROLE, LABEL_SERVICE};
use bollard::models::{
    EndpointPortConfigPublishModeEnum, Node, NodeState, Service, Task, TaskState,
};
use bollard::query_parameters::{EventsOptions, ListServicesOptions, ListTasksOptions};
use bollard::Docker;
use domain::ids::{EnvironmentId, ServiceId};
use domain::model::{Endpoint, Replica, RunState, RunningState};
use futures_util::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::mpsc;

/// How often the watcher looks at the tasks between the Swarm's events: a task's changes
/// (started, failed, moved off a lost node) are not among the events a manager sends, only
/// its services' and nodes'.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Capstan's Swarm services among those `scope` narrows to; only those of `of` when it says.
pub(crate) async fn services(
    docker: &Docker,
    scope: &[String],
    of: Option<ServiceId>,
) -> Result<Vec<Service>, bollard::errors::Error> {
    // Swarm reads label filters into a map by key: `capstan.service` and
    // `capstan.service=<id>` together would keep one of them, either.
    let mut labels = vec![of.map_or_else(|| LABEL_SERVICE.to_string(), plan::of_service)];
    labels.extend_from_slice(scope);
    let options = ListServicesOptions {
        filters: Some(HashMap::from([("label".to_string(), labels)])),
        ..Default::default()
    };
    docker.list_services(Some(options)).await
}

/// What runs of every Capstan service on the Swarm now.
pub(crate) async fn look(
    docker: &Docker,
    scope: &[String],
) -> Result<Vec<RunningState>, bollard::errors::Error> {
    let services = services(docker, scope, None).await?;
    if services.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = services.iter().filter_map(|s| s.id.clone()).collect();
    let options = ListTasksOptions {
        filters: Some(HashMap::from([("service".to_string(), ids)])),
    };
    let tasks = docker.list_tasks(Some(options)).await?;
    let nodes = docker.list_nodes(None).await?;
    Ok(states(&services, &tasks, &nodes))
}

/// Sends what runs of every service on the Swarm, then each change, until the manager's
/// event stream ends or nobody listens. A service whose Swarm services are all gone is told
/// once as stopped.
pub(crate) async fn watch(docker: Docker, scope: Vec<String>, reports: mpsc::Sender<RunningState>) {
    let options = EventsOptions {
        filters: Some(HashMap::from([(
            "type".to_string(),
            vec!["service".to_string(), "node".to_string()],
        )])),
        ..Default::default()
    };
    let mut events = docker.events(Some(options));
    let mut told: HashMap<ServiceId, RunningState> = HashMap::new();
    loop {
        match look(&docker, &scope).await {
            Ok(states) => {
                let mut gone: Vec<ServiceId> = told.keys().copied().collect();
                for state in states {
                    gone.retain(|id| *id != state.service_id);
                    if told.get(&state.service_id).is_some_and(|t| same(t, &state)) {
                        continue;
                    }
                    told.insert(state.service_id, state.clone());
                    if reports.send(state).await.is_err() {
                        return;
                    }
                }
                for id in gone {
                    let Some(mut last) = told.remove(&id) else {
                        continue;
                    };
                    last.state = RunState::Stopped;
                    last.replicas.clear();
                    last.endpoints.clear();
                    last.observed_at = OffsetDateTime::now_utc();
                    if reports.send(last).await.is_err() {
                        return;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the Swarm's tasks"),
        }
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(_)) => {}
                _ => return,
            },
            () = tokio::time::sleep(LOOK_EVERY) => {}
            () = reports.closed() => return,
        }
    }
}

/// Whether two reports of a service tell the same (whenever they were made).
fn same(a: &RunningState, b: &RunningState) -> bool {
    a.state == b.state && a.replicas == b.replicas && a.endpoints == b.endpoints
}

/// A Swarm node as its tasks need it: its host name and address, and whether it answers.
struct NodeSeen<'a> {
    hostname: &'a str,
    address: &'a str,
    ready: bool,
}

fn nodes_by_id(nodes: &[Node]) -> HashMap<&str, NodeSeen<'_>> {
    nodes
        .iter()
        .filter_map(|n| {
            let status = n.status.as_ref();
            Some((
                n.id.as_deref()?,
                NodeSeen {
                    hostname: n
                        .description
                        .as_ref()
                        .and_then(|d| d.hostname.as_deref())
                        .unwrap_or_default(),
                    address: status.and_then(|s| s.addr.as_deref()).unwrap_or_default(),
                    ready: status.and_then(|s| s.state) == Some(NodeState::READY),
                },
            ))
        })
        .collect()
}

/// A Swarm service's name.
pub(crate) fn name_of(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.name.as_deref())
        .unwrap_or_default()
}

/// Whether a Swarm service runs a job's executions (its tasks run to their end).
pub(crate) fn is_job(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.labels.as_ref())
        .and_then(|l| l.get(LABEL_ROLE))
        .is_some_and(|role| role == "job")
}

/// The Capstan service and environment a Swarm service runs, and whether it is retiring.
fn owner(service: &Service) -> Option<(ServiceId, EnvironmentId, bool)> {
    let labels = service.spec.as_ref()?.labels.as_ref()?;
    let id = labels.get(LABEL_SERVICE)?.parse().ok()?;
    let environment = labels.get(LABEL_ENVIRONMENT)?.parse().ok()?;
    Some((
        ServiceId(id),
        EnvironmentId(environment),
        labels.contains_key(LABEL_RETIRING),
    ))
}

fn when(text: Option<&str>) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text?, &Rfc3339)
        .ok()
        .filter(|t| t.year() > 1)
}

/// A task the Swarm wants running (a job's: its latest), as a replica: `earlier` failed tasks
/// of its slot are its restarts (Swarm replaces a task that fails with a new one).
fn replica_of(
    task: &Task,
    name: &str,
    node: Option<&NodeSeen<'_>>,
    earlier: i64,
    job: bool,
) -> Replica {
    let status = task.status.clone().unwrap_or_default();
    let message = status
        .err
        .clone()
        .filter(|e| !e.is_empty())
        .or(status.message.clone().filter(|m| !m.is_empty()));
    let (state, reason) = match status.state {
        Some(TaskState::RUNNING) if node.is_some_and(|n| !n.ready) => {
            (RunState::Warning, Some("NodeDown"))
        }
        Some(TaskState::RUNNING) => (RunState::Running, None),
        Some(TaskState::FAILED | TaskState::REJECTED) => (RunState::Error, Some("Error")),
        Some(TaskState::COMPLETE) if job => (RunState::Completed, Some("Completed")),
        Some(TaskState::COMPLETE) => (RunState::Stopped, None),
        Some(TaskState::SHUTDOWN | TaskState::REMOVE | TaskState::ORPHANED) => {
            (RunState::Stopping, None)
        }
        _ => (RunState::Starting, None),
    };
    let container = status.container_status.as_ref();
    Replica {
        name: format!("{name}.{}", task.slot.unwrap_or(0)),
        image: task
            .spec
            .as_ref()
            .and_then(|s| s.container_spec.as_ref())
            .and_then(|c| c.image.clone())
            .unwrap_or_default(),
        state,
        restart_count: earlier,
        engine_restarts: earlier,
        events: Vec::new(),
        started_at: (state == RunState::Running)
            .then(|| when(status.timestamp.as_deref()))
            .flatten(),
        finished_at: None,
        exit_code: container
            .and_then(|c| c.exit_code)
            .filter(|_| state == RunState::Error),
        reason: reason.map(str::to_string),
        message,
        healthy: None,
        node: node.map(|n| n.hostname.to_string()),
    }
}

/// The newest task of each slot (a job's tasks are all done or failed but the last).
fn latest_of_each_slot<'a, 'b>(tasks: &'b [&'a Task]) -> Vec<&'b &'a Task> {
    let mut latest: BTreeMap<i64, &&Task> = BTreeMap::new();
    for task in tasks {
        let slot = task.slot.unwrap_or(0);
        let newer = latest.get(&slot).is_none_or(|kept| {
            task.version.as_ref().and_then(|v| v.index)
                > kept.version.as_ref().and_then(|v| v.index)
        });
        if newer {
            latest.insert(slot, task);
        }
    }
    latest.into_values().collect()
}

/// Where the router reaches a running task: each host-mode port at its node's address
/// (listed once per address family by Swarm), while the node answers.
fn endpoints_of(task: &Task, node: Option<&NodeSeen<'_>>) -> Vec<Endpoint> {
    let status = task.status.as_ref();
    let Some(node) = node.filter(|n| n.ready && !n.address.is_empty()) else {
        return Vec::new();
    };
    if status.and_then(|s| s.state) != Some(TaskState::RUNNING) {
        return Vec::new();
    }
    let ports = status
        .and_then(|s| s.port_status.as_ref())
        .and_then(|p| p.ports.clone())
        .unwrap_or_default();
    let mut out: Vec<Endpoint> = ports
        .iter()
        .filter(|p| p.publish_mode == Some(EndpointPortConfigPublishModeEnum::HOST))
        .filter_map(|p| {
            Some(Endpoint {
                internal_port: u16::try_from(p.target_port?).ok()?,
                host: node.address.to_string(),
                port: u16::try_from(p.published_port?).ok()?,
            })
        })
        .collect();
    out.sort_by_key(|e| (e.internal_port, e.port));
    out.dedup();
    out
}

/// What runs of each Capstan service that has Swarm services: the current tasks of its
/// generations that are not retiring (none: stopped), with their endpoints.
pub(crate) fn states(services: &[Service], tasks: &[Task], nodes: &[Node]) -> Vec<RunningState> {
    let nodes = nodes_by_id(nodes);
    let mut by_owner: BTreeMap<(ServiceId, EnvironmentId), RunningState> = BTreeMap::new();
    let now = OffsetDateTime::now_utc();
    for service in services {
        let Some((id, environment, retiring)) = owner(service) else {
            continue;
        };
        let state = by_owner
            .entry((id, environment))
            .or_insert_with(|| RunningState {
                service_id: id,
                environment_id: environment,
                state: RunState::Stopped,
                replicas: Vec::new(),
                endpoints: Vec::new(),
                observed_at: now,
                reported_by: None,
            });
        if retiring {
            continue;
        }
        let swarm_id = service.id.as_deref().unwrap_or_default();
        let name = name_of(service);
        let of_service: Vec<&Task> = tasks
            .iter()
            .filter(|t| t.service_id.as_deref() == Some(swarm_id))
            .collect();
        let job = is_job(service);
        let current: Vec<&&Task> = if job {
            latest_of_each_slot(&of_service)
        } else {
            of_service
                .iter()
                .filter(|t| t.desired_state == Some(TaskState::RUNNING))
                .collect()
        };
        for task in current {
            let node = task.node_id.as_deref().and_then(|n| nodes.get(n));
            let earlier = of_service
                .iter()
                .filter(|t| t.slot == task.slot && t.id != task.id)
                .filter(|t| {
                    matches!(
                        t.status.as_ref().and_then(|s| s.state),
                        Some(TaskState::FAILED | TaskState::REJECTED)
                    )
                })
                .count();
            state.replicas.push(replica_of(
                task,
                name,
                node,
                i64::try_from(earlier).unwrap_or(0),
                job,
            ));
            state.endpoints.extend(endpoints_of(task, node));
        }
    }
    by_owner
        .into_values()
        .map(|mut s| {
            s.replicas.sort_by(|a, b| a.name.cmp(&b.name));
            s.endpoints
                .sort_by_key(|e| (e.internal_port, e.host.clone(), e.port));
            s.state = RunningState::of(&s.replicas);
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{
        EndpointPortConfig, NodeDescription, NodeStatus, PortStatus, ServiceSpec, TaskStatus,
    };

    fn node(id: &str, address: &str, state: NodeState) -> Node {
        Node {
            id: Some(id.into()),
            description: Some(NodeDescription {
                hostname: Some(format!("host-{id}")),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                state: Some(state),
                addr: Some(address.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn service(swarm_id: &str, retiring: bool) -> Service {
        let mut labels = HashMap::from([
            (
                LABEL_SERVICE.to_string(),
                "6f1d2c1e-0000-4000-8000-000000000001".to_string(),
            ),
            (
                LABEL_ENVIRONMENT.to_string(),
                "6f1d2c1e-0000-4000-8000-000000000002".to_string(),
            ),
        ]);
        if retiring {
            labels.insert(LABEL_RETIRING.into(), "true".into());
        }
        Service {
            id: Some(swarm_id.into()),
            spec: Some(ServiceSpec {
                name: Some(format!("capstan-s-{swarm_id}")),
                labels: Some(labels),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn task(id: &str, of: &str, slot: i64, on: &str, desired: TaskState, state: TaskState) -> Task {
        let port = |published| EndpointPortConfig {
            target_port: Some(8080),
            published_port: Some(published),
            publish_mode: Some(EndpointPortConfigPublishModeEnum::HOST),
            ..Default::default()
        };
        Task {
            id: Some(id.into()),
            service_id: Some(of.into()),
            slot: Some(slot),
            node_id: Some(on.into()),
            desired_state: Some(desired),
            status: Some(TaskStatus {
                state: Some(state),
                err: (state == TaskState::FAILED).then(|| "task: non-zero exit (3)".into()),
                // Swarm lists a host-mode port once per address family.
                port_status: Some(PortStatus {
                    ports: Some(vec![port(30001 + slot), port(30001 + slot)]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn running_tasks_are_replicas_reached_at_their_nodes() {
        use TaskState as T;
        let nodes = [
            node("n1", "10.0.0.11", NodeState::READY),
            node("n2", "10.0.0.12", NodeState::READY),
        ];
        let tasks = [
            task("a", "g1", 1, "n1", T::RUNNING, T::RUNNING),
            task("b", "g1", 2, "n2", T::RUNNING, T::RUNNING),
            task("old", "g1", 2, "n2", T::SHUTDOWN, T::FAILED),
        ];
        let states = states(&[service("g1", false)], &tasks, &nodes);
        assert_eq!(states.len(), 1);
        let s = &states[0];
        assert_eq!(s.state, RunState::Running);
        let on: Vec<_> = s.replicas.iter().map(|r| r.node.as_deref()).collect();
        assert_eq!(on, [Some("host-n1"), Some("host-n2")]);
        assert_eq!(s.replicas[0].name, "capstan-s-g1.1");
        assert_eq!(s.replicas[1].restart_count, 1, "a failed task replaced");
        let at: Vec<_> = s
            .endpoints
            .iter()
            .map(|e| (e.host.as_str(), e.port))
            .collect();
        assert_eq!(at, [("10.0.0.11", 30002), ("10.0.0.12", 30003)]);
    }

    #[test]
    fn a_lost_nodes_tasks_are_not_routed_to() {
        use TaskState as T;
        let nodes = [
            node("n1", "10.0.0.11", NodeState::READY),
            node("n2", "10.0.0.12", NodeState::DOWN),
        ];
        let tasks = [
            task("a", "g1", 1, "n1", T::RUNNING, T::RUNNING),
            task("b", "g1", 2, "n2", T::RUNNING, T::RUNNING),
        ];
        let s = &states(&[service("g1", false)], &tasks, &nodes)[0];
        assert_eq!(s.endpoints.len(), 1);
        assert_eq!(s.endpoints[0].host, "10.0.0.11");
        assert_eq!(s.replicas[1].state, RunState::Warning);
        assert_eq!(s.state, RunState::Warning);
    }

    #[test]
    fn a_jobs_latest_task_is_its_execution() {
        use TaskState as T;
        let nodes = [node("n1", "10.0.0.11", NodeState::READY)];
        let mut job = service("g3", false);
        job.spec
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_ROLE.into(), "job".into());
        let versioned = |mut t: Task, index: u64| {
            t.version = Some(bollard::models::ObjectVersion { index: Some(index) });
            t
        };
        let tasks = [
            versioned(task("first", "g3", 1, "n1", T::COMPLETE, T::FAILED), 10),
            versioned(task("second", "g3", 1, "n1", T::COMPLETE, T::COMPLETE), 20),
        ];
        let s = &states(&[job], &tasks, &nodes)[0];
        assert_eq!(s.replicas.len(), 1);
        assert_eq!(s.state, RunState::Completed);
        assert_eq!(
            s.replicas[0].restart_count, 1,
            "one failed execution before"
        );
        assert!(s.endpoints.is_empty());
    }

    #[test]
    fn a_retiring_generation_is_left_out_and_none_left_is_stopped() {
        use TaskState as T;
        let nodes = [node("n1", "10.0.0.11", NodeState::READY)];
        let tasks = [task("a", "g1", 1, "n1", T::RUNNING, T::RUNNING)];
        let s = &states(&[service("g1", true)], &tasks, &nodes)[0];
        assert_eq!(s.state, RunState::Stopped);
        assert!(s.replicas.is_empty() && s.endpoints.is_empty());

        let failing = [task("f", "g2", 1, "n1", T::RUNNING, T::FAILED)];
        let s = &states(&[service("g2", false)], &failing, &nodes)[0];
        assert_eq!(s.state, RunState::Error);
        assert_eq!(
            s.replicas[0].message.as_deref(),
            Some("task: non-zero exit (3)")
        );
        assert!(s.endpoints.is_empty());
    }
}
