//! Embedded migrations, applied at start: the shared folder, and each backend's own folder for
//! the few whose SQL differs (see migrations/README.md).

use crate::db::DatabaseUrl;
use diesel::migration::{Migration, MigrationSource};
use diesel::Connection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_async::AsyncPgConnection;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use domain::error::StoreError;

const SHARED: EmbeddedMigrations = embed_migrations!("../../migrations/shared");
pub(crate) const SQLITE: Layered = Layered(embed_migrations!("../../migrations/sqlite"));
const POSTGRES: Layered = Layered(embed_migrations!("../../migrations/postgres"));

/// The shared migrations and one backend's own, in version order.
pub(crate) struct Layered(EmbeddedMigrations);

impl<DB: diesel::backend::Backend> MigrationSource<DB> for Layered {
    fn migrations(&self) -> diesel::migration::Result<Vec<Box<dyn Migration<DB>>>> {
        let mut all = MigrationSource::<DB>::migrations(&SHARED)?;
        all.extend(MigrationSource::<DB>::migrations(&self.0)?);
        all.sort_by_key(|m| m.name().version().to_string());
        Ok(all)
    }
}

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
                crate::db::Conn::Sqlite(mut conn) => conn
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
