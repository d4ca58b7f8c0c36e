//! How a Docker daemon's failures become the engine's: the reason a client reads, and whether
//! the same call may succeed if made again.

use domain::engine::EngineError;

/// Whether a call the daemon failed may succeed if made again: it was never answered (the
/// connection was refused or reset, it timed out) or the daemon failed on its side (a 5xx);
/// a 4xx (no such image, a conflict, a bad request) gets the same answer every time.
pub(crate) fn may_pass(e: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    match e {
        E::IOError { .. }
        | E::HyperResponseError { .. }
        | E::HyperLegacyError { .. }
        | E::RequestTimeoutError => true,
        E::DockerResponseServerError { status_code, .. } => *status_code >= 500,
        _ => false,
    }
}

/// Docker's answer to a failed call, as a step's reason. A call the daemon never answered
/// (it stopped, or restarts) says so, not the HTTP client's words.
pub(crate) fn said(what: &str, e: bollard::errors::Error) -> EngineError {
    use bollard::errors::Error as E;
    let passing = may_pass(&e);
    let reason = match e {
        E::IOError { err } => format!("{what}: the Docker daemon could not be reached ({err})"),
        E::HyperResponseError { .. } | E::HyperLegacyError { .. } => {
            format!(
                "{what}: the connection to the Docker daemon failed (it stopped or is restarting)"
            )
        }
        e => format!("{what}: {e}"),
    };
    if passing {
        EngineError::transient(reason)
    } else {
        EngineError::terminal(reason)
    }
}

/// What failed, in Capstan's own words: never the text a remote host answered, which a user
/// who points a cluster at some service would read back.
pub(crate) fn failure_words(e: &bollard::errors::Error) -> EngineError {
    use bollard::errors::Error as E;
    let words = match e {
        E::DockerResponseServerError { status_code, .. } => {
            format!("it answered HTTP {status_code}, not as a Docker daemon would")
        }
        E::RequestTimeoutError => "it did not answer in time".into(),
        E::JsonDataError { .. } | E::JsonSerdeError { .. } => {
            "its answer is not a Docker daemon's".into()
        }
        E::IOError { .. } | E::HyperResponseError { .. } | E::HyperLegacyError { .. } => {
            "the connection to it failed".into()
        }
        _ => "it could not be asked".into(),
    };
    if may_pass(e) {
        EngineError::transient(words)
    } else {
        EngineError::terminal(words)
    }
}

/// A setting of the Docker engine's that cannot be read: the entry at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSetting(pub String);

impl std::fmt::Display for BadSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadSetting {}

impl From<String> for BadSetting {
    fn from(why: String) -> Self {
        Self(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::errors::Error as E;

    fn server_error(status_code: u16) -> E {
        E::DockerResponseServerError {
            status_code,
            message: "said the daemon".into(),
        }
    }

    #[test]
    fn a_call_never_answered_or_failed_on_the_daemons_side_may_pass() {
        let refused = E::IOError {
            err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        let refusal = said("could not look at a container", refused);
        assert!(refusal.is_retriable());
        assert!(
            refusal.reason().starts_with(
                "could not look at a container: the Docker daemon could not be reached"
            ),
            "{refusal}"
        );
        assert!(said("x", E::RequestTimeoutError).is_retriable());
        assert!(said("x", server_error(500)).is_retriable());
        assert!(said("x", server_error(503)).is_retriable());
    }

    #[test]
    fn what_the_daemon_refused_fails_at_once() {
        for status in [400, 404, 409] {
            let e = said("could not create the container", server_error(status));
            assert!(!e.is_retriable(), "{status}");
            assert!(e.reason().starts_with("could not create the container: "));
        }
        assert!(!failure_words(&server_error(404)).is_retriable());
        assert_eq!(
            failure_words(&server_error(502)).reason(),
            "it answered HTTP 502, not as a Docker daemon would",
            "never the remote's own words"
        );
    }
}
