//! Custom domains: host names clients reach a service at, unique across the installation.

use super::Record;
use crate::error::DomainError;
use crate::ids::{CustomDomainId, OrganizationId, ServiceId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

#[derive(Debug, Clone, PartialEq)]
pub struct CustomDomain {
    pub id: CustomDomainId,
    pub organization_id: OrganizationId,
    pub service_id: ServiceId,
    /// Lowercase, without a trailing dot.
    pub domain: String,
    pub generate_certificate: bool,
    pub use_cdn: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for CustomDomain {
    type Id = CustomDomainId;
    type Parent = ServiceId;
    const KIND: &'static str = "custom domain";
    fn id(&self) -> CustomDomainId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

/// The public request body of a custom domain.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct CustomDomainInput {
    pub domain: String,
    pub generate_certificate: bool,
    #[serde(default)]
    pub use_cdn: Option<bool>,
}

/// A host name as DNS has it: dot-separated labels of letters, digits and inner hyphens (1-63
/// characters each, 253 in all), at least two labels, the first of which may be `*`
/// (a wildcard). Answered lowercase without a trailing dot.
pub fn host_name(field: &str, value: &str) -> Result<String, DomainError> {
    let name = value.trim().trim_end_matches('.').to_ascii_lowercase();
    let refuse = |why: &str| DomainError::invalid(field, format!("'{value}' {why}"));
    if name.is_empty() || name.len() > 253 {
        return Err(refuse("is not a host name (1 to 253 characters)"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2 {
        return Err(refuse(
            "is not a fully qualified host name (it needs a dot)",
        ));
    }
    for (i, label) in labels.iter().enumerate() {
        if i == 0 && *label == "*" {
            continue;
        }
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(refuse(&format!("has an invalid label '{label}'")));
        }
    }
    Ok(name)
}

/// A copy's name for `domain`, which stays unique: `short` joins its first label (after a
/// wildcard, as a label of its own); a first label that would grow too long is replaced by
/// `short` instead, so that copies of copies do not keep growing.
pub fn renamed(domain: &str, short: &str) -> Result<String, DomainError> {
    let joined = match domain.split_once('.') {
        Some(("*", rest)) => format!("*.{short}.{rest}"),
        Some((first, rest)) => format!("{first}-{short}.{rest}"),
        None => format!("{domain}-{short}"),
    };
    host_name("domain", &joined).or_else(|_| match domain.split_once('.') {
        Some((first, rest)) if first != "*" => host_name("domain", &format!("{short}.{rest}")),
        _ => host_name("domain", &joined),
    })
}

/// What resolving a custom domain showed.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DnsState {
    /// The domain resolves to the configured target's addresses (behind a CDN: to any).
    PointsAtTarget,
    /// The domain resolves, to addresses that are not the target's.
    PointsElsewhere,
    /// The domain has no address.
    NotFound,
    /// The resolver could not answer (for the domain or the target).
    ResolverError,
    /// No target is configured (`CAPSTAN_CUSTOM_DOMAIN_TARGET`), so there is nothing to
    /// compare with.
    NoTarget,
}

/// The result of checking a custom domain's DNS: whether it points where it should, never the
/// addresses it resolves to (a VIEWER reads it, and a name may resolve inside the network
/// Capstan runs in).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DnsCheck {
    pub state: DnsState,
    pub message: String,
    #[serde(with = "time::serde::rfc3339")]
    pub checked_at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_checked_and_normalised() {
        assert_eq!(
            host_name("domain", "WWW.Acme.com.").unwrap(),
            "www.acme.com"
        );
        assert_eq!(host_name("domain", "*.acme.com").unwrap(), "*.acme.com");
        for bad in [
            "acme",
            "-a.acme.com",
            "a..com",
            "a_b.com",
            "https://a.com",
            "a.*.com",
            "",
        ] {
            let err = host_name("domain", bad).unwrap_err().to_string();
            assert!(err.starts_with("domain: "), "{bad}: {err}");
        }
        assert!(host_name("domain", &format!("{}.com", "a".repeat(64))).is_err());
    }

    #[test]
    fn copies_are_renamed_in_their_first_label() {
        assert_eq!(
            renamed("www.acme.com", "1a2b").unwrap(),
            "www-1a2b.acme.com"
        );
        assert_eq!(renamed("*.acme.com", "1a2b").unwrap(), "*.1a2b.acme.com");
        let long = format!("{}.acme.com", "a".repeat(60));
        assert_eq!(renamed(&long, "1a2b").unwrap(), "1a2b.acme.com");
        let copy = renamed("1a2b.acme.com", "3c4d").unwrap();
        assert_eq!(copy, "1a2b-3c4d.acme.com");
    }
}
