//! When deployed cron jobs run next.

use crate::db::{db_run, store_error};
use crate::rows::{ts, utc};
use crate::schema::cron_turns as ct;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::changes::Change;
use domain::error::StoreResult;
use domain::ids::*;
use domain::model::CronTurn;
use domain::ports::CronTurns;
use time::{OffsetDateTime, PrimitiveDateTime};

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = ct)]
#[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct TurnRow {
    service_id: ServiceId,
    environment_id: EnvironmentId,
    next_run_at: PrimitiveDateTime,
}

impl TurnRow {
    fn turn(self) -> CronTurn {
        CronTurn {
            service_id: self.service_id,
            environment_id: self.environment_id,
            next_run_at: utc(self.next_run_at),
        }
    }
}

#[async_trait]
impl CronTurns for Session {
    async fn put_cron_turn(&mut self, turn: &CronTurn) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        let row = TurnRow {
            service_id: turn.service_id,
            environment_id: turn.environment_id,
            next_run_at: ts(turn.next_run_at),
        };
        db_run!(*conn, |c| diesel::insert_into(ct::table)
            .values(&row)
            .on_conflict(ct::service_id)
            .do_update()
            .set(&row)
            .execute(c)
            .await)
        .map_err(store_error)?;
        // The scheduler sleeps until the earliest turn: this one may be earlier.
        self.changed(Change::Rules);
        Ok(())
    }

    async fn delete_cron_turn(&mut self, service: ServiceId) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::delete(
            ct::table.filter(ct::service_id.eq(service))
        )
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn cron_turn(&mut self, service: ServiceId) -> StoreResult<Option<CronTurn>> {
        let (conn, _) = self.parts()?;
        let rows: Vec<TurnRow> = db_run!(*conn, |c| ct::table
            .filter(ct::service_id.eq(service))
            .select(TurnRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows.into_iter().next().map(TurnRow::turn))
    }

    async fn due_cron_turns(
        &mut self,
        now: OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<CronTurn>> {
        let (conn, _) = self.parts()?;
        let now = ts(now);
        let rows: Vec<TurnRow> = db_run!(*conn, |c| ct::table
            .filter(ct::next_run_at.le(now))
            .order((ct::next_run_at.asc(), ct::service_id.asc()))
            .limit(limit)
            .select(TurnRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows.into_iter().map(TurnRow::turn).collect())
    }

    async fn next_cron_turn(&mut self) -> StoreResult<Option<OffsetDateTime>> {
        let (conn, _) = self.parts()?;
        let found: Vec<PrimitiveDateTime> = db_run!(*conn, |c| ct::table
            .order(ct::next_run_at.asc())
            .limit(1)
            .select(ct::next_run_at)
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(found.into_iter().next().map(utc))
    }
}
