//! What a service's workloads print, line by line, as its engine reads it. Lines are masked (no
//! secret value of the service) before they are kept, and only the newest are kept.

use crate::ids::*;
use time::OffsetDateTime;
use uuid::Uuid;

string_enum!(
    /// Which of its outputs a workload wrote a line to.
    OutputStream {
        Stdout => "STDOUT",
        Stderr => "STDERR",
    }
);

/// How many lines of a service's output are kept: older ones go as new ones come.
pub const OUTPUT_KEPT_LINES: i64 = 5_000;
/// How many lines `GET /{kind}/{id}/log` answers (the public API's "last 1000").
pub const OUTPUT_LISTED_LINES: i64 = 1_000;
/// A longer line is cut here, so one runaway write cannot fill the store.
pub const OUTPUT_LINE_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    pub id: Uuid,
    pub service_id: ServiceId,
    pub environment_id: EnvironmentId,
    /// The replica (container; pod in the public API's words) that wrote it.
    pub replica: String,
    /// The deployment request whose workload wrote it, when the engine knows.
    pub request_id: Option<DeploymentRequestId>,
    /// What ran: the image tag, or the commit.
    pub version: String,
    /// Its place in its replica's output: the engine's time of it in nanoseconds, so that two
    /// readers of one output agree on it and a line read twice is kept once.
    pub position: i64,
    pub at: OffsetDateTime,
    pub stream: OutputStream,
    pub message: String,
}

impl OutputLine {
    /// `text` without its line ending.
    pub fn message_of(text: &str) -> String {
        text.trim_end_matches(['\n', '\r']).to_string()
    }

    /// `message` cut at [`OUTPUT_LINE_BYTES`] on a character boundary: after masking, so that a
    /// secret value across the cut is masked whole first.
    pub fn cut(mut message: String) -> String {
        if message.len() > OUTPUT_LINE_BYTES {
            let mut end = OUTPUT_LINE_BYTES;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
        }
        message
    }
}

/// Which lines of a service's output a reader wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputQuery {
    /// Only lines after this position (a live reader's last one).
    pub after: Option<i64>,
    /// Only lines of this replica.
    pub replica: Option<String>,
    /// Only lines of this deployment request's workloads.
    pub request: Option<DeploymentRequestId>,
    /// Only lines written at or after this time.
    pub since: Option<OffsetDateTime>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_loses_its_line_ending_and_is_cut_on_a_character() {
        assert_eq!(OutputLine::message_of("ready\r\n"), "ready");
        let long = "é".repeat(OUTPUT_LINE_BYTES);
        let cut = OutputLine::cut(long);
        assert!(cut.len() <= OUTPUT_LINE_BYTES && cut.len() > OUTPUT_LINE_BYTES - 2);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
