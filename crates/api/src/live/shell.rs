//! `/shell/exec`: a process with a terminal inside a running replica, over a WebSocket as the
//! public CLI speaks it. Standard input arrives as binary frames of raw bytes (text frames are
//! taken as input too), the terminal's output leaves as binary frames, and the socket closes
//! with 1000 when the process ends, its exit code in the reason. The socket is upgraded before
//! anything is checked, because the CLI retries a failed dial without end: a refusal closes
//! it with 1008, which the CLI takes as final (1013 for too many sockets and 1011 for a
//! server fault, which it retries).

use super::{close_for, KEEP_ALIVE, RECHECK};
use crate::error::{ApiError, ApiResult};
use crate::extract::{principal_of, LiveAuth};
use crate::AppState;
use actix_web::{web, HttpRequest, HttpResponse};
use actix_ws::{CloseCode, CloseReason, Message};
use domain::engine::{ShellRequest, TerminalSize};
use domain::ids::ServiceId;
use domain::services::OpenedShell;
use futures_util::StreamExt;
use std::collections::BTreeMap;
use tokio::io::AsyncWriteExt;

/// What a shell's query asks, in either naming: the live API's (`podName`, `ttyWidth`,
/// `command` repeated) or the public CLI's (`pod_name`, `tty_width`, `command[0]`, ...).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ShellQuery {
    pub service: ServiceId,
    pub request: ShellRequest,
}

/// The terminal a query that names none gets.
const DEFAULT_SIZE: TerminalSize = TerminalSize {
    width: 80,
    height: 24,
};

impl ShellQuery {
    pub(crate) fn parse(query: &str) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
            .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
        let value = |names: &[&str]| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| names.contains(&k.as_str()))
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty() && v != "null")
        };
        for name in ["organization", "cluster", "project", "environment"] {
            if let Some(v) = value(&[name]) {
                domain::ids::parse_uuid(&v).map_err(|_| {
                    ApiError::bad_request(format!("{name}: '{v}' is not a valid UUID"))
                })?;
            }
        }
        let service = value(&["service", "application"])
            .ok_or_else(|| ApiError::bad_request("service: is required"))?;
        let service: ServiceId = service.parse().map_err(|_| {
            ApiError::bad_request(format!("service: '{service}' is not a valid UUID"))
        })?;
        let size = |names: &[&str], default: u16| -> Result<u16, ApiError> {
            value(names).map_or(Ok(default), |v| {
                v.parse()
                    .map_err(|_| ApiError::bad_request(format!("{}: must be a number", names[0])))
            })
        };
        let mut indexed: BTreeMap<usize, String> = BTreeMap::new();
        let mut repeated = Vec::new();
        for (key, v) in &pairs {
            if key == "command" {
                repeated.push(v.clone());
            } else if let Some(index) = key
                .strip_prefix("command[")
                .and_then(|k| k.strip_suffix(']'))
            {
                let index = index.parse().map_err(|_| {
                    ApiError::bad_request(format!("{key}: not an index of command"))
                })?;
                indexed.insert(index, v.clone());
            }
        }
        let mut command: Vec<String> = indexed.into_values().collect();
        command.extend(repeated);
        if command.is_empty() {
            command.push("sh".into());
        }
        Ok(Self {
            service,
            request: ShellRequest {
                replica: value(&["podName", "pod_name"]),
                command,
                size: TerminalSize {
                    width: size(&["ttyWidth", "tty_width"], DEFAULT_SIZE.width)?,
                    height: size(&["ttyHeight", "tty_height"], DEFAULT_SIZE.height)?,
                },
            },
        })
    }
}

pub(super) async fn shell_exec(
    st: web::Data<AppState>,
    auth: Result<LiveAuth, ApiError>,
    req: HttpRequest,
    body: web::Payload,
) -> ApiResult<HttpResponse> {
    let (response, session, stream) = actix_ws::handle(&req, body)
        .map_err(|e| ApiError::bad_request(format!("not a WebSocket request: {e}")))?;
    let query = ShellQuery::parse(req.query_string());
    actix_web::rt::spawn(async move {
        let opened = async {
            let LiveAuth(p, credential) = auth?;
            let seat = st.live_sockets.take(credential.expose())?;
            let query = query?;
            let opened = st
                .capstan
                .open_shell(&p, query.service, query.request)
                .await?;
            Ok::<_, ApiError>((opened, credential, seat))
        }
        .await;
        match opened {
            Ok((opened, credential, _seat)) => {
                serve(st.into_inner(), session, stream, opened, credential).await;
            }
            Err(e) => close_for(session, &e).await,
        }
    });
    Ok(response)
}

/// How a shell's socket ended.
enum Ended {
    /// The process ended, with its exit code when Docker told it.
    Exited(Option<i64>),
    /// The client left, or Capstan is stopping.
    Left,
    /// The credential no longer holds, or the output was lost.
    Refused(ApiError),
}

async fn serve(
    state: std::sync::Arc<AppState>,
    mut session: actix_ws::Session,
    mut stream: actix_ws::MessageStream,
    opened: OpenedShell,
    credential: crate::extract::Credential,
) {
    let OpenedShell { shell, ticket } = opened;
    let (mut input, mut output, ended) = (shell.input, shell.output, shell.ended);
    let mut stopping = state.stopping.clone();
    let start = tokio::time::Instant::now();
    let mut recheck = tokio::time::interval_at(start + RECHECK, RECHECK);
    let mut keep_alive = tokio::time::interval_at(start + KEEP_ALIVE, KEEP_ALIVE);
    let how = loop {
        let stop = async {
            match stopping.as_mut() {
                Some(s) => drop(s.changed().await),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(Ok(bytes)) => {
                    if session.binary(bytes).await.is_err() {
                        break Ended::Left;
                    }
                }
                Some(Err(e)) => break Ended::Refused(ApiError::new(
                    actix_web::http::StatusCode::BAD_GATEWAY,
                    e.to_string(),
                )),
                None => break Ended::Exited(ended.await.ok().flatten()),
            },
            message = stream.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    // A process that stopped reading is told by its output's end.
                    let _ = input.write_all(&bytes).await;
                    let _ = input.flush().await;
                }
                Some(Ok(Message::Text(text))) => {
                    let _ = input.write_all(text.as_bytes()).await;
                    let _ = input.flush().await;
                }
                Some(Ok(Message::Ping(bytes))) => {
                    if session.pong(&bytes).await.is_err() {
                        break Ended::Left;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => break Ended::Left,
                Some(Ok(_)) => {}
            },
            _ = recheck.tick() => match principal_of(&state, credential.expose()).await {
                Ok(_) => {}
                Err(e) if e.status.is_server_error() => {
                    tracing::debug!(error = %e.message, "a shell's credential could not be checked again");
                }
                Err(e) => break Ended::Refused(e),
            },
            _ = keep_alive.tick() => {
                if session.ping(b"").await.is_err() {
                    break Ended::Left;
                }
            }
            _ = stop => break Ended::Left,
        }
    };
    drop(input);
    let exit = match how {
        Ended::Exited(code) => {
            let description = code.map(|c| format!("exit code {c}"));
            let reason = CloseReason {
                code: CloseCode::Normal,
                description,
            };
            let _ = session.close(Some(reason)).await;
            code
        }
        Ended::Left => {
            let _ = session.close(None).await;
            None
        }
        Ended::Refused(e) => {
            close_for(session, &e).await;
            None
        }
    };
    if let Err(e) = state.capstan.close_shell(ticket, exit).await {
        tracing::warn!(error = %e, "could not record a shell's end in the audit log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVICE: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    #[test]
    fn the_public_clis_names_and_the_live_apis_are_both_read() {
        let cli = ShellQuery::parse(&format!(
            "cluster={SERVICE}&command[0]=sh&command[1]=-c&command[2]=echo+hi&environment={SERVICE}\
             &organization={SERVICE}&pod_name=p1&project={SERVICE}&service={SERVICE}\
             &tty_height=40&tty_width=120"
        ))
        .unwrap();
        assert_eq!(cli.service.to_string(), SERVICE);
        assert_eq!(cli.request.command, ["sh", "-c", "echo hi"]);
        assert_eq!(cli.request.replica.as_deref(), Some("p1"));
        assert_eq!(
            cli.request.size,
            TerminalSize {
                width: 120,
                height: 40
            }
        );
        let live = ShellQuery::parse(&format!(
            "organization={SERVICE}&application={SERVICE}&podName=p2&command=bash&command=-l\
             &ttyWidth=100&ttyHeight=30"
        ))
        .unwrap();
        assert_eq!(live.request.command, ["bash", "-l"]);
        assert_eq!(live.request.replica.as_deref(), Some("p2"));
        assert_eq!(live.request.size.width, 100);
        let bare = ShellQuery::parse(&format!("service={SERVICE}")).unwrap();
        assert_eq!(bare.request.command, ["sh"]);
        assert_eq!(bare.request.size, DEFAULT_SIZE);
        assert_eq!(bare.request.replica, None);
    }

    #[test]
    fn a_query_that_does_not_read_is_refused_naming_the_parameter() {
        let refused = |q: String| ShellQuery::parse(&q).unwrap_err().message;
        assert!(refused(String::new()).contains("service"));
        assert!(refused("service=nope".into()).contains("service"));
        assert!(refused(format!("service={SERVICE}&tty_width=wide")).contains("ttyWidth"));
        assert!(refused(format!("service={SERVICE}&cluster=x")).contains("cluster"));
        assert!(refused(format!("service={SERVICE}&command[x]=sh")).contains("command[x]"));
    }
}
