//! Where a SQLite store keeps its snapshots (`snapshots` makes and restores them).

use domain::model::SnapshotName;
use std::path::{Path, PathBuf};

/// Where a SQLite store keeps its snapshots; a temporary folder goes with the store.
#[derive(Debug)]
pub(crate) struct SnapshotDir {
    path: PathBuf,
    temporary: bool,
}

impl SnapshotDir {
    /// `<database>.snapshots`, or a folder of its own under the system's temporary one for a
    /// database in memory.
    pub(crate) fn for_sqlite(database: &str, memory: bool) -> Self {
        if memory {
            let path = std::env::temp_dir().join(format!(
                "capstan-snapshots-{}-{}",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            Self {
                path,
                temporary: true,
            }
        } else {
            Self {
                path: PathBuf::from(format!("{database}.snapshots")),
                temporary: false,
            }
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn file(&self, name: &SnapshotName) -> PathBuf {
        self.path.join(format!("{name}.db"))
    }
}

impl Drop for SnapshotDir {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}
