//! The stored form of a terraform service. Records stored before a member existed read it as
//! the value given here beside it.

use super::form::{Form, Text};
use super::shared::StoredGitRepository;
use domain::model::{
    TerraformAction, TerraformAutoDeployConfig, TerraformBackend, TerraformEngine,
    TerraformFilesSource, TerraformGitSource, TerraformJobResources, TerraformProviderVersion,
    TerraformSpec,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

stored!(StoredTerraformGitSource => TerraformGitSource {
    git_repository: StoredGitRepository,
});

/// Written as `{git: {git_repository}}`; the first records hold `{git_repository}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum StoredFilesSource {
    Git { git: StoredTerraformGitSource },
    Flat { git_repository: StoredGitRepository },
}

impl Form for StoredFilesSource {
    type Domain = TerraformFilesSource;
    fn write(value: &TerraformFilesSource) -> Self {
        StoredFilesSource::Git {
            git: Form::write(&value.git),
        }
    }
    fn read(self) -> TerraformFilesSource {
        let git = match self {
            StoredFilesSource::Git { git } => git.read(),
            StoredFilesSource::Flat { git_repository } => TerraformGitSource {
                git_repository: git_repository.read(),
            },
        };
        TerraformFilesSource { git }
    }
}

stored!(StoredAutoDeployConfig => TerraformAutoDeployConfig {
    auto_deploy: bool,
    terraform_action: Text<TerraformAction>,
});

fn manual_deploys() -> StoredAutoDeployConfig {
    StoredAutoDeployConfig {
        auto_deploy: false,
        terraform_action: Text(TerraformAction::Default),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) enum StoredBackend {
    #[serde(rename = "kubernetes")]
    Kubernetes {},
    #[serde(rename = "user_provided")]
    UserProvided {},
}

fn in_cluster() -> StoredBackend {
    StoredBackend::Kubernetes {}
}

impl Form for StoredBackend {
    type Domain = TerraformBackend;
    fn write(value: &TerraformBackend) -> Self {
        match value {
            TerraformBackend::Kubernetes {} => StoredBackend::Kubernetes {},
            TerraformBackend::UserProvided {} => StoredBackend::UserProvided {},
        }
    }
    fn read(self) -> TerraformBackend {
        match self {
            StoredBackend::Kubernetes {} => TerraformBackend::Kubernetes {},
            StoredBackend::UserProvided {} => TerraformBackend::UserProvided {},
        }
    }
}

stored!(StoredProviderVersion => TerraformProviderVersion {
    #[serde(default)]
    read_from_terraform_block: bool,
    explicit_version: String,
});

fn block_or_default_version() -> StoredProviderVersion {
    StoredProviderVersion {
        read_from_terraform_block: true,
        explicit_version: "1.9".into(),
    }
}

stored!(StoredJobResources => TerraformJobResources {
    cpu_milli: i64,
    ram_mib: i64,
    #[serde(default)]
    gpu: i64,
    storage_gib: i64,
});

fn first_job_resources() -> StoredJobResources {
    StoredJobResources {
        cpu_milli: 500,
        ram_mib: 512,
        gpu: 0,
        storage_gib: 1,
    }
}

stored!(StoredTerraform => TerraformSpec {
    terraform_files_source: StoredFilesSource,
    auto_deploy: bool,
    #[serde(default = "manual_deploys")]
    auto_deploy_config: StoredAutoDeployConfig,
    timeout_sec: i64,
    engine: Text<TerraformEngine>,
    terraform_variables_source: serde_json::Value,
    #[serde(default = "in_cluster")]
    backend: StoredBackend,
    #[serde(default = "block_or_default_version")]
    provider_version: StoredProviderVersion,
    #[serde(default = "first_job_resources")]
    job_resources: StoredJobResources,
    #[serde(default)]
    use_cluster_credentials: bool,
    #[serde(default)]
    action_extra_arguments: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    icon_uri: String,
});
