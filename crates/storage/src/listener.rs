//! Hears, on PostgreSQL, the changes other instances commit (`LISTEN`), and rings them here:
//! a deployment queued through one instance is taken by the first free worker of any.

use crate::pg_names::CHANGES_CHANNEL;
use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use domain::changes::{ChangeSet, Changes};
use futures_util::StreamExt;
use std::sync::Weak;
use std::time::Duration;

/// How long to wait before connecting again after the listening connection was lost.
const RECONNECT: Duration = Duration::from_secs(1);

/// Listens for as long as the store lives (`changes` is the store's).
pub(crate) async fn listen(url: String, changes: Weak<Changes>) {
    let mut lost_before = false;
    loop {
        match listening(&url).await {
            Ok(mut conn) => {
                let Some(bells) = changes.upgrade() else {
                    return;
                };
                // What was committed while nobody listened is looked for now (at the first
                // connection, every task is making its first look anyway).
                if lost_before {
                    tracing::info!("listening for other instances' changes again");
                    bells.ring(ChangeSet::ALL);
                }
                drop(bells);
                let mut heard = std::pin::pin!(conn.notifications_stream());
                while let Some(n) = heard.next().await {
                    let Some(bells) = changes.upgrade() else {
                        return;
                    };
                    match n {
                        Ok(n) => bells.ring(ChangeSet::from_names(&n.payload)),
                        Err(e) => {
                            tracing::warn!(error = %e, "lost the connection that listens for other instances' changes");
                            break;
                        }
                    }
                }
            }
            Err(e) => {
                if !lost_before {
                    tracing::warn!(error = %e, "cannot listen for other instances' changes; retrying (background tasks poll slowly meanwhile)");
                }
            }
        }
        lost_before = true;
        if changes.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(RECONNECT).await;
    }
}

async fn listening(url: &str) -> diesel::ConnectionResult<AsyncPgConnection> {
    let mut conn = AsyncPgConnection::establish(url).await?;
    conn.batch_execute(&format!("LISTEN {CHANGES_CHANNEL}"))
        .await
        .map_err(diesel::ConnectionError::CouldntSetupConfiguration)?;
    Ok(conn)
}
