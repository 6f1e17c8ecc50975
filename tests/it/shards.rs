//! A boundary shared by concurrent shard workers (`TICKWORK_PULSE_SHARD_WORKERS`): 10,000 tenants
//! over 16 shards, the leader and 7 helpers at once, one helper crashing after a write applied,
//! one stalled past its shard's lease and writing afterwards. Every tenant pulsed exactly once,
//! the watermark written only when every shard is done, and the idle tick still one read.

use std::collections::BTreeMap;
use std::time::Duration;

use tickwork::budget::Unlimited;
use tickwork::config::Env;
use tickwork::queue::{queue_table, QueueConfig};
use tickwork::tenants::{tenants_table, Position, Tenant, Tenants};
use tickwork_lambda::{Outcome, Tick};
use tickwork_sim::queued_units;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::{quick_retry, unique, Local};

const ZONE: &str = "Asia/Tokyo";
const SHARDS: u32 = 16;
const TENANTS: usize = 10_000;

struct Unstall(Faults);

impl Drop for Unstall {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Worker `w` of the tick at `t` as its own task: the leader (0) on the scheduled event, the
/// others on the helper event the leader sends.
fn spawn_worker(
    deps: pulse_sweep::Deps,
    t: i64,
    w: u32,
) -> tokio::task::JoinHandle<Result<pulse_sweep::Report, pulse_sweep::PulseError>> {
    let event =
        if w == 0 { Tick::envelope(t, false) } else { Tick::helper_envelope(t, &format!("leader#helper{w}"), w) };
    let tick = Tick::parse(&event).unwrap();
    let owner = unique(&format!("w{w}"));
    tokio::spawn(async move { pulse_sweep::run(&deps, &tick, &Unlimited, &owner).await })
}

use tickwork_tests::ms;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn ten_thousand_tenants_over_16_shards_and_8_workers_each_pulsed_once_watermark_last() {
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let env = Env::from_pairs([("TICKWORK_PULSE_SHARD_WORKERS", "8"), ("TICKWORK_PULSE_PAGE_SIZE", "100")]);
    let cfg = pulse_sweep::PulseConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let ttl = cfg.lease.ttl.as_millis() as i64;
    let deps_with = |faults: Option<&Faults>| {
        let db = local.db_with(faults, None, &quick_retry());
        db.register_gsis(&tables.queue, queue_table().gsi_shapes());
        db.register_gsis(&tables.tenants, tenants_table().gsi_shapes());
        pulse_sweep::Deps::new(db, local.clock(), cfg.clone(), tables.clone(), SHARDS, QueueConfig::default())
    };

    // Tokyo's tenants, all following the group, whose last completed run is the 29th's (the
    // 28th pulsed).
    local.clock.set(ms("2026-11-29T14:00:00Z"));
    let admin = deps_with(None);
    let list: Vec<Tenant> = (0..TENANTS)
        .map(|i| Tenant {
            id: format!("t{i:05}"),
            zone: ZONE.into(),
            active: true,
            since_ms: Some(ms("2026-01-01T00:00:00Z")),
            pos: Position::Follows,
        })
        .collect();
    Tenants::new(local.fresh_db(), &tables.tenants, SHARDS).put_all(&list).await.unwrap();
    admin.marks.register_groups(&cfg.job, &[ZONE.to_string()], SHARDS).await.unwrap();
    admin.marks.set_marks(&cfg.job, &[(ZONE, "2026-11-29")]).await.unwrap();

    // Round 1, at Tokyo's midnight into the 30th: the leader and 7 helpers at once. Helper 2
    // dies right after its third flush is applied; helper 5 stalls in its second flush until
    // released, holding its shard's lease.
    let t1 = ms("2026-11-29T15:00:00Z");
    local.clock.set(t1);
    let crash = Faults::new();
    crash.plan(Planned { op: Some("TransactWriteItems"), nth: 3, fault: Fault::CrashAfter });
    let stall = Faults::new();
    stall.plan(Planned { op: Some("TransactWriteItems"), nth: 2, fault: Fault::Stall });
    // A failed assertion must not leave the stalled thread blocked (the test would hang).
    let _unstall = Unstall(stall.clone());
    // The leader first; its helpers once it has started the run (as the deployed leader starts
    // them: after `start_run`, by asynchronous invocation).
    let mut workers = Vec::new();
    for w in 0..8 {
        if w == 1 {
            while !admin.marks.read_strong(&cfg.job).await.unwrap().runs.contains_key(ZONE) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let faults = match w {
            2 => Some(&crash),
            5 => Some(&stall),
            _ => None,
        };
        workers.push(spawn_worker(deps_with(faults), t1, w));
    }
    // Every worker but the stalled one ends; the stalled one holds its shard.
    let stalled = workers.remove(5);
    let mut outcomes = Vec::new();
    for w in workers {
        outcomes.push(w.await.unwrap().map(|r| r.outcome));
    }
    assert!(stall.is_stalled(), "helper 5 is stalled in a flush");
    assert!(outcomes[2].is_err() && crash.crashed(), "helper 2 died: {:?}", outcomes[2]);
    assert!(outcomes.iter().any(|o| matches!(o, Ok(Outcome::Partial))), "{outcomes:?}");
    let state = admin.marks.read_strong(&cfg.job).await.unwrap();
    assert_eq!(state.marks.get(ZONE).map(String::as_str), Some("2026-11-29"), "not every shard is done: no advance");

    // Round 2, a quarter hour past both leases' expiry: the leader and 3 helpers finish the
    // shards the dead and the stalled worker held, from their checkpoints.
    let t2 = t1 + ttl + 900_000;
    local.clock.set(t2);
    let mut round2 = Vec::new();
    for w in 0..4 {
        if w == 1 {
            // The leader's job lease taken (the run is started already): helpers may go.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        round2.push(spawn_worker(deps_with(None), t2, w));
    }
    let mut completed = 0;
    for w in round2 {
        let r = w.await.unwrap().unwrap();
        completed += r.groups_completed;
    }
    assert!(completed >= 1, "the run completed in round 2");
    let state = admin.marks.read_strong(&cfg.job).await.unwrap();
    assert_eq!(state.marks.get(ZONE).map(String::as_str), Some("2026-11-30"));

    // The stalled worker wakes up and writes: fenced out by its shard's lease, nothing lands
    // (its flush would have moved its shard's checkpoint back to where it stalled).
    let run = format!("{ZONE}@2026-11-30");
    let before = admin.checkpoints.read(&cfg.job, &run).await.unwrap();
    stall.release();
    let late = stalled.await.unwrap();
    assert!(late.is_ok(), "{late:?}");
    assert_eq!(admin.checkpoints.read(&cfg.job, &run).await.unwrap(), before, "the stale flush changed nothing");
    // A run's shard leases are not kept for ever: each expires by TTL like the run's checkpoints.
    let lease = format!("{}#{run}#0", cfg.job);
    let item = local.db.get_strong(&tables.control, tickwork::lease::lease_key(&lease)).await.unwrap();
    assert!(item.expect("shard 0's lease").contains_key(tickwork::schema::TTL), "{lease} has no TTL");
    assert_eq!(stall.injected().get(&Fault::Stall), Some(&1));

    // Every tenant's day, exactly once.
    // (Tokyo's 29th ends the 29th's day and, a Sunday, week 48.)
    let mut pulses: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (key, n) in queued_units(&local.db, &tables.queue).await.unwrap() {
        assert_eq!(n, 1, "{key} is in {n} batch items");
        let parts: Vec<&str> = key.split('#').collect();
        assert_eq!(parts[0], "pulse", "{key}");
        *pulses.entry((parts[2].to_string(), parts[3].to_string())).or_default() += 1;
    }
    let want = BTreeMap::from([
        (("day".to_string(), "2026-11-29".to_string()), TENANTS as u64),
        (("week".to_string(), "2026-W48".to_string()), TENANTS as u64),
    ]);
    assert_eq!(pulses, want, "every tenant's periods, once each");

    // And the next tick of the same local date is idle: one read, no write.
    let idle = deps_with(None);
    let t3 = t2 + 900_000;
    local.clock.set(t3);
    let r =
        pulse_sweep::run(&idle, &Tick::parse(&Tick::envelope(t3, false)).unwrap(), &Unlimited, "idle").await.unwrap();
    assert_eq!(r.outcome, Outcome::Idle);
    assert_eq!(idle.db.meter().read_write_requests(), (1, 0));
}

/// A tenant woken (added since its group's last run) when the group's shared run starts: the run
/// pages it, it is not visited twice, and the next tick's visit finds it with its group.
#[tokio::test]
async fn a_woken_tenant_of_a_group_starting_a_shared_run_gets_each_period_once() {
    let local = Local::new().await;
    let tables = local.sweep_tables().await;
    let env = Env::from_pairs([("TICKWORK_PULSE_SHARD_WORKERS", "4"), ("TICKWORK_PULSE_PAGE_SIZE", "3")]);
    let cfg = pulse_sweep::PulseConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), cfg, tables.clone(), 4, QueueConfig::default());
    local.clock.set(ms("2026-11-28T16:00:00Z"));
    let first: Vec<Tenant> = (0..8).map(|i| Tenant::new(format!("a{i}"), ZONE)).collect();
    pulse_sweep::add_tenants(&deps, &first).await.unwrap();
    let run = |at: &str| {
        let deps = deps.clone();
        let t = ms(at);
        local.clock.set(t);
        async move {
            pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(t, false)).unwrap(), &Unlimited, &unique("l"))
                .await
                .unwrap()
        }
    };
    // The group's first run (Tokyo's 29th begins), then a tenant added: woken.
    assert_eq!(run("2026-11-28T15:05:00Z").await.outcome, Outcome::Completed);
    local.clock.set(ms("2026-11-29T03:00:00Z"));
    pulse_sweep::add_tenants(&deps, &[Tenant::new("late", ZONE)]).await.unwrap();
    let (woken, _) = deps.marks.waiting("pulse-sweep", ZONE).await.unwrap();
    assert!(woken.iter().any(|w| w.unit == "late"), "added after its group's run: woken ({woken:?})");
    // Tokyo's 30th begins: the run starts with the woken tenant in it; the next tick visits it.
    assert_eq!(run("2026-11-29T15:05:00Z").await.outcome, Outcome::Completed);
    run("2026-11-29T15:20:00Z").await;
    let mut late: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in queued_units(&local.db, &tables.queue).await.unwrap() {
        assert_eq!(n, 1, "{key} queued {n} times");
        if let ["pulse", "late", grain, period] = key.split('#').collect::<Vec<_>>()[..] {
            *late.entry(format!("{grain} {period}")).or_default() += 1;
        }
    }
    assert!(late.contains_key("day 2026-11-29"), "the run's day for the woken tenant: {late:?}");
    let state = deps.marks.read_strong("pulse-sweep").await.unwrap();
    assert!(!state.wake.contains_key(ZONE), "visited: nothing waiting in the state item");
    assert!(deps.marks.waiting("pulse-sweep", ZONE).await.unwrap().0.is_empty(), "and no wake item left");
}
