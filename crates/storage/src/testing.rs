//! Fresh databases for tests: each test gets its own, so tests run in parallel.
//!
//! PostgreSQL is found through `CAPSTAN_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`): a database `capstan_test_<uuid>` is created
//! from it per test. When the server cannot be reached, [`postgres`] fails under `CI=true` and
//! otherwise returns `None` after printing why, so a laptop without PostgreSQL still runs the
//! SQLite half.

// Test support: failing loudly on a broken test database is the point.
#![allow(clippy::expect_used, clippy::panic)]

use crate::db::{DatabaseUrl, Db};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use std::path::PathBuf;

/// The key test databases encrypt their secrets with.
pub const TEST_KEY: [u8; 32] = [42; 32];

/// A fresh, migrated SQLite database in a temporary file (removed when the guard drops).
pub async fn sqlite() -> (Db, DatabaseUrl, TempFile) {
    let path = std::env::temp_dir().join(format!("capstan-test-{}.db", uuid::Uuid::new_v4()));
    let url = DatabaseUrl::Sqlite(path.to_string_lossy().into_owned());
    let db = crate::open(&url, 4, &TEST_KEY)
        .await
        .expect("open sqlite test database");
    (db, url, TempFile(path))
}

/// A fresh, migrated in-memory SQLite database (`sqlite::memory:`: one connection for reads
/// and writes, so a use case that asked for a second one while holding the first would wait).
pub async fn sqlite_memory() -> Db {
    crate::open(&DatabaseUrl::Sqlite(":memory:".into()), 4, &TEST_KEY)
        .await
        .expect("open in-memory sqlite test database")
}

/// A migrated copy of the SQLite database file `fixture` (removed when the guard drops): what
/// a server opening that file would see.
pub async fn sqlite_copy_of(fixture: &std::path::Path) -> (Db, DatabaseUrl, TempFile) {
    let path = std::env::temp_dir().join(format!("capstan-test-{}.db", uuid::Uuid::new_v4()));
    let guard = TempFile(path.clone());
    std::fs::copy(fixture, &path).expect("copy the sqlite fixture");
    let url = DatabaseUrl::Sqlite(path.to_string_lossy().into_owned());
    let db = crate::open(&url, 4, &TEST_KEY)
        .await
        .expect("open the copied sqlite fixture");
    (db, url, guard)
}

/// Removes a SQLite test database and its WAL files.
pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", ".key"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

pub fn postgres_admin_url() -> String {
    std::env::var("CAPSTAN_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// A fresh, migrated PostgreSQL database, or `None` (outside CI) when no server answers.
pub async fn postgres() -> Option<(Db, DatabaseUrl)> {
    let url = postgres_database().await?;
    let db = crate::open(&url, 4, &TEST_KEY)
        .await
        .expect("open postgres test database");
    Some((db, url))
}

/// A fresh PostgreSQL database holding `dump` (plain SQL, without psql meta-commands), then
/// migrated; `None` (outside CI) when no server answers.
pub async fn postgres_loaded(dump: &str) -> Option<(Db, DatabaseUrl)> {
    use diesel_async::SimpleAsyncConnection;
    let url = postgres_database().await?;
    let DatabaseUrl::Postgres(raw) = &url else {
        panic!("postgres_database made a URL of another backend")
    };
    let mut conn = AsyncPgConnection::establish(raw)
        .await
        .expect("connect to the new test database");
    conn.batch_execute(dump).await.expect("load the dump");
    drop(conn);
    let db = crate::open(&url, 4, &TEST_KEY)
        .await
        .expect("open the loaded postgres database");
    Some((db, url))
}

/// The transactions PostgreSQL has counted in the database of `url` (`pg_stat_database`,
/// committed and rolled back; it counts its own reading too), or `None` for SQLite.
pub async fn transactions(url: &DatabaseUrl) -> Option<i64> {
    let DatabaseUrl::Postgres(url) = url else {
        return None;
    };
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = AsyncPgConnection::establish(url).await.ok()?;
    // Statistics reach the view within a second of a transaction's end (or the server's next
    // flush of an idle backend's): the window measured is long beside that.
    let counted: Count = diesel::sql_query(
        "SELECT (xact_commit + xact_rollback)::bigint AS n FROM pg_stat_database \
         WHERE datname = current_database()",
    )
    .get_result(&mut conn)
    .await
    .ok()?;
    Some(counted.n)
}

/// Creates an empty database and returns its URL, without migrating it.
pub async fn postgres_database() -> Option<DatabaseUrl> {
    let admin = postgres_admin_url();
    let mut conn = match AsyncPgConnection::establish(&admin).await {
        Ok(c) => c,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true but PostgreSQL at CAPSTAN_TEST_POSTGRES_URL is unreachable: {e}");
            }
            eprintln!("skipping PostgreSQL half: cannot connect to {admin}: {e}");
            return None;
        }
    };
    let name = format!("capstan_test_{}", uuid::Uuid::new_v4().simple());
    diesel::sql_query(format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
    Some(DatabaseUrl::Postgres(format!("{base}/{name}")))
}

#[derive(diesel::QueryableByName)]
struct RawText {
    #[diesel(sql_type = diesel::sql_types::Nullable<diesel::sql_types::Text>)]
    value: Option<String>,
}

/// The text of one column of every row, as stored: lets tests check what is at rest.
/// `table` and `column` are the tests' own constants.
pub async fn raw_column(db: &Db, table: &'static str, column: &'static str) -> Vec<Option<String>> {
    use crate::db::db_run;
    db.read(move |mut conn| async move {
        let query = format!("SELECT {column} AS value FROM {table}");
        let rows: Vec<RawText> = db_run!(conn, |c| diesel::sql_query(query.clone()).load(c).await)
            .map_err(crate::db::store_error)?;
        Ok(rows.into_iter().map(|r| r.value).collect())
    })
    .await
    .expect("read raw column")
}

#[derive(diesel::QueryableByName)]
struct ColumnName {
    #[diesel(sql_type = diesel::sql_types::Text)]
    table_name: String,
    #[diesel(sql_type = diesel::sql_types::Text)]
    column_name: String,
}

/// Every (table, column) of the database, as its backend describes it, sorted.
pub async fn schema_columns(db: &Db) -> Vec<(String, String)> {
    use crate::db::store_error;
    let query = match db.backend {
        crate::db::Backend::Postgres(_) => {
            "SELECT table_name::text AS table_name, column_name::text AS column_name \
             FROM information_schema.columns WHERE table_schema = 'public'"
        }
        crate::db::Backend::Sqlite { .. } => {
            "SELECT m.name AS table_name, p.name AS column_name \
             FROM sqlite_master m JOIN pragma_table_info(m.name) p \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
        }
    };
    let mut rows: Vec<(String, String)> = db
        .read(move |mut conn| async move {
            let rows: Vec<ColumnName> =
                crate::db::db_run!(conn, |c| diesel::sql_query(query).load(c).await)
                    .map_err(store_error)?;
            Ok(rows
                .into_iter()
                .map(|r| (r.table_name, r.column_name))
                .collect())
        })
        .await
        .expect("read the schema");
    rows.sort();
    rows
}

/// fsyncs of a SQLite file's log begun and completed so far by the group commit; `None` on
/// PostgreSQL and in memory.
pub async fn log_syncs(db: &Db) -> Option<(u64, u64)> {
    match db.group_commit() {
        Some(group) => Some(group.syncs().await),
        None => None,
    }
}

/// Whether `db` would answer the token of `hash` from memory.
pub fn token_remembered(db: &Db, hash: &str) -> bool {
    db.tokens
        .as_ref()
        .is_some_and(|cache| cache.get(hash).0.is_some())
}
