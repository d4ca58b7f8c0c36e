//! The records Capstan manages.

#[macro_use]
mod enums;
mod advanced_settings;
mod bounds;
mod cluster;
mod cluster_log;
mod credentials;
mod cron;
mod custom_domain;
mod database_backup;
mod database_connection;
mod deployment;
mod deployment_log;
mod deployment_rule;
mod docker_host;
mod event;
mod fixture;
mod git_repository;
mod lineage;
mod members;
mod metadata_group;
mod name;
mod organization;
mod regions;
mod resources;
mod restriction;
mod route;
mod running_state;
mod service;
mod service_kinds;
mod service_output;
mod service_settings;
mod service_settings_tables;
mod snapshot;
mod stage;
mod state;
mod status;
mod swarm_node;
mod terraform_state;
mod variable;
mod webhook;
mod workload_inputs;

pub use advanced_settings::{Setting, SettingKind, SettingsTable, CLUSTER_SETTINGS};
pub use bounds::{environment_bytes, Bounds, KERNEL_ARGUMENTS_LIMIT, KERNEL_ENV_STRING_LIMIT};
pub use cluster::{
    Cluster, ClusterAction, ClusterCredentialsRef, ClusterRun, ClusterSpec, ClusterState,
    CredentialsRef, GroupRef, KubernetesMode, KUBERNETES_VERSION,
};
pub use cluster_log::{ClusterLogLine, ClusterLogStep};
pub use credentials::{
    AltCloudCredentialsInput, CloudACredentialsInput, CloudCCredentialsInput, CloudCredentials,
    CredentialsDetails, CredentialsDraft, OnPremiseCredentialsInput,
};
pub use cron::{CronSchedule, CronTurn};
pub use custom_domain::{host_name, renamed, CustomDomain, CustomDomainInput, DnsCheck, DnsState};
pub use database_backup::{dump_file, dump_of, BackupState, DatabaseBackup};
pub use database_connection::{container_versions, DatabaseConnection};
pub use deployment::{
    plan, queue_up, DeployTarget, DeploymentRequest, DeploymentSnapshot, Origin, Phase,
    RequestStatus, Step, StepName, StepStatus, TerraformDeployAction,
};
pub use deployment_log::{DeploymentLogLine, LogLevel};
pub use deployment_rule::{
    EnvironmentDeploymentRule, EnvironmentRuleInput, ProjectDeploymentRule, ProjectRuleDraft,
    ProjectRuleInput, RuleOrderInput, Schedule, ScheduleInput, Turn, Weekday,
};
pub use docker_host::{
    ClaimedDaemon, DaemonIdentity, DockerAccess, DockerEndpoint, DockerEndpointSpec, DockerHost,
    DockerHostKind, DockerHostsPolicy, DockerTls, NodeDaemon, NodeDaemonSpec,
};
pub use enums::*;
pub use event::*;
pub use fixture::*;
pub use git_repository::{GitRepository, GitRepositoryInput};
pub use lineage::{EnvironmentNamed, ProjectNamed, ServiceNamed};
pub use members::{member_id, Invitation, Member, INVITATION_LIFETIME};
pub use metadata_group::{
    AnnotationInput, AnnotationScope, AnnotationsGroupInput, GroupDraft, GroupEntry, GroupKind,
    LabelInput, LabelsGroupInput, MetadataGroup,
};
pub use name::Name;
pub use organization::{ApiToken, Organization};
pub use regions::{is_region, regions, Region};
pub use resources::{
    expiry_date, ContainerRegistry, Environment, GitToken, HelmRepository, PreviewOf, Project,
    RegistryConfig,
};
pub use restriction::{
    push_deploys, DeploymentRestriction, RestrictionInput, RestrictionMode, RestrictionType,
};
pub use route::{
    host_name_of, is_routed, is_within, wildcard_over, Backend, Route, RouteCheck, RouteTable,
    RouterAddress, STICKY_SESSION,
};
pub use running_state::{
    Endpoint, Replica, ReplicaEvent, ReplicaEventReason, RunState, RunningState, KEPT_EVENTS,
};
pub use service::*;
pub use service_kinds::*;
pub use service_output::{
    OutputLine, OutputQuery, OutputStream, OUTPUT_KEPT_LINES, OUTPUT_LINE_BYTES,
    OUTPUT_LISTED_LINES,
};
pub use service_settings::*;
pub use service_settings_tables::{
    APPLICATION_SETTINGS, CONTAINER_SETTINGS, HELM_SETTINGS, JOB_SETTINGS, TERRAFORM_SETTINGS,
};
pub use snapshot::{Snapshot, SnapshotName};
pub use stage::{reorder, DeploymentStage, Placement, StageMember, DEFAULT_STAGE};
pub use state::{transition, DeploymentAction, Event, Forbidden, ServiceState};
pub use status::*;
pub use swarm_node::{ClusterHost, NodeAvailability, NodeRole, NodeState, SwarmNode};
pub use terraform_state::{state_resources, TerraformResource};
pub use variable::*;
pub use webhook::*;
pub use workload_inputs::{
    EnvValue, FileValue, GitAccess, Masker, RegistryAccess, WorkloadInputs, MASK,
};

use crate::ids::OrganizationId;
use std::fmt::Display;

/// What every stored resource has in common; lets one generic repository port and one generic
/// access check serve them all.
pub trait Record: Clone + Send + Sync + 'static {
    type Id: Copy + Send + Sync + Display + Ord + std::hash::Hash + 'static;
    /// The parent a list is taken under (an organization, a project, an environment).
    type Parent: Copy + Send + Sync + 'static;
    /// The word used in messages: "project", "environment", ...
    const KIND: &'static str;
    fn id(&self) -> Self::Id;
    fn organization_id(&self) -> OrganizationId;
}
