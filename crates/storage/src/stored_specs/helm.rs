//! The stored form of a helm: its chart's source, the values it overrides, its ports.

use super::form::Form;
use super::shared::{StoredGitRepository, StoredPort};
use domain::model::{
    GitValues, HelmChartRepository, HelmGitSource, HelmRepositorySource, HelmSource, HelmSpec,
    RawValues, RawValuesFile, ValuesFile, ValuesOverride,
};
use uuid::Uuid;

stored!(StoredHelmGitSource => HelmGitSource {
    git_repository: StoredGitRepository,
});

stored!(StoredChartRepository => HelmChartRepository {
    id: Uuid,
    name: String,
    url: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    organization_repository: bool,
});

stored!(StoredHelmRepositorySource => HelmRepositorySource {
    chart_name: String,
    chart_version: String,
    repository: StoredChartRepository,
});

stored!(StoredHelmSource => HelmSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    git: Option<StoredHelmGitSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    repository: Option<StoredHelmRepositorySource>,
});

stored!(StoredRawValuesFile => RawValuesFile {
    name: String,
    content: String,
});

stored!(StoredRawValues => RawValues {
    values: Vec<StoredRawValuesFile>,
});

stored!(StoredGitValues => GitValues {
    git_repository: StoredGitRepository,
    paths: Vec<String>,
});

stored!(StoredValuesFile => ValuesFile {
    #[serde(default)]
    raw: Option<StoredRawValues>,
    #[serde(default)]
    git: Option<StoredGitValues>,
});

stored!(StoredValuesOverride => ValuesOverride {
    set: Vec<Vec<String>>,
    set_string: Vec<Vec<String>>,
    set_json: Vec<Vec<String>>,
    file: Option<StoredValuesFile>,
});

stored!(StoredHelm => HelmSpec {
    #[serde(default)]
    icon_uri: String,
    auto_preview: bool,
    auto_deploy: bool,
    source: StoredHelmSource,
    arguments: Vec<String>,
    allow_cluster_wide_resources: bool,
    timeout_sec: i64,
    values_override: StoredValuesOverride,
    ports: Vec<StoredPort>,
});
