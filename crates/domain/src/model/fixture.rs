//! A fixture: a world described declaratively, which a stand-in loads through the use cases
//! (so every record passes every check) and writes back out of its state. Records refer to
//! each other by name within their organization; secret values are never written out.

use super::{EnvironmentMode, ServiceKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fixture {
    #[serde(default)]
    pub organizations: Vec<OrganizationFixture>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrganizationFixture {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "api_tokens")]
    pub tokens: Vec<TokenFixture>,
    /// Container registries: the body `POST /organization/{id}/containerRegistry` takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "registries")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub container_registries: Vec<Map<String, Value>>,
    /// Clusters: the body `POST /organization/{id}/cluster` takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<Object>))]
    pub clusters: Vec<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<ProjectFixture>,
}

/// An API token. With a `value`, that is its value (a test suite's fixed credentials);
/// without, one is made and answered once.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFixture {
    pub name: String,
    /// ADMIN (the default), DEVOPS, VIEWER or BILLING_MANAGER.
    #[serde(default = "admin")]
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing, alias = "token")]
    pub value: Option<String>,
}

fn admin() -> String {
    "ADMIN".into()
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectFixture {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableFixture>,
    /// Secrets, as `variables` with `secret: true` (exports write them there).
    #[serde(default, skip_serializing)]
    pub secrets: Vec<VariableFixture>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environments: Vec<EnvironmentFixture>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentFixture {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<EnvironmentMode>,
    /// The name of the organization's cluster it runs on (default: its first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableFixture>,
    /// Secrets, as `variables` with `secret: true` (exports write them there).
    #[serde(default, skip_serializing)]
    pub secrets: Vec<VariableFixture>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceFixture>,
}

/// A service: its kind, its variables, and the body its kind's create operation takes. A
/// container registry is named by `registry` (at the top, or in `source.image`) rather than
/// by id.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServiceFixture {
    /// Also read from `service_type`, or from `type` when that names a kind (a database's
    /// `type` is its engine, and stays in the body).
    pub kind: ServiceKind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<VariableFixture>,
    #[serde(default, skip_serializing)]
    pub secrets: Vec<VariableFixture>,
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub body: Map<String, Value>,
}

impl<'de> Deserialize<'de> for ServiceFixture {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut body = Map::<String, Value>::deserialize(d)?;
        let named = |v: &Value| {
            v.as_str()
                .and_then(|k| k.to_ascii_uppercase().parse::<ServiceKind>().ok())
        };
        let kind = match (body.remove("kind"), body.remove("service_type")) {
            (Some(_), Some(_)) => {
                return Err(D::Error::custom("give kind or service_type, not both"))
            }
            (Some(given), None) | (None, Some(given)) => named(&given).ok_or_else(|| {
                D::Error::custom(format!("kind: must be one of {}", ServiceKind::allowed()))
            })?,
            (None, None) => match body.get("type").and_then(named) {
                Some(kind) => {
                    body.remove("type");
                    kind
                }
                None => return Err(D::Error::missing_field("kind")),
            },
        };
        let mut list = |name: &str| -> Result<Vec<VariableFixture>, D::Error> {
            match body.remove(name) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(given) => serde_json::from_value(given)
                    .map_err(|e| D::Error::custom(format!("{name}: {e}"))),
            }
        };
        let variables = list("variables")?;
        let secrets = list("secrets")?;
        Ok(Self {
            kind,
            variables,
            secrets,
            body,
        })
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariableFixture {
    pub key: String,
    /// Left out of exports for secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// For a file (a `mount_path`): whether variables in its content are interpolated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_interpolation_in_file: Option<bool>,
}

/// What a seed made that its caller cannot know beforehand.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Seeded {
    pub organizations: Vec<SeededOrganization>,
}

/// An organization the seed made, with the ids of what it made in it, by name: what a test
/// suite calls next, without listing to find it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededOrganization {
    pub id: crate::ids::OrganizationId,
    pub name: String,
    /// Every token of the fixture, with its value (the fixture's, or the one made now).
    pub tokens: Vec<SeededToken>,
    pub container_registries: Vec<SeededRecord>,
    pub clusters: Vec<SeededRecord>,
    pub projects: Vec<SeededProject>,
}

/// A record the seed made: its id and name.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededRecord {
    pub id: uuid::Uuid,
    pub name: String,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededProject {
    pub id: crate::ids::ProjectId,
    pub name: String,
    pub environments: Vec<SeededEnvironment>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededEnvironment {
    pub id: crate::ids::EnvironmentId,
    pub name: String,
    pub services: Vec<SeededService>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededService {
    pub id: crate::ids::ServiceId,
    pub name: String,
    pub kind: ServiceKind,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeededToken {
    pub name: String,
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(v: Value) -> Result<ServiceFixture, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn a_service_s_kind_is_read_from_its_api_words_and_a_database_keeps_its_type() {
        let db = service(json!({"kind": "DATABASE", "name": "db", "type": "POSTGRESQL"})).unwrap();
        assert_eq!(db.kind, ServiceKind::Database);
        assert_eq!(db.body["type"], "POSTGRESQL");
        let typed = service(json!({"type": "container", "name": "web"})).unwrap();
        assert_eq!(typed.kind, ServiceKind::Container);
        assert!(!typed.body.contains_key("type"));
        let listed = service(json!({
            "service_type": "JOB", "name": "cron",
            "variables": [{"key": "A", "value": "1"}], "secrets": [{"key": "B", "value": "2"}]
        }))
        .unwrap();
        assert_eq!(listed.kind, ServiceKind::Job);
        assert_eq!((listed.variables.len(), listed.secrets.len()), (1, 1));
        assert_eq!(listed.body.keys().collect::<Vec<_>>(), ["name"]);
    }

    #[test]
    fn a_service_without_a_kind_or_with_two_is_refused() {
        for (body, says) in [
            (
                json!({"name": "db", "type": "POSTGRESQL"}),
                "missing field `kind`",
            ),
            (
                json!({"kind": "CONTAINER", "service_type": "JOB"}),
                "not both",
            ),
            (json!({"kind": "NAPPER"}), "kind: must be one of"),
            (
                json!({"kind": "JOB", "variables": [{"key": "A", "colour": 1}]}),
                "variables:",
            ),
        ] {
            let refused = service(body).unwrap_err();
            assert!(refused.contains(says), "{refused}");
        }
    }
}
