//! A cron job's schedule: a cron expression (`minute hour day-of-month month day-of-week`, or
//! `@hourly` and its kin) read in a time zone, and the first time it names after another.

use crate::ids::{EnvironmentId, ServiceId};
use time::OffsetDateTime;

/// When a deployed cron job runs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronTurn {
    pub service_id: ServiceId,
    pub environment_id: EnvironmentId,
    pub next_run_at: OffsetDateTime,
}

/// The minutes, hours, days, months and weekdays an expression names, each as a bit set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronSchedule {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether day-of-month and day-of-week were `*`: a restricted one alone decides, both
    /// restricted match either (as cron has it).
    any_day: bool,
    any_weekday: bool,
}

/// The bits of one field: `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`, lists.
fn field(text: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        let lower = s.to_ascii_lowercase();
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(min + u32::try_from(i).unwrap_or(0));
        }
        s.parse::<u32>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| format!("'{s}' is not from {min} to {max}"))
    };
    let mut bits = 0u64;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("'{s}' is not a step"))?,
            ),
            None => (part, 1),
        };
        let (from, to) = if range == "*" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?)
        } else {
            let v = value(range)?;
            (v, if part.contains('/') { max } else { v })
        };
        if from > to {
            return Err(format!("'{range}' goes backwards"));
        }
        let mut v = from;
        while v <= to {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl CronSchedule {
    /// Reads an expression; the error says what is wrong. Six fields are read as seconds
    /// first (the seconds are dropped: a cron job runs at most once a minute).
    pub fn parse(expression: &str) -> Result<CronSchedule, String> {
        let expression = expression.trim();
        let expanded = match expression.to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *".to_string(),
            "@monthly" => "0 0 1 * *".to_string(),
            "@weekly" => "0 0 * * 0".to_string(),
            "@daily" | "@midnight" => "0 0 * * *".to_string(),
            "@hourly" => "0 * * * *".to_string(),
            other if other.starts_with('@') => return Err(format!("'{other}' is not known")),
            _ => expression.to_string(),
        };
        let mut fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() == 6 {
            fields.remove(0);
        }
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err("must have five fields: minute hour day-of-month month day-of-week".into());
        };
        // Sunday is 0 or 7.
        let weekdays = field(weekday, 0, 7, WEEKDAYS)?;
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(CronSchedule {
            minutes: field(minute, 0, 59, &[])?,
            hours: u32::try_from(field(hour, 0, 23, &[])?).unwrap_or(0),
            days: u32::try_from(field(day, 1, 31, &[])?).unwrap_or(0),
            months: u16::try_from(field(month, 1, 12, MONTHS)?).unwrap_or(0),
            weekdays: u8::try_from(weekdays).unwrap_or(0),
            any_day: day == "*",
            any_weekday: weekday == "*",
        })
    }

    fn day_matches(&self, date: jiff::civil::Date) -> bool {
        let day = self.days & (1 << date.day()) != 0;
        let weekday = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (false, true) => day,
            (true, false) => weekday,
            (false, false) => day || weekday,
        }
    }

    /// The first minute after `after` the schedule names, read in `zone` (an IANA name); none
    /// for an unknown zone or a schedule naming no date in the next eight years (31 February).
    pub fn next_after(&self, after: OffsetDateTime, zone: &str) -> Option<OffsetDateTime> {
        let zone = jiff::tz::TimeZone::get(zone).ok()?;
        let start = jiff::Timestamp::new(after.unix_timestamp(), 0).ok()?;
        let local = start.to_zoned(zone.clone()).datetime();
        // The next whole minute.
        let mut t = local
            .with()
            .second(0)
            .subsec_nanosecond(0)
            .build()
            .ok()?
            .checked_add(jiff::Span::new().minutes(1))
            .ok()?;
        let limit = local.year() + 8;
        while t.year() <= limit {
            if self.months & (1 << t.month()) == 0 {
                t = t
                    .first_of_month()
                    .checked_add(jiff::Span::new().months(1))
                    .ok()?;
                t = t.with().hour(0).minute(0).build().ok()?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().tomorrow().ok()?.at(0, 0, 0, 0);
                continue;
            }
            if self.hours & (1 << t.hour()) == 0 {
                t = t
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(jiff::Span::new().hours(1))
                    .ok()?;
                continue;
            }
            if self.minutes & (1 << t.minute()) == 0 {
                t = t.checked_add(jiff::Span::new().minutes(1)).ok()?;
                continue;
            }
            // A local time a daylight-saving change skips moves on by the gap; a repeated
            // one happens the first time.
            let zoned = t.to_zoned(zone.clone()).ok()?;
            let at = OffsetDateTime::from_unix_timestamp(zoned.timestamp().as_second()).ok()?;
            if at > after {
                return Some(at);
            }
            t = t.checked_add(jiff::Span::new().minutes(1)).ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn next(expr: &str, after: OffsetDateTime, zone: &str) -> OffsetDateTime {
        CronSchedule::parse(expr)
            .unwrap()
            .next_after(after, zone)
            .unwrap()
    }

    #[test]
    fn expressions_are_read_or_refused_saying_why() {
        assert!(CronSchedule::parse("*/5 * * * *").is_ok());
        assert!(CronSchedule::parse("0 3 * * mon-fri").is_ok());
        assert!(CronSchedule::parse("@hourly").is_ok());
        assert!(
            CronSchedule::parse("0 */5 * * * *").is_ok(),
            "seconds first"
        );
        assert!(CronSchedule::parse("61 * * * *")
            .unwrap_err()
            .contains("61"));
        assert!(CronSchedule::parse("* * *")
            .unwrap_err()
            .contains("five fields"));
        assert!(CronSchedule::parse("*/0 * * * *")
            .unwrap_err()
            .contains("step"));
        assert!(CronSchedule::parse("5-2 * * * *")
            .unwrap_err()
            .contains("backwards"));
        assert!(CronSchedule::parse("@sometimes").is_err());
    }

    #[test]
    fn the_next_minute_named_comes_after() {
        let at = datetime!(2026-11-27 10:07:30 UTC);
        assert_eq!(
            next("*/5 * * * *", at, "Etc/UTC"),
            datetime!(2026-11-27 10:10 UTC)
        );
        assert_eq!(
            next("* * * * *", at, "Etc/UTC"),
            datetime!(2026-11-27 10:08 UTC)
        );
        assert_eq!(
            next("0 3 * * *", at, "Etc/UTC"),
            datetime!(2026-11-28 03:00 UTC)
        );
        assert_eq!(
            next("@monthly", at, "Etc/UTC"),
            datetime!(2026-12-01 00:00 UTC)
        );
        assert_eq!(
            next("0 0 1 jan *", at, "Etc/UTC"),
            datetime!(2027-01-01 00:00 UTC)
        );
        // 2026-11-27 is a Friday: the next Monday.
        assert_eq!(
            next("30 9 * * 1", at, "Etc/UTC"),
            datetime!(2026-11-30 09:30 UTC)
        );
        assert_eq!(
            next("30 9 * * 7", at, "Etc/UTC"),
            datetime!(2026-11-29 09:30 UTC),
            "7 is Sunday"
        );
        // Day-of-month and day-of-week both restricted: either.
        assert_eq!(
            next("0 0 1 * 6", at, "Etc/UTC"),
            datetime!(2026-11-28 00:00 UTC)
        );
        // On the minute itself, the next one.
        let on = datetime!(2026-11-27 10:10 UTC);
        assert_eq!(
            next("*/5 * * * *", on, "Etc/UTC"),
            datetime!(2026-11-27 10:15 UTC)
        );
    }

    #[test]
    fn a_schedule_is_read_in_its_time_zone() {
        let at = datetime!(2026-11-27 10:00 UTC);
        // 03:00 in Paris is 02:00 UTC in winter.
        assert_eq!(
            next("0 3 * * *", at, "Europe/Paris"),
            datetime!(2026-11-28 02:00 UTC)
        );
        // 02:30 does not exist in Paris on 2027-03-28: it happens at 03:30 local, 01:30 UTC.
        let before = datetime!(2027-03-27 12:00 UTC);
        assert_eq!(
            next("30 2 * * *", before, "Europe/Paris"),
            datetime!(2027-03-28 01:30 UTC)
        );
        assert!(CronSchedule::parse("* * * * *")
            .unwrap()
            .next_after(at, "Mars/Olympus")
            .is_none());
        assert!(CronSchedule::parse("0 0 31 2 *")
            .unwrap()
            .next_after(at, "Etc/UTC")
            .is_none());
    }
}
