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
        dump_file(self.id)
    }
}

const DUMP: &str = ".dump";

/// The name the engine keeps backup `id`'s dump under.
pub fn dump_file(id: BackupId) -> String {
    format!("{}{DUMP}", id.0.simple())
}

/// The backup a file of the engine's holds the dump of, when it is named as `dump_file`
/// names them (anything else in the directory is not Capstan's to touch).
pub fn dump_of(file: &str) -> Option<BackupId> {
    let id = file.strip_suffix(DUMP)?;
    // Only the simple form `dump_file` writes: a name Capstan did not write is left alone.
    (id.len() == 32)
        .then(|| uuid::Uuid::try_parse(id).ok())
        .flatten()
        .map(BackupId)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_names_its_backup_and_nothing_else_is_taken_for_one() {
        let id = BackupId(uuid::Uuid::new_v4());
        assert_eq!(dump_of(&dump_file(id)), Some(id));
        let hyphenated = format!("{}.dump", id.0);
        for other in [
            hyphenated.as_str(),
            "notes.dump",
            "backup.sql",
            ".dump",
            &id.0.simple().to_string(),
        ] {
            assert_eq!(dump_of(other), None, "{other}");
        }
    }
}
