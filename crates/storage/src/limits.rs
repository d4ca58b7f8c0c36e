//! Rate-limit state, idempotency keys and organization members: small tables every server
//! process shares.

use crate::db::{db_run, db_transaction, store_error, Conn, Db};
use crate::rows::parse;
use crate::rows::ts;
use crate::schema::{idempotency_keys as ik, organization_members as om, rate_limits as rl};
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl;
use domain::auth::Role;
use domain::error::StoreResult;
use domain::ids::OrganizationId;
use domain::ports::{
    IdempotencyClaim, IdempotencyStore, MemberStore, RateLimitStore, StoredResponse,
};
use domain::ratelimit::{Gcra, GcraStep};
use time::OffsetDateTime;

#[derive(QueryableByName)]
struct Tat {
    #[diesel(sql_type = BigInt)]
    tat: i64,
}

// One statement advances the TAT when the quota allows it; when it does not, the WHERE of the
// upsert leaves the row alone and nothing is returned. The same arithmetic as `Gcra::step`.
const STEP_PG: &str = "INSERT INTO rate_limits (key, tat) VALUES ($1, $2 + $3) \
    ON CONFLICT (key) DO UPDATE SET tat = GREATEST(rate_limits.tat, $2) + $3 \
    WHERE GREATEST(rate_limits.tat, $2) + $3 - $2 <= $4 RETURNING tat";
const STEP_SQLITE: &str = "INSERT INTO rate_limits (key, tat) VALUES (?1, ?2 + ?3) \
    ON CONFLICT (key) DO UPDATE SET tat = MAX(rate_limits.tat, ?2) + ?3 \
    WHERE MAX(rate_limits.tat, ?2) + ?3 - ?2 <= ?4 RETURNING tat";

#[async_trait]
impl RateLimitStore for Db {
    async fn gcra_step(&self, key: &str, gcra: Gcra, now_us: i64) -> StoreResult<GcraStep> {
        let key = key.to_string();
        self.write(move |mut conn| async move {
            let sql = match conn {
                Conn::Pg(..) => STEP_PG,
                Conn::Sqlite(..) => STEP_SQLITE,
            };
            let advanced: Option<Tat> = db_run!(conn, |c| diesel::sql_query(sql)
                .bind::<Text, _>(&key)
                .bind::<BigInt, _>(now_us)
                .bind::<BigInt, _>(gcra.interval_us())
                .bind::<BigInt, _>(gcra.window_us())
                .get_result(c)
                .await
                .optional())
            .map_err(store_error)?;
            if let Some(t) = advanced {
                return Ok(GcraStep {
                    allowed: true,
                    tat_us: t.tat,
                });
            }
            let tat: i64 = db_run!(conn, |c| rl::table
                .find(&key)
                .select(rl::tat)
                .first(c)
                .await)
            .map_err(store_error)?;
            Ok(GcraStep {
                allowed: false,
                tat_us: tat,
            })
        })
        .await
    }
}

#[async_trait]
impl IdempotencyStore for Db {
    async fn claim_idempotency_key(
        &self,
        principal: &str,
        key: &str,
        request_hash: &str,
        now: OffsetDateTime,
        expired_before: OffsetDateTime,
    ) -> StoreResult<IdempotencyClaim> {
        let (principal, key, hash) = (
            principal.to_string(),
            key.to_string(),
            request_hash.to_string(),
        );
        let cipher = self.cipher.clone();
        let (now, expired_before) = (ts(now), ts(expired_before));
        let known: Option<(String, Option<i32>, Option<String>)> = self
            .write(move |mut conn| async move {
                db_transaction!(conn, |c| {
                    diesel::delete(ik::table.filter(ik::created_at.lt(expired_before)))
                        .execute(c)
                        .await?;
                    let inserted = diesel::insert_into(ik::table)
                        .values((
                            ik::principal.eq(&principal),
                            ik::key.eq(&key),
                            ik::request_hash.eq(&hash),
                            ik::created_at.eq(now),
                        ))
                        .on_conflict_do_nothing()
                        .execute(c)
                        .await?;
                    if inserted == 1 {
                        return Ok::<_, DieselError>(None);
                    }
                    ik::table
                        .find((&principal, &key))
                        .select((ik::request_hash, ik::status, ik::response_body))
                        .first(c)
                        .await
                        .map(Some)
                })
                .map_err(store_error)
            })
            .await?;
        let Some((stored_hash, status, body)) = known else {
            return Ok(IdempotencyClaim::Claimed);
        };
        if stored_hash != request_hash {
            return Ok(IdempotencyClaim::Mismatch);
        }
        let response = match (status, body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).unwrap_or(500),
                body: cipher.decrypt(&body)?,
            }),
            _ => None,
        };
        Ok(IdempotencyClaim::Replay(response))
    }

    async fn save_idempotent_response(
        &self,
        principal: &str,
        key: &str,
        response: &StoredResponse,
    ) -> StoreResult<()> {
        let (principal, key) = (principal.to_string(), key.to_string());
        let body = self.cipher.encrypt(&response.body)?;
        let status = i32::from(response.status);
        self.write(move |mut conn| async move {
            db_run!(conn, |c| diesel::update(ik::table.find((&principal, &key)))
                .set((ik::status.eq(status), ik::response_body.eq(&body)))
                .execute(c)
                .await)
            .map_err(store_error)?;
            Ok(())
        })
        .await
    }

    async fn release_idempotency_key(&self, principal: &str, key: &str) -> StoreResult<()> {
        let (principal, key) = (principal.to_string(), key.to_string());
        self.write(move |mut conn| async move {
            db_run!(conn, |c| diesel::delete(ik::table.find((&principal, &key)))
                .filter(ik::status.is_null())
                .execute(c)
                .await)
            .map_err(store_error)?;
            Ok(())
        })
        .await
    }
}

#[async_trait]
impl MemberStore for Session {
    async fn memberships(&mut self, user: &str) -> StoreResult<Vec<(OrganizationId, Role)>> {
        let user = user.to_string();
        let (conn, _) = self.parts()?;
        let rows: Vec<(String, String)> = db_run!(*conn, |c| om::table
            .filter(om::user_id.eq(&user))
            .order((om::created_at.asc(), om::organization_id.asc()))
            .select((om::organization_id, om::role))
            .load(c)
            .await)
        .map_err(store_error)?;
        rows.into_iter()
            .map(|(org, role)| {
                let role = Role::from_name(&role).ok_or_else(|| {
                    domain::error::StoreError::Other(format!("unreadable role in store: {role:?}"))
                })?;
                Ok((parse("organization_id", &org)?, role))
            })
            .collect()
    }

    async fn put_member(
        &mut self,
        organization: OrganizationId,
        user: &str,
        role: Role,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let (org, user) = (organization.to_string(), user.to_string());
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::insert_into(om::table)
            .values((
                om::organization_id.eq(&org),
                om::user_id.eq(&user),
                om::role.eq(role.name()),
                om::created_at.eq(ts(now)),
            ))
            .on_conflict((om::organization_id, om::user_id))
            .do_update()
            .set(om::role.eq(role.name()))
            .execute(c)
            .await)
        .map_err(store_error)?;
        Ok(())
    }
}
