//! A database's backups: a dump its own tool made inside its container, kept by the engine
//! under a name of the backup's, listed with how taking it went.

use super::Record;
use crate::ids::{BackupId, OrganizationId, ServiceId};
use time::OffsetDateTime;

string_enum!(
    /// How taking a backup went.
    BackupState {
        Running => "RUNNING",
        Done => "DONE",
        Failed => "FAILED",
    }
);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseBackup {
    pub id: BackupId,
    pub organization_id: OrganizationId,
    pub database_id: ServiceId,
    pub name: String,
    pub message: String,
    pub state: BackupState,
    /// The dump's size once taken.
    pub size_bytes: i64,
    /// Why it failed.
    pub reason: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl DatabaseBackup {
    /// The name the engine keeps its dump under.
    pub fn file_name(&self) -> String {
        format!("{}.dump", self.id.0.simple())
    }
}

impl Record for DatabaseBackup {
    type Id = BackupId;
    /// Backups are listed per database.
    type Parent = ServiceId;
    const KIND: &'static str = "backup";
    fn id(&self) -> BackupId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}
