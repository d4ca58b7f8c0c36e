//! Deployment restrictions: which changed paths of a push deploy a service built from git.

use super::Record;
use crate::error::DomainError;
use crate::ids::{DeploymentRestrictionId, OrganizationId, ServiceId};
use crate::validate;
use serde::Deserialize;
use time::OffsetDateTime;

string_enum!(
    /// MATCH: a push deploys only when a changed path is under one of these; EXCLUDE: paths
    /// under these do not count.
    RestrictionMode { Exclude => "EXCLUDE", Match => "MATCH" }
);
string_enum!(RestrictionType { Path => "PATH" });

#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRestriction {
    pub id: DeploymentRestrictionId,
    pub organization_id: OrganizationId,
    pub service_id: ServiceId,
    pub mode: RestrictionMode,
    pub restriction_type: RestrictionType,
    pub value: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for DeploymentRestriction {
    type Id = DeploymentRestrictionId;
    type Parent = ServiceId;
    const KIND: &'static str = "deployment restriction";
    fn id(&self) -> DeploymentRestrictionId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The public request body of a restriction.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct RestrictionInput {
    pub mode: RestrictionMode,
    #[serde(rename = "type")]
    pub restriction_type: RestrictionType,
    pub value: String,
}

impl RestrictionInput {
    /// The mode, type and a path relative to the repository's root (no leading `/`).
    pub fn validate(self) -> Result<(RestrictionMode, RestrictionType, String), DomainError> {
        let value = validate::required_text("value", &self.value)?;
        validate::max_chars("value", &value, validate::MAX_NAME_CHARS)?;
        if value.starts_with('/') {
            return Err(DomainError::invalid(
                "value",
                "a PATH restriction is relative to the repository's root: it must not start with /",
            ));
        }
        Ok((self.mode, self.restriction_type, value))
    }
}

/// Whether `path` (relative to the repository's root) is `value` or lies under it.
fn under(path: &str, value: &str) -> bool {
    let dir = value.trim_end_matches('/');
    path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether a push that changed `changed` deploys a service with `restrictions`: some changed
/// path must be under no EXCLUDE value and, when there are MATCH values, under one of them.
/// Without restrictions every push deploys; with restrictions, a push that changed nothing
/// deploys nothing.
pub fn push_deploys(restrictions: &[DeploymentRestriction], changed: &[String]) -> bool {
    if restrictions.is_empty() {
        return true;
    }
    let of = |mode| {
        restrictions
            .iter()
            .filter(move |r| r.mode == mode)
            .map(|r| r.value.as_str())
    };
    let has_match = of(RestrictionMode::Match).next().is_some();
    changed.iter().any(|path| {
        !of(RestrictionMode::Exclude).any(|v| under(path, v))
            && (!has_match || of(RestrictionMode::Match).any(|v| under(path, v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restriction(mode: RestrictionMode, value: &str) -> DeploymentRestriction {
        DeploymentRestriction {
            id: DeploymentRestrictionId::generate(),
            organization_id: OrganizationId::generate(),
            service_id: ServiceId::generate(),
            mode,
            restriction_type: RestrictionType::Path,
            value: value.into(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn paths(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn match_and_exclude_decide_which_pushes_deploy() {
        use RestrictionMode::*;
        assert!(push_deploys(&[], &paths(&["anything"])));
        let api = [restriction(Match, "api/")];
        assert!(push_deploys(
            &api,
            &paths(&["docs/a.md", "api/src/main.rs"])
        ));
        assert!(!push_deploys(&api, &paths(&["docs/a.md", "apifoo/x"])));
        assert!(push_deploys(&api, &paths(&["api"])), "the path itself");
        let docs = [
            restriction(Exclude, "docs"),
            restriction(Exclude, "README.md"),
        ];
        assert!(!push_deploys(&docs, &paths(&["docs/a.md", "README.md"])));
        assert!(push_deploys(&docs, &paths(&["docs/a.md", "src/lib.rs"])));
        let both = [restriction(Match, "api"), restriction(Exclude, "api/docs/")];
        assert!(!push_deploys(&both, &paths(&["api/docs/x.md", "web/y"])));
        assert!(push_deploys(&both, &paths(&["api/docs/x.md", "api/src/y"])));
        assert!(
            !push_deploys(&both, &[]),
            "nothing changed, nothing to deploy"
        );
    }

    #[test]
    fn values_are_relative_paths() {
        let input = |value: &str| RestrictionInput {
            mode: RestrictionMode::Match,
            restriction_type: RestrictionType::Path,
            value: value.into(),
        };
        assert_eq!(input("api/src/").validate().unwrap().2, "api/src/");
        assert!(input("/api")
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("value:"));
        assert!(input(" ").validate().is_err());
    }
}
