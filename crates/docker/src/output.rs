//! What Capstan's containers print: each one's output followed from the moment Docker says it
//! started (and, at first, of every one already running), line by line with Docker's time of
//! each line. Nothing is masked here: the caller masks before it keeps.

use crate::plan::{labelled, LABEL_ENVIRONMENT, LABEL_REQUEST, LABEL_SERVICE};
use bollard::container::LogOutput;
use bollard::query_parameters::{EventsOptions, LogsOptions};
use bollard::Docker;
use domain::ids::{DeploymentRequestId, EnvironmentId, ServiceId};
use domain::model::{OutputLine, OutputStream, OUTPUT_KEPT_LINES};
use futures_util::StreamExt;
use std::collections::HashMap;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use tokio::sync::mpsc;
use uuid::Uuid;

/// Whose a container is, from its labels and name: what every line it prints carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub service: ServiceId,
    pub environment: EnvironmentId,
    pub request: Option<DeploymentRequestId>,
    pub replica: String,
    pub version: String,
}

impl Writer {
    pub fn of(labels: &HashMap<String, String>, name: &str, image: &str) -> Option<Writer> {
        Some(Writer {
            service: ServiceId(labels.get(LABEL_SERVICE)?.parse().ok()?),
            environment: EnvironmentId(labels.get(LABEL_ENVIRONMENT)?.parse().ok()?),
            request: labels
                .get(LABEL_REQUEST)
                .and_then(|r| r.parse().ok())
                .map(DeploymentRequestId),
            replica: name.trim_start_matches('/').to_string(),
            version: version_of(image),
        })
    }
}

/// The tag an image reference names (`latest` when it names none).
pub fn version_of(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    match name.rsplit_once(':') {
        Some((_, tag)) if !tag.contains('/') => tag.to_string(),
        _ => "latest".to_string(),
    }
}

/// One line as Docker gives it with timestamps on (`<RFC 3339 time> <text>`), as a line of
/// `writer`'s output; `last` is the position of the replica's line before, so two lines of one
/// instant keep their order.
pub fn line_of(
    writer: &Writer,
    stream: OutputStream,
    raw: &str,
    last: &mut i64,
) -> Option<OutputLine> {
    let (stamp, text) = raw.split_once(' ').unwrap_or((raw, ""));
    let at = OffsetDateTime::parse(stamp, &Rfc3339).ok()?;
    let nanos = i64::try_from(at.unix_timestamp_nanos()).ok()?;
    let position = nanos.max(last.saturating_add(1));
    *last = position;
    Some(OutputLine {
        id: Uuid::new_v4(),
        service_id: writer.service,
        environment_id: writer.environment,
        replica: writer.replica.clone(),
        request_id: writer.request,
        version: writer.version.clone(),
        position,
        at,
        stream,
        message: OutputLine::message_of(text),
    })
}

/// Follows one container's output until it stops: from `since` (Unix seconds; a restarted
/// container's new run), or its newest kept lines (one found running).
async fn follow_one(
    docker: Docker,
    id: String,
    writer: Writer,
    since: Option<i64>,
    lines: mpsc::Sender<OutputLine>,
) {
    let options = LogsOptions {
        follow: true,
        stdout: true,
        stderr: true,
        timestamps: true,
        since: since.and_then(|s| i32::try_from(s).ok()).unwrap_or(0),
        tail: if since.is_some() {
            "all".to_string()
        } else {
            OUTPUT_KEPT_LINES.to_string()
        },
        ..Default::default()
    };
    let mut logs = docker.logs(&id, Some(options));
    let mut last = i64::MIN;
    while let Some(Ok(chunk)) = logs.next().await {
        let (stream, bytes) = match chunk {
            LogOutput::StdErr { message } => (OutputStream::Stderr, message),
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                (OutputStream::Stdout, message)
            }
            LogOutput::StdIn { .. } => continue,
        };
        let text = String::from_utf8_lossy(&bytes);
        for raw in text.lines().filter(|l| !l.is_empty()) {
            if let Some(line) = line_of(&writer, stream, raw, &mut last) {
                if lines.send(line).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Sends the lines every Capstan container prints, until the daemon's event stream ends or
/// nobody listens; its followers end with it.
pub async fn watch(docker: Docker, scope: Vec<String>, lines: mpsc::Sender<OutputLine>) {
    let ours = [vec![LABEL_SERVICE.to_string()], scope].concat();
    // Subscribed before the first look, so a container started in between is not missed.
    let options = EventsOptions {
        filters: Some(HashMap::from([
            ("type".to_string(), vec!["container".to_string()]),
            ("event".to_string(), vec!["start".to_string()]),
            ("label".to_string(), ours.clone()),
        ])),
        ..Default::default()
    };
    let mut events = docker.events(Some(options));
    // Dropped when this returns, which aborts every follower: the lines' stream then ends and
    // its reader asks again.
    let mut followers = tokio::task::JoinSet::new();
    let running = match docker.list_containers(Some(labelled(ours))).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %e, "could not list Capstan's containers");
            return;
        }
    };
    for c in running {
        if c.state != Some(bollard::models::ContainerSummaryStateEnum::RUNNING) {
            continue;
        }
        let name = c
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or_default();
        let (Some(id), Some(labels)) = (c.id, c.labels) else {
            continue;
        };
        let Some(writer) = Writer::of(&labels, &name, c.image.as_deref().unwrap_or_default())
        else {
            continue;
        };
        followers.spawn(follow_one(docker.clone(), id, writer, None, lines.clone()));
    }
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = lines.closed() => return,
        };
        let Some(Ok(event)) = event else { return };
        // Finished followers are let go as new ones come.
        while followers.try_join_next().is_some() {}
        let Some(actor) = event.actor else { continue };
        let attributes = actor.attributes.unwrap_or_default();
        let name = attributes.get("name").cloned().unwrap_or_default();
        let image = attributes.get("image").cloned().unwrap_or_default();
        let (Some(id), Some(writer)) = (actor.id, Writer::of(&attributes, &name, &image)) else {
            continue;
        };
        // Each start is a run of its own (a restart's too): followed from its second on; a
        // line of the run before read again is kept once.
        let since = event.time.unwrap_or(0);
        followers.spawn(follow_one(
            docker.clone(),
            id,
            writer,
            Some(since),
            lines.clone(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer() -> Writer {
        let service = Uuid::new_v4();
        let environment = Uuid::new_v4();
        let labels = HashMap::from([
            (LABEL_SERVICE.to_string(), service.to_string()),
            (LABEL_ENVIRONMENT.to_string(), environment.to_string()),
        ]);
        Writer::of(&labels, "/capstan-x-0", "registry:5000/shop/web:1.2").unwrap()
    }

    #[test]
    fn a_containers_labels_name_whose_its_output_is() {
        let w = writer();
        assert_eq!(w.replica, "capstan-x-0");
        assert_eq!(w.version, "1.2");
        assert_eq!(w.request, None);
        assert_eq!(Writer::of(&HashMap::new(), "x", "busybox"), None);
        assert_eq!(version_of("registry:5000/busybox"), "latest");
        assert_eq!(version_of("busybox:1@sha256:abc"), "1");
    }

    #[test]
    fn dockers_lines_keep_their_time_and_order() {
        let w = writer();
        let mut last = i64::MIN;
        let a = line_of(
            &w,
            OutputStream::Stdout,
            "2026-11-27T10:00:00.000000001Z listening on 8080",
            &mut last,
        )
        .unwrap();
        assert_eq!(a.message, "listening on 8080");
        assert_eq!(a.position, 1_795_773_600_000_000_001);
        // The same instant again: the line after still comes after.
        let b = line_of(
            &w,
            OutputStream::Stderr,
            "2026-11-27T10:00:00.000000001Z oops",
            &mut last,
        )
        .unwrap();
        assert_eq!(b.position, a.position + 1);
        assert_eq!(b.stream, OutputStream::Stderr);
        let empty = line_of(&w, OutputStream::Stdout, "2026-11-27T10:00:01Z", &mut last).unwrap();
        assert_eq!(empty.message, "");
        assert!(line_of(&w, OutputStream::Stdout, "no time here", &mut last).is_none());
    }
}
