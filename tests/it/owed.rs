//! What a new tenant is owed: every period that ends after it was added (the one it was added in
//! first), or, for a migration, after the `--owed-from` date began; through the sweep, and
//! through the `tickctl` binary.

use std::collections::{BTreeMap, BTreeSet};

use tickwork::budget::Unlimited;
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::{ms, unique, Local};

use crate::binary::{ok, tickctl};

fn sweep(local: &Local, prefix: &str) -> (pulse_sweep::Deps, String) {
    (local.stack_sweep(prefix, &[], None), format!("{prefix}-queue"))
}

async fn tick(local: &Local, deps: &pulse_sweep::Deps, at_ms: i64) {
    local.clock.set(at_ms);
    pulse_sweep::run(deps, &Tick::parse(&Tick::envelope(at_ms, false)).unwrap(), &Unlimited, "w").await.unwrap();
}

/// Every `(grain, period)` queued for `tenant`, each checked to be queued once.
async fn pulses_of(local: &Local, queue: &str, tenant: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (key, n) in queued_units(&local.db, queue).await.unwrap() {
        if let ["pulse", t, grain, period] = key.split('#').collect::<Vec<_>>()[..] {
            if t == tenant {
                assert_eq!(n, 1, "{key} queued {n} times");
                out.insert((grain.to_string(), period.to_string()));
            }
        }
    }
    out
}

fn set(pairs: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    pairs.iter().map(|(g, p)| (g.to_string(), p.to_string())).collect()
}

/// `acme`, added in Berlin at 15:00 on Tuesday 2026-12-01 (the walk-through): nothing for
/// November, last week or yesterday; its first day pulse is the 1st's, at Berlin's midnight; its
/// week (W49) at the midnight that begins Monday the 7th; December, Q4 and 2026 on January 1st.
#[tokio::test]
async fn a_tenant_added_at_three_in_the_afternoon_is_first_pulsed_for_that_day_at_its_end() {
    let local = Local::new().await;
    let p = unique("owed");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p);
    local.clock.set(ms("2026-12-01T14:00:00Z"));
    pulse_sweep::add_tenants(&deps, &[Tenant::new("acme", "Europe/Berlin")]).await.unwrap();
    // The tick that visits it (woken) and the next: nothing is owed yet.
    for at in ["2026-12-01T14:00:00Z", "2026-12-01T14:15:00Z", "2026-12-01T22:55:00Z"] {
        tick(&local, &deps, ms(at)).await;
        assert_eq!(pulses_of(&local, &queue, "acme").await, BTreeSet::new(), "{at}");
    }
    // Berlin's midnight (CET: 23:00Z): the 1st, and nothing else.
    tick(&local, &deps, ms("2026-12-01T23:05:00Z")).await;
    assert_eq!(pulses_of(&local, &queue, "acme").await, set(&[("day", "2026-12-01")]));
    // Sunday the 6th's end begins Monday the 7th: the days since and the week.
    tick(&local, &deps, ms("2026-12-05T23:05:00Z")).await;
    assert!(!pulses_of(&local, &queue, "acme").await.iter().any(|(g, _)| g == "week"), "not before the week ends");
    tick(&local, &deps, ms("2026-12-06T23:05:00Z")).await;
    let got = pulses_of(&local, &queue, "acme").await;
    assert!(got.contains(&("week".into(), "2026-W49".into())) && got.contains(&("day".into(), "2026-12-06".into())));
    assert!(!got.iter().any(|(g, _)| g == "month"), "{got:?}");
    // January 1st in Berlin: every December day, weeks 49-52 (53 ends on January 4th), December,
    // the fourth quarter and 2026, each once (`pulses_of` checks once).
    tick(&local, &deps, ms("2026-12-31T23:05:00Z")).await;
    let got = pulses_of(&local, &queue, "acme").await;
    let mut want: BTreeSet<(String, String)> = (1..=31).map(|d| ("day".into(), format!("2026-12-{d:02}"))).collect();
    want.extend((49..=52).map(|w| ("week".to_string(), format!("2026-W{w}"))));
    want.extend(set(&[("month", "2026-12"), ("quarter", "2026-Q4"), ("year", "2026")]));
    assert_eq!(got, want);
}

/// `tickctl tenants add --owed-from` a month back and `tenants import --owed-from` a week back
/// (through the binary, stamped with the wall clock): exactly the periods that end after the date
/// began, each once, at the sweep's first tick and no more at its next; a date beyond the
/// lateness bound, or tomorrow, is refused by name and adds nothing.
#[tokio::test]
async fn a_migration_is_owed_the_periods_from_its_date_once_each() {
    let local = Local::new().await;
    let p = unique("mig");
    ok(&tickctl(&local, &p, &["provision"]));
    let utc = jiff::tz::TimeZone::UTC;
    let today = jiff::Timestamp::now().to_zoned(utc.clone()).date();
    let month_back = today.checked_sub(jiff::Span::new().months(1)).unwrap();
    let week_back = today.checked_sub(jiff::Span::new().weeks(1)).unwrap();

    let refused = tickctl(&local, &p, &["tenants", "add", "old", "--zone", "UTC", "--owed-from", "2020-01-01"]);
    assert_eq!(refused.status.code(), Some(1));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("lateness bound") && why.contains("TICKWORK_PULSE_MAX_LATENESS_SECS"), "{why}");
    // Owed from after today is no migration: refused (the day after tomorrow is after today in
    // every zone).
    let later = today.tomorrow().unwrap().tomorrow().unwrap().to_string();
    let refused = tickctl(&local, &p, &["tenants", "add", "early", "--zone", "UTC", "--owed-from", &later]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("after today"));
    let listed = ok(&tickctl(&local, &p, &["--json", "tenants", "list"]));
    assert!(listed.trim().is_empty(), "a refused tenant is not added: {listed}");

    ok(&tickctl(&local, &p, &["tenants", "add", "migrant", "--zone", "UTC", "--owed-from", &month_back.to_string()]));
    let file = std::env::temp_dir().join(format!("{p}.csv"));
    std::fs::write(&file, "id,zone\nrow-1,UTC\nrow-2,UTC\n").unwrap();
    let report: serde_json::Value = serde_json::from_str(&ok(&tickctl(
        &local,
        &p,
        &["--json", "tenants", "import", file.to_str().unwrap(), "--owed-from", &week_back.to_string()],
    )))
    .unwrap();
    assert_eq!(report["added"], 2, "{report}");

    let (deps, queue) = sweep(&local, &p);
    let now = jiff::Timestamp::now().as_millisecond();
    tick(&local, &deps, now).await;
    let start = |d: jiff::civil::Date| d.to_zoned(utc.clone()).unwrap().timestamp().as_millisecond();
    let expect = |from: jiff::civil::Date, at: i64| -> BTreeSet<(String, String)> {
        crate::chaos::expect::owed(start(from), "UTC", at, "UTC")
    };
    let migrant = pulses_of(&local, &queue, "migrant").await;
    assert_eq!(migrant, expect(month_back, now));
    assert!(migrant.contains(&("day".into(), month_back.to_string())), "the date's own day");
    assert!(!migrant.contains(&("day".into(), month_back.yesterday().unwrap().to_string())), "nothing before it");
    assert!(migrant.len() >= 28, "a month of days at least: {migrant:?}");
    assert_eq!(pulses_of(&local, &queue, "row-1").await, expect(week_back, now));
    // The next tick owes none of them again (`pulses_of` counts each key once).
    tick(&local, &deps, now + 3_600_000).await;
    let counts: BTreeMap<String, u64> = queued_units(&local.db, &queue).await.unwrap();
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    assert_eq!(pulses_of(&local, &queue, "migrant").await, expect(month_back, now + 3_600_000));
}

/// A stack set to pulse days alone (`TICKWORK_PULSE_GRAINS=day`, the template's `PulseGrains`):
/// at the year's last midnight in Berlin its tenant gets the day and nothing else, where the
/// default stack's gets the day, the month, the quarter and the year.
#[tokio::test]
async fn a_sweep_set_to_days_pulses_the_day_alone_at_a_year_end() {
    let local = Local::new().await;
    let mut got = Vec::new();
    for grains in [None, Some("day")] {
        let p = unique("grains");
        ok(&tickctl(&local, &p, &["provision"]));
        let env: Vec<(&str, &str)> = grains.map(|g| ("TICKWORK_PULSE_GRAINS", g)).into_iter().collect();
        let deps = local.stack_sweep(&p, &env, None);
        local.clock.set(ms("2026-12-30T14:00:00Z"));
        pulse_sweep::add_tenants(&deps, &[Tenant::new("acme", "Europe/Berlin")]).await.unwrap();
        for at in ["2026-12-30T14:00:00Z", "2026-12-30T23:05:00Z", "2026-12-31T23:05:00Z"] {
            tick(&local, &deps, ms(at)).await;
        }
        got.push(pulses_of(&local, &format!("{p}-queue"), "acme").await);
    }
    let day = [("day", "2026-12-30"), ("day", "2026-12-31")];
    let mut all = day.to_vec();
    all.extend([("month", "2026-12"), ("quarter", "2026-Q4"), ("year", "2026")]);
    assert_eq!(got[0], set(&all), "every grain by default");
    assert_eq!(got[1], set(&day), "days alone");
}
