//! The deployment queue. Claiming differs by backend: PostgreSQL locks the candidate row with
//! `FOR UPDATE SKIP LOCKED` so several processes can claim at once; SQLite has one writer, the
//! process's writer connection. On both, a partial unique index allows one RUNNING request per
//! environment, so two processes cannot start two requests of one environment.

use crate::cipher::Cipher;
use crate::db::{db_run, db_transaction, left_joined, store_error, Conn, Db, LoadRows};
use crate::rows::*;
use crate::schema::deployment_requests as dr;
use crate::schema::services;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel_async::{AsyncConnection, RunQueryDsl};
use domain::changes::Change;
use domain::error::{StoreError, StoreResult};
use domain::ids::{DeploymentRequestId, EnvironmentId, ServiceId, StrictUuid};
use domain::model::{
    DeploymentAction, DeploymentRequest, EnvironmentActivity, RequestStatus, Service, ServiceState,
};
use domain::ports::{Canceled, DeploymentQueue, QueueClaims};
use time::{OffsetDateTime, PrimitiveDateTime};
use uuid::Uuid;

diesel::alias!(
    dr as running: RunningRequests,
    dr as older: OlderRequests,
    dr as later: LaterRequests
);

const QUEUED: &str = RequestStatus::Queued.as_str();
const RUNNING: &str = RequestStatus::Running.as_str();
/// The actions a cancel leaves alone: what removes a service goes to its end.
const REMOVALS: [&str; 2] = [
    DeploymentAction::Delete.as_str(),
    DeploymentAction::Uninstall.as_str(),
];

/// Ends the waiting requests `ids` canceled, for `reason`, at `at`.
macro_rules! end_canceled {
    ($c:ident, $ids:expr, $reason:expr, $at:expr) => {
        diesel::update(dr::table.filter(dr::id.eq_any($ids)))
            .set((
                dr::status.eq(RequestStatus::Canceled.as_str()),
                dr::state.eq(ServiceState::Canceled.as_str()),
                dr::reason.eq($reason),
                dr::finished_at.eq($at),
            ))
            .execute($c)
            .await?
    };
}

/// Waiting or running (`RequestStatus::PENDING`), written without IN so SQLite keeps the
/// statements that use it prepared.
#[diesel::dsl::auto_type]
fn pending() -> _ {
    let waiting: &'static str = QUEUED;
    let started: &'static str = RUNNING;
    dr::status.eq(waiting).or(dr::status.eq(started))
}

/// The first queued request whose environment runs nothing, and which is the first waiting in
/// its environment in (created_at, position, id) order: requests of one environment start in
/// the order they were asked for, a batch stage by stage, even when a concurrent claimer has
/// locked the first. Written once, for both backends;
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
            .filter(diesel::dsl::not(diesel::dsl::exists(
                older
                    .filter(older.field(dr::environment_id).eq(dr::environment_id))
                    .filter(older.field(dr::status).eq(QUEUED))
                    .filter(
                        older.field(dr::created_at).lt(dr::created_at).or(older
                            .field(dr::created_at)
                            .eq(dr::created_at)
                            .and(
                                older.field(dr::position).lt(dr::position).or(older
                                    .field(dr::position)
                                    .eq(dr::position)
                                    .and(older.field(dr::id).lt(dr::id))),
                            )),
                    ),
            )))
            .order((dr::created_at.asc(), dr::position.asc(), dr::id.asc()))
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

/// The requests of environment `$env` that its activity needs: the waiting and running ones
/// and its newest (for the latest batch).
macro_rules! of_environment {
    ($env:expr) => {{
        let newest = later
            .filter(later.field(dr::environment_id).eq($env))
            .order((
                later.field(dr::created_at).desc(),
                later.field(dr::id).desc(),
            ))
            .select(later.field(dr::id))
            .limit(1)
            .single_value();
        dr::environment_id
            .eq($env)
            .and(pending().or(dr::id.nullable().eq(newest)))
    }};
}

/// Ended, and no request of the same service and action ended after it.
#[diesel::dsl::auto_type]
fn latest_ended_of_its_kind() -> _ {
    let waiting: &'static str = QUEUED;
    let started: &'static str = RUNNING;
    diesel::dsl::not(pending()).and(diesel::dsl::not(diesel::dsl::exists(
        later
            .filter(later.field(dr::service_id).eq(dr::service_id))
            .filter(later.field(dr::action).eq(dr::action))
            .filter(later.field(dr::status).ne(waiting))
            .filter(later.field(dr::status).ne(started))
            .filter(later.field(dr::created_at).gt(dr::created_at)),
    )))
}

/// An environment's activity from the requests `activity_of` reads, and those of `services`.
fn activity(
    mut rows: Vec<DeploymentRequest>,
    services: &[ServiceId],
) -> (EnvironmentActivity, Vec<DeploymentRequest>) {
    rows.sort_by_key(|r| (r.created_at, r.id.0));
    let last_batch = rows.last().map(|r| r.batch_id);
    let requests = rows
        .iter()
        .filter(|r| services.contains(&r.service_id))
        .cloned()
        .collect();
    let pending: Vec<DeploymentRequest> = rows
        .into_iter()
        .filter(|r| !r.status.is_finished())
        .collect();
    let activity = EnvironmentActivity {
        running: pending
            .iter()
            .find(|r| r.status == RequestStatus::Running)
            .cloned(),
        pending,
        last_batch,
    };
    (activity, requests)
}

/// Loads rows as records.
fn records(
    rows: Vec<DeploymentRequestRow>,
    cipher: &Cipher,
) -> StoreResult<Vec<DeploymentRequest>> {
    rows.into_iter()
        .map(|r| DeploymentRequest::from_row(r, cipher))
        .collect()
}

#[async_trait]
impl DeploymentQueue for Session {
    async fn enqueue(&mut self, requests: &[DeploymentRequest]) -> StoreResult<()> {
        let rows: Vec<DeploymentRequestRow> = requests
            .iter()
            .map(|r| r.to_row(&self.cipher))
            .collect::<StoreResult<_>>()?;
        if rows.is_empty() {
            return Ok(());
        }
        let (conn, _) = self.parts()?;
        db_transaction!(*conn, |c| {
            for row in &rows {
                diesel::insert_into(dr::table)
                    .values(row)
                    .execute(c)
                    .await?;
            }
            Ok::<_, DieselError>(())
        })
        .map_err(store_error)?;
        self.changed(Change::Queue);
        Ok(())
    }

    async fn record(&mut self, request: &DeploymentRequest) -> StoreResult<Option<bool>> {
        let row = request.to_row(&self.cipher)?;
        let (conn, _) = self.parts()?;
        let n = db_run!(*conn, |c| diesel::update(dr::table.find(&row.id))
            .filter(dr::status.eq(RUNNING))
            .filter(dr::claimed_by.eq(&row.claimed_by))
            .set((
                dr::status.eq(&row.status),
                dr::state.eq(&row.state),
                dr::steps.eq(&row.steps),
                dr::reason.eq(&row.reason),
                dr::lease_until.eq(row.lease_until),
                dr::finished_at.eq(row.finished_at),
            ))
            .execute(c)
            .await)
        .map_err(store_error)?;
        if n == 0 {
            return Ok(None);
        }
        if request.status.is_finished() {
            // The environment's next request may start now.
            self.changed(Change::Queue);
        }
        let (conn, _) = self.parts()?;
        let cancel: bool = db_run!(*conn, |c| dr::table
            .find(&row.id)
            .select(dr::cancel_requested)
            .first(c)
            .await)
        .map_err(store_error)?;
        Ok(Some(cancel))
    }

    async fn join_environment_deletion(
        &mut self,
        requests: &[DeploymentRequest],
    ) -> StoreResult<()> {
        let rows: Vec<DeploymentRequestRow> = requests
            .iter()
            .map(|r| {
                let mut joined = r.clone();
                joined.snapshot.deletes_environment = true;
                joined.to_row(&self.cipher)
            })
            .collect::<StoreResult<_>>()?;
        let (conn, _) = self.parts()?;
        db_transaction!(*conn, |c| {
            for row in &rows {
                diesel::update(dr::table.find(&row.id))
                    .filter(dr::status.eq_any([QUEUED, RUNNING]))
                    .set(dr::snapshot.eq(&row.snapshot))
                    .execute(c)
                    .await?;
            }
            Ok::<_, DieselError>(())
        })
        .map_err(store_error)
    }

    async fn cancel_pending(
        &mut self,
        environment: EnvironmentId,
        batch: Option<Uuid>,
        reason: &str,
        now: OffsetDateTime,
    ) -> StoreResult<Canceled> {
        let batch = batch.map(StrictUuid);
        let reason = reason.to_string();
        let at = ts(now);
        let (conn, _) = self.parts()?;
        let (ended, flagged) = db_transaction!(*conn, |c| {
            let mut waiting = dr::table
                .filter(dr::environment_id.eq(environment))
                .filter(dr::status.eq(QUEUED))
                .filter(dr::action.ne_all(REMOVALS))
                .select(dr::id)
                .into_boxed();
            let mut started = diesel::update(dr::table)
                .filter(dr::environment_id.eq(environment))
                .filter(dr::status.eq(RUNNING))
                .filter(dr::action.ne_all(REMOVALS))
                .filter(dr::cancel_requested.eq(false))
                .into_boxed();
            if let Some(b) = &batch {
                waiting = waiting.filter(dr::batch_id.eq(b));
                started = started.filter(dr::batch_id.eq(b));
            }
            // Read, then ended by id: the caller holds the environment, so what waits stays.
            let ended: Vec<DeploymentRequestId> = waiting.load(c).await?;
            end_canceled!(c, &ended, &reason, at);
            let flagged = started
                .set(dr::cancel_requested.eq(true))
                .execute(c)
                .await?;
            Ok::<_, DieselError>((ended, flagged as u64))
        })
        .map_err(store_error)?;
        Ok(Canceled { ended, flagged })
    }

    async fn cancel_later_stages(
        &mut self,
        batch: Uuid,
        position: i32,
        reason: &str,
        now: OffsetDateTime,
    ) -> StoreResult<Vec<DeploymentRequestId>> {
        let batch = StrictUuid(batch);
        let reason = reason.to_string();
        let at = ts(now);
        let (conn, _) = self.parts()?;
        db_transaction!(*conn, |c| {
            let ended: Vec<DeploymentRequestId> = dr::table
                .filter(dr::batch_id.eq(batch))
                .filter(dr::status.eq(QUEUED))
                .filter(dr::position.gt(position))
                // Removals go to their end, whatever else fails.
                .filter(dr::action.ne_all(REMOVALS))
                .select(dr::id)
                .load(c)
                .await?;
            end_canceled!(c, &ended, &reason, at);
            Ok::<_, DieselError>(ended)
        })
        .map_err(store_error)
    }

    async fn batch_requests(&mut self, batches: &[Uuid]) -> StoreResult<Vec<DeploymentRequest>> {
        if batches.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<StrictUuid> = batches.iter().copied().map(StrictUuid).collect();
        let (conn, cipher) = self.parts()?;
        let rows: Vec<DeploymentRequestRow> = db_run!(*conn, |c| dr::table
            .filter(dr::batch_id.eq_any(&keys).or(dr::id.eq_any(&keys)))
            .order((dr::created_at.asc(), dr::position.asc(), dr::id.asc()))
            .select(DeploymentRequestRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        records(rows, cipher)
    }

    async fn environment_batches(
        &mut self,
        environment: EnvironmentId,
        after: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Vec<Uuid>> {
        let after = after.map(StrictUuid);
        let (conn, _) = self.parts()?;
        let rows: Vec<(StrictUuid, PrimitiveDateTime)> = db_run!(*conn, |c| {
            // Every request of a batch was asked for at once: one created_at per batch.
            let mut q = dr::table
                .filter(dr::environment_id.eq(environment))
                .group_by((dr::batch_id, dr::created_at))
                .select((dr::batch_id, dr::created_at))
                .order((dr::created_at.desc(), dr::batch_id.desc()))
                .limit(limit)
                .into_boxed();
            if let Some(a) = after {
                let start = later
                    .filter(later.field(dr::batch_id).eq(a))
                    .select(later.field(dr::created_at))
                    .limit(1)
                    .single_value();
                q = q.filter(
                    dr::created_at
                        .nullable()
                        .lt(start)
                        .or(dr::created_at.nullable().eq(start).and(dr::batch_id.lt(a))),
                );
            }
            q.load(c).await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(|(b, _)| b.0).collect())
    }

    async fn service_requests(
        &mut self,
        service: ServiceId,
        actions: Option<&[DeploymentAction]>,
        after: Option<DeploymentRequestId>,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentRequest>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<DeploymentRequestRow> = db_run!(*conn, |c| {
            let mut q = dr::table
                .filter(dr::service_id.eq(service))
                .select(DeploymentRequestRow::as_select())
                .order((dr::created_at.desc(), dr::id.desc()))
                .limit(limit)
                .into_boxed();
            if let Some(actions) = actions {
                q = q.filter(dr::action.eq_any(actions));
            }
            if let Some(a) = after {
                // `after` names the last request seen, by its id or its batch's (the
                // `execution_id` a history shows).
                let start = later
                    .filter(later.field(dr::service_id).eq(service))
                    .filter(
                        later
                            .field(dr::id)
                            .eq(a)
                            .or(later.field(dr::batch_id).eq(a)),
                    )
                    .select(later.field(dr::created_at))
                    .limit(1)
                    .single_value();
                q = q.filter(
                    dr::created_at.nullable().lt(start).or(dr::created_at
                        .nullable()
                        .eq(start)
                        .and(dr::id.lt(a).and(dr::batch_id.ne(a)))),
                );
            }
            q.load(c).await
        })
        .map_err(store_error)?;
        records(rows, cipher)
    }

    // One statement (so one consistent read without a transaction of its own): the
    // environment's pending requests, its newest request (for the latest batch), and the
    // services' latest ended request of each action.
    async fn activity_of(
        &mut self,
        environment: EnvironmentId,
        services: &[ServiceId],
    ) -> StoreResult<(EnvironmentActivity, Vec<DeploymentRequest>)> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<DeploymentRequestRow> = db_run!(*conn, |c| {
            let of_environment = of_environment!(environment);
            let query = dr::table
                .select(DeploymentRequestRow::as_select())
                .into_boxed();
            // The text depends only on whether there are none, one or several services, so
            // both backends keep each form prepared.
            match services {
                [] => query.filter(of_environment),
                [one] => query.filter(
                    of_environment.or(dr::service_id.eq(one).and(latest_ended_of_its_kind())),
                ),
                many => query.filter(
                    of_environment.or(dr::service_id.eq_any(many).and(latest_ended_of_its_kind())),
                ),
            }
            .load(c)
            .await
        })
        .map_err(store_error)?;
        Ok(activity(records(rows, cipher)?, services))
    }

    // The service's row joined with the requests `activity_of` reads for it: one statement.
    async fn service_with_activity(
        &mut self,
        service: ServiceId,
    ) -> StoreResult<Option<(Service, EnvironmentActivity, Vec<DeploymentRequest>)>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<(ServiceRow, Option<DeploymentRequestRow>)> = db_run!(*conn, |c| {
            // Joined on the service's row: its environment's requests and its own.
            let of_environment = of_environment!(services::environment_id);
            let of_service = dr::service_id
                .eq(services::id)
                .and(latest_ended_of_its_kind());
            let query = services::table
                .left_join(dr::table.on(of_environment.or(of_service)))
                .filter(services::id.eq(service))
                .select((
                    ServiceRow::as_select(),
                    Option::<DeploymentRequestRow>::as_select(),
                ));
            LoadRows::load_rows(c, query).await
        })
        .map_err(store_error)?;
        let Some((row, requests)) = left_joined(rows) else {
            return Ok(None);
        };
        let (activity, own) = activity(records(requests, cipher)?, &[service]);
        Ok(Some((Service::from_row(row, cipher)?, activity, own)))
    }
}

#[async_trait]
impl QueueClaims for Db {
    async fn claim_next(
        &self,
        worker: &str,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<Option<DeploymentRequest>> {
        // Idle workers poll; a read first keeps them off the writer connection (SQLite) and out of
        // row locks (PostgreSQL) when nothing can start.
        let ready: Option<DeploymentRequestId> = self
            .read(move |mut conn| async move {
                db_run!(conn, |c| candidate!().first(c).await.optional()).map_err(store_error)
            })
            .await?;
        if ready.is_none() {
            return Ok(None);
        }
        let worker = worker.to_string();
        let claimed = self
            .write(move |conn| async move {
                let started = ts(now);
                let lease = ts(lease_until);
                macro_rules! claim {
                    ($c:ident, $candidate:expr) => {
                        $c.transaction(async |c| {
                            let id: Option<DeploymentRequestId> =
                                $candidate.first(c).await.optional()?;
                            if let Some(id) = id {
                                diesel::update(dr::table.find(id))
                                    .set((
                                        dr::status.eq(RUNNING),
                                        dr::claimed_by.eq(&worker),
                                        dr::started_at.eq(started),
                                        dr::lease_until.eq(lease),
                                    ))
                                    .execute(c)
                                    .await?;
                            }
                            Ok::<_, DieselError>(id)
                        })
                        .await
                        .map_err(claim_error)
                    };
                }
                let id: Result<Option<DeploymentRequestId>, StoreError> = match conn {
                    Conn::Pg(mut obj) => {
                        let c: &mut diesel_async::AsyncPgConnection = &mut obj;
                        claim!(c, candidate!().for_update().skip_locked())
                    }
                    Conn::Sqlite(mut obj) => {
                        let c: &mut crate::db::SqliteConn = &mut obj;
                        claim!(c, candidate!())
                    }
                };
                id.or_else(|e| match e {
                    StoreError::Duplicate => Ok(None),
                    other => Err(other),
                })
            })
            .await?;
        let Some(id) = claimed else { return Ok(None) };
        domain::ports::Repo::<DeploymentRequest>::get(&mut self.session().await?, id).await
    }

    async fn reclaim_expired(
        &self,
        worker: &str,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
    ) -> StoreResult<Vec<DeploymentRequest>> {
        let worker = worker.to_string();
        let cipher = self.cipher.clone();
        self.write(move |mut conn| async move {
            let (now, lease) = (ts(now), ts(lease_until));
            // The update re-checks the lease, so of two workers reclaiming at once only one
            // gets each request; each then loads only what it holds.
            let rows: Vec<DeploymentRequestRow> = db_transaction!(conn, |c| {
                let ids: Vec<String> = dr::table
                    .filter(dr::status.eq(RUNNING))
                    .filter(dr::lease_until.lt(now))
                    .select(dr::id)
                    .load(c)
                    .await?;
                diesel::update(dr::table.filter(dr::id.eq_any(&ids)))
                    .filter(dr::status.eq(RUNNING))
                    .filter(dr::lease_until.lt(now))
                    .set((dr::claimed_by.eq(&worker), dr::lease_until.eq(lease)))
                    .execute(c)
                    .await?;
                dr::table
                    .filter(dr::id.eq_any(&ids))
                    .filter(dr::claimed_by.eq(&worker))
                    .filter(dr::status.eq(RUNNING))
                    .order((dr::created_at.asc(), dr::id.asc()))
                    .select(DeploymentRequestRow::as_select())
                    .load(c)
                    .await
            })
            .map_err(store_error)?;
            records(rows, &cipher)
        })
        .await
    }

    async fn claim_cluster(
        &self,
        worker: &str,
        lease_until: OffsetDateTime,
    ) -> StoreResult<Option<domain::model::Cluster>> {
        crate::cluster_claims::claim_cluster(self, worker, lease_until).await
    }

    async fn expired_clusters(
        &self,
        now: OffsetDateTime,
    ) -> StoreResult<Vec<domain::model::Cluster>> {
        crate::cluster_claims::clusters(self, crate::cluster_claims::Clusters::Expired(now)).await
    }

    async fn on_premise_clusters(&self) -> StoreResult<Vec<domain::model::Cluster>> {
        crate::cluster_claims::clusters(self, crate::cluster_claims::Clusters::OnPremise).await
    }

    async fn queue_depth(&self) -> StoreResult<domain::ports::QueueDepth> {
        let counts: Vec<(String, i64)> = self
            .read(move |mut conn| async move {
                db_run!(conn, |c| dr::table
                    .filter(dr::status.eq_any([QUEUED, RUNNING]))
                    .group_by(dr::status)
                    .select((dr::status, diesel::dsl::count_star()))
                    .load(c)
                    .await)
                .map_err(store_error)
            })
            .await?;
        let of = |status: &str| {
            counts
                .iter()
                .find(|(s, _)| s == status)
                .map_or(0, |(_, n)| (*n).max(0) as u64)
        };
        Ok(domain::ports::QueueDepth {
            queued: of(QUEUED),
            running: of(RUNNING),
        })
    }
}
