//! Resource names: parsed once, where a request becomes a record, and kept by the record.

use crate::error::DomainError;
use crate::validate;
use serde::Serialize;
use std::fmt;

/// A resource's name: not blank, at most 255 characters, kept as given. Unique under its parent
/// case-insensitively ([`Name::key`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Name(String);

impl Name {
    /// The name `value` sent as `field`, or why it is not one.
    pub fn parse(field: &str, value: &str) -> Result<Self, DomainError> {
        if value.trim().is_empty() {
            return Err(DomainError::invalid(field, "must not be empty"));
        }
        validate::max_chars(field, value, validate::MAX_NAME_CHARS)?;
        Ok(Self(value.to_string()))
    }

    /// A name read back from the store, which only ever holds parsed names.
    pub fn stored(value: String) -> Self {
        Self(value)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key under which the name is unique within its parent.
    pub fn key(&self) -> String {
        self.0.trim().to_lowercase()
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_parsed_once_and_keyed_case_insensitively() {
        assert!(Name::parse("name", "  ").is_err());
        assert!(Name::parse("name", &"é".repeat(256)).is_err());
        let n = Name::parse("name", "Shop ").unwrap();
        assert_eq!(n.as_str(), "Shop ", "kept as given");
        assert_eq!(n.key(), "shop");
        assert_eq!(
            Name::parse("name", "ééé").unwrap().to_string(),
            "ééé".to_string()
        );
    }
}
