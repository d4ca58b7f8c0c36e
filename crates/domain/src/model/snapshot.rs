//! Snapshots of the whole state, named by whoever saved them (a test suite, an operator).

use crate::error::DomainError;
use std::fmt;

/// A snapshot's name: 1 to 40 of `a-z`, `0-9`, `_` and `-`, so every store can use it as
/// (part of) a file or schema name as it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotName(String);

impl SnapshotName {
    pub const MAX_LEN: usize = 40;

    pub fn parse(field: &str, raw: &str) -> Result<Self, DomainError> {
        let ok = !raw.is_empty()
            && raw.len() <= Self::MAX_LEN
            && raw
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if ok {
            Ok(Self(raw.to_string()))
        } else {
            Err(DomainError::invalid(
                field,
                format!(
                    "must be 1 to {} characters of a-z, 0-9, _ and -",
                    Self::MAX_LEN
                ),
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SnapshotName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A saved state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub name: SnapshotName,
    pub created_at: time::OffsetDateTime,
    /// The rows it holds, across every table.
    pub rows: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_words() {
        for ok in ["s1", "before-deploy", "a_b", &"x".repeat(40)] {
            assert_eq!(SnapshotName::parse("name", ok).unwrap().as_str(), ok);
        }
        for bad in ["", "S1", "a b", "../x", "a;drop", &"x".repeat(41), "é"] {
            assert!(SnapshotName::parse("name", bad).is_err(), "{bad}");
        }
    }
}
