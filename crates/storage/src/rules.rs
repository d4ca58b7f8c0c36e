//! What the scheduler of deployment rules asks the store.

use crate::db::{db_run, store_error};
use crate::rows::{ts, utc};
use crate::schema::environment_deployment_rules as rules;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;
use domain::ids::EnvironmentId;
use domain::ports::RuleQueries;

#[async_trait]
impl RuleQueries for Session {
    async fn due_environment_rules(
        &mut self,
        now: time::OffsetDateTime,
        limit: i64,
    ) -> StoreResult<Vec<EnvironmentId>> {
        let now = ts(now);
        let (conn, _) = self.parts()?;
        let ids: Vec<String> = db_run!(*conn, |c| rules::table
            .filter(rules::next_turn_at.le(now))
            .order((rules::next_turn_at, rules::id))
            .select(rules::id)
            .limit(limit)
            .load(c)
            .await)
        .map_err(store_error)?;
        // An id no record could have is left out, not allowed to hold up every other rule.
        Ok(ids.iter().filter_map(|id| id.parse().ok()).collect())
    }

    async fn next_rule_turn(&mut self) -> StoreResult<Option<time::OffsetDateTime>> {
        let (conn, _) = self.parts()?;
        let next: Option<time::PrimitiveDateTime> = db_run!(*conn, |c| rules::table
            .select(diesel::dsl::min(rules::next_turn_at))
            .first(c)
            .await)
        .map_err(store_error)?;
        Ok(next.map(utc))
    }
}
