//! Why an engine could not do what it was asked: the reason the client reads, whether trying
//! again may help, and what the user can do about it.

use std::fmt;

/// Whether a failure may pass by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The engine could not be reached or answered that it could not now (a connection
    /// refused or reset, a timeout, a daemon's server error): the same call may succeed soon.
    Transient,
    /// Asking again gets the same answer (an image that does not exist, a command that fails,
    /// a setting the engine refuses).
    Terminal,
    /// The engine would not do it: what it was asked to reach is not permitted (the outbound
    /// policy). Terminal, and the caller's to correct.
    Refused,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    failure: Failure,
    reason: String,
    hint: Option<String>,
}

impl EngineError {
    pub fn terminal(reason: impl Into<String>) -> Self {
        Self {
            failure: Failure::Terminal,
            reason: reason.into(),
            hint: None,
        }
    }

    pub fn refused(reason: impl Into<String>) -> Self {
        Self {
            failure: Failure::Refused,
            reason: reason.into(),
            hint: None,
        }
    }

    pub fn transient(reason: impl Into<String>) -> Self {
        Self {
            failure: Failure::Transient,
            reason: reason.into(),
            hint: None,
        }
    }

    /// What the user may do about it, shown after the reason.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The same failure, its reason prefixed with what was being done.
    pub fn context(mut self, what: &str) -> Self {
        self.reason = format!("{what}: {}", self.reason);
        self
    }

    pub fn failure(&self) -> Failure {
        self.failure
    }

    pub fn is_retriable(&self) -> bool {
        self.failure == Failure::Transient
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }

    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }
}

/// A reason an adapter words itself is terminal: it says transient where it means it.
impl From<String> for EngineError {
    fn from(reason: String) -> Self {
        Self::terminal(reason)
    }
}

impl From<&str> for EngineError {
    fn from(reason: &str) -> Self {
        Self::terminal(reason)
    }
}

/// The reason, then the hint: what a request's status message and its log say.
impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for EngineError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_reads_with_its_context_and_hint() {
        let e = EngineError::transient("connection reset")
            .context("could not start the container")
            .with_hint("the daemon may be restarting");
        assert!(e.is_retriable());
        assert_eq!(
            e.reason(),
            "could not start the container: connection reset"
        );
        assert_eq!(
            e.to_string(),
            "could not start the container: connection reset (hint: the daemon may be restarting)"
        );
        let words: EngineError = "no such image".into();
        assert_eq!(words.failure(), Failure::Terminal);
        assert_eq!(words.to_string(), "no such image");
    }
}
