//! Jobs on a Swarm: each run a replicated-job Swarm service of one task, run to its end and
//! started again on failure up to the job's restarts, stopped at its max duration. A run is
//! kept (its state readable) until the next one; then it goes, and so do the exited
//! containers Swarm leaves of it on every node whose daemon Capstan reaches (see
//! `remove_task_containers`).

use super::one_off::{completed, failed, why_failed, RunEnd};
use super::spec;
use crate::diagnosis::{wrote, LAST_LINES};
use crate::engine::DockerEngine;
use crate::{images, plan, rollout};
use domain::engine::{EngineError, StepWork};
use domain::model::{DeploymentAction, JobCommand, JobSpec, StepName};
use std::time::Duration;

impl DockerEngine {
    /// A step of a job's request on a Swarm.
    pub(crate) async fn swarm_job_step(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
    ) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let (log, action) = (work.log, work.request.action);
        match (action, work.step) {
            (A::Deploy | A::Redeploy, StepName::Executing) => {
                match crate::job::command_at_deployment(work, job) {
                    Some(run) => self.run_swarm_job(work, job, &run).await,
                    None => Ok(()),
                }
            }
            (A::Deploy | A::Redeploy, _) => self.swarm_job_image(work, job).await.map(drop),
            (A::Stop | A::Delete | A::Uninstall, _) => {
                let ran = match plan::job_command(job, action, false) {
                    Some(run) => self.run_swarm_job(work, job, &run).await,
                    None => Ok(()),
                };
                let removed = self.remove_swarm_services(work.service.id).await?;
                log.info(&format!("removed {} Swarm service(s)", removed.len()));
                ran
            }
            (A::Restart, _) => {
                log.info("a job's run is not restarted: it runs again at its next deployment");
                Ok(())
            }
            (A::Diff, _) => Ok(()),
        }
    }

    /// The image a job runs, checked as one an organization may name (or the one built
    /// for it).
    async fn swarm_job_image(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
    ) -> Result<String, EngineError> {
        match plan::job_image(job, work.inputs) {
            Some(image) => {
                images::nameable(&image)?;
                if !self.settings.host_images.shares(&image) {
                    self.pull_permitted(&image).await?;
                }
                Ok(image)
            }
            None => self.image_built_for(work),
        }
    }

    async fn run_swarm_job(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
        run: &JobCommand,
    ) -> Result<(), EngineError> {
        let (service, log) = (work.service, work.log);
        let image = self.swarm_job_image(work, job).await?;
        let built = plan::job_image(job, work.inputs).is_none();
        self.ensure_network(service).await?;
        // The previous run (its state kept until now) makes way for this one.
        self.remove_swarm_services(service.id).await?;
        let execution = plan::job_execution(
            work.request,
            service,
            job,
            plan::Execution {
                run,
                image: &image,
                attempt: 0,
            },
            work.inputs,
            &self.settings.publish_address,
        );
        let name = format!(
            "capstan-{}-run-{}",
            service.id.0.simple(),
            rollout::generation(work.request)
        );
        let Some(wanted) = spec::job_spec(
            &execution,
            &name,
            &spec::alias(service.id),
            service.termination_grace_seconds(),
            job.max_nb_restart,
        ) else {
            return Ok(());
        };
        let credentials = Self::credentials(work.inputs.registry.as_ref()).filter(|_| !built);
        let built = built.then_some(image.as_str());
        self.create_swarm_service(work, wanted, &execution.files, built, credentials)
            .await?;
        log.info(&format!("the job runs as the Swarm job {name}"));
        let limit =
            Duration::from_secs(u64::try_from(job.max_duration_seconds.max(1)).unwrap_or(300));
        let ended = self
            .await_swarm_run(&name, job.max_nb_restart, limit, work.cancel, |n, t| {
                log.warn(&format!("job execution {n} {}", why_failed(t)));
            })
            .await?;
        match ended {
            RunEnd::Completed => {
                log.info("the job succeeded (exit code 0)");
                Ok(())
            }
            RunEnd::Failed(last) => {
                let lines = self.last_lines_of_service(&name, LAST_LINES).await;
                Err(format!("the job {}; {}", why_failed(&last), wrote(&lines)).into())
            }
            RunEnd::TimedOut => {
                self.remove_swarm_services(service.id).await?;
                Err(format!(
                    "the job ran past its max_duration_seconds ({} s) and was stopped",
                    limit.as_secs()
                )
                .into())
            }
            RunEnd::Canceled => {
                self.remove_swarm_services(service.id).await?;
                Err("canceled while the job ran".into())
            }
        }
    }

    /// The job's runs that failed, removed (with their containers); their names.
    pub(crate) async fn remove_failed_runs(
        &self,
        job: domain::ids::ServiceId,
    ) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for run in self.swarm_services(Some(job)).await? {
            let name = super::tasks::name_of(&run).to_string();
            let tasks = self.tasks_of(&name).await?;
            let done = tasks.iter().any(completed);
            let running = tasks.iter().any(|t| !failed(t) && !completed(t));
            if !done && !running && !tasks.is_empty() {
                self.remove_swarm_service(&run).await?;
                removed.push(name);
            }
        }
        Ok(removed)
    }
}
