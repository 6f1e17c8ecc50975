//! Schedules through the sweep across DST changes in odd zones, with processes that die at random
//! calls, events delivered twice and an outage: every occurrence is handed to the queue exactly
//! once, never before its instant, and at the first tick that completed after it.
//!
//! The expectation is `tickwork::schedules::between`, which the unit oracle
//! (`schedules::oracle_tests`) holds against a minute-by-minute walk of the tz database.

use std::collections::BTreeMap;

use tickwork::budget::Unlimited;
use tickwork::schedules::{between, Dst, Fold, Gap, ScheduleDef};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::faults::Faults;
use tickwork_tests::{ms, unique, Local};

use crate::binary::{ok, tickctl};

const QUARTER: i64 = 900_000;

/// The catch-up rules the adds are checked against.
const POLICY: tickwork::calendar::Policy = tickwork::calendar::Policy {
    catch_up: tickwork::calendar::CatchUp::All,
    max_lateness_ms: 2 * 86_400_000,
    interval_ms: QUARTER,
};

fn deps(local: &Local, prefix: &str, faults: Option<&Faults>) -> pulse_sweep::Deps {
    local.stack_sweep(prefix, &[], faults)
}

/// The schedules every tenant of a window gets: midnights, 02:xx in and around the changes,
/// a weekly on the changes' Sunday, a month's last day, a cron every half hour at night, one-offs
/// at the local times a change on `day` touches, under every policy pair.
fn specs(day: jiff::civil::Date) -> Vec<(String, String, Dst)> {
    let (shift, skip) = (Gap::Shift, Gap::Skip);
    let (first, last) = (Fold::First, Fold::Last);
    let mut out: Vec<(&str, String, Dst)> = vec![
        ("once-midnight", format!("at {day}T00:00"), Dst { gap: shift, fold: last }),
        ("once-two-thirty", format!("at {day}T02:30"), Dst { gap: shift, fold: last }),
        ("once-two-fifty", format!("at {day}T02:50"), Dst { gap: shift, fold: first }),
    ];
    out.extend(
        [
            ("midnight", "daily 00:00", Dst { gap: shift, fold: first }),
            ("midnight-skip-last", "daily 00:00", Dst { gap: skip, fold: last }),
            ("two-thirty", "daily 02:30", Dst { gap: shift, fold: first }),
            ("two-thirty-skip-last", "daily 02:30", Dst { gap: skip, fold: last }),
            ("quarter-to-three", "weekly sun 02:45", Dst { gap: shift, fold: last }),
            ("month-end", "monthly last 00:30", Dst { gap: skip, fold: first }),
            ("nightly", "cron */30 0-3 * * *", Dst { gap: shift, fold: first }),
            ("nightly-last", "cron */30 0-3 * * *", Dst { gap: skip, fold: last }),
            ("night-both", "cron 15,45 0-4 * * *", Dst { gap: shift, fold: Fold::Both }),
        ]
        .map(|(n, s, d)| (n, s.to_string(), d)),
    );
    out.into_iter().map(|(n, s, d)| (n.to_string(), s, d)).collect()
}

/// One window: a zone with a change inside it, tenants added at its start, quarter-hour ticks
/// through it with deaths, duplicates and an outage.
struct Window {
    zone: &'static str,
    from: &'static str,
    hours: i64,
    seed: u64,
}

#[tokio::test]
async fn every_occurrence_across_dst_changes_in_odd_zones_is_handed_over_once_despite_crashes_duplicates_and_late_ticks(
) {
    let windows = [
        // Lord Howe: 02:00 becomes 02:30 (a 30-minute gap).
        Window { zone: "Australia/Lord_Howe", from: "2026-10-02T12:00:00Z", hours: 60, seed: 1 },
        // Havana: midnight repeated (01:00 back to 00:00), then skipped (00:00 to 01:00).
        Window { zone: "America/Havana", from: "2027-11-05T12:00:00Z", hours: 60, seed: 2 },
        Window { zone: "America/Havana", from: "2028-03-10T12:00:00Z", hours: 60, seed: 3 },
        // Berlin: 02:30 skipped; Chatham (+13:45): 02:45 to 03:45 repeated.
        Window { zone: "Europe/Berlin", from: "2027-03-26T12:00:00Z", hours: 60, seed: 4 },
        Window { zone: "Pacific/Chatham", from: "2027-04-02T12:00:00Z", hours: 60, seed: 5 },
        // No change, a month's end across the date line: −09:30 and +14.
        Window { zone: "Pacific/Marquesas", from: "2027-01-30T00:00:00Z", hours: 60, seed: 6 },
        Window { zone: "Pacific/Kiritimati", from: "2027-01-29T12:00:00Z", hours: 60, seed: 7 },
    ];
    let local = Local::new().await;
    let mut occurrences = 0;
    let mut crashes = 0;
    for w in windows {
        let p = unique("scheddst");
        ok(&tickctl(&local, &p, &["provision"]));
        let start = ms(w.from);
        let end = start + w.hours * 3_600_000;
        local.clock.set(start);
        let mut live = deps(&local, &p, None);
        pulse_sweep::add_tenants(&live, &[Tenant::new("t", w.zone)]).await.unwrap();
        let tz = tickwork::calendar::zone(w.zone).unwrap();
        let day = tickwork::calendar::local_date(start + 40 * 3_600_000, &tz).unwrap();
        for (name, spec, dst) in specs(day) {
            let def = ScheduleDef::new(&name, spec.parse().unwrap(), 0, dst).unwrap();
            live.schedules.put("t", w.zone, def, &POLICY).await.unwrap();
        }
        tickwork_tests::streams::settle(&local, &live).await;
        let mut rng = fastrand::Rng::with_seed(w.seed);
        // An outage of three hours somewhere in the window: no tick at all.
        let outage_at = start + rng.i64(12..w.hours - 12) * 3_600_000;
        let mut seen: BTreeMap<String, i64> = BTreeMap::new();
        // When each fire was first queued, and the ticks that completed.
        let mut completed: Vec<i64> = Vec::new();
        let mut t = start + QUARTER;
        while t <= end {
            if (outage_at..outage_at + 3 * 3_600_000).contains(&t) {
                t += QUARTER;
                continue;
            }
            local.clock.set(t);
            let tick = Tick::parse(&Tick::envelope(t, false)).unwrap();
            // One tick in eight dies at a random call; its next tick is a fresh process (the
            // dead one's lease expires within the quarter-hour).
            if rng.u32(0..8) == 0 {
                let faults = Faults::new();
                faults.crash_before(None, rng.u64(1..12));
                let dying = deps(&local, &p, Some(&faults));
                if pulse_sweep::run(&dying, &tick, &Unlimited, "w").await.is_err() {
                    crashes += 1;
                } else {
                    completed.push(t);
                }
                live = deps(&local, &p, None);
            } else {
                pulse_sweep::run(&live, &tick, &Unlimited, "w").await.unwrap();
                completed.push(t);
                // The same event delivered twice (EventBridge is at least once).
                if rng.u32(0..6) == 0 {
                    pulse_sweep::run(&live, &tick, &Unlimited, "w").await.unwrap();
                }
            }
            for (key, n) in queued_units(&local.db, &format!("{p}-queue")).await.unwrap() {
                if key.starts_with("sched#") {
                    assert_eq!(n, 1, "{} {key} queued {n} times", w.zone);
                    seen.entry(key).or_insert(t);
                }
            }
            t += QUARTER;
        }
        let last_tick = *completed.last().unwrap();
        for (name, spec, dst) in specs(day) {
            let want = between(&spec.parse().unwrap(), &tz, dst, start, last_tick).unwrap();
            let got: Vec<(&String, &i64)> =
                seen.iter().filter(|(k, _)| k.starts_with(&format!("sched#t#{name}#"))).collect();
            let want_keys: Vec<String> = want.iter().map(|o| format!("sched#t#{name}#{}", o.key)).collect();
            // Keys sort as text, occurrences by instant: a fold's second pass (`-05:00`) sorts
            // before the first pass's later minutes; compared as sets, then each by its key.
            let mut sorted = want_keys.clone();
            sorted.sort();
            let got_keys: Vec<&String> = got.iter().map(|(k, _)| *k).collect();
            assert_eq!(got_keys, sorted.iter().collect::<Vec<_>>(), "{} `{name}` ({spec}, {dst:?})", w.zone);
            for (o, k) in want.iter().zip(&want_keys) {
                let queued_at = &seen[k];
                assert!(*queued_at >= o.at_ms, "{} {name} {}: queued before its instant", w.zone, o.key);
                // At the first tick that completed at or after it (or at a dying tick before
                // that, whose transaction landed).
                let first_done = completed.iter().find(|c| **c >= o.at_ms).unwrap();
                assert!(*queued_at <= *first_done, "{} {name} {}: late past the first completed tick", w.zone, o.key);
            }
            occurrences += want.len();
        }
    }
    assert!(crashes >= 5, "processes died: {crashes}");
    assert!(occurrences > 250, "{occurrences}");
    eprintln!("{occurrences} occurrences handed over once each, {crashes} processes died");
}

/// A wildcard cron keeps its rhythm across an autumn fold: by default (as cronie runs such jobs)
/// it fires in both passes of the repeated hour, each pass its own occurrence, so `*/15 * * * *`
/// fires every 15 real minutes through the change instead of falling silent for the second pass
/// (75 minutes in Berlin), and `0 * * * *` leaves no 2-hour gap; a fixed time (`30 2 * * *`) still
/// fires once. Berlin (02:00-03:00 repeated) and Lord Howe (01:30-02:00 repeated, a 30-minute
/// change), through the sweep. Before `both`, the second pass fired nothing.
#[tokio::test]
async fn a_wildcard_cron_fires_in_both_passes_of_an_autumn_fold_and_a_fixed_time_once() {
    let local = Local::new().await;
    // The default, as `tickctl schedules add` stores it with no `--fold`.
    let p = unique("schedfold");
    ok(&tickctl(&local, &p, &["provision"]));
    ok(&tickctl(&local, &p, &["tenants", "add", "t", "--zone", "Europe/Berlin"]));
    for (name, spec) in [("quarter", "cron */15 * * * *"), ("hourly", "cron 0 * * * *"), ("fixed", "cron 30 2 * * *")] {
        ok(&tickctl(&local, &p, &["schedules", "add", "t", name, "--spec", spec]));
    }
    let listed: Vec<serde_json::Value> =
        serde_json::from_str(&ok(&tickctl(&local, &p, &["--json", "schedules", "list", "t"]))).unwrap();
    let folds: BTreeMap<String, String> = listed
        .iter()
        .map(|l| (l["name"].as_str().unwrap().to_string(), l["fold"].as_str().unwrap().to_string()))
        .collect();
    let want: BTreeMap<String, String> =
        [("fixed", "first"), ("hourly", "both"), ("quarter", "both")].map(|(a, b)| (a.into(), b.into())).into();
    assert_eq!(folds, want);
    // Through the sweep, each zone's fold.
    let cases = [
        (
            "Europe/Berlin",
            "2027-10-30T22:00:00Z",
            "2027-10-31T03:00:00Z",
            vec![
                "hourly#2027-10-31T01:00:00+02:00",
                "hourly#2027-10-31T02:00:00+02:00",
                "hourly#2027-10-31T02:00:00+01:00",
                "hourly#2027-10-31T03:00:00+01:00",
                "hourly#2027-10-31T04:00:00+01:00",
                "fixed#2027-10-31T02:30:00+02:00",
            ],
        ),
        (
            "Australia/Lord_Howe",
            "2027-04-03T13:00:00Z",
            "2027-04-03T16:00:00Z",
            vec![
                "hourly#2027-04-04T01:00:00+11:00",
                "hourly#2027-04-04T02:00:00+10:30",
                "quarter#2027-04-04T01:30:00+11:00",
                "quarter#2027-04-04T01:45:00+11:00",
                "quarter#2027-04-04T01:30:00+10:30",
                "quarter#2027-04-04T01:45:00+10:30",
                "quarter#2027-04-04T02:00:00+10:30",
            ],
        ),
    ];
    for (zone, from, until, must) in cases {
        let p = unique("schedfold");
        ok(&tickctl(&local, &p, &["provision"]));
        let (start, end) = (ms(from), ms(until));
        local.clock.set(start);
        let live = deps(&local, &p, None);
        pulse_sweep::add_tenants(&live, &[Tenant::new("t", zone)]).await.unwrap();
        for (name, spec) in
            [("quarter", "cron */15 * * * *"), ("hourly", "cron 0 * * * *"), ("fixed", "cron 30 2 * * *")]
        {
            let spec: tickwork::schedules::Spec = spec.parse().unwrap();
            let def = ScheduleDef::new(name, spec.clone(), 0, Dst::for_spec(&spec)).unwrap();
            live.schedules.put("t", zone, def, &POLICY).await.unwrap();
        }
        tickwork_tests::streams::settle(&local, &live).await;
        let mut t = start + QUARTER;
        while t <= end {
            local.clock.set(t);
            pulse_sweep::run(&live, &Tick::parse(&Tick::envelope(t, false)).unwrap(), &Unlimited, "w").await.unwrap();
            t += QUARTER;
        }
        let mut fired: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        let mut keys = Vec::new();
        for (key, n) in queued_units(&local.db, &format!("{p}-queue")).await.unwrap() {
            let Some(rest) = key.strip_prefix("sched#t#") else { continue };
            assert_eq!(n, 1, "{zone} {key} queued {n} times");
            let (name, occ) = rest.split_once('#').unwrap();
            fired.entry(name.to_string()).or_default().push(ms(occ));
            keys.push(rest.to_string());
        }
        for m in &must {
            assert!(keys.iter().any(|k| k == m), "{zone}: {m} not fired: {keys:?}");
        }
        // The rhythm: every 15 real minutes from the first to the last, no silence, no double.
        let mut quarter = fired.remove("quarter").unwrap();
        quarter.sort_unstable();
        assert_eq!(quarter.len() as i64, (end - start) / QUARTER, "{zone}: {quarter:?}");
        assert!(quarter.windows(2).all(|w| w[1] - w[0] == QUARTER), "{zone}: a quarter-hour missed or doubled");
        assert!(fired["fixed"].len() <= 1, "{zone}: a fixed time fires once");
    }
}
