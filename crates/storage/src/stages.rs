//! Deployment stages and the services in them.

use crate::db::{db_run, db_transaction, store_error};
use crate::rows::*;
use crate::schema::{deployment_stage_services as members, deployment_stages as stages};
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;
use domain::ids::*;
use domain::model::*;
use domain::ports::StageQueries;
use time::OffsetDateTime;

#[async_trait]
impl StageQueries for Session {
    async fn stages_of(&mut self, environment: EnvironmentId) -> StoreResult<Vec<DeploymentStage>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<DeploymentStageRow> = db_run!(*conn, |c| stages::table
            .filter(stages::environment_id.eq(environment))
            .order((
                stages::deployment_order.asc(),
                stages::created_at.asc(),
                stages::id.asc(),
            ))
            .select(DeploymentStageRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| DeploymentStage::from_row(r, cipher))
            .collect()
    }

    async fn stage_members(&mut self, environment: EnvironmentId) -> StoreResult<Vec<StageMember>> {
        let (conn, cipher) = self.parts()?;
        let rows: Vec<StageMemberRow> = db_run!(*conn, |c| members::table
            .filter(members::environment_id.eq(environment))
            .order((members::created_at.asc(), members::service_id.asc()))
            .select(StageMemberRow::as_select())
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|r| StageMember::from_row(r, cipher))
            .collect()
    }

    async fn stage_member(&mut self, service: ServiceId) -> StoreResult<Option<StageMember>> {
        let (conn, cipher) = self.parts()?;
        let row: Option<StageMemberRow> = db_run!(*conn, |c| members::table
            .find(service)
            .select(StageMemberRow::as_select())
            .first(c)
            .await
            .optional())
        .map_err(store_error)?;
        row.map(|r| StageMember::from_row(r, cipher)).transpose()
    }

    async fn put_stage_member(&mut self, member: &StageMember) -> StoreResult<()> {
        let (conn, cipher) = self.parts()?;
        let row = member.to_row(cipher)?;
        db_run!(*conn, |c| diesel::insert_into(members::table)
            .values(&row)
            .on_conflict(members::service_id)
            .do_update()
            .set((
                members::stage_id.eq(&row.stage_id),
                members::is_skipped.eq(row.is_skipped),
                members::updated_at.eq(row.updated_at),
            ))
            .execute(c)
            .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn set_stage_orders(
        &mut self,
        orders: &[(DeploymentStageId, i32)],
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let at = ts(now);
        let (conn, _) = self.parts()?;
        db_transaction!(*conn, |c| {
            for (id, order) in orders {
                diesel::update(stages::table.find(id))
                    .set((
                        stages::deployment_order.eq(*order),
                        stages::updated_at.eq(at),
                    ))
                    .execute(c)
                    .await?;
            }
            Ok::<_, DieselError>(())
        })
        .map_err(store_error)
    }
}
