use crate::changes::{Rung, Signal};
use time::OffsetDateTime;

/// Where "now" comes from, so tests can control time.
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;

    /// Completes when the clock is moved (not as it runs on), for tasks that sleep until an
    /// hour; none for a clock that is never moved.
    fn moved(&self) -> Option<Rung<'_>> {
        None
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        truncate_to_micros(OffsetDateTime::now_utc())
    }
}

/// Both databases keep microseconds; truncating up front makes a stored record read back equal.
pub fn truncate_to_micros(t: OffsetDateTime) -> OffsetDateTime {
    let micros = t.microsecond();
    t.replace_microsecond(micros).unwrap_or(t)
}

/// A clock that tests (and operators of a stand-in) move: it runs at the system's pace from
/// wherever it was last set, so waits and leases keep working between moves.
#[derive(Debug, Default)]
pub struct ManualClock {
    /// How far this clock is ahead of the system's (behind, when negative).
    offset: std::sync::Mutex<time::Duration>,
    /// Rung at each move.
    moves: Signal,
}

impl ManualClock {
    /// A clock that reads `at` now.
    pub fn at(at: OffsetDateTime) -> Self {
        let clock = Self::default();
        clock.set(at);
        clock
    }

    /// From now on the clock reads `at`, and runs on from there; false (and the clock
    /// unmoved) when `at` is within a century of the dates it can tell (years -9999 to 9999),
    /// where the application's own date arithmetic would run out.
    pub fn set(&self, at: OffsetDateTime) -> bool {
        self.shift(|_| Some(at - OffsetDateTime::now_utc()))
    }

    /// Moves the clock by `by`; false (and the clock unmoved) as for [`ManualClock::set`].
    pub fn advance(&self, by: time::Duration) -> bool {
        self.shift(|offset| offset.checked_add(by))
    }

    fn shift(&self, to: impl FnOnce(time::Duration) -> Option<time::Duration>) -> bool {
        let mut offset = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let century = time::Duration::days(36_525);
        let roomy = |o: &time::Duration| {
            let at = OffsetDateTime::now_utc().checked_add(*o);
            at.and_then(|t| t.checked_add(century)).is_some()
                && at.and_then(|t| t.checked_sub(century)).is_some()
        };
        match to(*offset).filter(roomy) {
            Some(o) => {
                *offset = o;
                drop(offset);
                self.moves.ring();
                true
            }
            None => false,
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        let offset = *self.offset.lock().unwrap_or_else(|e| e.into_inner());
        let now = OffsetDateTime::now_utc();
        truncate_to_micros(now.checked_add(offset).unwrap_or(now))
    }

    fn moved(&self) -> Option<Rung<'_>> {
        Some(self.moves.listen())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_manual_clock_reads_what_it_was_set_to_and_runs_on() {
        let clock = ManualClock::at(datetime!(2030-01-01 00:00 UTC));
        let read = clock.now();
        assert!(read >= datetime!(2030-01-01 00:00 UTC));
        assert!(read < datetime!(2030-01-01 00:01 UTC));
        clock.advance(time::Duration::hours(2));
        assert!(clock.now() >= datetime!(2030-01-01 02:00 UTC));
        clock.set(datetime!(2020-06-01 12:00 UTC));
        assert!(clock.now() < datetime!(2020-06-01 12:01 UTC));
        // Past the dates it can tell, it stays where it is.
        assert!(!clock.advance(time::Duration::seconds(i64::MAX)));
        assert!(!clock.advance(time::Duration::days(365 * 9000)));
        assert!(!clock.set(datetime!(9999-01-01 00:00 UTC)));
        assert!(clock.now() < datetime!(2020-06-01 12:01 UTC));
    }

    #[test]
    fn a_manual_clock_tells_of_its_moves_and_the_system_clock_of_none() {
        use futures_util::FutureExt;
        let clock = ManualClock::at(datetime!(2030-01-01 00:00 UTC));
        let mut moved = Box::pin(clock.moved().expect("a manual clock tells"));
        assert!(moved.as_mut().now_or_never().is_none(), "not moved yet");
        assert!(!clock.advance(time::Duration::seconds(i64::MAX)));
        assert!(
            moved.as_mut().now_or_never().is_none(),
            "a refused move is none"
        );
        clock.advance(time::Duration::hours(1));
        assert!(moved.now_or_never().is_some());
        assert!(SystemClock.moved().is_none());
    }
}
