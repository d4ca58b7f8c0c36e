//! The stored form of a job: its schedule, its source (an image or a Dockerfile in git) and how
//! it runs.

use super::form::{Form, Text};
use super::shared::{StoredGitRepository, StoredHealthchecks, StoredRegistrySummary};
use domain::ids::ContainerRegistryId;
use domain::model::{
    CronJob, DockerSource, ImageSource, JobCommand, JobSchedule, JobSource, JobSpec, JobType,
};

fn utc() -> String {
    "Etc/UTC".into()
}

stored!(StoredCronJob => CronJob {
    scheduled_at: String,
    #[serde(default = "utc")]
    timezone: String,
    #[serde(default)]
    arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entrypoint: Option<String>,
});

stored!(StoredJobCommand => JobCommand {
    #[serde(default)]
    arguments: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    entrypoint: Option<String>,
});

stored!(StoredJobSchedule => JobSchedule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cronjob: Option<StoredCronJob>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_start: Option<StoredJobCommand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_stop: Option<StoredJobCommand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on_delete: Option<StoredJobCommand>,
});

stored!(StoredImageSource => ImageSource {
    image_name: String,
    tag: String,
    registry_id: Text<ContainerRegistryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registry: Option<StoredRegistrySummary>,
});

stored!(StoredDockerSource => DockerSource {
    git_repository: StoredGitRepository,
    dockerfile_path: String,
});

stored!(StoredJobSource => JobSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<StoredImageSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    docker: Option<StoredDockerSource>,
});

stored!(StoredJob => JobSpec + workload {
    job_type: Text<JobType>,
    schedule: StoredJobSchedule,
    source: StoredJobSource,
    auto_deploy: bool,
    max_nb_restart: i64,
    max_duration_seconds: i64,
    cpu: i64,
    memory: i64,
    #[serde(default)]
    port: Option<i64>,
});
