//! A schedule's occurrences: which instants its nominal local times name in the tenant's zone
//! under its DST policy, the key each fire carries, its stable spread, and which of the missed
//! ones a catch-up policy fires. Pure; the sweep, `tickctl schedules next` and the oracle test
//! all ask here.
//!
//! ## The rules
//! - A nominal local time that exists once is that instant.
//! - In a gap (spring): [`Gap::Shift`] fires at the instant the gap ends (the first instant after
//!   the missing local time); [`Gap::Skip`] does not fire.
//! - In a fold (autumn): [`Fold::First`] fires at its first instant, [`Fold::Last`] at its second,
//!   [`Fold::Both`] at each (two occurrences, their keys told apart by the offset).
//! - Two nominal times that name one instant (every quarter-hour of a cron inside a gap, shifted
//!   to its end) are one occurrence: its key is the instant written in local time with its
//!   offset ([`occurrence_key`]), unique across DST and stable across retries.

use jiff::civil::{Date, DateTime};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::spec::{Dst, Fold, Gap, MonthDay, Spec, SpecError};
use crate::calendar::{CatchUp, Policy};
use crate::clock::Millis;

/// One occurrence of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// The instant it names (before any spread).
    pub at_ms: Millis,
    /// Its key: the instant in the zone's local time with its offset (`2027-03-28T03:00:00+02:00`).
    pub key: String,
}

/// The instants a nominal local time names under `dst`, earliest first: none when the policy
/// skips it, two for a fold under [`Fold::Both`], else one.
pub fn resolve(tz: &TimeZone, nominal: DateTime, dst: Dst) -> Result<Vec<Timestamp>, SpecError> {
    let err = |e: jiff::Error| SpecError(format!("{nominal} in {}: {e}", tz.iana_name().unwrap_or("the zone")));
    let ts = match tz.to_ambiguous_timestamp(nominal).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(nominal).map_err(err)?,
        AmbiguousOffset::Fold { before, after } => match dst.fold {
            Fold::First => before.to_timestamp(nominal).map_err(err)?,
            Fold::Last => after.to_timestamp(nominal).map_err(err)?,
            Fold::Both => {
                return Ok(vec![before.to_timestamp(nominal).map_err(err)?, after.to_timestamp(nominal).map_err(err)?])
            }
        },
        AmbiguousOffset::Gap { after, .. } => match dst.gap {
            Gap::Skip => return Ok(vec![]),
            // Read with the later offset, the nominal time is an instant before the change; the
            // next transition after it is where the gap ends.
            Gap::Shift => {
                let before_change = after.to_timestamp(nominal).map_err(err)?;
                match tz.following(before_change).next() {
                    Some(t) => t.timestamp(),
                    None => return Err(SpecError(format!("{nominal}: a gap without a transition"))),
                }
            }
        },
    };
    Ok(vec![ts])
}

/// The key of an occurrence at `ts`: local date-time and offset.
pub fn occurrence_key(ts: Timestamp, tz: &TimeZone) -> String {
    ts.to_zoned(tz.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
}

/// The nominal local times `spec` names on date `d`, earliest first.
fn nominal_on(spec: &Spec, d: Date) -> Vec<DateTime> {
    match spec {
        Spec::Daily(t) => vec![d.to_datetime(*t)],
        Spec::Weekly(days, t) if days & (1 << d.weekday().to_sunday_zero_offset()) != 0 => vec![d.to_datetime(*t)],
        Spec::Monthly(MonthDay::Day(n), t) if d.day() == *n => vec![d.to_datetime(*t)],
        Spec::Monthly(MonthDay::Last, t) if d == d.last_of_month() => vec![d.to_datetime(*t)],
        Spec::Cron(c) if c.matches_date(d) => c.times().map(|(h, m)| d.at(h, m, 0, 0)).collect(),
        Spec::AtLocal(dt) if dt.date() == d => vec![*dt],
        _ => vec![],
    }
}

/// How far ahead the search looks: a cron naming February 29th on a day of month alone waits up
/// to eight years (2096 to 2104).
const HORIZON_DAYS: i64 = 9 * 366;

fn millis(ts: Timestamp) -> Millis {
    ts.as_millisecond()
}

/// The first occurrence strictly after `after_ms`, or `None` (a one-off that has passed, or a
/// spec with nothing within [`HORIZON_DAYS`]).
pub fn next_after(spec: &Spec, tz: &TimeZone, dst: Dst, after_ms: Millis) -> Result<Option<Occurrence>, SpecError> {
    let after = Timestamp::from_millisecond(after_ms).map_err(|e| SpecError(format!("instant {after_ms}: {e}")))?;
    // A one-off is one instant, however far ahead (the day-by-day search below looks nine years).
    let once = match spec {
        Spec::AtInstant(ts) => Some(Some(*ts)),
        // (A one-off's policy is never `both`: [`super::spec::ScheduleDef::new`] refuses it.)
        Spec::AtLocal(dt) => Some(resolve(tz, *dt, dst)?.first().copied()),
        _ => None,
    };
    if let Some(at) = once {
        return Ok(at.filter(|ts| *ts > after).map(|ts| Occurrence { at_ms: millis(ts), key: occurrence_key(ts, tz) }));
    }
    // A day early: a nominal time of yesterday can name an instant after `after` across a change.
    let start = after.to_zoned(tz.clone()).date().yesterday().map_err(|e| SpecError(e.to_string()))?;
    let mut best: Option<Timestamp> = None;
    let mut d = start;
    for _ in 0..HORIZON_DAYS {
        for n in nominal_on(spec, d) {
            for ts in resolve(tz, n, dst)? {
                if ts > after && best.is_none_or(|b| ts < b) {
                    best = Some(ts);
                }
            }
        }
        // Resolved instants keep their nominal order up to a change's width: the day after the
        // first instant found settles it.
        if let Some(b) = best {
            if d > b.to_zoned(tz.clone()).date() {
                break;
            }
        }
        d = match d.tomorrow() {
            Ok(n) => n,
            Err(_) => break,
        };
    }
    Ok(best.map(|ts| Occurrence { at_ms: millis(ts), key: occurrence_key(ts, tz) }))
}

/// Every occurrence in `(after_ms, until_ms]`, oldest first: each local date of the window (and
/// one either side) read once, instants named twice kept once.
pub fn between(
    spec: &Spec,
    tz: &TimeZone,
    dst: Dst,
    after_ms: Millis,
    until_ms: Millis,
) -> Result<Vec<Occurrence>, SpecError> {
    let ts = |m: Millis| Timestamp::from_millisecond(m).map_err(|e| SpecError(format!("instant {m}: {e}")));
    let (after, until) = (ts(after_ms)?, ts(until_ms)?);
    let mut found = std::collections::BTreeSet::new();
    if let Spec::AtInstant(t) = spec {
        found.insert(*t);
    } else {
        let day = |t: Timestamp| t.to_zoned(tz.clone()).date();
        let (mut d, last) = (day(after).yesterday(), day(until).tomorrow());
        let (Ok(last), true) = (last, after < until) else { return Ok(vec![]) };
        while let Ok(today) = d {
            if today > last {
                break;
            }
            for n in nominal_on(spec, today) {
                // A one-off fires once: its first instant, as [`next_after`] reads it.
                let mut at = resolve(tz, n, dst)?;
                if spec.one_off() {
                    at.truncate(1);
                }
                found.extend(at);
            }
            d = today.tomorrow();
        }
    }
    Ok(found
        .into_iter()
        .filter(|t| *t > after && *t <= until)
        .map(|t| Occurrence { at_ms: millis(t), key: occurrence_key(t, tz) })
        .collect())
}

/// The stable spread of `(tenant, name)`: whole minutes in `[0, spread_min)`, from a digest, so
/// the same tenant fires at the same offset every day and the zone's 08:00 is spread evenly
/// without being random. Whole minutes: the sweep's wake, like EventBridge Scheduler, has a
/// minute's precision, and a due instant on the minute is never woken for early.
pub fn spread_ms(tenant: &str, name: &str, spread_min: u32) -> Millis {
    if spread_min == 0 {
        return 0;
    }
    let digest =
        Sha256::new().chain_update(tenant.as_bytes()).chain_update(b"#").chain_update(name.as_bytes()).finalize();
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (n % spread_min as u64) as Millis * 60_000
}

/// Which of the occurrences missed by `now_ms` fire (each due at its instant plus `spread`), and
/// how many the catch-up policy passes over: the calendar's rules ([`Policy`]) applied to fires.
pub fn catch_up(missed: &[Occurrence], spread: Millis, now_ms: Millis, policy: &Policy) -> (Vec<Occurrence>, u32) {
    let late = |o: &Occurrence| now_ms - (o.at_ms + spread);
    let in_bound: Vec<&Occurrence> = missed.iter().filter(|o| late(o) <= policy.max_lateness_ms).collect();
    let fire: Vec<Occurrence> = match policy.catch_up {
        CatchUp::All => in_bound.into_iter().cloned().collect(),
        CatchUp::Latest => in_bound.last().map(|o| vec![(*o).clone()]).unwrap_or_default(),
        CatchUp::Skip => in_bound.into_iter().filter(|o| late(o) <= policy.interval_ms).cloned().collect(),
    };
    let skipped = (missed.len() - fire.len()) as u32;
    (fire, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::zone;

    fn ms(s: &str) -> Millis {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }
    fn keys(spec: &str, tz: &str, dst: Dst, from: &str, to: &str) -> Vec<String> {
        between(&spec.parse().unwrap(), &zone(tz).unwrap(), dst, ms(from), ms(to))
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect()
    }
    const SKIP_GAP: Dst = Dst { gap: Gap::Skip, fold: Fold::First };
    const LAST: Dst = Dst { gap: Gap::Shift, fold: Fold::Last };

    #[test]
    fn a_gap_shifts_to_its_end_or_is_skipped() {
        // Berlin, 2027-03-28: 02:00 CET becomes 03:00 CEST.
        let k = keys("daily 02:30", "Europe/Berlin", Dst::default(), "2027-03-26T12:00:00Z", "2027-03-29T12:00:00Z");
        assert_eq!(k, ["2027-03-27T02:30:00+01:00", "2027-03-28T03:00:00+02:00", "2027-03-29T02:30:00+02:00"]);
        let k = keys("daily 02:30", "Europe/Berlin", SKIP_GAP, "2027-03-26T12:00:00Z", "2027-03-29T12:00:00Z");
        assert_eq!(k, ["2027-03-27T02:30:00+01:00", "2027-03-29T02:30:00+02:00"]);
        // A cron's four quarter-hours in the gap and 03:00 itself name one instant: one occurrence.
        let k = keys(
            "cron */15 2-3 28 3 *",
            "Europe/Berlin",
            Dst::default(),
            "2027-03-27T00:00:00Z",
            "2027-03-29T00:00:00Z",
        );
        assert_eq!(
            k,
            [
                "2027-03-28T03:00:00+02:00",
                "2027-03-28T03:15:00+02:00",
                "2027-03-28T03:30:00+02:00",
                "2027-03-28T03:45:00+02:00"
            ]
        );
    }

    #[test]
    fn a_fold_fires_at_its_first_or_last_instant_once() {
        // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET.
        let first =
            keys("daily 02:30", "Europe/Berlin", Dst::default(), "2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z");
        assert_eq!(first, ["2026-10-25T02:30:00+02:00"]);
        let last = keys("daily 02:30", "Europe/Berlin", LAST, "2026-10-24T12:00:00Z", "2026-10-25T12:00:00Z");
        assert_eq!(last, ["2026-10-25T02:30:00+01:00"]);
        // An hourly cron across the fold: 02:00 once, under either policy.
        let k = keys("cron 0 * * * *", "Europe/Berlin", Dst::default(), "2026-10-24T22:30:00Z", "2026-10-25T03:30:00Z");
        assert_eq!(
            k,
            [
                "2026-10-25T01:00:00+02:00",
                "2026-10-25T02:00:00+02:00",
                "2026-10-25T03:00:00+01:00",
                "2026-10-25T04:00:00+01:00"
            ]
        );
    }

    #[test]
    fn weekly_monthly_last_and_one_offs() {
        let k = keys(
            "weekly mon,thu 09:30",
            "Pacific/Chatham",
            Dst::default(),
            "2026-11-30T00:00:00Z",
            "2026-12-10T00:00:00Z",
        );
        assert_eq!(k, ["2026-12-03T09:30:00+13:45", "2026-12-07T09:30:00+13:45", "2026-12-10T09:30:00+13:45"]);
        let k = keys(
            "monthly last 23:00",
            "Pacific/Marquesas",
            Dst::default(),
            "2026-12-01T00:00:00Z",
            "2027-03-15T00:00:00Z",
        );
        assert_eq!(
            k,
            [
                "2026-11-30T23:00:00-09:30",
                "2026-12-31T23:00:00-09:30",
                "2027-01-31T23:00:00-09:30",
                "2027-02-28T23:00:00-09:30"
            ]
        );
        let k = keys(
            "monthly 31 08:00",
            "Pacific/Kiritimati",
            Dst::default(),
            "2027-01-01T00:00:00Z",
            "2027-06-01T00:00:00Z",
        );
        assert_eq!(k, ["2027-01-31T08:00:00+14:00", "2027-03-31T08:00:00+14:00", "2027-05-31T08:00:00+14:00"]);
        let at: Spec = "at 2026-12-24T09:00".parse().unwrap();
        let tz = zone("Asia/Kolkata").unwrap();
        let o = next_after(&at, &tz, Dst::default(), ms("2026-12-01T00:00:00Z")).unwrap().unwrap();
        assert_eq!((o.at_ms, o.key.as_str()), (ms("2026-12-24T03:30:00Z"), "2026-12-24T09:00:00+05:30"));
        assert_eq!(next_after(&at, &tz, Dst::default(), o.at_ms).unwrap(), None, "once");
        let far: Spec = "at 2099-01-01T09:00".parse().unwrap();
        let o = next_after(&far, &tz, Dst::default(), ms("2026-12-01T00:00:00Z")).unwrap().unwrap();
        assert_eq!(o.key, "2099-01-01T09:00:00+05:30", "a one-off is found however far ahead");
        let at: Spec = "at 2026-12-24T08:00:00Z".parse().unwrap();
        let o = next_after(&at, &tz, Dst::default(), ms("2026-12-01T00:00:00Z")).unwrap().unwrap();
        assert_eq!(o.key, "2026-12-24T13:30:00+05:30");
    }

    #[test]
    fn the_spread_is_stable_within_its_window_and_spreads() {
        assert_eq!(spread_ms("acme", "nudge", 0), 0);
        assert_eq!(spread_ms("acme", "nudge", 30), spread_ms("acme", "nudge", 30));
        let offsets: Vec<Millis> = (0..1_000).map(|i| spread_ms(&format!("t{i}"), "nudge", 30)).collect();
        assert!(offsets.iter().all(|o| (0..1_800_000).contains(o) && o % 60_000 == 0));
        // Every 5-minute slice of the 30 holds some (1,000 draws into 6 slices).
        for slice in 0..6 {
            let n = offsets.iter().filter(|o| **o / 300_000 == slice).count();
            assert!((100..=240).contains(&n), "slice {slice}: {n}");
        }
    }

    #[test]
    fn catch_up_follows_the_calendars_policy() {
        let o = |m: Millis| Occurrence { at_ms: m, key: m.to_string() };
        let missed = [o(0), o(3_600_000), o(7_200_000)];
        let now = 7_200_000 + 60_000;
        let policy = |catch_up| Policy { catch_up, max_lateness_ms: 5_000_000, interval_ms: 900_000 };
        let fired = |p, spread| {
            let (f, s) = catch_up(&missed, spread, now, &policy(p));
            (f.into_iter().map(|o| o.at_ms).collect::<Vec<_>>(), s)
        };
        assert_eq!(fired(CatchUp::All, 0), (vec![3_600_000, 7_200_000], 1), "the first is beyond lateness");
        assert_eq!(fired(CatchUp::Latest, 0), (vec![7_200_000], 2));
        assert_eq!(fired(CatchUp::Skip, 0), (vec![7_200_000], 2));
        // Lateness is counted from the spread fire time.
        assert_eq!(fired(CatchUp::All, 3_000_000), (vec![0, 3_600_000, 7_200_000], 0));
    }
}
