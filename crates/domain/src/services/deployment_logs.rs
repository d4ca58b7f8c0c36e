//! Reading the logs that deployments wrote: an environment's, as the public API lists them.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::DomainResult;
use crate::ids::*;
use crate::model::*;

/// The most lines one read answers, as the public API has it ("the last 1000").
pub const LOG_LINES: i64 = 1000;

/// An environment's deployment log with what its lines name.
#[derive(Debug, Clone)]
pub struct EnvironmentLog {
    pub organization_id: OrganizationId,
    pub cluster_id: ClusterId,
    pub lines: Vec<NamedLogLine>,
}

#[derive(Debug, Clone)]
pub struct NamedLogLine {
    pub line: DeploymentLogLine,
    /// The service's name and kind; none once the service is gone.
    pub service: Option<(String, ServiceKind)>,
    /// For an error line: what the user may do about it.
    pub hint: Option<&'static str>,
}

/// What an error usually means, from the words the engines use (the public engine gives such
/// hints with its errors).
pub fn hint(message: &str) -> Option<&'static str> {
    let m = message.to_ascii_lowercase();
    let hints: [(&[&str], &str); 6] = [
        (
            &["oom", "out of memory"],
            "The workload ran out of memory: raise the service's memory.",
        ),
        (
            &["pull access denied", "manifest unknown", "not found: manifest", "no such image"],
            "The image could not be found: check its name, tag and registry, and the registry's credentials.",
        ),
        (
            &["unauthorized", "authentication required", "denied"],
            "The registry refused the credentials: check the registry's username and password.",
        ),
        (
            &["unhealthy", "health check", "probe"],
            "The workload did not become healthy: check that it listens on its port and that its probes match.",
        ),
        (
            &["exited with code", "crash", "restarting"],
            "The workload stopped on its own: read its last output lines above.",
        ),
        (
            &["port is already allocated", "address already in use"],
            "A host port it publishes is taken by something else on the host.",
        ),
    ];
    hints
        .into_iter()
        .find(|(words, _)| words.iter().any(|w| m.contains(w)))
        .map(|(_, hint)| hint)
}

impl Capstan {
    /// The newest [`LOG_LINES`] lines the environment's deployments wrote, oldest first.
    pub async fn environment_logs(
        &self,
        p: &Principal,
        environment: EnvironmentId,
    ) -> DomainResult<EnvironmentLog> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let env = self
            .load::<Environment>(tx, p, environment, Action::Read)
            .await?;
        let lines = tx.environment_logs(environment, LOG_LINES).await?;
        let services = self
            .by_id::<Service>(tx, lines.iter().map(|l| l.service_id))
            .await?;
        Ok(EnvironmentLog {
            organization_id: env.organization_id,
            cluster_id: env.cluster_id,
            lines: lines
                .into_iter()
                .map(|line| NamedLogLine {
                    service: services
                        .get(&line.service_id)
                        .map(|s| (s.name.to_string(), s.kind())),
                    hint: (line.level == LogLevel::Error)
                        .then(|| hint(&line.message))
                        .flatten(),
                    line,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::hint;

    #[test]
    fn errors_get_the_hint_their_words_call_for() {
        assert!(hint("container was OOM-killed").is_some_and(|h| h.contains("memory")));
        assert!(hint("Error: No such image: app:1").is_some_and(|h| h.contains("image")));
        assert!(hint("exited with code 3").is_some_and(|h| h.contains("output")));
        assert_eq!(hint("all good"), None);
    }
}
