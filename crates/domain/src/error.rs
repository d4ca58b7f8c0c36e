//! The one error type of the domain layer. The HTTP layer maps each variant to a status code once.

use thiserror::Error;

pub type DomainResult<T> = Result<T, DomainError>;

#[derive(Debug, Error)]
pub enum DomainError {
    /// Input that breaks a rule; `field` names the member or parameter at fault.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// Missing, malformed, unknown, revoked or expired credentials.
    #[error("{0}")]
    Unauthenticated(String),
    /// The resource belongs to another organization, or the role does not allow the action.
    #[error("{0}")]
    Forbidden(String),
    /// The id names nothing (the resource kind is given, e.g. "project").
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A name already taken, a resource still in use, or a state that forbids the action.
    #[error("{0}")]
    Conflict(Conflict),
    /// The store could not be reached or is saturated.
    #[error("service temporarily unavailable")]
    Unavailable(String),
    /// The store's disk is full: writes are refused until the operator frees space; reads go on.
    #[error("writes are refused: the database's disk is full (reads go on; writes are taken again once space is freed)")]
    StoreFull(String),
    /// Something outside Capstan that the action needs (a git provider) failed or refused;
    /// the reason is the client's to read (it names no secret).
    #[error("{0}")]
    Upstream(String),
    /// Anything unexpected; the cause is for the logs, never for the client.
    #[error("internal error")]
    Internal(String),
}

/// Which conflict a 409 reports.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Conflict {
    /// `kind` named `name` exists already under the same `parent` (names are unique there,
    /// case-insensitively).
    #[error(
        "{} {kind} named '{name}' already exists in this {parent}",
        article(kind)
    )]
    NameTaken {
        kind: &'static str,
        name: String,
        parent: &'static str,
    },
    /// A variable key is taken at the variable's parent (`at` says where, as shown).
    #[error("a variable with key '{key}' already exists {at}")]
    KeyTaken { key: String, at: String },
    /// The `kind` cannot go while `by` still refers to it.
    #[error("the {kind} is still used by {by}")]
    InUse {
        kind: &'static str,
        by: &'static str,
    },
    /// The state of the resource forbids the action (the reason says which state).
    #[error("{0}")]
    State(String),
}

fn article(noun: &str) -> &'static str {
    match noun.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

impl DomainError {
    /// The state of a resource forbids the action.
    pub fn state(reason: impl Into<String>) -> Self {
        Self::Conflict(Conflict::State(reason.into()))
    }

    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// What a repository port may fail with. Adapters translate their database's errors into these.
#[derive(Debug, Error)]
pub enum StoreError {
    /// A unique constraint was violated (e.g. a name already taken under the same parent).
    #[error("duplicate")]
    Duplicate,
    /// A row is still referenced by others (foreign key).
    #[error("still referenced")]
    InUse,
    /// The row to change does not exist.
    #[error("not found")]
    NotFound,
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The database's disk is full: the unit was not kept.
    #[error("store full: {0}")]
    Full(String),
    /// What was asked cannot be done as things stand (the reason says why, for the client).
    #[error("{0}")]
    Refused(String),
    #[error("store error: {0}")]
    Other(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<StoreError> for DomainError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Duplicate => DomainError::Conflict(Conflict::NameTaken {
                kind: "resource",
                name: String::new(),
                parent: "place",
            }),
            StoreError::InUse => DomainError::Conflict(Conflict::InUse {
                kind: "resource",
                by: "other resources",
            }),
            StoreError::NotFound => DomainError::NotFound("resource"),
            StoreError::Unavailable(m) => DomainError::Unavailable(m),
            StoreError::Full(m) => DomainError::StoreFull(m),
            StoreError::Refused(m) => DomainError::state(m),
            StoreError::Other(m) => DomainError::Internal(m),
        }
    }
}
