//! Labels and annotations groups: named sets of Kubernetes labels (or annotations) that an
//! organization defines once and attaches to services.

use super::{Name, Record};
use crate::error::DomainError;
use crate::ids::{MetadataGroupId, OrganizationId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

string_enum!(GroupKind { Labels => "LABELS", Annotations => "ANNOTATIONS" });

string_enum!(
    /// The Kubernetes objects an annotations group is put on.
    AnnotationScope {
        Deployments => "DEPLOYMENTS",
        StatefulSets => "STATEFUL_SETS",
        Services => "SERVICES",
        Ingress => "INGRESS",
        GatewayApiRoutes => "GATEWAY_API_ROUTES",
        Hpa => "HPA",
        Pods => "PODS",
        Secrets => "SECRETS",
        Jobs => "JOBS",
        CronJobs => "CRON_JOBS",
    }
);

/// One label or annotation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupEntry {
    pub key: String,
    pub value: String,
    /// Labels only: whether the cloud provider's resources carry it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_to_cloud_provider: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MetadataGroup {
    pub id: MetadataGroupId,
    pub organization_id: OrganizationId,
    pub kind: GroupKind,
    pub name: Name,
    pub entries: Vec<GroupEntry>,
    /// Annotations only.
    pub scopes: Vec<AnnotationScope>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for MetadataGroup {
    type Id = MetadataGroupId;
    type Parent = OrganizationId;
    const KIND: &'static str = "labels or annotations group";
    fn id(&self) -> MetadataGroupId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The public `OrganizationLabelsGroupCreateRequest`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct LabelsGroupInput {
    pub name: String,
    pub labels: Vec<LabelInput>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct LabelInput {
    pub key: String,
    pub value: String,
    pub propagate_to_cloud_provider: bool,
}

/// The public `OrganizationAnnotationsGroupCreateRequest`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct AnnotationsGroupInput {
    pub name: String,
    pub annotations: Vec<AnnotationInput>,
    pub scopes: Vec<AnnotationScope>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct AnnotationInput {
    pub key: String,
    pub value: String,
}

/// A group's checked name, kind, entries and scopes.
pub struct GroupDraft {
    pub name: Name,
    pub kind: GroupKind,
    pub entries: Vec<GroupEntry>,
    pub scopes: Vec<AnnotationScope>,
}

fn name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// A Kubernetes label or annotation key: `[prefix/]name`, the prefix a DNS subdomain of at
/// most 253 characters, the name 1-63 letters, digits, `-`, `_` and `.`, starting and ending
/// with a letter or digit.
fn key(field: &str, key: &str) -> Result<(), DomainError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
            })
    });
    if !prefix_ok || !name_part(name) {
        return Err(DomainError::invalid(
            field,
            format!("'{key}' is not a Kubernetes key ([prefix/]name, the name 1-63 letters, digits, '-', '_' or '.')"),
        ));
    }
    Ok(())
}

fn unique_keys(field: &str, entries: &[GroupEntry]) -> Result<(), DomainError> {
    let mut seen = std::collections::HashSet::new();
    for e in entries {
        if !seen.insert(e.key.as_str()) {
            return Err(DomainError::invalid(
                field,
                format!("the key '{}' is given twice", e.key),
            ));
        }
    }
    Ok(())
}

impl LabelsGroupInput {
    pub fn validate(self) -> Result<GroupDraft, DomainError> {
        let name = Name::parse("name", &self.name)?;
        let mut entries = Vec::new();
        for (i, l) in self.labels.into_iter().enumerate() {
            key(&format!("labels[{i}].key"), &l.key)?;
            // A label value is empty or a name part.
            if !l.value.is_empty() && !name_part(&l.value) {
                return Err(DomainError::invalid(
                    format!("labels[{i}].value"),
                    "must be empty or 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                ));
            }
            entries.push(GroupEntry {
                key: l.key,
                value: l.value,
                propagate_to_cloud_provider: Some(l.propagate_to_cloud_provider),
            });
        }
        unique_keys("labels", &entries)?;
        Ok(GroupDraft {
            name,
            kind: GroupKind::Labels,
            entries,
            scopes: Vec::new(),
        })
    }
}

impl AnnotationsGroupInput {
    pub fn validate(self) -> Result<GroupDraft, DomainError> {
        let name = Name::parse("name", &self.name)?;
        let mut entries = Vec::new();
        for (i, a) in self.annotations.into_iter().enumerate() {
            key(&format!("annotations[{i}].key"), &a.key)?;
            entries.push(GroupEntry {
                key: a.key,
                value: a.value,
                propagate_to_cloud_provider: None,
            });
        }
        unique_keys("annotations", &entries)?;
        let mut scopes = self.scopes;
        scopes.sort_by_key(|s| s.as_str());
        scopes.dedup();
        Ok(GroupDraft {
            name,
            kind: GroupKind::Annotations,
            entries,
            scopes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_follow_kubernetes() {
        let labels = |k: &str, v: &str| LabelsGroupInput {
            name: "team".into(),
            labels: vec![LabelInput {
                key: k.into(),
                value: v.into(),
                propagate_to_cloud_provider: false,
            }],
        };
        assert!(labels("app.kubernetes.io/team", "core-1")
            .validate()
            .is_ok());
        assert!(labels("team", "").validate().is_ok());
        for (k, v, field) in [
            ("", "x", "labels[0].key"),
            ("-team", "x", "labels[0].key"),
            ("Bad_Prefix/team", "x", "labels[0].key"),
            ("team", "has space", "labels[0].value"),
            ("team", &"v".repeat(64), "labels[0].value"),
        ] {
            let err = labels(k, v).validate().err().unwrap().to_string();
            assert!(err.starts_with(&format!("{field}:")), "{k}={v}: {err}");
        }
        let twice = LabelsGroupInput {
            name: "team".into(),
            labels: ["a", "a"]
                .iter()
                .map(|k| LabelInput {
                    key: k.to_string(),
                    value: String::new(),
                    propagate_to_cloud_provider: true,
                })
                .collect(),
        };
        assert!(twice
            .validate()
            .err()
            .unwrap()
            .to_string()
            .starts_with("labels:"));
    }
}
