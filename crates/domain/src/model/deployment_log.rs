//! The log of a deployment request: what each step of the engine did, line by line, kept with
//! the request. Messages are masked (no secret value of the service) before they get here.

use super::StepName;
use crate::ids::*;
use time::OffsetDateTime;

string_enum!(
    /// How much a log line matters.
    LogLevel {
        Info => "INFO",
        Warning => "WARNING",
        Error => "ERROR",
    }
);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentLogLine {
    pub request_id: DeploymentRequestId,
    pub environment_id: EnvironmentId,
    pub service_id: ServiceId,
    /// Its place in its request's log: lines written in the same instant keep their order.
    pub position: i64,
    pub at: OffsetDateTime,
    pub step: StepName,
    pub level: LogLevel,
    pub message: String,
}
