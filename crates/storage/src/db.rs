//! The connection layer: one `Db` over either backend, and the macros that run one query body
//! on whichever connection is at hand (the query is written once, compiled for both backends).

use crate::cipher::Cipher;
use crate::group_commit::GroupCommit;
use crate::pg_pools::PgPools;
use crate::token_cache::TokenCache;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::SqliteConnection;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::sync_connection_wrapper::{SpawnBlocking, SyncConnectionWrapper};
use diesel_async::{AsyncPgConnection, SimpleAsyncConnection};
use domain::error::StoreError;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub type SqliteConn = SyncConnectionWrapper<SqliteConnection, Inline>;

/// Runs SQLite's blocking calls on the calling thread. A SQLite statement takes microseconds,
/// far less than handing it to a blocking pool and waking the caller again; writers wait for
/// the one writer connection asynchronously, never inside SQLite, so no thread blocks on
/// another.
pub struct Inline;

impl SpawnBlocking for Inline {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, Result<R, Box<dyn std::error::Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        Box::pin(std::future::ready(Ok(task())))
    }

    fn get_runtime() -> Self {
        Inline
    }
}

/// Where the data lives, parsed from `CAPSTAN_DATABASE_URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A SQLite file (created on first start), or `:memory:`.
    Sqlite(String),
    Postgres(String),
}

impl DatabaseUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw == "sqlite::memory:" || raw == "sqlite://:memory:" {
            return Ok(Self::Sqlite(":memory:".into()));
        }
        if let Some(path) = raw
            .strip_prefix("sqlite://")
            .or_else(|| raw.strip_prefix("sqlite:"))
        {
            if path.is_empty() {
                return Err("a sqlite URL needs a path, like sqlite://capstan.db".into());
            }
            return Ok(Self::Sqlite(path.into()));
        }
        if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            return Ok(Self::Postgres(raw.into()));
        }
        Err("must be sqlite://PATH, sqlite::memory: or postgres://...".into())
    }

    pub fn is_sqlite_memory(&self) -> bool {
        matches!(self, Self::Sqlite(p) if p == ":memory:")
    }
}

#[derive(Clone)]
pub(crate) enum Backend {
    Postgres(PgPools),
    /// SQLite allows one writer at a time; writers queue for the one connection of `writer`
    /// in this process instead of failing with SQLITE_BUSY, while readers go on in parallel
    /// (WAL) on `pool`. Always writing through the same connection keeps its page cache: a
    /// connection that sees another's commit drops its cache (and its memory map) at its next
    /// transaction. In memory, `writer` is `pool` (each connection would be its own database).
    Sqlite {
        pool: Pool<SqliteConn>,
        writer: Pool<SqliteConn>,
        /// Makes commits durable once the writer is given back (a file, not `:memory:`).
        group_commit: Option<Arc<GroupCommit>>,
    },
}

/// A checked-out connection (for SQLite writes, the writer).
// Lives for one query on the stack of one task; boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Conn {
    Pg(Object<AsyncPgConnection>),
    Sqlite(Object<SqliteConn>),
}

/// Runs `$body` with `$c` bound to the concrete connection of either backend.
macro_rules! db_run {
    ($conn:expr, |$c:ident| $body:expr) => {
        match &mut $conn {
            $crate::db::Conn::Pg(obj) => {
                let $c: &mut diesel_async::AsyncPgConnection = &mut *obj;
                $body
            }
            $crate::db::Conn::Sqlite(obj) => {
                let $c: &mut $crate::db::SqliteConn = &mut *obj;
                $body
            }
        }
    };
}
pub(crate) use db_run;

/// Loads `$query` with `$f` bound to `$column` in `$ids`, on either backend (through
/// [`LoadRows`]), as a statement each backend keeps prepared whatever the number of ids: one id as `=`; several as
/// PostgreSQL's `= ANY($1)`, and on SQLite as one JSON array read by `json_each` (an `IN (?, ?,
/// ...)` list is parsed anew on every execution: a tenth of a page's time).
macro_rules! load_by_ids {
    ($conn:expr, $ids:expr, $column:expr, |$f:ident| $query:expr) => {
        match (&mut $conn, $ids) {
            (conn, [one]) => {
                let $f = $column.eq(*one);
                $crate::db::db_run!(*conn, |c| $crate::db::LoadRows::load_rows(c, $query).await)
            }
            ($crate::db::Conn::Pg(obj), many) => {
                let c: &mut diesel_async::AsyncPgConnection = &mut *obj;
                let $f = $column.eq_any(many);
                $query.load(c).await
            }
            ($crate::db::Conn::Sqlite(obj), many) => {
                let c: &mut $crate::db::SqliteConn = &mut *obj;
                let $f = $crate::in_list::in_json_list($column, many);
                $crate::db::LoadRows::load_rows(c, $query).await
            }
        }
    };
}
pub(crate) use load_by_ids;

/// Runs `$body` in a transaction on either backend; any error rolls it back.
macro_rules! db_transaction {
    ($conn:expr, |$c:ident| $body:expr) => {
        match &mut $conn {
            $crate::db::Conn::Pg(obj) => {
                let conn: &mut diesel_async::AsyncPgConnection = &mut *obj;
                diesel_async::AsyncConnection::transaction(conn, async |$c| $body).await
            }
            $crate::db::Conn::Sqlite(obj) => {
                let conn: &mut $crate::db::SqliteConn = &mut *obj;
                diesel_async::AsyncConnection::transaction(conn, async |$c| $body).await
            }
        }
    };
}
pub(crate) use db_transaction;

/// As `db_transaction!`, for units that read before they write while another process may
/// write the same SQLite file (a command beside a serving server): SQLite's transaction takes
/// the write lock at its start (`BEGIN IMMEDIATE`), waiting for it (busy_timeout), where a
/// deferred one would fail at its first write if another process had written since its read.
macro_rules! db_write_transaction {
    ($conn:expr, |$c:ident| $body:expr) => {
        match &mut $conn {
            $crate::db::Conn::Pg(obj) => {
                let conn: &mut diesel_async::AsyncPgConnection = &mut *obj;
                diesel_async::AsyncConnection::transaction(conn, async |$c| $body).await
            }
            $crate::db::Conn::Sqlite(obj) => {
                $crate::db::immediate_transaction(&mut *obj, async |$c| $body).await
            }
        }
    };
}
pub(crate) use db_write_transaction;

/// `$body` in a SQLite `BEGIN IMMEDIATE` transaction, begun and ended through the connection's
/// transaction manager, so a unit dropped half way leaves a connection the pool knows to be
/// inside a transaction (and closes), never one handed on with it open.
pub(crate) async fn immediate_transaction<T, E>(
    c: &mut SqliteConn,
    body: impl AsyncFnOnce(&mut SqliteConn) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<DieselError>,
{
    type Manager = <SqliteConn as diesel_async::AsyncConnection>::TransactionManager;
    c.spawn_blocking(|inner| {
        diesel::connection::AnsiTransactionManager::begin_transaction_sql(inner, "BEGIN IMMEDIATE")
    })
    .await?;
    match body(c).await {
        Ok(value) => {
            <Manager as diesel_async::TransactionManager<SqliteConn>>::commit_transaction(c)
                .await?;
            Ok(value)
        }
        Err(e) => {
            let _ =
                <Manager as diesel_async::TransactionManager<SqliteConn>>::rollback_transaction(c)
                    .await;
            Err(e)
        }
    }
}

/// One page of `$row`s of `$table` that `$filtered()` selects, in creation order, with the total
/// count: the body of every list, written once. One row more than the page is asked for: when
/// it does not come, this page is the last and the total is known without counting (most lists
/// fit in their first page).
macro_rules! page_rows {
    ($c:ident, $page:expr, $table:ident, $row:ty, $filtered:ident) => {{
        let (limit, offset) = ($page.limit(), $page.offset());
        let mut rows: Vec<$row> = $crate::db::LoadRows::load_rows(
            $c,
            $filtered()
                .order(($table::created_at.asc(), $table::id.asc()))
                .limit(limit.saturating_add(1))
                .offset(offset)
                .select(<$row>::as_select()),
        )
        .await
        .map_err($crate::db::store_error)?;
        let fetched = i64::try_from(rows.len()).unwrap_or(i64::MAX);
        // Past the end (nothing from a later page), the rows before it are not known.
        let total: i64 = if fetched <= limit && (fetched > 0 || offset == 0) {
            offset + fetched
        } else {
            rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            $filtered()
                .count()
                .get_result($c)
                .await
                .map_err($crate::db::store_error)?
        };
        Ok::<_, domain::error::StoreError>((rows, total))
    }};
}
pub(crate) use page_rows;

/// Loads the rows a query selects. SQLite decodes them straight from the statement, on the
/// caller's thread like every SQLite call here, and finds the statement prepared by the query's
/// type. diesel-async's own `load` would first copy every value of every row (an eighth of a
/// 50-row list's time) and write the query's SQL out again on every run to find its statement
/// by that text (a sixth of a status read's time).
pub(crate) trait LoadRows<Q, U> {
    fn load_rows(&mut self, query: Q) -> BoxFuture<'_, diesel::QueryResult<Vec<U>>>;
}

impl<Q, U> LoadRows<Q, U> for SqliteConn
where
    Q: diesel::query_dsl::LoadQuery<'static, SqliteConnection, U> + Send + 'static,
    U: Send + 'static,
{
    fn load_rows(&mut self, query: Q) -> BoxFuture<'_, diesel::QueryResult<Vec<U>>> {
        self.spawn_blocking(move |c| diesel::RunQueryDsl::load(query, c))
    }
}

impl<Q, U> LoadRows<Q, U> for AsyncPgConnection
where
    Q: diesel_async::methods::LoadQuery<'static, AsyncPgConnection, U> + Send + 'static,
    U: Send + 'static,
{
    fn load_rows(&mut self, query: Q) -> BoxFuture<'_, diesel::QueryResult<Vec<U>>> {
        Box::pin(diesel_async::RunQueryDsl::load(query, self))
    }
}

/// The rows of a left join from one row: that row, and the joined values of every row (none
/// when the only row joined nothing). `None` when there is no row.
pub(crate) fn left_joined<R, J>(rows: Vec<(R, Option<J>)>) -> Option<(R, Vec<J>)> {
    let mut rows = rows.into_iter();
    let (row, first) = rows.next()?;
    let joined = first
        .into_iter()
        .chain(rows.filter_map(|(_, j)| j))
        .collect();
    Some((row, joined))
}

/// Decodes a page of rows into records.
pub(crate) fn into_page<T: crate::rows::FromRow>(
    rows: Vec<T::Row>,
    total: i64,
    page: domain::pagination::PageRequest,
    cipher: &Cipher,
) -> Result<domain::pagination::Page<T>, StoreError> {
    Ok(domain::pagination::Page {
        items: rows
            .into_iter()
            .map(|r| T::from_row(r, cipher))
            .collect::<Result<_, _>>()?,
        request: page,
        total_count: total.max(0) as u64,
    })
}

/// The store: a pool over one of the two backends.
///
/// Queries run on the task that asks for them: SQLite's inline, PostgreSQL's on the
/// connection's own I/O. A caller may drop its future at any point; an unfinished unit of work
/// is then rolled back ([`Session`]'s drop), never half applied.
#[derive(Clone)]
pub struct Db {
    pub(crate) backend: Backend,
    pub(crate) cipher: Arc<Cipher>,
    /// Tokens already found, on an embedded store only (see `token_cache`).
    pub(crate) tokens: Option<Arc<TokenCache>>,
    /// Where a SQLite store keeps its snapshots (PostgreSQL keeps them in the database).
    pub(crate) snapshot_dir: Option<Arc<crate::snapshot_dir::SnapshotDir>>,
    /// Rung by committed units (and, on PostgreSQL, by the other instances' notifications).
    pub(crate) changes: Arc<domain::changes::Changes>,
    /// How many times a connection was lent (a unit of work, a claim, a query of its own): the
    /// load this process puts on the database, which an idle server keeps near zero.
    pub(crate) lent: Arc<AtomicU64>,
    /// Drives the I/O of the PostgreSQL connections that tasks of multi-threaded runtimes share
    /// (`pg_pools`), and the rollbacks of dropped units.
    _drivers: Option<Arc<Drivers>>,
}

/// The runtime of the PostgreSQL connection tasks, shut down with the last clone of the store.
struct Drivers(Option<tokio::runtime::Runtime>);

impl Drop for Drivers {
    fn drop(&mut self) {
        // May run inside async code (the end of a test); this form of shutdown is allowed there.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

// busy_timeout comes first: switching to WAL takes a lock that connections opened at the same
// moment (workers and requests at start-up) must wait for rather than fail on. NORMAL leaves
// the log's fsync to the group commit, which every write waits for before it returns
// (`group_commit`): durable when acknowledged, power loss included. Reads go through a memory
// map rather than a read call per page.
const SQLITE_PRAGMAS: &str =
    "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; \
     PRAGMA mmap_size = 268435456;";

impl Db {
    /// Opens a pool (creating a SQLite file if needed). Migrations are applied separately.
    pub async fn connect(
        url: &DatabaseUrl,
        max_connections: usize,
        secret_key: &[u8; 32],
    ) -> Result<Self, StoreError> {
        let mut drivers = None;
        let backend = match url {
            DatabaseUrl::Postgres(u) => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("capstan-pg-io")
                    .enable_all()
                    .build()
                    .map_err(|e| {
                        StoreError::Other(format!("cannot start the store runtime: {e}"))
                    })?;
                let handle = runtime.handle().clone();
                drivers = Some(Arc::new(Drivers(Some(runtime))));
                Backend::Postgres(PgPools::new(u, max_connections, handle)?)
            }
            DatabaseUrl::Sqlite(path) => {
                let memory = url.is_sqlite_memory();
                let pool = |size: usize| {
                    let mut config = ManagerConfig::<SqliteConn>::default();
                    config.recycling_method = RecyclingMethod::Fast;
                    config.custom_setup = Box::new(sqlite_setup(memory));
                    let manager = AsyncDieselConnectionManager::<SqliteConn>::new_with_config(
                        path.clone(),
                        config,
                    );
                    Pool::builder(manager)
                        .max_size(size)
                        .wait_timeout(Some(Duration::from_secs(30)))
                        .runtime(deadpool_runtime())
                        .build()
                        .map_err(|e| StoreError::Unavailable(e.to_string()))
                };
                if memory {
                    let pool = pool(1)?;
                    Backend::Sqlite {
                        writer: pool.clone(),
                        pool,
                        group_commit: None,
                    }
                } else {
                    Backend::Sqlite {
                        pool: pool(max_connections.max(1))?,
                        writer: pool(1)?,
                        group_commit: Some(Arc::new(GroupCommit::new(path))),
                    }
                }
            }
        };
        // Only the one server on a SQLite file sees every deletion (see `token_cache`).
        let tokens = drivers.is_none().then(Arc::default);
        let snapshot_dir = match url {
            DatabaseUrl::Sqlite(path) => Some(Arc::new(
                crate::snapshot_dir::SnapshotDir::for_sqlite(path, url.is_sqlite_memory()),
            )),
            DatabaseUrl::Postgres(_) => None,
        };
        let changes = Arc::new(domain::changes::Changes::default());
        if let (DatabaseUrl::Postgres(u), Some(d)) = (url, &drivers) {
            if let Some(rt) = &d.0 {
                rt.spawn(crate::listener::listen(u.clone(), Arc::downgrade(&changes)));
            }
        }
        Ok(Self {
            backend,
            cipher: Arc::new(Cipher::new(secret_key)),
            tokens,
            snapshot_dir,
            changes,
            lent: Arc::default(),
            _drivers: drivers,
        })
    }

    /// Seals and opens secrets with `cipher` (a keyring) instead of the key it was opened
    /// with.
    pub fn with_cipher(mut self, cipher: Cipher) -> Self {
        self.cipher = Arc::new(cipher);
        self
    }

    /// Where a PostgreSQL connection's leftover work (a rollback after a dropped unit) runs.
    pub(crate) fn drivers(&self) -> Option<tokio::runtime::Handle> {
        self._drivers
            .as_ref()
            .and_then(|d| d.0.as_ref().map(|rt| rt.handle().clone()))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Runs `f` with a read connection.
    pub(crate) async fn read<R, F, Fut>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<R, StoreError>>,
    {
        f(self.read_conn().await?).await
    }

    /// Runs `f` with a write connection (on SQLite, holding the writer lock); what it committed
    /// is on disk when this returns.
    pub(crate) async fn write<R, F, Fut>(&self, f: F) -> Result<R, StoreError>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: std::future::Future<Output = Result<R, StoreError>>,
    {
        let done = f(self.write_conn().await?).await;
        if let Some(group) = self.group_commit() {
            group.durable().await?;
        }
        done
    }

    /// SQLite's shared log sync, when the data is in a file.
    pub(crate) fn group_commit(&self) -> Option<&Arc<GroupCommit>> {
        match &self.backend {
            Backend::Sqlite { group_commit, .. } => group_commit.as_ref(),
            Backend::Postgres(_) => None,
        }
    }

    pub(crate) async fn read_conn(&self) -> Result<Conn, StoreError> {
        self.lent.fetch_add(1, Ordering::Relaxed);
        match &self.backend {
            Backend::Postgres(pools) => Ok(Conn::Pg(pools.get()?.get().await.map_err(pool_error)?)),
            Backend::Sqlite { pool, .. } => Ok(Conn::Sqlite(pool.get().await.map_err(pool_error)?)),
        }
    }

    pub(crate) async fn write_conn(&self) -> Result<Conn, StoreError> {
        self.lent.fetch_add(1, Ordering::Relaxed);
        match &self.backend {
            Backend::Postgres(pools) => Ok(Conn::Pg(pools.get()?.get().await.map_err(pool_error)?)),
            Backend::Sqlite { writer, .. } => {
                Ok(Conn::Sqlite(writer.get().await.map_err(pool_error)?))
            }
        }
    }
}

fn sqlite_setup(
    memory: bool,
) -> impl Fn(&str) -> BoxFuture<'_, diesel::ConnectionResult<SqliteConn>> + Send + Sync {
    move |path: &str| {
        let path = path.to_string();
        async move {
            let mut conn = <SqliteConn as diesel_async::AsyncConnection>::establish(&path).await?;
            let pragmas = if memory {
                SQLITE_PRAGMAS.to_string()
            } else {
                format!("{SQLITE_PRAGMAS} PRAGMA journal_mode = WAL;")
            };
            conn.batch_execute(&pragmas)
                .await
                .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
            Ok(conn)
        }
        .boxed()
    }
}

fn deadpool_runtime() -> deadpool::Runtime {
    deadpool::Runtime::Tokio1
}

fn pool_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("no database connection: {e}"))
}

/// The one translation of database errors into the port's error contract.
pub(crate) fn store_error(e: DieselError) -> StoreError {
    match e {
        DieselError::NotFound => StoreError::NotFound,
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => StoreError::Duplicate,
        DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => StoreError::InUse,
        DieselError::DatabaseError(DatabaseErrorKind::ClosedConnection, info) => {
            StoreError::Unavailable(info.message().to_string())
        }
        // SQLite on a full filesystem: nothing of the unit was kept, and writes can be asked
        // again once the operator frees space (503).
        DieselError::DatabaseError(_, info) if info.message().contains("disk is full") => {
            StoreError::Full(info.message().to_string())
        }
        DieselError::DatabaseError(_, info) if info.message().contains("database is locked") => {
            StoreError::Unavailable(info.message().to_string())
        }
        // The unit lost a race it could not wait out; the client may retry (503).
        DieselError::DatabaseError(DatabaseErrorKind::SerializationFailure, info) => {
            StoreError::Unavailable(info.message().to_string())
        }
        DieselError::DatabaseError(_, info) if info.message().contains("deadlock detected") => {
            StoreError::Unavailable(info.message().to_string())
        }
        // Diesel's message names the field only; what the stored text was is in its causes.
        DieselError::DeserializationError(e) => StoreError::Other(with_causes(&*e)),
        other => StoreError::Other(other.to_string()),
    }
}

/// An error's message followed by its causes'.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}
