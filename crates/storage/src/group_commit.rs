//! Group commit for a SQLite file: writers commit without waiting for the disk, then share one
//! fsync of the write-ahead log before any of them answers.
//!
//! SQLite in WAL mode with `synchronous=NORMAL` has written a committed transaction's frames to
//! the log (the operating system holds them) when COMMIT returns, but syncs the log only at a
//! checkpoint. `synchronous=FULL` would sync at every commit, while holding the one writer slot,
//! so writes top out at one per fsync. Here the slot is released first, and a commit counts as
//! done only once an fsync of the log that *started after it* has completed: every writer that
//! committed while one fsync was running is covered by the next one, one fsync for all of them.
//! Durability when acknowledged is unchanged; only the waiting is shared.

use domain::error::{StoreError, StoreResult};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Mutex;

pub(crate) struct GroupCommit {
    /// The log: `<database>-wal`. Opened for each fsync, because SQLite replaces the file
    /// (after checkpointing everything into the database) when its last connection closes.
    wal: PathBuf,
    /// fsyncs begun so far; read by a writer right after its commit.
    started: AtomicU64,
    /// fsyncs completed; the lock is held through each fsync, so one runs at a time and the
    /// writers queued behind it find their commit already covered.
    completed: Mutex<u64>,
}

impl GroupCommit {
    pub(crate) fn new(database: &str) -> Self {
        Self {
            wal: PathBuf::from(format!("{database}-wal")),
            started: AtomicU64::new(0),
            completed: Mutex::new(0),
        }
    }

    /// Returns once everything committed before the call is on disk.
    pub(crate) async fn durable(&self) -> StoreResult<()> {
        // An fsync numbered above `seen` begins after this point, so after the caller's commit.
        let seen = self.started.load(Ordering::SeqCst);
        let mut completed = self.completed.lock().await;
        if *completed > seen {
            return Ok(());
        }
        let number = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let wal = self.wal.clone();
        // Off the caller's thread: an HTTP worker goes on serving while the disk works.
        tokio::task::spawn_blocking(move || sync(&wal))
            .await
            .map_err(|e| StoreError::Unavailable(format!("the log sync stopped: {e}")))??;
        *completed = number;
        Ok(())
    }

    /// fsyncs begun and completed so far (tests).
    pub(crate) async fn syncs(&self) -> (u64, u64) {
        let completed = *self.completed.lock().await;
        (self.started.load(Ordering::SeqCst), completed)
    }
}

fn sync(wal: &std::path::Path) -> StoreResult<()> {
    match std::fs::OpenOptions::new().read(true).write(true).open(wal) {
        Ok(file) => file
            .sync_data()
            .map_err(|e| StoreError::Unavailable(format!("cannot sync the database log: {e}"))),
        // No log: the last connection closed, and SQLite synced the database after moving
        // every committed frame into it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::Unavailable(format!(
            "cannot open the database log: {e}"
        ))),
    }
}
