//! Rate-limit state, idempotency keys and organization members: small tables every server
//! process shares.

use crate::db::{db_run, db_transaction, store_error, Conn, Db};
use crate::rows::{ts, utc};
use crate::schema::{idempotency_keys as ik, organization_members as om, rate_limits as rl};
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel_async::RunQueryDsl;
use domain::auth::Role;
use domain::error::StoreResult;
use domain::ids::OrganizationId;
use domain::model::Member;
use domain::ports::{
    IdempotencyClaim, IdempotencyStore, MemberStore, RateLimitStore, StoredResponse, Tx,
};
use domain::ratelimit::{Gcra, GcraLease};
use time::{OffsetDateTime, PrimitiveDateTime};

#[async_trait]
impl RateLimitStore for Db {
    async fn gcra_lease(
        &self,
        key: &str,
        gcra: Gcra,
        now_us: i64,
        wanted: u32,
    ) -> StoreResult<GcraLease> {
        let mut unit = self.begin().await?;
        let (conn, _) = unit.parts()?;
        // The row exists before it is locked, so two first requests of a key cannot both see
        // none and overwrite each other's lease.
        db_run!(*conn, |c| diesel::insert_into(rl::table)
            .values((rl::key.eq(key), rl::tat.eq(0_i64)))
            .on_conflict_do_nothing()
            .execute(c)
            .await)
        .map_err(store_error)?;
        let row = || rl::table.find(key).select(rl::tat);
        let tat: i64 = match conn {
            Conn::Pg(c) => row().for_update().first(&mut **c).await,
            // The write unit is SQLite's only writer.
            Conn::Sqlite(c) => row().first(&mut **c).await,
        }
        .map_err(store_error)?;
        let lease = gcra.lease(Some(tat), now_us, wanted);
        if lease.granted > 0 {
            db_run!(*conn, |c| diesel::update(rl::table.find(key))
                .set(rl::tat.eq(lease.tat_us))
                .execute(c)
                .await)
            .map_err(store_error)?;
        }
        Tx::commit(Box::new(unit)).await?;
        Ok(lease)
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
        db_run!(*conn, |c| om::table
            .filter(om::user_id.eq(&user))
            .order((om::created_at.asc(), om::organization_id.asc()))
            .select((om::organization_id, om::role))
            .load(c)
            .await)
        .map_err(store_error)
    }

    async fn put_member(
        &mut self,
        organization: OrganizationId,
        user: &str,
        role: Role,
        now: OffsetDateTime,
    ) -> StoreResult<()> {
        let user = user.to_string();
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::insert_into(om::table)
            .values((
                om::organization_id.eq(organization),
                om::user_id.eq(&user),
                om::role.eq(role),
                om::created_at.eq(ts(now)),
            ))
            .on_conflict((om::organization_id, om::user_id))
            .do_update()
            .set(om::role.eq(role))
            .execute(c)
            .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn members(&mut self, organization: OrganizationId) -> StoreResult<Vec<Member>> {
        let (conn, _) = self.parts()?;
        type MemberRow = (String, Role, PrimitiveDateTime, Option<String>, bool);
        let rows: Vec<MemberRow> = db_run!(*conn, |c| om::table
            .filter(om::organization_id.eq(organization))
            .order((om::created_at.asc(), om::user_id.asc()))
            .select((om::user_id, om::role, om::created_at, om::email, om::owner))
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|(user_id, role, created_at, email, owner)| Member {
                organization_id: organization,
                role,
                user_id,
                email,
                owner,
                created_at: utc(created_at),
            })
            .collect())
    }

    async fn set_member_email(
        &mut self,
        organization: OrganizationId,
        user: &str,
        email: &str,
    ) -> StoreResult<()> {
        let (user, email) = (user.to_string(), email.to_string());
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::update(
            om::table
                .filter(om::organization_id.eq(organization))
                .filter(om::user_id.eq(&user))
        )
        .set(om::email.eq(Some(&email)))
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn set_owner(&mut self, organization: OrganizationId, user: &str) -> StoreResult<()> {
        let user = user.to_string();
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::update(
            om::table.filter(om::organization_id.eq(organization))
        )
        .set(om::owner.eq(om::user_id.eq(&user)))
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn owners(
        &mut self,
        organizations: &[OrganizationId],
    ) -> StoreResult<std::collections::HashMap<OrganizationId, String>> {
        let (conn, _) = self.parts()?;
        let rows: Vec<(OrganizationId, String)> = db_run!(*conn, |c| om::table
            .filter(om::organization_id.eq_any(organizations))
            .filter(om::owner.eq(true))
            .select((om::organization_id, om::user_id))
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows.into_iter().collect())
    }

    async fn remove_member(
        &mut self,
        organization: OrganizationId,
        user: &str,
    ) -> StoreResult<bool> {
        let user = user.to_string();
        let (conn, _) = self.parts()?;
        let n = db_run!(*conn, |c| diesel::delete(
            om::table
                .filter(om::organization_id.eq(organization))
                .filter(om::user_id.eq(&user))
        )
        .execute(c)
        .await)
        .map_err(store_error)?;
        Ok(n > 0)
    }
}
