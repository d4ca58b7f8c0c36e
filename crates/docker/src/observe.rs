//! What runs, from Docker's own account: every workload Capstan made (by its labels) reported
//! once, then again each time Docker's event stream says one of its containers changed. Idle,
//! nothing is asked of the daemon or the store.

use crate::plan::{labelled, of_service, LABEL_ENVIRONMENT, LABEL_ROLE, LABEL_SERVICE};
use bollard::models::{ContainerInspectResponse, ContainerStateStatusEnum, HealthStatusEnum};
use bollard::query_parameters::EventsOptions;
use bollard::Docker;
use domain::ids::{EnvironmentId, ServiceId};
use domain::model::{Endpoint, Replica, RunState, RunningState};
use futures_util::StreamExt;
use std::collections::{BTreeSet, HashMap, HashSet};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::mpsc;

/// Docker's time, or none for its "never" (year 1).
fn when(text: Option<&str>) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text?, &Rfc3339)
        .ok()
        .filter(|t| t.year() > 1)
}

/// A container as a replica of its service: its state in the public API's words; `told_oom`:
/// the daemon's events told of an OOM kill in its current life (its state may not say so, when
/// the kernel's notice came after the exit).
pub fn replica_of(seen: &ContainerInspectResponse, told_oom: bool) -> Replica {
    let state = seen.state.clone().unwrap_or_default();
    let labels = seen
        .config
        .as_ref()
        .and_then(|c| c.labels.clone())
        .unwrap_or_default();
    let job = labels.get(LABEL_ROLE).map(String::as_str) == Some("job");
    let exit_code = state.exit_code;
    let health = state.health.as_ref().and_then(|h| h.status);
    let (run, reason) = match state.status {
        _ if state.oom_killed == Some(true) => (RunState::Error, Some("OOMKilled")),
        Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::RESTARTING)
            if told_oom =>
        {
            (RunState::Error, Some("OOMKilled"))
        }
        Some(ContainerStateStatusEnum::RESTARTING) => (RunState::Error, Some("CrashLoop")),
        Some(ContainerStateStatusEnum::DEAD) => (RunState::Error, Some("Error")),
        Some(ContainerStateStatusEnum::CREATED) => (RunState::Starting, None),
        Some(ContainerStateStatusEnum::REMOVING) => (RunState::Stopping, None),
        Some(ContainerStateStatusEnum::RUNNING) => match health {
            Some(HealthStatusEnum::UNHEALTHY) => (RunState::Warning, Some("Unhealthy")),
            Some(HealthStatusEnum::STARTING) => (RunState::Starting, None),
            _ => (RunState::Running, None),
        },
        Some(ContainerStateStatusEnum::EXITED) if job => {
            if exit_code == Some(0) {
                (RunState::Completed, Some("Completed"))
            } else {
                (RunState::Error, Some("Error"))
            }
        }
        // A service's replica is restarted by Docker when it exits on its own: one that stays
        // exited was stopped (by Capstan, or by hand).
        _ => (RunState::Stopped, None),
    };
    let message = match (run, exit_code) {
        (RunState::Error | RunState::Completed, Some(code)) => {
            Some(format!("exited with code {code}"))
        }
        _ => state.error.clone().filter(|e| !e.is_empty()),
    };
    Replica {
        name: seen
            .name
            .clone()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image: seen
            .config
            .as_ref()
            .and_then(|c| c.image.clone())
            .unwrap_or_default(),
        state: run,
        restart_count: seen.restart_count.unwrap_or(0),
        engine_restarts: seen.restart_count.unwrap_or(0),
        events: Vec::new(),
        started_at: when(state.started_at.as_deref()),
        finished_at: when(state.finished_at.as_deref()),
        exit_code: exit_code.filter(|_| state.status != Some(ContainerStateStatusEnum::RUNNING)),
        reason: reason.map(str::to_string),
        message,
        healthy: match health {
            Some(HealthStatusEnum::HEALTHY) => Some(true),
            Some(HealthStatusEnum::UNHEALTHY) => Some(false),
            _ => None,
        },
        node: None,
    }
}

/// Where the host reaches the ports a running container publishes: at `host`, but for those
/// published on the Docker host's loopback (not publicly accessible), which only that host
/// reaches, and which are told only when `host` is a loopback address too.
fn endpoints_of(seen: &ContainerInspectResponse, host: &str) -> Vec<Endpoint> {
    let host_is_loopback = crate::plan::is_loopback(Some(host));
    let ports = seen
        .network_settings
        .as_ref()
        .and_then(|n| n.ports.clone())
        .unwrap_or_default();
    let mut out: Vec<Endpoint> = ports
        .into_iter()
        .filter_map(|(port, bindings)| {
            let internal = port.split('/').next()?.parse::<u16>().ok()?;
            let published = bindings?
                .iter()
                .filter(|b| host_is_loopback || !crate::plan::is_loopback(b.host_ip.as_deref()))
                .find_map(|b| b.host_port.as_deref()?.parse::<u16>().ok())?;
            Some(Endpoint {
                internal_port: internal,
                host: host.to_string(),
                port: published,
            })
        })
        .collect();
    out.sort_by_key(|e| e.internal_port);
    out
}

/// Reads what runs of one service now; `told_oom`: the containers the daemon's events told
/// were OOM-killed since they last started.
pub async fn report(
    docker: &Docker,
    service: ServiceId,
    environment: EnvironmentId,
    host: &str,
    scope: &[String],
    told_oom: &HashSet<String>,
) -> Result<RunningState, bollard::errors::Error> {
    let mut filters = vec![of_service(service)];
    filters.extend_from_slice(scope);
    let options = labelled(filters);
    let mut replicas = Vec::new();
    let mut endpoints: Vec<Endpoint> = Vec::new();
    for c in docker.list_containers(Some(options)).await? {
        let Some(id) = c.id else { continue };
        let Ok(seen) = docker.inspect_container(&id, None).await else {
            continue;
        };
        // Retired by a redeploy: it finishes its requests, and takes no more.
        if seen
            .name
            .as_deref()
            .is_some_and(crate::rollout::is_retiring)
        {
            continue;
        }
        // Every replica's, for the router to balance over (a link names the first).
        endpoints.extend(endpoints_of(&seen, host));
        replicas.push(replica_of(&seen, told_oom.contains(&id)));
    }
    replicas.sort_by(|a, b| a.name.cmp(&b.name));
    endpoints.sort_by_key(|e| (e.internal_port, e.port));
    endpoints.dedup();
    Ok(RunningState {
        service_id: service,
        environment_id: environment,
        state: RunningState::of(&replicas),
        replicas,
        endpoints,
        observed_at: OffsetDateTime::now_utc(),
        reported_by: None,
    })
}

/// The service and environment a container's labels name.
fn owner(labels: &HashMap<String, String>) -> Option<(ServiceId, EnvironmentId)> {
    let service = labels.get(LABEL_SERVICE)?.parse().ok()?;
    let environment = labels.get(LABEL_ENVIRONMENT)?.parse().ok()?;
    Some((ServiceId(service), EnvironmentId(environment)))
}

/// Sends a report of every service with containers, then one per change, until the daemon's
/// event stream ends or nobody listens.
pub async fn watch(
    docker: Docker,
    host: String,
    scope: Vec<String>,
    reports: mpsc::Sender<RunningState>,
) {
    let ours = [vec![LABEL_SERVICE.to_string()], scope.clone()].concat();
    // Subscribed before the first look, so a change in between is not missed.
    let options = EventsOptions {
        filters: Some(HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("label".to_string(), ours.clone()),
        ])),
        ..Default::default()
    };
    let mut events = docker.events(Some(options));
    let listed = labelled(ours);
    let owners: BTreeSet<(ServiceId, EnvironmentId)> =
        match docker.list_containers(Some(listed)).await {
            Ok(found) => found
                .iter()
                .filter_map(|c| owner(c.labels.as_ref()?))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "could not list Capstan's containers");
                return;
            }
        };
    let mut told_oom = HashSet::new();
    for (service, environment) in owners {
        if let Ok(state) = report(&docker, service, environment, &host, &scope, &told_oom).await {
            if reports.send(state).await.is_err() {
                return;
            }
        }
    }
    while let Some(event) = events.next().await {
        let Ok(event) = event else { return };
        let actor = event.actor.unwrap_or_default();
        if let Some(id) = actor.id {
            match event.action.as_deref() {
                Some("oom") => {
                    told_oom.insert(id);
                }
                Some("start" | "destroy") => {
                    told_oom.remove(&id);
                }
                _ => {}
            }
        }
        let attributes = actor.attributes.unwrap_or_default();
        let Some((service, environment)) = owner(&attributes) else {
            continue;
        };
        match report(&docker, service, environment, &host, &scope, &told_oom).await {
            Ok(state) => {
                if reports.send(state).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!(%service, error = %e, "could not read a service's containers"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerConfig, ContainerState, Health};

    fn container(role: &str, state: ContainerState, restarts: i64) -> ContainerInspectResponse {
        ContainerInspectResponse {
            name: Some("/capstan-x-0".into()),
            restart_count: Some(restarts),
            state: Some(state),
            config: Some(ContainerConfig {
                image: Some("busybox:1".into()),
                labels: Some(HashMap::from([(LABEL_ROLE.to_string(), role.to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn status(status: ContainerStateStatusEnum, exit_code: i64) -> ContainerState {
        ContainerState {
            status: Some(status),
            exit_code: Some(exit_code),
            started_at: Some("2026-11-27T10:00:00.5Z".into()),
            finished_at: Some("0001-01-01T00:00:00Z".into()),
            ..Default::default()
        }
    }

    #[test]
    fn containers_become_replicas_in_the_live_apis_words() {
        use ContainerStateStatusEnum as S;
        let running = replica_of(&container("service", status(S::RUNNING, 0), 2), false);
        assert_eq!(running.state, RunState::Running);
        assert_eq!(running.restart_count, 2);
        assert_eq!(running.name, "capstan-x-0");
        assert_eq!(running.image, "busybox:1");
        assert_eq!(running.exit_code, None, "a running replica has no exit");
        assert!(running.started_at.is_some());
        assert_eq!(running.finished_at, None, "Docker's year 1 is never");

        let looping = replica_of(&container("service", status(S::RESTARTING, 3), 5), false);
        assert_eq!(looping.state, RunState::Error);
        assert_eq!(looping.reason.as_deref(), Some("CrashLoop"));
        assert_eq!(looping.message.as_deref(), Some("exited with code 3"));

        let mut oom = status(S::EXITED, 137);
        oom.oom_killed = Some(true);
        let killed = replica_of(&container("service", oom, 0), false);
        assert_eq!(
            (killed.state, killed.reason.as_deref()),
            (RunState::Error, Some("OOMKilled"))
        );

        // The daemon's notice of the kill came after the exit: its state does not say so.
        let told = replica_of(&container("service", status(S::EXITED, 137), 0), true);
        assert_eq!(
            (told.state, told.reason.as_deref()),
            (RunState::Error, Some("OOMKilled"))
        );
        let started_again = replica_of(&container("service", status(S::RUNNING, 0), 1), true);
        assert_eq!(started_again.state, RunState::Running);

        let stopped = replica_of(&container("service", status(S::EXITED, 137), 0), false);
        assert_eq!(
            stopped.state,
            RunState::Stopped,
            "stopped, by Capstan or by hand"
        );

        let mut sick = status(S::RUNNING, 0);
        sick.health = Some(Health {
            status: Some(HealthStatusEnum::UNHEALTHY),
            ..Default::default()
        });
        let unhealthy = replica_of(&container("service", sick, 0), false);
        assert_eq!(
            (unhealthy.state, unhealthy.healthy),
            (RunState::Warning, Some(false))
        );

        let done = replica_of(&container("job", status(S::EXITED, 0), 0), false);
        assert_eq!(done.state, RunState::Completed);
        let failed = replica_of(&container("job", status(S::EXITED, 4), 0), false);
        assert_eq!((failed.state, failed.exit_code), (RunState::Error, Some(4)));
    }
}
