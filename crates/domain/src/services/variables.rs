//! Variables and secrets: creation at any scope, aliases, overrides, edits and deletion. Any
//! change marks the deployed services it reaches OUT_OF_DATE.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{Conflict, DomainError, DomainResult, StoreError};
use crate::ids::*;
use crate::model::*;
use crate::pagination::{Page, PageRequest};
use crate::ports::Repo;
use crate::ports::{Scope, Unit};
use crate::secret::Secret;
use crate::validate;
use serde::{Deserialize, Deserializer};
use uuid::Uuid;

/// Absent: `None`; explicit null: `Some(None)`.
fn double_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Creating a variable or secret under a known parent.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct VariableInput {
    pub key: String,
    #[serde(default)]
    pub value: Option<Secret>,
    #[serde(default)]
    pub mount_path: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub enable_interpolation_in_file: Option<bool>,
}

/// `POST /variable`: the parent and secrecy, read from the same body as the [`VariableInput`].
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ScopedVariableInput {
    #[serde(default)]
    pub is_secret: bool,
    pub variable_scope: VariableScope,
    #[serde(deserialize_with = "crate::ids::strict_uuid")]
    pub variable_parent_id: Uuid,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct VariableEdit {
    pub key: String,
    /// Absent or null: the value is kept.
    #[serde(default)]
    pub value: Option<Secret>,
    #[serde(default, deserialize_with = "double_option")]
    pub description: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    pub enable_interpolation_in_file: Option<Option<bool>>,
    #[serde(default, deserialize_with = "double_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = Uuid))]
    pub secret_manager_access_id: Option<Option<crate::ids::StrictUuid>>,
    /// A file variable's path; absent or null: kept.
    #[serde(default)]
    pub mount_path: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct AliasInput {
    pub key: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub enable_interpolation_in_file: Option<bool>,
    #[serde(default)]
    pub alias_scope: Option<VariableScope>,
    #[serde(default, deserialize_with = "crate::ids::strict_uuid_option")]
    pub alias_parent_id: Option<Uuid>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct OverrideInput {
    /// Absent: an empty value.
    #[serde(default)]
    pub value: Option<Secret>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub enable_interpolation_in_file: Option<bool>,
    /// Where the override goes; required unless the route names it.
    #[serde(default)]
    pub override_scope: Option<VariableScope>,
    #[serde(default, deserialize_with = "crate::ids::strict_uuid_option")]
    pub override_parent_id: Option<Uuid>,
}

/// How a route names a variable: under a parent (`/application/{id}/secret/{secretId}`),
/// among its variables or its secrets. Edits and deletions name one of the parent's own;
/// aliases and overrides one visible there, and are created there.
#[derive(Debug, Clone, Copy)]
pub struct NamedAt {
    pub parent: VariableParent,
    pub secret: bool,
}

impl NamedAt {
    fn noun(&self) -> &'static str {
        if self.secret {
            "secret"
        } else {
            "variable"
        }
    }

    /// Whether `v` is one of the parent's own, of the route's kind; else not found there.
    fn owns(&self, v: &Variable) -> DomainResult<()> {
        if v.parent() == self.parent && v.is_secret == self.secret {
            Ok(())
        } else {
            Err(DomainError::NotFound(self.noun()))
        }
    }

    /// Whether `v` is of the route's kind (a variable or a secret).
    fn names(&self, v: &Variable) -> DomainResult<()> {
        if v.is_secret == self.secret {
            Ok(())
        } else {
            Err(DomainError::NotFound(self.noun()))
        }
    }
}

/// A variable with what the API shows around it.
#[derive(Debug, Clone)]
pub struct VariableDetails {
    pub variable: Variable,
    /// The name of the project, environment or service the variable belongs to.
    pub owner_name: String,
    pub service: Option<(ServiceId, String, ServiceKind)>,
    pub aliased: Option<Variable>,
    pub overridden: Option<Variable>,
}

/// A resolved parent: where a variable may be attached, and what it reaches.
#[derive(Debug, Clone)]
pub(super) struct Parent {
    pub(super) parent: VariableParent,
    organization_id: OrganizationId,
    project_id: ProjectId,
    environment_id: Option<EnvironmentId>,
    /// The name of the project, environment or service, as read when the parent was resolved.
    owner_name: String,
    service: Option<(ServiceId, String, ServiceKind)>,
}

impl Parent {
    fn scope(&self) -> VariableScope {
        match self.parent {
            VariableParent::Project(_) => VariableScope::Project,
            VariableParent::Environment(_) => VariableScope::Environment,
            VariableParent::Service(_, kind) => {
                VariableScope::of_service(kind).unwrap_or(VariableScope::Application)
            }
        }
    }

    /// The parents whose variables are visible here: the project, the environment, the service.
    fn chain(&self) -> Vec<Uuid> {
        let mut out = vec![self.project_id.0];
        out.extend(self.environment_id.map(|e| e.0));
        if let VariableParent::Service(s, _) = self.parent {
            out.push(s.0);
        }
        out
    }

    /// Whether a variable attached to `self` is visible from `other`.
    fn reaches(&self, other: &Parent) -> bool {
        match self.parent {
            VariableParent::Project(p) => other.project_id == p,
            VariableParent::Environment(e) => other.environment_id == Some(e),
            VariableParent::Service(..) => self.parent == other.parent,
        }
    }
}

/// What a write unit holds while it changes variables under `parent`: the parent's scope,
/// and with it every service the change marks OUT_OF_DATE.
fn scope_of(parent: VariableParent) -> Scope {
    match parent {
        VariableParent::Project(id) => Scope::Project(id),
        VariableParent::Environment(id) => Scope::Environment(id),
        VariableParent::Service(id, _) => Scope::EnvironmentOf(id),
    }
}

/// Holds `scope` for creating a variable under it. Creations under one service share its
/// environment and go on together (a unique index settles a key taken twice; they mark only
/// that service's row, so they queue on it in one order); whatever locks the environment (a
/// deployment, an edit, a deletion, a clone) waits for them, and they for it. Creations under
/// a project or an environment mark many services' rows, in an order two units could take
/// differently (a deadlock), so they lock their scope.
async fn hold_for_creation(tx: &mut Unit, scope: Scope) -> DomainResult<()> {
    match scope {
        Scope::EnvironmentOf(_) => tx.share(scope).await?,
        _ => tx.lock(scope).await?,
    }
    Ok(())
}

/// As [`scope_of`], for a parent named by a scope and an id (nothing for BUILT_IN, which no
/// client writes under).
fn scope_named(scope: VariableScope, id: Uuid) -> Option<Scope> {
    match scope {
        VariableScope::Project => Some(Scope::Project(ProjectId(id))),
        VariableScope::Environment => Some(Scope::Environment(EnvironmentId(id))),
        VariableScope::BuiltIn => None,
        _ => Some(Scope::EnvironmentOf(ServiceId(id))),
    }
}

/// What the API shows of a variable just created under `parent` (pointing at `target`, for an
/// alias or an override): everything is at hand, nothing is read again.
fn created(parent: &Parent, variable: Variable, target: Option<Variable>) -> VariableDetails {
    let (aliased, overridden) = match variable.variable_type {
        VariableType::Alias => (target, None),
        VariableType::Override => (None, target),
        _ => (None, None),
    };
    VariableDetails {
        owner_name: parent.owner_name.clone(),
        service: parent.service.clone(),
        aliased,
        overridden,
        variable,
    }
}

impl Capstan {
    /// The scope a write unit holds for the variable `id` (none for an unknown variable).
    /// Its parent never changes, so a read before the unit finds the scope; the variable
    /// itself is read in the unit, under the lock.
    async fn variable_scope(&self, id: VariableId) -> DomainResult<Option<Scope>> {
        let known = Repo::<Variable>::get(&mut *self.reading().await?, id).await?;
        Ok(known.map(|v| scope_of(v.parent())))
    }

    pub(super) async fn resolve_parent(
        &self,
        tx: &mut Unit,
        p: &Principal,
        parent: VariableParent,
        action: Action,
    ) -> DomainResult<Parent> {
        Ok(match parent {
            VariableParent::Project(id) => {
                let project: Project = self.load(tx, p, id, action).await?;
                Parent {
                    parent,
                    organization_id: project.organization_id,
                    project_id: id,
                    environment_id: None,
                    owner_name: project.name.to_string(),
                    service: None,
                }
            }
            VariableParent::Environment(id) => {
                let env: Environment = self.load(tx, p, id, action).await?;
                Parent {
                    parent,
                    organization_id: env.organization_id,
                    project_id: env.project_id,
                    environment_id: Some(id),
                    owner_name: env.name.to_string(),
                    service: None,
                }
            }
            VariableParent::Service(id, kind) => {
                let service: Service = self.load(tx, p, id, action).await?;
                if service.kind() != kind {
                    return Err(DomainError::NotFound(kind.noun()));
                }
                if VariableScope::of_service(kind).is_none() {
                    return Err(DomainError::invalid(
                        "scope",
                        "database services take no variables",
                    ));
                }
                Parent {
                    parent,
                    organization_id: service.organization_id,
                    project_id: service.project_id,
                    environment_id: Some(service.environment_id),
                    owner_name: service.name.to_string(),
                    service: Some((service.id, service.name.to_string(), kind)),
                }
            }
        })
    }

    /// The parent named by a scope and an id (as `POST /variable` and `GET /variable` give it).
    async fn scoped_parent(
        &self,
        tx: &mut Unit,
        p: &Principal,
        scope: VariableScope,
        id: Uuid,
        action: Action,
        field: &str,
    ) -> DomainResult<Parent> {
        let parent = match scope {
            VariableScope::Project => VariableParent::Project(ProjectId(id)),
            VariableScope::Environment => VariableParent::Environment(EnvironmentId(id)),
            VariableScope::BuiltIn => {
                return Err(DomainError::invalid(
                    field,
                    "BUILT_IN variables are created by Capstan, not by clients",
                ))
            }
            _ => {
                let service: Service = self.load(tx, p, ServiceId(id), action).await?;
                if VariableScope::of_service(service.kind()) != Some(scope) {
                    return Err(DomainError::invalid(
                        field,
                        format!("the parent is a {} service, not {scope}", service.kind()),
                    ));
                }
                VariableParent::Service(service.id, service.kind())
            }
        };
        self.resolve_parent(tx, p, parent, action).await
    }

    /// Adds the names, services and referenced variables the API shows, in a few batched reads.
    async fn variable_details(
        &self,
        tx: &mut Unit,
        vars: Vec<Variable>,
    ) -> DomainResult<Vec<VariableDetails>> {
        let services = self
            .by_id::<Service>(tx, vars.iter().filter_map(|v| v.service_id))
            .await?;
        let envs = self
            .by_id::<Environment>(tx, vars.iter().filter_map(|v| v.environment_id))
            .await?;
        let projects = self
            .by_id::<Project>(tx, vars.iter().map(|v| v.project_id))
            .await?;
        let refs = self
            .by_id::<Variable>(
                tx,
                vars.iter()
                    .flat_map(|v| [v.aliased_variable_id, v.overridden_variable_id])
                    .flatten(),
            )
            .await?;
        Ok(vars
            .into_iter()
            .map(|variable| {
                let service = variable
                    .service_id
                    .and_then(|id| services.get(&id))
                    .map(|s| (s.id, s.name.to_string(), s.kind()));
                let owner_name = match (&service, variable.environment_id) {
                    (Some((_, name, _)), _) => name.clone(),
                    (None, Some(e)) => envs.get(&e).map(|e| e.name.to_string()).unwrap_or_default(),
                    (None, None) => projects
                        .get(&variable.project_id)
                        .map(|p| p.name.to_string())
                        .unwrap_or_default(),
                };
                VariableDetails {
                    aliased: variable
                        .aliased_variable_id
                        .and_then(|id| refs.get(&id).cloned()),
                    overridden: variable
                        .overridden_variable_id
                        .and_then(|id| refs.get(&id).cloned()),
                    owner_name,
                    service,
                    variable,
                }
            })
            .collect())
    }

    async fn one_variable(&self, tx: &mut Unit, v: Variable) -> DomainResult<VariableDetails> {
        self.variable_details(tx, vec![v])
            .await?
            .pop()
            .ok_or_else(|| DomainError::Internal("variable vanished".into()))
    }

    /// Refuses `changed` (new, or edited) when a service that sees it would then hold more
    /// bytes of environment variables than the bound: it could not start ("argument list too
    /// long"). Every scope a service sees counts, as its workload gets them all.
    async fn check_service_totals(&self, tx: &mut Unit, changed: &Variable) -> DomainResult<()> {
        let filter = crate::ports::ServiceFilter {
            project: Some(changed.project_id),
            environment: changed.environment_id,
            ..Default::default()
        };
        let mut services = tx.find_services(&filter, PageRequest::all()).await?.items;
        if let Some(only) = changed.service_id {
            services.retain(|s| s.id == only);
        }
        if services.is_empty() {
            return Ok(());
        }
        let mut parents = vec![changed.project_id.0];
        parents.extend(services.iter().map(|s| s.environment_id.0));
        parents.extend(services.iter().map(|s| s.id.0));
        parents.sort();
        parents.dedup();
        let mut variables = tx
            .list_variables(&parents, None, PageRequest::all())
            .await?
            .items;
        variables.retain(|v| v.id != changed.id);
        variables.push(changed.clone());
        let values: std::collections::HashMap<VariableId, usize> = variables
            .iter()
            .map(|v| (v.id, v.value.as_ref().map_or(0, |s| s.expose().len())))
            .collect();
        let aliased = |id: VariableId| values.get(&id).copied().unwrap_or(0);
        for service in &services {
            let total: usize = variables
                .iter()
                .filter(|v| match (v.service_id, v.environment_id) {
                    (Some(owner), _) => owner == service.id,
                    (None, Some(env)) => env == service.environment_id,
                    (None, None) => true,
                })
                .map(|v| environment_bytes(v, aliased))
                .sum();
            self.bounds.check_service_variables(total)?;
        }
        Ok(())
    }

    async fn insert_variable(&self, tx: &mut Unit, v: &Variable) -> DomainResult<()> {
        self.bounds.check_variable(v)?;
        self.check_service_totals(tx, v).await?;
        Repo::<Variable>::insert(tx, v).await.map_err(|e| match e {
            StoreError::Duplicate => DomainError::Conflict(Conflict::KeyTaken {
                key: v.key.to_string(),
                at: format!("in this {}", v.scope.as_str().to_lowercase()),
            }),
            other => other.into(),
        })?;
        tx.mark_out_of_date(v.parent(), self.now()).await?;
        Ok(())
    }

    fn new_variable(
        &self,
        parent: &Parent,
        key: VariableKey,
        is_secret: bool,
        variable_type: VariableType,
    ) -> Variable {
        let now = self.now();
        let (environment_id, service_id) = match parent.parent {
            VariableParent::Service(s, _) => (parent.environment_id, Some(s)),
            _ => (parent.environment_id, None),
        };
        Variable {
            id: VariableId::generate(),
            organization_id: parent.organization_id,
            project_id: parent.project_id,
            environment_id,
            service_id,
            scope: parent.scope(),
            key,
            value: None,
            is_secret,
            variable_type,
            mount_path: None,
            description: None,
            enable_interpolation_in_file: None,
            aliased_variable_id: None,
            overridden_variable_id: None,
            secret_manager_access_id: None,
            linked_database_id: None,
            created_at: now,
            updated_at: now,
        }
    }

    pub(super) async fn create_under(
        &self,
        tx: &mut Unit,
        parent: &Parent,
        input: VariableInput,
        is_secret: bool,
    ) -> DomainResult<VariableDetails> {
        let key = VariableKey::parse(&input.key)?;
        let mount_path = mount_path(input.mount_path)?;
        let variable_type = if mount_path.is_some() {
            VariableType::File
        } else {
            VariableType::Value
        };
        let mut v = self.new_variable(parent, key, is_secret, variable_type);
        v.value = Some(input.value.unwrap_or_else(|| Secret::new("")));
        v.mount_path = mount_path;
        v.description = validate::description("description", input.description)?;
        v.enable_interpolation_in_file = input.enable_interpolation_in_file;
        self.insert_variable(tx, &v).await?;
        Ok(created(parent, v, None))
    }

    /// Creates a variable (`is_secret` false) or a secret under a project, environment or service.
    pub async fn create_variable(
        &self,
        p: &Principal,
        parent: VariableParent,
        input: VariableInput,
        is_secret: bool,
    ) -> DomainResult<VariableDetails> {
        self.in_unit(&[], async |tx| {
            hold_for_creation(tx, scope_of(parent)).await?;
            let parent = self.resolve_parent(tx, p, parent, Action::Write).await?;
            let created = self.create_under(tx, &parent, input, is_secret).await?;
            self.audit(tx, p, EventType::Create, &created.variable)
                .await?;
            Ok(created)
        })
        .await
    }

    /// `POST /variable`.
    pub async fn create_scoped_variable(
        &self,
        p: &Principal,
        scope: ScopedVariableInput,
        input: VariableInput,
    ) -> DomainResult<VariableDetails> {
        self.in_unit(&[], async |tx| {
            if let Some(held) = scope_named(scope.variable_scope, scope.variable_parent_id) {
                hold_for_creation(tx, held).await?;
            }
            let parent = self
                .scoped_parent(
                    tx,
                    p,
                    scope.variable_scope,
                    scope.variable_parent_id,
                    Action::Write,
                    "variable_scope",
                )
                .await?;
            let created = self
                .create_under(tx, &parent, input, scope.is_secret)
                .await?;
            self.audit(tx, p, EventType::Create, &created.variable)
                .await?;
            Ok(created)
        })
        .await
    }

    /// The variables (or secrets) visible at a parent: its own and those of its ancestors.
    pub async fn list_variables(
        &self,
        p: &Principal,
        parent: VariableParent,
        secret: Option<bool>,
        page: PageRequest,
    ) -> DomainResult<Page<VariableDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let parent = self.resolve_parent(tx, p, parent, Action::Read).await?;
        self.list_visible(tx, &parent, secret, page).await
    }

    /// `GET /variable?parent_id=&scope=`.
    pub async fn list_scoped_variables(
        &self,
        p: &Principal,
        scope: VariableScope,
        parent_id: Uuid,
        page: PageRequest,
    ) -> DomainResult<Page<VariableDetails>> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let parent = self
            .scoped_parent(tx, p, scope, parent_id, Action::Read, "scope")
            .await?;
        self.list_visible(tx, &parent, None, page).await
    }

    async fn list_visible(
        &self,
        tx: &mut Unit,
        parent: &Parent,
        secret: Option<bool>,
        page: PageRequest,
    ) -> DomainResult<Page<VariableDetails>> {
        let page = tx.list_variables(&parent.chain(), secret, page).await?;
        let items = self.variable_details(tx, page.items).await?;
        Ok(Page {
            items,
            request: page.request,
            total_count: page.total_count,
        })
    }

    pub async fn get_variable(
        &self,
        p: &Principal,
        id: VariableId,
    ) -> DomainResult<VariableDetails> {
        let mut unit = self.reading().await?;
        let tx = &mut *unit;
        let v = self.load(tx, p, id, Action::Read).await?;
        self.one_variable(tx, v).await
    }

    pub async fn edit_variable(
        &self,
        p: &Principal,
        id: VariableId,
        edit: VariableEdit,
        at: Option<NamedAt>,
    ) -> DomainResult<VariableDetails> {
        let held = self.variable_scope(id).await?;
        self.in_unit(held.as_slice(), async |tx| {
            let mut v: Variable = self.load(tx, p, id, Action::Write).await?;
            if let Some(at) = at {
                at.owns(&v)?;
            }
            if v.variable_type == VariableType::BuiltIn {
                return Err(DomainError::invalid(
                    "variable_type",
                    "BUILT_IN variables cannot be edited",
                ));
            }
            let key = VariableKey::parse(&edit.key)?;
            if v.variable_type == VariableType::Override && key != v.key {
                return Err(DomainError::invalid(
                    "key",
                    "the key of an override cannot be changed",
                ));
            }
            if let Some(value) = edit.value {
                if v.variable_type == VariableType::Alias {
                    return Err(DomainError::invalid(
                        "value",
                        "the value of an alias cannot be changed",
                    ));
                }
                v.value = Some(value);
            }
            v.key = key;
            if let Some(description) = edit.description {
                v.description = validate::description("description", description)?;
            }
            if let Some(interpolate) = edit.enable_interpolation_in_file {
                v.enable_interpolation_in_file = interpolate;
            }
            if let Some(access) = edit.secret_manager_access_id {
                v.secret_manager_access_id = access.map(|id| id.0);
            }
            if let Some(path) = edit.mount_path {
                if v.variable_type != VariableType::File {
                    return Err(DomainError::invalid(
                        "mount_path",
                        "only a file variable (created with a mount_path) has one",
                    ));
                }
                v.mount_path = mount_path(Some(path))?;
            }
            self.bounds.check_variable(&v)?;
            self.check_service_totals(tx, &v).await?;
            v.updated_at = self.now();
            Repo::<Variable>::update(tx, &v)
                .await
                .map_err(|e| match e {
                    StoreError::Duplicate => DomainError::Conflict(Conflict::KeyTaken {
                        key: v.key.to_string(),
                        at: "there".into(),
                    }),
                    other => other.into(),
                })?;
            tx.mark_out_of_date(v.parent(), self.now()).await?;
            self.audit(tx, p, EventType::Update, &v).await?;
            let edited = self.one_variable(tx, v).await?;
            Ok(edited)
        })
        .await
    }

    /// Deletes a variable with its aliases and overrides.
    pub async fn delete_variable(
        &self,
        p: &Principal,
        id: VariableId,
        at: Option<NamedAt>,
    ) -> DomainResult<()> {
        let held = self.variable_scope(id).await?;
        self.in_unit(held.as_slice(), async |tx| {
            let v: Variable = self.load(tx, p, id, Action::Write).await?;
            if let Some(at) = at {
                at.owns(&v)?;
            }
            if v.variable_type == VariableType::BuiltIn {
                return Err(DomainError::invalid(
                    "variable_type",
                    "BUILT_IN variables cannot be deleted (remove the database's link instead)",
                ));
            }
            self.audit(tx, p, EventType::Delete, &v).await?;
            self.delete::<Variable>(tx, id, "other variables").await?;
            tx.mark_out_of_date(v.parent(), self.now()).await?;
            Ok(())
        })
        .await
    }

    async fn referencable(
        &self,
        tx: &mut Unit,
        p: &Principal,
        id: VariableId,
        what: &str,
        at: Option<NamedAt>,
    ) -> DomainResult<(Variable, Parent)> {
        let target: Variable = self.load(tx, p, id, Action::Write).await?;
        if let Some(at) = at {
            at.names(&target)?;
        }
        if matches!(
            target.variable_type,
            VariableType::Alias | VariableType::Override
        ) {
            return Err(DomainError::invalid(
                "variableId",
                format!(
                    "an {} cannot be made of an {}",
                    what,
                    target.variable_type.as_str().to_lowercase()
                ),
            ));
        }
        let parent = self
            .resolve_parent(tx, p, target.parent(), Action::Read)
            .await?;
        Ok((target, parent))
    }

    /// A new key that points at an existing variable, at its scope or below.
    pub async fn create_alias(
        &self,
        p: &Principal,
        id: VariableId,
        input: AliasInput,
        at: Option<NamedAt>,
    ) -> DomainResult<VariableDetails> {
        // The target's scope covers every parent an alias of it may have (its own or below).
        let held = self.variable_scope(id).await?;
        self.in_unit(held.as_slice(), async |tx| {
            let (target, target_parent) = self.referencable(tx, p, id, "alias", at).await?;
            let parent = match (at, input.alias_scope, input.alias_parent_id) {
                (Some(at), _, _) => self.resolve_parent(tx, p, at.parent, Action::Write).await?,
                (None, Some(scope), Some(pid)) => {
                    self.scoped_parent(tx, p, scope, pid, Action::Write, "alias_scope")
                        .await?
                }
                (None, None, None) => {
                    self.resolve_parent(tx, p, target.parent(), Action::Write)
                        .await?
                }
                _ => {
                    return Err(DomainError::invalid(
                        "alias_parent_id",
                        "alias_scope and alias_parent_id go together",
                    ))
                }
            };
            if !target_parent.reaches(&parent) {
                return Err(DomainError::invalid(
                    "alias_parent_id",
                    "an alias must be at the scope of its variable or below",
                ));
            }
            let mut v = self.new_variable(
                &parent,
                VariableKey::parse(&input.key)?,
                target.is_secret,
                VariableType::Alias,
            );
            v.description = validate::description("description", input.description)?;
            v.enable_interpolation_in_file = input.enable_interpolation_in_file;
            v.aliased_variable_id = Some(target.id);
            self.insert_variable(tx, &v).await?;
            self.audit(tx, p, EventType::Create, &v).await?;
            Ok(created(&parent, v, Some(target)))
        })
        .await
    }

    /// A value for an existing key at a lower scope.
    pub async fn create_override(
        &self,
        p: &Principal,
        id: VariableId,
        input: OverrideInput,
        at: Option<NamedAt>,
    ) -> DomainResult<VariableDetails> {
        let held = self.variable_scope(id).await?;
        self.in_unit(held.as_slice(), async |tx| {
            if at.is_none() && input.value.is_none() {
                // `POST /variable/{id}/override` takes its value (a route's override may leave it
                // out).
                return Err(DomainError::invalid("value", "is required"));
            }
            let (target, target_parent) = self.referencable(tx, p, id, "override", at).await?;
            let parent = match (at, input.override_scope, input.override_parent_id) {
                (Some(at), _, _) => self.resolve_parent(tx, p, at.parent, Action::Write).await?,
                (None, Some(scope), Some(pid)) => {
                    self.scoped_parent(tx, p, scope, pid, Action::Write, "override_scope")
                        .await?
                }
                (None, None, _) => {
                    return Err(DomainError::invalid("override_scope", "is required"))
                }
                (None, _, None) => {
                    return Err(DomainError::invalid("override_parent_id", "is required"))
                }
            };
            if !target_parent.reaches(&parent) || target_parent.parent == parent.parent {
                return Err(DomainError::invalid(
                    "override_scope",
                    "an override must be at a lower scope than its variable",
                ));
            }
            let key = target.key.clone();
            let mut v = self.new_variable(&parent, key, target.is_secret, VariableType::Override);
            v.value = Some(input.value.unwrap_or_else(|| Secret::new("")));
            v.mount_path = target.mount_path.clone();
            v.description = validate::description("description", input.description)?;
            v.enable_interpolation_in_file = input.enable_interpolation_in_file;
            v.overridden_variable_id = Some(target.id);
            self.insert_variable(tx, &v).await?;
            self.audit(tx, p, EventType::Create, &v).await?;
            Ok(created(&parent, v, Some(target)))
        })
        .await
    }
}
