//! Stored forms of the kinds that run until stopped: applications and containers.

use super::form::{Form, Text};
use super::shared::{
    StoredGitRepository, StoredHealthchecks, StoredPort, StoredRegistrySummary, StoredVolume,
};
use domain::ids::ContainerRegistryId;
use domain::model::{ApplicationSpec, BuildMode, ContainerSpec};

stored!(StoredApplication => ApplicationSpec + runtime {
    git_repository: StoredGitRepository,
    build_mode: Text<BuildMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dockerfile_path: Option<String>,
    #[serde(default)]
    docker_target_build_stage: Option<String>,
});

stored!(StoredContainer => ContainerSpec + runtime {
    registry_id: Text<ContainerRegistryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registry: Option<StoredRegistrySummary>,
    image_name: String,
    tag: String,
});
