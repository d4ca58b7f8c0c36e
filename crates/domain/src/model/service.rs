//! Services: one record type for the six kinds; only the kind-specific payload differs.

use super::service_kinds::*;
use super::{DeploymentStatus, GitRepository, Record, ServiceKind};
use crate::error::DomainError;
use crate::ids::*;
use crate::validate;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    pub id: ServiceId,
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub environment_id: EnvironmentId,
    pub name: super::Name,
    pub description: Option<String>,
    pub spec: ServiceSpec,
    pub deployment_status: DeploymentStatus,
    /// The advanced settings set on the service (the others are its kind's defaults).
    pub advanced_settings: serde_json::Map<String, serde_json::Value>,
    /// The labels and annotations groups attached (kept apart from the service's row; read
    /// with it by the use cases that show it).
    pub groups: Vec<super::MetadataGroup>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for Service {
    type Id = ServiceId;
    type Parent = EnvironmentId;
    const KIND: &'static str = "service";
    fn id(&self) -> ServiceId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The kind-specific configuration of a service.
// Records are handled a page at a time, so the size of the largest kind is not worth a box.
#[allow(clippy::large_enum_variant)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ServiceSpec {
    Application(ApplicationSpec),
    Container(ContainerSpec),
    Database(DatabaseSpec),
    Job(JobSpec),
    Helm(HelmSpec),
    Terraform(TerraformSpec),
}

impl Service {
    /// How long a replica asked to stop has to finish what it serves: the advanced setting
    /// `deployment.termination_grace_period_seconds` (60 unless set).
    pub fn termination_grace_seconds(&self) -> i64 {
        self.advanced_settings
            .get("deployment.termination_grace_period_seconds")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(60)
    }

    pub fn kind(&self) -> ServiceKind {
        self.spec.kind()
    }

    /// Whether a preview of its environment holds a copy of it: those with `auto_preview` on,
    /// and every database (a preview gets databases of its own, never the blueprint's).
    /// Terraform services have no such member in the public description: never copied.
    pub fn previewed(&self) -> bool {
        match &self.spec {
            ServiceSpec::Application(a) => a.runtime.workload.auto_preview,
            ServiceSpec::Container(c) => c.runtime.workload.auto_preview,
            ServiceSpec::Job(j) => j.workload.auto_preview,
            ServiceSpec::Helm(h) => h.auto_preview,
            ServiceSpec::Database(_) => true,
            ServiceSpec::Terraform(_) => false,
        }
    }

    /// A deployed service whose configuration changed no longer runs what is configured.
    pub fn mark_changed(&mut self) {
        if self.deployment_status == DeploymentStatus::UpToDate {
            self.deployment_status = DeploymentStatus::OutOfDate;
        }
    }
}

impl Service {
    /// Whether deploying it builds an image from git first (BUILDING).
    pub fn builds_from_git(&self) -> bool {
        match &self.spec {
            ServiceSpec::Application(_) => true,
            ServiceSpec::Job(j) => j.source.docker.is_some(),
            _ => false,
        }
    }

    /// Nothing of it runs any more once uninstalled: its next deployment is its first.
    pub fn record_uninstall(&mut self, now: OffsetDateTime) {
        self.deployment_status = DeploymentStatus::NeverDeployed;
        self.updated_at = now;
    }

    /// Makes the tag or chart version a deployment names the configured one; true when the
    /// wanted revision changed (that, or a commit other than the deployed one).
    pub fn apply_target(&mut self, target: &super::DeployTarget) -> bool {
        let new_commit = target.git_commit_id.as_ref().is_some_and(|commit| {
            self.spec
                .git_repositories()
                .first()
                .is_some_and(|r| r.deployed_commit_id.as_ref() != Some(commit))
        });
        let before = self.spec.clone();
        match &mut self.spec {
            ServiceSpec::Container(c) => {
                if let Some(tag) = &target.image_tag {
                    c.tag.clone_from(tag);
                }
            }
            ServiceSpec::Job(j) => {
                if let (Some(tag), Some(image)) = (&target.image_tag, j.source.image.as_mut()) {
                    image.tag.clone_from(tag);
                }
            }
            ServiceSpec::Helm(h) => {
                if let (Some(version), Some(repo)) =
                    (&target.chart_version, h.source.repository.as_mut())
                {
                    repo.chart_version.clone_from(version);
                }
            }
            _ => {}
        }
        new_commit || before != self.spec
    }

    /// What a deployment history shows of the service as it is deployed now.
    pub fn snapshot(&self, target: &super::DeployTarget) -> super::DeploymentSnapshot {
        let mut shown = super::DeploymentSnapshot {
            name: self.name.to_string(),
            kind: Some(self.kind()),
            git_commit_id: target.git_commit_id.clone(),
            git_commit_author: target.git_commit_author.clone(),
            scheduled_run: target.scheduled_run,
            terraform_action: target.terraform_action,
            move_to_node: target.move_to_node.clone(),
            ..Default::default()
        };
        let mut image = |name: &str, tag: &str, runtime: Option<&Runtime>| {
            shown.image_name = Some(name.to_string());
            shown.tag = Some(tag.to_string());
            shown.arguments = Some(runtime.map(|r| r.arguments.clone()).unwrap_or_default());
            shown.entrypoint = Some(
                runtime
                    .and_then(|r| r.entrypoint.clone())
                    .unwrap_or_default(),
            );
        };
        match &self.spec {
            ServiceSpec::Container(c) => image(&c.image_name, &c.tag, Some(&c.runtime)),
            ServiceSpec::Job(j) => {
                if let Some(i) = &j.source.image {
                    image(&i.image_name, &i.tag, None);
                }
                shown.job_type = Some(j.job_type.as_str().to_string());
            }
            ServiceSpec::Helm(h) => {
                if let Some(r) = &h.source.repository {
                    shown.chart_name = Some(r.chart_name.clone());
                    shown.chart_version = Some(r.chart_version.clone());
                }
            }
            _ => {}
        }
        shown
    }

    /// Records the successful end of `request`: the service is UP_TO_DATE unless its
    /// configuration changed after the request. A commit deployed again keeps what was known
    /// of it (its author and tag); another commit has the author its push named, and no tag
    /// until one is pushed on it.
    pub fn record_deployment(&mut self, request: &super::DeploymentRequest, now: OffsetDateTime) {
        self.deployment_status = if self.updated_at <= request.created_at {
            DeploymentStatus::UpToDate
        } else {
            DeploymentStatus::OutOfDate
        };
        if let (Some(commit), Some(repo)) = (
            &request.target.git_commit_id,
            self.spec.git_repositories_mut().into_iter().next(),
        ) {
            let again = repo.deployed_commit_id.as_ref() == Some(commit);
            if !again {
                repo.deployed_commit_contributor = None;
                repo.deployed_commit_tag = None;
            }
            if let Some(author) = &request.snapshot.git_commit_author {
                repo.deployed_commit_contributor = Some(author.clone());
            }
            repo.deployed_commit_id = Some(commit.clone());
            repo.deployed_commit_date = Some(now);
        }
    }
}

impl ServiceSpec {
    pub fn kind(&self) -> ServiceKind {
        match self {
            ServiceSpec::Application(_) => ServiceKind::Application,
            ServiceSpec::Container(_) => ServiceKind::Container,
            ServiceSpec::Database(_) => ServiceKind::Database,
            ServiceSpec::Job(_) => ServiceKind::Job,
            ServiceSpec::Helm(_) => ServiceKind::Helm,
            ServiceSpec::Terraform(_) => ServiceKind::Terraform,
        }
    }

    /// The ports it declares (applications, containers, helm charts).
    pub fn ports(&self) -> &[Port] {
        match self {
            ServiceSpec::Application(a) => &a.runtime.ports,
            ServiceSpec::Container(c) => &c.runtime.ports,
            ServiceSpec::Helm(h) => &h.ports,
            _ => &[],
        }
    }

    /// The health checks of the kinds that run long-lived replicas of their own
    /// (applications and containers).
    pub fn healthchecks(&self) -> Option<&super::Healthchecks> {
        match self {
            ServiceSpec::Application(a) => Some(&a.runtime.workload.healthchecks),
            ServiceSpec::Container(c) => Some(&c.runtime.workload.healthchecks),
            _ => None,
        }
    }

    /// The registry the service pulls its image from, if any.
    pub fn registry_id(&self) -> Option<ContainerRegistryId> {
        match self {
            ServiceSpec::Container(c) => Some(c.registry_id),
            ServiceSpec::Job(j) => j.source.image.as_ref().map(|i| i.registry_id),
            _ => None,
        }
    }

    /// The registry summary kept with an image's registry id (absent in records written
    /// before it was kept).
    pub fn registry_summary(&self) -> Option<&RegistrySummary> {
        match self {
            ServiceSpec::Container(c) => c.registry.as_ref(),
            ServiceSpec::Job(j) => j.source.image.as_ref().and_then(|i| i.registry.as_ref()),
            _ => None,
        }
    }

    pub fn set_registry_summary(&mut self, summary: Option<RegistrySummary>) {
        match self {
            ServiceSpec::Container(c) => c.registry = summary,
            ServiceSpec::Job(j) => {
                if let Some(image) = j.source.image.as_mut() {
                    image.registry = summary;
                }
            }
            _ => {}
        }
    }

    /// The organization's helm repository the chart comes from, if any.
    pub fn helm_repository_id(&self) -> Option<HelmRepositoryId> {
        match self {
            ServiceSpec::Helm(h) => h
                .source
                .repository
                .as_ref()
                .map(|r| &r.repository)
                .filter(|r| r.organization_repository)
                .map(|r| HelmRepositoryId(r.id)),
            _ => None,
        }
    }

    /// The git repositories the service is built or configured from.
    pub fn git_repositories(&self) -> Vec<&GitRepository> {
        let mut out = Vec::new();
        match self {
            ServiceSpec::Application(a) => out.push(&a.git_repository),
            ServiceSpec::Job(j) => out.extend(j.source.docker.as_ref().map(|d| &d.git_repository)),
            ServiceSpec::Helm(h) => {
                out.extend(h.source.git.as_ref().map(|g| &g.git_repository));
                out.extend(h.values_override.git_repository());
            }
            ServiceSpec::Terraform(t) => out.push(&t.terraform_files_source.git.git_repository),
            ServiceSpec::Container(_) | ServiceSpec::Database(_) => {}
        }
        out
    }

    pub fn git_repositories_mut(&mut self) -> Vec<&mut GitRepository> {
        let mut out = Vec::new();
        match self {
            ServiceSpec::Application(a) => out.push(&mut a.git_repository),
            ServiceSpec::Job(j) => {
                out.extend(j.source.docker.as_mut().map(|d| &mut d.git_repository))
            }
            ServiceSpec::Helm(h) => {
                out.extend(h.source.git.as_mut().map(|g| &mut g.git_repository));
                out.extend(h.values_override.git_repository_mut());
            }
            ServiceSpec::Terraform(t) => out.push(&mut t.terraform_files_source.git.git_repository),
            ServiceSpec::Container(_) | ServiceSpec::Database(_) => {}
        }
        out
    }

    /// What a service built from git builds: its repository, the Dockerfile and the stage.
    pub fn build_source(&self) -> Option<BuildSource<'_>> {
        match self {
            ServiceSpec::Application(a) => Some(BuildSource {
                repository: &a.git_repository,
                dockerfile_path: a.dockerfile_path.as_deref().unwrap_or("Dockerfile"),
                target_stage: a.docker_target_build_stage.as_deref(),
            }),
            ServiceSpec::Job(j) => j.source.docker.as_ref().map(|d| BuildSource {
                repository: &d.git_repository,
                dockerfile_path: &d.dockerfile_path,
                target_stage: None,
            }),
            _ => None,
        }
    }

    /// The git token the service's main repository uses.
    pub fn git_token_id(&self) -> Option<GitTokenId> {
        self.git_repositories()
            .into_iter()
            .find_map(|r| r.git_token_id)
    }
}

/// The image a service built from git builds: the Dockerfile at `dockerfile_path` (relative to
/// `repository.root_path`, the build's context), to its `target_stage` (the last when none).
#[derive(Debug, Clone, Copy)]
pub struct BuildSource<'a> {
    pub repository: &'a GitRepository,
    pub dockerfile_path: &'a str,
    pub target_stage: Option<&'a str>,
}

/// A validated create or edit request for a service of any kind.
#[derive(Debug, Clone)]
pub struct ServiceDraft {
    pub name: super::Name,
    pub description: Option<String>,
    pub spec: ServiceSpec,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Deserialize)]
struct CommonInput {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

/// Parses JSON into `T`, naming the member at fault on error ("ports[0].internal_port: ...").
pub fn from_json<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, DomainError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        json_error(&path, &inner)
    })
}

/// Turns a serde message into the API's "field: message" form.
pub fn json_error(path: &str, message: &str) -> DomainError {
    // "missing field `key`" names the field itself rather than its parent.
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or_default();
        let full = match path {
            "" | "." => field.to_string(),
            p => format!("{p}.{field}"),
        };
        return DomainError::invalid(full, "is required");
    }
    let message = without_input(message.split(" at line ").next().unwrap_or(message));
    let field = match path {
        "" | "." => "body".to_string(),
        p => p.to_string(),
    };
    DomainError::invalid(field, message)
}

/// Serde's "invalid type: string \"hunter2\", expected ..." quotes what the client sent, which
/// may be a secret: keep the kind of value, drop the value.
fn without_input(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            if let Some((unexpected, expected)) = rest.split_once(", expected ") {
                let kind = unexpected
                    .split(['`', '"'])
                    .next()
                    .unwrap_or(unexpected)
                    .trim();
                return format!("{prefix}{kind}, expected {expected}");
            }
        }
    }
    message.to_string()
}

impl ServiceDraft {
    /// Validates a request body for a service of `kind`. `previous` is the current spec on edit,
    /// whose deployment state and port ids carry over.
    pub fn parse(
        kind: ServiceKind,
        body: &serde_json::Value,
        previous: Option<&ServiceSpec>,
    ) -> Result<Self, DomainError> {
        if !body.is_object() {
            return Err(DomainError::invalid("body", "must be a JSON object"));
        }
        let common: CommonInput = from_json(body)?;
        let name = validate::name("name", &common.name)?;
        let description = validate::description("description", common.description)?;
        let mut spec = match kind {
            ServiceKind::Application => ServiceSpec::Application(
                from_json::<ApplicationInput>(body)?
                    .validate(from_json(body)?, from_json(body)?)?,
            ),
            ServiceKind::Container => ServiceSpec::Container(
                from_json::<ContainerInput>(body)?.validate(from_json(body)?, from_json(body)?)?,
            ),
            ServiceKind::Database => {
                ServiceSpec::Database(from_json::<DatabaseInput>(body)?.validate()?)
            }
            ServiceKind::Job => {
                ServiceSpec::Job(from_json::<JobInput>(body)?.validate(from_json(body)?)?)
            }
            ServiceKind::Helm => ServiceSpec::Helm(from_json::<HelmInput>(body)?.validate()?),
            ServiceKind::Terraform => {
                ServiceSpec::Terraform(from_json::<TerraformInput>(body)?.validate()?)
            }
        };
        if let Some(prev) = previous {
            spec.carry_over(prev);
        }
        Ok(Self {
            name,
            description,
            spec,
        })
    }
}

impl ServiceDraft {
    /// The body an edit is validated from. The public edit bodies of applications and
    /// databases are partial (a database's has no `type` nor `mode`): the members they leave
    /// out keep their current values. The other kinds are edited with their full creation body.
    pub fn edit_body(current: &Service, body: &serde_json::Value) -> serde_json::Value {
        let (serde_json::Value::Object(sent), ServiceKind::Application | ServiceKind::Database) =
            (body, current.kind())
        else {
            return body.clone();
        };
        let Ok(serde_json::Value::Object(mut merged)) = serde_json::to_value(&current.spec) else {
            return body.clone();
        };
        merged.insert("name".into(), current.name.to_string().into());
        if let Some(description) = &current.description {
            merged.insert("description".into(), description.clone().into());
        }
        for (key, value) in sent {
            merged.insert(key.clone(), value.clone());
        }
        serde_json::Value::Object(merged)
    }
}

impl ServiceSpec {
    /// The icon every kind shows.
    pub fn icon_uri(&self) -> &str {
        match self {
            ServiceSpec::Application(a) => &a.runtime.workload.icon_uri,
            ServiceSpec::Container(c) => &c.runtime.workload.icon_uri,
            ServiceSpec::Database(d) => &d.icon_uri,
            ServiceSpec::Job(j) => &j.workload.icon_uri,
            ServiceSpec::Helm(h) => &h.icon_uri,
            ServiceSpec::Terraform(t) => &t.icon_uri,
        }
    }

    fn carry_over(&mut self, previous: &ServiceSpec) {
        let old: Vec<GitRepository> = previous.git_repositories().into_iter().cloned().collect();
        for (new, old) in self.git_repositories_mut().into_iter().zip(old.iter()) {
            if new.url == old.url {
                new.carry_deployment_state(old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_name_is_named() {
        let err = ServiceDraft::parse(ServiceKind::Database, &json!({"type": "REDIS"}), None)
            .unwrap_err();
        assert_eq!(err.to_string(), "name: is required");
    }

    #[test]
    fn nested_errors_name_the_path() {
        let body = json!({"name": "web", "registry_id": uuid::Uuid::new_v4(), "image_name": "nginx",
            "tag": "1", "ports": [{"internal_port": "x"}]});
        let err = ServiceDraft::parse(ServiceKind::Container, &body, None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("ports[0].internal_port: invalid type"),
            "{err}"
        );
    }

    #[test]
    fn type_errors_do_not_echo_the_value() {
        let err = from_json::<crate::services::VariableInput>(&json!({"key": "K", "value": 12345}))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "value: invalid type: integer, expected a string"
        );
        let err =
            from_json::<crate::services::VariableInput>(&json!({"key": ["hunter2"]})).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err =
            from_json::<crate::services::VariableInput>(&json!({"key": "K", "description": 1.5}))
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "description: invalid type: floating point, expected a string"
        );
    }

    #[test]
    fn a_helm_uses_one_git_token_and_terraform_no_secret_variables() {
        let (a, b) = (uuid::Uuid::new_v4(), uuid::Uuid::new_v4());
        let body = json!({"name": "h", "source": {"git_repository": {"url": "https://github.com/o/c", "git_token_id": a}},
            "arguments": [], "auto_deploy": false,
            "values_override": {"file": {"git": {"git_repository": {"url": "https://github.com/o/v", "git_token_id": b}, "paths": ["/v.yaml"]}}}});
        let err = ServiceDraft::parse(ServiceKind::Helm, &body, None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("values_override.file.git.git_repository.git_token_id:"),
            "{err}"
        );
        let tf = json!({"name": "t", "terraform_files_source": {"git_repository": {"url": "https://github.com/o/i"}},
            "terraform_variables_source": {"tf_vars": [{"key": "a", "value": "1"}, {"key": "pw", "value": "hunter2", "secret": true}]}});
        let err = ServiceDraft::parse(ServiceKind::Terraform, &tf, None).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("terraform_variables_source.tf_vars[1].secret:"));
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn helm_ports_reach_a_service_by_name_or_selectors() {
        let helm = |ports: serde_json::Value| {
            json!({"name": "h", "source": {"helm_repository": {"repository": "https://c.io", "chart_name": "x", "chart_version": "1"}},
                "arguments": [], "auto_deploy": false, "values_override": {}, "ports": ports})
        };
        let ok = ServiceDraft::parse(
            ServiceKind::Helm,
            &helm(
                json!([{"internal_port": 80, "port_type": "SERVICE_SELECTORS",
            "service_selectors": [{"key": "app", "value": "web"}]}]),
            ),
            None,
        )
        .unwrap();
        let shown = serde_json::to_value(&ok.spec).unwrap();
        assert_eq!(
            shown["ports"][0]["service_selectors"],
            json!([{"key": "app", "value": "web"}])
        );
        assert!(shown["ports"][0].get("service_name").is_none());
        for (ports, field) in [
            (
                json!([{"internal_port": 80, "port_type": "SERVICE_SELECTORS"}]),
                "ports[0].service_selectors",
            ),
            (json!([{"internal_port": 80}]), "ports[0].service_name"),
            (
                json!([{"internal_port": 80, "service_name": "s", "protocol": "TCP"}]),
                "ports[0].protocol",
            ),
            (
                json!([{"internal_port": 80, "port_type": "OTHER"}]),
                "ports[0].port_type",
            ),
        ] {
            let err = ServiceDraft::parse(ServiceKind::Helm, &helm(ports), None).unwrap_err();
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }

    #[test]
    fn edits_keep_the_deployed_commit() {
        let body = json!({"name": "a", "git_repository": {"url": "https://github.com/o/r"}});
        let mut first = ServiceDraft::parse(ServiceKind::Application, &body, None)
            .unwrap()
            .spec;
        first.git_repositories_mut()[0].deployed_commit_id = Some("abc".into());
        let second = ServiceDraft::parse(ServiceKind::Application, &body, Some(&first)).unwrap();
        assert_eq!(
            second.spec.git_repositories()[0]
                .deployed_commit_id
                .as_deref(),
            Some("abc")
        );
    }
}
