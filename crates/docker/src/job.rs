//! Jobs: each run a container run to its end (and again, up to its restarts, while it
//! fails); the executions that ended are kept with their output until the next run.

use crate::containers::{Act, Ended};
use crate::diagnosis::{exited, wrote, LAST_LINES};
use crate::engine::DockerEngine;
use crate::errors::said;
use crate::images::ImageAccess;
use crate::plan;
use domain::engine::EngineError;
use domain::engine::StepWork;
use domain::ids::ServiceId;
use domain::model::{DeploymentAction, JobCommand, JobSpec, StepName};
use std::time::Duration;

/// How many failed executions of one run of a job are kept (the latest, with their output):
/// a job that fails at every one of many restarts must not leave a container per attempt.
pub const FAILED_ATTEMPTS_KEPT: usize = 3;

/// What a job's deployment runs, if anything (see [`plan::job_command`]); when nothing, its
/// log says why.
pub(crate) fn command_at_deployment(work: &StepWork<'_>, job: &JobSpec) -> Option<JobCommand> {
    let scheduled = work.request.snapshot.scheduled_run;
    let run = plan::job_command(job, work.request.action, scheduled);
    if run.is_none() {
        work.log.info(if job.schedule.cronjob.is_some() {
            "the cron job runs at its schedule: its deployment keeps it"
        } else {
            "the job has no on_start command: nothing runs at deployment"
        });
    }
    run
}

impl DockerEngine {
    /// A step of a job's request: its image readied at deployment, its command run when its
    /// request's action asks for one (a lifecycle job's on_start, on_stop or on_delete).
    pub(crate) async fn job_step(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
    ) -> Result<(), EngineError> {
        use DeploymentAction as A;
        let (service, log) = (work.service, work.log);
        let action = work.request.action;
        match (action, work.step) {
            (A::Deploy | A::Redeploy, StepName::Executing) => {
                match command_at_deployment(work, job) {
                    Some(run) => self.run_job(work, job, &run).await,
                    None => Ok(()),
                }
            }
            (A::Deploy | A::Redeploy, _) => {
                let (image, access) = self.job_image(work, job)?;
                self.ensure_image(&image, access, log, work.cancel).await
            }
            // A lifecycle job runs its on_stop, or its on_delete before it goes.
            (A::Stop | A::Delete | A::Uninstall, _) => {
                let ran = match plan::job_command(job, action, false) {
                    Some(run) => {
                        let (image, access) = self.job_image(work, job)?;
                        self.ensure_image(&image, access, log, work.cancel).await?;
                        self.run_job(work, job, &run).await
                    }
                    None => Ok(()),
                };
                if action == A::Stop {
                    self.each_owned(service, log, Act::Stop).await?;
                } else {
                    let removed = self.remove_owned(service.id).await?;
                    log.info(&format!("removed {removed} container(s)"));
                }
                ran
            }
            (A::Restart, _) => self.restart_replicas(work).await,
            (A::Diff, _) => Ok(()),
        }
    }

    /// The job's executions that ended with a non-zero exit code, removed; their names.
    pub(crate) async fn remove_failed_executions(
        &self,
        job: ServiceId,
    ) -> Result<Vec<String>, EngineError> {
        let mut removed = Vec::new();
        for c in self.owned(job, Some("job")).await? {
            let Some(id) = c.id else { continue };
            let seen = self
                .docker
                .inspect_container(&id, None)
                .await
                .map_err(|e| said("could not read a job execution", e))?;
            let state = seen.state.unwrap_or_default();
            let ended = state.status == Some(bollard::models::ContainerStateStatusEnum::EXITED);
            if ended && state.exit_code.unwrap_or(0) != 0 {
                self.remove(&id).await?;
                let name = seen.name.unwrap_or_default();
                removed.push(name.trim_start_matches('/').to_string());
            }
        }
        Ok(removed)
    }

    /// The image a job runs: its registry's, or the one built from its repository.
    fn job_image<'w>(
        &self,
        work: &StepWork<'w>,
        job: &JobSpec,
    ) -> Result<(String, ImageAccess<'w>), EngineError> {
        match plan::job_image(job, work.inputs) {
            Some(image) => Ok((image, ImageAccess::Named(work.inputs.registry.as_ref()))),
            None => Ok((self.image_built_for(work)?, ImageAccess::Host)),
        }
    }

    async fn run_job(
        &self,
        work: &StepWork<'_>,
        job: &JobSpec,
        run: &JobCommand,
    ) -> Result<(), EngineError> {
        let log = work.log;
        let (image, _) = self.job_image(work, job)?;
        self.ensure_network(work.service).await?;
        let limit =
            Duration::from_secs(u64::try_from(job.max_duration_seconds.max(1)).unwrap_or(300));
        // The executions kept of the job's last run (failed ones, and the last that ended)
        // make way for this run's.
        let kept: Vec<String> = self
            .owned(work.service.id, Some("job"))
            .await?
            .into_iter()
            .filter_map(|c| c.id)
            .collect();
        self.remove_all(&kept).await;
        let mut last_failure = String::new();
        let mut failed: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        for attempt in 0..=job.max_nb_restart.max(0) {
            let plan = plan::job_execution(
                work.request,
                work.service,
                job,
                plan::Execution {
                    run,
                    image: &image,
                    attempt,
                },
                work.inputs,
                &self.settings.publish_address,
            );
            let id = self.start(&plan).await?;
            log.info(&format!("job execution {} started", attempt + 1));
            let code = match self.run_to_end(&id, limit, work.cancel, log, 1000).await {
                Ok(Ended::Exited(code)) => code,
                Ok(Ended::Canceled) => return Err("canceled while the job ran".into()),
                Ok(Ended::TimedOut) => {
                    self.remove_all(std::slice::from_ref(&id)).await;
                    return Err(format!(
                        "the job ran past its max_duration_seconds ({} s) and was stopped",
                        limit.as_secs()
                    )
                    .into());
                }
                Err(e) => {
                    self.remove_all(std::slice::from_ref(&id)).await;
                    return Err(said("lost the job's execution", e));
                }
            };
            // An execution that ended is kept, with its output, until the job runs again (or
            // a failed one is cleaned): its state and output stay readable.
            let lines = self.last_lines(&id, LAST_LINES).await;
            if code == 0 {
                log.info("the job succeeded (exit code 0)");
                return Ok(());
            }
            last_failure = format!("the job {}; {}", exited(code), wrote(&lines));
            failed.push_back(id);
            if failed.len() > FAILED_ATTEMPTS_KEPT {
                let oldest: Vec<String> = failed.pop_front().into_iter().collect();
                self.remove_all(&oldest).await;
            }
            log.warn(&format!(
                "job execution {} exited with code {code}",
                attempt + 1
            ));
        }
        Err(last_failure.into())
    }
}
