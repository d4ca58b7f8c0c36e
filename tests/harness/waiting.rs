//! Waiting for what a test expects to happen, within a time, instead of a deadline loop in
//! every test.

use super::*;

/// How often [`eventually`] looks again.
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// Asks `look` until it answers `Some`, and returns that; once `within` has passed, fails the
/// test with `what` (made then, so that it can say what is seen at that moment).
pub async fn eventually<T>(
    within: Duration,
    what: impl Fn() -> String,
    mut look: impl AsyncFnMut() -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = look().await {
            return found;
        }
        assert!(started.elapsed() < within, "{}", what());
        tokio::time::sleep(LOOK_AGAIN).await;
    }
}
