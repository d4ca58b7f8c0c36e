//! Many variables and secrets at once, for one service and the environment and project above it
//! (`POST /{kind}/{id}/environmentVariable/import`, `POST /variable/import`): all or nothing.

use super::variables::Parent;
use super::{Capstan, VariableInput};
use crate::auth::{Action, Principal};
use crate::error::{Conflict, DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::EventType;
use crate::model::{
    Service, ServiceKind, Variable, VariableKey, VariableParent, VariableScope, VariableType,
};
use crate::pagination::PageRequest;
use crate::ports::{Repo, Scope};
use crate::secret::Secret;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ImportInput {
    /// Whether a key the scope already has takes the imported value (else the import is
    /// refused); required, as the public description has it.
    pub overwrite: bool,
    pub vars: Vec<ImportedVariable>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ImportedVariable {
    pub name: String,
    pub value: Secret,
    /// PROJECT, ENVIRONMENT, or the service's own scope (APPLICATION, CONTAINER, ...).
    pub scope: VariableScope,
    pub is_secret: bool,
}

/// What an import wrote, in the order it was sent.
#[derive(Debug)]
pub struct ImportReport {
    pub total: usize,
    pub imported: Vec<Variable>,
}

impl Capstan {
    pub async fn import_variables(
        &self,
        p: &Principal,
        service: ServiceId,
        kind: Option<ServiceKind>,
        input: ImportInput,
    ) -> DomainResult<ImportReport> {
        // Where the service is never changes; the unit then holds its project and its
        // environment (in that order, as every unit takes them) for the whole import.
        let known: Service = self
            .load(&mut *self.reading().await?, p, service, Action::Write)
            .await?;
        self.in_unit(
            &[
                Scope::Project(known.project_id),
                Scope::Environment(known.environment_id),
            ],
            async |tx| {
                let s: Service = self.load(tx, p, service, Action::Write).await?;
                if kind.is_some_and(|k| k != s.kind()) {
                    return Err(DomainError::NotFound(kind.unwrap_or(s.kind()).noun()));
                }
                let own_scope = VariableScope::of_service(s.kind()).ok_or_else(|| {
                    DomainError::invalid("service_id", "database services take no variables")
                })?;
                let mut parents = HashMap::new();
                for (scope, parent) in [
                    (
                        VariableScope::Project,
                        VariableParent::Project(s.project_id),
                    ),
                    (
                        VariableScope::Environment,
                        VariableParent::Environment(s.environment_id),
                    ),
                    (own_scope, VariableParent::Service(s.id, s.kind())),
                ] {
                    parents.insert(
                        scope,
                        self.resolve_parent(tx, p, parent, Action::Write).await?,
                    );
                }
                let chain: Vec<Uuid> = parents.values().map(|p: &Parent| p.parent.id()).collect();
                // At most a page of the largest size is read: a key beyond it is still refused by
                // the store's unique index when inserted (409), never written twice.
                let existing: HashMap<(Uuid, String), Variable> = tx
                    .list_variables(&chain, None, PageRequest::all())
                    .await?
                    .items
                    .into_iter()
                    .map(|v| ((v.parent().id(), v.key.to_string()), v))
                    .collect();
                let total = input.vars.len();
                let mut seen = HashSet::new();
                let mut imported = Vec::with_capacity(total);
                for (i, var) in input.vars.into_iter().enumerate() {
                    let parent = parents.get(&var.scope).ok_or_else(|| {
                        DomainError::invalid(
                            format!("vars[{i}].scope"),
                            format!("must be PROJECT, ENVIRONMENT or {own_scope}"),
                        )
                    })?;
                    let key = VariableKey::parse(&var.name).map_err(|e| match e {
                        DomainError::Invalid { message, .. } => {
                            DomainError::invalid(format!("vars[{i}].name"), message)
                        }
                        other => other,
                    })?;
                    let at = (parent.parent.id(), key.to_string());
                    if !seen.insert(at.clone()) {
                        return Err(DomainError::invalid(
                            format!("vars[{i}].name"),
                            format!("{key} is imported twice at scope {}", var.scope),
                        ));
                    }
                    let written = match existing.get(&at) {
                        None => {
                            let input = VariableInput {
                                key: var.name,
                                value: Some(var.value),
                                mount_path: None,
                                description: None,
                                enable_interpolation_in_file: None,
                            };
                            self.create_under(tx, parent, input, var.is_secret)
                                .await?
                                .variable
                        }
                        Some(_) if !input.overwrite => {
                            return Err(DomainError::Conflict(Conflict::KeyTaken {
                                key: key.to_string(),
                                at: format!(
                                    "in this {} (send overwrite: true to replace its value)",
                                    var.scope.as_str().to_lowercase()
                                ),
                            }))
                        }
                        Some(old) => self.overwrite(tx, old, var.value, var.is_secret, i).await?,
                    };
                    imported.push(written);
                }
                if let Some(first) = imported.first() {
                    self.audit(tx, p, EventType::Import, first).await?;
                }
                Ok(ImportReport { total, imported })
            },
        )
        .await
    }

    async fn overwrite(
        &self,
        tx: &mut crate::ports::Unit,
        old: &Variable,
        value: Secret,
        is_secret: bool,
        i: usize,
    ) -> DomainResult<Variable> {
        if old.is_secret != is_secret {
            return Err(DomainError::state(format!(
                "vars[{i}]: {} exists as a {}; a {} cannot replace it",
                old.key,
                if old.is_secret { "secret" } else { "variable" },
                if is_secret { "secret" } else { "variable" },
            )));
        }
        if matches!(
            old.variable_type,
            VariableType::Alias | VariableType::BuiltIn
        ) {
            return Err(DomainError::state(format!(
                "vars[{i}]: {} is an {} here, whose value cannot be set",
                old.key,
                old.variable_type.as_str().to_lowercase()
            )));
        }
        let mut v = old.clone();
        v.value = Some(value);
        v.updated_at = self.now();
        Repo::<Variable>::update(tx, &v).await?;
        tx.mark_out_of_date(v.parent(), self.now()).await?;
        Ok(v)
    }
}
