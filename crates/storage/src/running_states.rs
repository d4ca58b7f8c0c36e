//! What engines saw run, one row a service.

use crate::db::{db_run, load_by_ids, store_error};
use crate::rows::{ts, utc};
use crate::schema::running_states as rs;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::changes::Change;
use domain::error::{StoreError, StoreResult};
use domain::ids::*;
use domain::model::*;
use domain::ports::RunningStates;
use time::PrimitiveDateTime;

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = rs)]
#[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct RunningRow {
    service_id: ServiceId,
    environment_id: EnvironmentId,
    state: RunState,
    replicas: String,
    endpoints: String,
    observed_at: PrimitiveDateTime,
}

fn json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value).map_err(|e| StoreError::Other(e.to_string()))
}

fn parsed<T: serde::de::DeserializeOwned>(text: &str) -> StoreResult<T> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Other(format!("unreadable running state: {e}")))
}

impl RunningRow {
    fn of(s: &RunningState) -> StoreResult<Self> {
        Ok(Self {
            service_id: s.service_id,
            environment_id: s.environment_id,
            state: s.state,
            replicas: json(&s.replicas)?,
            endpoints: json(&s.endpoints)?,
            observed_at: ts(s.observed_at),
        })
    }

    fn state(self) -> StoreResult<RunningState> {
        Ok(RunningState {
            service_id: self.service_id,
            environment_id: self.environment_id,
            state: self.state,
            replicas: parsed(&self.replicas)?,
            endpoints: parsed(&self.endpoints)?,
            observed_at: utc(self.observed_at),
            reported_by: None,
        })
    }
}

#[async_trait]
impl RunningStates for Session {
    async fn put_running_state(&mut self, state: &RunningState) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        let row = RunningRow::of(state)?;
        db_run!(*conn, |c| diesel::insert_into(rs::table)
            .values(&row)
            .on_conflict(rs::service_id)
            .do_update()
            .set(&row)
            .execute(c)
            .await)
        .map_err(store_error)?;
        self.changed(Change::Running);
        Ok(())
    }

    async fn running_states(&mut self, services: &[ServiceId]) -> StoreResult<Vec<RunningState>> {
        if services.is_empty() {
            return Ok(Vec::new());
        }
        let (conn, _) = self.parts()?;
        let rows: Vec<RunningRow> = load_by_ids!(*conn, services, rs::service_id, |by_id| {
            rs::table.filter(by_id).select(RunningRow::as_select())
        })
        .map_err(store_error)?;
        rows.into_iter().map(RunningRow::state).collect()
    }

    async fn all_running_states(&mut self) -> StoreResult<Vec<RunningState>> {
        let (conn, _) = self.parts()?;
        let rows: Vec<RunningRow> = db_run!(*conn, |c| rs::table
            .select(RunningRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter().map(RunningRow::state).collect()
    }
}
