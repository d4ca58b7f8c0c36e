//! Deployment rules: the hours an environment runs (weekdays and times of day in a time zone),
//! and the project rules a new environment takes by its name.

use super::{EnvironmentMode, Name, Record};
use crate::error::DomainError;
use crate::ids::{ClusterId, DeploymentRuleId, EnvironmentId, OrganizationId, ProjectId};
use crate::validate;
use serde::Deserialize;
use time::{OffsetDateTime, Time};

string_enum!(Weekday {
    Monday => "MONDAY",
    Tuesday => "TUESDAY",
    Wednesday => "WEDNESDAY",
    Thursday => "THURSDAY",
    Friday => "FRIDAY",
    Saturday => "SATURDAY",
    Sunday => "SUNDAY",
});

impl Weekday {
    fn of(day: jiff::civil::Weekday) -> Weekday {
        use jiff::civil::Weekday as W;
        match day {
            W::Monday => Weekday::Monday,
            W::Tuesday => Weekday::Tuesday,
            W::Wednesday => Weekday::Wednesday,
            W::Thursday => Weekday::Thursday,
            W::Friday => Weekday::Friday,
            W::Saturday => Weekday::Saturday,
            W::Sunday => Weekday::Sunday,
        }
    }
}

/// What a schedule does at one of its hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The environment's stopped services are deployed again.
    Start,
    /// The environment's running services are stopped.
    Stop,
}

/// When an environment runs. With `auto_stop`, it is started at `start` and stopped at `stop`,
/// wall-clock times in `timezone`, on each of `weekdays`; without, the hours are only kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub auto_stop: bool,
    /// A name of the IANA time zone database, checked when set.
    pub timezone: String,
    pub start: Time,
    pub stop: Time,
    /// Each day once, Monday first.
    pub weekdays: Vec<Weekday>,
}

/// How far around an instant a schedule's hours are looked for: a week and a day either side
/// covers every weekday whatever the offset of the zone.
const SEARCH_DAYS: i64 = 8;

impl Schedule {
    /// What an environment has before anyone sets its rule: office hours, kept only.
    pub fn office_hours() -> Schedule {
        Schedule {
            auto_stop: false,
            timezone: "UTC".into(),
            start: Time::from_hms(8, 0, 0).unwrap_or(Time::MIDNIGHT),
            stop: Time::from_hms(19, 0, 0).unwrap_or(Time::MIDNIGHT),
            weekdays: Weekday::ALL[..5].to_vec(),
        }
    }

    fn zone(&self) -> Option<jiff::tz::TimeZone> {
        jiff::tz::TimeZone::get(&self.timezone).ok()
    }

    /// The schedule's hours on the local dates around `at`, in time order.
    fn turns_around(&self, at: OffsetDateTime) -> Vec<(OffsetDateTime, Turn)> {
        let Some(zone) = self.zone() else {
            return Vec::new();
        };
        if !self.auto_stop || self.weekdays.is_empty() {
            return Vec::new();
        }
        let Ok(instant) = jiff::Timestamp::new(at.unix_timestamp(), 0) else {
            return Vec::new();
        };
        let today = instant.to_zoned(zone.clone()).date();
        let mut turns = Vec::new();
        for offset in -SEARCH_DAYS..=SEARCH_DAYS {
            let Ok(date) = today.checked_add(jiff::Span::new().days(offset)) else {
                continue;
            };
            if !self.weekdays.contains(&Weekday::of(date.weekday())) {
                continue;
            }
            for (time, turn) in [(self.start, Turn::Start), (self.stop, Turn::Stop)] {
                let local = date.at(
                    time.hour() as i8,
                    time.minute() as i8,
                    time.second() as i8,
                    0,
                );
                // A time skipped by a daylight-saving change is moved on by the gap's length
                // (02:30 becomes 03:30); a repeated one happens the first time.
                let Ok(zoned) = local.to_zoned(zone.clone()) else {
                    continue;
                };
                if let Ok(t) = OffsetDateTime::from_unix_timestamp(zoned.timestamp().as_second()) {
                    turns.push((t, turn));
                }
            }
        }
        turns.sort_by_key(|(t, _)| *t);
        turns
    }

    /// The latest of the schedule's hours at or before `at`: what the environment should be
    /// doing now.
    pub fn last_turn(&self, at: OffsetDateTime) -> Option<(OffsetDateTime, Turn)> {
        self.turns_around(at).into_iter().rfind(|(t, _)| *t <= at)
    }

    /// The first of the schedule's hours after `after`; none when the schedule does nothing.
    pub fn next_turn(&self, after: OffsetDateTime) -> Option<OffsetDateTime> {
        self.turns_around(after)
            .into_iter()
            .map(|(t, _)| t)
            .find(|t| *t > after)
    }
}

/// The hours of a rule as the public request bodies have them.
#[derive(Debug)]
pub struct ScheduleInput {
    pub auto_stop: bool,
    pub timezone: String,
    /// A date-time whose time of day (as written, in `timezone`) counts; `08:00` also works.
    pub start_time: String,
    pub stop_time: String,
    pub weekdays: Vec<Weekday>,
}

/// A time of day from a date-time (`1970-01-01T08:00:00Z`, its date and offset ignored) or a
/// bare `HH:MM[:SS]`.
fn time_of_day(field: &str, value: &str) -> Result<Time, DomainError> {
    use time::format_description::well_known::Rfc3339;
    let value = value.trim();
    if let Ok(t) = OffsetDateTime::parse(value, &Rfc3339) {
        return Ok(t.time().replace_nanosecond(0).unwrap_or(t.time()));
    }
    let parts: Vec<&str> = value.split(':').collect();
    let number = |s: &str, max: u8| s.parse::<u8>().ok().filter(|n| *n <= max);
    let parsed = match parts.as_slice() {
        [h, m] => number(h, 23).zip(number(m, 59)).map(|(h, m)| (h, m, 0)),
        [h, m, s] => number(h, 23)
            .zip(number(m, 59))
            .zip(number(s, 59))
            .map(|((h, m), s)| (h, m, s)),
        _ => None,
    };
    parsed
        .and_then(|(h, m, s)| Time::from_hms(h, m, s).ok())
        .ok_or_else(|| {
            DomainError::invalid(
                field,
                "must be a date-time such as 1970-01-01T08:00:00Z (its time of day counts)",
            )
        })
}

impl ScheduleInput {
    pub fn validate(self) -> Result<Schedule, DomainError> {
        let timezone = self.timezone.trim().to_string();
        if jiff::tz::TimeZone::get(&timezone).is_err() {
            return Err(DomainError::invalid(
                "timezone",
                "must be a name of the IANA time zone database, such as UTC or Europe/Paris",
            ));
        }
        let start = time_of_day("start_time", &self.start_time)?;
        let stop = time_of_day("stop_time", &self.stop_time)?;
        if start == stop {
            return Err(DomainError::invalid(
                "stop_time",
                "must differ from start_time",
            ));
        }
        let weekdays: Vec<Weekday> = Weekday::ALL
            .iter()
            .copied()
            .filter(|d| self.weekdays.contains(d))
            .collect();
        if self.auto_stop && weekdays.is_empty() {
            return Err(DomainError::invalid(
                "weekdays",
                "must name at least one day when auto_stop is on",
            ));
        }
        Ok(Schedule {
            auto_stop: self.auto_stop,
            timezone,
            start,
            stop,
            weekdays,
        })
    }
}

/// The rule an environment runs by (its id is the environment's).
#[derive(Debug, Clone, PartialEq)]
pub struct EnvironmentDeploymentRule {
    pub environment_id: EnvironmentId,
    pub organization_id: OrganizationId,
    pub on_demand_preview: bool,
    pub auto_preview: bool,
    pub schedule: Schedule,
    /// When the scheduler next acts on the environment; none when it never will.
    pub next_turn_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for EnvironmentDeploymentRule {
    type Id = EnvironmentId;
    type Parent = EnvironmentId;
    const KIND: &'static str = "deployment rule";
    fn id(&self) -> EnvironmentId {
        self.environment_id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

impl EnvironmentDeploymentRule {
    /// A rule for `environment` with `schedule`, its next hour counted from `now`.
    pub fn new(
        environment: EnvironmentId,
        organization: OrganizationId,
        schedule: Schedule,
        now: OffsetDateTime,
    ) -> Self {
        let mut rule = Self {
            environment_id: environment,
            organization_id: organization,
            on_demand_preview: false,
            auto_preview: false,
            schedule,
            next_turn_at: None,
            created_at: now,
            updated_at: now,
        };
        rule.plan(now);
        rule
    }

    /// Sets the next hour the scheduler acts at, after `now`.
    pub fn plan(&mut self, now: OffsetDateTime) {
        self.next_turn_at = self.schedule.next_turn(now);
    }
}

/// `PUT /environment/{id}/deploymentRule/{ruleId}`. (The hours are members of their own, not
/// a flattened [`ScheduleInput`], so a bad value is reported at its path.)
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct EnvironmentRuleInput {
    #[serde(default)]
    pub on_demand_preview: bool,
    #[serde(default)]
    pub auto_preview: bool,
    #[serde(default)]
    pub auto_stop: bool,
    pub timezone: String,
    pub start_time: String,
    pub stop_time: String,
    pub weekdays: Vec<Weekday>,
}

impl EnvironmentRuleInput {
    pub fn schedule(self) -> Result<Schedule, DomainError> {
        ScheduleInput {
            auto_stop: self.auto_stop,
            timezone: self.timezone,
            start_time: self.start_time,
            stop_time: self.stop_time,
            weekdays: self.weekdays,
        }
        .validate()
    }
}

/// A project's rule for the environments created in it whose name matches `wildcard`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectDeploymentRule {
    pub id: DeploymentRuleId,
    pub organization_id: OrganizationId,
    pub project_id: ProjectId,
    pub name: Name,
    pub description: Option<String>,
    pub mode: EnvironmentMode,
    pub cluster_id: ClusterId,
    pub wildcard: String,
    /// Lower first: the first rule whose wildcard matches applies.
    pub priority_index: i32,
    pub schedule: Schedule,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl Record for ProjectDeploymentRule {
    type Id = DeploymentRuleId;
    type Parent = ProjectId;
    const KIND: &'static str = "deployment rule";
    fn id(&self) -> DeploymentRuleId {
        self.id
    }
    fn organization_id(&self) -> OrganizationId {
        self.organization_id
    }
}

impl ProjectDeploymentRule {
    /// Whether an environment named `name` takes this rule: `*` stands for any characters,
    /// `?` for one, case aside; an empty wildcard matches every name.
    pub fn matches(&self, name: &str) -> bool {
        matches_wildcard(&self.wildcard, name)
    }
}

/// Whether `name` matches `wildcard` (`*` and `?`), case aside; an empty wildcard matches
/// every name.
pub(crate) fn matches_wildcard(wildcard: &str, name: &str) -> bool {
    let pattern: Vec<char> = wildcard.to_lowercase().chars().collect();
    let name: Vec<char> = name.trim().to_lowercase().chars().collect();
    pattern.is_empty() || wildcard_match(&pattern, &name)
}

/// Glob matching of `*` and `?`, with backtracking to the last `*` (linear in practice).
fn wildcard_match(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if *c == '?' || *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// `POST`/`PUT /project/{id}/deploymentRule`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct ProjectRuleInput {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub mode: EnvironmentMode,
    pub cluster_id: ClusterId,
    #[serde(default)]
    pub wildcard: String,
    #[serde(default)]
    pub auto_stop: bool,
    pub timezone: String,
    pub start_time: String,
    pub stop_time: String,
    pub weekdays: Vec<Weekday>,
}

/// A project rule's members, checked.
pub struct ProjectRuleDraft {
    pub name: Name,
    pub description: Option<String>,
    pub mode: EnvironmentMode,
    pub cluster_id: ClusterId,
    pub wildcard: String,
    pub schedule: Schedule,
}

impl ProjectRuleInput {
    pub fn validate(self) -> Result<ProjectRuleDraft, DomainError> {
        let name = validate::name("name", &self.name)?;
        let description = validate::description("description", self.description)?;
        let wildcard = self.wildcard.trim().to_string();
        validate::max_chars("wildcard", &wildcard, validate::MAX_NAME_CHARS)?;
        if wildcard.chars().any(char::is_control) {
            return Err(DomainError::invalid(
                "wildcard",
                "must not hold control characters",
            ));
        }
        Ok(ProjectRuleDraft {
            name,
            description,
            mode: self.mode,
            cluster_id: self.cluster_id,
            wildcard,
            schedule: ScheduleInput {
                auto_stop: self.auto_stop,
                timezone: self.timezone,
                start_time: self.start_time,
                stop_time: self.stop_time,
                weekdays: self.weekdays,
            }
            .validate()?,
        })
    }
}

/// `PUT /project/{id}/deploymentRule/order`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Deserialize)]
pub struct RuleOrderInput {
    #[serde(default)]
    pub project_deployment_rule_ids_in_order: Vec<DeploymentRuleId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn schedule(zone: &str, days: &[Weekday]) -> Schedule {
        ScheduleInput {
            auto_stop: true,
            timezone: zone.into(),
            start_time: "1970-01-01T08:00:00.000Z".into(),
            stop_time: "19:00".into(),
            weekdays: days.to_vec(),
        }
        .validate()
        .unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn hours_are_wall_clock_times_in_the_rule_zone() {
        let s = schedule("Europe/Paris", &[Weekday::Tuesday]);
        // Tuesday 2026-11-24: Paris is UTC+1, so 08:00 there is 07:00 UTC.
        let monday_noon = datetime!(2026-11-23 12:00 UTC);
        assert_eq!(
            s.next_turn(monday_noon),
            Some(datetime!(2026-11-24 07:00 UTC))
        );
        assert_eq!(
            s.next_turn(datetime!(2026-11-24 07:00 UTC)),
            Some(datetime!(2026-11-24 18:00 UTC))
        );
        // After Tuesday's stop, the next hour is next Tuesday's start.
        assert_eq!(
            s.next_turn(datetime!(2026-11-24 18:00 UTC)),
            Some(datetime!(2026-12-01 07:00 UTC))
        );
        assert_eq!(
            s.last_turn(datetime!(2026-11-24 18:30 UTC)),
            Some((datetime!(2026-11-24 18:00 UTC), Turn::Stop))
        );
        assert_eq!(
            s.last_turn(datetime!(2026-11-24 12:00 UTC)),
            Some((datetime!(2026-11-24 07:00 UTC), Turn::Start))
        );
    }

    #[test]
    fn daylight_saving_moves_the_utc_hour() {
        let s = schedule("Europe/Paris", &Weekday::ALL[..5]);
        // Summer: UTC+2.
        assert_eq!(
            s.next_turn(datetime!(2026-06-01 00:00 UTC)),
            Some(datetime!(2026-06-01 06:00 UTC))
        );
    }

    #[test]
    fn transition_days_keep_each_hour_once() {
        let s = ScheduleInput {
            auto_stop: true,
            timezone: "Europe/Paris".into(),
            start_time: "02:30".into(),
            stop_time: "02:45".into(),
            weekdays: vec![Weekday::Sunday],
        }
        .validate()
        .unwrap_or_else(|e| unreachable!("{e}"));
        // 2026-03-29: 02:00 does not exist in Paris; the hours move on by the hour lost (03:30
        // and 03:45 CEST, 01:30 and 01:45 UTC), in their order.
        assert_eq!(
            s.next_turn(datetime!(2026-03-29 00:00 UTC)),
            Some(datetime!(2026-03-29 01:30 UTC))
        );
        assert_eq!(
            s.last_turn(datetime!(2026-03-29 01:50 UTC)),
            Some((datetime!(2026-03-29 01:45 UTC), Turn::Stop))
        );
        // 2026-10-25: 02:30 happens twice; the rule acts the first time (CEST, 00:30 UTC),
        // once.
        assert_eq!(
            s.next_turn(datetime!(2026-10-25 00:00 UTC)),
            Some(datetime!(2026-10-25 00:30 UTC))
        );
        assert_eq!(
            s.next_turn(datetime!(2026-10-25 00:45 UTC)),
            Some(datetime!(2026-11-01 01:30 UTC))
        );
    }

    #[test]
    fn a_schedule_without_auto_stop_never_acts() {
        let mut s = schedule("UTC", Weekday::ALL);
        s.auto_stop = false;
        assert_eq!(s.next_turn(datetime!(2026-11-24 00:00 UTC)), None);
        assert_eq!(s.last_turn(datetime!(2026-11-24 23:00 UTC)), None);
    }

    #[test]
    fn bad_hours_and_zones_name_their_member() {
        let input = |zone: &str, start: &str, stop: &str, days: Vec<Weekday>| ScheduleInput {
            auto_stop: true,
            timezone: zone.into(),
            start_time: start.into(),
            stop_time: stop.into(),
            weekdays: days,
        };
        let field = |r: Result<Schedule, DomainError>| match r {
            Err(DomainError::Invalid { field, .. }) => field,
            other => unreachable!("{other:?}"),
        };
        let days = vec![Weekday::Monday];
        assert_eq!(
            field(input("Mars/Olympus", "08:00", "19:00", days.clone()).validate()),
            "timezone"
        );
        assert_eq!(
            field(input("UTC", "25:00", "19:00", days.clone()).validate()),
            "start_time"
        );
        assert_eq!(
            field(input("UTC", "08:00", "08:00:00", days.clone()).validate()),
            "stop_time"
        );
        assert_eq!(
            field(input("UTC", "08:00", "19:00", vec![]).validate()),
            "weekdays"
        );
        let kept = input(
            "UTC",
            "2026-05-01T08:30:00+02:00",
            "19:00",
            vec![Weekday::Friday, Weekday::Monday, Weekday::Monday],
        )
        .validate()
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            kept.start,
            Time::from_hms(8, 30, 0).unwrap_or(Time::MIDNIGHT)
        );
        assert_eq!(kept.weekdays, vec![Weekday::Monday, Weekday::Friday]);
    }

    #[test]
    fn wildcards_match_names_case_aside() {
        let rule = |w: &str| ProjectDeploymentRule {
            id: DeploymentRuleId::generate(),
            organization_id: OrganizationId::generate(),
            project_id: ProjectId::generate(),
            name: Name::stored("r".into()),
            description: None,
            mode: EnvironmentMode::Development,
            cluster_id: ClusterId::generate(),
            wildcard: w.into(),
            priority_index: 0,
            schedule: Schedule::office_hours(),
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        };
        assert!(rule("").matches("anything"));
        assert!(rule("feat-*").matches("Feat-login"));
        assert!(!rule("feat-*").matches("fix-login"));
        assert!(rule("pr-?").matches("pr-7"));
        assert!(!rule("pr-?").matches("pr-17"));
        assert!(rule("*-preview-*").matches("app-preview-12"));
        assert!(rule("a*b*c").matches("axxbyyc"));
        assert!(!rule("a*b*c").matches("axxbyy"));
        assert!(rule("staging").matches("STAGING"));
        assert!(!rule("staging").matches("staging-2"));
        assert!(rule("staging eu*").matches(" Staging EU-west "));
    }
}
