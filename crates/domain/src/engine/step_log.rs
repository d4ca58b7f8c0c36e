//! A request's log as its steps write it.

use crate::model::{DeploymentLogLine, DeploymentRequest, LogLevel, Masker, StepName};
use std::sync::Mutex;

/// A request's log as its steps write it: each line masked (no secret value of the service
/// survives it) and kept in order until the worker stores it.
#[derive(Debug)]
pub struct StepLog {
    request: DeploymentRequest,
    masker: Masker,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    step: Option<StepName>,
    next_position: i64,
    lines: Vec<DeploymentLogLine>,
}

impl StepLog {
    /// Lines are numbered from the time the log was opened (milliseconds, shifted past room for
    /// a million lines), so a worker that ends a dead one's request writes after its lines.
    pub fn new(request: &DeploymentRequest, masker: Masker) -> Self {
        let millis = time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
        let first = i64::try_from(millis).unwrap_or(0) << 20;
        Self {
            request: request.clone(),
            masker,
            pending: Mutex::new(Pending {
                next_position: first,
                ..Pending::default()
            }),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Pending) -> R) -> R {
        f(&mut self.pending.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The step the lines that follow belong to.
    pub fn enter(&self, step: StepName) {
        self.with(|p| p.step = Some(step));
    }

    pub fn write(&self, level: LogLevel, message: &str) {
        let message = self.masker.mask(message);
        let r = &self.request;
        self.with(|p| {
            let line = DeploymentLogLine {
                request_id: r.id,
                environment_id: r.environment_id,
                service_id: r.service_id,
                position: p.next_position,
                at: time::OffsetDateTime::now_utc(),
                step: p.step.unwrap_or(StepName::Deployment),
                level,
                message,
            };
            p.next_position += 1;
            p.lines.push(line);
        });
    }

    pub fn info(&self, message: &str) {
        self.write(LogLevel::Info, message);
    }

    pub fn warn(&self, message: &str) {
        self.write(LogLevel::Warning, message);
    }

    pub fn error(&self, message: &str) {
        self.write(LogLevel::Error, message);
    }

    /// `text` as a log line would keep it (a failure's reason, shown beside the log).
    pub fn mask(&self, text: &str) -> String {
        self.masker.mask(text)
    }

    /// The lines written since the last call, for the store.
    pub fn take(&self) -> Vec<DeploymentLogLine> {
        self.with(|p| std::mem::take(&mut p.lines))
    }
}
