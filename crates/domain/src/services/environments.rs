//! Environments: a project's deployment targets, each on a cluster.

use super::{database_links, Capstan};
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::{ClusterId, EnvironmentId, ProjectId, ServiceId, VariableId};
use crate::model::EventType;
use crate::model::{
    Cluster, DeploymentStatus, Environment, EnvironmentMode, Name, Project, Service, ServiceState,
    Variable,
};
use crate::pagination::{Page, PageRequest};
use crate::ports::Repo;
use crate::ports::{Reference, Scope, Unit};
use crate::validate;
use serde::Deserialize;
use std::collections::HashMap;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct EnvironmentInput {
    pub name: String,
    #[serde(default)]
    pub cluster: Option<ClusterId>,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, pattern = "^(DEVELOPMENT|PRODUCTION|STAGING)$")
    )]
    pub mode: Option<EnvironmentMode>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct EnvironmentUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, pattern = "^(DEVELOPMENT|PRODUCTION|STAGING)$")
    )]
    pub mode: Option<EnvironmentMode>,
    /// Another cluster of the organization to run on (Capstan's addition): refused while any
    /// of its services runs, as its workloads would stay behind on the old cluster's host.
    #[serde(default)]
    pub cluster_id: Option<ClusterId>,
}

/// An environment with the cluster it runs on, as the API shows it.
#[derive(Debug, Clone)]
pub struct EnvironmentDetails {
    pub environment: Environment,
    pub cluster: Option<Cluster>,
}

impl Capstan {
    async fn with_clusters(
        &self,
        tx: &mut Unit,
        envs: Vec<Environment>,
    ) -> DomainResult<Vec<EnvironmentDetails>> {
        let clusters = self
            .by_id::<Cluster>(tx, envs.iter().map(|e| e.cluster_id))
            .await?;
        Ok(envs
            .into_iter()
            .map(|environment| EnvironmentDetails {
                cluster: clusters.get(&environment.cluster_id).cloned(),
                environment,
            })
            .collect())
    }

    async fn details(&self, tx: &mut Unit, env: Environment) -> DomainResult<EnvironmentDetails> {
        let mut v = self.with_clusters(tx, vec![env]).await?;
        v.pop()
            .ok_or_else(|| DomainError::Internal("environment vanished".into()))
    }

    /// The cluster named by a request, or the organization's default cluster; held until the
    /// unit ends, so it cannot be deleted under the environment that is about to use it.
    pub(super) async fn cluster_for(
        &self,
        tx: &mut Unit,
        p: &Principal,
        project: &Project,
        wanted: Option<ClusterId>,
    ) -> DomainResult<Cluster> {
        let id = match wanted {
            Some(id) => id,
            None => self
                .default_cluster(tx, project.organization_id)
                .await?
                .ok_or_else(|| {
                    DomainError::invalid(
                        "cluster",
                        "the organization has no cluster; create one first",
                    )
                })?,
        };
        tx.lock(Scope::Referenced(Reference::Cluster(id))).await?;
        let cluster: Cluster = self.load(tx, p, id, Action::Read).await?;
        if cluster.organization_id != project.organization_id {
            return Err(DomainError::Forbidden(
                "the cluster belongs to another organization".into(),
            ));
        }
        Ok(cluster)
    }

    pub async fn create_environment(
        &self,
        p: &Principal,
        project_id: ProjectId,
        input: EnvironmentInput,
    ) -> DomainResult<EnvironmentDetails> {
        self.in_unit(&[Scope::Project(project_id)], async |tx| {
            let project: Project = self.load(tx, p, project_id, Action::Write).await?;
            let name = validate::name("name", &input.name)?;
            // The project's rule for the name fills what the request leaves out.
            let rule = self.rule_for(tx, project_id, name.as_str()).await?;
            let cluster = self
                .cluster_for(
                    tx,
                    p,
                    &project,
                    input.cluster.or(rule.as_ref().map(|r| r.cluster_id)),
                )
                .await?;
            let mode = input
                .mode
                .or(rule.as_ref().map(|r| r.mode))
                .unwrap_or(EnvironmentMode::Development);
            not_made_a_preview(input.mode)?;
            let env = self.new_environment(p, &project, &cluster, name, mode);
            self.insert(tx, &env, "project").await?;
            self.audit(tx, p, EventType::Create, &env).await?;
            self.default_stage(tx, &env).await?;
            if let Some(rule) = rule {
                self.give_schedule(tx, &env, rule.schedule).await?;
            }
            Ok(EnvironmentDetails {
                environment: env,
                cluster: Some(cluster),
            })
        })
        .await
    }

    pub async fn list_environments(
        &self,
        p: &Principal,
        project_id: ProjectId,
        page: PageRequest,
    ) -> DomainResult<Page<EnvironmentDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let page = self.list::<Environment>(tx, project_id, page).await?;
        self.authorize_children::<Project, _>(tx, p, project_id, &page, Action::Read)
            .await?;
        let items = self.with_clusters(tx, page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_environment(
        &self,
        p: &Principal,
        id: EnvironmentId,
    ) -> DomainResult<EnvironmentDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let env = self.load(tx, p, id, Action::Read).await?;
        self.details(tx, env).await
    }

    pub async fn update_environment(
        &self,
        p: &Principal,
        id: EnvironmentId,
        input: EnvironmentUpdate,
    ) -> DomainResult<EnvironmentDetails> {
        self.in_unit(&[Scope::Environment(id)], async |tx| {
            let mut env: Environment = self.load(tx, p, id, Action::Write).await?;
            if let Some(name) = input.name {
                env.name = validate::name("name", &name)?;
            }
            not_made_a_preview(input.mode)?;
            if let Some(mode) = input.mode {
                env.mode = mode;
            }
            if let Some(cluster) = input.cluster_id.filter(|c| *c != env.cluster_id) {
                let org = env.organization_id;
                self.load_in_org::<Cluster>(tx, p, org, cluster, Action::Read)
                    .await?;
                self.refuse_moving_what_runs(tx, id).await?;
                env.cluster_id = cluster;
            }
            env.updated_at = self.now();
            env.last_updated_by = Some(p.subject.uuid());
            self.update(tx, &env, "project").await?;
            self.audit(tx, p, EventType::Update, &env).await?;
            let out = self.details(tx, env).await?;
            Ok(out)
        })
        .await
    }
}

impl Capstan {
    /// 409 while any service of `environment` is neither stopped nor never deployed: moving
    /// it would leave its workloads on the old cluster's host.
    async fn refuse_moving_what_runs(
        &self,
        tx: &mut Unit,
        environment: EnvironmentId,
    ) -> DomainResult<()> {
        let statuses = self.environment_statuses_of(tx, environment).await?;
        let running = [
            &statuses.applications,
            &statuses.containers,
            &statuses.databases,
            &statuses.jobs,
            &statuses.helms,
            &statuses.terraforms,
        ]
        .into_iter()
        .flatten()
        .filter(|s| {
            !matches!(
                s.state,
                ServiceState::Ready | ServiceState::Stopped | ServiceState::Deleted
            )
        })
        .count();
        if running > 0 {
            return Err(DomainError::state(format!(
                "{running} service(s) of the environment run on its cluster: stop the environment, then move it"
            )));
        }
        Ok(())
    }
}

/// `POST /environment/{id}/clone`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CloneInput {
    pub name: String,
    #[serde(default)]
    pub cluster_id: Option<ClusterId>,
    #[serde(default)]
    pub mode: Option<EnvironmentMode>,
    /// Whether the target project's rule for the clone's name applies (its cluster, mode and
    /// hours, where the request leaves them out); else the clone keeps the source's hours.
    #[serde(default)]
    pub apply_deployment_rule: Option<bool>,
    #[serde(default)]
    pub project_id: Option<ProjectId>,
}

impl Capstan {
    /// Every variable attached to any of `parents`.
    pub(super) async fn all_variables(
        &self,
        tx: &mut Unit,
        parents: &[uuid::Uuid],
    ) -> DomainResult<Vec<Variable>> {
        let mut out = Vec::new();
        let mut number = 1;
        loop {
            let request = PageRequest::new(number, crate::pagination::MAX_PAGE_SIZE)?;
            let page = tx.list_variables(parents, None, request).await?;
            let total = page.total_count;
            let empty = page.items.is_empty();
            out.extend(page.items);
            if empty || out.len() as u64 >= total {
                return Ok(out);
            }
            number += 1;
        }
    }

    /// A new environment with copies of every service's configuration, variables and secrets,
    /// and none of the deployment state, written in one transaction.
    pub async fn clone_environment(
        &self,
        p: &Principal,
        source_id: EnvironmentId,
        input: CloneInput,
    ) -> DomainResult<EnvironmentDetails> {
        // The source is read and the clone written in one unit that holds both projects (in
        // id order): the source cannot change halfway through the copy.
        let source: Environment = self
            .load(&mut *self.reading().await?, p, source_id, Action::Read)
            .await?;
        let target = input.project_id.unwrap_or(source.project_id);
        self.in_unit(&[], async |tx| {
            self.lock_projects(tx, [source.project_id, target]).await?;
            let source: Environment = self.load(tx, p, source_id, Action::Read).await?;
            let project: Project = self.load(tx, p, target, Action::Write).await?;
            let name = validate::name("name", &input.name)?;
            let rule = match input.apply_deployment_rule {
                Some(true) => self.rule_for(tx, target, name.as_str()).await?,
                _ => None,
            };
            let cluster = self
                .cluster_for(
                    tx,
                    p,
                    &project,
                    Some(
                        input
                            .cluster_id
                            .or(rule.as_ref().map(|r| r.cluster_id))
                            .unwrap_or(source.cluster_id),
                    ),
                )
                .await?;
            let mode = input
                .mode
                .or(rule.as_ref().map(|r| r.mode))
                .unwrap_or(source.mode);
            let env = self.new_environment(p, &project, &cluster, name, mode);
            let (env, _) = self
                .copy_environment(tx, &source, env, Copied::Whole)
                .await?;
            self.audit(tx, p, EventType::Clone, &env).await?;
            if let Some(rule) = rule {
                self.give_schedule(tx, &env, rule.schedule).await?;
            }
            Ok(EnvironmentDetails {
                environment: env,
                cluster: Some(cluster),
            })
        })
        .await
    }

    /// A new environment of `project` on `cluster`, made now by `p` (its `last_updated_by`).
    pub(super) fn new_environment(
        &self,
        p: &Principal,
        project: &Project,
        cluster: &Cluster,
        name: Name,
        mode: EnvironmentMode,
    ) -> Environment {
        let now = self.now();
        Environment {
            id: EnvironmentId::generate(),
            organization_id: project.organization_id,
            project_id: project.id,
            cluster_id: cluster.id,
            name,
            mode,
            last_updated_by: Some(p.subject.uuid()),
            pull_request: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// Writes `env` (a new environment) with a copy of `source` (its services, variables,
    /// secrets, stages and rule, none of its deployment state); answers it with the copy of
    /// each service by the source's id. The caller holds both projects.
    pub(super) async fn copy_environment(
        &self,
        tx: &mut Unit,
        source: &Environment,
        env: Environment,
        what: Copied,
    ) -> DomainResult<(Environment, HashMap<ServiceId, Service>)> {
        let source_id = source.id;
        let now = env.created_at;

        let services: Vec<Service> = self
            .services_of(tx, source_id)
            .await?
            .into_iter()
            .filter(|s| what == Copied::Whole || s.previewed())
            .collect();
        let mut parents: Vec<uuid::Uuid> = vec![source_id.0];
        parents.extend(services.iter().map(|s| s.id.0));
        let variables = self.all_variables(tx, &parents).await?;

        let mut service_ids = HashMap::new();
        let copies: Vec<Service> = services
            .into_iter()
            .map(|s| {
                let id = ServiceId::generate();
                service_ids.insert(s.id, id);
                let mut spec = s.spec;
                for repo in spec.git_repositories_mut() {
                    repo.clear_deployment_state();
                }
                Service {
                    id,
                    organization_id: env.organization_id,
                    project_id: env.project_id,
                    environment_id: env.id,
                    deployment_status: DeploymentStatus::NeverDeployed,
                    spec,
                    created_at: now,
                    updated_at: now,
                    ..s
                }
            })
            .collect();
        let mut variables = clone_variables(
            variables,
            &env,
            &service_ids,
            // Only the source project's variables are left behind (all else is copied).
            |_| source.project_id == env.project_id,
            now,
        );
        database_links::connect_copies(&mut variables, &copies)?;
        self.insert(tx, &env, "project").await?;
        // Variables come after those they alias or override.
        for service in &copies {
            self.insert(tx, service, "environment").await?;
        }
        for variable in &variables {
            Repo::<Variable>::insert(tx, variable).await?;
        }
        self.clone_stages(tx, source_id, &env, &service_ids).await?;
        self.copy_environment_rule(tx, source_id, &env).await?;
        let copies = copies
            .into_iter()
            .map(|c| (c.id, c))
            .collect::<HashMap<_, _>>();
        let by_source = service_ids
            .into_iter()
            .filter_map(|(from, to)| copies.get(&to).map(|c| (from, c.clone())))
            .collect();
        self.copy_restrictions(tx, &by_source).await?;
        if what == Copied::Whole {
            self.copy_domains(tx, &by_source).await?;
        }
        self.copy_groups(tx, &by_source).await?;
        Ok((env, by_source))
    }
}

/// PREVIEW environments are made by pull requests and tags, never asked for by mode: the
/// public description's create and edit requests offer the other modes only.
fn not_made_a_preview(mode: Option<EnvironmentMode>) -> DomainResult<()> {
    match mode {
        Some(EnvironmentMode::Preview) => Err(DomainError::invalid(
            "mode",
            "must be one of DEVELOPMENT, PRODUCTION, STAGING (previews are made by pull \
             requests and tags: docs/previews.md)",
        )),
        _ => Ok(()),
    }
}

/// What of an environment a copy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Copied {
    /// Everything: a clone, a tag's preview.
    Whole,
    /// What a pull request's preview holds: the services [`Service::previewed`] names, and
    /// no custom domain (a domain names one environment).
    Preview,
}

/// Copies variables onto `env` (an environment clone's, or a service clone's target), each
/// service's onto its copy in `service_ids`. Aliases and overrides follow their targets when
/// those are copied too; a target left behind is kept when `keeps` says the copy still sees it,
/// and the alias or override is dropped otherwise. Targets come first in the answer.
pub(super) fn clone_variables(
    variables: Vec<Variable>,
    env: &Environment,
    service_ids: &HashMap<ServiceId, ServiceId>,
    keeps: impl Fn(VariableId) -> bool,
    now: time::OffsetDateTime,
) -> Vec<Variable> {
    let ids: HashMap<VariableId, VariableId> = variables
        .iter()
        .map(|v| (v.id, VariableId::generate()))
        .collect();
    let remap = |target: Option<VariableId>| -> Result<Option<VariableId>, ()> {
        match target {
            None => Ok(None),
            Some(t) => match ids.get(&t) {
                Some(new) => Ok(Some(*new)),
                None if keeps(t) => Ok(Some(t)),
                None => Err(()),
            },
        }
    };
    let mut out: Vec<Variable> = variables
        .iter()
        .filter_map(|v| {
            let aliased = remap(v.aliased_variable_id).ok()?;
            let overridden = remap(v.overridden_variable_id).ok()?;
            Some(Variable {
                id: ids[&v.id],
                organization_id: env.organization_id,
                project_id: env.project_id,
                environment_id: Some(env.id),
                service_id: v.service_id.and_then(|s| service_ids.get(&s).copied()),
                linked_database_id: v
                    .linked_database_id
                    .and_then(|d| service_ids.get(&d).copied()),
                aliased_variable_id: aliased,
                overridden_variable_id: overridden,
                created_at: now,
                updated_at: now,
                ..v.clone()
            })
        })
        .collect();
    // Targets first, so aliases and overrides find them.
    out.sort_by_key(|v| v.aliased_variable_id.is_some() || v.overridden_variable_id.is_some());
    out
}
