use std::time::Duration;

use tenant_fanout::{run, Deps, FanoutConfig, Outcome};
use tickwork::budget::{Steps, Unlimited};
use tickwork::clock::Clock;
use tickwork::config::Env;
use tickwork::queue::{queue_table, QueueConfig};
use tickwork::tenants::{Tenant, Tenants};
use tickwork_lambda::Tick;
use tickwork_tests::{count_where, Local};

const TENANTS: usize = 2_345;
/// 2026-11-29T06:00:00Z
const MORNING: i64 = 1_795_932_000_000;

async fn setup(local: &Local) -> Deps {
    let tables = local.fanout_tables().await;
    let mut seed: Vec<Tenant> = (0..TENANTS)
        .map(|i| Tenant {
            id: format!("tenant-{i:05}"),
            zone: "Europe/Berlin".into(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        })
        .collect();
    // Suspended tenants are outside the enumeration index: never visited, never enqueued.
    seed.extend((0..7).map(|i| Tenant {
        id: format!("gone-{i}"),
        zone: "UTC".into(),
        active: false,
        since_ms: None,
        pos: Default::default(),
    }));
    Tenants::new(local.db.clone(), &tables.tenants, 8).put_all(&seed).await.unwrap();
    let env = Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "100")]);
    let cfg = FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let db = local.fresh_db_with_gsis(&tables.queue, &queue_table());
    Deps::new(db, local.clock(), cfg, &tables, 8, QueueConfig::default())
}

/// Units queued for the job (one per tenant), none in two batch items.
async fn fanned(deps: &Deps) -> usize {
    let units = tickwork_sim::queued_units(&deps.db, deps.queue.table()).await.unwrap();
    let mine: Vec<(&String, &u64)> =
        units.iter().filter(|(k, _)| k.starts_with(&format!("{}#", deps.cfg.job))).collect();
    assert!(mine.iter().all(|(_, n)| **n == 1), "a unit in two batch items");
    mine.len()
}

fn tick(ms: i64) -> Tick {
    Tick::parse(&Tick::envelope(ms, false)).unwrap()
}

#[tokio::test]
async fn every_tenant_once_and_a_repeat_changes_nothing() {
    let local = Local::new().await;
    local.clock.set(MORNING);
    let deps = setup(&local).await;
    let r = run(&deps, &tick(MORNING), &Unlimited, "inv-1").await.unwrap();
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!((r.tenants, r.enqueued), (TENANTS as u64, TENANTS as u64));
    assert_eq!(fanned(&deps).await, TENANTS);
    // One batch item per page, not one per tenant.
    let items = count_where(&deps.db, deps.queue.table(), "kind", &deps.cfg.job).await;
    assert!((24..=32).contains(&items), "{items} batch items");
    // Enumeration: 8 shards of ~293 tenants at 100 a page = 3 pages each (the last page has no cursor).
    let q = deps.db.meter().op("Query");
    assert_eq!(q.items_read, TENANTS as u64, "every tenant read once; suspended ones never");
    assert!(q.requests >= 24 && q.requests <= 32, "about 3 pages per shard: {}", q.requests);

    // The same window again (a duplicate delivery, later in the day): one read, nothing written.
    local.clock.advance(600_000);
    deps.db.meter().reset();
    let again = run(&deps, &tick(MORNING + 3_600_000), &Unlimited, "inv-2").await.unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyDone);
    assert_eq!(deps.db.meter().read_write_requests(), (1, 0), "an idle fan-out costs one read");
    assert_eq!(fanned(&deps).await, TENANTS);
}

#[tokio::test]
async fn stopped_by_budget_and_resumed_still_enqueues_each_tenant_once() {
    let local = Local::new().await;
    local.clock.set(MORNING);
    let deps = setup(&local).await;
    let mut invocations = 0;
    let mut enqueued = 0;
    loop {
        invocations += 1;
        assert!(invocations < 40, "fan-out never completed");
        // Each invocation may read only a couple of pages before its budget says stop.
        let r = run(&deps, &tick(MORNING), &Steps::new(1), &format!("inv-{invocations}")).await.unwrap();
        enqueued += r.enqueued;
        match r.outcome {
            Outcome::Completed => break,
            Outcome::Partial => assert!(r.shards_left > 0),
            other => panic!("unexpected {other:?}"),
        }
        // The next scheduled invocation comes after this one's lease has lapsed.
        local.clock.advance(300_000);
    }
    assert!(invocations > 2, "the budget really cut the run ({invocations} invocations)");
    assert_eq!(enqueued, TENANTS as u64);
    assert_eq!(fanned(&deps).await, TENANTS);
}

#[tokio::test]
async fn concurrent_invocations_fan_out_once() {
    let local = Local::new().await;
    local.clock.set(MORNING);
    let deps = setup(&local).await;
    let t = tick(MORNING);
    let (a, b) = tokio::join!(run(&deps, &t, &Unlimited, "a"), run(&deps, &t, &Unlimited, "b"));
    let outcomes = [a.unwrap().outcome, b.unwrap().outcome];
    assert!(outcomes.contains(&Outcome::Completed));
    assert!(outcomes.contains(&Outcome::Busy), "{outcomes:?}");
    assert_eq!(fanned(&deps).await, TENANTS);
}

#[tokio::test]
async fn dry_run_and_pause_write_nothing_and_bad_events_are_named() {
    let local = Local::new().await;
    local.clock.set(MORNING);
    let deps = setup(&local).await;
    deps.db.meter().reset();
    let dry = Tick::parse(&Tick::envelope(MORNING, true)).unwrap();
    let r = run(&deps, &dry, &Unlimited, "dry").await.unwrap();
    assert_eq!((r.outcome, r.tenants), (Outcome::DryRun, TENANTS as u64));
    assert_eq!(deps.db.meter().read_write_requests().1, 0, "dry run writes nothing");
    deps.marks.set_paused(&deps.cfg.lease.job, true, Some("test")).await.unwrap();
    deps.db.meter().reset();
    let r = run(&deps, &tick(MORNING), &Unlimited, "p").await.unwrap();
    assert_eq!(r.outcome, Outcome::Paused);
    assert_eq!(deps.db.meter().read_write_requests(), (1, 0));
    assert_eq!(count_where(&deps.db, deps.queue.table(), "kind", &deps.cfg.job).await, 0);
    let err = tenant_fanout::handle(
        &deps,
        serde_json::json!({"detail-type": "Scheduled Event"}),
        local.clock.now_ms() + 60_000,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("`time` is missing"), "{err}");
}
