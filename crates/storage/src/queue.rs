//! The deployment queue. Claiming differs by backend: PostgreSQL locks the candidate row with
//! `FOR UPDATE SKIP LOCKED` so several processes can claim at once; SQLite has one writer, the
//! process's writer lock. On both, a partial unique index allows one RUNNING request per
//! environment, so two processes cannot start two requests of one environment.

use crate::db::{db_run, store_error, Conn, Db};
use crate::rows::*;
use crate::schema::deployment_requests as dr;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::{AsyncConnection, RunQueryDsl};
use domain::error::{StoreError, StoreResult};
use domain::ids::DeploymentRequestId;
use domain::model::{DeploymentRequest, RequestStatus};
use domain::ports::DeploymentQueue;
use time::OffsetDateTime;

diesel::alias!(dr as running: RunningRequests);

const QUEUED: &str = "QUEUED";
const RUNNING: &str = "RUNNING";

/// The oldest queued request whose environment runs nothing. Written once, for both backends;
/// PostgreSQL adds its row lock at the call site.
macro_rules! candidate {
    () => {
        dr::table
            .filter(dr::status.eq(QUEUED))
            .filter(diesel::dsl::not(diesel::dsl::exists(
                running
                    .filter(running.field(dr::environment_id).eq(dr::environment_id))
                    .filter(running.field(dr::status).eq(RUNNING)),
            )))
            .order((dr::created_at.asc(), dr::id.asc()))
            .select(dr::id)
            .limit(1)
    };
}

fn claim_error(e: DieselError) -> StoreError {
    match e {
        // Another process started a request of the same environment first.
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => StoreError::Duplicate,
        other => store_error(other),
    }
}

#[async_trait]
impl DeploymentQueue for Db {
    async fn enqueue(&self, request: &DeploymentRequest) -> StoreResult<()> {
        domain::ports::Repo::<DeploymentRequest>::insert(self, request).await
    }

    async fn claim_next(
        &self,
        worker: &str,
        now: OffsetDateTime,
    ) -> StoreResult<Option<DeploymentRequest>> {
        let worker = worker.to_string();
        let claimed = self
            .write(move |conn| async move {
                let started = ts(now);
                let id: Option<String> = match conn {
                    Conn::Pg(mut obj) => {
                        let c: &mut diesel_async::AsyncPgConnection = &mut obj;
                        c.transaction(async |c| {
                            let id: Option<String> = candidate!()
                                .for_update()
                                .skip_locked()
                                .first(c)
                                .await
                                .optional()?;
                            if let Some(id) = &id {
                                diesel::update(dr::table.find(id))
                                    .set((
                                        dr::status.eq(RUNNING),
                                        dr::claimed_by.eq(&worker),
                                        dr::started_at.eq(started),
                                    ))
                                    .execute(c)
                                    .await?;
                            }
                            Ok::<_, DieselError>(id)
                        })
                        .await
                        .map_err(claim_error)
                    }
                    Conn::Sqlite(mut obj, _guard) => {
                        let c: &mut crate::db::SqliteConn = &mut obj;
                        c.transaction(async |c| {
                            let id: Option<String> = candidate!().first(c).await.optional()?;
                            if let Some(id) = &id {
                                diesel::update(dr::table.find(id))
                                    .set((
                                        dr::status.eq(RUNNING),
                                        dr::claimed_by.eq(&worker),
                                        dr::started_at.eq(started),
                                    ))
                                    .execute(c)
                                    .await?;
                            }
                            Ok::<_, DieselError>(id)
                        })
                        .await
                        .map_err(claim_error)
                    }
                }
                .or_else(|e| match e {
                    StoreError::Duplicate => Ok(None),
                    other => Err(other),
                })?;
                Ok(id)
            })
            .await?;
        let Some(id) = claimed else { return Ok(None) };
        let id: DeploymentRequestId = parse("id", &id)?;
        domain::ports::Repo::<DeploymentRequest>::get(self, id).await
    }

    async fn finish(
        &self,
        id: DeploymentRequestId,
        status: RequestStatus,
        reason: Option<String>,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let key = id.to_string();
        let finished = ts(now);
        self.write(move |mut conn| async move {
            let n = db_run!(conn, |c| diesel::update(dr::table.find(&key))
                .filter(dr::status.eq_any([QUEUED, RUNNING]))
                .set((
                    dr::status.eq(status.as_str()),
                    dr::reason.eq(&reason),
                    dr::finished_at.eq(finished)
                ))
                .execute(c)
                .await)
            .map_err(store_error)?;
            if n == 0 {
                return Err(StoreError::NotFound);
            }
            Ok(())
        })
        .await
    }

    async fn orphaned(&self, alive: &[String]) -> StoreResult<Vec<DeploymentRequest>> {
        let alive = alive.to_vec();
        let cipher = self.cipher.clone();
        self.read(move |mut conn| async move {
            let rows: Vec<DeploymentRequestRow> = db_run!(conn, |c| dr::table
                .filter(dr::status.eq(RUNNING))
                .filter(diesel::dsl::not(dr::claimed_by.eq_any(&alive)))
                .order((dr::created_at.asc(), dr::id.asc()))
                .select(DeploymentRequestRow::as_select())
                .load(c)
                .await)
            .map_err(store_error)?;
            rows.into_iter()
                .map(|r| DeploymentRequest::from_row(r, &cipher))
                .collect()
        })
        .await
    }
}
