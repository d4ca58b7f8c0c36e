//! Rate limiting by GCRA (the generic cell rate algorithm): each key has a "theoretical arrival
//! time" (TAT); a request moves it one emission interval later, and is allowed while the TAT
//! stays within one window (the quota's period) of now. This module is the one implementation
//! of that arithmetic: a limiter in one process steps a TAT it keeps in memory, a limiter shared
//! by several processes leases cells from a TAT the store keeps (under a lock), with the same
//! functions.

/// A quota of `limit` requests per `period_us` microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    pub limit: u32,
    pub period_us: i64,
}

/// What a request gets: allowed or not, and the members of the rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    pub limit: u32,
    pub remaining: u32,
    /// Unix seconds at which `remaining` is back at `limit`.
    pub reset: i64,
    /// Seconds to wait before a retry can succeed (refused requests only).
    pub retry_after: Option<u64>,
}

/// Cells taken at once from a TAT: how many fitted (at most the number wanted), and the TAT
/// after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraLease {
    pub granted: u32,
    pub tat_us: i64,
}

/// One request's step: whether it advanced the TAT, and the TAT it holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraStep {
    pub allowed: bool,
    pub tat_us: i64,
}

const SECOND: i64 = 1_000_000;

fn ceil_seconds(us: i64) -> i64 {
    (us + SECOND - 1).div_euclid(SECOND)
}

impl Gcra {
    pub fn per_hour(limit: u32) -> Self {
        Self {
            limit: limit.max(1),
            period_us: 3600 * SECOND,
        }
    }

    /// Time one request costs.
    pub fn interval_us(&self) -> i64 {
        (self.period_us / i64::from(self.limit.max(1))).max(1)
    }

    /// How far ahead of now the TAT may run: the whole quota.
    pub fn window_us(&self) -> i64 {
        self.interval_us() * i64::from(self.limit.max(1))
    }

    /// Takes up to `wanted` cells from `tat` (none for a new key) at `now`: as many as fit in
    /// the window. Nothing fits: the TAT stays as it was.
    pub fn lease(&self, tat_us: Option<i64>, now_us: i64, wanted: u32) -> GcraLease {
        // Requests never take a TAT past a whole window ahead of now: one that is comes from
        // a clock moved back (a stand-in's manual clock), and the key starts afresh rather
        // than waiting out the distance moved.
        let tat_us = tat_us.filter(|tat| *tat <= now_us.saturating_add(self.window_us()));
        let start = tat_us.unwrap_or(now_us).max(now_us);
        let interval = self.interval_us();
        let room = (self.window_us() - (start - now_us)).div_euclid(interval);
        let granted = room.clamp(0, i64::from(wanted));
        if granted == 0 {
            return GcraLease {
                granted: 0,
                tat_us: tat_us.unwrap_or(now_us),
            };
        }
        GcraLease {
            granted: granted as u32,
            tat_us: start + granted * interval,
        }
    }

    /// One request's step from `tat` (none for a new key) at `now`.
    pub fn step(&self, tat_us: Option<i64>, now_us: i64) -> GcraStep {
        let lease = self.lease(tat_us, now_us, 1);
        GcraStep {
            allowed: lease.granted == 1,
            tat_us: lease.tat_us,
        }
    }

    /// The decision and header values after the store's step.
    pub fn decide(&self, step: GcraStep, now_us: i64) -> RateDecision {
        let interval = self.interval_us();
        let ahead = (step.tat_us - now_us).max(0);
        let remaining = ((self.window_us() - ahead) / interval).clamp(0, i64::from(self.limit));
        RateDecision {
            allowed: step.allowed,
            limit: self.limit,
            remaining: if step.allowed { remaining as u32 } else { 0 },
            reset: ceil_seconds(step.tat_us.max(now_us)),
            retry_after: (!step.allowed).then(|| {
                let wait = step.tat_us + interval - self.window_us() - now_us;
                ceil_seconds(wait).max(1) as u64
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_takes_what_fits_and_a_step_is_a_lease_of_one() {
        let g = Gcra::per_hour(10);
        let now = 5_000 * SECOND;
        let first = g.lease(None, now, 4);
        assert_eq!(first.granted, 4);
        assert_eq!(first.tat_us, now + 4 * g.interval_us());
        let rest = g.lease(Some(first.tat_us), now, 100);
        assert_eq!(rest.granted, 6, "only the window's remaining six fit");
        assert_eq!(rest.tat_us, now + g.window_us());
        let none = g.lease(Some(rest.tat_us), now, 3);
        assert_eq!(none.granted, 0);
        assert_eq!(none.tat_us, rest.tat_us, "nothing taken, nothing moved");
        // Stepping one at a time agrees with leasing all at once.
        let mut tat = None;
        for _ in 0..10 {
            let s = g.step(tat, now);
            assert!(s.allowed);
            tat = Some(s.tat_us);
        }
        assert_eq!(tat, Some(rest.tat_us));
        assert!(!g.step(tat, now).allowed);
    }

    #[test]
    fn a_clock_moved_back_past_the_window_starts_the_key_afresh() {
        let g = Gcra::per_hour(10);
        let later = 9_000 * SECOND;
        // Half spent, then a minute back: the TAT is within a window of now, and what was
        // spent stays spent (a minute's worth more, as the clock says it is earlier).
        let half = g.lease(None, later, 5);
        assert_eq!(
            g.lease(Some(half.tat_us), later - 60 * SECOND, 100).granted,
            4
        );
        let spent = g.lease(None, later, 10);
        assert!(!g.step(Some(spent.tat_us), later).allowed);
        // Two hours back: no request could have put the TAT there; the quota is whole.
        let earlier = later - 2 * 3600 * SECOND;
        let afresh = g.lease(Some(spent.tat_us), earlier, 100);
        assert_eq!(afresh.granted, 10);
        assert_eq!(afresh.tat_us, earlier + g.window_us());
    }

    #[test]
    fn the_quota_is_spent_then_refilled_continuously() {
        let g = Gcra::per_hour(5);
        let now = 1_000 * SECOND;
        let mut tat = None;
        for expected_remaining in [4, 3, 2, 1, 0] {
            let step = g.step(tat, now);
            let d = g.decide(step, now);
            assert!(d.allowed);
            assert_eq!(d.remaining, expected_remaining);
            assert_eq!(d.limit, 5);
            tat = Some(step.tat_us);
        }
        let refused = g.step(tat, now);
        let d = g.decide(refused, now);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        assert_eq!(d.retry_after, Some(720), "one interval: 3600 s / 5");
        assert_eq!(d.reset, 1_000 + 3600);
        assert_eq!(refused.tat_us, tat.unwrap(), "a refusal costs nothing");
        // One interval later, one request is allowed again.
        let later = now + g.interval_us();
        let step = g.step(tat, later);
        assert!(step.allowed);
        assert_eq!(g.decide(step, later).remaining, 0);
    }
}
