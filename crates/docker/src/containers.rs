//! The containers the engine makes: found by their labels, created from a plan, restarted,
//! stopped, removed, and run to their end.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::plan::{self, ContainerPlan, LABEL_ROLE};
use bollard::models::ContainerSummary;
use bollard::query_parameters::{
    CreateContainerOptions, LogsOptions, RemoveContainerOptions, RestartContainerOptions,
    StopContainerOptions, UploadToContainerOptions,
};
use domain::engine::EngineError;
use domain::engine::{Cancel, StepLog};
use domain::ids::ServiceId;
use domain::model::Service;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    Restart,
    Stop,
}

impl Act {
    fn verb(self) -> &'static str {
        match self {
            Act::Restart => "restart",
            Act::Stop => "stop",
        }
    }
}

/// How a container run to its end ended.
pub(crate) enum Ended {
    Exited(i64),
    TimedOut,
    Canceled,
}

impl DockerEngine {
    /// Containers Capstan made for `service`, running or not; `role` narrows to replicas
    /// (`service`) or job executions (`job`).
    pub(crate) async fn owned(
        &self,
        service: ServiceId,
        role: Option<&str>,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        let mut labels = vec![plan::of_service(service)];
        labels.extend(role.map(|r| format!("{LABEL_ROLE}={r}")));
        let options = plan::labelled(self.scoped(labels));
        self.docker
            .list_containers(Some(options))
            .await
            .map_err(|e| said("could not list the service's containers", e))
    }

    pub(crate) async fn remove(&self, id: &str) -> Result<(), EngineError> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(()),
            Err(e) => Err(said("could not remove a container", e)),
        }
    }

    /// Removes each of `ids`, stopping at the first that cannot go.
    pub(crate) async fn remove_each(&self, ids: &[String]) -> Result<(), EngineError> {
        for id in ids {
            self.remove(id).await?;
        }
        Ok(())
    }

    /// Removes every container of a service; how many there were.
    pub(crate) async fn remove_owned(&self, service: ServiceId) -> Result<usize, EngineError> {
        let ids: Vec<String> = self
            .owned(service, None)
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect();
        self.remove_each(&ids).await?;
        Ok(ids.len())
    }

    /// Creates a container from its plan, copies its files in and starts it.
    pub(crate) async fn start(&self, plan: &ContainerPlan) -> Result<String, EngineError> {
        let options = CreateContainerOptions {
            name: Some(plan.name.clone()),
            ..Default::default()
        };
        let mut body = plan.body();
        body.labels = body.labels.map(|labels| self.marked(labels));
        let created = self
            .docker
            .create_container(Some(options), body)
            .await
            .map_err(|e| said(&format!("could not create container {}", plan.name), e))?;
        if !plan.files.is_empty() {
            let archive = crate::files::archive(&plan.files)?;
            let options = UploadToContainerOptions {
                path: "/".into(),
                ..Default::default()
            };
            self.docker
                .upload_to_container(
                    &created.id,
                    Some(options),
                    bollard::body_full(archive.into()),
                )
                .await
                .map_err(|e| said("could not write the file variables", e))?;
        }
        self.docker
            .start_container(&created.id, None)
            .await
            .map_err(|e| said(&format!("could not start container {}", plan.name), e))?;
        Ok(created.id)
    }

    /// The last lines a container wrote, for a failure's reason.
    pub(crate) async fn last_lines(&self, id: &str, count: usize) -> Vec<String> {
        lines_of(self.docker.logs(id, Some(last(count)))).await
    }

    /// The host ports a service's containers publish, by (replica, internal port): the ones
    /// they were created with (kept while they are stopped), or the ones Docker gave them.
    pub(crate) async fn host_ports(
        &self,
        containers: &[ContainerSummary],
    ) -> Result<HashMap<(usize, u16), u16>, EngineError> {
        let mut out = HashMap::new();
        for c in containers {
            let replica = c
                .labels
                .as_ref()
                .and_then(|l| l.get(plan::LABEL_REPLICA))
                .and_then(|r| r.parse::<usize>().ok());
            let (Some(replica), Some(id)) = (replica, &c.id) else {
                continue;
            };
            let seen = self
                .docker
                .inspect_container(id, None)
                .await
                .map_err(|e| said("could not look at a container", e))?;
            let asked = seen.host_config.and_then(|h| h.port_bindings);
            let given = seen.network_settings.and_then(|n| n.ports);
            for map in [asked, given].into_iter().flatten() {
                for (port, bindings) in map {
                    let internal = port.split('/').next().and_then(|p| p.parse::<u16>().ok());
                    let host = bindings
                        .iter()
                        .flatten()
                        .find_map(|b| b.host_port.as_deref()?.parse::<u16>().ok());
                    if let (Some(internal), Some(host)) = (internal, host) {
                        out.entry((replica, internal)).or_insert(host);
                    }
                }
            }
        }
        Ok(out)
    }

    /// A free port on the publish address, when this host is the Docker host's (a local
    /// daemon): created with it, a container keeps it while stopped. `None` lets Docker choose.
    pub(crate) fn free_port(&self, public: bool) -> Option<u16> {
        if !self.settings.local {
            return None;
        }
        let address = if public {
            self.probe_address()
        } else {
            plan::LOOPBACK
        };
        let listener = std::net::TcpListener::bind((address, 0)).ok()?;
        listener.local_addr().ok().map(|a| a.port())
    }

    pub(crate) async fn remove_all(&self, ids: &[String]) {
        for id in ids {
            if let Err(e) = self.remove(id).await {
                tracing::warn!(container = %id, error = %e, "could not remove a container");
            }
        }
    }

    /// Restarts or stops every container of the service (a job's kept executions ran once:
    /// a restart leaves them be).
    pub(crate) async fn each_owned(
        &self,
        service: &Service,
        log: &StepLog,
        act: Act,
    ) -> Result<(), EngineError> {
        let role = match act {
            Act::Restart => Some("service"),
            Act::Stop => None,
        };
        let owned = self.owned(service.id, role).await?;
        for c in &owned {
            let Some(id) = &c.id else { continue };
            let done = match act {
                Act::Restart => {
                    self.docker
                        .restart_container(id, None::<RestartContainerOptions>)
                        .await
                }
                Act::Stop => {
                    self.docker
                        .stop_container(id, None::<StopContainerOptions>)
                        .await
                }
            };
            done.map_err(|e| said(&format!("could not {} a container", act.verb()), e))?;
        }
        log.info(&format!("{}: {} container(s)", act.verb(), owned.len()));
        Ok(())
    }

    /// Waits for a started container to end, within `limit`; its last `lines` of output go to
    /// the log. A canceled one is removed; one past its limit is left to the caller.
    pub(crate) async fn run_to_end(
        &self,
        id: &str,
        limit: Duration,
        cancel: &Cancel,
        log: &StepLog,
        lines: usize,
    ) -> Result<Ended, bollard::errors::Error> {
        let mut waiting = self.docker.wait_container(id, None);
        let ended = tokio::select! {
            ended = waiting.next() => Some(ended),
            () = tokio::time::sleep(limit) => None,
            () = cancel.canceled() => {
                self.remove_all(&[id.to_string()]).await;
                return Ok(Ended::Canceled);
            }
        };
        for line in self.last_lines(id, lines).await {
            log.info(&line);
        }
        match ended {
            None => Ok(Ended::TimedOut),
            Some(Some(Ok(done))) => Ok(Ended::Exited(done.status_code)),
            // A non-zero exit comes back as an error carrying the code.
            Some(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => {
                Ok(Ended::Exited(code))
            }
            Some(Some(Err(e))) => Err(e),
            Some(None) => Ok(Ended::Exited(-1)),
        }
    }
}

/// What asks for the last `count` lines of an output, both streams.
pub(crate) fn last(count: usize) -> LogsOptions {
    LogsOptions {
        stdout: true,
        stderr: true,
        tail: count.to_string(),
        ..Default::default()
    }
}

/// The lines of an output, until it ends or fails.
pub(crate) async fn lines_of(
    logs: impl futures_util::Stream<
        Item = Result<bollard::container::LogOutput, bollard::errors::Error>,
    >,
) -> Vec<String> {
    let mut out = Vec::new();
    futures_util::pin_mut!(logs);
    while let Some(Ok(chunk)) = logs.next().await {
        out.extend(chunk.to_string().lines().map(str::to_string));
    }
    out
}
