//! Readiness and failure diagnosis: when a new container counts as started (it stayed up,
//! its probe passes, a command in it succeeds), and when not, why (it exited, was OOM-killed,
//! restarts, is unhealthy), quoting what it last wrote.

use crate::engine::DockerEngine;
use crate::errors::said;
use crate::{db_recipe, exec, plan, probe};
use bollard::models::{ContainerStateStatusEnum, HealthStatusEnum};
use bollard::query_parameters::EventsOptions;
use domain::engine::EngineError;
use domain::engine::{Cancel, StepLog};
use domain::model::{Service, ServiceSpec, WorkloadInputs};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// How long a new workload has to run (and pass its readiness probe) before it counts as
/// deployed, when its probe gives no longer time.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a workload without a probe must stay up to count as started.
pub(crate) const STAYS_UP: Duration = Duration::from_secs(2);
/// How often a starting workload is looked at.
const LOOK: Duration = Duration::from_millis(250);
/// The output lines a failure quotes.
pub(crate) const LAST_LINES: usize = 20;
/// How long a database has to accept connections (a first start initialises its data).
const DATABASE_READY_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the daemon may take to report that a killed container was OOM-killed.
const OOM_MARK: Duration = Duration::from_secs(3);
/// How long one readiness command may take.
pub(crate) const LOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// What tells that a new container is ready: it stayed up that long, its readiness probe
/// passes, or a command run in it succeeds (a database accepting connections).
pub(crate) enum Readiness<'a> {
    UpFor(Duration),
    Probe(&'a domain::model::Probe),
    Command { cmd: Vec<String>, env: Vec<String> },
}

impl Readiness<'_> {
    /// How long a new workload has to become ready by it.
    pub(crate) fn timeout(&self) -> Duration {
        match self {
            Readiness::UpFor(_) => READY_TIMEOUT,
            Readiness::Probe(p) => {
                let secs = p.initial_delay_seconds + p.period_seconds * p.failure_threshold;
                Duration::from_secs(u64::try_from(secs).unwrap_or(0)).max(READY_TIMEOUT)
            }
            Readiness::Command { .. } => DATABASE_READY_TIMEOUT,
        }
    }
}

/// How a workload's process ended, as a reason says it: the signals a code stands for named
/// (a SIGTERM Capstan did not send is its daemon stopping, or a stop by hand).
pub(crate) fn exited(code: i64) -> String {
    match code {
        143 => format!("exited with code {code} (stopped by SIGTERM, not by Capstan: its Docker daemon stopping or restarting, or a stop by hand)"),
        137 => format!("exited with code {code} (killed by SIGKILL)"),
        _ => format!("exited with code {code}"),
    }
}

/// What a workload last wrote, as a reason quotes it.
pub(crate) fn wrote(lines: &[String]) -> String {
    if lines.is_empty() {
        "it wrote nothing".to_string()
    } else {
        format!("its last lines:\n{}", lines.join("\n"))
    }
}

impl DockerEngine {
    /// What tells that a service's new containers are ready.
    pub(crate) fn readiness<'a>(
        &self,
        service: &'a Service,
        inputs: &WorkloadInputs,
    ) -> Result<Readiness<'a>, EngineError> {
        if let ServiceSpec::Database(_) = &service.spec {
            let (spec, connection, password) = db_recipe::database_of(service, inputs)?;
            let recipe = db_recipe::recipe(spec.db_type, &connection, &password);
            return Ok(Readiness::Command {
                cmd: recipe.health,
                env: recipe.exec_env,
            });
        }
        Ok(match plan::readiness(service) {
            Some(p) => Readiness::Probe(p),
            None => Readiness::UpFor(STAYS_UP),
        })
    }

    /// Whether the daemon tells of an OOM kill of the container, in its state or its `oom`
    /// events since `created`, within [`OOM_MARK`].
    async fn oom_reported(&self, id: &str, created: Option<&str>) -> bool {
        let since = created
            .and_then(|c| OffsetDateTime::parse(c, &Rfc3339).ok())
            .map_or(0, OffsetDateTime::unix_timestamp);
        let deadline = Instant::now() + OOM_MARK;
        loop {
            let options = EventsOptions {
                since: Some(since.to_string()),
                until: Some((OffsetDateTime::now_utc().unix_timestamp() + 1).to_string()),
                filters: Some(HashMap::from([
                    ("container".to_string(), vec![id.to_string()]),
                    ("event".to_string(), vec!["oom".to_string()]),
                ])),
            };
            let told = self.docker.events(Some(options)).next().await;
            if matches!(told, Some(Ok(_))) {
                return true;
            }
            let marked = self.docker.inspect_container(id, None).await.ok();
            if marked.and_then(|m| m.state?.oom_killed) == Some(true) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(LOOK).await;
        }
    }

    /// Why a container that should run does not, if it does not: exited, OOM-killed,
    /// restarted by Docker since the wait began (`restarts_before`), unhealthy. `None` while
    /// it runs.
    async fn trouble(&self, id: &str, restarts_before: i64) -> Result<Option<String>, EngineError> {
        let seen = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(|e| said("could not look at a container", e))?;
        let killed = seen
            .state
            .as_ref()
            .is_some_and(|st| st.exit_code == Some(137) && st.oom_killed != Some(true));
        // The kernel's OOM notice can reach the daemon after the exit: then the state never
        // says so and only the daemon's `oom` event does. A SIGKILL is called a plain exit
        // only once neither has told of one for a while.
        let oom = killed && self.oom_reported(id, seen.created.as_deref()).await;
        let state = seen.state.unwrap_or_default();
        let restarted = seen.restart_count.unwrap_or(0) - restarts_before;
        let why = if oom || state.oom_killed == Some(true) {
            Some("it was OOM-killed (out of memory)".to_string())
        } else if matches!(
            state.status,
            Some(ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD)
        ) {
            Some(format!(
                "it {}",
                exited(state.exit_code.unwrap_or_default())
            ))
        } else if restarted > 0 || state.restarting == Some(true) {
            Some(format!(
                "it exited and was restarting ({restarted} restarts)"
            ))
        } else if state.health.and_then(|h| h.status) == Some(HealthStatusEnum::UNHEALTHY) {
            Some("it is unhealthy".to_string())
        } else {
            None
        };
        match why {
            None => Ok(None),
            Some(why) => {
                let lines = self.last_lines(id, LAST_LINES).await;
                Ok(Some(format!("{why}; {}", wrote(&lines))))
            }
        }
    }

    /// Where probes reach the workloads' published ports.
    pub(crate) fn reach(&self) -> probe::Reach {
        probe::Reach {
            published: self.probe_address().to_string(),
            loopback: self.settings.local,
        }
    }

    /// Where the host reaches a published port.
    pub(crate) fn probe_address(&self) -> &str {
        match self.settings.publish_address.as_str() {
            "0.0.0.0" | "" => "127.0.0.1",
            other => other,
        }
    }

    /// Waits until every new replica runs (and passes its readiness probe, run from the host
    /// through the published port); fails as soon as one cannot.
    pub(crate) async fn wait_ready(
        &self,
        ids: &[String],
        readiness: &Readiness<'_>,
        log: &StepLog,
        cancel: &Cancel,
    ) -> Result<(), EngineError> {
        let timeout = readiness.timeout();
        let mut restarts_before = Vec::with_capacity(ids.len());
        for id in ids {
            let seen = self.docker.inspect_container(id, None).await;
            restarts_before.push(seen.ok().and_then(|s| s.restart_count).unwrap_or(0));
        }
        let started = Instant::now();
        loop {
            for (id, before) in ids.iter().zip(&restarts_before) {
                if let Some(why) = self.trouble(id, *before).await? {
                    return Err(format!("the new container did not start: {why}").into());
                }
            }
            let mut ready = true;
            for id in ids {
                ready &= match readiness {
                    Readiness::UpFor(at_least) => started.elapsed() >= *at_least,
                    Readiness::Probe(p) => probe::passes(&self.docker, id, p, &self.reach()).await,
                    Readiness::Command { cmd, env } => {
                        exec::run(&self.docker, id, cmd, env, None, LOOK_TIMEOUT)
                            .await
                            .is_ok_and(|ran| ran.succeeded())
                    }
                };
            }
            if ready {
                log.info("the new containers run and are ready");
                return Ok(());
            }
            if started.elapsed() > timeout {
                let what = match readiness {
                    Readiness::Command { .. } => "it never accepted connections",
                    _ => "it is unhealthy (its readiness probe never passed)",
                };
                return Err(format!(
                    "the new container was not ready after {} s: {what}",
                    timeout.as_secs()
                )
                .into());
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK) => {}
                () = cancel.canceled() => return Err("canceled while the new containers started".into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_the_signal() {
        assert!(exited(143).contains("its Docker daemon stopping or restarting"));
        assert!(exited(137).contains("SIGKILL"));
        assert_eq!(exited(3), "exited with code 3");
        assert_eq!(wrote(&[]), "it wrote nothing");
    }
}
