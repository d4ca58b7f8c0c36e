//! Claims on clusters for the engine's workers: the cluster queued longest moves to its
//! running state under one worker's lease (PostgreSQL: `SKIP LOCKED`, so several instances
//! take different clusters), and the running ones whose lease ran out are found for recovery.
//! The ON_PREMISE ones are read for the engine, which watches their Docker hosts.

use crate::db::{db_run, store_error, Conn, Db};
use crate::rows::{ts, ClusterRow, FromRow};
use crate::schema::clusters as cl;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel_async::{AsyncConnection, RunQueryDsl};
use domain::error::StoreResult;
use domain::ids::ClusterId;
use domain::model::{CloudProvider, Cluster, ClusterState};
use time::OffsetDateTime;

const QUEUED: [ClusterState; 2] = [ClusterState::DeploymentQueued, ClusterState::StopQueued];
const RUNNING: [ClusterState; 2] = [ClusterState::Deploying, ClusterState::Stopping];

fn running_state(queued: ClusterState) -> ClusterState {
    if queued == ClusterState::StopQueued {
        ClusterState::Stopping
    } else {
        ClusterState::Deploying
    }
}

macro_rules! queued {
    () => {
        cl::table
            .filter(cl::state.eq_any(QUEUED))
            .order((cl::queued_at.asc(), cl::id.asc()))
            .select((cl::id, cl::state))
    };
}

pub(crate) async fn claim_cluster(
    db: &Db,
    worker: &str,
    lease_until: OffsetDateTime,
) -> StoreResult<Option<Cluster>> {
    // Idle workers poll: a read first keeps them off the writer when nothing is queued.
    let ready: Option<(ClusterId, ClusterState)> = db
        .read(move |mut conn| async move {
            db_run!(conn, |c| queued!().first(c).await.optional()).map_err(store_error)
        })
        .await?;
    if ready.is_none() {
        return Ok(None);
    }
    let worker = worker.to_string();
    let cipher = db.cipher.clone();
    db.write(move |conn| async move {
        let lease = ts(lease_until);
        macro_rules! claim {
            ($c:ident, $candidate:expr) => {
                $c.transaction(async |c| {
                    let Some((id, state)) = $candidate
                        .first::<(ClusterId, ClusterState)>(c)
                        .await
                        .optional()?
                    else {
                        return Ok::<_, DieselError>(None);
                    };
                    diesel::update(cl::table.find(id))
                        .filter(cl::state.eq(state))
                        .set((
                            cl::state.eq(running_state(state)),
                            cl::claimed_by.eq(&worker),
                            cl::lease_until.eq(lease),
                        ))
                        .execute(c)
                        .await?;
                    cl::table
                        .find(id)
                        .select(ClusterRow::as_select())
                        .first(c)
                        .await
                        .optional()
                })
                .await
                .map_err(store_error)
            };
        }
        let row = match conn {
            Conn::Pg(mut obj) => {
                let c: &mut diesel_async::AsyncPgConnection = &mut obj;
                claim!(c, queued!().for_update().skip_locked())
            }
            Conn::Sqlite(mut obj) => {
                let c: &mut crate::db::SqliteConn = &mut obj;
                claim!(c, queued!())
            }
        }?;
        row.map(|r| Cluster::from_row(r, &cipher)).transpose()
    })
    .await
}

/// Which clusters [`clusters`] reads.
pub(crate) enum Clusters {
    /// Running an action under a lease that ran out before this time.
    Expired(OffsetDateTime),
    /// ON_PREMISE: each names a Docker host.
    OnPremise,
}

pub(crate) async fn clusters(db: &Db, which: Clusters) -> StoreResult<Vec<Cluster>> {
    let cipher = db.cipher.clone();
    db.read(move |mut conn| async move {
        let rows: Vec<ClusterRow> = db_run!(conn, |c| {
            let query = cl::table.order(cl::id.asc()).into_boxed();
            let query = match which {
                Clusters::Expired(now) => query
                    .filter(cl::state.eq_any(RUNNING))
                    .filter(cl::lease_until.lt(ts(now))),
                Clusters::OnPremise => {
                    query.filter(cl::cloud_provider.eq(CloudProvider::OnPremise.as_str()))
                }
            };
            query.select(ClusterRow::as_select()).load(c).await
        })
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| Cluster::from_row(r, &cipher))
            .collect()
    })
    .await
}
