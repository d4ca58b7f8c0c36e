//! Operations on the whole store: emptying it (a test suite's reset between tests).

use crate::db::{db_write_transaction, store_error, Db};
use crate::token_cache::ForgetOnDrop;
use async_trait::async_trait;
use diesel_async::SimpleAsyncConnection;
use domain::error::{StoreError, StoreResult};
use domain::model::{Snapshot, SnapshotName};
use domain::ports::Maintenance;

/// Every table, each after the tables it refers to (a copy inserts in this order, a deletion
/// goes in the reverse). `every_table_is_listed_for_maintenance` in the contract tests keeps it
/// whole.
pub const TABLES: &[&str] = &[
    "events",
    "idempotency_keys",
    "organizations",
    "rate_limits",
    "api_tokens",
    "cloud_credentials",
    "clusters",
    "cluster_daemons",
    "cluster_logs",
    "git_tokens",
    "helm_repositories",
    "invitations",
    "metadata_groups",
    "organization_members",
    "organization_webhooks",
    "projects",
    "container_registries",
    "environments",
    "project_deployment_rules",
    "webhook_deliveries",
    "deployment_requests",
    "deployment_logs",
    "deployment_stages",
    "environment_deployment_rules",
    "services",
    "webhook_attempts",
    "custom_domains",
    "deployment_restrictions",
    "deployment_stage_services",
    "service_metadata_groups",
    "variables",
    "running_states",
    "service_output",
    "cron_turns",
    "database_backups",
];

/// The tables no reset, snapshot or restore touches: who the installation is (what it made on
/// Docker hosts carries that identity, whatever its data becomes).
pub const KEPT_TABLES: &[&str] = &["installation"];

/// What a reset that keeps tokens keeps: who can call, and where they belong.
const CALLERS: &[&str] = &["organizations", "api_tokens", "organization_members"];

/// The organizations a reset that keeps tokens lets go: those no token belongs to (their
/// members go with them).
const TOKENLESS: &str =
    "DELETE FROM organizations WHERE id NOT IN (SELECT organization_id FROM api_tokens);";

fn emptied(keep_tokens: bool) -> impl Iterator<Item = &'static str> {
    TABLES
        .iter()
        .rev()
        .copied()
        .filter(move |t| !keep_tokens || !CALLERS.contains(t))
}

/// SQLite: one DELETE per table, children first, in the writer's transaction.
fn sqlite_reset(keep_tokens: bool) -> String {
    let mut sql: String = emptied(keep_tokens)
        .map(|t| format!("DELETE FROM {t};"))
        .collect();
    if keep_tokens {
        sql.push_str(TOKENLESS);
    }
    sql
}

/// PostgreSQL: one TRUNCATE of every table, which also leaves no dead rows behind; the
/// sequencer's lock first, so the two never wait on each other's tables.
fn postgres_reset(keep_tokens: bool) -> String {
    let tables: Vec<&str> = emptied(keep_tokens).collect();
    let mut sql = format!(
        "{}; TRUNCATE {};",
        crate::pg_names::EVENT_LOG_LOCK,
        tables.join(", ")
    );
    if keep_tokens {
        sql.push_str(TOKENLESS);
    }
    sql
}

/// How many times a unit that takes every table is tried before its failure is reported.
const ATTEMPTS: u32 = 5;

impl Db {
    /// Runs `unit` again when it lost a deadlock: a unit that takes every table at once (a
    /// TRUNCATE of all of them) can meet units that hold some of them in another order, and
    /// PostgreSQL then aborts one side.
    pub(crate) async fn retried<F, Fut>(&self, mut unit: F) -> StoreResult<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = StoreResult<()>>,
    {
        let mut attempt = 1;
        loop {
            match unit().await {
                Err(StoreError::Unavailable(why))
                    if attempt < ATTEMPTS && why.contains("deadlock") =>
                {
                    attempt += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20 * u64::from(attempt)))
                        .await;
                }
                done => return done,
            }
        }
    }
}

#[async_trait]
impl Maintenance for Db {
    async fn reset(&self, keep_tokens: bool) -> StoreResult<()> {
        let sql = if self.is_postgres() {
            postgres_reset(keep_tokens)
        } else {
            sqlite_reset(keep_tokens)
        };
        // Tokens are deleted (or, kept, still answer the same): none is answered from memory.
        let _forget = ForgetOnDrop(self.tokens.as_deref());
        self.retried(|| {
            let sql = sql.clone();
            self.write(move |mut conn| async move {
                db_write_transaction!(conn, |c| c.batch_execute(&sql).await).map_err(store_error)
            })
        })
        .await
    }

    async fn save_snapshot(
        &self,
        name: &SnapshotName,
        now: time::OffsetDateTime,
    ) -> StoreResult<Snapshot> {
        self.save_snapshot_now(name, now).await
    }

    async fn restore_snapshot(&self, name: &SnapshotName) -> StoreResult<()> {
        self.restore(name).await
    }

    async fn snapshots(&self) -> StoreResult<Vec<Snapshot>> {
        self.list_snapshots().await
    }

    async fn delete_snapshot(&self, name: &SnapshotName) -> StoreResult<()> {
        self.drop_snapshot(name).await
    }
}
