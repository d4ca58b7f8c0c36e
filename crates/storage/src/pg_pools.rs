//! PostgreSQL connections kept near the tasks that use them.
//!
//! A connection's socket is read and written by a driver task, on the runtime that opened it.
//! A query from a task on another thread is handed to that task and its answer handed back:
//! two thread wake-ups per round trip. So each single-threaded runtime (an HTTP worker, the
//! main thread that runs the deployment workers) gets a pool of its own, opened and driven on
//! its own thread, and a query never leaves it. Tasks of multi-threaded runtimes share one pool
//! driven by the store's own runtime, which outlives whichever thread asked first.
//!
//! A thread's pool lives as long as the thread; when its runtime ends, its connections' driver
//! tasks end with it, so the pool sees them closed and opens new ones if the thread runs again.

use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::pooled_connection::{
    AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
};
use diesel_async::AsyncPgConnection;
use domain::error::StoreError;
use futures_util::FutureExt;
use std::cell::RefCell;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::runtime::{Handle, RuntimeFlavor};

type PgPool = Pool<AsyncPgConnection>;

#[derive(Clone)]
pub(crate) struct PgPools {
    /// For tasks of multi-threaded runtimes: connections driven on `drivers`.
    shared: PgPool,
    url: Arc<str>,
    per_thread: usize,
    /// Tells this store's pools apart in a thread's list, and which are of dropped stores.
    owner: Arc<()>,
}

thread_local! {
    /// The pools of this thread, one per store used on it.
    static LOCAL: RefCell<Vec<(Weak<()>, PgPool)>> = const { RefCell::new(Vec::new()) };
}

impl PgPools {
    /// `size` connections for the shared pool; each thread's pool gets half (at least two).
    pub(crate) fn new(url: &str, size: usize, drivers: Handle) -> Result<Self, StoreError> {
        let mut config = ManagerConfig::<AsyncPgConnection>::default();
        config.recycling_method = RecyclingMethod::Fast;
        // Opened on the drivers' runtime, so the connection's task is spawned there.
        config.custom_setup = Box::new(move |url: &str| {
            let url = url.to_string();
            let drivers = drivers.clone();
            async move {
                drivers
                    .spawn(async move { connect(&url).await })
                    .await
                    .map_err(|e| diesel::ConnectionError::BadConnection(e.to_string()))?
            }
            .boxed()
        });
        Ok(Self {
            shared: build(url, size, config)?,
            url: url.into(),
            per_thread: (size / 2).max(2),
            owner: Arc::new(()),
        })
    }

    /// The pool for the calling task.
    pub(crate) fn get(&self) -> Result<PgPool, StoreError> {
        let single_threaded = Handle::try_current()
            .is_ok_and(|h| matches!(h.runtime_flavor(), RuntimeFlavor::CurrentThread));
        if !single_threaded {
            return Ok(self.shared.clone());
        }
        LOCAL.with(|pools| {
            let mut pools = pools.borrow_mut();
            if let Some((_, pool)) = pools
                .iter()
                .find(|(owner, _)| std::ptr::eq(owner.as_ptr(), Arc::as_ptr(&self.owner)))
            {
                return Ok(pool.clone());
            }
            // The pools of dropped stores close their connections now.
            pools.retain(|(owner, _)| owner.strong_count() > 0);
            let mut config = ManagerConfig::<AsyncPgConnection>::default();
            config.recycling_method = RecyclingMethod::Fast;
            config.custom_setup = Box::new(|url: &str| connect(url).boxed());
            let pool = build(&self.url, self.per_thread, config)?;
            pools.push((Arc::downgrade(&self.owner), pool.clone()));
            Ok(pool)
        })
    }
}

/// Opens a connection with the store's settings.
///
/// Every statement the store prepares keeps one generic plan: PostgreSQL otherwise plans a
/// prepared statement again on each execution while it judges a plan for the bound values
/// cheaper, which it always does for a bound `LIMIT` (every single-row read): planning was an
/// eighth of the database's time per write. The store's statements are index lookups whose
/// best plan does not depend on the values.
async fn connect(url: &str) -> diesel::ConnectionResult<AsyncPgConnection> {
    use diesel_async::SimpleAsyncConnection;
    let mut conn = <AsyncPgConnection as diesel_async::AsyncConnection>::establish(url).await?;
    conn.batch_execute("SET plan_cache_mode = force_generic_plan")
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}

fn build(
    url: &str,
    size: usize,
    config: ManagerConfig<AsyncPgConnection>,
) -> Result<PgPool, StoreError> {
    let manager = AsyncDieselConnectionManager::<AsyncPgConnection>::new_with_config(url, config);
    // A broken connection shows itself on first use (503, retried by clients); a test query on
    // every checkout would cost a round trip per unit of work.
    Pool::builder(manager)
        .max_size(size.max(1))
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(10)))
        .runtime(deadpool::Runtime::Tokio1)
        .build()
        .map_err(|e| StoreError::Unavailable(e.to_string()))
}
