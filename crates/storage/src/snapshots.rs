//! Named snapshots of the whole state.
//!
//! SQLite: `VACUUM INTO` a file of the snapshots folder (beside the database; a temporary one
//! for `:memory:`): one read transaction, so the copy is consistent while writers go on.
//! PostgreSQL: a schema per snapshot (`capstan_snapshot_<name>`) in the same database, every
//! table copied into it by one REPEATABLE READ transaction, so every instance sharing the
//! database sees the same snapshots. Either way a restore empties the live tables and copies
//! the snapshot's rows back in one transaction, after checking the snapshot was saved under
//! the same migrations; and each snapshot holds a `capstan_snapshot` row saying what it is.

use crate::db::{db_run, db_transaction, db_write_transaction, store_error, Conn, Db};
use crate::maintenance::TABLES;
use crate::snapshot_dir::SnapshotDir;
use crate::token_cache::ForgetOnDrop;
use diesel::sql_types::{BigInt, Text};
use diesel::{Connection, QueryableByName};
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use domain::error::{StoreError, StoreResult};
use domain::model::{Snapshot, SnapshotName};
use std::path::Path;
use time::OffsetDateTime;

const MIGRATIONS: &str = "__diesel_schema_migrations";

#[derive(QueryableByName)]
struct Meta {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    created_at: String,
    #[diesel(sql_type = BigInt)]
    rows: i64,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[derive(QueryableByName)]
struct SchemaName {
    #[diesel(sql_type = Text)]
    name: String,
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Other(format!("snapshot file: {e}"))
}

fn quoted_path(path: &Path) -> String {
    path.to_string_lossy().replace('\'', "''")
}

/// A SQLite URI opening `path` read-only: a snapshot deleted meanwhile is an error, never an
/// empty file created in its place (which would then answer for the name).
fn read_only(path: &Path) -> String {
    let escaped = path
        .to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    format!("file:{escaped}?mode=ro")
}

fn schema(name: &SnapshotName) -> String {
    format!("\"capstan_snapshot_{name}\"")
}

/// Every table's rows, counted in `prefix` (`snap.`, a schema) — the snapshot's own note.
fn count_rows(prefix: &str) -> String {
    let parts: Vec<String> = TABLES
        .iter()
        .map(|t| format!("(SELECT COUNT(*) FROM {prefix}{t})"))
        .collect();
    format!("SELECT CAST({} AS BIGINT) AS n", parts.join(" + "))
}

/// The note a snapshot keeps of itself, written inside it.
fn note(prefix: &str, name: &SnapshotName, now: OffsetDateTime, rows: i64) -> StoreResult<String> {
    let at = now
        .format(&time::format_description::well_known::Rfc3339)
        .map_err(|e| StoreError::Other(e.to_string()))?;
    Ok(format!(
        "CREATE TABLE {prefix}capstan_snapshot (name TEXT NOT NULL, created_at TEXT NOT NULL, \
         rows BIGINT NOT NULL); \
         INSERT INTO {prefix}capstan_snapshot VALUES ('{name}', '{at}', {rows});"
    ))
}

fn snapshot(meta: Meta) -> StoreResult<Snapshot> {
    Ok(Snapshot {
        name: SnapshotName::parse("name", &meta.name)
            .map_err(|e| StoreError::Other(e.to_string()))?,
        created_at: OffsetDateTime::parse(
            &meta.created_at,
            &time::format_description::well_known::Rfc3339,
        )
        .map_err(|e| StoreError::Other(e.to_string()))?,
        rows: meta.rows.max(0) as u64,
    })
}

/// Empties the live tables and copies `from`'s rows (`snap.`, a schema) back, children last.
fn copy_back(from: &str, postgres: bool) -> String {
    let mut sql = if postgres {
        format!(
            "{}; TRUNCATE {};",
            crate::pg_names::EVENT_LOG_LOCK,
            TABLES.join(", ")
        )
    } else {
        // Rows of a table that refer to each other (variables) are checked at commit.
        let mut s = String::from("PRAGMA defer_foreign_keys = ON;");
        for t in TABLES.iter().rev() {
            s.push_str(&format!("DELETE FROM main.{t};"));
        }
        s
    };
    for t in TABLES {
        sql.push_str(&format!("INSERT INTO {t} SELECT * FROM {from}{t};"));
    }
    sql
}

/// Whether `prefix`'s migrations are the live ones (so its tables have the live columns).
fn same_migrations(prefix: &str) -> String {
    let missing = |from: &str, to: &str| {
        format!(
            "(SELECT COUNT(*) FROM (SELECT version FROM {from}{MIGRATIONS} \
             EXCEPT SELECT version FROM {to}{MIGRATIONS}) d)"
        )
    };
    format!(
        "SELECT CAST({} + {} AS BIGINT) AS n",
        missing(prefix, ""),
        missing("", prefix)
    )
}

fn other_schema() -> StoreError {
    StoreError::Refused(
        "the snapshot was saved by a Capstan with other migrations: restore it with that \
         version"
            .into(),
    )
}

impl Db {
    fn snapshot_dir(&self) -> StoreResult<&SnapshotDir> {
        self.snapshot_dir
            .as_deref()
            .ok_or_else(|| StoreError::Other("this store keeps no snapshot folder".into()))
    }

    pub(crate) async fn save_snapshot_now(
        &self,
        name: &SnapshotName,
        now: OffsetDateTime,
    ) -> StoreResult<Snapshot> {
        if self.is_postgres() {
            self.save_in_schema(name, now).await
        } else {
            self.save_in_file(name, now).await
        }
    }

    async fn save_in_file(
        &self,
        name: &SnapshotName,
        now: OffsetDateTime,
    ) -> StoreResult<Snapshot> {
        let dir = self.snapshot_dir()?;
        let file = dir.file(name);
        if file.exists() {
            return Err(StoreError::Duplicate);
        }
        std::fs::create_dir_all(dir.path()).map_err(io)?;
        let partial = dir.path().join(format!(".{name}.partial"));
        self.vacuum_into(&partial).await?;
        // The copy is a database of its own: its note is written there, then it takes its name.
        let noted = (|| {
            let mut c = diesel::SqliteConnection::establish(&partial.to_string_lossy())
                .map_err(|e| StoreError::Other(e.to_string()))?;
            let counted: Count =
                diesel::RunQueryDsl::get_result(diesel::sql_query(count_rows("")), &mut c)
                    .map_err(store_error)?;
            diesel::connection::SimpleConnection::batch_execute(
                &mut c,
                &note("", name, now, counted.n)?,
            )
            .map_err(store_error)?;
            Ok::<_, StoreError>(counted.n)
        })();
        let rows = match noted {
            Ok(rows) => rows,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        if file.exists() {
            let _ = std::fs::remove_file(&partial);
            return Err(StoreError::Duplicate);
        }
        std::fs::rename(&partial, &file).map_err(io)?;
        Ok(Snapshot {
            name: name.clone(),
            created_at: now,
            rows: rows.max(0) as u64,
        })
    }

    async fn save_in_schema(
        &self,
        name: &SnapshotName,
        now: OffsetDateTime,
    ) -> StoreResult<Snapshot> {
        let schema = schema(name);
        let mut copy = format!("CREATE SCHEMA {schema};");
        for t in TABLES.iter().chain([&MIGRATIONS]) {
            copy.push_str(&format!("CREATE TABLE {schema}.{t} AS SELECT * FROM {t};"));
        }
        let prefix = format!("{schema}.");
        let counting = count_rows(&prefix);
        let saved = name.clone();
        let name = name.clone();
        let rows = self
            .write(|mut conn| async move {
                let Conn::Pg(c) = &mut conn else {
                    return Err(StoreError::Other("not PostgreSQL".into()));
                };
                let c: &mut diesel_async::AsyncPgConnection = c;
                c.build_transaction()
                    .repeatable_read()
                    .run(async |c| {
                        c.batch_execute(&copy).await?;
                        let counted: Count = diesel::sql_query(&counting).get_result(c).await?;
                        let noted = note(&prefix, &name, now, counted.n)
                            .map_err(|e| diesel::result::Error::QueryBuilderError(e.into()))?;
                        c.batch_execute(&noted).await?;
                        Ok::<_, diesel::result::Error>(counted.n)
                    })
                    .await
                    .map_err(|e| match e {
                        // Saved at the same moment by another instance.
                        diesel::result::Error::DatabaseError(_, info)
                            if info.message().contains("already exists") =>
                        {
                            StoreError::Duplicate
                        }
                        other => store_error(other),
                    })
            })
            .await?;
        Ok(Snapshot {
            name: saved,
            created_at: now,
            rows: rows.max(0) as u64,
        })
    }

    pub(crate) async fn restore(&self, name: &SnapshotName) -> StoreResult<()> {
        // The restored tokens replace today's: none is answered from memory.
        let _forget = ForgetOnDrop(self.tokens.as_deref());
        if self.is_postgres() {
            let schema = schema(name);
            let exists = self.schema_exists(name).await?;
            if !exists {
                return Err(StoreError::NotFound);
            }
            let prefix = format!("{schema}.");
            let check = same_migrations(&prefix);
            let copy = copy_back(&prefix, true);
            self.retried(|| {
                let (check, copy) = (check.clone(), copy.clone());
                self.write(|mut conn| async move {
                    db_transaction!(conn, |c| {
                        let differing: Count = diesel::sql_query(&check).get_result(c).await?;
                        if differing.n != 0 {
                            return Ok(false);
                        }
                        c.batch_execute(&copy).await?;
                        Ok::<_, diesel::result::Error>(true)
                    })
                    .map_err(store_error)?
                    .then_some(())
                    .ok_or_else(other_schema)
                })
            })
            .await?;
        } else {
            self.copy_from_file(&self.snapshot_dir()?.file(name))
                .await?;
        }
        Ok(())
    }

    /// SQLite: a consistent copy of the database in a new file at `path` (replaced if there),
    /// made while others go on reading and writing.
    async fn vacuum_into(&self, path: &Path) -> StoreResult<()> {
        let _ = std::fs::remove_file(path);
        let vacuum = format!("VACUUM INTO '{}'", quoted_path(path));
        self.read(|mut conn| async move {
            db_run!(conn, |c| c.batch_execute(&vacuum).await).map_err(store_error)
        })
        .await
    }

    /// SQLite: replaces every row with those of the database file at `path`, in one
    /// transaction, once its migrations are found to be the live ones.
    async fn copy_from_file(&self, path: &Path) -> StoreResult<()> {
        if !path.is_file() {
            return Err(StoreError::NotFound);
        }
        let attach = format!(
            "ATTACH DATABASE '{}' AS snap",
            read_only(path).replace('\'', "''")
        );
        let check = same_migrations("snap.");
        let copy = copy_back("snap.", false);
        self.write(|mut conn| async move {
            // A restore dropped half way may have left its file attached to the writer.
            let _ = db_run!(conn, |c| c.batch_execute("DETACH DATABASE snap").await);
            db_run!(conn, |c| c.batch_execute(&attach).await).map_err(store_error)?;
            let copied = db_write_transaction!(conn, |c| {
                let differing: Count = diesel::sql_query(&check).get_result(c).await?;
                if differing.n != 0 {
                    return Ok(false);
                }
                c.batch_execute(&copy).await?;
                Ok::<_, diesel::result::Error>(true)
            });
            // Detached whatever happened: the writer goes back to the pool clean.
            let detached = db_run!(conn, |c| c.batch_execute("DETACH DATABASE snap").await);
            let copied = copied.map_err(store_error)?;
            detached.map_err(store_error)?;
            copied.then_some(()).ok_or_else(other_schema)
        })
        .await
    }

    /// Writes a consistent copy of the whole database to the file `to` (SQLite; PostgreSQL's
    /// is `pg_dump`'s work), while the database goes on serving.
    pub async fn backup(&self, to: &Path) -> StoreResult<()> {
        if self.is_postgres() {
            return Err(StoreError::Refused(
                "a PostgreSQL database is backed up with pg_dump (see docs/operations.md)".into(),
            ));
        }
        let partial = to.with_extension("partial");
        self.vacuum_into(&partial).await?;
        std::fs::rename(&partial, to).map_err(io)
    }

    /// Replaces the whole state with a backup's, in one transaction (SQLite; PostgreSQL's is
    /// `pg_restore`'s work). A server on the same file sees the restored state at once.
    pub async fn restore_backup(&self, from: &Path) -> StoreResult<()> {
        if self.is_postgres() {
            return Err(StoreError::Refused(
                "a PostgreSQL database is restored with pg_restore (see docs/operations.md)".into(),
            ));
        }
        let _forget = ForgetOnDrop(self.tokens.as_deref());
        self.copy_from_file(from).await
    }

    async fn schema_exists(&self, name: &SnapshotName) -> StoreResult<bool> {
        let wanted = format!("capstan_snapshot_{name}");
        Ok(self
            .snapshot_schemas()
            .await?
            .into_iter()
            .any(|s| s == wanted))
    }

    async fn snapshot_schemas(&self) -> StoreResult<Vec<String>> {
        self.read(|mut conn| async move {
            let rows: Vec<SchemaName> = db_run!(conn, |c| diesel::sql_query(
                "SELECT schema_name::text AS name FROM information_schema.schemata \
                 WHERE schema_name LIKE 'capstan\\_snapshot\\_%'"
            )
            .load(c)
            .await)
            .map_err(store_error)?;
            Ok(rows.into_iter().map(|r| r.name).collect())
        })
        .await
    }

    pub(crate) async fn list_snapshots(&self) -> StoreResult<Vec<Snapshot>> {
        let mut found = Vec::new();
        if self.is_postgres() {
            for schema in self.snapshot_schemas().await? {
                let query =
                    format!("SELECT name, created_at, rows FROM \"{schema}\".capstan_snapshot");
                let meta: Option<Meta> = self
                    .read(|mut conn| async move {
                        db_run!(conn, |c| diesel::sql_query(query).get_result(c).await)
                            .map(Some)
                            .or_else(|e| match e {
                                // Dropped since it was listed.
                                diesel::result::Error::DatabaseError(..) => Ok(None),
                                other => Err(store_error(other)),
                            })
                    })
                    .await?;
                if let Some(meta) = meta {
                    found.push(snapshot(meta)?);
                }
            }
        } else {
            let dir = self.snapshot_dir()?;
            let entries = match std::fs::read_dir(dir.path()) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
                Err(e) => return Err(io(e)),
            };
            for entry in entries {
                let path = entry.map_err(io)?.path();
                if path.extension().is_none_or(|e| e != "db") {
                    continue;
                }
                // Deleted since it was listed, or not a snapshot: not listed.
                let Ok(mut c) = diesel::SqliteConnection::establish(&read_only(&path)) else {
                    continue;
                };
                let meta: Result<Meta, _> = diesel::RunQueryDsl::get_result(
                    diesel::sql_query("SELECT name, created_at, rows FROM capstan_snapshot"),
                    &mut c,
                );
                if let Ok(meta) = meta {
                    found.push(snapshot(meta)?);
                }
            }
        }
        found.sort_by(|a, b| (a.created_at, &a.name).cmp(&(b.created_at, &b.name)));
        Ok(found)
    }

    pub(crate) async fn drop_snapshot(&self, name: &SnapshotName) -> StoreResult<()> {
        if self.is_postgres() {
            if !self.schema_exists(name).await? {
                return Err(StoreError::NotFound);
            }
            let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema(name));
            self.write(|mut conn| async move {
                db_run!(conn, |c| c.batch_execute(&drop).await).map_err(store_error)
            })
            .await
        } else {
            match std::fs::remove_file(self.snapshot_dir()?.file(name)) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::NotFound),
                Err(e) => Err(io(e)),
            }
        }
    }
}
