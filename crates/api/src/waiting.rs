//! `?wait=SECONDS` on status reads: the answer comes once nothing waits or runs, or when the
//! time is up, with the state then. The store is read again when a request ends (any instance's,
//! `Change::Queue`) and at growing intervals besides (a cancel of waiting requests rings
//! nothing), each read in a unit of its own, so a waiting client holds no connection.

use crate::error::{ApiError, ApiResult};
use crate::extract::authentication;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest};
use domain::changes::{Change, Changes};
use domain::error::DomainResult;
use futures_util::future::LocalBoxFuture;
use std::future::Future;
use std::time::{Duration, Instant};

/// The longest wait a client may ask for.
pub const MAX_WAIT_SECONDS: u64 = 60;
/// The first pause between reads, doubled after each up to [`LONGEST_PAUSE`]: a state that
/// settles soon is seen soon, one that takes long costs a read a quarter of a second.
const FIRST_PAUSE: Duration = Duration::from_millis(25);
const LONGEST_PAUSE: Duration = Duration::from_millis(250);

/// How long the request may wait (none: answer at once).
#[derive(Debug, Clone, Copy, Default)]
pub struct Wait(pub Duration);

/// The `wait` query parameter: whole seconds from 0 to 60.
pub fn wait_param(query: &str) -> Result<Duration, ApiError> {
    // Every request's time limit asks; most have no `wait` and need no parsing.
    if !query.contains("wait") {
        return Ok(Duration::ZERO);
    }
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|_| ApiError::bad_request("query: malformed query string"))?;
    match pairs.iter().rev().find(|(k, _)| k == "wait") {
        None => Ok(Duration::ZERO),
        Some((_, v)) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= MAX_WAIT_SECONDS)
            .map(Duration::from_secs)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "wait: must be a whole number of seconds from 0 to {MAX_WAIT_SECONDS}, not '{v}'"
                ))
            }),
    }
}

impl FromRequest for Wait {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let parsed = wait_param(req.query_string());
        // A caller without credentials hears 401 before anything about its query.
        let auth = parsed.is_err().then(|| authentication(req));
        Box::pin(async move {
            if let Some(auth) = auth {
                auth.await?;
            }
            parsed.map(Wait)
        })
    }
}

impl Wait {
    /// Reads with `read` until `settled` says so or the wait is over; answers the last read.
    pub async fn until<T, F, Fut>(
        self,
        changes: &Changes,
        mut read: F,
        settled: impl Fn(&T) -> bool,
    ) -> ApiResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = DomainResult<T>>,
    {
        let deadline = Instant::now() + self.0;
        let mut pause = FIRST_PAUSE;
        loop {
            let ended = changes.listen(Change::Queue);
            let value = read().await?;
            let now = Instant::now();
            if settled(&value) || now >= deadline {
                return Ok(value);
            }
            tokio::select! {
                _ = ended => {}
                _ = tokio::time::sleep(pause.min(deadline - now)) => {
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_wait_ends_when_the_state_settles_or_the_time_is_up() {
        let reads = AtomicU32::new(0);
        let read = || {
            let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(n) }
        };
        let changes = Changes::default();
        // Settles on the third read, long before the time is up.
        let started = Instant::now();
        let got = Wait(Duration::from_secs(30))
            .until(&changes, read, |n| *n >= 3)
            .await
            .unwrap_or_default();
        assert_eq!(got, 3);
        assert!(started.elapsed() < Duration::from_secs(5));
        // Never settles: the last read when the time is up.
        let before = reads.load(Ordering::SeqCst);
        let got = Wait(Duration::from_millis(300))
            .until(&changes, read, |_| false)
            .await
            .unwrap_or_default();
        assert!(got - before >= 4, "read again while waiting: {got}");
        // No wait: one read.
        let before = reads.load(Ordering::SeqCst);
        Wait::default()
            .until(&changes, read, |_| false)
            .await
            .unwrap_or_default();
        assert_eq!(reads.load(Ordering::SeqCst), before + 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_reads_again_as_soon_as_a_request_ends() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let changes = Arc::new(Changes::default());
        let ended = Arc::new(AtomicBool::new(false));
        let (first_read, heard) = tokio::sync::oneshot::channel::<()>();
        let mut first_read = Some(first_read);
        let ringer = {
            let (changes, ended) = (changes.clone(), ended.clone());
            tokio::spawn(async move {
                let _ = heard.await;
                ended.store(true, Ordering::SeqCst);
                changes.ring(Change::Queue.into());
            })
        };
        let read = || {
            if let Some(tx) = first_read.take() {
                let _ = tx.send(());
            }
            let value = ended.load(Ordering::SeqCst);
            async move { Ok(value) }
        };
        // The clock stands still unless a pause runs out: none does.
        let started = tokio::time::Instant::now();
        let got = Wait(Duration::from_secs(60))
            .until(&changes, read, |v| *v)
            .await
            .unwrap_or_default();
        assert!(got);
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "woken by a pause, not the end"
        );
        ringer.await.unwrap_or_default();
    }

    #[test]
    fn the_wait_parameter_is_whole_seconds_up_to_sixty() {
        assert_eq!(wait_param("").ok(), Some(Duration::ZERO));
        assert_eq!(wait_param("wait=60").ok(), Some(Duration::from_secs(60)));
        assert_eq!(
            wait_param("page=2&wait=5").ok(),
            Some(Duration::from_secs(5))
        );
        for bad in ["wait=61", "wait=-1", "wait=1.5", "wait=soon"] {
            assert!(wait_param(bad).is_err(), "{bad}");
        }
    }
}
