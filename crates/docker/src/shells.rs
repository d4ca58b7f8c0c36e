//! A shell: a command run with a terminal inside a running replica through Docker's exec API
//! (on a Swarm, through the daemon of the replica's node).

use crate::engine::DockerEngine;
use crate::errors::said;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use domain::engine::{EngineError, Shell, ShellRequest};
use domain::model::Service;
use futures_util::{FutureExt, StreamExt};

impl DockerEngine {
    pub(crate) async fn open_shell(
        &self,
        service: &Service,
        request: &ShellRequest,
    ) -> Result<Shell, EngineError> {
        let replicas = self.running_replicas(service.id).await?;
        let replica = match &request.replica {
            Some(name) => replicas
                .into_iter()
                .find(|r| &r.name == name)
                .ok_or_else(|| format!("no replica named {name} runs"))?,
            None => replicas
                .into_iter()
                .find(|r| r.docker.is_ok())
                .ok_or("no replica of it runs that Capstan reaches: deploy it first")?,
        };
        let docker = replica
            .docker
            .map_err(|why| format!("the replica {} cannot be reached: {why}", replica.name))?
            .clone();
        let config = CreateExecOptions {
            cmd: Some(request.command.clone()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(true),
            env: Some(vec!["TERM=xterm".to_string()]),
            ..Default::default()
        };
        let exec = docker
            .create_exec(&replica.container, config)
            .await
            .map_err(|e| said("could not start the command in the replica", e))?;
        let started = docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty: true,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| said("could not start the command in the replica", e))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(EngineError::terminal("the command ran detached"));
        };
        // Docker sizes an exec's terminal once it runs; a process that ended at once has none.
        let size = ResizeExecOptions {
            height: request.size.height,
            width: request.size.width,
        };
        if let Err(e) = docker.resize_exec(&exec.id, size).await {
            tracing::debug!(error = %e, "a shell's terminal could not be sized");
        }
        let output = output
            .map(|chunk| {
                chunk
                    .map(|c| c.into_bytes().to_vec())
                    .map_err(|e| said("lost the command's output", e))
            })
            .boxed();
        let id = exec.id;
        let ended = async move {
            let seen = docker
                .inspect_exec(&id)
                .await
                .map_err(|e| said("lost the command", e))?;
            Ok(seen.exit_code)
        }
        .boxed();
        Ok(Shell {
            replica: replica.name,
            input,
            output,
            ended,
        })
    }
}
