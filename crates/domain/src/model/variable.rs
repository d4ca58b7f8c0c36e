//! Environment variables and secrets, at project, environment and service scope.

use super::{Record, ServiceKind};
use crate::error::DomainError;
use crate::ids::*;
use crate::secret::Secret;
use crate::validate;
use time::OffsetDateTime;
use uuid::Uuid;

string_enum!(VariableScope {
    Application => "APPLICATION",
    BuiltIn => "BUILT_IN",
    Environment => "ENVIRONMENT",
    Project => "PROJECT",
    Container => "CONTAINER",
    Job => "JOB",
    Helm => "HELM",
    Terraform => "TERRAFORM",
});

string_enum!(VariableType {
    Value => "VALUE",
    Alias => "ALIAS",
    Override => "OVERRIDE",
    BuiltIn => "BUILT_IN",
    File => "FILE",
    ExternalSecret => "EXTERNAL_SECRET",
});

impl VariableScope {
    /// The scope of variables attached to a service of `kind`; databases take none.
    pub fn of_service(kind: ServiceKind) -> Option<Self> {
        match kind {
            ServiceKind::Application => Some(Self::Application),
            ServiceKind::Container => Some(Self::Container),
            ServiceKind::Job => Some(Self::Job),
            ServiceKind::Helm => Some(Self::Helm),
            ServiceKind::Terraform => Some(Self::Terraform),
            ServiceKind::Database => None,
        }
    }

    pub fn is_service(self) -> bool {
        !matches!(self, Self::Project | Self::Environment | Self::BuiltIn)
    }
}

/// What a variable is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VariableParent {
    Project(ProjectId),
    Environment(EnvironmentId),
    Service(ServiceId, ServiceKind),
}

impl VariableParent {
    pub fn id(&self) -> Uuid {
        match self {
            Self::Project(id) => id.0,
            Self::Environment(id) => id.0,
            Self::Service(id, _) => id.0,
        }
    }
}

/// A key: `[A-Za-z_][A-Za-z0-9_]*`, at most 255 characters. Cannot hold anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableKey(String);

impl VariableKey {
    pub fn parse(value: &str) -> Result<Self, DomainError> {
        let mut chars = value.chars();
        let valid_start = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
        if !valid_start || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(DomainError::invalid(
                "key",
                "must start with a letter or _ and hold only letters, digits and _",
            ));
        }
        validate::max_chars("key", value, 255)?;
        Ok(Self(value.to_string()))
    }

    /// A key read back from the store, which only ever holds parsed keys.
    pub fn stored(value: String) -> Self {
        Self(value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::fmt::Display for VariableKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An absolute path where a file variable is mounted.
pub fn mount_path(value: Option<String>) -> Result<Option<String>, DomainError> {
    match value {
        None => Ok(None),
        Some(p) if p.starts_with('/') && p.len() > 1 && !p.contains('\0') => {
            validate::max_chars("mount_path", &p, 1024)?;
            Ok(Some(p))
        }
        Some(_) => Err(DomainError::invalid(
            "mount_path",
            "must be an absolute path, like /etc/app/config.yaml",
        )),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Variable {
    pub id: VariableId,
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub environment_id: Option<EnvironmentId>,
    pub service_id: Option<ServiceId>,
    pub scope: VariableScope,
    pub key: VariableKey,
    /// None for an alias, which takes the value of the variable it points at.
    pub value: Option<Secret>,
    pub is_secret: bool,
    pub variable_type: VariableType,
    pub mount_path: Option<String>,
    pub description: Option<String>,
    pub enable_interpolation_in_file: Option<bool>,
    pub aliased_variable_id: Option<VariableId>,
    pub overridden_variable_id: Option<VariableId>,
    pub secret_manager_access_id: Option<Uuid>,
    /// The database whose connection this BUILT_IN variable gives its application (the link
    /// between the two).
    pub linked_database_id: Option<ServiceId>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for Variable {
    type Id = VariableId;
    /// Variables are listed by the ids of their parents.
    type Parent = Uuid;
    const KIND: &'static str = "variable";
    fn id(&self) -> VariableId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

impl Variable {
    pub fn parent(&self) -> VariableParent {
        match (self.service_id, self.environment_id) {
            (Some(s), _) => VariableParent::Service(s, service_kind(self.scope)),
            (None, Some(e)) => VariableParent::Environment(e),
            (None, None) => VariableParent::Project(self.project_id),
        }
    }

    pub fn parent_id(&self) -> Uuid {
        self.parent().id()
    }
}

fn service_kind(scope: VariableScope) -> ServiceKind {
    match scope {
        VariableScope::Container => ServiceKind::Container,
        VariableScope::Job => ServiceKind::Job,
        VariableScope::Helm => ServiceKind::Helm,
        VariableScope::Terraform => ServiceKind::Terraform,
        _ => ServiceKind::Application,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for good in ["A", "_x", "DATABASE_URL", "a1_b2"] {
            assert!(VariableKey::parse(good).is_ok(), "{good}");
        }
        for bad in ["", "1A", "A-B", "A B", "é", "A.B"] {
            let err = VariableKey::parse(bad).unwrap_err();
            assert!(err.to_string().starts_with("key:"), "{bad}");
        }
        assert!(VariableKey::parse(&"K".repeat(256)).is_err());
    }

    #[test]
    fn mount_paths_are_absolute() {
        assert_eq!(mount_path(None).unwrap(), None);
        assert!(mount_path(Some("/etc/x".into())).is_ok());
        assert!(mount_path(Some("etc/x".into())).is_err());
        assert!(mount_path(Some("/".into())).is_err());
    }

    #[test]
    fn scopes_of_services() {
        assert_eq!(
            VariableScope::of_service(ServiceKind::Container),
            Some(VariableScope::Container)
        );
        assert_eq!(VariableScope::of_service(ServiceKind::Database), None);
        assert!(VariableScope::Helm.is_service());
        assert!(!VariableScope::Environment.is_service());
    }
}
