//! Deployment requests: durable records of what a client asked the engine to do.

use super::{DeploymentAction, Record};
use crate::ids::*;
use time::OffsetDateTime;

string_enum!(
    /// Where a request is in its life.
    RequestStatus {
        Queued => "QUEUED",
        Running => "RUNNING",
        Success => "SUCCESS",
        Error => "ERROR",
        Canceled => "CANCELED",
    }
);

impl RequestStatus {
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Success | Self::Error | Self::Canceled)
    }
}

/// What a deployment deploys: a commit, an image tag or a chart version, as the kind has it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployTarget {
    pub git_commit_id: Option<String>,
    pub image_tag: Option<String>,
    pub chart_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRequest {
    pub id: DeploymentRequestId,
    pub organization_id: OrganizationId,
    pub environment_id: EnvironmentId,
    pub service_id: ServiceId,
    pub action: DeploymentAction,
    /// The token or user that asked.
    pub requested_by: String,
    pub target: DeployTarget,
    pub status: RequestStatus,
    /// Why it ended in error or was canceled.
    pub reason: Option<String>,
    /// The worker running it (process-unique), so a dead worker's requests can be found.
    pub claimed_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub started_at: Option<OffsetDateTime>,
    pub finished_at: Option<OffsetDateTime>,
}

impl Record for DeploymentRequest {
    type Id = DeploymentRequestId;
    /// Requests are listed per service, newest first.
    type Parent = ServiceId;
    const KIND: &'static str = "deployment request";
    fn id(&self) -> DeploymentRequestId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}
