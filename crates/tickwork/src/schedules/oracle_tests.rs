//! The occurrence arithmetic held against a brute-force oracle: every UTC minute around every DST
//! change of odd zones is turned into local time (the one direction the tz database answers
//! unambiguously), and the occurrences are read off that walk by the rules as stated in
//! [`super::occurrence`], with no search, no `to_ambiguous_timestamp`, no transition lookup.

use std::collections::{BTreeMap, BTreeSet};

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use super::occurrence::{between, next_after, occurrence_key};
use super::spec::{Dst, Fold, Gap, MonthDay, Spec};
use crate::calendar::zone;
use crate::clock::Millis;

/// A spec names a nominal local minute: the rules read straight, independent of the search.
fn names(spec: &Spec, n: DateTime) -> bool {
    let at = |t: jiff::civil::Time| n.time() == t;
    match spec {
        Spec::Daily(t) => at(*t),
        Spec::Weekly(days, t) => at(*t) && days & (1 << n.date().weekday().to_sunday_zero_offset()) != 0,
        Spec::Monthly(MonthDay::Day(d), t) => at(*t) && n.day() == *d,
        Spec::Monthly(MonthDay::Last, t) => at(*t) && n.date().tomorrow().unwrap().day() == 1,
        Spec::Cron(c) => c.matches(n),
        Spec::AtLocal(dt) => n == *dt,
        Spec::AtInstant(_) => false,
    }
}

/// Every UTC minute of a window and well around it, in local time: built once per window and
/// read for every spec and policy.
struct Walk {
    from: Timestamp,
    to: Timestamp,
    minutes: Vec<(Timestamp, DateTime)>,
    at: BTreeMap<DateTime, Vec<Timestamp>>,
}

impl Walk {
    fn new(tz: &TimeZone, from: Timestamp, to: Timestamp) -> Self {
        let mut minutes = Vec::new();
        let mut t = from - 48.hours();
        while t <= to + 48.hours() {
            minutes.push((t, t.to_zoned(tz.clone()).datetime()));
            t += 1.minute();
        }
        let mut at: BTreeMap<DateTime, Vec<Timestamp>> = BTreeMap::new();
        for (t, l) in &minutes {
            at.entry(*l).or_default().push(*t);
        }
        Walk { from, to, minutes, at }
    }

    /// The occurrence keys in `(from, to]`, read off the walk.
    fn oracle(&self, spec: &Spec, tz: &TimeZone, dst: Dst) -> Vec<String> {
        let mut fires: BTreeSet<Timestamp> = BTreeSet::new();
        // Every nominal minute of the local range the walk covers, a day in from each end (gaps
        // included: they are the ones with no instant).
        let (lo, hi) = (self.minutes[0].1 + 1.day(), self.minutes[self.minutes.len() - 1].1 - 1.day());
        let mut n = lo;
        while n <= hi {
            if names(spec, n) {
                // A one-off fires once whatever its policy says (`both` is refused for it).
                let both = dst.fold == Fold::Both && !spec.one_off();
                let fire: Vec<Timestamp> = match self.at.get(&n).map(Vec::as_slice) {
                    Some(all) if both => all.to_vec(),
                    Some([first, ..]) if dst.fold != Fold::Last => vec![*first],
                    Some([.., last]) => vec![*last],
                    Some([]) => unreachable!(),
                    None if dst.gap == Gap::Skip => vec![],
                    // The first instant whose local time is past the missing one.
                    None => self.minutes.iter().find(|(_, l)| *l > n).map(|(t, _)| *t).into_iter().collect(),
                };
                fires.extend(fire);
            }
            n += 1.minute();
        }
        fires.into_iter().filter(|t| *t > self.from && *t <= self.to).map(|t| occurrence_key(t, tz)).collect()
    }
}

/// The oracle's keys for `spec` in `(from, to]`.
fn oracle(spec: &Spec, tz: &TimeZone, dst: Dst, from: Timestamp, to: Timestamp) -> Vec<String> {
    Walk::new(tz, from, to).oracle(spec, tz, dst)
}

fn ms(t: Timestamp) -> Millis {
    t.as_millisecond()
}

/// Windows of four days around each change between mid-2026 and mid-2028 (one window for a zone
/// without changes).
fn windows(tz: &TimeZone) -> Vec<(Timestamp, Timestamp)> {
    let from: Timestamp = "2026-06-01T00:00:00Z".parse().unwrap();
    let until: Timestamp = "2028-06-01T00:00:00Z".parse().unwrap();
    let mut w: Vec<(Timestamp, Timestamp)> = tz
        .following(from)
        .map(|t| t.timestamp())
        .take_while(|t| *t < until)
        .map(|t| (t - 46.hours(), t + 50.hours()))
        .collect();
    if w.is_empty() {
        let t: Timestamp = "2026-12-31T10:00:00Z".parse().unwrap();
        w.push((t - 46.hours(), t + 50.hours()));
    }
    w
}

#[test]
fn every_occurrence_in_odd_zones_matches_a_minute_by_minute_walk_under_every_policy() {
    // Lord Howe: a 30-minute change at 02:00. Havana: midnight skipped (March 2028) and
    // repeated (November 2027; the tz database has Cuba on summer time until then). Berlin: 02:30 skipped and repeated. Chatham: +13:45 with changes at 02:45.
    // Marquesas −09:30 and Kiritimati +14: no change, a day apart at the date line.
    let zones = [
        "Australia/Lord_Howe",
        "America/Havana",
        "Europe/Berlin",
        "Pacific/Chatham",
        "Pacific/Marquesas",
        "Pacific/Kiritimati",
    ];
    let specs = [
        "daily 00:00",
        "daily 00:30",
        "daily 02:30",
        "daily 01:45",
        "daily 02:45",
        "daily 03:15",
        "weekly sun 00:00",
        "weekly sat,sun 02:15",
        "monthly last 00:00",
        "monthly 1 00:30",
        "cron */15 * * * *",
        "cron 0 0-3 * * 0",
        "cron 30 2 * * *",
    ];
    let policies = [
        Dst { gap: Gap::Shift, fold: Fold::First },
        Dst { gap: Gap::Shift, fold: Fold::Last },
        Dst { gap: Gap::Skip, fold: Fold::First },
        Dst { gap: Gap::Skip, fold: Fold::Last },
        Dst { gap: Gap::Shift, fold: Fold::Both },
        Dst { gap: Gap::Skip, fold: Fold::Both },
    ];
    let mut compared = 0;
    let mut changes_seen = 0;
    for z in zones {
        let tz = zone(z).unwrap();
        for (from, to) in windows(&tz) {
            let walk = Walk::new(&tz, from, to);
            // One-offs at each local time of the window's middle day that a change touches.
            let mid = (from + 48.hours()).to_zoned(tz.clone()).date();
            let mut all: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
            for t in ["00:00", "00:30", "02:00", "02:30", "02:45", "03:00"] {
                all.push(format!("at {mid}T{t}"));
            }
            for text in &all {
                let spec: Spec = text.parse().unwrap();
                for dst in policies {
                    let want = walk.oracle(&spec, &tz, dst);
                    let got: Vec<String> =
                        between(&spec, &tz, dst, ms(from), ms(to)).unwrap().into_iter().map(|o| o.key).collect();
                    assert_eq!(got, want, "{z} `{text}` {dst:?} in ({from}, {to}]");
                    // The single step the sweep takes agrees with the walk at each occurrence.
                    let mut at = ms(from);
                    for w in &want {
                        let next = next_after(&spec, &tz, dst, at).unwrap().expect("an occurrence");
                        assert_eq!(&next.key, w, "{z} `{text}` {dst:?} after {at}");
                        at = next.at_ms;
                    }
                    compared += 1;
                }
            }
            changes_seen += 1;
        }
    }
    assert!(changes_seen >= 10, "the windows hold the changes: {changes_seen}");
    assert!(compared > 1_000, "{compared}");
}

#[test]
fn the_oracle_sees_the_differences_between_policies() {
    // A check that cannot fail proves nothing: the walk itself tells skip from shift and first
    // from last where a change touches the spec.
    let tz = zone("America/Havana").unwrap();
    let (from, to) = ("2028-03-11T00:00:00Z".parse().unwrap(), "2028-03-14T00:00:00Z".parse().unwrap());
    let spec: Spec = "daily 00:00".parse().unwrap();
    let shift = oracle(&spec, &tz, Dst::default(), from, to);
    let skip = oracle(&spec, &tz, Dst { gap: Gap::Skip, fold: Fold::First }, from, to);
    assert_eq!(shift, ["2028-03-11T00:00:00-05:00", "2028-03-12T01:00:00-04:00", "2028-03-13T00:00:00-04:00"]);
    assert_eq!(skip, ["2028-03-11T00:00:00-05:00", "2028-03-13T00:00:00-04:00"]);
    let (from, to) = ("2027-11-06T00:00:00Z".parse().unwrap(), "2027-11-08T12:00:00Z".parse().unwrap());
    let first = oracle(&spec, &tz, Dst::default(), from, to);
    let last = oracle(&spec, &tz, Dst { gap: Gap::Shift, fold: Fold::Last }, from, to);
    assert_eq!(first, ["2027-11-06T00:00:00-04:00", "2027-11-07T00:00:00-04:00", "2027-11-08T00:00:00-05:00"]);
    assert_eq!(last[1], "2027-11-07T00:00:00-05:00");
    let both = oracle(&spec, &tz, Dst { gap: Gap::Shift, fold: Fold::Both }, from, to);
    assert_eq!(both[1..3], ["2027-11-07T00:00:00-04:00", "2027-11-07T00:00:00-05:00"]);
}
