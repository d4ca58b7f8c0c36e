//! Reaching into a service's running replicas: a process with a terminal inside one (the live
//! API's shell) and what each consumes (its metrics).

use super::{EngineError, Target};
use crate::model::Service;
use async_trait::async_trait;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use std::pin::Pin;

/// The size of a terminal, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalSize {
    pub width: u16,
    pub height: u16,
}

/// What a shell asks to run, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRequest {
    /// The replica to run in, by the name the live API shows; none: one that runs.
    pub replica: Option<String>,
    /// The command and its arguments (never empty).
    pub command: Vec<String>,
    pub size: TerminalSize,
}

/// A process running inside a replica with a terminal: what is written to `input` is typed at
/// it, `output` is what its terminal shows, and `ended` (awaited once `output` ends) tells its
/// exit code.
pub struct Shell {
    /// The replica it runs in, as the live API names it.
    pub replica: String,
    pub input: Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    pub output: BoxStream<'static, Result<Vec<u8>, EngineError>>,
    pub ended: BoxFuture<'static, Result<Option<i64>, EngineError>>,
}

/// What one replica consumes now, against its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaUsage {
    /// The replica, as the live API names it.
    pub replica: String,
    /// The node it runs on, on an engine of several.
    pub node: Option<String>,
    /// CPU used, in millicores (thousandths of a core), over the engine's last interval.
    pub cpu_millicores: f64,
    /// Its CPU limit, in millicores; none: unlimited.
    pub cpu_limit_millicores: Option<f64>,
    pub memory_bytes: u64,
    /// Its memory limit; none: unlimited.
    pub memory_limit_bytes: Option<u64>,
    /// Its volumes' use, where the engine can tell: (volume, bytes).
    pub storage: Vec<(String, u64)>,
}

impl ReplicaUsage {
    /// `used` as a percentage of `limit`, when there is a limit.
    pub fn percent_of(used: f64, limit: Option<f64>) -> Option<f64> {
        limit
            .filter(|l| *l > 0.0)
            .map(|l| (used * 100.0 / l * 10.0).round() / 10.0)
    }

    pub fn cpu_percent(&self) -> Option<f64> {
        Self::percent_of(self.cpu_millicores, self.cpu_limit_millicores)
    }

    #[allow(clippy::cast_precision_loss)]
    pub fn memory_percent(&self) -> Option<f64> {
        Self::percent_of(
            self.memory_bytes as f64,
            self.memory_limit_bytes.map(|l| l as f64),
        )
    }
}

/// Reaching a service's running replicas at a target.
#[async_trait]
pub trait Replicas: Send + Sync {
    /// Starts `request`'s command in a running replica of `service`, with a terminal of its
    /// size; why not (no replica runs, the one asked for does not, the command cannot start).
    async fn open_shell(
        &self,
        target: &Target,
        service: &Service,
        request: &ShellRequest,
    ) -> Result<Shell, EngineError>;

    /// What each running replica of `service` consumes now.
    async fn usage(
        &self,
        target: &Target,
        service: &Service,
    ) -> Result<Vec<ReplicaUsage>, EngineError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_a_limit_are_percentages_to_a_tenth() {
        let usage = ReplicaUsage {
            replica: "r".into(),
            node: None,
            cpu_millicores: 250.0,
            cpu_limit_millicores: Some(500.0),
            memory_bytes: 1 << 20,
            memory_limit_bytes: Some(3 << 20),
            storage: Vec::new(),
        };
        assert_eq!(usage.cpu_percent(), Some(50.0));
        assert_eq!(usage.memory_percent(), Some(33.3));
        let unlimited = ReplicaUsage {
            cpu_limit_millicores: None,
            memory_limit_bytes: Some(0),
            ..usage
        };
        assert_eq!(unlimited.cpu_percent(), None);
        assert_eq!(unlimited.memory_percent(), None);
    }
}
