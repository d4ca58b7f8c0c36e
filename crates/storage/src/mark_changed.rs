//! The statement a variable write runs to mark the services it reaches, as a type of its own.
//!
//! diesel keeps no UPDATE prepared (an update's text may vary with its changeset), so the
//! database would parse and plan this one on every variable write. Its text here depends only
//! on the column that selects the services, so each of the three forms is prepared once per
//! connection.

use crate::rows::ts;
use crate::schema::services;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{Text, Timestamp};
use diesel::{Column, QueryResult};
use domain::model::{DeploymentStatus, RequestStatus};
use std::marker::PhantomData;
use time::{OffsetDateTime, PrimitiveDateTime};

/// Marks, among the services whose `C` is `parent`, those a change at `at` concerns: UP_TO_DATE
/// ones become OUT_OF_DATE, and those with a deployment waiting or running are changed at `at`
/// (see `VariableQueries::mark_out_of_date`).
pub(crate) struct MarkChanged<C> {
    parent: String,
    at: PrimitiveDateTime,
    _column: PhantomData<C>,
}

impl<C> MarkChanged<C> {
    pub(crate) fn new(parent: String, at: OffsetDateTime) -> Self {
        Self {
            parent,
            at: ts(at),
            _column: PhantomData,
        }
    }
}

impl<C: 'static> QueryId for MarkChanged<C> {
    type QueryId = Self;
    const HAS_STATIC_QUERY_ID: bool = true;
}

const UP_TO_DATE: &str = DeploymentStatus::UpToDate.as_str();
const OUT_OF_DATE: &str = DeploymentStatus::OutOfDate.as_str();
const WAITING: &str = RequestStatus::Queued.as_str();
const STARTED: &str = RequestStatus::Running.as_str();

impl<C, DB> QueryFragment<DB> for MarkChanged<C>
where
    DB: Backend,
    C: Column<Table = services::table>,
    String: ToSql<Text, DB>,
    str: ToSql<Text, DB>,
    PrimitiveDateTime: ToSql<Timestamp, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        out.push_sql("UPDATE services SET updated_at = ");
        out.push_bind_param::<Timestamp, _>(&self.at)?;
        out.push_sql(", deployment_status = CASE WHEN deployment_status = ");
        out.push_bind_param::<Text, _>(UP_TO_DATE)?;
        out.push_sql(" THEN ");
        out.push_bind_param::<Text, _>(OUT_OF_DATE)?;
        out.push_sql(" ELSE deployment_status END WHERE ");
        out.push_identifier(C::NAME)?;
        out.push_sql(" = ");
        out.push_bind_param::<Text, _>(&self.parent)?;
        out.push_sql(" AND (deployment_status = ");
        out.push_bind_param::<Text, _>(UP_TO_DATE)?;
        out.push_sql(
            " OR EXISTS (SELECT 1 FROM deployment_requests \
             WHERE deployment_requests.service_id = services.id \
             AND (deployment_requests.status = ",
        );
        out.push_bind_param::<Text, _>(WAITING)?;
        out.push_sql(" OR deployment_requests.status = ");
        out.push_bind_param::<Text, _>(STARTED)?;
        out.push_sql(")))");
        Ok(())
    }
}
