//! Small validation rules shared by every resource.

use crate::error::DomainError;

pub const MAX_NAME_CHARS: usize = 255;
pub const MAX_DESCRIPTION_CHARS: usize = 255;

/// A resource name: not blank, at most 255 characters. Returned unchanged.
pub fn name(field: &str, value: &str) -> Result<crate::model::Name, DomainError> {
    crate::model::Name::parse(field, value)
}

pub fn description(field: &str, value: Option<String>) -> Result<Option<String>, DomainError> {
    if let Some(v) = &value {
        max_chars(field, v, MAX_DESCRIPTION_CHARS)?;
    }
    Ok(value)
}

/// Counts characters, not bytes: "é" is one.
pub fn max_chars(field: &str, value: &str, max: usize) -> Result<(), DomainError> {
    if value.chars().count() > max {
        return Err(DomainError::invalid(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

pub fn required_text(field: &str, value: &str) -> Result<String, DomainError> {
    if value.trim().is_empty() {
        return Err(DomainError::invalid(field, "must not be empty"));
    }
    max_chars(field, value, 2048)?;
    Ok(value.to_string())
}

/// An http(s) URL with a host.
pub fn http_url(field: &str, value: &str) -> Result<url::Url, DomainError> {
    let parsed = url::Url::parse(value.trim())
        .map_err(|_| DomainError::invalid(field, "must be an absolute http(s) URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(DomainError::invalid(
            field,
            "must be an absolute http(s) URL",
        ));
    }
    // Credentials in a URL would be shown back with it; they belong in a token or a secret.
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(DomainError::invalid(
            field,
            "must not hold credentials; use a git token or the registry's config",
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name("name", "  ").is_err());
        assert!(name("name", &"a".repeat(255)).is_ok());
        assert!(name("name", &"a".repeat(256)).is_err());
        assert_eq!(name("name", " Prod ").unwrap().key(), "prod");
    }

    #[test]
    fn description_counts_characters_not_bytes() {
        assert!(description("description", Some("é".repeat(255))).is_ok());
        let err = description("description", Some("é".repeat(256))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "description: must be at most 255 characters"
        );
    }

    #[test]
    fn urls() {
        assert!(http_url("url", "https://example.com/x").is_ok());
        assert!(http_url("url", "ftp://example.com").is_err());
        assert!(http_url("url", "nope").is_err());
        let err = http_url("url", "https://user:ghp_secret@github.com/o/r").unwrap_err();
        assert!(!err.to_string().contains("ghp_secret"));
    }
}
