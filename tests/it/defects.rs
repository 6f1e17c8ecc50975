//! The defects an adversarial read of the first version found, one test each (the archiver's are
//! in `archive.rs`). Each asserts what the old code got wrong.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tickwork::budget::{Steps, Unlimited};
use tickwork::calendar::CatchUp;
use tickwork::clock::Clock;
use tickwork::config::Env;
use tickwork::queue::{queue_table, Claim, NewItem, Queue, QueueConfig};
use tickwork::tenants::{Tenant, Tenants};
use tickwork_lambda::{Outcome, Tick};
use tickwork_sim::queued_units;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::{count_where, quick_retry, unique, Local};

use tickwork_tests::ms;

fn tick(at: &str) -> Tick {
    Tick::parse(&Tick::envelope(ms(at), false)).unwrap()
}

fn tenants(n: usize, zone: &str) -> Vec<Tenant> {
    tickwork_tests::tenants(n, zone, 2)
}

/// `n` tenants of `zone` migrated at `local`'s clock, owed from the day before (a tenant added
/// without it is owed nothing before its day of adding): for tests whose first tick pulses a day.
fn migrated(local: &Local, n: usize, zone: &str) -> Vec<Tenant> {
    tickwork_tests::owed_from_yesterday(tenants(n, zone), local.clock.now_ms())
}

struct Sweep {
    local: Local,
    deps: pulse_sweep::Deps,
}

async fn sweep(env: &[(&str, &str)], shards: u32, at: &str, faults: Option<&Faults>) -> Sweep {
    let local = Local::new().await;
    local.clock.set(ms(at));
    let tables = local.sweep_tables().await;
    let cfg =
        pulse_sweep::PulseConfig::from_env(&Env::from_pairs(env.iter().copied()), Duration::from_secs(1)).unwrap();
    let db = local.db_with(faults, None, &quick_retry());
    let deps = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, shards, QueueConfig::default());
    Sweep { local, deps }
}

impl Sweep {
    async fn tick(&self, at: &str) -> pulse_sweep::Report {
        self.local.clock.set(ms(at));
        pulse_sweep::run(&self.deps, &tick(at), &Unlimited, &unique("w")).await.unwrap()
    }

    /// Queued day pulses: period → tenants (no unit in two batch items).
    async fn day_pulses(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for (key, n) in queued_units(&self.local.db, &self.deps.tables.queue).await.unwrap() {
            assert_eq!(n, 1, "{key} queued {n} times");
            if let ["pulse", _, "day", p] = key.split('#').collect::<Vec<_>>()[..] {
                *out.entry(p.to_string()).or_default() += 1;
            }
        }
        out
    }

    /// Sets `tenant`'s stored position as is (a corrupt one: a value no position parses from).
    async fn set_position(&self, tenant: &str, pos: &str) {
        tickwork_tests::set_stored_position(&self.local.db, &self.deps.tables.tenants, tenant, pos).await;
    }
}

/// Defect: a tenant whose writes always fail failed its page, the sweep did not checkpoint past
/// it, and every later page of its zone and shard was never visited again, day after day.
#[tokio::test]
async fn one_bad_tenant_is_isolated_and_the_rest_of_its_zone_is_pulsed() {
    let s = sweep(&[("TICKWORK_PULSE_PAGE_SIZE", "10")], 1, "2026-11-29T00:05:00Z", None).await;
    pulse_sweep::add_tenants(&s.deps, &migrated(&s.local, 30, "UTC")).await.unwrap();
    s.set_position("t05", "29/11/2026").await;
    let r = s.tick("2026-11-29T00:05:00Z").await;
    assert_eq!((r.outcome, r.tenants, r.failed_tenants), (Outcome::Completed, 30, 1), "{r:?}");
    assert_eq!(
        s.day_pulses().await,
        BTreeMap::from([("2026-11-28".to_string(), 29)]),
        "every other tenant, all three pages"
    );
    let failures = tickwork::failures::list(&s.local.db, &s.deps.tables.control, "pulse-sweep").await.unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!((failures[0].unit.as_str(), failures[0].run.as_str()), ("t05", "UTC@2026-11-29"));
    assert!(failures[0].error.contains("position `29/11/2026`"), "{}", failures[0].error);
    // The group's watermark moved: the next ticks are idle, one read.
    s.deps.db.meter().reset();
    assert_eq!(s.tick("2026-11-29T00:06:00Z").await.outcome, Outcome::Idle);
    assert_eq!(s.deps.db.meter().read_write_requests(), (1, 0));
    // Repaired (pulsed through the 28th: owed the 28th on), the tenant catches up at its zone's
    // next boundary: both days, once each.
    s.set_position("t05", "2026-11-28").await;
    let r = s.tick("2026-11-30T00:05:00Z").await;
    assert_eq!((r.outcome, r.failed_tenants), (Outcome::Completed, 0));
    let days = s.day_pulses().await;
    assert_eq!((days["2026-11-28"], days["2026-11-29"]), (30, 30));
}

/// Defect: in the fan-out one bad id failed its whole page, and `try_collect` dropped the other
/// shards' pages in flight.
#[tokio::test]
async fn one_bad_tenant_in_the_fanout_is_isolated_and_no_shard_is_dropped() {
    let local = Local::new().await;
    local.clock.set(ms("2026-11-29T06:00:00Z"));
    let t = local.fanout_tables().await;
    Tenants::new(local.fresh_db(), &t.tenants, 4).put_all(&tenants(51, "UTC")).await.unwrap();
    // One tenant item no reader can make sense of (a position in no format we write).
    tickwork_tests::set_stored_position(&local.db, &t.tenants, "t17", "29/11/2026").await;
    let env = Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "5")]);
    let cfg = tenant_fanout::FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let d = tenant_fanout::Deps::new(local.fresh_db(), local.clock(), cfg, &t, 4, QueueConfig::default());
    let r = tenant_fanout::run(&d, &tick("2026-11-29T06:00:00Z"), &Unlimited, "f").await.unwrap();
    assert_eq!((r.outcome, r.enqueued, r.failed_tenants), (Outcome::Completed, 50, 1), "{r:?}");
    let failures = tickwork::failures::list(&local.db, &t.control, "fanout-utc-daily").await.unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].unit, "t17");
    assert!(failures[0].error.contains("29/11/2026"), "{}", failures[0].error);
}

/// Defect: every fenced write checks the lease item, so concurrent shards conflict on AWS
/// (`TransactionConflict`), and nothing retried it; the local server, serialising requests, never
/// showed it. Injected here at the SDK boundary: conflicts and throttled items inside
/// transactions are retried and the tick completes.
#[tokio::test]
async fn transaction_conflicts_and_throttled_items_are_retried() {
    let faults = Faults::new();
    // One per boundary's first transaction: the SDK retries inside one call, so a later planned
    // fault lands on a later call.
    for (nth, fault) in [(1, Fault::Conflict), (2, Fault::TxnThrottle), (3, Fault::Conflict), (4, Fault::TxnThrottle)] {
        faults.plan(Planned { op: Some("TransactWriteItems"), nth, fault });
    }
    let s = sweep(&[], 2, "2026-11-29T00:05:00Z", Some(&faults)).await;
    let admin = pulse_sweep::Deps { tenants: s.deps.tenants.clone(), ..s.deps.clone() };
    pulse_sweep::add_tenants(&admin, &migrated(&s.local, 10, "UTC")).await.unwrap();
    for at in ["2026-11-29T00:05:00Z", "2026-11-30T00:05:00Z", "2026-12-01T00:05:00Z", "2026-12-02T00:05:00Z"] {
        let r = s.tick(at).await;
        assert_eq!((r.outcome, r.pulses.get("day").copied()), (Outcome::Completed, Some(10)), "{at}");
    }
    let days = s.day_pulses().await;
    assert_eq!(days.values().copied().collect::<Vec<_>>(), vec![10; 4], "{days:?}");
    assert_eq!(faults.injected().values().sum::<u64>(), 4, "every planned fault was injected");
}

/// Defect: a fan-out window not finished during its UTC day was never visited again (each tick
/// worked on its own date only).
#[tokio::test]
async fn an_unfinished_window_is_caught_up_the_next_day() {
    let local = Local::new().await;
    local.clock.set(ms("2026-11-29T23:50:00Z"));
    let t = local.fanout_tables().await;
    Tenants::new(local.fresh_db(), &t.tenants, 4).put_all(&tenants(40, "UTC")).await.unwrap();
    let env = Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "5")]);
    let cfg = tenant_fanout::FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap();
    let d = tenant_fanout::Deps::new(local.fresh_db(), local.clock(), cfg, &t, 4, QueueConfig::default());
    let r = tenant_fanout::run(&d, &tick("2026-11-29T23:50:00Z"), &Steps::new(2), "a").await.unwrap();
    assert_eq!((r.outcome, r.window.as_str()), (Outcome::Partial, "2026-11-29"));
    // The next tick is on the 30th: it finishes the 29th first, then does the 30th.
    local.clock.set(ms("2026-11-30T00:05:00Z"));
    let r = tenant_fanout::run(&d, &tick("2026-11-30T00:05:00Z"), &Unlimited, "b").await.unwrap();
    assert_eq!((r.outcome, r.windows_done), (Outcome::Completed, 2));
    let units = tickwork_sim::queued_units(&local.db, &t.queue).await.unwrap();
    for day in ["2026-11-29", "2026-11-30"] {
        for i in 0..40 {
            assert_eq!(units.get(&format!("utc-daily#t{i:02}#{day}")), Some(&1), "{day} t{i:02}");
        }
    }
    assert_eq!(units.len(), 80);
}

/// Defect: a crash between the fan-out's slot record and its watermark made every later tick pay
/// a lease write and a strong read, forever, without repairing the mark. The two are one fenced
/// transaction now; a slot recorded by an older release is repaired on the next tick, and the
/// ticks after it are idle again.
#[tokio::test]
async fn a_window_recorded_without_its_watermark_is_repaired() {
    let local = Local::new().await;
    local.clock.set(ms("2026-11-29T06:00:00Z"));
    let t = local.fanout_tables().await;
    let cfg = tenant_fanout::FanoutConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let d = tenant_fanout::Deps::new(local.fresh_db(), local.clock(), cfg.clone(), &t, 4, QueueConfig::default());
    // The old release's crash: the slot recorded, the watermark not.
    let lease = match d.leases.acquire(&cfg.lease, "old").await.unwrap() {
        tickwork::lease::Acquire::Acquired(l) => l,
        other => panic!("{other:?}"),
    };
    d.slots.record(&lease.fence(&t.control), "2026-11-29").await.unwrap();
    local.clock.advance(300_000);
    let r = tenant_fanout::run(&d, &tick("2026-11-29T06:05:00Z"), &Unlimited, "a").await.unwrap();
    assert_eq!((r.outcome, r.windows_done, r.enqueued), (Outcome::Completed, 1, 0), "repaired, nothing re-enqueued");
    d.db.meter().reset();
    let r = tenant_fanout::run(&d, &tick("2026-11-29T06:10:00Z"), &Unlimited, "b").await.unwrap();
    assert_eq!(r.outcome, Outcome::AlreadyDone);
    assert_eq!(d.db.meter().read_write_requests(), (1, 0), "idle again: one read");
}

#[derive(Clone)]
enum Behaviour {
    Ok,
    Panic,
    Hang,
}

struct Handler(Behaviour);

impl queue_worker::Handler for Handler {
    fn handle<'a>(&'a self, _: &'a tickwork::queue::Job) -> BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        let b = self.0.clone();
        Box::pin(async move {
            match b {
                Behaviour::Ok => Ok(()),
                Behaviour::Panic => panic!("the handler's bug"),
                Behaviour::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(())
                }
            }
        })
    }
}

fn item(id: &str, kind: &str) -> NewItem {
    NewItem { id: id.into(), kind: kind.into(), payload: "{}".into(), tenant: Some("t".into()), due_ms: 0 }
}

/// Defect: an item whose handler kills the process (a panic, a hang past the timeout, out of
/// memory) was re-claimed every visibility timeout forever — `claim` never checked `attempts` —
/// and took its batch-mates down each time. Now a panic fails its own item, a hang is cut at the
/// handler timeout, and an item whose claims are spent by dying workers is dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_item_is_dead_lettered_and_takes_no_batch_mate_down() {
    let local = Local::new().await;
    let table = local.table(&queue_table()).await;
    let cfg = QueueConfig { max_attempts: 3, backoff_base: Duration::ZERO, ..Default::default() };
    let q = Queue::new(local.fresh_db_with_gsis(&table, &queue_table()), &table, cfg.clone(), local.clock());
    let reg = queue_worker::Registry::new()
        .with("ok", Arc::new(Handler(Behaviour::Ok)))
        .with("panics", Arc::new(Handler(Behaviour::Panic)))
        .with("hangs", Arc::new(Handler(Behaviour::Hang)));
    for it in [item("ok1", "ok"), item("bad", "panics"), item("ok2", "ok"), item("slow", "hangs")] {
        q.enqueue(&it).await.unwrap();
    }
    let wcfg = queue_worker::WorkerConfig { handler_timeout: Duration::from_millis(200), ..Default::default() };
    // No backoff: one drain retries each failing item until its attempts are spent.
    let r = queue_worker::drain(&q, &reg, "w1", &Unlimited, &wcfg).await.unwrap();
    assert_eq!(
        (r.finished, r.retried, r.dead_lettered),
        (2, 4, 2),
        "the panic and the hang fail their own items only: {r:?}"
    );
    let letters = || async {
        q.dead_letters().await.unwrap().into_iter().map(|d| (d.id, d.last_error)).collect::<BTreeMap<_, _>>()
    };
    let dead = letters().await;
    assert!(dead["bad"].contains("panicked: the handler's bug"), "{dead:?}");
    assert!(dead["slow"].contains("ran longer than"), "{dead:?}");

    // An item whose workers all died mid-run: claimed three times, never settled.
    q.enqueue(&item("oom", "ok")).await.unwrap();
    for _ in 0..3 {
        assert!(matches!(q.claim("oom", &unique("dies")).await.unwrap(), Claim::Claimed(_)));
        local.clock.advance(cfg.visibility.as_millis() as i64 + 1);
    }
    let r = queue_worker::drain(&q, &reg, "w2", &Unlimited, &wcfg).await.unwrap();
    assert_eq!((r.dead_lettered, r.finished), (1, 0));
    assert!(letters().await["oom"].contains("never settled"));
}

/// Defect: one unknown zone name in the registry failed the whole tick, so no zone was pulsed.
#[tokio::test]
async fn an_unknown_zone_in_the_registry_blocks_no_other_zone() {
    let s = sweep(&[], 2, "2026-11-29T00:05:00Z", None).await;
    pulse_sweep::add_tenants(&s.deps, &migrated(&s.local, 5, "UTC")).await.unwrap();
    s.deps.marks.register_groups("pulse-sweep", &["Nowhere/Atlantis".to_string()], 2).await.unwrap();
    let r = s.tick("2026-11-29T00:05:00Z").await;
    assert_eq!((r.outcome, r.pulses["day"]), (Outcome::Completed, 5));
    assert_eq!(r.unknown_zones, vec!["Nowhere/Atlantis".to_string()]);
    use tickwork_lambda::JobReport;
    assert!(r.metrics().contains(&("FailedUnits", 1.0)), "reported every tick, as a failed unit");
}

/// Defect: a tenant re-zoned (or written without registering its zone) was never visited, or got
/// periods twice. Tenants are added through [`Tenants::add`] only, which registers the zone; a
/// move keeps each local date pulsed exactly once.
#[tokio::test]
async fn a_tenant_moved_to_another_zone_gets_each_day_exactly_once() {
    let s = sweep(&[], 1, "2026-11-28T15:05:00Z", None).await;
    let mut t =
        Tenant { id: "mover".into(), zone: "Asia/Tokyo".into(), active: true, since_ms: None, pos: Default::default() };
    pulse_sweep::add_tenants(&s.deps, std::slice::from_ref(&t)).await.unwrap();
    // Tokyo's midnight of the 29th (15:00Z on the 28th): the 28th.
    s.tick("2026-11-28T15:05:00Z").await;
    // Moved west: Los Angeles, whose 28th ends only at 08:00Z on the 29th.
    t.zone = "America/Los_Angeles".into();
    pulse_sweep::add_tenants(&s.deps, std::slice::from_ref(&t)).await.unwrap();
    for at in [
        "2026-11-28T16:00:00Z",
        "2026-11-29T08:05:00Z",
        "2026-11-29T15:05:00Z",
        "2026-11-30T08:05:00Z",
        "2026-12-01T08:05:00Z",
    ] {
        s.tick(at).await;
    }
    // And back east again.
    t.zone = "Asia/Tokyo".into();
    pulse_sweep::add_tenants(&s.deps, std::slice::from_ref(&t)).await.unwrap();
    for at in ["2026-12-01T15:05:00Z", "2026-12-02T15:05:00Z"] {
        s.tick(at).await;
    }
    let days = s.day_pulses().await;
    let want: BTreeMap<String, u64> =
        ["2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02"].iter().map(|d| (d.to_string(), 1)).collect();
    // Added on Tokyo's 29th: owed from the 29th (the 28th ended before it existed).
    assert_eq!(days, want, "each local date exactly once across both moves");
}

/// Defect (adversarial read): a warm sweep resolved its shard count once, at start-up; tenants
/// written later by a writer with more shards sat in shards it never paged, and its run still
/// completed. Writers record their count in the state item the sweep reads every tick.
#[tokio::test]
async fn a_warm_sweep_pages_the_shards_a_later_writer_used() {
    let s = sweep(&[], 2, "2026-11-29T00:05:00Z", None).await;
    let s = Sweep { deps: s.deps.clone().resolve_shards().await.expect("shard registry"), local: s.local };
    assert_eq!(s.deps.tenants.shards(), 2, "started before any writer with more shards");
    // An operator's tool configured with 8 shards adds the tenants afterwards.
    let admin = pulse_sweep::Deps {
        tenants: Tenants::new(s.local.fresh_db(), &s.deps.tables.tenants, 8).with_registry(
            tickwork::watermark::Watermarks::new(s.local.fresh_db(), &s.deps.tables.control, s.local.clock()),
            "pulse-sweep",
        ),
        ..s.deps.clone()
    };
    pulse_sweep::add_tenants(&admin, &migrated(&s.local, 40, "UTC")).await.unwrap();
    let r = s.tick("2026-11-29T00:05:00Z").await;
    assert_eq!((r.outcome, r.pulses.get("day").copied()), (Outcome::Completed, Some(40)), "{r:?}");
    assert_eq!(s.day_pulses().await, BTreeMap::from([("2026-11-28".to_string(), 40)]));
}

/// Defect: shard counts are baked into stored keys, so lowering one stranded whatever sat in the
/// shards above it. Every count ever used is recorded; readers enumerate up to the largest.
#[tokio::test]
async fn lowering_a_shard_count_strands_nothing() {
    // Tenants written with 8 shards, a sweep now configured with 2.
    let s8 = sweep(&[], 8, "2026-11-29T00:05:00Z", None).await;
    pulse_sweep::add_tenants(&s8.deps, &migrated(&s8.local, 40, "UTC")).await.unwrap();
    let cfg = s8.deps.cfg.clone();
    let lowered = pulse_sweep::Deps::new(
        s8.deps.db.clone(),
        s8.local.clock(),
        cfg,
        s8.deps.tables.clone(),
        2,
        QueueConfig::default(),
    );
    assert_eq!(lowered.tenants.shards(), 2, "as configured, before start-up resolves the registry");
    let lowered = lowered.resolve_shards().await.expect("shard registry");
    assert_eq!(lowered.tenants.shards(), 8);
    let r = pulse_sweep::run(&lowered, &tick("2026-11-29T00:05:00Z"), &Unlimited, "w").await.unwrap();
    assert_eq!(r.pulses["day"], 40, "every tenant, in all 8 shards");
    let pulses: u64 = r.pulses.values().sum();
    // Queue items written by producers with 8 shards, a worker now configured with 2.
    let table = s8.deps.tables.queue.clone();
    let producer = Queue::new(s8.local.fresh_db(), &table, QueueConfig::default(), s8.local.clock());
    assert_eq!(producer.config().shards, 8);
    let reg = tickwork::shard::ShardRegistry::new(s8.local.fresh_db(), &s8.deps.tables.control);
    let two = QueueConfig { shards: 2, ..Default::default() };
    // Single items too, spread by their ids over all 8 shards.
    let singles: Vec<tickwork::queue::NewItem> = (0..24)
        .map(|i| tickwork::queue::NewItem {
            id: format!("single#{i}"),
            kind: "pulse".into(),
            payload: "{}".into(),
            tenant: None,
            due_ms: 0,
        })
        .collect();
    producer.enqueue_many(&singles, 4).await.unwrap();
    let worker = Queue::new(s8.local.fresh_db(), &table, two.clone(), s8.local.clock())
        .with_poll_shards(reg.resolve("queue", 2).await.expect("shard registry"));
    assert_eq!(worker.poll_shards(), 8);
    let handlers = queue_worker::summary::registry(s8.local.fresh_db(), &unique("nosuch"), s8.local.clock())
        .with("pulse", Arc::new(Handler(Behaviour::Ok)));
    let r =
        queue_worker::drain(&worker, &handlers, "w", &Unlimited, &queue_worker::WorkerConfig::default()).await.unwrap();
    // The batches' units (one per pulse) and every single item (a unit each), polled from all 8
    // shards.
    assert_eq!((r.units, r.finished, r.units_failed), (pulses + 24, r.claimed, 0), "{r:?}");
    assert_eq!(r.claimed, r.candidates);
    let q = Queue::new(s8.local.fresh_db(), &table, QueueConfig::default(), s8.local.clock());
    for i in 0..24 {
        let it = q.get(&format!("single#{i}")).await.unwrap().expect("item kept until its retention ends");
        assert_eq!(tickwork::schema::get_s(&it, tickwork::queue::STATE), Some("done"), "single#{i}");
    }
}

/// Defect: `skip` measured lateness from each tick, so the tenants a budget-limited run reached on
/// its later ticks had their (on-time) periods skipped.
#[tokio::test]
async fn skip_pulses_every_tenant_of_a_run_that_spans_ticks() {
    let s = sweep(
        &[("TICKWORK_PULSE_PAGE_SIZE", "5"), ("TICKWORK_PULSE_CATCH_UP", "skip")],
        1,
        "2026-11-28T12:00:00Z",
        None,
    )
    .await;
    assert_eq!(s.deps.cfg.policy.catch_up, CatchUp::Skip);
    pulse_sweep::add_tenants(&s.deps, &tenants(30, "UTC")).await.unwrap();
    // Cursors up to date on the 27th, as after a normal day.
    let r = s.tick("2026-11-28T12:00:00Z").await;
    assert_eq!(r.outcome, Outcome::Completed);
    let mut minute = 0;
    let mut skipped = 0;
    loop {
        let at = format!("2026-11-29T00:{minute:02}:10Z");
        s.local.clock.set(ms(&at));
        let r = pulse_sweep::run(&s.deps, &tick(&at), &Steps::new(2), &unique("w")).await.unwrap();
        skipped += r.skipped.values().sum::<u64>();
        if r.outcome == Outcome::Completed {
            break;
        }
        minute += 1;
        assert!(minute < 30);
    }
    assert!(minute >= 2, "the run spanned {} ticks", minute + 1);
    assert_eq!(skipped, 0, "every tenant of the run was on time for it");
    assert_eq!(s.day_pulses().await["2026-11-28"], 30);
}

/// Defect: the fan-out's item and the day pulse shared one summary key, so for a tenant west of
/// UTC the "daily summary" was written before its local day had ended, and the day pulse's run
/// was a no-op. Daily summaries have one producer now, the day pulse; the fan-out's UTC-day job
/// writes its own rows.
#[tokio::test]
async fn a_daily_summary_waits_for_the_tenants_own_day_to_end() {
    let s = sweep(&[], 1, "2026-11-29T06:00:00Z", None).await;
    let la = Tenant {
        id: "west".into(),
        zone: "America/Los_Angeles".into(),
        active: true,
        since_ms: None,
        pos: Default::default(),
    };
    pulse_sweep::add_tenants(&s.deps, std::slice::from_ref(&la)).await.unwrap();
    let summaries = s.local.table(&queue_worker::summary::summaries_table()).await;
    let q = Queue::new(s.local.fresh_db(), &s.deps.tables.queue, QueueConfig::default(), s.local.clock());
    let handlers = queue_worker::summary::registry(s.local.fresh_db(), &summaries, s.local.clock());
    let wcfg = queue_worker::WorkerConfig::default();
    let drain = || queue_worker::drain(&q, &handlers, "w", &Unlimited, &wcfg);
    // 06:00Z on the 29th: the UTC day turned, Los Angeles is still on the 28th (22:00).
    let cfg = tenant_fanout::FanoutConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let t = tenant_fanout::Tables {
        control: s.deps.tables.control.clone(),
        tenants: s.deps.tables.tenants.clone(),
        queue: s.deps.tables.queue.clone(),
    };
    let f = tenant_fanout::Deps::new(s.local.fresh_db(), s.local.clock(), cfg, &t, 1, QueueConfig::default());
    tenant_fanout::run(&f, &tick("2026-11-29T06:00:00Z"), &Unlimited, "f").await.unwrap();
    s.tick("2026-11-29T06:00:00Z").await; // the 28th is not over in Los Angeles: no day pulse for it
    drain().await.unwrap();
    let rows = |sk: &'static str| count_where(&s.local.db, &summaries, "sk", sk);
    assert_eq!(rows("utc#2026-11-29").await, 1, "the UTC-day job's own row");
    assert_eq!(rows("day#2026-11-28").await, 0, "Los Angeles' 28th is not over");
    assert_eq!(rows("day#2026-11-29").await, 0, "nor, by far, its 29th (the old code wrote this one now)");
    // Los Angeles' 28th ends at 08:00Z on the 29th, its 29th at 08:00Z on the 30th: each
    // summary then, once.
    for (at, day) in [("2026-11-29T08:05:00Z", "day#2026-11-28"), ("2026-11-30T08:05:00Z", "day#2026-11-29")] {
        s.tick(at).await;
        drain().await.unwrap();
        assert_eq!(rows(day).await, 1, "{day}");
    }
}

/// Defect: a conditional write retried by the SDK after its answer was lost read as lost: the
/// lease acquire saw the lease "held" (by itself) and the tick did nothing; a claim saw the item
/// "taken" (by itself) and left it claimed until its visibility timeout.
#[tokio::test]
async fn a_retried_write_recognises_its_own_win() {
    let faults = Faults::new();
    faults.plan(Planned { op: Some("UpdateItem"), nth: 1, fault: Fault::LoseAnswer });
    let s = sweep(&[], 1, "2026-11-29T00:05:00Z", Some(&faults)).await;
    let admin = pulse_sweep::Deps::new(
        s.local.fresh_db(),
        s.local.clock(),
        s.deps.cfg.clone(),
        s.deps.tables.clone(),
        1,
        QueueConfig::default(),
    );
    pulse_sweep::add_tenants(&admin, &migrated(&s.local, 3, "UTC")).await.unwrap();
    // The sweep's first UpdateItem is its lease acquire: applied, answer lost, sent again.
    let r = s.tick("2026-11-29T00:05:00Z").await;
    assert_eq!(faults.injected()[&Fault::LoseAnswer], 1);
    assert_eq!((r.outcome, r.pulses["day"]), (Outcome::Completed, 3), "our own lease, not someone else's");

    let faults = Faults::new();
    faults.plan(Planned { op: Some("UpdateItem"), nth: 1, fault: Fault::LoseAnswer });
    let table = s.deps.tables.queue.clone();
    let q = Queue::new(
        s.local.db_with(Some(&faults), None, &quick_retry()),
        &table,
        QueueConfig::default(),
        s.local.clock(),
    );
    q.enqueue(&item("mine", "ok")).await.unwrap();
    assert!(matches!(q.claim("mine", "me").await.unwrap(), Claim::Claimed(_)), "our own claim, not taken");
    assert_eq!(faults.injected()[&Fault::LoseAnswer], 1);
}
