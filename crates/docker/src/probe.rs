//! Probes run by Capstan itself: TCP and HTTP from the host, through the port the workload
//! publishes (no tool has to be in the image), exec through Docker's exec API (the command runs
//! in the container, unprivileged, as its user).

use bollard::exec::{CreateExecOptions, StartExecOptions};
use bollard::models::ContainerInspectResponse;
use bollard::Docker;
use domain::model::Probe;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where Capstan reaches a workload's published ports.
#[derive(Clone, Debug)]
pub struct Reach {
    /// The address its public ports are published at, as this host reaches it.
    pub published: String,
    /// Whether the Docker host is this one: its loopback, where the other ports are
    /// published, is then this host's.
    pub loopback: bool,
}

/// The address and host port a container publishes `internal` at, as `reach` reaches them:
/// none when published only on another host's loopback.
fn published(
    seen: &ContainerInspectResponse,
    internal: i64,
    reach: &Reach,
) -> Option<(String, u16)> {
    let ports = seen.network_settings.as_ref()?.ports.as_ref()?;
    let bindings = ports.get(&format!("{internal}/tcp"))?.as_ref()?;
    bindings.iter().find_map(|b| {
        let port = b.host_port.as_deref()?.parse::<u16>().ok()?;
        match (
            crate::plan::is_loopback(b.host_ip.as_deref()),
            reach.loopback,
        ) {
            (false, _) => Some((reach.published.clone(), port)),
            (true, true) => Some((b.host_ip.clone()?, port)),
            (true, false) => None,
        }
    })
}

/// How long a TCP probe's connection must stay open (or send something) to count.
const HELD: Duration = Duration::from_millis(300);

/// Whether the workload itself accepted the connection. Docker's userland proxy accepts on the
/// published port whether or not anything listens in the container, then closes at once when
/// nothing does: a connection closed before [`HELD`] is refused; one held open, or that sends
/// something (a banner), is the workload's.
async fn accepted(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(HELD, stream.read(&mut byte)).await {
        Err(_) => true,
        Ok(Ok(read)) => read > 0,
        Ok(Err(_)) => false,
    }
}

/// Whether `command` exits 0 in the container within `timeout`.
async fn exec_passes(docker: &Docker, id: &str, command: &[String], timeout: Duration) -> bool {
    let config = CreateExecOptions {
        cmd: Some(command.to_vec()),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        privileged: Some(false),
        ..Default::default()
    };
    let run = async {
        let exec = docker.create_exec(id, config).await.ok()?;
        let detached = StartExecOptions {
            detach: true,
            ..Default::default()
        };
        docker.start_exec(&exec.id, Some(detached)).await.ok()?;
        loop {
            let seen = docker.inspect_exec(&exec.id).await.ok()?;
            if seen.running != Some(true) {
                return Some(seen.exit_code == Some(0));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    matches!(tokio::time::timeout(timeout, run).await, Ok(Some(true)))
}

/// The port a TCP or HTTP probe checks.
pub fn port_of(probe: &Probe) -> Option<i64> {
    let t = &probe.probe_type;
    t.tcp
        .as_ref()
        .map(|p| p.port)
        .or(t.http.as_ref().map(|p| p.port))
}

/// Whether the probe passes now (a gRPC probe, which needs a client of the workload's own
/// service, is not run: it passes).
pub async fn passes(docker: &Docker, id: &str, probe: &Probe, reach: &Reach) -> bool {
    let t = &probe.probe_type;
    let timeout = Duration::from_secs(u64::try_from(probe.timeout_seconds.max(1)).unwrap_or(5));
    if let Some(exec) = &t.exec {
        return exec_passes(docker, id, &exec.command, timeout).await;
    }
    let Some(port) = port_of(probe) else {
        return true;
    };
    let Ok(seen) = docker.inspect_container(id, None).await else {
        return false;
    };
    let Some((address, host_port)) = published(&seen, port, reach) else {
        return false;
    };
    answers(&address, host_port, probe).await
}

/// Whether a TCP or HTTP probe passes at `address`:`port` (where the workload publishes the
/// probe's port) now; any other kind passes.
pub async fn answers(address: &str, port: u16, probe: &Probe) -> bool {
    let t = &probe.probe_type;
    let timeout = Duration::from_secs(u64::try_from(probe.timeout_seconds.max(1)).unwrap_or(5));
    let check = async {
        let mut stream = TcpStream::connect((address, port)).await.ok()?;
        let Some(http) = &t.http else {
            return Some(accepted(&mut stream).await);
        };
        let request = format!(
            "GET {} HTTP/1.0\r\nHost: localhost\r\nUser-Agent: capstan-probe\r\n\r\n",
            http.path
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 32];
        let read = stream.read(&mut head).await.ok()?;
        let line = String::from_utf8_lossy(&head[..read]);
        let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some((200..400).contains(&status))
    };
    matches!(tokio::time::timeout(timeout, check).await, Ok(Some(true)))
}
