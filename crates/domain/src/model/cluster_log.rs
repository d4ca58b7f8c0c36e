//! A cluster's log: what Capstan did on it (deploying it, stopping it, reaching its host), line
//! by line, in the public API's steps. Kept with the cluster.

use super::LogLevel;
use crate::ids::ClusterId;
use time::OffsetDateTime;

string_enum!(
    /// The step of a cluster's life a line belongs to (the public `ClusterLogs.step` values
    /// Capstan uses).
    ClusterLogStep {
        LoadConfiguration => "LoadConfiguration",
        Create => "Create",
        Created => "Created",
        CreateError => "CreateError",
        Pause => "Pause",
        Paused => "Paused",
        PauseError => "PauseError",
        ValidateSystemRequirements => "ValidateSystemRequirements",
    }
);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterLogLine {
    pub cluster_id: ClusterId,
    /// Its place in the cluster's log: lines written in the same instant keep their order.
    pub position: i64,
    pub at: OffsetDateTime,
    pub step: ClusterLogStep,
    pub level: LogLevel,
    pub message: String,
}
