//! The logs of clusters: what Capstan did on each.

use crate::db::{db_run, store_error};
use crate::rows::{ts, utc};
use crate::schema::cluster_logs as logs;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;
use domain::ids::ClusterId;
use domain::model::{ClusterLogLine, ClusterLogStep, LogLevel};
use domain::ports::ClusterLogs;
use time::PrimitiveDateTime;

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = logs)]
#[diesel(check_for_backend(diesel::pg::Pg, diesel::sqlite::Sqlite))]
struct Row {
    cluster_id: ClusterId,
    position: i64,
    created_at: PrimitiveDateTime,
    step: ClusterLogStep,
    level: LogLevel,
    message: String,
}

#[async_trait]
impl ClusterLogs for Session {
    async fn append_cluster_logs(&mut self, lines: &[ClusterLogLine]) -> StoreResult<()> {
        let (conn, _) = self.parts()?;
        // One statement per line, in the unit's transaction: diesel-async's SQLite connection
        // has no multi-row insert.
        for l in lines {
            let row = Row {
                cluster_id: l.cluster_id,
                position: l.position,
                created_at: ts(l.at),
                step: l.step,
                level: l.level,
                message: l.message.clone(),
            };
            db_run!(*conn, |c| diesel::insert_into(logs::table)
                .values(&row)
                .execute(c)
                .await)
            .map_err(store_error)?;
        }
        Ok(())
    }

    async fn cluster_logs(
        &mut self,
        cluster: ClusterId,
        limit: i64,
    ) -> StoreResult<Vec<ClusterLogLine>> {
        let (conn, _) = self.parts()?;
        let rows: Vec<Row> = db_run!(*conn, |c| logs::table
            .filter(logs::cluster_id.eq(cluster))
            .order(logs::position.desc())
            .limit(limit)
            .select(Row::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .rev()
            .map(|r| ClusterLogLine {
                cluster_id: r.cluster_id,
                position: r.position,
                at: utc(r.created_at),
                step: r.step,
                level: r.level,
                message: r.message,
            })
            .collect())
    }
}
