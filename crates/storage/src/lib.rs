//! Capstan's storage: the domain's repository ports over diesel + diesel-async, for SQLite (the
//! embedded default) and PostgreSQL (production; several instances may share one database).

mod cipher;
mod cluster_claims;
mod cluster_daemons;
mod cluster_logs;
mod cron_turns;
mod db;
mod deployment_logs;
mod events;
mod group_commit;
mod in_list;
mod limits;
mod listener;
mod maintenance;
mod mark_changed;
mod migrate;
mod pg_names;
mod pg_pools;
mod queries;
mod queue;
mod repos;
mod rotation;
mod rows;
mod rules;
mod running_states;
mod schema;
mod service_output;
mod session;
mod snapshot_dir;
mod snapshots;
mod stages;
mod stored_specs;
pub mod testing;
#[cfg(test)]
mod text_columns_test;
mod token_cache;

pub use cipher::{key_id, Cipher, KeySource};
pub use db::{DatabaseUrl, Db};
pub use maintenance::{KEPT_TABLES, TABLES};
pub use migrate::run_migrations;
pub use session::Session;

use domain::error::StoreError;

/// Connects and brings the schema up to date: what a server does at start.
/// `secret_key` encrypts secret values at rest.
pub async fn open(
    url: &DatabaseUrl,
    max_connections: usize,
    secret_key: &[u8; 32],
) -> Result<Db, StoreError> {
    // In-memory SQLite lives in its one pooled connection, so migrate through that pool instead.
    if url.is_sqlite_memory() {
        let db = Db::connect(url, 1, secret_key).await?;
        db.migrate_in_place().await?;
        return Ok(db);
    }
    run_migrations(url).await?;
    Db::connect(url, max_connections, secret_key).await
}
