//! Where a service or an environment sits, by name: what an audit event tells of its target,
//! read without the records themselves (a service's stored spec is most of its row).

use super::{EnvironmentMode, ServiceKind};
use crate::ids::{EnvironmentId, ProjectId, ServiceId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectNamed {
    pub id: ProjectId,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentNamed {
    pub id: EnvironmentId,
    pub name: String,
    pub mode: EnvironmentMode,
    pub project: ProjectNamed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceNamed {
    pub id: ServiceId,
    pub name: String,
    pub kind: ServiceKind,
    pub environment: EnvironmentNamed,
}
