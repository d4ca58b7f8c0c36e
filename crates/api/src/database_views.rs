//! A database's credentials, versions and the configurations an environment offers, as the
//! public API shows them.

use domain::model::{DatabaseMode, DatabaseType};
use domain::services::DatabaseCredentials;
use serde::Serialize;
use utoipa::ToSchema;

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
