//! The logs of deployment requests.

use crate::db::{db_run, store_error};
use crate::rows::{ts, utc};
use crate::schema::deployment_logs as logs;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::changes::Change;
use domain::error::StoreResult;
use domain::ids::*;
use domain::model::*;
use domain::ports::DeploymentLogs;
use time::PrimitiveDateTime;

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = logs)]
#[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct LogRow {
    request_id: DeploymentRequestId,
    position: i64,
    environment_id: EnvironmentId,
    service_id: ServiceId,
    created_at: PrimitiveDateTime,
    step: StepName,
    level: LogLevel,
    message: String,
}

impl LogRow {
    fn of(l: &DeploymentLogLine) -> Self {
        Self {
            request_id: l.request_id,
            position: l.position,
            environment_id: l.environment_id,
            service_id: l.service_id,
            created_at: ts(l.at),
            step: l.step,
            level: l.level,
            message: l.message.clone(),
        }
    }

    fn line(self) -> DeploymentLogLine {
        DeploymentLogLine {
            request_id: self.request_id,
            environment_id: self.environment_id,
            service_id: self.service_id,
            position: self.position,
            at: utc(self.created_at),
            step: self.step,
            level: self.level,
            message: self.message,
        }
    }
}

#[async_trait]
impl DeploymentLogs for Session {
    async fn append_logs(&mut self, lines: &[DeploymentLogLine]) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        // One statement per line, in the unit's transaction: diesel-async's SQLite connection
        // has no multi-row insert.
        for line in lines {
            let row = LogRow::of(line);
            db_run!(*conn, |c| diesel::insert_into(logs::table)
                .values(&row)
                .execute(c)
                .await)
            .map_err(store_error)?;
        }
        if !lines.is_empty() {
            self.changed(Change::Logs);
        }
        Ok(())
    }

    async fn environment_logs(
        &mut self,
        environment: EnvironmentId,
        limit: i64,
    ) -> StoreResult<Vec<DeploymentLogLine>> {
        let (conn, _) = self.parts()?;
        let rows: Vec<LogRow> = db_run!(*conn, |c| logs::table
            .filter(logs::environment_id.eq(environment))
            .order((
                logs::created_at.desc(),
                logs::request_id.desc(),
                logs::position.desc(),
            ))
            .limit(limit)
            .select(LogRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows.into_iter().rev().map(LogRow::line).collect())
    }
}
