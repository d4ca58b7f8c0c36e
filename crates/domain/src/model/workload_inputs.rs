//! What a workload runs with, resolved the way its variable listing shows it: every scope it
//! sees, the nearest scope winning a key, overrides replacing the value they override, aliases
//! adding a name for a value. Engines receive it whole; nothing here knows how they run it.

use super::{GitProvider, RegistryKind, Variable, VariableType};
use crate::secret::Secret;
use std::collections::{BTreeMap, HashMap};

/// One environment variable of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvValue {
    pub key: String,
    pub value: Secret,
    pub secret: bool,
}

/// A file variable: its value as a read-only file at `mount_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileValue {
    pub key: String,
    pub mount_path: String,
    pub content: Secret,
    pub secret: bool,
}

/// How an engine signs in to the registry an image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryAccess {
    pub url: String,
    pub kind: RegistryKind,
    pub username: Option<String>,
    pub password: Option<Secret>,
}

/// How an engine fetches the git repository a service is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitAccess {
    pub url: String,
    pub provider: GitProvider,
    /// The service's git token, for a private repository.
    pub token: Option<Secret>,
}

/// Everything a workload is given besides its service's own configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadInputs {
    /// In key order.
    pub environment: Vec<EnvValue>,
    /// In mount path order.
    pub files: Vec<FileValue>,
    pub registry: Option<RegistryAccess>,
    /// The repository it is built from, when it is.
    pub git: Option<GitAccess>,
}

/// How near a variable is to the workload: its own service's beat its environment's, which
/// beat its project's.
fn nearness(v: &Variable) -> u8 {
    match (v.service_id, v.environment_id) {
        (Some(_), _) => 2,
        (None, Some(_)) => 1,
        (None, None) => 0,
    }
}

impl WorkloadInputs {
    /// Resolves `visible`: the variables attached to the workload's project, environment and
    /// service (as `VariableQueries::list_variables` gives them for that chain).
    pub fn resolve(visible: &[Variable]) -> Self {
        let by_id: HashMap<_, _> = visible.iter().map(|v| (v.id, v)).collect();
        let mut ordered: Vec<&Variable> = visible.iter().collect();
        ordered.sort_by_key(|v| (nearness(v), v.created_at));
        let mut chosen: BTreeMap<&str, (&Variable, Secret)> = BTreeMap::new();
        for v in ordered {
            let value = match v.variable_type {
                VariableType::Alias => v
                    .aliased_variable_id
                    .and_then(|id| by_id.get(&id))
                    .map(|target| resolved_value(target, &by_id)),
                _ => v.value.clone(),
            };
            if let Some(value) = value {
                chosen.insert(v.key.as_str(), (v, value));
            }
        }
        let mut inputs = WorkloadInputs::default();
        for (key, (v, value)) in chosen {
            match &v.mount_path {
                Some(path) => inputs.files.push(FileValue {
                    key: key.to_string(),
                    mount_path: path.clone(),
                    content: value,
                    secret: v.is_secret,
                }),
                None => inputs.environment.push(EnvValue {
                    key: key.to_string(),
                    value,
                    secret: v.is_secret,
                }),
            }
        }
        inputs.files.sort_by(|a, b| a.mount_path.cmp(&b.mount_path));
        inputs
    }

    /// The values no log line may show.
    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        let env = self
            .environment
            .iter()
            .filter(|e| e.secret)
            .map(|e| &e.value);
        let files = self.files.iter().filter(|f| f.secret).map(|f| &f.content);
        let registry = self.registry.iter().filter_map(|r| r.password.as_ref());
        let git = self.git.iter().filter_map(|g| g.token.as_ref());
        env.chain(files)
            .chain(registry)
            .chain(git)
            .map(Secret::expose)
            .filter(|v| !v.is_empty())
    }
}

/// The value an alias takes: its target's (an alias of an alias follows it once more).
fn resolved_value(target: &Variable, by_id: &HashMap<crate::ids::VariableId, &Variable>) -> Secret {
    match (target.variable_type, target.aliased_variable_id) {
        (VariableType::Alias, Some(next)) => by_id
            .get(&next)
            .and_then(|v| v.value.clone())
            .unwrap_or_else(|| Secret::new("")),
        _ => target.value.clone().unwrap_or_else(|| Secret::new("")),
    }
}

/// What replaces a secret value in a log line.
pub const MASK: &str = "********";

/// Replaces secret values in text before it is kept anywhere. Longer values are replaced first,
/// so a secret that contains another is masked whole; a value of several lines is also masked
/// line by line (a program may print one line of it), lines under four characters excepted.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    values: Vec<String>,
}

impl Masker {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut values: Vec<String> = Vec::new();
        for s in secrets {
            values.push(s.to_string());
            if s.contains('\n') {
                values.extend(
                    s.lines()
                        .map(str::trim)
                        .filter(|l| l.chars().count() >= 4)
                        .map(str::to_string),
                );
            }
        }
        values.retain(|v| !v.is_empty());
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { values }
    }

    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::*;
    use crate::model::{VariableKey, VariableScope};
    use time::OffsetDateTime;

    fn var(key: &str, value: &str, at: (Option<EnvironmentId>, Option<ServiceId>)) -> Variable {
        let now = OffsetDateTime::now_utc();
        Variable {
            id: VariableId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            environment_id: at.0,
            service_id: at.1,
            scope: VariableScope::Project,
            key: VariableKey::stored(key.into()),
            value: Some(Secret::new(value)),
            is_secret: false,
            variable_type: VariableType::Value,
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

    fn env_of(inputs: &WorkloadInputs) -> Vec<(&str, &str)> {
        inputs
            .environment
            .iter()
            .map(|e| (e.key.as_str(), e.value.expose()))
            .collect()
    }

    #[test]
    fn the_nearest_scope_wins_and_overrides_replace_what_they_override() {
        let (env, svc) = (EnvironmentId::generate(), ServiceId::generate());
        let project = var("LEVEL", "project", (None, None));
        let only_project = var("FROM_PROJECT", "p", (None, None));
        let environment = var("LEVEL", "environment", (Some(env), None));
        let mut overriding = var("FROM_PROJECT", "overridden", (Some(env), Some(svc)));
        overriding.variable_type = VariableType::Override;
        overriding.overridden_variable_id = Some(only_project.id);
        let inputs = WorkloadInputs::resolve(&[overriding, environment, project, only_project]);
        assert_eq!(
            env_of(&inputs),
            [("FROM_PROJECT", "overridden"), ("LEVEL", "environment")]
        );
    }

    #[test]
    fn aliases_take_their_targets_value_and_files_are_kept_apart() {
        let env = EnvironmentId::generate();
        let mut target = var("DB_PASSWORD", "hunter22", (None, None));
        target.is_secret = true;
        let mut alias = var("PASSWORD", "", (Some(env), None));
        alias.value = None;
        alias.is_secret = true;
        alias.variable_type = VariableType::Alias;
        alias.aliased_variable_id = Some(target.id);
        let mut file = var("CONFIG", "a = 1", (Some(env), None));
        file.variable_type = VariableType::File;
        file.mount_path = Some("/etc/app/config.toml".into());
        let inputs = WorkloadInputs::resolve(&[alias, target, file]);
        assert_eq!(
            env_of(&inputs),
            [("DB_PASSWORD", "hunter22"), ("PASSWORD", "hunter22")]
        );
        assert_eq!(inputs.files.len(), 1);
        assert_eq!(inputs.files[0].mount_path, "/etc/app/config.toml");
        assert_eq!(inputs.files[0].content.expose(), "a = 1");
        assert_eq!(
            inputs.secret_values().collect::<Vec<_>>(),
            ["hunter22", "hunter22"]
        );
    }

    #[test]
    fn masking_hides_every_secret_whole_and_line_by_line() {
        let masker = Masker::new(["hunter22", "hunter2234", "line one\nline two\nab", ""]);
        assert_eq!(
            masker.mask("pw=hunter2234 and hunter22; line two"),
            format!("pw={MASK} and {MASK}; {MASK}")
        );
        assert_eq!(masker.mask("ab stays"), "ab stays");
        assert_eq!(Masker::new([]).mask("plain"), "plain");
    }
}
