//! The event log and the webhook deliveries: what the sequencer, the audit log, the stream and
//! the senders ask the store.

use crate::db::{db_run, db_transaction, load_by_ids, store_error, Conn, Db};
use crate::rows::*;
use crate::schema::events as ev;
use crate::schema::webhook_deliveries as wd;
use crate::schema::{environments, projects, services};
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel_async::{AsyncConnection, RunQueryDsl};
use domain::changes::Change;
use domain::error::StoreResult;
use domain::ids::{EnvironmentId, EventId, OrganizationId, ProjectId, ServiceId};
use domain::model::{
    DeliveryState, EnvironmentMode, EnvironmentNamed, EventFilter, OrgEvent, ProjectNamed,
    ServiceKind, ServiceNamed, WebhookDelivery,
};
use domain::ports::{DeliveryClaims, EventLog};
use time::OffsetDateTime;

const PENDING: &str = DeliveryState::Pending.as_str();

/// The events a cipherless conversion reads back (events hold no secret).
fn events_of(rows: Vec<EventRow>, cipher: &crate::cipher::Cipher) -> StoreResult<Vec<OrgEvent>> {
    rows.into_iter()
        .map(|r| OrgEvent::from_row(r, cipher))
        .collect()
}

type EnvironmentNameRow = (EnvironmentId, String, EnvironmentMode, (ProjectId, String));

/// An environment's name with its project's: the columns of an [`EnvironmentNameRow`].
#[diesel::dsl::auto_type]
fn environment_names() -> _ {
    (
        environments::id,
        environments::name,
        environments::mode,
        (projects::id, projects::name),
    )
}
type ServiceNameRow = (ServiceId, String, ServiceKind, EnvironmentNameRow);

fn environment_named(
    (id, name, mode, (project, project_name)): EnvironmentNameRow,
) -> EnvironmentNamed {
    EnvironmentNamed {
        id,
        name,
        mode,
        project: ProjectNamed {
            id: project,
            name: project_name,
        },
    }
}

#[async_trait]
impl EventLog for Session {
    async fn append_event(&mut self, event: &OrgEvent) -> StoreResult<()> {
        let (conn, cipher) = self.parts()?;
        let row = event.to_row(cipher)?;
        db_run!(*conn, |c| diesel::insert_into(ev::table)
            .values(&row)
            .execute(c)
            .await)
        .map_err(store_error)?;
        self.changed(Change::Events);
        Ok(())
    }

    async fn unsequenced_events(&mut self, limit: i64) -> StoreResult<Vec<OrgEvent>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<EventRow> = db_run!(*conn, |c| ev::table
            .filter(ev::position.is_null())
            .order((ev::created_at.asc(), ev::id.asc()))
            .limit(limit)
            .select(EventRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        events_of(rows, cipher)
    }

    async fn sequence_events(&mut self, events: &[EventId]) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        db_transaction!(*conn, |c| {
            let last: Option<i64> = ev::table
                .select(diesel::dsl::max(ev::position))
                .first(c)
                .await?;
            let mut next = last.unwrap_or(0);
            for id in events {
                next += 1;
                diesel::update(ev::table.find(id).filter(ev::position.is_null()))
                    .set(ev::position.eq(next))
                    .execute(c)
                    .await?;
            }
            Ok::<_, DieselError>(())
        })
        .map_err(store_error)?;
        if !events.is_empty() {
            self.changed(Change::Sequenced);
        }
        Ok(())
    }

    async fn events_after(
        &mut self,
        organization: OrganizationId,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<OrgEvent>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<EventRow> = db_run!(*conn, |c| ev::table
            .filter(ev::organization_id.eq(organization))
            .filter(ev::position.gt(after))
            .order(ev::position.asc())
            .limit(limit)
            .select(EventRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        events_of(rows, cipher)
    }

    async fn last_position(&mut self, organization: OrganizationId) -> StoreResult<i64> {
        let (conn, _) = self.parts()?;
        let last: Option<i64> = db_run!(*conn, |c| ev::table
            .filter(ev::organization_id.eq(organization))
            .select(diesel::dsl::max(ev::position))
            .first(c)
            .await)
        .map_err(store_error)?;
        Ok(last.unwrap_or(0))
    }

    async fn audit_events(
        &mut self,
        organization: OrganizationId,
        filter: &EventFilter,
        bound: Option<OffsetDateTime>,
        newer: bool,
        limit: i64,
    ) -> StoreResult<Vec<OrgEvent>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<EventRow> = db_run!(*conn, |c| {
            let mut q = ev::table
                .filter(ev::organization_id.eq(organization))
                .filter(ev::event_type.is_not_null())
                .into_boxed();
            if let Some(t) = filter.from {
                q = q.filter(ev::created_at.ge(ts(t)));
            }
            if let Some(t) = filter.to {
                q = q.filter(ev::created_at.le(ts(t)));
            }
            if let Some(t) = filter.event_type {
                q = q.filter(ev::event_type.eq(t));
            }
            if let Some(t) = filter.target_type {
                q = q.filter(ev::target_type.eq(t));
            }
            if let Some(t) = filter.target_id {
                q = q.filter(ev::target_id.eq(domain::ids::StrictUuid(t)));
            }
            if let Some(t) = filter.sub_target_type {
                q = q.filter(ev::sub_target_type.eq(t));
            }
            if let Some(t) = &filter.triggered_by {
                q = q.filter(ev::triggered_by.eq(t.clone()));
            }
            if let Some(t) = filter.origin {
                q = q.filter(ev::origin.eq(t));
            }
            if let Some(t) = filter.project_id {
                q = q.filter(ev::project_id.eq(t));
            }
            if let Some(t) = filter.environment_id {
                q = q.filter(ev::environment_id.eq(t));
            }
            q = match (bound, newer) {
                (Some(t), false) => q.filter(ev::created_at.lt(ts(t))),
                (Some(t), true) => q.filter(ev::created_at.gt(ts(t))),
                (None, _) => q,
            };
            q = if newer {
                q.order((ev::created_at.asc(), ev::id.asc()))
            } else {
                q.order((ev::created_at.desc(), ev::id.desc()))
            };
            q.limit(limit).select(EventRow::as_select()).load(c).await
        })
        .map_err(store_error)?;
        events_of(rows, cipher)
    }

    async fn services_named(&mut self, ids: &[ServiceId]) -> StoreResult<Vec<ServiceNamed>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (conn, _) = self.parts()?;
        let rows: Vec<ServiceNameRow> = load_by_ids!(*conn, ids, services::id, |by_id| {
            services::table
                .inner_join(environments::table.on(environments::id.eq(services::environment_id)))
                .inner_join(projects::table.on(projects::id.eq(environments::project_id)))
                .filter(by_id)
                .select((
                    services::id,
                    services::name,
                    services::kind,
                    environment_names(),
                ))
        })
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|(id, name, kind, environment)| ServiceNamed {
                id,
                name,
                kind,
                environment: environment_named(environment),
            })
            .collect())
    }

    async fn environments_named(
        &mut self,
        ids: &[EnvironmentId],
    ) -> StoreResult<Vec<EnvironmentNamed>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (conn, _) = self.parts()?;
        let rows: Vec<EnvironmentNameRow> = load_by_ids!(*conn, ids, environments::id, |by_id| {
            environments::table
                .inner_join(projects::table.on(projects::id.eq(environments::project_id)))
                .filter(by_id)
                .select(environment_names())
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().map(environment_named).collect())
    }

    async fn forget_events(&mut self, organization: OrganizationId) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::delete(
            ev::table.filter(ev::organization_id.eq(organization))
        )
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn insert_deliveries(&mut self, deliveries: &[WebhookDelivery]) -> StoreResult<()> {
        if deliveries.is_empty() {
            return Ok(());
        }
        let (conn, cipher) = self.parts()?;
        let rows = deliveries
            .iter()
            .map(|d| d.to_row(cipher))
            .collect::<StoreResult<Vec<_>>>()?;
        // One statement per row: diesel's batch insert of rows with optional columns needs the
        // DEFAULT keyword, which SQLite lacks.
        for row in &rows {
            db_run!(*conn, |c| diesel::insert_into(wd::table)
                .values(row)
                .execute(c)
                .await)
            .map_err(store_error)?;
        }
        self.changed(Change::Deliveries);
        Ok(())
    }

    async fn settle_delivery(
        &mut self,
        delivery: &WebhookDelivery,
        worker: &str,
    ) -> StoreResult<bool> {
        let id = delivery.id;
        let worker = worker.to_string();
        let state = delivery.state;
        let next = ts(delivery.next_attempt_at);
        let attempts = delivery.attempts;
        let (conn, _) = self.parts()?;
        let n = db_run!(*conn, |c| diesel::update(
            wd::table.find(id).filter(wd::claimed_by.eq(&worker))
        )
        .set((
            wd::state.eq(state),
            wd::attempts.eq(attempts),
            wd::next_attempt_at.eq(next),
            wd::claimed_by.eq(None::<String>),
            wd::lease_until.eq(None::<time::PrimitiveDateTime>),
        ))
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(n > 0)
    }
}

/// How many of the first PENDING deliveries [`DeliveryClaims::next_delivery_due`] looks at.
const NEXT_DUE_LOOKAHEAD: i64 = 64;

/// The deliveries that are due and free at `$now`, oldest due first.
macro_rules! due {
    ($now:expr) => {
        wd::table
            .filter(wd::state.eq(PENDING))
            .filter(wd::next_attempt_at.le($now))
            .filter(wd::lease_until.is_null().or(wd::lease_until.lt($now)))
            .order((wd::next_attempt_at.asc(), wd::id.asc()))
            .select(wd::id)
    };
}

#[async_trait]
impl DeliveryClaims for Db {
    async fn claim_deliveries(
        &self,
        worker: &str,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<WebhookDelivery>> {
        // Senders ask `next_delivery_due` first, a read, and claim only when something is due.
        let at = ts(now);
        let worker = worker.to_string();
        let lease = ts(lease_until);
        let rows: Vec<DeliveryRow> = self
            .write(move |conn| async move {
                macro_rules! claim {
                    ($c:ident, $candidates:expr) => {
                        $c.transaction(async |c| {
                            let ids: Vec<String> = $candidates.limit(limit).load(c).await?;
                            diesel::update(wd::table.filter(wd::id.eq_any(&ids)))
                                .set((wd::claimed_by.eq(&worker), wd::lease_until.eq(lease)))
                                .execute(c)
                                .await?;
                            wd::table
                                .filter(wd::id.eq_any(&ids))
                                .select(DeliveryRow::as_select())
                                .load(c)
                                .await
                        })
                        .await
                        .map_err(store_error)
                    };
                }
                match conn {
                    Conn::Pg(mut obj) => {
                        let c: &mut diesel_async::AsyncPgConnection = &mut obj;
                        // Rows another sender is claiming are skipped, not waited for.
                        claim!(c, due!(at).for_update().skip_locked())
                    }
                    Conn::Sqlite(mut obj) => {
                        let c: &mut crate::db::SqliteConn = &mut obj;
                        claim!(c, due!(at))
                    }
                }
            })
            .await?;
        rows.into_iter()
            .map(|r| WebhookDelivery::from_row(r, &self.cipher))
            .collect()
    }

    async fn next_delivery_due(&self, now: OffsetDateTime) -> StoreResult<Option<OffsetDateTime>> {
        // The first few by due time are enough: a delivery held by a live claim is being sent,
        // and its sender looks again once it has settled it.
        let rows: Vec<(time::PrimitiveDateTime, Option<time::PrimitiveDateTime>)> = self
            .read(move |mut conn| async move {
                db_run!(conn, |c| wd::table
                    .filter(wd::state.eq(PENDING))
                    .order((wd::next_attempt_at.asc(), wd::id.asc()))
                    .select((wd::next_attempt_at, wd::lease_until))
                    .limit(NEXT_DUE_LOOKAHEAD)
                    .load(c)
                    .await)
                .map_err(store_error)
            })
            .await?;
        Ok(rows
            .into_iter()
            .map(|(due, lease)| {
                let due = utc(due);
                match lease.map(utc) {
                    Some(lease) if lease > now && lease > due => lease,
                    _ => due,
                }
            })
            .min())
    }

    async fn has_unsequenced_events(&self) -> StoreResult<bool> {
        let first: Option<String> = self
            .read(move |mut conn| async move {
                db_run!(conn, |c| ev::table
                    .filter(ev::position.is_null())
                    .select(ev::id)
                    .first(c)
                    .await
                    .optional())
                .map_err(store_error)
            })
            .await?;
        Ok(first.is_some())
    }
}
