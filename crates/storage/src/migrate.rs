//! Embedded migrations, one folder per backend, applied at start.

use crate::db::DatabaseUrl;
use diesel::Connection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::AsyncPgConnection;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use domain::error::StoreError;

const SQLITE: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
const POSTGRES: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");

/// Applies pending migrations; returns how many ran. Runs on a thread of its own because
/// diesel's migration harness is synchronous.
pub async fn run_migrations(url: &DatabaseUrl) -> Result<usize, StoreError> {
    let url = url.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let _ = tx.send(migrate_blocking(&url));
    });
    rx.await
        .map_err(|_| StoreError::Other("migration thread died".into()))?
}

fn migrate_blocking(url: &DatabaseUrl) -> Result<usize, StoreError> {
    let failed = |e: Box<dyn std::error::Error + Send + Sync>| {
        StoreError::Other(format!("migration failed: {e}"))
    };
    match url {
        DatabaseUrl::Sqlite(path) => {
            let mut conn = diesel::SqliteConnection::establish(path)
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            conn.run_pending_migrations(SQLITE)
                .map(|v| v.len())
                .map_err(failed)
        }
        DatabaseUrl::Postgres(u) => {
            let mut conn = AsyncConnectionWrapper::<AsyncPgConnection>::establish(u)
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            conn.run_pending_migrations(POSTGRES)
                .map(|v| v.len())
                .map_err(failed)
        }
    }
}

impl crate::db::Db {
    /// Applies the SQLite migrations through the pool itself (for `:memory:`, whose database
    /// exists only inside its one connection).
    pub(crate) async fn migrate_in_place(&self) -> Result<(), StoreError> {
        self.write(|conn| async move {
            match conn {
                crate::db::Conn::Sqlite(mut conn, _guard) => conn
                    .spawn_blocking(|c| {
                        c.run_pending_migrations(SQLITE)
                            .map(|_| ())
                            .map_err(diesel::result::Error::QueryBuilderError)
                    })
                    .await
                    .map_err(|e| StoreError::Other(format!("migration failed: {e}"))),
                crate::db::Conn::Pg(_) => Err(StoreError::Other("not a SQLite database".into())),
            }
        })
        .await
    }
}
