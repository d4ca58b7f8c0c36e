//! Failed job executions: an engine keeps each failed run (and its output) until it is cleaned
//! or the job runs again; these use cases clean them.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::error::{DomainError, DomainResult};
use crate::ids::*;
use crate::model::*;

/// What a clean removed: the jobs that had failed executions, and those executions' names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanedJobs {
    pub job_ids: Vec<ServiceId>,
    pub executions: Vec<String>,
}

impl Capstan {
    /// `POST /environment/{id}/cleanFailedJobs`: of every job of the environment, or of
    /// `only` (each must be a job of it).
    pub async fn clean_failed_jobs(
        &self,
        p: &Principal,
        environment: EnvironmentId,
        only: Option<&[ServiceId]>,
    ) -> DomainResult<CleanedJobs> {
        let jobs: Vec<ServiceId> = {
            let mut unit = self.reading().await?;
            let tx = &mut *unit;
            self.load::<Environment>(tx, p, environment, Action::Write)
                .await?;
            let services = self.services_of(tx, environment).await?;
            let jobs: Vec<ServiceId> = services
                .iter()
                .filter(|s| s.kind() == ServiceKind::Job)
                .map(|s| s.id)
                .collect();
            match only {
                None => jobs,
                Some(asked) => {
                    if let Some(stray) = asked.iter().find(|id| !jobs.contains(id)) {
                        return Err(DomainError::Invalid {
                            field: "job_ids".into(),
                            message: format!("{stray} is not a job of this environment"),
                        });
                    }
                    asked.to_vec()
                }
            }
        };
        let mut cleaned = CleanedJobs::default();
        for job in jobs {
            let removed = self.clean_job(job).await?;
            if !removed.is_empty() {
                cleaned.job_ids.push(job);
                cleaned.executions.extend(removed);
            }
        }
        Ok(cleaned)
    }

    /// `POST /job/{id}/cleanFailedJob`: the names of the executions removed.
    pub async fn clean_failed_job(
        &self,
        p: &Principal,
        job: ServiceId,
    ) -> DomainResult<Vec<String>> {
        {
            let mut unit = self.reading().await?;
            self.load_service(&mut *unit, p, ServiceKind::Job, job, Action::Write)
                .await?;
        }
        self.clean_job(job).await
    }

    /// No unit is held while the engine works.
    async fn clean_job(&self, job: ServiceId) -> DomainResult<Vec<String>> {
        match &self.engine {
            None => Ok(Vec::new()),
            Some(engine) => engine
                .clean_failed_jobs(job)
                .await
                .map_err(|e| DomainError::Upstream(format!("the engine could not clean: {e}"))),
        }
    }
}
