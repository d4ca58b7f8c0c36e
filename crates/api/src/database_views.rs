//! A database's credentials, versions and the configurations an environment offers, as the
//! public API shows them.

use domain::model::{BackupState, DatabaseBackup, DatabaseMode, DatabaseType};
use domain::services::DatabaseCredentials;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

#[derive(Serialize, ToSchema)]
pub struct CredentialsView {
    pub host: String,
    pub port: u16,
    pub login: String,
    pub password: String,
}

impl From<DatabaseCredentials> for CredentialsView {
    fn from(c: DatabaseCredentials) -> Self {
        Self {
            host: c.host,
            port: c.port,
            login: c.login,
            password: c.password.expose().to_string(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct VersionView {
    pub name: String,
}

#[derive(Serialize, ToSchema)]
pub struct VersionResponseList {
    pub results: Vec<VersionView>,
}

impl VersionResponseList {
    pub fn of(versions: &[&str]) -> Self {
        Self {
            results: versions
                .iter()
                .map(|v| VersionView {
                    name: (*v).to_string(),
                })
                .collect(),
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct DatabaseVersionMode {
    pub name: String,
    pub supported_mode: DatabaseMode,
}

#[derive(Serialize, ToSchema)]
pub struct DatabaseConfiguration {
    pub database_type: DatabaseType,
    pub version: Vec<DatabaseVersionMode>,
}

#[derive(Serialize, ToSchema)]
pub struct DatabaseConfigurationResponseList {
    pub results: Vec<DatabaseConfiguration>,
}

impl DatabaseConfigurationResponseList {
    pub fn of(types: Vec<(DatabaseType, &[&str])>) -> Self {
        Self {
            results: types
                .into_iter()
                .map(|(database_type, versions)| DatabaseConfiguration {
                    database_type,
                    version: versions
                        .iter()
                        .map(|v| DatabaseVersionMode {
                            name: (*v).to_string(),
                            supported_mode: DatabaseMode::Container,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// A backup's progress as the public API's Status shows it: RUNNING is DEPLOYING (ONGOING),
/// DONE is DEPLOYED (SUCCESS), FAILED is DEPLOYMENT_ERROR (ERROR).
#[derive(Serialize, ToSchema)]
pub struct BackupStatus {
    pub id: Uuid,
    pub state: &'static str,
    pub service_deployment_status: &'static str,
    pub status_details: BackupStatusDetails,
    pub is_part_last_deployment: bool,
    pub deployment_requests_count: i64,
    pub deployment_request_id: Option<Uuid>,
    /// Why it failed.
    pub message: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct BackupStatusDetails {
    pub action: &'static str,
    pub status: &'static str,
    pub sub_action: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct BackupView {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    pub name: String,
    pub message: String,
    pub status: BackupStatus,
    /// The dump's size once taken (a Capstan addition).
    pub size_bytes: i64,
}

impl From<DatabaseBackup> for BackupView {
    fn from(b: DatabaseBackup) -> Self {
        let (state, status) = match b.state {
            BackupState::Running => ("DEPLOYING", "ONGOING"),
            BackupState::Done => ("DEPLOYED", "SUCCESS"),
            BackupState::Failed => ("DEPLOYMENT_ERROR", "ERROR"),
        };
        Self {
            id: b.id.0,
            created_at: b.created_at,
            updated_at: b.updated_at,
            name: b.name,
            message: b.message,
            status: BackupStatus {
                id: b.id.0,
                state,
                service_deployment_status: "UP_TO_DATE",
                status_details: BackupStatusDetails {
                    action: "DEPLOY",
                    status,
                    sub_action: "NONE",
                },
                is_part_last_deployment: false,
                deployment_requests_count: 0,
                deployment_request_id: None,
                message: b.reason,
            },
            size_bytes: b.size_bytes,
        }
    }
}

/// The public BackupPaginatedResponseList: the page's number and size beside its results.
#[derive(Serialize, ToSchema)]
pub struct BackupList {
    pub page: u32,
    pub page_size: u32,
    pub results: Vec<BackupView>,
}

/// Where to move a database on its cluster's Swarm (Capstan's addition).
#[derive(Deserialize, ToSchema)]
pub struct MoveRequest {
    /// The node: its id, its address or its host name, as the cluster's status lists them.
    pub node: String,
}

#[derive(Deserialize, ToSchema)]
pub struct BackupRequest {
    pub name: String,
    #[serde(default)]
    pub message: String,
}
