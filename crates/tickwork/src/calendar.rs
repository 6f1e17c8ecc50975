//! Calendar periods in a tenant's own time zone, and which of them a tick must pulse.
//!
//! Why (`000_*`): a sweep read 7 cursors per tenant per tick to learn, nearly always, that nothing
//! had changed. Deciding what advanced is pure computation over the tenant's zone, its cursors and
//! the tick's logical time, so it lives here with no I/O and many tests.
//!
//! - Zones come from the IANA database **compiled into the binary** (`jiff`'s bundled tzdb), not
//!   the OS's, so a Lambda image with an old or missing `/usr/share/zoneinfo` cannot shift a pulse.
//! - A period is identified by its civil start in the tenant's zone (`2026-11-29`, `2026-W48`,
//!   `2026-11`, `2026-Q4`, `2026`). Identities sort chronologically within a grain, and depend only
//!   on local dates, so a repeated or skipped local hour (DST) cannot create or lose a day.
//! - A **pulse** announces that a period *ended* for a tenant (end-of-period work such as the
//!   daily summary); the cursor of `(tenant, grain)` holds the last period pulsed.

use std::fmt;
use std::str::FromStr;

use jiff::civil::{Date, Weekday};
use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::clock::Millis;

/// The grains a sweep declares. Only day and coarser fan out; the finer two are declared (so a
/// handler can name them) and emit nothing: in `000_*` the finest grain had no subscriber and was
/// the largest write load on the account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Grain {
    /// 15 minutes (declared, never pulsed).
    QuarterHour,
    /// An hour (declared, never pulsed).
    Hour,
    /// A local day.
    Day,
    /// An ISO week (Monday first).
    Week,
    /// A month.
    Month,
    /// A quarter.
    Quarter,
    /// A year.
    Year,
}

impl Grain {
    /// All declared grains, finest first.
    pub const ALL: [Grain; 7] =
        [Grain::QuarterHour, Grain::Hour, Grain::Day, Grain::Week, Grain::Month, Grain::Quarter, Grain::Year];
    /// The grains that fan out, finest first.
    pub const PULSED: [Grain; 5] = [Grain::Day, Grain::Week, Grain::Month, Grain::Quarter, Grain::Year];

    /// Does this grain emit pulses?
    pub fn fans_out(self) -> bool {
        self >= Grain::Day
    }

    /// Stable name (cursor sort key, metrics dimension).
    pub fn name(self) -> &'static str {
        match self {
            Grain::QuarterHour => "quarter-hour",
            Grain::Hour => "hour",
            Grain::Day => "day",
            Grain::Week => "week",
            Grain::Month => "month",
            Grain::Quarter => "quarter",
            Grain::Year => "year",
        }
    }
}

impl fmt::Display for Grain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Grain {
    type Err = CalendarError;
    fn from_str(s: &str) -> Result<Self, CalendarError> {
        Grain::ALL.into_iter().find(|g| g.name() == s).ok_or_else(|| CalendarError(format!("`{s}` is not a grain")))
    }
}

/// A calendar problem: unknown zone, unreadable period, time out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("calendar: {0}")]
pub struct CalendarError(pub String);

/// Looks a zone up in the bundled database; an unknown name is an error that names it.
pub fn zone(name: &str) -> Result<TimeZone, CalendarError> {
    TimeZone::get(name)
        .map_err(|_| CalendarError(format!("unknown time zone `{name}` (not in the bundled IANA database)")))
}

/// The civil date at `ms` in `tz`.
pub fn local_date(ms: Millis, tz: &TimeZone) -> Result<Date, CalendarError> {
    let ts = Timestamp::from_millisecond(ms).map_err(|e| CalendarError(format!("timestamp {ms}: {e}")))?;
    Ok(ts.to_zoned(tz.clone()).date())
}

/// A day-or-coarser period, identified by its first local date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Period {
    /// Grain.
    pub grain: Grain,
    /// First local date of the period.
    pub start: Date,
}

fn err(e: jiff::Error) -> CalendarError {
    CalendarError(e.to_string())
}

impl Period {
    /// The period of `grain` containing local date `d`.
    pub fn containing(grain: Grain, d: Date) -> Result<Self, CalendarError> {
        let start = match grain {
            Grain::QuarterHour | Grain::Hour => {
                return Err(CalendarError(format!("grain `{grain}` is finer than a day and is never pulsed")))
            }
            Grain::Day => d,
            Grain::Week => {
                let back = i64::from(d.weekday().to_monday_zero_offset());
                d.checked_sub(jiff::Span::new().days(back)).map_err(err)?
            }
            Grain::Month => d.first_of_month(),
            Grain::Quarter => Date::new(d.year(), ((d.month() - 1) / 3) * 3 + 1, 1).map_err(err)?,
            Grain::Year => Date::new(d.year(), 1, 1).map_err(err)?,
        };
        Ok(Period { grain, start })
    }

    /// The next period.
    pub fn succ(self) -> Result<Self, CalendarError> {
        let span = match self.grain {
            Grain::Day => jiff::Span::new().days(1),
            Grain::Week => jiff::Span::new().weeks(1),
            Grain::Month => jiff::Span::new().months(1),
            Grain::Quarter => jiff::Span::new().months(3),
            Grain::Year => jiff::Span::new().years(1),
            g => return Err(CalendarError(format!("grain `{g}` is never pulsed"))),
        };
        Ok(Period { grain: self.grain, start: self.start.checked_add(span).map_err(err)? })
    }

    /// The previous period.
    pub fn pred(self) -> Result<Self, CalendarError> {
        let d = self.start.yesterday().map_err(err)?;
        Period::containing(self.grain, d)
    }

    /// When the period ends in `tz` (the start of the next one, at local midnight, DST-resolved).
    pub fn end_ms(self, tz: &TimeZone) -> Result<Millis, CalendarError> {
        start_of_day(self.succ()?.start, tz)
    }

    /// The identity stored in cursors and pulse ids.
    pub fn id(self) -> String {
        let d = self.start;
        match self.grain {
            Grain::Day => d.to_string(),
            Grain::Week => {
                let w = d.iso_week_date();
                format!("{:04}-W{:02}", w.year(), w.week())
            }
            Grain::Month => format!("{:04}-{:02}", d.year(), d.month()),
            Grain::Quarter => format!("{:04}-Q{}", d.year(), (d.month() - 1) / 3 + 1),
            Grain::Year => format!("{:04}", d.year()),
            Grain::QuarterHour | Grain::Hour => d.to_string(),
        }
    }

    /// Parses an identity written by [`Period::id`].
    pub fn parse(grain: Grain, id: &str) -> Result<Self, CalendarError> {
        let bad = || CalendarError(format!("`{id}` is not a {grain} period"));
        let num = |s: &str| s.parse::<i16>().map_err(|_| bad());
        let start = match grain {
            Grain::Day => id.parse::<Date>().map_err(|_| bad())?,
            Grain::Week => {
                let (y, w) = id.split_once("-W").ok_or_else(bad)?;
                let iso = jiff::civil::ISOWeekDate::new(num(y)?, w.parse::<i8>().map_err(|_| bad())?, Weekday::Monday)
                    .map_err(|_| bad())?;
                iso.date()
            }
            Grain::Month => {
                let (y, m) = id.split_once('-').ok_or_else(bad)?;
                Date::new(num(y)?, m.parse::<i8>().map_err(|_| bad())?, 1).map_err(|_| bad())?
            }
            Grain::Quarter => {
                let (y, q) = id.split_once("-Q").ok_or_else(bad)?;
                let q: i8 = q.parse().map_err(|_| bad())?;
                if !(1..=4).contains(&q) {
                    return Err(bad());
                }
                Date::new(num(y)?, (q - 1) * 3 + 1, 1).map_err(|_| bad())?
            }
            Grain::Year => Date::new(num(id)?, 1, 1).map_err(|_| bad())?,
            Grain::QuarterHour | Grain::Hour => return Err(bad()),
        };
        let p = Period::containing(grain, start)?;
        if p.id() != id {
            return Err(bad());
        }
        Ok(p)
    }
}

/// What to do with periods missed during an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Pulse every missed period, oldest first (default).
    #[default]
    All,
    /// Pulse only the most recent missed period; count the rest as skipped.
    Latest,
    /// Pulse only on-time periods (ended within one tick interval); count the rest as skipped.
    Skip,
}

impl FromStr for CatchUp {
    type Err = CalendarError;
    fn from_str(s: &str) -> Result<Self, CalendarError> {
        match s {
            "all" => Ok(CatchUp::All),
            "latest" => Ok(CatchUp::Latest),
            "skip" => Ok(CatchUp::Skip),
            o => Err(CalendarError(format!("`{o}` is not a catch-up policy (all, latest, skip)"))),
        }
    }
}

/// The catch-up rules of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// What to do with missed periods.
    pub catch_up: CatchUp,
    /// A period that ended longer ago than this is skipped, whatever the policy.
    pub max_lateness_ms: Millis,
    /// The tick interval ("on time" for [`CatchUp::Skip`]).
    pub interval_ms: Millis,
}

/// What one grain of one tenant needs at this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrainPlan {
    /// Grain.
    pub grain: Grain,
    /// Periods to pulse, oldest first.
    pub pulse: Vec<Period>,
    /// Periods passed over by the policy or the lateness bound.
    pub skipped: u32,
    /// The cursor's new value (the latest completed period), when it moves.
    pub advance_to: Option<Period>,
}

/// The pulses a tenant needs at logical time `now_ms`, given its zone, when it was added
/// (`since_ms`) and its cursors (grain → last pulsed period id).
///
/// A tenant is owed every period that *ends after* it was added: a grain with no cursor starts at
/// the period the tenant was added in (a tenant added at 15:00 on the 29th gets the 29th's day
/// pulse at its end, and nothing for the 28th), so a first visit that comes late — after crashes
/// or an outage — still pulses every period since, oldest first. A migration that owes more sets
/// `since_ms` back ([`start_of_day`]). History older than the lateness bound is neither pulsed nor
/// counted as skipped: it was never owed. Without `since_ms` the tenant is treated as added now.
pub fn plan_tenant(
    tz: &TimeZone,
    now_ms: Millis,
    since_ms: Option<Millis>,
    cursors: &std::collections::BTreeMap<Grain, String>,
    policy: &Policy,
) -> Result<Vec<GrainPlan>, CalendarError> {
    plan_tenant_as_of(tz, now_ms, now_ms, since_ms, cursors, policy)
}

/// [`plan_tenant`] for a run that started at `run_ms` (≤ `now_ms`): which periods are complete is
/// decided at `now_ms`, how late each one is at `run_ms`. A run too long for one tick reaches
/// some tenants minutes later than others; measured from each tick, `skip` would pulse the first
/// pages on time and skip the rest.
pub fn plan_tenant_as_of(
    tz: &TimeZone,
    now_ms: Millis,
    run_ms: Millis,
    since_ms: Option<Millis>,
    cursors: &std::collections::BTreeMap<Grain, String>,
    policy: &Policy,
) -> Result<Vec<GrainPlan>, CalendarError> {
    let late_at = run_ms.min(now_ms);
    plan_through(tz, local_date(now_ms, tz)?, late_at, since_ms, cursors, policy)
}

/// The cursors of a tenant pulsed through local date `d`: in every grain, the period that ended
/// last by the start of `d`. A zone group's watermark `d` stands for these cursors for every
/// tenant that follows it, which is why no tenant needs cursor items of its own.
pub fn cursors_through(d: Date) -> Result<std::collections::BTreeMap<Grain, String>, CalendarError> {
    Grain::PULSED.into_iter().map(|g| Ok((g, Period::containing(g, d)?.pred()?.id()))).collect()
}

/// Whether a tenant added at `since_ms` and pulsed through everything owed by local date `d`
/// stands exactly at [`cursors_through`]`(d)`. Not when it was added after `d` began: then the
/// periods that end between `d`'s start and its addition are neither pulsed nor owed, and those
/// cursors would owe them.
pub fn settles_at(tz: &TimeZone, since_ms: Option<Millis>, d: Date) -> Result<bool, CalendarError> {
    match since_ms {
        None => Ok(true),
        Some(s) => Ok(local_date(s, tz)? <= d),
    }
}

/// The first period of `grain` owed to a tenant owed from `since_ms` (added then): the one
/// containing that instant, the first to end after it.
pub fn first_owed(grain: Grain, since_ms: Millis, tz: &TimeZone) -> Result<Period, CalendarError> {
    Period::containing(grain, local_date(since_ms, tz)?)
}

/// The instant local date `d` begins in `tz`: what a migration's "owed from" date means (every
/// period that ends after it is owed). A day that begins in a gap of the zone's clock begins at
/// the gap's end.
pub fn start_of_day(d: Date, tz: &TimeZone) -> Result<Millis, CalendarError> {
    Ok(d.to_zoned(tz.clone()).map_err(err)?.timestamp().as_millisecond())
}

/// [`plan_tenant_as_of`] decided at a local date rather than an instant: which periods are
/// complete is decided at the start of `today` (every tenant of a zone group's run shares it),
/// how late each is at `late_at`. `since_ms` `None` owes from `late_at`.
pub fn plan_through(
    tz: &TimeZone,
    today: Date,
    late_at: Millis,
    since_ms: Option<Millis>,
    cursors: &std::collections::BTreeMap<Grain, String>,
    policy: &Policy,
) -> Result<Vec<GrainPlan>, CalendarError> {
    let mut plans = Vec::new();
    for grain in Grain::PULSED {
        let latest_done = Period::containing(grain, today)?.pred()?;
        let mut missed = Vec::new();
        match cursors.get(&grain) {
            None => {
                // Not clamped to `now_ms`: a tick whose clock is behind the one that added the
                // tenant, across a midnight, would owe it a period that ended before it was added.
                let since = since_ms.unwrap_or(late_at).max(late_at - policy.max_lateness_ms);
                let mut p = first_owed(grain, since, tz)?;
                while p <= latest_done {
                    if late_at - p.end_ms(tz)? <= policy.max_lateness_ms {
                        missed.push(p);
                    }
                    p = p.succ()?;
                }
            }
            Some(c) => {
                let cur = Period::parse(grain, c)?;
                let mut p = cur.succ()?;
                while p <= latest_done {
                    missed.push(p);
                    p = p.succ()?;
                }
            }
        }
        if missed.is_empty() {
            continue;
        }
        let n = missed.len();
        let mut pulse = Vec::new();
        let mut skipped = 0u32;
        for (i, p) in missed.iter().enumerate() {
            let age = late_at - p.end_ms(tz)?;
            let keep = age <= policy.max_lateness_ms
                && match policy.catch_up {
                    CatchUp::All => true,
                    CatchUp::Latest => i + 1 == n,
                    CatchUp::Skip => age < policy.interval_ms,
                };
            if keep {
                pulse.push(*p);
            } else {
                skipped += 1;
            }
        }
        plans.push(GrainPlan { grain, pulse, skipped, advance_to: Some(latest_done) });
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn ms(s: &str) -> Millis {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }
    fn d(s: &str) -> Date {
        s.parse().unwrap()
    }
    const ALL: Policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 60_000 };

    #[test]
    fn ids_and_parsing_round_trip() {
        for (g, date, id) in [
            (Grain::Day, "2026-11-29", "2026-11-29"),
            (Grain::Week, "2026-11-29", "2026-W48"), // a Sunday: ISO week 48, which started Monday 11-23
            (Grain::Week, "2027-01-01", "2026-W53"), // ISO week-year differs from the calendar year
            (Grain::Month, "2026-11-29", "2026-11"),
            (Grain::Quarter, "2026-11-29", "2026-Q4"),
            (Grain::Year, "2026-11-29", "2026"),
        ] {
            let p = Period::containing(g, d(date)).unwrap();
            assert_eq!(p.id(), id, "{g} {date}");
            assert_eq!(Period::parse(g, id).unwrap(), p);
        }
        assert_eq!(Period::containing(Grain::Week, d("2026-11-29")).unwrap().start, d("2026-11-23"));
        assert!(Period::parse(Grain::Quarter, "2026-Q5").is_err());
        assert!(Period::parse(Grain::Day, "2026-02-30").is_err());
        assert!(Period::parse(Grain::Month, "2026-1").is_err(), "non-canonical ids are refused");
        assert!(Period::containing(Grain::Hour, d("2026-11-29")).is_err());
    }

    #[test]
    fn unknown_zone_is_named() {
        let e = zone("Mars/Olympus_Mons").unwrap_err();
        assert!(e.0.contains("Mars/Olympus_Mons"));
        assert!(zone("Asia/Kathmandu").is_ok());
    }

    #[test]
    fn ids_sort_chronologically() {
        for g in Grain::PULSED {
            let mut p = Period::containing(g, d("2025-12-01")).unwrap();
            for _ in 0..60 {
                let n = p.succ().unwrap();
                assert!(n.id() > p.id(), "{} !> {}", n.id(), p.id());
                assert_eq!(n.pred().unwrap(), p);
                p = n;
            }
        }
    }

    #[test]
    fn a_new_tenant_is_owed_the_periods_that_end_after_it_was_added() {
        let tz = zone("UTC").unwrap();
        let ids = |plans: &[GrainPlan]| -> Vec<(Grain, Vec<String>)> {
            plans.iter().map(|p| (p.grain, p.pulse.iter().map(|x| x.id()).collect())).collect()
        };
        // Wednesday 2026-04-01 00:05 UTC: a new day, month, quarter just began. A tenant added
        // now was owed none of them: they ended before it existed.
        let now = ms("2026-04-01T00:05:00Z");
        assert!(plan_tenant(&tz, now, None, &BTreeMap::new(), &ALL).unwrap().is_empty());
        assert!(plan_tenant(&tz, now, Some(ms("2026-04-01T00:00:00Z")), &BTreeMap::new(), &ALL).unwrap().is_empty());
        // Added a minute before midnight: owed the day (and the month, quarter) it ends; its week
        // (Tuesday's) at the week's own end.
        let plans = plan_tenant(&tz, now, Some(ms("2026-03-31T23:59:00Z")), &BTreeMap::new(), &ALL).unwrap();
        assert_eq!(
            ids(&plans),
            vec![
                (Grain::Day, vec!["2026-03-31".to_string()]),
                (Grain::Month, vec!["2026-03".to_string()]),
                (Grain::Quarter, vec!["2026-Q1".to_string()]),
            ]
        );
        // A migration owed from March 1st: every period that ends after it began, once each (the
        // week of Feb 23 ends on March 2nd). Year 2025 ended before: never owed, no plan at all.
        let from = start_of_day(d("2026-03-01"), &tz).unwrap();
        let plans = plan_tenant(&tz, now, Some(from), &BTreeMap::new(), &ALL).unwrap();
        let got = ids(&plans);
        let days: Vec<String> = (1..=31).map(|n| format!("2026-03-{n:02}")).collect();
        let weeks: Vec<String> = (9..=13).map(|n| format!("2026-W{n:02}")).collect();
        assert_eq!(got[0], (Grain::Day, days));
        assert_eq!(got[1], (Grain::Week, weeks));
        assert_eq!(
            got[2..],
            [(Grain::Month, vec!["2026-03".to_string()]), (Grain::Quarter, vec!["2026-Q1".to_string()])]
        );
        assert!(plans.iter().all(|p| p.skipped == 0));
    }

    fn cursors(pairs: &[(Grain, &str)]) -> BTreeMap<Grain, String> {
        pairs.iter().map(|(g, s)| (*g, s.to_string())).collect()
    }

    fn up_to_date(day: &str, week: &str, month: &str, q: &str, y: &str) -> BTreeMap<Grain, String> {
        cursors(&[(Grain::Day, day), (Grain::Week, week), (Grain::Month, month), (Grain::Quarter, q), (Grain::Year, y)])
    }

    #[test]
    fn a_late_first_visit_still_pulses_every_period_since_the_tenant_was_added() {
        let tz = zone("UTC").unwrap();
        // Added on the 29th; first visited on 12-02 (crashes, an outage): 29th, 30th, 1st.
        let plans =
            plan_tenant(&tz, ms("2026-12-02T00:05:00Z"), Some(ms("2026-11-29T08:00:00Z")), &BTreeMap::new(), &ALL)
                .unwrap();
        let day = plans.iter().find(|p| p.grain == Grain::Day).unwrap();
        let ids: Vec<String> = day.pulse.iter().map(|p| p.id()).collect();
        assert_eq!(ids, ["2026-11-29", "2026-11-30", "2026-12-01"]);
        let month = plans.iter().find(|p| p.grain == Grain::Month).unwrap();
        assert_eq!(month.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-11"]);
        // The week of Nov 23 ends at the midnight after the 29th: owed.
        let week = plans.iter().find(|p| p.grain == Grain::Week).unwrap();
        assert_eq!(week.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-W48"]);
        // Added long ago without cursors: history beyond the lateness bound is not owed.
        let plans =
            plan_tenant(&tz, ms("2026-12-02T00:05:00Z"), Some(ms("2020-01-01T00:00:00Z")), &BTreeMap::new(), &ALL)
                .unwrap();
        let day = plans.iter().find(|p| p.grain == Grain::Day).unwrap();
        assert_eq!((day.pulse.len(), day.skipped), (40, 0));
    }

    #[test]
    fn a_tick_behind_the_clock_that_added_the_tenant_owes_it_nothing_before_its_first_period() {
        let tz = zone("UTC").unwrap();
        // Added at 00:00:00.500 on the 28th; a tick whose clock reads 23:59:59.900 on the 27th sees
        // it. Owed from the 28th, which has not ended at that tick: nothing, and nothing at the
        // next tick either (the 27th ended before it was added). Clamping `since` to the tick
        // once owed it days before its first.
        let added = ms("2026-03-28T00:00:00.500Z");
        for tick in ["2026-03-27T23:59:59.900Z", "2026-03-28T00:01:00Z"] {
            let plans = plan_tenant(&tz, ms(tick), Some(added), &BTreeMap::new(), &ALL).unwrap();
            assert!(plans.is_empty(), "{tick}: {plans:?}");
        }
        // The 28th's own end owes it.
        let plans = plan_tenant(&tz, ms("2026-03-29T00:01:00Z"), Some(added), &BTreeMap::new(), &ALL).unwrap();
        let day = plans.iter().find(|p| p.grain == Grain::Day).unwrap();
        assert_eq!(day.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-03-28"]);
    }

    #[test]
    fn nothing_between_boundaries() {
        let tz = zone("Europe/Berlin").unwrap();
        let c = up_to_date("2026-11-28", "2026-W47", "2026-10", "2026-Q3", "2025");
        for t in ["2026-11-28T23:00:00Z", "2026-11-29T12:00:00Z", "2026-11-29T22:59:59Z"] {
            assert!(plan_tenant(&tz, ms(t), None, &c, &ALL).unwrap().is_empty(), "{t}");
        }
        // Berlin midnight (UTC+1 in November) is 23:00Z: the day boundary has passed.
        let p = plan_tenant(&tz, ms("2026-11-29T23:00:00Z"), None, &c, &ALL).unwrap();
        assert_eq!(p.len(), 2, "day and (Monday) week");
        assert_eq!(p[0].pulse[0].id(), "2026-11-29");
        assert_eq!(p[1].pulse[0].id(), "2026-W48");
    }

    #[test]
    fn dst_spring_forward_and_fall_back_give_one_day_each() {
        // Europe/Berlin: 2026-03-29 02:00 -> 03:00 (a 23-hour day); 2026-10-25 03:00 -> 02:00 (25 hours).
        let tz = zone("Europe/Berlin").unwrap();
        for (start, hours) in [("2026-03-28T00:00:00Z", 72), ("2026-10-24T00:00:00Z", 72)] {
            let mut c = BTreeMap::new();
            let mut days = Vec::new();
            let t0 = ms(start);
            for minute in (0..hours * 60).step_by(7) {
                let now = t0 + minute * 60_000;
                for plan in plan_tenant(&tz, now, Some(t0), &c, &ALL).unwrap() {
                    if plan.grain == Grain::Day {
                        days.extend(plan.pulse.iter().map(|p| p.id()));
                    }
                    if let Some(a) = plan.advance_to {
                        c.insert(plan.grain, a.id());
                    }
                }
            }
            let mut sorted = days.clone();
            sorted.dedup();
            assert_eq!(sorted, days, "each local date pulsed once, in order");
            // Seen first (added) at the start: one pulse per local midnight after it, nothing before.
            assert_eq!(days.len(), 3, "{start}: {days:?}");
            for w in days.windows(2) {
                let (a, b) = (w[0].parse::<Date>().unwrap(), w[1].parse::<Date>().unwrap());
                assert_eq!(a.tomorrow().unwrap(), b, "consecutive local dates");
            }
        }
        // The 23-hour day ends at 22:00Z on 03-29, the 25-hour day at 23:00Z on 10-25.
        let day = |s: &str| Period::containing(Grain::Day, d(s)).unwrap();
        assert_eq!(day("2026-03-29").end_ms(&tz).unwrap() - day("2026-03-28").end_ms(&tz).unwrap(), 23 * 3_600_000);
        assert_eq!(day("2026-10-25").end_ms(&tz).unwrap() - day("2026-10-24").end_ms(&tz).unwrap(), 25 * 3_600_000);
    }

    #[test]
    fn boundaries_land_on_local_dates() {
        // Pacific/Auckland is 13 hours ahead in December: its year ends at 11:00Z on Dec 31.
        let tz = zone("Pacific/Auckland").unwrap();
        let c = up_to_date("2026-12-30", "2026-W52", "2026-11", "2026-Q3", "2025");
        let p = plan_tenant(&tz, ms("2026-12-31T10:59:00Z"), None, &c, &ALL).unwrap();
        assert!(p.iter().all(|g| g.grain != Grain::Year), "not yet a new year in Auckland");
        let p = plan_tenant(&tz, ms("2026-12-31T11:00:00Z"), None, &c, &ALL).unwrap();
        let got: Vec<(Grain, String)> = p.iter().flat_map(|g| g.pulse.iter().map(move |x| (g.grain, x.id()))).collect();
        assert!(got.contains(&(Grain::Year, "2026".into())));
        assert!(got.contains(&(Grain::Quarter, "2026-Q4".into())));
        assert!(got.contains(&(Grain::Month, "2026-12".into())));
        assert!(got.contains(&(Grain::Day, "2026-12-31".into())));
        // America/New_York: the week (ISO, Monday) turns at local midnight Sunday->Monday, 05:00Z.
        let ny = zone("America/New_York").unwrap();
        let c = up_to_date("2026-11-29", "2026-W47", "2026-10", "2026-Q3", "2025");
        assert!(plan_tenant(&ny, ms("2026-11-30T04:59:00Z"), None, &c, &ALL)
            .unwrap()
            .iter()
            .all(|g| g.grain != Grain::Week));
        let p = plan_tenant(&ny, ms("2026-11-30T05:00:00Z"), None, &c, &ALL).unwrap();
        assert!(p.iter().any(|g| g.grain == Grain::Week && g.pulse[0].id() == "2026-W48"));
    }

    #[test]
    fn skip_measures_lateness_from_the_run_start_not_the_tick() {
        let tz = zone("UTC").unwrap();
        let c = up_to_date("2026-11-26", "2026-W48", "2026-10", "2026-Q3", "2025");
        let skip = Policy { catch_up: CatchUp::Skip, interval_ms: 60_000, ..ALL };
        let day = |p: Vec<GrainPlan>| p.into_iter().find(|g| g.grain == Grain::Day).unwrap();
        // The run started 30 s after midnight; this tenant is reached 20 minutes later.
        let (run, now) = (ms("2026-11-28T00:00:30Z"), ms("2026-11-28T00:20:00Z"));
        let on_time = day(plan_tenant_as_of(&tz, now, run, None, &c, &skip).unwrap());
        assert_eq!((on_time.pulse.len(), on_time.skipped), (1, 0), "on time for its run");
        let per_tick = day(plan_tenant(&tz, now, None, &c, &skip).unwrap());
        assert_eq!((per_tick.pulse.len(), per_tick.skipped), (0, 1), "what measuring from the tick did");
    }

    #[test]
    fn catch_up_policies() {
        let tz = zone("UTC").unwrap();
        let c = up_to_date("2026-11-26", "2026-W48", "2026-10", "2026-Q3", "2025");
        let now = ms("2026-11-29T00:10:00Z"); // days 27 and 28 were missed
        let day = |p: &[GrainPlan]| p.iter().find(|g| g.grain == Grain::Day).cloned().unwrap();
        let all = day(&plan_tenant(&tz, now, None, &c, &ALL).unwrap());
        assert_eq!(all.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-11-27", "2026-11-28"]);
        assert_eq!(all.skipped, 0);
        let latest = day(&plan_tenant(&tz, now, None, &c, &Policy { catch_up: CatchUp::Latest, ..ALL }).unwrap());
        assert_eq!(latest.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-11-28"]);
        assert_eq!(latest.skipped, 1);
        assert_eq!(latest.advance_to.unwrap().id(), "2026-11-28");
        let skip =
            day(&plan_tenant(&tz, now, None, &c, &Policy { catch_up: CatchUp::Skip, interval_ms: 3_600_000, ..ALL })
                .unwrap());
        assert_eq!(
            skip.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(),
            ["2026-11-28"],
            "ended 10 minutes ago: on time"
        );
        assert_eq!(skip.skipped, 1);
        let tight = day(&plan_tenant(&tz, now, None, &c, &Policy { max_lateness_ms: 86_400_000, ..ALL }).unwrap());
        assert_eq!(tight.pulse.iter().map(|p| p.id()).collect::<Vec<_>>(), ["2026-11-28"], "the 27th ended 24h10m ago");
        assert_eq!(tight.skipped, 1);
    }
}

#[cfg(test)]
mod quarter_hours {
    /// The sweep ticks on UTC quarter hours (`cron(0/15 * * * ? *)`). That reaches every local
    /// midnight on time only if each local day starts on a UTC quarter hour: every offset in use
    /// is a whole number of quarter hours (UTC+05:45 and UTC+12:45 are; the LMT offsets of the
    /// 1800s are not), and on the days a zone changes offset the day still starts on one (a
    /// transition at midnight moves the start of the day to the transition). Checked over every
    /// zone of the bundled tz database from 2020 to 2040. A transition off the quarter hour away
    /// from midnight (Antarctica/Casey's at 03:01 local until 2022) does not matter; one that
    /// moved a day's start would only make that day's pulses late (the catch-up sends them at the
    /// next tick).
    #[test]
    fn every_local_day_in_use_starts_on_a_utc_quarter_hour() {
        let from: jiff::Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
        let to: jiff::Timestamp = "2040-01-01T00:00:00Z".parse().unwrap();
        let db = jiff::tz::db();
        let mut zones = 0;
        let mut bad = Vec::new();
        let day_start = |tz: &jiff::tz::TimeZone, t: jiff::Timestamp, bad: &mut Vec<String>, name: &str| {
            for d in [-1i64, 0, 1] {
                let at = t.checked_add(jiff::SignedDuration::from_hours(24 * d)).unwrap();
                let start = at.to_zoned(tz.clone()).start_of_day().unwrap().timestamp();
                if start.as_second() % 900 != 0 {
                    bad.push(format!("{name}: the day of {at} starts at {start}"));
                }
            }
        };
        for name in db.available() {
            let name = name.to_string();
            let Ok(tz) = db.get(&name) else { continue };
            zones += 1;
            if tz.to_offset(from).seconds() % 900 != 0 {
                bad.push(format!("{name}: offset {} in 2020", tz.to_offset(from)));
            }
            day_start(&tz, from, &mut bad, &name);
            for t in tz.following(from).take_while(|t| t.timestamp() < to) {
                if t.offset().seconds() % 900 != 0 {
                    bad.push(format!("{name}: offset {} from {}", t.offset(), t.timestamp()));
                }
                day_start(&tz, t.timestamp(), &mut bad, &name);
            }
        }
        assert!(zones > 300, "the bundled database has every zone: {zones}");
        assert!(bad.is_empty(), "{} off the quarter hour: {:?}", bad.len(), &bad[..bad.len().min(20)]);
    }
}
