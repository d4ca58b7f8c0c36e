//! The quota of each principal (GCRA, `domain::ratelimit`), kept in this process or shared by
//! every process through the store.
//!
//! Shared, a request does not write to the database: the process leases cells from the stored
//! TAT (several at once while a key is busy) and spends them locally. A lease only ever takes
//! cells that fit in the shared window, so all processes together never admit more than the
//! quota; the slack goes the other way and is bounded: a process holds at most one lease of a
//! key unspent (a hundredth of the quota, at most [`MAX_LEASE`] cells), for at most
//! [`LEASE_LIFETIME_US`], which the key's requests to other processes cannot use meanwhile.

use crate::error::ApiError;
use domain::clock::{Clock, SystemClock};
use domain::ratelimit::{Gcra, GcraStep, RateDecision};
use domain::Capstan;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;

/// Most cells a process leases of one key at once, whatever the quota.
pub const MAX_LEASE: u32 = 1000;

/// Most cells a process leases of one key at once under `gcra`: a hundredth of the quota, so a
/// small quota is shared cell by cell.
pub fn max_lease(gcra: Gcra) -> u32 {
    (gcra.limit / 100).clamp(1, MAX_LEASE)
}
/// How long leased cells may be spent; unspent ones are dropped then.
pub const LEASE_LIFETIME_US: i64 = 1_000_000;
/// Old keys are dropped every this many checks, so memory stays bounded.
const SWEEP_EVERY: u64 = 4096;

/// Cells of one key leased by this process.
#[derive(Debug, Clone, Copy)]
struct Lease {
    /// Cells still to spend.
    unspent: u32,
    /// How many the last lease asked for: doubled while the key spends them in time, back to
    /// one when it does not, so a quiet key takes one cell per request, as if unshared.
    size: u32,
    /// The stored TAT after the last lease.
    tat_us: i64,
    until_us: i64,
}

enum Where {
    /// TATs in this process (one instance, e.g. on SQLite).
    Local(Mutex<HashMap<String, i64>>),
    /// TATs in the store, shared by every instance.
    Shared {
        // Boxed: the application is much larger than the local variant.
        capstan: Box<Capstan>,
        leases: Mutex<HashMap<String, Lease>>,
    },
}

pub struct RateLimiter {
    gcra: Gcra,
    state: Where,
    checks: AtomicU64,
    /// The application's clock: a stand-in's moved clock refills quotas too.
    clock: Arc<dyn Clock>,
}

impl RateLimiter {
    pub fn local(per_hour: u32) -> Self {
        Self {
            gcra: Gcra::per_hour(per_hour),
            state: Where::Local(Mutex::new(HashMap::new())),
            checks: AtomicU64::new(0),
            clock: Arc::new(SystemClock),
        }
    }

    pub fn shared(per_hour: u32, capstan: Capstan) -> Self {
        Self {
            gcra: Gcra::per_hour(per_hour),
            state: Where::Shared {
                capstan: Box::new(capstan),
                leases: Mutex::new(HashMap::new()),
            },
            checks: AtomicU64::new(0),
            clock: Arc::new(SystemClock),
        }
    }

    /// Meters time by `clock`.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Now by this limiter's clock, in microseconds since the epoch.
    pub fn now_us(&self) -> i64 {
        (self.clock.now().unix_timestamp_nanos() / 1000) as i64
    }

    /// Forgets every quota spent in this process (a reset).
    pub fn forget(&self) {
        match &self.state {
            Where::Local(tats) => tats.lock().map(|mut t| t.clear()).unwrap_or(()),
            Where::Shared { leases, .. } => leases.lock().map(|mut l| l.clear()).unwrap_or(()),
        }
    }

    pub fn gcra(&self) -> Gcra {
        self.gcra
    }

    /// How many keys this process keeps.
    pub fn tracked_keys(&self) -> usize {
        match &self.state {
            Where::Local(tats) => tats.lock().map_or(0, |t| t.len()),
            Where::Shared { leases, .. } => leases.lock().map_or(0, |l| l.len()),
        }
    }

    /// Spends one request of `key`'s quota, if it has one left.
    pub async fn acquire(&self, key: &str) -> Result<RateDecision, ApiError> {
        let now = self.now_us();
        let sweep = self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1;
        match &self.state {
            Where::Local(tats) => {
                let mut tats = tats.lock().map_err(|_| poisoned())?;
                if sweep {
                    tats.retain(|_, tat| *tat > now);
                }
                let step = self.gcra.step(tats.get(key).copied(), now);
                if step.allowed {
                    tats.insert(key.to_string(), step.tat_us);
                }
                Ok(self.gcra.decide(step, now))
            }
            Where::Shared { capstan, leases } => {
                let wanted = {
                    let mut leases = leases.lock().map_err(|_| poisoned())?;
                    if sweep {
                        leases.retain(|_, l| l.until_us > now);
                    }
                    match leases.get_mut(key) {
                        Some(l) if l.unspent > 0 && now < l.until_us => {
                            l.unspent -= 1;
                            return Ok(self.decision(true, l.tat_us, l.unspent, now));
                        }
                        Some(l) if l.unspent == 0 && now < l.until_us => {
                            (l.size.saturating_mul(2)).min(max_lease(self.gcra))
                        }
                        _ => 1,
                    }
                };
                // No lock is held across the store's round trip.
                let lease = capstan
                    .store()
                    .gcra_lease(key, self.gcra, now, wanted)
                    .await
                    .map_err(domain::DomainError::from)?;
                let mut leases = leases.lock().map_err(|_| poisoned())?;
                let fresh = Lease {
                    unspent: lease.granted.saturating_sub(1),
                    size: wanted,
                    tat_us: lease.tat_us,
                    until_us: now + LEASE_LIFETIME_US,
                };
                // Requests of one key that ran out together each leased: their cells add up
                // rather than overwrite one another (overwritten cells would be lost).
                let mut merged = match leases.get(key) {
                    Some(l) if now < l.until_us => Lease {
                        unspent: l.unspent.saturating_add(fresh.unspent),
                        size: l.size.max(fresh.size),
                        tat_us: l.tat_us.max(fresh.tat_us),
                        until_us: fresh.until_us,
                    },
                    _ => fresh,
                };
                // A lease that found no room may still spend a cell another request leased.
                let allowed = lease.granted > 0 || merged.unspent > 0;
                if lease.granted == 0 && merged.unspent > 0 {
                    merged.unspent -= 1;
                }
                leases.insert(key.to_string(), merged);
                let unspent = merged.unspent;
                Ok(self.decision(allowed, merged.tat_us, unspent, now))
            }
        }
    }

    /// The decision after a shared lease: what the stored TAT leaves, plus the cells this
    /// process holds for the key.
    fn decision(&self, allowed: bool, tat_us: i64, unspent: u32, now: i64) -> RateDecision {
        let mut d = self.gcra.decide(GcraStep { allowed, tat_us }, now);
        if allowed {
            d.remaining = d.remaining.saturating_add(unspent).min(self.gcra.limit);
        }
        d
    }
}

fn poisoned() -> ApiError {
    ApiError::from(domain::DomainError::Internal(
        "the rate limiter's lock was poisoned".into(),
    ))
}
