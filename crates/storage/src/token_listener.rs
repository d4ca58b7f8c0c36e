//! Hears other servers' token deletions on PostgreSQL (`LISTEN capstan_tokens`; the trigger of
//! migrations/postgres/2026-11-23-000001_token_notifications sends them), so that the token
//! cache can be trusted while, and only while, the listening connection is up.

use crate::token_cache::TokenCache;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use futures_util::StreamExt;
use std::sync::Weak;
use std::time::Duration;

/// How long the listener waits without a notification before it checks its connection.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long that check may take before the connection counts as lost.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// The pause before connecting again after a failure.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Runs until the store is dropped (its cache with it).
pub(crate) async fn listen(url: String, cache: Weak<TokenCache>) {
    loop {
        if let Ok(mut conn) = AsyncPgConnection::establish(&url).await {
            if conn.batch_execute("LISTEN capstan_tokens").await.is_ok() {
                match cache.upgrade() {
                    Some(c) => c.set_live(true),
                    None => return,
                }
                hear(&mut conn, &cache).await;
            }
        }
        match cache.upgrade() {
            Some(c) => c.set_live(false),
            None => return,
        }
        tokio::time::sleep(RETRY_AFTER).await;
    }
}

/// Forgets the cached tokens on every notification; returns when the connection is lost.
async fn hear(conn: &mut AsyncPgConnection, cache: &Weak<TokenCache>) {
    loop {
        let heard = {
            let mut notifications = std::pin::pin!(conn.notifications_stream());
            tokio::time::timeout(CHECK_EVERY, notifications.next()).await
        };
        match heard {
            Ok(Some(Ok(_))) => match cache.upgrade() {
                Some(c) => c.forget_all(),
                None => return,
            },
            // The connection failed or closed.
            Ok(Some(Err(_)) | None) => return,
            // Quiet for a while: make sure the connection still answers.
            Err(_) => {
                let alive = tokio::time::timeout(CHECK_TIMEOUT, conn.batch_execute("SELECT 1"))
                    .await
                    .is_ok_and(|r| r.is_ok());
                if !alive || cache.strong_count() == 0 {
                    return;
                }
            }
        }
    }
}
