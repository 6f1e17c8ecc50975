//! Failure paths as AWS runs them, which the local servers alone never showed: a failing unit's
//! dead letter (a put the worker's role must be granted, `tests/it/iam.rs`), a unit that kills its
//! worker's process, a shard registry unreadable at start-up.
//!
//! The worker runs here as the real binary behind the Runtime API stand-in, a process of its own
//! that can die, and its metrics are read from what it prints.

use std::time::Duration;

use serde_json::Value;
use tickwork::batch::Batch;
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork::schema::{self, get_s};
use tickwork::watermark::Watermarks;
use tickwork_tests::Local;

use crate::logs::{base_env, provisioned};

fn window(w: &str) -> Vec<serde_json::Map<String, Value>> {
    vec![serde_json::Map::from_iter([("window".to_string(), Value::String(w.to_string()))])]
}

fn item(id: &str, kind: &str, b: &Batch) -> NewItem {
    NewItem { id: id.into(), kind: kind.into(), payload: b.to_payload(), tenant: None, due_ms: 0 }
}

/// The value of `metric` in an invocation's metrics line (EMF).
fn metric(lines: &[String], metric: &str) -> Option<f64> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("_aws").is_some())
        .and_then(|v| v[metric].as_f64())
}

async fn rollup_rows(local: &Local, prefix: &str, tenants: &[String]) -> usize {
    let mut n = 0;
    for t in tenants {
        let key = schema::key(t.as_str(), "utc#2026-11-29");
        n += usize::from(local.db.get_strong(&format!("{prefix}-summaries"), key).await.unwrap().is_some());
    }
    n
}

/// A batch whose one unit can never succeed: that unit is dead-lettered alone, in a put of its
/// own (which the worker's role is granted: `LeaveParts`), every other unit ran once, the item is
/// done, and the invocation's metrics line says `FailedUnits` 1 (it said 0: the item was counted,
/// and it finished).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_failing_unit_dead_letters_that_unit_alone_and_reports_it() {
    let local = Local::new().await;
    let prefix = provisioned(&local).await;
    let q = Queue::new(local.fresh_db(), format!("{prefix}-queue"), QueueConfig::default(), local.clock());
    let good: Vec<String> = (0..30).map(|i| format!("t{i:02}")).collect();
    let mut b = Batch::new(Default::default());
    b.add(window("2026-11-29"), good.clone());
    // No date: the handler refuses it for good.
    b.add(window("2026-13-45"), ["t-bad".to_string()]);
    q.enqueue(&item("fanout#b1", "utc-daily", &b)).await.unwrap();
    let env = base_env(&local, &prefix, "INFO", "unused");
    let now = jiff::Timestamp::now().as_millisecond();
    let events = [tickwork_lambda::Tick::envelope(now, false).to_string()];
    let run =
        lambda_standin::run(env!("CARGO_BIN_EXE_lambda-queue-worker").as_ref(), &env, &events, Duration::from_secs(60))
            .await
            .unwrap();
    let inv = &run.invocations[0];
    assert!(inv.ok, "{}", inv.body);
    assert_eq!(metric(&inv.stdout, "FailedUnits"), Some(1.0), "one failed unit, in the metrics line");
    let stored = q.get("fanout#b1").await.unwrap().unwrap();
    assert_eq!(get_s(&stored, tickwork::queue::STATE), Some("done"));
    let dead = q.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(dead[0].id.starts_with("fanout#b1#dead#"), "{}", dead[0].id);
    let letter = q.get(&dead[0].id).await.unwrap().unwrap();
    let payload = get_s(&letter, tickwork::queue::PAYLOAD).unwrap();
    let job = tickwork::queue::Job {
        attempts: 1,
        ..tickwork::queue::Job::unclaimed(dead[0].id.clone(), "utc-daily", payload)
    };
    let units: Vec<String> =
        Batch::of_job(&job).unwrap().unwrap().units("utc-daily").into_iter().map(|u| u.key).collect();
    assert_eq!(units, ["utc-daily#t-bad#2026-13-45"], "the bad unit alone");
    assert_eq!(rollup_rows(&local, &prefix, &good).await, 30, "every other unit ran");
}

/// A unit that aborts its worker's process (`std::process::abort`, as the out-of-memory killer
/// would end it), run by a real binary: its batch-mates, and the item claimed beside it, are done;
/// it ends dead-lettered alone after its attempts. Before, every item that process held lost an
/// attempt with each death and was buried whole after five, the units after the poison one never
/// run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_that_aborts_its_worker_is_dead_lettered_alone_and_harms_no_other() {
    let local = Local::new().await;
    let prefix = provisioned(&local).await;
    let q = Queue::new(
        local.fresh_db_with_gsis(&format!("{prefix}-queue"), &queue_table()),
        format!("{prefix}-queue"),
        QueueConfig::default(),
        local.clock(),
    );
    // The poison unit last in its batch: when it starts, the worker has claimed the next item.
    let a: Vec<String> = (0..20).map(|i| format!("a{i:02}")).collect();
    let mut ba = Batch::new(Default::default());
    ba.add(window("2026-11-29"), a.iter().cloned().chain(["poison-1".to_string()]));
    let b: Vec<String> = (0..10).map(|i| format!("b{i:02}")).collect();
    let mut bb = Batch::new(Default::default());
    bb.add(window("2026-11-29"), b.clone());
    q.enqueue(&item("poison#a", "poison", &ba)).await.unwrap();
    q.enqueue(&item("poison#b", "poison", &bb)).await.unwrap();
    let mut env = base_env(&local, &prefix, "WARN", "unused");
    for (k, v) in [
        // A dead worker's claims come back after 3 s; the single poison unit is buried after 2.
        ("TICKWORK_QUEUE_VISIBILITY_SECS", "3"),
        ("TICKWORK_QUEUE_MAX_ATTEMPTS", "2"),
        ("TICKWORK_WORKER_HANDLER_TIMEOUT_SECS", "1"),
        ("TICKWORK_DEADLINE_MARGIN_SECS", "1"),
        ("TICKWORK_WORKER_CONCURRENCY", "4"),
    ] {
        env.push((k.to_string(), v.to_string()));
    }
    let bin = env!("CARGO_BIN_EXE_lambda-poison-worker");
    let (mut deaths, mut rounds, mut survived) = (0, 0, 0);
    // The hourly safety poll, as often as a dead worker's claims come back.
    while rounds < 30 {
        rounds += 1;
        let now = jiff::Timestamp::now().as_millisecond();
        let events = [tickwork_lambda::Tick::envelope(now, false).to_string()];
        let run = lambda_standin::run(bin.as_ref(), &env, &events, Duration::from_secs(20)).await.unwrap();
        let inv = &run.invocations[0];
        if inv.ok {
            survived += 1;
        } else {
            assert!(inv.body.contains("Runtime.ExitError"), "{}", inv.body);
            // It died handling the event, not at start-up (which prints nothing).
            assert!(!inv.stdout.is_empty() || inv.took > Duration::ZERO, "died at start-up: {}", inv.body);
            deaths += 1;
        }
        let live = tickwork_tests::count_where(q.db(), q.table(), "state", "pending").await
            + tickwork_tests::count_where(q.db(), q.table(), "state", "claimed").await;
        if live == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(3_100)).await;
    }
    println!("{deaths} deaths and {survived} clean ends over {rounds} invocations");
    assert!(deaths >= 2, "the poison unit died more than once: {deaths}");
    let dead = q.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1, "one dead letter: {dead:?}");
    let letter = q.get(&dead[0].id).await.unwrap().unwrap();
    let job = tickwork::queue::Job {
        attempts: 2,
        ..tickwork::queue::Job::unclaimed(
            dead[0].id.clone(),
            "poison",
            get_s(&letter, tickwork::queue::PAYLOAD).unwrap(),
        )
    };
    let units: Vec<String> = Batch::of_job(&job).unwrap().unwrap().units("poison").into_iter().map(|u| u.key).collect();
    assert_eq!(units, ["poison#poison-1#2026-11-29"], "the poison unit, alone");
    let all: Vec<String> = a.iter().chain(&b).cloned().collect();
    assert_eq!(rollup_rows(&local, &prefix, &all).await, 30, "its batch-mates and the item beside it, done");
    for id in ["poison#a", "poison#b"] {
        let stored = q.get(id).await.unwrap().unwrap();
        assert_eq!(get_s(&stored, tickwork::queue::STATE), Some("done"), "{id}");
    }
}

/// A shard registry unreadable at a cold start (a throttle the retries did not outlast): the
/// fan-out refuses to start. Before, it started with its configured count, a lowered 4 where 16
/// were written, and completed its windows without tenants in shards 4 to 15.
#[tokio::test]
async fn a_shard_registry_unreadable_at_start_up_stops_the_start_and_does_not_fall_back() {
    use tickwork_tests::faults::{Fault, Faults, Planned};
    let local = Local::new().await;
    let tables = local.fanout_tables().await;
    let reg = tickwork::shard::ShardRegistry::new(local.fresh_db(), &tables.control);
    reg.record("tenants", 16).await.unwrap();
    let cfg =
        tenant_fanout::FanoutConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = |faults: Option<&Faults>| {
        let one_try = tickwork::retry::RetryPolicy { max_attempts: 1, ..tickwork_tests::quick_retry() };
        let db = local.db_with(faults, None, &one_try);
        tenant_fanout::Deps::new(db, local.clock(), cfg.clone(), &tables, 4, QueueConfig::default())
    };
    let faults = Faults::new();
    faults.plan(Planned { op: Some("GetItem"), nth: 1, fault: Fault::Throttle });
    let refused = deps(Some(&faults)).resolve_shards().await;
    let Err(e) = refused else { panic!("the start-up fails") };
    assert!(e.to_string().to_lowercase().contains("throttl"), "{e}");
    let started = deps(None).resolve_shards().await.expect("a later start-up reads it");
    assert_eq!(started.tenants.shards(), 16, "every shard ever written to");
    // The start-up error names what it refused.
    let msg = tickwork_lambda::base::unresolved_shards(e).to_string();
    assert!(msg.contains("shard registry") && msg.contains("refusing to start"), "{msg}");
}

/// Runs the fan-out over `tenants` (one shard, pages of 1,000) on three days: the first window, then
/// the next two at once (caught up oldest first). Answers each run's report and the failure
/// records of the second day.
async fn fan_out_three_days(tenants: &[tickwork::tenants::Tenant], corrupt: &[String]) -> Vec<tenant_fanout::Report> {
    let local = Local::new().await;
    let tables = local.fanout_tables().await;
    tickwork::tenants::Tenants::new(local.fresh_db(), &tables.tenants, 1).put_all(tenants).await.unwrap();
    for id in corrupt {
        tickwork_tests::set_stored_position(&local.db, &tables.tenants, id, "not-a-date").await;
    }
    let cfg = tenant_fanout::FanoutConfig::from_env(
        &tickwork::config::Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "1000")]),
        Duration::from_secs(1),
    )
    .unwrap();
    let db = local.fresh_db_with_gsis(&tables.queue, &queue_table());
    let deps = tenant_fanout::Deps::new(db, local.clock(), cfg, &tables, 1, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    let mut out = Vec::new();
    for at in ["2026-11-28T06:00:00Z", "2026-11-30T06:00:00Z"] {
        let t = tickwork_tests::ms(at);
        local.clock.set(t);
        let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(t, false)).unwrap();
        out.push(
            tenant_fanout::run(&deps, &tick, &tickwork::budget::Unlimited, &tickwork_tests::unique("f")).await.unwrap(),
        );
    }
    out
}

/// A page of 1,000 tenants with ids of 900 bytes (accepted ids) is some 900 KB: its one item was
/// refused on every tick (past the queue's 256 KB payload check), and since windows run oldest
/// first and stop at the first error, every later UTC day stalled too. Now the page's batch is
/// split to the batch size, in one transaction: the windows complete, later ones too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_long_ids_and_a_page_of_unreadable_tenants_hold_no_window_back() {
    let long: Vec<tickwork::tenants::Tenant> =
        (0..1000).map(|i| tickwork::tenants::Tenant::new(format!("{i:04}-{}", "x".repeat(895)), "UTC")).collect();
    let r = fan_out_three_days(&long, &[]).await;
    for (i, r) in r.iter().enumerate() {
        assert_eq!(r.outcome, tenant_fanout::Outcome::Completed, "run {i}: {r:?}");
    }
    assert_eq!((r[0].windows_done, r[1].windows_done), (1, 2), "the next two windows, caught up");
    assert_eq!(r[1].enqueued, 2000, "every tenant, both days");
    // 150 unreadable tenants on one page: 150 failure records, more than one transaction holds.
    let few: Vec<tickwork::tenants::Tenant> = tickwork_tests::tenants(1000, "UTC", 4);
    let bad: Vec<String> = few.iter().take(150).map(|t| t.id.clone()).collect();
    let r = fan_out_three_days(&few, &bad).await;
    for (i, r) in r.iter().enumerate() {
        assert_eq!(r.outcome, tenant_fanout::Outcome::Completed, "run {i}: {r:?}");
    }
    assert_eq!((r[0].failed_tenants, r[1].failed_tenants), (150, 300), "isolated and recorded, every window");
    assert_eq!(r[1].windows_done, 2);
}

/// A tenant added just before its zone's midnight, which the run's page did not show (a global
/// secondary index lags its table: DynamoDB's, not moto's): the run left it in the wake set, and
/// the next tick brings it to the group's mark. Before, the single leader took every woken tenant
/// out of the wake set with the run's first write, as if its pages covered them, and this one
/// was pulsed a day late (under `catch-up=skip`, never); the shared mode already kept them.
#[tokio::test]
async fn a_tenant_the_runs_page_did_not_show_stays_woken_and_is_pulsed_at_the_next_tick() {
    use tickwork_tests::faults::IndexLag;
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let lag = IndexLag::new(tickwork::tenants::BY_ZONE, &["late"]);
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&local.sdk).interceptor(lag.clone()).build(),
    );
    let db = tickwork::Db::new(client, tickwork::meter::Meter::new(tickwork::meter::CapacitySource::Estimate));
    db.register_gsis(&tables.queue, queue_table().gsi_shapes());
    let cfg =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    let tick = |at: &str| {
        local.clock.set(tickwork_tests::ms(at));
        let t = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(tickwork_tests::ms(at), false)).unwrap();
        let deps = &deps;
        async move { pulse_sweep::run(deps, &t, &tickwork::budget::Unlimited, &tickwork_tests::unique("w")).await.unwrap() }
    };
    local.clock.set(tickwork_tests::ms("2026-11-29T10:00:00Z"));
    pulse_sweep::add_tenants(&deps, &tickwork_tests::tenants(5, "Europe/Berlin", 0)).await.unwrap();
    tick("2026-11-29T10:00:00Z").await;
    // 23:50 in Berlin: added, and woken.
    local.clock.set(tickwork_tests::ms("2026-11-29T22:50:00Z"));
    pulse_sweep::add_tenants(&deps, &[tickwork::tenants::Tenant::new("late", "Europe/Berlin")]).await.unwrap();
    // Berlin's midnight: the run for 11-30 starts now; its page does not show `late` yet.
    let r = tick("2026-11-29T23:00:00Z").await;
    assert_eq!(r.groups_completed, 1, "{r:?}");
    assert!(lag.hid.load(std::sync::atomic::Ordering::SeqCst) > 0, "the page did not show it");
    let (woken, _) = tickwork::watermark::Watermarks::new(local.fresh_db(), &deps.tables.control, local.clock())
        .waiting("pulse-sweep", "Europe/Berlin")
        .await
        .unwrap();
    assert!(woken.iter().any(|w| w.unit == "late"), "still woken after a run that did not see it: {woken:?}");
    lag.catch_up();
    tick("2026-11-29T23:15:00Z").await;
    let units = tickwork_sim::queued_units(&deps.db, &deps.tables.queue).await.unwrap();
    assert!(
        units.contains_key("pulse#late#day#2026-11-29"),
        "pulsed at the next tick: {:?}",
        units.keys().filter(|k| k.contains("late")).collect::<Vec<_>>()
    );
}

/// 100 zones with woken tenants, ids of 900 bytes (accepted ids): the woken ids live in items of
/// their own and the job's state item keeps one small number per zone, so it stays under its
/// bound and the read every idle tick makes stays at most 1 RCU; no add fails. Before, the ids
/// lived in the state item (capped at 100 a zone, not in all): about 440 of them reached
/// DynamoDB's 400 KB item limit, after which every `tenants add` failed after writing its tenant.
///
/// `TICKWORK_WAKES_PER_ZONE` (default 10: 1,000 ids, twice what broke the old item) sets how many
/// a zone; the state item's size does not depend on it, which 100 (10,000 ids, about three
/// minutes on the local server) shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_wakes_across_100_zones_keeps_the_state_item_small() {
    use futures::stream::{self, StreamExt, TryStreamExt};
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let cfg =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), cfg, tables, 8, QueueConfig::default());
    let zones: Vec<String> =
        jiff::tz::db().available().map(|z| z.to_string()).filter(|z| z.contains('/')).take(100).collect();
    assert_eq!(zones.len(), 100);
    let per_zone: usize = std::env::var("TICKWORK_WAKES_PER_ZONE").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    // Every zone has run once: its mark is in the state item, as it is on any day.
    let marks: Vec<(&str, &str)> = zones.iter().map(|z| (z.as_str(), "2026-11-29")).collect();
    deps.marks.set_marks("pulse-sweep", &marks).await.unwrap();
    let calls: Vec<Vec<tickwork::tenants::Tenant>> = zones
        .iter()
        .enumerate()
        .flat_map(|(zi, z)| {
            let all: Vec<tickwork::tenants::Tenant> = (0..per_zone)
                .map(|i| tickwork::tenants::Tenant::new(format!("{zi:03}{i:03}{}", "x".repeat(894)), z.as_str()))
                .collect();
            // Calls of 25, each small enough to wake every tenant it adds.
            all.chunks(tickwork::tenants::WAKE_BULK_LIMIT).map(|c| c.to_vec()).collect::<Vec<_>>()
        })
        .collect();
    stream::iter(calls.iter().map(|c| pulse_sweep::add_tenants(&deps, c)))
        .buffer_unordered(8)
        .try_collect::<Vec<_>>()
        .await
        .expect("no add fails");
    let reader = local.fresh_db();
    let state = reader
        .get(
            reader
                .client()
                .get_item()
                .table_name(&deps.tables.control)
                .set_key(Some(tickwork::watermark::watermark_key("pulse-sweep"))),
        )
        .await
        .unwrap();
    let size = tickwork::capacity::item_size(state.item().unwrap());
    println!("state item: {size} bytes for 100 zones, each with {per_zone} woken tenants");
    assert!(size <= 8 * 1024, "{size} bytes");
    assert!(reader.meter().total().rcu <= 1.0, "the idle tick's read: {} RCU", reader.meter().total().rcu);
    let woken = Watermarks::new(local.fresh_db(), &deps.tables.control, local.clock());
    for z in zones.iter().take(3) {
        assert_eq!(woken.waiting("pulse-sweep", z).await.unwrap().0.len(), per_zone, "{z}: every tenant waits");
    }
}

/// A tenant moved by an operator between its page's read and the run's write: the run's
/// conditional write of its position fails, its pulses leave the flush, and it is woken (a wake
/// item of its own, which the sweep's role may write: `WokenTenants`), to be planned again at the
/// next tick from where it now stands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_moved_while_its_page_is_written_is_woken_to_be_planned_again() {
    use tickwork_tests::faults::{Fault, Faults, Planned};
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let stall = Faults::new();
    stall.plan(Planned { op: Some("TransactWriteItems"), nth: 1, fault: Fault::Stall });
    let db = local.db_with(Some(&stall), None, &tickwork_tests::quick_retry());
    db.register_gsis(&tables.queue, queue_table().gsi_shapes());
    let cfg =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    // The operator's tools, on clients of their own.
    let marks = Watermarks::new(local.fresh_db(), &deps.tables.control, local.clock());
    let admin = pulse_sweep::Deps {
        tenants: tickwork::tenants::Tenants::new(local.fresh_db(), &deps.tables.tenants, 8)
            .with_registry(marks.clone(), "pulse-sweep"),
        marks,
        ..deps.clone()
    };
    let at = tickwork_tests::ms("2026-11-29T10:00:00Z");
    local.clock.set(at);
    pulse_sweep::add_tenants(&admin, &[tickwork::tenants::Tenant::new("mover", "Europe/Berlin")]).await.unwrap();
    let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(at, false)).unwrap();
    let sweep = {
        let deps = deps.clone();
        tokio::spawn(async move { pulse_sweep::run(&deps, &tick, &tickwork::budget::Unlimited, "w").await })
    };
    while !stall.is_stalled() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The run read `mover` (new: a position of its own) and is writing its pulses and position.
    assert!(admin.tenants.move_zone("mover", "Asia/Tokyo").await.unwrap());
    stall.release();
    let r = sweep.await.unwrap().unwrap();
    assert_eq!(r.outcome, pulse_sweep::Outcome::Completed, "{r:?}");
    let (woken, _) = admin.marks.waiting("pulse-sweep", "Europe/Berlin").await.unwrap();
    assert!(woken.iter().any(|w| w.unit == "mover"), "woken where it was read: {woken:?}");
    let units = tickwork_sim::queued_units(&deps.db, &deps.tables.queue).await.unwrap();
    assert!(!units.keys().any(|k| k.contains("#mover#")), "its pulses left the flush: {units:?}");
}

/// A zone whose last tenant left: its next run finds nobody and takes it out of the registry, so
/// it stops costing its daily run (start, checkpoint, a page per shard, the advance: 11 requests a
/// day, which the docs called nothing). A zone an add registered within the hour stays: the add
/// may still be writing its tenant, which the run's page would not show yet.
#[tokio::test]
async fn a_zone_without_tenants_leaves_the_registry_unless_one_was_just_registered() {
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let cfg =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let db = local.fresh_db_with_gsis(&tables.queue, &queue_table());
    let deps = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default());
    let tick = |at: &str| {
        let t = tickwork_tests::ms(at);
        local.clock.set(t);
        let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(t, false)).unwrap();
        let deps = &deps;
        async move {
            deps.db.meter().reset();
            pulse_sweep::run(deps, &tick, &tickwork::budget::Unlimited, &tickwork_tests::unique("w")).await.unwrap()
        }
    };
    local.clock.set(tickwork_tests::ms("2026-11-28T10:00:00Z"));
    let one = |id: &str, zone: &str| tickwork::tenants::Tenant::new(id, zone);
    pulse_sweep::add_tenants(&deps, &[one("t1", "Asia/Tokyo"), one("t2", "Europe/Berlin")]).await.unwrap();
    tick("2026-11-28T10:00:00Z").await;
    tick("2026-11-28T10:15:00Z").await;
    // Tokyo's only tenant leaves; Berlin's too, but Berlin gets a new one registered (and being
    // written) within the hour before its midnight.
    assert!(deps.tenants.remove("t1").await.unwrap());
    assert!(deps.tenants.remove("t2").await.unwrap());
    // Tokyo's midnight (15:00Z): the run finds nobody, and nobody registered within the hour.
    let r = tick("2026-11-28T15:00:00Z").await;
    assert_eq!((r.groups_completed, r.groups_removed), (1, 1), "{r:?}");
    local.clock.set(tickwork_tests::ms("2026-11-28T22:30:00Z"));
    deps.marks.register_groups("pulse-sweep", &["Europe/Berlin".to_string()], 8).await.unwrap();
    let r = tick("2026-11-28T23:00:00Z").await;
    assert_eq!((r.groups_completed, r.groups_removed), (1, 0), "registered within the hour: it stays {r:?}");
    let state = deps.marks.read_strong("pulse-sweep").await.unwrap();
    assert!(!state.groups.contains("Asia/Tokyo") && !state.marks.contains_key("Asia/Tokyo"), "{state:?}");
    assert!(state.groups.contains("Europe/Berlin"));
    // Tokyo's next midnight costs an idle tick's one read.
    let r = tick("2026-11-29T15:00:00Z").await;
    assert_eq!(r.groups_due, 0, "{r:?}");
    assert_eq!(deps.db.meter().read_write_requests(), (1, 0), "one read");
    // A tenant added there again: the zone is registered, and swept, again. Added at Tokyo's
    // midnight, it is owed that day (the 30th), pulsed at its end.
    pulse_sweep::add_tenants(&deps, &[one("t3", "Asia/Tokyo")]).await.unwrap();
    let r = tick("2026-11-29T15:15:00Z").await;
    assert_eq!((r.groups_completed, r.pulses.values().sum::<u64>()), (1, 0), "{r:?}");
    let r = tick("2026-11-30T15:05:00Z").await;
    assert_eq!((r.pulses["day"], r.pulses["month"]), (1, 1), "the 30th and November, at their end: {r:?}");
}

/// A tenant woken, read by the visit while suspended, and resumed (woken again) before the
/// visit's write: the write deletes only the wake it read, so the tenant stays woken and the next
/// tick pulses it. Before, the visit deleted the new wake with the old, and the tenant waited a
/// day for its group's next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_woken_again_while_its_visit_writes_is_visited_again() {
    use tickwork_tests::faults::{Fault, Faults, Planned};
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let stall = Faults::new();
    let db = local.db_with(Some(&stall), None, &tickwork_tests::quick_retry());
    db.register_gsis(&tables.queue, queue_table().gsi_shapes());
    let cfg =
        pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 8, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    let marks = Watermarks::new(local.fresh_db(), &deps.tables.control, local.clock());
    let admin = pulse_sweep::Deps {
        tenants: tickwork::tenants::Tenants::new(local.fresh_db(), &deps.tables.tenants, 8)
            .with_registry(marks.clone(), "pulse-sweep"),
        marks,
        ..deps.clone()
    };
    let run = |at: &str| {
        let t = tickwork_tests::ms(at);
        local.clock.set(t);
        let tick = tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(t, false)).unwrap();
        let deps = deps.clone();
        tokio::spawn(async move { pulse_sweep::run(&deps, &tick, &tickwork::budget::Unlimited, "w").await.unwrap() })
    };
    local.clock.set(tickwork_tests::ms("2026-11-29T10:00:00Z"));
    pulse_sweep::add_tenants(&admin, &tickwork_tests::tenants(3, "Europe/Berlin", 0)).await.unwrap();
    run("2026-11-29T10:00:00Z").await.unwrap();
    run("2026-11-29T10:15:00Z").await.unwrap();
    // Added (migrated, owed from the 28th) after the group's run, then suspended: woken, and read
    // suspended by the next visit.
    local.clock.set(tickwork_tests::ms("2026-11-29T10:20:00Z"));
    let back = tickwork_tests::owed_from_yesterday(
        vec![tickwork::tenants::Tenant::new("back", "Europe/Berlin")],
        tickwork_tests::ms("2026-11-29T10:20:00Z"),
    );
    pulse_sweep::add_tenants(&admin, &back).await.unwrap();
    assert!(admin.tenants.suspend("back").await.unwrap());
    // The visit's first write (its flush) stalls, after the ticks' writes so far.
    let nth = stall.calls_of("TransactWriteItems") + 1;
    stall.plan(Planned { op: Some("TransactWriteItems"), nth, fault: Fault::Stall });
    let visit = run("2026-11-29T10:30:00Z");
    while !stall.is_stalled() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The operator resumes it while the visit writes: woken again.
    assert!(admin.tenants.resume("back").await.unwrap());
    stall.release();
    visit.await.unwrap();
    let (woken, _) = admin.marks.waiting("pulse-sweep", "Europe/Berlin").await.unwrap();
    assert!(woken.iter().any(|w| w.unit == "back"), "still woken: {woken:?}");
    run("2026-11-29T10:45:00Z").await.unwrap();
    let units = tickwork_sim::queued_units(&admin.db, &deps.tables.queue).await.unwrap();
    assert!(units.keys().any(|k| k.starts_with("pulse#back#")), "visited at the next tick and pulsed");
}
