//! Terraform on a Swarm: each run a one-off Swarm task pinned, as a database is, to the node
//! that keeps the service's state volume (chosen at its first run among the nodes whose daemon
//! Capstan reaches), its workspace's files as Swarm secrets, its output in the deployment log.

use super::one_off::{exit_code, why_failed, RunEnd};
use super::{pinned, spec};
use crate::containers::Ended;
use crate::engine::DockerEngine;
use crate::plan::{self, ContainerPlan};
use crate::rollout;
use domain::engine::{EngineError, StepWork};
use std::time::Duration;

impl DockerEngine {
    /// Runs `runner` to its end on the node that keeps the state volume; the last `lines` of
    /// its output in the deployment log.
    pub(crate) async fn run_swarm_terraform(
        &self,
        work: &StepWork<'_>,
        runner: &ContainerPlan,
        limit: Duration,
        lines: usize,
    ) -> Result<Ended, EngineError> {
        let (service, log) = (work.service, work.log);
        let volume = plan::state_volume_name(service.id);
        let node = self.node_to_pin(service.id, &volume).await?;
        let docker = self.daemon_of_node(&node).await?.ok_or_else(|| {
            format!(
                "the state volume is on the node {node}, and the cluster names no daemon of that node"
            )
        })?;
        self.load_onto(
            &self.docker,
            docker,
            &runner.image,
            &format!("the node {node}"),
            log,
            work.cancel,
        )
        .await?;
        // No run outlives its step: one still there was left by an instance that died (and,
        // for a local state, holds its lock) or by an earlier attempt at this request.
        let left = self.remove_swarm_services(service.id).await?;
        if !left.is_empty() {
            log.info(&format!(
                "{} terraform run(s) left behind: removed",
                left.len()
            ));
        }
        let name = format!(
            "capstan-{}-tf-{}",
            service.id.0.simple(),
            rollout::generation(work.request)
        );
        let runner = &with_empty_files_made(runner);
        let mut wanted = spec::job_spec(
            runner,
            &name,
            &spec::alias(service.id),
            service.termination_grace_seconds(),
            0,
        )
        .ok_or("nothing to run")?;
        pinned::pin(&mut wanted, &node);
        self.create_swarm_service(work, wanted, &runner.files, None, None)
            .await?;
        log.info(&format!(
            "terraform runs as the Swarm job {name}, on the node {node} that keeps its state"
        ));
        let ended = self
            .await_swarm_run(&name, 0, limit, work.cancel, |_, _| {})
            .await;
        for line in self.last_lines_of_service(&name, lines).await {
            log.info(&line);
        }
        // Swarm leaves a one-off task's exited container, which holds the state volume: a
        // second pass removes what the first could not yet.
        let removed = self.remove_swarm_services(service.id).await?;
        self.wait_containers_gone(&removed, Duration::ZERO).await;
        match ended? {
            RunEnd::Completed => Ok(Ended::Exited(0)),
            RunEnd::Failed(task) => match exit_code(&task) {
                Some(code) => Ok(Ended::Exited(code)),
                None => Err(format!("the terraform run {}", why_failed(&task)).into()),
            },
            RunEnd::TimedOut => Ok(Ended::TimedOut),
            RunEnd::Canceled => Ok(Ended::Canceled),
        }
    }
}

/// A Swarm secret cannot be empty: the runner's empty files (a `.gitkeep`) are made by its
/// script instead.
fn with_empty_files_made(runner: &ContainerPlan) -> ContainerPlan {
    let mut runner = runner.clone();
    let (empty, files): (Vec<_>, Vec<_>) =
        runner.files.drain(..).partition(|f| f.content.is_empty());
    runner.files = files;
    if empty.is_empty() {
        return runner;
    }
    let quoted = |path: &str| format!("'{}'", path.replace('\'', r"'\''"));
    let made: String = empty
        .iter()
        .map(|f| {
            let dir = std::path::Path::new(&f.path)
                .parent()
                .map(|d| d.to_string_lossy().to_string())
                .unwrap_or_else(|| "/".into());
            format!("mkdir -p {} && : > {}\n", quoted(&dir), quoted(&f.path))
        })
        .collect();
    if let Some(script) = runner.cmd.as_mut().and_then(|c| c.first_mut()) {
        *script = format!("{made}{script}");
    }
    runner
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlannedFile;

    #[test]
    fn empty_files_are_made_by_the_script_not_as_secrets() {
        let file = |path: &str, content: &[u8]| PlannedFile {
            path: path.into(),
            content: content.to_vec(),
        };
        let runner = ContainerPlan {
            name: "r".into(),
            image: "tf".into(),
            entrypoint: Some(vec!["sh".into(), "-c".into()]),
            cmd: Some(vec!["set -eu\n".into()]),
            env: Vec::new(),
            labels: std::collections::HashMap::new(),
            ports: Vec::new(),
            files: vec![
                file("/workspace/main.tf", b"locals {}"),
                file("/workspace/it's/.gitkeep", b""),
            ],
            nano_cpus: 1,
            memory_bytes: 1,
            restarts: false,
            init: false,
            publish_address: String::new(),
            volume: None,
            network: "n".into(),
            aliases: Vec::new(),
        };
        let made = with_empty_files_made(&runner);
        assert_eq!(made.files.len(), 1);
        assert_eq!(made.files[0].path, "/workspace/main.tf");
        assert_eq!(
            made.cmd.unwrap()[0],
            "mkdir -p '/workspace/it'\\''s' && : > '/workspace/it'\\''s/.gitkeep'\nset -eu\n"
        );
    }
}
