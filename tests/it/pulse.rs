use std::collections::BTreeMap;
use std::time::Duration;

use pulse_sweep::{add_tenants, run, Deps, Outcome, PulseConfig, PulseError};
use tickwork::budget::Unlimited;
use tickwork::config::Env;
use tickwork::lease::Acquire;
use tickwork::queue::{queue_table, QueueConfig};
use tickwork::tenants::Tenant;
use tickwork::watermark::Advance;
use tickwork_lambda::Tick;
use tickwork_sim::{expected_day_pulses, queued_units, simulate, SimConfig, ZONES};
use tickwork_tests::Local;

use tickwork_tests::ms;

/// Deps with the clock at `at`, when the tenants the test adds next are added.
async fn deps(local: &Local, env: &[(&str, &str)], at: &str) -> Deps {
    local.clock.set(ms(at));
    let tables = local.sweep_tables().await;
    let cfg = PulseConfig::from_env(&Env::from_pairs(env.iter().copied()), Duration::from_secs(1)).unwrap();
    let db = local.fresh_db_with_gsis(&tables.queue, &queue_table());
    Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default())
}

fn tenants(n: usize, zone: &str) -> Vec<Tenant> {
    tickwork_tests::tenants(n, zone, 5)
}

/// `n` tenants of `zone` migrated onto tickwork at `d`'s clock, owed from the day before (a new
/// tenant is owed nothing before its day of adding): the tests whose first boundary pulses a day.
fn migrated(d: &Deps, n: usize, zone: &str) -> Vec<Tenant> {
    tickwork_tests::owed_from_yesterday(tenants(n, zone), d.clock.now_ms())
}

async fn tick(local: &Local, d: &Deps, at: &str) -> pulse_sweep::Report {
    local.clock.set(ms(at));
    d.db.meter().reset();
    run(d, &Tick::parse(&Tick::envelope(ms(at), false)).unwrap(), &Unlimited, &format!("w-{at}")).await.unwrap()
}

/// Queued pulses by (grain, period), counted over tenants; no unit key in two batch items.
async fn queued(d: &Deps) -> BTreeMap<(String, String), u64> {
    let units = queued_units(&d.db, &d.tables.queue).await.unwrap();
    let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (key, n) in units {
        assert_eq!(n, 1, "{key} is in {n} batch items");
        let parts: Vec<&str> = key.split('#').collect();
        *out.entry((parts[2].to_string(), parts[3].to_string())).or_default() += 1;
    }
    out
}

/// Queued pulses of one grain: period → tenants.
async fn pulses_of(d: &Deps, grain: &str) -> BTreeMap<String, u64> {
    queued(d).await.into_iter().filter(|((g, _), _)| g == grain).map(|((_, p), n)| (p, n)).collect()
}

#[tokio::test]
async fn idle_tick_is_one_read_and_no_writes() {
    let local = Local::new().await;
    let d = deps(&local, &[], "2026-11-29T10:00:00Z").await;
    add_tenants(&d, &migrated(&d, 20, "Europe/Berlin")).await.unwrap();
    let r = tick(&local, &d, "2026-11-29T10:00:00Z").await;
    assert_eq!((r.outcome, r.pulses["day"]), (Outcome::Completed, 20));
    // The tenants woken when added stay woken through the run that pages them (an index may lag
    // its table); the next tick visits them, finds them with the group, and pulses nothing.
    let r = tick(&local, &d, "2026-11-29T10:01:00Z").await;
    assert_eq!((r.outcome, r.tenants, r.pulses.values().sum::<u64>()), (Outcome::Completed, 20, 0), "{r:?}");
    for at in ["2026-11-29T10:02:00Z", "2026-11-29T15:30:00Z", "2026-11-29T22:59:00Z"] {
        let r = tick(&local, &d, at).await;
        assert_eq!(r.outcome, Outcome::Idle, "{at}");
        assert_eq!(d.db.meter().read_write_requests(), (1, 0), "{at}: exactly 1 read and 0 writes, lease included");
        assert_eq!(d.db.meter().op("GetItem").rcu, 0.5, "one eventually consistent read");
    }
}

#[tokio::test]
async fn every_tenant_of_1050_gets_its_day_pulse_and_nothing_is_read_per_tenant() {
    let local = Local::new().await;
    let d = deps(&local, &[("TICKWORK_PULSE_PAGE_SIZE", "100")], "2026-11-29T00:01:00Z").await;
    add_tenants(&d, &migrated(&d, 1_050, "UTC")).await.unwrap();
    let r = tick(&local, &d, "2026-11-29T00:01:00Z").await;
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!((r.tenants, r.pulses["day"]), (1_050, 1_050));
    let snap = d.db.meter().snapshot();
    let on = |table: &str, op: &str| -> u64 {
        snap.iter().filter(|(k, _)| k.table == table && k.op == op && k.index.is_none()).map(|(_, t)| t.requests).sum()
    };
    assert_eq!(on(&d.tables.control, "Query"), 1, "the run's checkpoint Query; nothing per tenant");
    assert_eq!(on(&d.tables.control, "GetItem"), 1, "the watermark; no per-grain GetItem");
    assert_eq!(on(&d.tables.tenants, "GetItem"), 0, "no tenant read by id");
    // A first sight writes each tenant's position once, 40 to a transaction.
    let txns = on(&d.tables.control, "TransactWriteItems");
    assert!(txns <= 1_050 / 40 + 9, "{txns} transactions");
    assert_eq!(pulses_of(&d, "day").await, BTreeMap::from([("2026-11-28".to_string(), 1_050)]));
    // The next day every tenant follows its group: no position write, one transaction.
    let r = tick(&local, &d, "2026-11-30T00:01:00Z").await;
    assert_eq!((r.outcome, r.pulses["day"]), (Outcome::Completed, 1_050));
    let snap = d.db.meter().snapshot();
    let txns: u64 =
        snap.iter().filter(|(k, _)| k.op == "TransactWriteItems" && k.index.is_none()).map(|(_, t)| t.requests).sum();
    assert_eq!(txns, 1, "the whole group's pulses and its watermark in one transaction");
    assert_eq!(on_table(&snap, &d.tables.tenants, "UpdateItem"), 0);
}

fn on_table(snap: &BTreeMap<tickwork::meter::MeterKey, tickwork::meter::Tally>, table: &str, op: &str) -> u64 {
    snap.iter().filter(|(k, _)| k.table == table && k.op == op && k.index.is_none()).map(|(_, t)| t.requests).sum()
}

/// A tick that runs out of time (a budget of a few steps) stops between pages with its checkpoint
/// saved and the watermark unmoved; later ticks resume where it stopped. Every tenant is pulsed
/// exactly once and read exactly once over all the ticks: no page is skipped or redone.
#[tokio::test]
async fn a_sweep_stopped_by_its_deadline_resumes_from_its_checkpoint() {
    use tickwork::budget::Steps;
    let local = Local::new().await;
    let d = deps(&local, &[("TICKWORK_PULSE_PAGE_SIZE", "10")], "2026-11-29T00:01:00Z").await;
    add_tenants(&d, &migrated(&d, 200, "UTC")).await.unwrap();
    let mut read = 0;
    let mut ticks = 0;
    let mut minute = 1;
    loop {
        let at = format!("2026-11-29T00:{minute:02}:00Z");
        minute += 1;
        local.clock.set(ms(&at));
        d.db.meter().reset();
        let t = Tick::parse(&Tick::envelope(ms(&at), false)).unwrap();
        let r = run(&d, &t, &Steps::new(6), &format!("w-{at}")).await.unwrap();
        ticks += 1;
        let snap = d.db.meter().snapshot();
        // Tenants read from the zone index, over every tick.
        read += snap
            .iter()
            .filter(|(k, _)| k.table == d.tables.tenants && k.op == "Query")
            .map(|(_, t)| t.items_read)
            .sum::<u64>();
        let mark = d.marks.read("pulse-sweep").await.unwrap().marks.get("UTC").cloned();
        match r.outcome {
            Outcome::Partial => assert_eq!(mark, None, "{at}: the watermark waits for the whole group"),
            Outcome::Completed => {
                assert_eq!(mark.as_deref(), Some("2026-11-29"));
                break;
            }
            other => panic!("{at}: {other:?}"),
        }
        assert!(ticks < 40, "no progress");
    }
    assert!(ticks >= 3, "the budget stopped the sweep: {ticks} ticks");
    assert_eq!(read, 200, "every tenant read once over all the ticks");
    assert_eq!(pulses_of(&d, "day").await, BTreeMap::from([("2026-11-28".to_string(), 200)]));
    let r = tick(&local, &d, &format!("2026-11-29T00:{minute:02}:00Z")).await;
    assert_eq!(r.outcome, Outcome::Idle);
}

/// `TICKWORK_DRY_RUN=true` makes every tick a dry run, whatever the event says; a bad value is
/// refused at start-up naming the variable.
#[tokio::test]
async fn the_dry_run_switch_in_config_writes_nothing() {
    let local = Local::new().await;
    let d = deps(&local, &[("TICKWORK_DRY_RUN", "true")], "2026-11-29T10:00:00Z").await;
    add_tenants(&d, &migrated(&d, 12, "Europe/Berlin")).await.unwrap();
    d.db.meter().reset();
    let event = Tick::envelope(ms("2026-11-29T10:00:00Z"), false);
    let r = pulse_sweep::handle(&d, event, ms("2026-11-29T10:00:00Z") + 60_000).await.unwrap();
    assert_eq!((r.outcome, r.tenants, r.pulses["day"]), (Outcome::DryRun, 12, 12));
    assert_eq!(d.db.meter().read_write_requests().1, 0, "nothing written");
    assert!(pulses_of(&d, "day").await.is_empty());
    let e =
        PulseConfig::from_env(&Env::from_pairs([("TICKWORK_DRY_RUN", "maybe")]), Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.var, "TICKWORK_DRY_RUN");
}

#[tokio::test]
async fn a_stale_leader_cannot_write_the_watermark() {
    let local = Local::new().await;
    let d = deps(&local, &[], "2026-11-29T00:01:00Z").await;
    add_tenants(&d, &tenants(3, "UTC")).await.unwrap();
    local.clock.set(ms("2026-11-29T00:01:00Z"));
    let Acquire::Acquired(old) = d.leases.acquire(&d.cfg.lease, "old").await.unwrap() else { panic!() };
    // The old leader stalls past its lease; a new one takes over and completes the boundary.
    local.clock.advance(51_000);
    let r = run(&d, &Tick::parse(&Tick::envelope(ms("2026-11-29T00:01:00Z"), false)).unwrap(), &Unlimited, "new")
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    let fence = old.fence(&d.tables.control);
    assert_eq!(d.marks.advance(&fence, "UTC", "2026-11-30").await.unwrap(), Advance::Stale);
    assert_eq!(d.marks.read(&d.cfg.job).await.unwrap().marks["UTC"], "2026-11-29");
}

#[tokio::test]
async fn dst_gives_one_day_pulse_per_local_date_and_boundaries_land_on_local_dates() {
    let local = Local::new().await;
    let d = deps(&local, &[], "2026-03-28T00:30:00Z").await;
    add_tenants(
        &d,
        &[Tenant {
            id: "berlin".into(),
            zone: "Europe/Berlin".into(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        }],
    )
    .await
    .unwrap();
    add_tenants(
        &d,
        &[Tenant {
            id: "tokyo".into(),
            zone: "Asia/Tokyo".into(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        }],
    )
    .await
    .unwrap();
    // Hourly ticks across Berlin's spring-forward (03-29) and fall-back (10-25).
    for (from, to) in
        [("2026-03-28T00:30:00Z", "2026-03-31T23:30:00Z"), ("2026-10-24T00:30:00Z", "2026-10-27T23:30:00Z")]
    {
        let mut t = ms(from);
        while t <= ms(to) {
            local.clock.set(t);
            let at = jiff::Timestamp::from_millisecond(t).unwrap().to_string();
            let r = tick(&local, &d, &at).await;
            assert!(matches!(r.outcome, Outcome::Idle | Outcome::Completed), "{at}: {r:?}");
            // Month and quarter of Tokyo end at its local midnight, 15:00Z on 03-31.
            if at == "2026-03-31T14:30:00Z" {
                assert!(!r.pulses.contains_key("month"), "not before Tokyo's midnight");
            }
            if at == "2026-03-31T15:30:00Z" {
                assert_eq!(
                    (r.pulses.get("month"), r.pulses.get("quarter")),
                    (Some(&1), Some(&1)),
                    "Tokyo's month and quarter"
                );
            }
            t += 3_600_000;
        }
    }
    let days = queued(&d).await;
    let berlin_days: Vec<&String> = days.keys().filter(|(g, _)| g == "day").map(|(_, p)| p).collect();
    // Every date once: the first tick pulses the day before (first sight); then one per local
    // midnight, however long the day (23 h on 03-29, 25 h on 10-25). The October run resumes from
    // the March watermark, so it catches up the months between (within the lateness bound) once.
    for (g, n) in &days {
        assert!(*n <= 2, "{g:?} pulsed {n} times for 2 tenants");
    }
    for date in ["2026-03-28", "2026-03-29", "2026-03-30", "2026-10-24", "2026-10-25", "2026-10-26"] {
        assert!(berlin_days.contains(&&date.to_string()), "{date} pulsed");
    }
    assert_eq!(
        days[&("month".to_string(), "2026-03".to_string())],
        2,
        "Tokyo (15:00Z) and Berlin (22:00Z on 03-31) both ended March in range"
    );
}

#[tokio::test]
async fn catch_up_all_pulses_both_missed_days_in_order_latest_only_the_last() {
    for (policy, want, skipped) in
        [("all", vec!["2026-11-26", "2026-11-27", "2026-11-28"], 0), ("latest", vec!["2026-11-26", "2026-11-28"], 1)]
    {
        let local = Local::new().await;
        let d = deps(&local, &[("TICKWORK_PULSE_CATCH_UP", policy)], "2026-11-27T00:10:00Z").await;
        add_tenants(&d, &migrated(&d, 1, "UTC")).await.unwrap();
        tick(&local, &d, "2026-11-27T00:10:00Z").await; // pulses the 26th
                                                        // No ticks for two days, then one.
        let r = tick(&local, &d, "2026-11-29T00:10:00Z").await;
        assert_eq!(r.skipped.get("day").copied().unwrap_or(0), skipped, "{policy}");
        let got: Vec<String> = pulses_of(&d, "day").await.into_keys().collect();
        assert_eq!(got, want, "{policy}");
    }
}

#[tokio::test]
async fn dry_run_and_pause_write_nothing_and_bad_input_is_named() {
    let local = Local::new().await;
    let d = deps(&local, &[], "2026-11-29T00:01:00Z").await;
    add_tenants(&d, &migrated(&d, 5, "UTC")).await.unwrap();
    local.clock.set(ms("2026-11-29T00:01:00Z"));
    d.db.meter().reset();
    let dry = Tick::parse(&Tick::envelope(ms("2026-11-29T00:01:00Z"), true)).unwrap();
    let r = run(&d, &dry, &Unlimited, "dry").await.unwrap();
    assert_eq!((r.outcome, r.tenants, r.pulses["day"]), (Outcome::DryRun, 5, 5));
    assert_eq!(d.db.meter().read_write_requests().1, 0, "dry run writes nothing");
    d.marks.set_paused(&d.cfg.job, true, Some("runaway")).await.unwrap();
    let r = tick(&local, &d, "2026-11-29T00:02:00Z").await;
    assert_eq!(r.outcome, Outcome::Paused);
    assert_eq!(d.db.meter().read_write_requests(), (1, 0));
    assert!(pulses_of(&d, "day").await.is_empty());

    let err = pulse_sweep::handle(&d, serde_json::json!({"time": "2026-11-29T00:00:00Z"}), ms("2026-11-29T00:05:00Z"))
        .await
        .unwrap_err();
    assert!(matches!(err, PulseError::BadEvent(_)), "{err}");
    assert!(err.to_string().contains("detail-type"), "{err}");
    let err = add_tenants(
        &d,
        &[Tenant {
            id: "x".into(),
            zone: "Mars/Olympus_Mons".into(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        }],
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("Mars/Olympus_Mons"), "{err}");
    assert_eq!(tickwork_tests::count_where(&d.db, &d.tables.tenants, "pk", "x").await, 0, "nothing written");
}

/// 3 workers on phase-shifted ticks over 3 simulated days; every boundary invocation crashes at
/// its k-th DynamoDB call (no cleanup: its lease stays until it expires). Every pulse exists exactly
/// once, no tenant is missed, and no watermark ever gets ahead of its tenants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashes_at_any_call_lose_and_duplicate_nothing() {
    let local = Local::new().await;
    for k in [11u64, 23, 47] {
        let cfg = SimConfig {
            tenants: 32,
            days: 2,
            tick_ms: 1_200_000,
            page_size: 4,
            drain_every: 1_000_000,
            crash_every: Some(k),
            check_watermarks: true,
            ..SimConfig::default()
        };
        let report = simulate(&local.sdk, &cfg).await.unwrap();
        assert!(report.crashes > 0, "k={k}: crashes were injected");
        let mut expected: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..cfg.tenants {
            for day in expected_day_pulses(&cfg, ZONES[i % ZONES.len()]).unwrap() {
                *expected.entry(day).or_default() += 1;
            }
        }
        let got: BTreeMap<String, u64> =
            report.pulses.iter().filter(|((g, _), _)| g == "day").map(|((_, p), n)| (p.clone(), *n)).collect();
        assert_eq!(got, expected, "k={k}: every (tenant, day) pulsed ({} crashes)", report.crashes);
        let twice: Vec<_> = report.deliveries.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "k={k}: delivered more than once: {twice:?}");
        eprintln!("k={k}: {} crashes, outcomes {:?}", report.crashes, report.outcomes);
    }
}
