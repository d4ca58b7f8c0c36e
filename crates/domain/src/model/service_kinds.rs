//! The kind-specific payload of each service kind: the request form (`*Input`, lenient, with
//! defaults) and the validated form (`*Spec`), serialized as the API shows it. The store keeps
//! a form of its own (the storage crate's `stored_specs`), so the API's members may be renamed
//! without touching stored records. `#[serde(default)]` on a `*Spec` member only keeps it
//! optional in the OpenAPI description.

use super::service_settings::{
    bounded, icon_uri, volumes, Volume, Workload, WorkloadInput, MAXIMUM_CPU, MAXIMUM_GPU,
    MAXIMUM_MEMORY,
};
use super::{
    BuildMode, DatabaseAccessibility, DatabaseMode, DatabaseType, GitRepository,
    GitRepositoryInput, JobType, PortProtocol, RegistryKind, ServiceKind, TerraformAction,
    TerraformEngine,
};
use crate::error::DomainError;
use crate::ids::ContainerRegistryId;
use crate::validate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

// ---------- ports ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Deserialize)]
pub struct PortInput {
    #[serde(default, deserialize_with = "crate::ids::strict_uuid_option")]
    pub id: Option<Uuid>,
    #[serde(default)]
    pub name: Option<String>,
    pub internal_port: i64,
    #[serde(default)]
    pub external_port: Option<i64>,
    #[serde(default)]
    pub publicly_accessible: Option<bool>,
    #[serde(default)]
    pub protocol: Option<PortProtocol>,
    #[serde(default)]
    pub is_default: Option<bool>,
    #[serde(default)]
    pub port_type: Option<String>,
    #[serde(default)]
    pub service_name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub service_selectors: Option<Vec<ServiceSelector>>,
}

/// A Kubernetes label selector of a helm port of type SERVICE_SELECTORS.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSelector {
    pub key: String,
    pub value: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Port {
    pub id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub internal_port: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_port: Option<i64>,
    pub publicly_accessible: bool,
    pub protocol: PortProtocol,
    pub is_default: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<ServiceSelector>>,
}

fn port_number(field: String, value: i64) -> Result<i64, DomainError> {
    if (1..=65535).contains(&value) {
        Ok(value)
    } else {
        Err(DomainError::invalid(field, "must be between 1 and 65535"))
    }
}

fn ports(inputs: Option<Vec<PortInput>>, helm: bool) -> Result<Vec<Port>, DomainError> {
    let inputs = inputs.unwrap_or_default();
    let mut out = Vec::with_capacity(inputs.len());
    for (i, p) in inputs.into_iter().enumerate() {
        let internal_port = port_number(format!("ports[{i}].internal_port"), p.internal_port)?;
        let external_port = p
            .external_port
            .map(|v| port_number(format!("ports[{i}].external_port"), v))
            .transpose()?;
        let protocol = p.protocol.unwrap_or(PortProtocol::Http);
        let (port_type, service_name, service_selectors) = if helm {
            helm_port_target(i, p.port_type, p.service_name, p.service_selectors)?
        } else {
            (p.port_type, p.service_name, p.service_selectors)
        };
        if helm && !matches!(protocol, PortProtocol::Http | PortProtocol::Grpc) {
            return Err(DomainError::invalid(
                format!("ports[{i}].protocol"),
                "must be HTTP or GRPC for a helm port",
            ));
        }
        out.push(Port {
            id: p.id.unwrap_or_else(|| crate::ids::fresh("Port")),
            name: p.name,
            internal_port,
            external_port,
            publicly_accessible: p.publicly_accessible.unwrap_or(false),
            protocol,
            is_default: p.is_default.unwrap_or(i == 0),
            port_type,
            service_name,
            namespace: p.namespace,
            service_selectors,
        });
    }
    Ok(out)
}

type HelmPortTarget = (Option<String>, Option<String>, Option<Vec<ServiceSelector>>);

/// A helm port reaches a Kubernetes service by name (SERVICE_NAME, the default) or by label
/// selectors (SERVICE_SELECTORS).
fn helm_port_target(
    i: usize,
    port_type: Option<String>,
    service_name: Option<String>,
    selectors: Option<Vec<ServiceSelector>>,
) -> Result<HelmPortTarget, DomainError> {
    match port_type.as_deref().unwrap_or("SERVICE_NAME") {
        "SERVICE_NAME" => {
            let name = service_name
                .filter(|s| !s.trim().is_empty())
                .ok_or_else(|| {
                    DomainError::invalid(format!("ports[{i}].service_name"), "is required")
                })?;
            Ok((Some("SERVICE_NAME".into()), Some(name), None))
        }
        "SERVICE_SELECTORS" => {
            let selectors = selectors.filter(|s| !s.is_empty()).ok_or_else(|| {
                DomainError::invalid(format!("ports[{i}].service_selectors"), "is required")
            })?;
            Ok((Some("SERVICE_SELECTORS".into()), None, Some(selectors)))
        }
        _ => Err(DomainError::invalid(
            format!("ports[{i}].port_type"),
            "must be one of SERVICE_NAME, SERVICE_SELECTORS",
        )),
    }
}

fn positive(field: &str, value: Option<i64>, default: i64) -> Result<i64, DomainError> {
    match value {
        None => Ok(default),
        Some(v) if v > 0 => Ok(v),
        Some(_) => Err(DomainError::invalid(field, "must be greater than 0")),
    }
}

/// CPU (millicores) or memory (MiB): `default` when not sent, at least 1 and at most `maximum`.
fn resource(
    field: &str,
    value: Option<i64>,
    default: i64,
    maximum: i64,
) -> Result<i64, DomainError> {
    let v = positive(field, value, default)?;
    if v > maximum {
        return Err(DomainError::invalid(
            field,
            format!("must be at most {maximum}"),
        ));
    }
    Ok(v)
}

fn instances(min: Option<i64>, max: Option<i64>) -> Result<(i64, i64), DomainError> {
    let min = positive("min_running_instances", min, 1)?;
    let max = positive("max_running_instances", max, min)?;
    if max < min {
        return Err(DomainError::invalid(
            "max_running_instances",
            "must be at least min_running_instances",
        ));
    }
    Ok((min, max))
}

// ---------- application ----------

/// How a long-running service (application or container) runs; shared by both kinds. Read from
/// the same request body as the kind's own members (not `flatten`ed, which would lose the member
/// paths that error messages name).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct RuntimeInput {
    #[serde(default)]
    pub ports: Option<Vec<PortInput>>,
    #[serde(default)]
    pub arguments: Option<Vec<String>>,
    #[serde(default)]
    pub entrypoint: Option<String>,
    #[serde(default)]
    pub auto_deploy: Option<bool>,
    #[serde(default)]
    pub cpu: Option<i64>,
    #[serde(default)]
    pub memory: Option<i64>,
    #[serde(default)]
    pub min_running_instances: Option<i64>,
    #[serde(default)]
    pub max_running_instances: Option<i64>,
    #[serde(default)]
    pub storage: Option<Vec<Volume>>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Runtime {
    pub ports: Vec<Port>,
    pub arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    pub auto_deploy: bool,
    pub cpu: i64,
    pub memory: i64,
    pub min_running_instances: i64,
    pub max_running_instances: i64,
    pub storage: Vec<Volume>,
    #[serde(flatten)]
    pub workload: Workload,
}

impl RuntimeInput {
    /// Applications deploy on every push unless told otherwise; containers do not.
    fn validate(self, kind: ServiceKind, workload: WorkloadInput) -> Result<Runtime, DomainError> {
        let (min_running_instances, max_running_instances) =
            instances(self.min_running_instances, self.max_running_instances)?;
        let ports = ports(self.ports, false)?;
        let workload = workload.validate(kind, &ports)?;
        Ok(Runtime {
            ports,
            arguments: self.arguments.unwrap_or_default(),
            entrypoint: self.entrypoint,
            auto_deploy: self.auto_deploy.unwrap_or(kind == ServiceKind::Application),
            cpu: resource("cpu", self.cpu, 500, MAXIMUM_CPU)?,
            memory: resource("memory", self.memory, 512, MAXIMUM_MEMORY)?,
            min_running_instances,
            max_running_instances,
            storage: volumes(self.storage)?,
            workload,
        })
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ApplicationInput {
    pub git_repository: GitRepositoryInput,
    #[serde(default)]
    pub build_mode: Option<BuildMode>,
    #[serde(default)]
    pub dockerfile_path: Option<String>,
    #[serde(default)]
    pub docker_target_build_stage: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApplicationSpec {
    pub git_repository: GitRepository,
    pub build_mode: BuildMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile_path: Option<String>,
    /// The stage of a multi-stage Dockerfile to build (the last one when null).
    pub docker_target_build_stage: Option<String>,
    #[serde(flatten)]
    pub runtime: Runtime,
}

impl ApplicationInput {
    pub fn validate(
        self,
        runtime: RuntimeInput,
        workload: WorkloadInput,
    ) -> Result<ApplicationSpec, DomainError> {
        let build_mode = self.build_mode.unwrap_or(BuildMode::Docker);
        if build_mode != BuildMode::Docker {
            return Err(DomainError::invalid(
                "build_mode",
                format!(
                    "{build_mode} is not supported: Capstan builds applications from a \
                     Dockerfile (build_mode DOCKER)"
                ),
            ));
        }
        let dockerfile_path = Some(self.dockerfile_path.unwrap_or_else(|| "Dockerfile".into()));
        Ok(ApplicationSpec {
            git_repository: self.git_repository.into_repository("git_repository")?,
            build_mode,
            dockerfile_path,
            docker_target_build_stage: self
                .docker_target_build_stage
                .filter(|s| !s.trim().is_empty()),
            runtime: runtime.validate(ServiceKind::Application, workload)?,
        })
    }
}

// ---------- container ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ContainerInput {
    pub registry_id: ContainerRegistryId,
    pub image_name: String,
    pub tag: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContainerSpec {
    pub registry_id: ContainerRegistryId,
    /// The registry as it is now: kept with the record, refreshed when the registry changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistrySummary>,
    pub image_name: String,
    pub tag: String,
    #[serde(flatten)]
    pub runtime: Runtime,
}

/// The registry an image is pulled from, as a container or job shows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegistrySummary {
    pub id: ContainerRegistryId,
    pub name: String,
    pub url: String,
    pub kind: RegistryKind,
}

impl RegistrySummary {
    pub fn of(r: &super::ContainerRegistry) -> Self {
        Self {
            id: r.id,
            name: r.name.to_string(),
            url: r.url.clone(),
            kind: r.kind,
        }
    }
}

impl ContainerInput {
    pub fn validate(
        self,
        runtime: RuntimeInput,
        workload: WorkloadInput,
    ) -> Result<ContainerSpec, DomainError> {
        Ok(ContainerSpec {
            registry_id: self.registry_id,
            registry: None,
            image_name: validate::required_text("image_name", &self.image_name)?,
            tag: validate::required_text("tag", &self.tag)?,
            runtime: runtime.validate(ServiceKind::Container, workload)?,
        })
    }
}

// ---------- database ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct DatabaseInput {
    #[serde(rename = "type")]
    pub db_type: DatabaseType,
    pub version: String,
    pub mode: DatabaseMode,
    #[serde(default)]
    pub accessibility: Option<DatabaseAccessibility>,
    #[serde(default)]
    pub cpu: Option<i64>,
    #[serde(default)]
    pub memory: Option<i64>,
    #[serde(default)]
    pub storage: Option<i64>,
    #[serde(default)]
    pub icon_uri: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatabaseSpec {
    #[serde(rename = "type")]
    pub db_type: DatabaseType,
    pub version: String,
    pub mode: DatabaseMode,
    pub accessibility: DatabaseAccessibility,
    pub cpu: i64,
    pub memory: i64,
    pub storage: i64,
    #[serde(default)]
    pub icon_uri: String,
}

impl DatabaseSpec {
    /// Whether its disk is encrypted: a managed database is created with its provider's
    /// encryption at rest; a container database keeps its data on a volume of the cluster's
    /// storage class, which the engine does not ask to encrypt.
    pub fn disk_encrypted(&self) -> bool {
        self.mode == DatabaseMode::Managed
    }
}

impl DatabaseInput {
    pub fn validate(self) -> Result<DatabaseSpec, DomainError> {
        Ok(DatabaseSpec {
            db_type: self.db_type,
            version: validate::required_text("version", &self.version)?,
            mode: self.mode,
            accessibility: self.accessibility.unwrap_or(DatabaseAccessibility::Private),
            cpu: resource("cpu", self.cpu, 250, MAXIMUM_CPU)?,
            memory: resource("memory", self.memory, 256, MAXIMUM_MEMORY)?,
            storage: positive("storage", self.storage, 10)?,
            icon_uri: icon_uri(ServiceKind::Database, self.icon_uri)?,
        })
    }
}

// ---------- job ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobCommand {
    #[serde(default)]
    pub arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronJob {
    pub scheduled_at: String,
    #[serde(default = "utc")]
    pub timezone: String,
    #[serde(default)]
    pub arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
}

fn utc() -> String {
    "Etc/UTC".into()
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSchedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cronjob: Option<CronJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_start: Option<JobCommand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stop: Option<JobCommand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delete: Option<JobCommand>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageSource {
    pub image_name: String,
    pub tag: String,
    pub registry_id: ContainerRegistryId,
    /// The registry as it is now: kept with the record, refreshed when the registry changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistrySummary>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct DockerSourceInput {
    pub git_repository: GitRepositoryInput,
    #[serde(default)]
    pub dockerfile_path: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DockerSource {
    pub git_repository: GitRepository,
    pub dockerfile_path: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct JobSourceInput {
    #[serde(default)]
    pub image: Option<ImageSource>,
    #[serde(default)]
    pub docker: Option<DockerSourceInput>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub docker: Option<DockerSource>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct JobInput {
    #[serde(default)]
    pub schedule: Option<JobSchedule>,
    pub source: JobSourceInput,
    #[serde(default)]
    pub auto_deploy: Option<bool>,
    #[serde(default)]
    pub max_nb_restart: Option<i64>,
    #[serde(default)]
    pub max_duration_seconds: Option<i64>,
    #[serde(default)]
    pub cpu: Option<i64>,
    #[serde(default)]
    pub memory: Option<i64>,
    #[serde(default)]
    pub port: Option<i64>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSpec {
    pub job_type: JobType,
    pub schedule: JobSchedule,
    pub source: JobSource,
    pub auto_deploy: bool,
    pub max_nb_restart: i64,
    pub max_duration_seconds: i64,
    pub cpu: i64,
    pub memory: i64,
    /// The port the job listens on while it runs, if any.
    #[serde(default)]
    pub port: Option<i64>,
    #[serde(flatten)]
    pub workload: Workload,
}

/// Five or six space-separated fields, or an @-shortcut such as "@daily".
fn cron_expression(field: &str, value: &str) -> Result<String, DomainError> {
    let schedule = super::CronSchedule::parse(value).map_err(|why| {
        DomainError::invalid(
            field,
            format!("must be a cron expression like \"*/5 * * * *\": {why}"),
        )
    })?;
    // Eight years from a leap year's start hold every date a calendar has: an expression
    // naming none of them (31 February) would never run.
    let leap = time::macros::datetime!(2024-01-01 0:00 UTC);
    if schedule.next_after(leap, "Etc/UTC").is_none() {
        return Err(DomainError::invalid(field, "names no date that exists"));
    }
    Ok(value.trim().to_string())
}

impl JobInput {
    pub fn validate(self, workload: WorkloadInput) -> Result<JobSpec, DomainError> {
        let mut schedule = self.schedule.unwrap_or_default();
        if let Some(cron) = schedule.cronjob.as_mut() {
            cron.scheduled_at =
                cron_expression("schedule.cronjob.scheduled_at", &cron.scheduled_at)?;
            if jiff::tz::TimeZone::get(&cron.timezone).is_err() {
                return Err(DomainError::invalid(
                    "schedule.cronjob.timezone",
                    format!("'{}' is not a known time zone", cron.timezone),
                ));
            }
        }
        let job_type = if schedule.cronjob.is_some() {
            JobType::Cron
        } else {
            JobType::Lifecycle
        };
        let source = match (self.source.image, self.source.docker) {
            (Some(image), None) => {
                validate::required_text("source.image.image_name", &image.image_name)?;
                validate::required_text("source.image.tag", &image.tag)?;
                JobSource {
                    image: Some(image),
                    docker: None,
                }
            }
            (None, Some(docker)) => JobSource {
                image: None,
                docker: Some(DockerSource {
                    git_repository: docker
                        .git_repository
                        .into_repository("source.docker.git_repository")?,
                    dockerfile_path: docker
                        .dockerfile_path
                        .unwrap_or_else(|| "Dockerfile".into()),
                }),
            },
            _ => {
                return Err(DomainError::invalid(
                    "source",
                    "exactly one of image or docker is required",
                ))
            }
        };
        Ok(JobSpec {
            job_type,
            schedule,
            source,
            auto_deploy: self.auto_deploy.unwrap_or(false),
            max_nb_restart: self.max_nb_restart.unwrap_or(0).max(0),
            max_duration_seconds: positive("max_duration_seconds", self.max_duration_seconds, 300)?,
            cpu: resource("cpu", self.cpu, 500, MAXIMUM_CPU)?,
            memory: resource("memory", self.memory, 512, MAXIMUM_MEMORY)?,
            port: self
                .port
                .map(|p| port_number("port".into(), p))
                .transpose()?,
            // A job runs to its end: no probes unless sent.
            workload: workload.validate(ServiceKind::Job, &[])?,
        })
    }
}

// ---------- helm ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct HelmRepositoryInput {
    pub repository: String,
    pub chart_name: String,
    pub chart_version: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct HelmSourceInput {
    #[serde(default)]
    pub git_repository: Option<GitRepositoryInput>,
    #[serde(default)]
    pub helm_repository: Option<HelmRepositoryInput>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelmGitSource {
    pub git_repository: GitRepository,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelmChartRepository {
    pub id: Uuid,
    pub name: String,
    pub url: String,
    /// One of the organization's helm repositories (named by its id; its name and address are
    /// read each time the record is), rather than an address given inline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub organization_repository: bool,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelmRepositorySource {
    pub chart_name: String,
    pub chart_version: String,
    pub repository: HelmChartRepository,
}

/// Shown as `{git: {git_repository}}` or `{repository: {chart_name, chart_version, repository}}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelmSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<HelmGitSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<HelmRepositorySource>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawValuesFile {
    pub name: String,
    pub content: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawValues {
    pub values: Vec<RawValuesFile>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GitValues {
    pub git_repository: GitRepository,
    pub paths: Vec<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct GitValuesInput {
    pub git_repository: GitRepositoryInput,
    pub paths: Vec<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ValuesFile {
    #[serde(default)]
    pub raw: Option<RawValues>,
    #[serde(default)]
    pub git: Option<GitValues>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Default, Deserialize)]
pub struct ValuesFileInput {
    #[serde(default)]
    pub raw: Option<RawValues>,
    #[serde(default)]
    pub git: Option<GitValuesInput>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Default, Deserialize)]
pub struct ValuesOverrideInput {
    #[serde(default)]
    pub set: Option<Vec<Vec<String>>>,
    #[serde(default)]
    pub set_string: Option<Vec<Vec<String>>>,
    #[serde(default)]
    pub set_json: Option<Vec<Vec<String>>>,
    #[serde(default)]
    pub file: Option<ValuesFileInput>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ValuesOverride {
    pub set: Vec<Vec<String>>,
    pub set_string: Vec<Vec<String>>,
    pub set_json: Vec<Vec<String>>,
    pub file: Option<ValuesFile>,
}

impl ValuesOverride {
    pub fn git_repository(&self) -> Option<&GitRepository> {
        self.file.as_ref()?.git.as_ref().map(|g| &g.git_repository)
    }
    pub fn git_repository_mut(&mut self) -> Option<&mut GitRepository> {
        self.file
            .as_mut()?
            .git
            .as_mut()
            .map(|g| &mut g.git_repository)
    }
}

fn key_values(
    field: &str,
    pairs: Option<Vec<Vec<String>>>,
) -> Result<Vec<Vec<String>>, DomainError> {
    let pairs = pairs.unwrap_or_default();
    for (i, pair) in pairs.iter().enumerate() {
        if pair.len() != 2 {
            return Err(DomainError::invalid(
                format!("values_override.{field}[{i}]"),
                "must be a [key, value] pair",
            ));
        }
    }
    Ok(pairs)
}

impl ValuesOverrideInput {
    fn validate(self) -> Result<ValuesOverride, DomainError> {
        let file = match self.file {
            None => None,
            Some(f) => Some(ValuesFile {
                raw: f.raw,
                git: match f.git {
                    None => None,
                    Some(g) => {
                        if let Some((i, _)) = g
                            .paths
                            .iter()
                            .enumerate()
                            .find(|(_, p)| !p.starts_with('/'))
                        {
                            return Err(DomainError::invalid(
                                format!("values_override.file.git.paths[{i}]"),
                                "must start with /",
                            ));
                        }
                        Some(GitValues {
                            git_repository: g
                                .git_repository
                                .into_repository("values_override.file.git.git_repository")?,
                            paths: g.paths,
                        })
                    }
                },
            }),
        };
        Ok(ValuesOverride {
            set: key_values("set", self.set)?,
            set_string: key_values("set_string", self.set_string)?,
            set_json: key_values("set_json", self.set_json)?,
            file,
        })
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct HelmInput {
    pub source: HelmSourceInput,
    pub arguments: Vec<String>,
    #[serde(default)]
    pub allow_cluster_wide_resources: Option<bool>,
    #[serde(default)]
    pub timeout_sec: Option<i64>,
    pub auto_deploy: bool,
    #[serde(default)]
    pub auto_preview: Option<bool>,
    pub values_override: ValuesOverrideInput,
    #[serde(default)]
    pub ports: Option<Vec<PortInput>>,
    #[serde(default)]
    pub icon_uri: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HelmSpec {
    #[serde(default)]
    pub icon_uri: String,
    pub auto_preview: bool,
    pub auto_deploy: bool,
    pub source: HelmSource,
    pub arguments: Vec<String>,
    pub allow_cluster_wide_resources: bool,
    pub timeout_sec: i64,
    pub values_override: ValuesOverride,
    pub ports: Vec<Port>,
}

impl HelmInput {
    pub fn validate(self) -> Result<HelmSpec, DomainError> {
        let source = match (self.source.git_repository, self.source.helm_repository) {
            (Some(git), None) => HelmSource {
                git: Some(HelmGitSource {
                    git_repository: git.into_repository("source.git_repository")?,
                }),
                repository: None,
            },
            (None, Some(repo)) => HelmSource {
                git: None,
                repository: Some(HelmRepositorySource {
                    chart_name: validate::required_text(
                        "source.helm_repository.chart_name",
                        &repo.chart_name,
                    )?,
                    chart_version: validate::required_text(
                        "source.helm_repository.chart_version",
                        &repo.chart_version,
                    )?,
                    repository: chart_repository(&repo.repository)?,
                }),
            },
            _ => {
                return Err(DomainError::invalid(
                    "source",
                    "exactly one of git_repository or helm_repository is required",
                ))
            }
        };
        let timeout_sec = match self.timeout_sec {
            None => 600,
            Some(t) if t >= 0 => t,
            Some(_) => return Err(DomainError::invalid("timeout_sec", "must be at least 0")),
        };
        let values_override = self.values_override.validate()?;
        // One token per service: the values repository uses the chart's token, or none.
        if let (Some(chart), Some(values)) = (
            source
                .git
                .as_ref()
                .and_then(|g| g.git_repository.git_token_id),
            values_override
                .git_repository()
                .and_then(|r| r.git_token_id),
        ) {
            if chart != values {
                return Err(DomainError::invalid(
                    "values_override.file.git.git_repository.git_token_id",
                    "must be the git token of source.git_repository",
                ));
            }
        }
        Ok(HelmSpec {
            icon_uri: icon_uri(ServiceKind::Helm, self.icon_uri)?,
            auto_preview: self.auto_preview.unwrap_or(false),
            auto_deploy: self.auto_deploy,
            source,
            arguments: self.arguments,
            allow_cluster_wide_resources: self.allow_cluster_wide_resources.unwrap_or(false),
            timeout_sec,
            values_override,
            ports: ports(self.ports, true)?,
        })
    }
}

/// A chart repository is named by its id (one of the organization's helm repositories) or by
/// its URL; a URL gets a stable id derived from it.
fn chart_repository(value: &str) -> Result<HelmChartRepository, DomainError> {
    let field = "source.helm_repository.repository";
    if let Ok(id) = crate::ids::parse_uuid(value.trim()) {
        return Ok(HelmChartRepository {
            id,
            name: id.to_string(),
            url: String::new(),
            organization_repository: true,
        });
    }
    let url = validate::http_url(field, value).map_err(|_| {
        DomainError::invalid(field, "must be a chart repository id or an http(s) URL")
    })?;
    Ok(HelmChartRepository {
        id: Uuid::new_v5(&Uuid::NAMESPACE_URL, url.as_str().as_bytes()),
        name: url.host_str().unwrap_or_default().to_string(),
        url: value.trim().to_string(),
        organization_repository: false,
    })
}

// ---------- terraform ----------

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct TerraformFilesSourceInput {
    pub git_repository: GitRepositoryInput,
}

/// Shown as `{git: {git_repository}}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TerraformFilesSource {
    pub git: TerraformGitSource,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TerraformGitSource {
    pub git_repository: GitRepository,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerraformAutoDeployConfig {
    pub auto_deploy: bool,
    pub terraform_action: TerraformAction,
}

/// Where terraform keeps its state: in the cluster (a Kubernetes secret) or where the
/// service's own backend block says.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TerraformBackend {
    #[serde(rename = "kubernetes")]
    Kubernetes {},
    #[serde(rename = "user_provided")]
    UserProvided {},
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TerraformProviderVersion {
    #[serde(default)]
    pub read_from_terraform_block: bool,
    pub explicit_version: String,
}

/// What the runner of terraform commands gets: CPU in millicores, RAM in MiB, GPUs, disk in GiB.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TerraformJobResources {
    pub cpu_milli: i64,
    pub ram_mib: i64,
    #[serde(default)]
    pub gpu: i64,
    pub storage_gib: i64,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct TerraformJobResourcesInput {
    #[serde(default)]
    pub cpu_milli: Option<i64>,
    #[serde(default)]
    pub ram_mib: Option<i64>,
    #[serde(default)]
    pub gpu: Option<i64>,
    #[serde(default)]
    pub storage_gib: Option<i64>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct TerraformInput {
    pub terraform_files_source: TerraformFilesSourceInput,
    /// The older form of `auto_deploy_config.auto_deploy`.
    #[serde(default)]
    pub auto_deploy: Option<bool>,
    #[serde(default)]
    pub auto_deploy_config: Option<TerraformAutoDeployConfig>,
    #[serde(default)]
    pub timeout_sec: Option<i64>,
    #[serde(default)]
    pub engine: Option<TerraformEngine>,
    #[serde(default)]
    pub terraform_variables_source: Option<serde_json::Value>,
    #[serde(default)]
    pub backend: Option<TerraformBackend>,
    #[serde(default)]
    pub provider_version: Option<TerraformProviderVersion>,
    #[serde(default)]
    pub job_resources: Option<TerraformJobResourcesInput>,
    #[serde(default)]
    pub use_cluster_credentials: Option<bool>,
    #[serde(default)]
    pub action_extra_arguments: Option<BTreeMap<String, Vec<String>>>,
    #[serde(default)]
    pub icon_uri: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TerraformSpec {
    pub terraform_files_source: TerraformFilesSource,
    pub auto_deploy: bool,
    #[serde(default)]
    pub auto_deploy_config: TerraformAutoDeployConfig,
    pub timeout_sec: i64,
    pub engine: TerraformEngine,
    pub terraform_variables_source: serde_json::Value,
    #[serde(default)]
    pub backend: TerraformBackend,
    #[serde(default)]
    pub provider_version: TerraformProviderVersion,
    #[serde(default)]
    pub job_resources: TerraformJobResources,
    #[serde(default)]
    pub use_cluster_credentials: bool,
    #[serde(default)]
    pub action_extra_arguments: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub icon_uri: String,
}

fn default_backend() -> TerraformBackend {
    TerraformBackend::Kubernetes {}
}

/// The terraform version used when none is named: read from the `terraform` block, else 1.9.
fn default_provider_version() -> TerraformProviderVersion {
    TerraformProviderVersion {
        read_from_terraform_block: true,
        explicit_version: "1.9".into(),
    }
}

fn default_job_resources() -> TerraformJobResources {
    TerraformJobResources {
        cpu_milli: 500,
        ram_mib: 512,
        gpu: 0,
        storage_gib: 1,
    }
}

/// The terraform commands whose extra arguments may be set.
const TERRAFORM_COMMANDS: &[&str] = &["init", "validate", "plan", "apply", "destroy"];

impl TerraformInput {
    pub fn validate(self) -> Result<TerraformSpec, DomainError> {
        let auto_deploy_config = match (self.auto_deploy_config, self.auto_deploy) {
            (Some(config), _) => config,
            (None, auto_deploy) => TerraformAutoDeployConfig {
                auto_deploy: auto_deploy.unwrap_or(false),
                terraform_action: TerraformAction::Default,
            },
        };
        let provider_version = self
            .provider_version
            .unwrap_or_else(default_provider_version);
        if !provider_version.read_from_terraform_block
            && provider_version.explicit_version.trim().is_empty()
        {
            return Err(DomainError::invalid(
                "provider_version.explicit_version",
                "is required unless read_from_terraform_block is true",
            ));
        }
        let defaults = default_job_resources();
        let job_resources = match self.job_resources {
            None => defaults,
            Some(r) => TerraformJobResources {
                cpu_milli: resource(
                    "job_resources.cpu_milli",
                    r.cpu_milli,
                    defaults.cpu_milli,
                    MAXIMUM_CPU,
                )?,
                ram_mib: resource(
                    "job_resources.ram_mib",
                    r.ram_mib,
                    defaults.ram_mib,
                    MAXIMUM_MEMORY,
                )?,
                gpu: bounded("job_resources.gpu", r.gpu, 0, MAXIMUM_GPU)?,
                storage_gib: positive("job_resources.storage_gib", r.storage_gib, 1)?,
            },
        };
        let action_extra_arguments = self.action_extra_arguments.unwrap_or_default();
        if let Some(command) = action_extra_arguments
            .keys()
            .find(|k| !TERRAFORM_COMMANDS.contains(&k.as_str()))
        {
            return Err(DomainError::invalid(
                format!("action_extra_arguments.{command}"),
                format!("must be one of {}", TERRAFORM_COMMANDS.join(", ")),
            ));
        }
        Ok(TerraformSpec {
            terraform_files_source: TerraformFilesSource {
                git: TerraformGitSource {
                    git_repository: self
                        .terraform_files_source
                        .git_repository
                        .into_repository("terraform_files_source.git_repository")?,
                },
            },
            auto_deploy: auto_deploy_config.auto_deploy,
            auto_deploy_config,
            timeout_sec: positive("timeout_sec", self.timeout_sec, 1800)?,
            engine: self.engine.unwrap_or(TerraformEngine::Terraform),
            terraform_variables_source: terraform_variables(self.terraform_variables_source)?,
            backend: self.backend.unwrap_or_else(default_backend),
            provider_version,
            job_resources,
            use_cluster_credentials: self.use_cluster_credentials.unwrap_or(false),
            action_extra_arguments,
            icon_uri: icon_uri(ServiceKind::Terraform, self.icon_uri)?,
        })
    }
}

/// Terraform variables are shown back as sent, so a secret one is refused: it belongs in a
/// TERRAFORM-scope secret, which is encrypted and never shown.
fn terraform_variables(
    source: Option<serde_json::Value>,
) -> Result<serde_json::Value, DomainError> {
    let source =
        source.unwrap_or_else(|| serde_json::json!({"tf_var_file_paths": [], "tf_vars": []}));
    let vars = source
        .get("tf_vars")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    if let Some(i) = vars
        .iter()
        .position(|v| v.get("secret").and_then(|s| s.as_bool()) == Some(true))
    {
        return Err(DomainError::invalid(
            format!("terraform_variables_source.tf_vars[{i}].secret"),
            "secret terraform variables go in the service's secrets (POST /terraform/{id}/secret)",
        ));
    }
    Ok(source)
}
