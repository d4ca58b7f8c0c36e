use time::OffsetDateTime;

/// Where "now" comes from, so tests can control time.
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
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
