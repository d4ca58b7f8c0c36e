//! The unit of work: one checked-out connection, in a transaction for writes and snapshots,
//! through which a use case runs every query it needs ([`domain::ports::Tx`]).

use crate::cipher::Cipher;
use crate::db::{store_error, Conn, Db, SqliteConn};
use crate::group_commit::GroupCommit;
use crate::pg_names::{CHANGES_CHANNEL, DOCKER_DAEMONS_LOCK, EVENT_LOG_LOCK};
use crate::schema::{
    clusters, container_registries, environments, git_tokens, organization_webhooks, organizations,
    projects, services,
};
use crate::token_cache::TokenCache;
use async_trait::async_trait;
use diesel::connection::AnsiTransactionManager;
use diesel::prelude::*;
use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{
    AsyncConnection, AsyncPgConnection, RunQueryDsl, SimpleAsyncConnection, TransactionManager,
};
use domain::changes::{Change, ChangeSet, Changes};
use domain::error::{StoreError, StoreResult};
use domain::ports::{Reference, Scope, Store, Tx};
use futures_util::FutureExt;
use std::sync::Arc;

type PgTransactions = <AsyncPgConnection as AsyncConnection>::TransactionManager;
type SqliteTransactions = <SqliteConn as AsyncConnection>::TransactionManager;

/// The transaction a session has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// None: each statement commits on its own.
    Nothing,
    /// A write unit, through diesel's transaction manager (nested transactions are savepoints).
    Write,
    /// A read-only snapshot, begun and ended by plain SQL.
    Snapshot,
}

/// A connection lent to one use case. Dropped before [`Tx::commit`], its transaction is rolled
/// back before the connection goes back to the pool (and, on SQLite, before the writer connection
/// serves the next unit).
pub struct Session {
    conn: Option<Conn>,
    pub(crate) cipher: Arc<Cipher>,
    open: Open,
    /// The runtime that drives PostgreSQL connections, for a rollback after a drop.
    drivers: Option<tokio::runtime::Handle>,
    /// The store's remembered tokens, and whether this unit deleted some (they are forgotten
    /// once the deletion is committed).
    tokens: Option<Arc<TokenCache>>,
    deleted_tokens: bool,
    /// A SQLite write unit's commit is acknowledged once the shared log sync covers it.
    group_commit: Option<Arc<GroupCommit>>,
    /// What the unit changed that background tasks act on, rung on `bells` once committed.
    changed: ChangeSet,
    bells: Arc<Changes>,
}

impl Session {
    /// The connection, while the session lives.
    fn conn(conn: &mut Option<Conn>) -> StoreResult<&mut Conn> {
        conn.as_mut()
            .ok_or_else(|| StoreError::Other("the unit of work has ended".into()))
    }

    /// Whether [`Tx::lock`] takes row locks: in a PostgreSQL write unit. (A SQLite write unit is
    /// the only writer; nothing can change under it.)
    fn locks_rows(&self) -> bool {
        self.open == Open::Write && matches!(self.conn, Some(Conn::Pg(_)))
    }

    /// Records that the unit changed what tasks waiting for `change` act on. Outside a
    /// transaction the statement has committed already: rung at once, on this instance.
    pub(crate) fn changed(&mut self, change: Change) {
        match self.open {
            Open::Nothing => self.bells.ring(change.into()),
            _ => self.changed.insert(change),
        }
    }

    /// As [`Session::changed`], for a table that may change nothing of the kind.
    pub(crate) fn rings(&mut self, change: Option<Change>) {
        if let Some(change) = change {
            self.changed(change);
        }
    }

    /// Records that tokens were deleted: forgotten now, or when the unit commits.
    pub(crate) fn tokens_deleted(&mut self) {
        match (&self.tokens, self.open) {
            (Some(cache), Open::Nothing) => cache.forget_all(),
            _ => self.deleted_tokens = true,
        }
    }

    async fn commit_open(&mut self, open: Open) -> StoreResult<()> {
        // Whatever the outcome, the transaction is over: a failed COMMIT has rolled back, and
        // a connection diesel sees in a broken transaction is not reused.
        match (open, Self::conn(&mut self.conn)?) {
            (Open::Nothing, _) => Ok(()),
            (Open::Write, Conn::Pg(c)) => {
                let crossing = self.changed.crossing();
                // Delivered to the other instances' listeners when (and only if) this commits.
                if !crossing.is_empty() {
                    c.batch_execute(&format!(
                        "SELECT pg_notify('{CHANGES_CHANNEL}', '{}')",
                        crossing.names()
                    ))
                    .await
                    .map_err(store_error)?;
                }
                PgTransactions::commit_transaction(&mut **c).await
            }
            (Open::Write, Conn::Sqlite(c)) => {
                SqliteTransactions::commit_transaction(&mut **c).await
            }
            (Open::Snapshot, Conn::Pg(c)) => c.batch_execute("COMMIT").await,
            (Open::Snapshot, Conn::Sqlite(c)) => c.batch_execute("COMMIT").await,
        }
        .map_err(store_error)
    }

    /// Takes the row locks of `scope` in a PostgreSQL write unit, shared or not.
    async fn hold(&mut self, scope: Scope, shared: bool) -> StoreResult<()> {
        if !self.locks_rows() {
            return Ok(());
        }
        let Some(Conn::Pg(c)) = self.conn.as_mut() else {
            return Ok(());
        };
        let c: &mut AsyncPgConnection = c;
        // The ids of `$query`'s rows, locked as asked (`FOR KEY SHARE` for references).
        macro_rules! locked {
            ($query:expr) => {
                if shared {
                    $query.for_share().load::<String>(c).await
                } else {
                    $query.for_no_key_update().load::<String>(c).await
                }
            };
        }
        macro_rules! row {
            ($table:ident, $id:expr) => {
                locked!($table::table.find($id).select($table::id))
            };
        }
        macro_rules! referenced {
            ($table:ident, $id:expr) => {
                $table::table
                    .find($id)
                    .select($table::id)
                    .for_key_share()
                    .load::<String>(c)
                    .await
            };
        }
        match scope {
            Scope::Organization(id) => row!(organizations, id),
            Scope::Project(id) => {
                row!(projects, id).map_err(store_error)?;
                locked!(environments::table
                    .filter(environments::project_id.eq(id))
                    .order(environments::id.asc())
                    .select(environments::id))
            }
            Scope::Environment(id) => row!(environments, id),
            Scope::EnvironmentOf(service) => locked!(environments::table
                .filter(
                    environments::id.eq_any(
                        services::table
                            .find(service)
                            .select(services::environment_id),
                    ),
                )
                .select(environments::id)),
            Scope::Referenced(Reference::Registry(id)) => {
                referenced!(container_registries, id)
            }
            Scope::Referenced(Reference::GitToken(id)) => referenced!(git_tokens, id),
            Scope::Referenced(Reference::Cluster(id)) => referenced!(clusters, id),
            Scope::Referenced(Reference::Webhook(id)) => referenced!(organization_webhooks, id),
            Scope::EventLog => diesel::sql_query(EVENT_LOG_LOCK)
                .execute(c)
                .await
                .map(|_| Vec::new()),
            Scope::DockerDaemons => diesel::sql_query(DOCKER_DAEMONS_LOCK)
                .execute(c)
                .await
                .map(|_| Vec::new()),
        }
        .map_err(store_error)?;
        Ok(())
    }

    /// The connection and the cipher, borrowed together.
    pub(crate) fn parts(&mut self) -> StoreResult<(&mut Conn, &Cipher)> {
        Ok((Self::conn(&mut self.conn)?, &self.cipher))
    }
}

#[async_trait]
impl Tx for Session {
    // FOR NO KEY UPDATE: scope locks exclude each other, not the foreign-key checks of rows
    // inserted under the scope (those take KEY SHARE on the rows they reference).
    async fn lock(&mut self, scope: Scope) -> StoreResult<()> {
        self.hold(scope, false).await
    }

    // FOR SHARE: excludes FOR NO KEY UPDATE (and writes to the rows), not other FOR SHARE.
    async fn share(&mut self, scope: Scope) -> StoreResult<()> {
        self.hold(scope, true).await
    }

    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        let open = std::mem::replace(&mut self.open, Open::Nothing);
        let committed = self.commit_open(open).await;
        // Whatever the commit's outcome: forgetting too much costs a lookup.
        if let (true, Some(cache)) = (self.deleted_tokens, &self.tokens) {
            cache.forget_all();
        }
        committed?;
        let changed = std::mem::take(&mut self.changed);
        // The writer connection goes back first: the next writer commits while this
        // one waits for the disk, and the same fsync covers both.
        drop(self.conn.take());
        if let (Open::Write, Some(group)) = (open, &self.group_commit) {
            group.durable().await?;
        }
        // Once durable: a task woken now reads what was acknowledged.
        self.bells.ring(changed);
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let open = std::mem::replace(&mut self.open, Open::Nothing);
        if open == Open::Nothing {
            return;
        }
        match self.conn.take() {
            Some(Conn::Sqlite(mut c)) => {
                // Inline: done by the time the future is first polled, so before the writer
                // goes back for the next unit.
                let done = match open {
                    Open::Write => SqliteTransactions::rollback_transaction(&mut *c)
                        .now_or_never()
                        .is_some_and(|r| r.is_ok()),
                    _ => c
                        .batch_execute("ROLLBACK")
                        .now_or_never()
                        .is_some_and(|r| r.is_ok()),
                };
                if !done {
                    // Never hand on a connection in an unknown transaction state.
                    let _ = Object::take(c);
                }
            }
            Some(Conn::Pg(c)) => match tokio::runtime::Handle::try_current()
                .or_else(|e| self.drivers.clone().ok_or(e))
            {
                // The rollback needs a round trip: it runs after the caller has moved on, on
                // the caller's runtime, which drives connections of its thread's pool.
                Ok(runtime) => {
                    let mut c = Unlent(Some(c));
                    runtime.spawn(async move {
                        let Some(conn) = c.0.as_mut() else { return };
                        let rolled_back = match open {
                            Open::Write => PgTransactions::rollback_transaction(&mut **conn).await,
                            _ => conn.batch_execute("ROLLBACK").await,
                        };
                        if rolled_back.is_ok() {
                            // Back to the pool.
                            drop(c.0.take());
                        }
                    });
                }
                // Closing the connection rolls back.
                Err(_) => drop(Object::take(c)),
            },
            None => {}
        }
    }
}

/// A PostgreSQL connection on its way back from a dropped unit: unless released after its
/// rollback, it is closed rather than pooled (a rollback task dropped with its runtime, or a
/// failed rollback, never hands on a connection inside a transaction).
struct Unlent(Option<Object<AsyncPgConnection>>);

impl Drop for Unlent {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            drop(Object::take(c));
        }
    }
}

#[async_trait]
impl Store for Db {
    async fn read(&self) -> StoreResult<Box<dyn Tx>> {
        Ok(Box::new(self.session().await?))
    }

    async fn snapshot(&self) -> StoreResult<Box<dyn Tx>> {
        // The session exists before BEGIN is sent: a caller dropped while it is in flight leaves
        // a session whose drop rolls back, never a connection back in the pool inside a
        // transaction nobody knows of.
        let mut session = Session {
            conn: Some(self.read_conn().await?),
            cipher: self.cipher.clone(),
            open: Open::Snapshot,
            drivers: self.drivers(),
            tokens: self.tokens.clone(),
            deleted_tokens: false,
            group_commit: None,
            changed: ChangeSet::default(),
            bells: self.changes.clone(),
        };
        let begun = match Session::conn(&mut session.conn)? {
            Conn::Pg(c) => begin_pipelined(c),
            // Its snapshot is taken at its first read and kept to its end.
            Conn::Sqlite(c) => c.batch_execute("BEGIN").await,
        };
        if let Err(e) = begun {
            // Nothing was begun: nothing to roll back.
            session.open = Open::Nothing;
            return Err(store_error(e));
        }
        Ok(Box::new(session))
    }

    async fn write(&self) -> StoreResult<Box<dyn Tx>> {
        Ok(Box::new(self.begin().await?))
    }

    fn changes(&self) -> &Changes {
        &self.changes
    }
}

/// Sends a read-only snapshot's BEGIN without waiting for its answer: the unit's first
/// statement follows it on the connection, and PostgreSQL answers in order, so the two share
/// one round trip. Nothing is lost by not reading BEGIN's answer: it can only fail on a
/// connection that is broken or inside a failed transaction (never lent out), and then the
/// statements that follow fail too.
fn begin_pipelined(c: &AsyncPgConnection) -> diesel::QueryResult<()> {
    let mut conn = c;
    // The first poll hands the message to the connection's driver; the rest would only wait.
    match conn
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .now_or_never()
    {
        Some(done) => done,
        None => Ok(()),
    }
}

impl Db {
    /// Opens a write unit: `BEGIN IMMEDIATE` on SQLite (on the process's one writer
    /// connection; this also excludes other processes), `BEGIN` on PostgreSQL.
    pub(crate) async fn begin(&self) -> StoreResult<Session> {
        let mut conn = self.write_conn().await?;
        match &mut conn {
            Conn::Pg(c) => PgTransactions::begin_transaction(&mut **c).await,
            Conn::Sqlite(c) => {
                c.spawn_blocking(|inner| {
                    AnsiTransactionManager::begin_transaction_sql(inner, "BEGIN IMMEDIATE")
                })
                .await
            }
        }
        .map_err(store_error)?;
        Ok(Session {
            conn: Some(conn),
            cipher: self.cipher.clone(),
            open: Open::Write,
            drivers: self.drivers(),
            tokens: self.tokens.clone(),
            deleted_tokens: false,
            group_commit: self.group_commit().cloned(),
            changed: ChangeSet::default(),
            bells: self.changes.clone(),
        })
    }

    /// A read unit as the storage crate's own type (tests and tools): each statement commits
    /// on its own.
    pub async fn session(&self) -> StoreResult<Session> {
        Ok(Session {
            conn: Some(self.read_conn().await?),
            cipher: self.cipher.clone(),
            open: Open::Nothing,
            drivers: self.drivers(),
            tokens: self.tokens.clone(),
            deleted_tokens: false,
            group_commit: None,
            changed: ChangeSet::default(),
            bells: self.changes.clone(),
        })
    }
}
