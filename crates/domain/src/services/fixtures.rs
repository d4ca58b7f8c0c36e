//! Loading a fixture (through the use cases, each record in its own unit, as a client would
//! make it) and writing the state back out as one, read in one consistent unit.

use super::{Capstan, EnvironmentInput, ProjectInput, VariableInput};
use crate::auth::{self, Principal, Role, Subject};
use crate::error::{DomainError, DomainResult};
use crate::ids::*;
use crate::model::*;
use crate::ports::Repo;
use crate::secret::Secret;
use crate::validate;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Who a fixture's records were made by, as the audit log shows it.
pub const SEEDER: &str = "capstan-seed";

/// Turns an error of the record at `at` into one naming it.
fn at(at: &str) -> impl Fn(DomainError) -> DomainError + '_ {
    move |e| match e {
        DomainError::Invalid { field, message } => DomainError::Invalid {
            field: format!("{at}.{field}"),
            message,
        },
        DomainError::Unavailable(_) | DomainError::StoreFull(_) | DomainError::Internal(_) => e,
        other => DomainError::invalid(at, other.to_string()),
    }
}

/// The ADMIN of one organization that seeds and exports it.
fn seeder(org: OrganizationId) -> Principal {
    Principal {
        subject: Subject::User(SEEDER.into()),
        memberships: vec![(org, Role::Admin)],
        origin: Origin::Api,
        user_agent: Some(SEEDER.into()),
    }
}

/// Replaces `registry` (a name) by `registry_id` in `object`.
fn name_registry(
    object: &mut Map<String, Value>,
    registries: &HashMap<String, ContainerRegistryId>,
    place: &str,
) -> DomainResult<()> {
    let Some(named) = object.remove("registry") else {
        return Ok(());
    };
    let Value::String(name) = named else {
        // A registry shown by a record (an export of an older form): its id stands.
        return Ok(());
    };
    let id = registries.get(&name).ok_or_else(|| {
        DomainError::invalid(
            format!("{place}.registry"),
            format!("no container registry named '{name}' in this organization"),
        )
    })?;
    object.insert("registry_id".into(), Value::String(id.to_string()));
    Ok(())
}

/// Records a fixture cannot describe (credentials, labels groups, git tokens): an export
/// leaves references to them out, so that seeding it into an empty server succeeds.
const UNDESCRIBED: &[&str] = &[
    "cloud_provider_credentials",
    "labels_groups",
    "git_token_id",
];

/// Removes every reference to an undescribed record from `object`, at any depth.
fn drop_undescribed(object: &mut Map<String, Value>) {
    for key in UNDESCRIBED {
        object.remove(*key);
    }
    for value in object.values_mut() {
        if let Value::Object(inner) = value {
            drop_undescribed(inner);
        }
    }
}

/// Rewrites what a service shows where it differs from what its kind's create operation
/// takes (a helm chart's source, terraform files), so that an export seeds back.
fn as_creation_body(kind: ServiceKind, body: &mut Map<String, Value>) {
    let moved = |object: &mut Map<String, Value>, from: &str, to: &str| {
        if let Some(Value::Object(mut shown)) = object.remove(from) {
            if let Some(inner) = shown.remove("git_repository") {
                object.insert(to.into(), inner);
            }
        }
    };
    match kind {
        ServiceKind::Helm => {
            let Some(Value::Object(source)) = body.get_mut("source") else {
                return;
            };
            moved(source, "git", "git_repository");
            if let Some(Value::Object(mut chart)) = source.remove("repository") {
                // A chart of one of the organization's repositories is written with its
                // address: repositories are not part of a fixture.
                let url = chart
                    .remove("repository")
                    .and_then(|r| r.get("url").cloned())
                    .unwrap_or(Value::Null);
                chart.insert("repository".into(), url);
                source.insert("helm_repository".into(), Value::Object(chart));
            }
        }
        ServiceKind::Terraform => {
            if let Some(Value::Object(files)) = body.get_mut("terraform_files_source") {
                moved(files, "git", "git_repository");
            }
        }
        _ => {}
    }
}

/// Shows the registry a body names by id by its name instead (an export).
fn show_registry(object: &mut Map<String, Value>, names: &HashMap<ContainerRegistryId, String>) {
    object.remove("registry");
    let id = object
        .get("registry_id")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<ContainerRegistryId>().ok());
    if let Some(name) = id.and_then(|id| names.get(&id)) {
        object.remove("registry_id");
        object.insert("registry".into(), Value::String(name.clone()));
    }
}

impl Capstan {
    /// Loads `fixture`, record after record; the first that fails stops the load, its error
    /// naming it (`organizations[0].projects[1].name: ...`).
    pub async fn seed(&self, fixture: &Fixture) -> DomainResult<Seeded> {
        let mut seeded = Vec::new();
        for (i, o) in fixture.organizations.iter().enumerate() {
            seeded.push(
                self.seed_organization(o, &format!("organizations[{i}]"))
                    .await?,
            );
        }
        Ok(Seeded {
            organizations: seeded,
        })
    }

    async fn seed_organization(
        &self,
        o: &OrganizationFixture,
        place: &str,
    ) -> DomainResult<SeededOrganization> {
        let now = self.now();
        let org = Organization {
            id: OrganizationId::generate(),
            name: validate::name("name", &o.name).map_err(at(place))?,
            description: validate::description("description", o.description.clone())
                .map_err(at(place))?,
            plan: OrganizationPlan::Free,
            created_at: now,
            updated_at: now,
        };
        self.in_unit(&[], async |tx| {
            self.insert(tx, &org, "installation")
                .await
                .map_err(at(place))
        })
        .await?;
        let p = seeder(org.id);
        let mut tokens = Vec::new();
        for (i, t) in o.tokens.iter().enumerate() {
            let place = format!("{place}.tokens[{i}]");
            tokens.push(self.seed_token(org.id, t).await.map_err(at(&place))?);
        }
        let mut registries = HashMap::new();
        let mut made_registries = Vec::new();
        for (i, body) in o.container_registries.iter().enumerate() {
            let place = format!("{place}.container_registries[{i}]");
            let input = from_json(&Value::Object(body.clone())).map_err(at(&place))?;
            let made = self
                .create_registry(&p, org.id, input)
                .await
                .map_err(at(&place))?;
            registries.insert(made.registry.name.to_string(), made.registry.id);
            made_registries.push(SeededRecord {
                id: made.registry.id.0,
                name: made.registry.name.to_string(),
            });
        }
        let mut clusters = HashMap::new();
        let mut made_clusters = Vec::new();
        let mut first_cluster = None;
        for (i, body) in o.clusters.iter().enumerate() {
            let place = format!("{place}.clusters[{i}]");
            let input = from_json(&Value::Object(body.clone())).map_err(at(&place))?;
            let made = self
                .create_cluster(&p, org.id, input)
                .await
                .map_err(at(&place))?
                .cluster;
            first_cluster.get_or_insert(made.id);
            clusters.insert(made.name.to_string(), made.id);
            made_clusters.push(SeededRecord {
                id: made.id.0,
                name: made.name.to_string(),
            });
        }
        let mut projects = Vec::new();
        for (i, project) in o.projects.iter().enumerate() {
            let place = format!("{place}.projects[{i}]");
            let input = ProjectInput {
                name: project.name.clone(),
                description: project.description.clone(),
            };
            let made = self
                .create_project(&p, org.id, input)
                .await
                .map_err(at(&place))?;
            let id = made.project.id;
            let mut environments = Vec::new();
            self.seed_variables(
                &p,
                VariableParent::Project(id),
                [&project.variables, &project.secrets],
                &place,
            )
            .await?;
            for (j, env) in project.environments.iter().enumerate() {
                let place = format!("{place}.environments[{j}]");
                let cluster = match &env.cluster {
                    Some(name) => Some(*clusters.get(name).ok_or_else(|| {
                        DomainError::invalid(
                            format!("{place}.cluster"),
                            format!("no cluster named '{name}' in this organization"),
                        )
                    })?),
                    None => first_cluster,
                };
                let input = EnvironmentInput {
                    name: env.name.clone(),
                    cluster,
                    mode: env.mode,
                };
                let made = self
                    .create_environment(&p, id, input)
                    .await
                    .map_err(at(&place))?;
                let env_id = made.environment.id;
                let mut services = Vec::new();
                self.seed_variables(
                    &p,
                    VariableParent::Environment(env_id),
                    [&env.variables, &env.secrets],
                    &place,
                )
                .await?;
                for (k, service) in env.services.iter().enumerate() {
                    let place = format!("{place}.services[{k}]");
                    let mut body = service.body.clone();
                    name_registry(&mut body, &registries, &place)?;
                    if let Some(Value::Object(image)) =
                        body.get_mut("source").and_then(|s| s.get_mut("image"))
                    {
                        name_registry(image, &registries, &format!("{place}.source.image"))?;
                    }
                    let made = self
                        .create_service(&p, env_id, service.kind, &Value::Object(body))
                        .await
                        .map_err(at(&place))?;
                    let parent = VariableParent::Service(made.id, service.kind);
                    self.seed_variables(&p, parent, [&service.variables, &service.secrets], &place)
                        .await?;
                    services.push(SeededService {
                        id: made.id,
                        name: made.name.to_string(),
                        kind: service.kind,
                    });
                }
                environments.push(SeededEnvironment {
                    id: env_id,
                    name: made.environment.name.to_string(),
                    services,
                });
            }
            projects.push(SeededProject {
                id,
                name: made.project.name.to_string(),
                environments,
            });
        }
        Ok(SeededOrganization {
            id: org.id,
            name: org.name.to_string(),
            tokens,
            container_registries: made_registries,
            clusters: made_clusters,
            projects,
        })
    }

    /// An API token of the fixture: with its given value, or a fresh one.
    async fn seed_token(&self, org: OrganizationId, t: &TokenFixture) -> DomainResult<SeededToken> {
        let role = Role::from_name(&t.role).ok_or_else(|| {
            DomainError::invalid(
                "role",
                "must be one of ADMIN, DEVOPS, VIEWER, BILLING_MANAGER",
            )
        })?;
        let mut token = self.new_token(org, &t.name, t.description.clone(), role)?;
        if let Some(value) = &t.value {
            let value = value.trim();
            // A test suite's fixed credentials: any it likes, if a header can carry them.
            if value.is_empty() || value.len() > 255 || !value.bytes().all(|b| b.is_ascii_graphic())
            {
                return Err(DomainError::invalid(
                    "value",
                    "must be 1 to 255 printable characters without spaces",
                ));
            }
            token.token.token_hash = auth::hash_token(value);
            token.value = value.to_string();
        }
        self.in_unit(&[], async |tx| {
            match Repo::<ApiToken>::insert(tx, &token.token).await {
                Err(crate::error::StoreError::Duplicate) => {
                    return Err(DomainError::invalid(
                        "value",
                        "another token has this value",
                    ))
                }
                inserted => inserted?,
            }
            Ok(SeededToken {
                name: t.name.clone(),
                value: token.value,
            })
        })
        .await
    }

    /// A parent's `variables` and `secrets` (the latter secret whatever they say).
    async fn seed_variables(
        &self,
        p: &Principal,
        parent: VariableParent,
        [variables, secrets]: [&Vec<VariableFixture>; 2],
        place: &str,
    ) -> DomainResult<()> {
        let listed = variables
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{place}.variables[{i}]"), v, v.secret))
            .chain(
                secrets
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{place}.secrets[{i}]"), v, true)),
            );
        for (place, v, secret) in listed {
            let input = VariableInput {
                key: v.key.clone(),
                // A secret written out without its value comes back empty.
                value: Some(Secret::new(v.value.clone().unwrap_or_default())),
                mount_path: v.mount_path.clone(),
                description: v.description.clone(),
                enable_interpolation_in_file: v.enable_interpolation_in_file,
            };
            self.create_variable(p, parent, input, secret)
                .await
                .map_err(at(&place))?;
        }
        Ok(())
    }

    /// The whole state as a fixture, read in one consistent unit: organizations, their
    /// tokens (names and roles: values are not kept), registries (without their secret
    /// configuration), clusters, projects, environments, services and their own variables
    /// (secrets without values). Seeding it into an empty server makes the same world.
    pub async fn export(&self) -> DomainResult<Fixture> {
        let mut unit = self.snapshot().await?;
        let tx = &mut *unit;
        let mut organizations = Vec::new();
        for org in self.every::<Organization>(tx, ()).await? {
            let tokens = self
                .every::<ApiToken>(tx, org.id)
                .await?
                .into_iter()
                .map(|t| TokenFixture {
                    name: t.name.to_string(),
                    role: t.role.name().to_string(),
                    description: t.description,
                    value: None,
                })
                .collect();
            let registries = self.every::<ContainerRegistry>(tx, org.id).await?;
            let names: HashMap<ContainerRegistryId, String> = registries
                .iter()
                .map(|r| (r.id, r.name.to_string()))
                .collect();
            let container_registries = registries
                .into_iter()
                .map(|r| {
                    let mut body = Map::new();
                    body.insert("name".into(), r.name.to_string().into());
                    body.insert("kind".into(), Value::from(r.kind.as_str()));
                    body.insert("url".into(), r.url.into());
                    if let Some(d) = r.description {
                        body.insert("description".into(), d.into());
                    }
                    if let Ok(Value::Object(config)) = serde_json::to_value(&r.config) {
                        if !config.is_empty() {
                            body.insert("config".into(), Value::Object(config));
                        }
                    }
                    body
                })
                .collect();
            let clusters = self.every::<Cluster>(tx, org.id).await?;
            let cluster_names: HashMap<ClusterId, String> = clusters
                .iter()
                .map(|c| (c.id, c.name.to_string()))
                .collect();
            let clusters = clusters
                .into_iter()
                .map(|c| {
                    let mut body = match serde_json::to_value(&c.spec) {
                        Ok(Value::Object(spec)) => spec,
                        _ => Map::new(),
                    };
                    body.insert("name".into(), c.name.to_string().into());
                    body.insert("region".into(), c.region.into());
                    body.insert(
                        "cloud_provider".into(),
                        Value::from(c.cloud_provider.as_str()),
                    );
                    if let Some(d) = c.description {
                        body.insert("description".into(), d.into());
                    }
                    drop_undescribed(&mut body);
                    body
                })
                .collect();
            let mut projects = Vec::new();
            for project in self.every::<Project>(tx, org.id).await? {
                let mut environments = Vec::new();
                for env in self.every::<Environment>(tx, project.id).await? {
                    let mut services = Vec::new();
                    for s in self.every::<Service>(tx, env.id).await? {
                        let mut body = match serde_json::to_value(&s.spec) {
                            Ok(Value::Object(spec)) => spec,
                            _ => Map::new(),
                        };
                        drop_undescribed(&mut body);
                        as_creation_body(s.kind(), &mut body);
                        show_registry(&mut body, &names);
                        if let Some(Value::Object(image)) =
                            body.get_mut("source").and_then(|s| s.get_mut("image"))
                        {
                            show_registry(image, &names);
                        }
                        body.insert("name".into(), s.name.to_string().into());
                        if let Some(d) = &s.description {
                            body.insert("description".into(), d.clone().into());
                        }
                        services.push(ServiceFixture {
                            kind: s.kind(),
                            variables: own_variables(self.every(tx, s.id.0).await?),
                            secrets: Vec::new(),
                            body,
                        });
                    }
                    environments.push(EnvironmentFixture {
                        name: env.name.to_string(),
                        mode: Some(env.mode),
                        cluster: cluster_names.get(&env.cluster_id).cloned(),
                        variables: own_variables(self.every(tx, env.id.0).await?),
                        secrets: Vec::new(),
                        services,
                    });
                }
                projects.push(ProjectFixture {
                    name: project.name.to_string(),
                    description: project.description.clone(),
                    variables: own_variables(self.every(tx, project.id.0).await?),
                    secrets: Vec::new(),
                    environments,
                });
            }
            organizations.push(OrganizationFixture {
                name: org.name.to_string(),
                description: org.description,
                tokens,
                container_registries,
                clusters,
                projects,
            });
        }
        Ok(Fixture { organizations })
    }
}

/// The variables a parent has of its own, as a fixture has them: values, not aliases,
/// overrides or built-in ones; secrets without their value.
fn own_variables(variables: Vec<Variable>) -> Vec<VariableFixture> {
    variables
        .into_iter()
        .filter(|v| {
            v.aliased_variable_id.is_none()
                && v.overridden_variable_id.is_none()
                && v.linked_database_id.is_none()
                && matches!(v.variable_type, VariableType::Value | VariableType::File)
        })
        .map(|v| VariableFixture {
            key: v.key.to_string(),
            value: (!v.is_secret)
                .then(|| v.value.as_ref().map(|s| s.expose().to_string()))
                .flatten(),
            secret: v.is_secret,
            mount_path: v.mount_path,
            description: v.description,
            enable_interpolation_in_file: v.enable_interpolation_in_file,
        })
        .collect()
}
