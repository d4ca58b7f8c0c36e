//! What services' workloads print.

use crate::db::{db_run, store_error};
use crate::rows::{ts, utc};
use crate::schema::service_output as out;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::changes::Change;
use domain::error::StoreResult;
use domain::ids::*;
use domain::model::*;
use domain::ports::ServiceOutputs;
use time::PrimitiveDateTime;

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = out)]
#[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct OutputRow {
    service_id: ServiceId,
    replica: String,
    position: i64,
    id: StrictUuid,
    environment_id: EnvironmentId,
    request_id: Option<DeploymentRequestId>,
    version: String,
    created_at: PrimitiveDateTime,
    stream: OutputStream,
    message: String,
}

impl OutputRow {
    fn of(l: &OutputLine) -> Self {
        Self {
            service_id: l.service_id,
            replica: l.replica.clone(),
            position: l.position,
            id: StrictUuid(l.id),
            environment_id: l.environment_id,
            request_id: l.request_id,
            version: l.version.clone(),
            created_at: ts(l.at),
            stream: l.stream,
            message: l.message.clone(),
        }
    }

    fn line(self) -> OutputLine {
        OutputLine {
            id: self.id.0,
            service_id: self.service_id,
            environment_id: self.environment_id,
            replica: self.replica,
            request_id: self.request_id,
            version: self.version,
            position: self.position,
            at: utc(self.created_at),
            stream: self.stream,
            message: self.message,
        }
    }
}

#[async_trait]
impl ServiceOutputs for Session {
    async fn append_output(&mut self, lines: &[OutputLine]) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        // One statement per line, in the unit's transaction: diesel-async's SQLite connection
        // has no multi-row insert.
        for line in lines {
            let row = OutputRow::of(line);
            db_run!(*conn, |c| diesel::insert_into(out::table)
                .values(&row)
                .on_conflict((out::service_id, out::replica, out::position))
                .do_nothing()
                .execute(c)
                .await)
            .map_err(store_error)?;
        }
        if !lines.is_empty() {
            self.changed(Change::Output);
        }
        Ok(())
    }

    async fn trim_output(&mut self, service: ServiceId, keep: i64) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        if keep < 1 {
            db_run!(*conn, |c| diesel::delete(
                out::table.filter(out::service_id.eq(service))
            )
            .execute(c)
            .await)
            .map_err(store_error)?;
            return Ok(());
        }
        // The oldest position kept; with fewer lines than that, nothing goes.
        let oldest: Vec<i64> = db_run!(*conn, |c| out::table
            .filter(out::service_id.eq(service))
            .order(out::position.desc())
            .offset(keep - 1)
            .limit(1)
            .select(out::position)
            .load(c)
            .await)
        .map_err(store_error)?;
        if let Some(oldest) = oldest.into_iter().next() {
            db_run!(*conn, |c| diesel::delete(
                out::table
                    .filter(out::service_id.eq(service))
                    .filter(out::position.lt(oldest))
            )
            .execute(c)
            .await)
            .map_err(store_error)?;
        }
        Ok(())
    }

    async fn service_output(
        &mut self,
        service: ServiceId,
        query: &OutputQuery,
        limit: i64,
    ) -> StoreResult<Vec<OutputLine>> {
        let (conn, _) = self.parts()?;
        let after = query.after.unwrap_or(i64::MIN);
        let since = query.since.map(ts);
        let replica = query.replica.clone();
        let request = query.request;
        let rows: Vec<OutputRow> = db_run!(*conn, |c| {
            let mut q = out::table
                .filter(out::service_id.eq(service))
                .filter(out::position.gt(after))
                .into_boxed();
            if let Some(since) = since {
                q = q.filter(out::created_at.ge(since));
            }
            if let Some(replica) = replica.clone() {
                q = q.filter(out::replica.eq(replica));
            }
            if let Some(request) = request {
                q = q.filter(out::request_id.eq(request));
            }
            q.order((out::position.desc(), out::replica.desc()))
                .limit(limit)
                .select(OutputRow::as_select())
                .load(c)
                .await
        })
        .map_err(store_error)?;
        Ok(rows.into_iter().rev().map(OutputRow::line).collect())
    }
}
