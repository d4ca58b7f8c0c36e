//! A command run inside a running container through Docker's exec API: what it prints and
//! how it ends (health checks, dumps and restores of databases).

use crate::errors::said;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::Docker;
use domain::engine::EngineError;
use futures_util::StreamExt;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How a command ended and what it printed.
#[derive(Debug, Default)]
pub struct Ran {
    pub code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Ran {
    pub fn succeeded(&self) -> bool {
        self.code == 0
    }

    /// Its standard error's last lines, for a failure's reason.
    pub fn complaint(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }
}

/// Runs `cmd` with `env` in container `id`, `stdin` fed to it, for at most `timeout`.
pub async fn run(
    docker: &Docker,
    id: &str,
    cmd: &[String],
    env: &[String],
    stdin: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Ran, EngineError> {
    let name = cmd.first().map_or("the command", String::as_str);
    let config = CreateExecOptions {
        cmd: Some(cmd.to_vec()),
        env: Some(env.to_vec()),
        attach_stdin: Some(stdin.is_some()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker
        .create_exec(id, config)
        .await
        .map_err(|e| said(&format!("could not run {name} in the container"), e))?;
    let work = async {
        let started = docker
            .start_exec(&exec.id, None)
            .await
            .map_err(|e| said(&format!("could not run {name} in the container"), e))?;
        let StartExecResults::Attached {
            mut output,
            mut input,
        } = started
        else {
            return Err(EngineError::terminal("the command ran detached"));
        };
        let feeding = async move {
            if let Some(bytes) = stdin {
                let _ = input.write_all(&bytes).await;
            }
            let _ = input.shutdown().await;
        };
        let reading = async {
            let mut ran = Ran::default();
            while let Some(Ok(chunk)) = output.next().await {
                match chunk {
                    bollard::container::LogOutput::StdOut { message } => {
                        ran.stdout.extend_from_slice(&message)
                    }
                    bollard::container::LogOutput::StdErr { message } => {
                        ran.stderr.extend_from_slice(&message)
                    }
                    _ => {}
                }
            }
            ran
        };
        let ((), mut ran) = tokio::join!(feeding, reading);
        let seen = docker
            .inspect_exec(&exec.id)
            .await
            .map_err(|e| said(&format!("lost the command {name}"), e))?;
        ran.code = seen.exit_code.unwrap_or(-1);
        Ok(ran)
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| EngineError::from(format!("{} took over {} s", name, timeout.as_secs())))?
}
