//! Schedules through the sweep against the local server: each occurrence handed to the queue
//! once, at the first tick at or after its instant; an idle tick one read whatever the schedules;
//! a spec change, a pause and resume, a zone move and a suspension in the middle of a day; a
//! one-off that leaves nothing behind; a crash between the enqueue and the record's replacement.

use std::collections::{BTreeMap, BTreeSet};

use tickwork::budget::Unlimited;
use tickwork::calendar::{CatchUp, Policy};
use tickwork::queue::QueueConfig;
use tickwork::schedules::{Changed, Dst, ScheduleDef, Schedules};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::streams::settle;
use tickwork_tests::{ms, unique, Local};

use crate::binary::{ok, tickctl};

/// The catch-up rules adds are checked against (a one-off the sweep would pass over is refused).
pub(crate) const POLICY: Policy =
    Policy { catch_up: CatchUp::All, max_lateness_ms: 2 * 86_400_000, interval_ms: 900_000 };

pub(crate) fn sweep(local: &Local, prefix: &str, faults: Option<&Faults>) -> (pulse_sweep::Deps, String) {
    (local.stack_sweep(prefix, &[], faults), format!("{prefix}-queue"))
}

/// A tick at `at`, the writers' records handed to the sweep first (the stream's mapping runs
/// within a second or so of a write).
pub(crate) async fn tick(local: &Local, deps: &pulse_sweep::Deps, at: &str) -> pulse_sweep::Report {
    local.clock.set(ms(at));
    settle(local, deps).await;
    // Boxed: the tick's future held in each test's outgrew a test thread's stack.
    let t = Tick::parse(&Tick::envelope(ms(at), false)).unwrap();
    Box::pin(pulse_sweep::run(deps, &t, &Unlimited, "w")).await.unwrap()
}

/// A tick at `at` by a sweep process of stack `prefix` with `faults`, run on its own task, once
/// one of its calls is stalled there ([`Fault::Stall`]): the harness acts meanwhile, releases it,
/// and awaits the tick.
pub(crate) async fn stalled_tick(
    local: &Local,
    prefix: &str,
    faults: &Faults,
    at: &str,
) -> tokio::task::JoinHandle<Result<pulse_sweep::Report, pulse_sweep::PulseError>> {
    let (racing, _) = sweep(local, prefix, Some(faults));
    local.clock.set(ms(at));
    let t = Tick::parse(&Tick::envelope(ms(at), false)).unwrap();
    let run = tokio::spawn(async move { pulse_sweep::run(&racing, &t, &Unlimited, "racing").await });
    while !faults.is_stalled() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    run
}

pub(crate) fn def(name: &str, spec: &str) -> ScheduleDef {
    ScheduleDef::new(name, spec.parse().unwrap(), 0, Dst::default()).unwrap()
}

/// Every fire queued, `(tenant, name, occurrence)`, each checked to be queued once.
pub(crate) async fn fires(local: &Local, queue: &str) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for (key, n) in queued_units(&local.db, queue).await.unwrap() {
        if let ["sched", t, name, occ] = key.split('#').collect::<Vec<_>>()[..] {
            assert_eq!(n, 1, "{key} queued {n} times");
            out.insert((t.to_string(), name.to_string(), occ.to_string()));
        }
    }
    out
}

/// Drains `queue` with the worker's shipped handlers (none failing) and returns the sort keys of
/// the rows the `sched` handler wrote.
async fn handled(local: &Local, queue: &str) -> BTreeSet<String> {
    let qdb = local.fresh_db();
    qdb.register_gsis(queue, tickwork::queue::queue_table().gsi_shapes());
    let q = tickwork::queue::Queue::new(qdb.clone(), queue, QueueConfig::default(), local.clock());
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let handlers = queue_worker::summary::registry(qdb, &summaries, local.clock());
    let r = queue_worker::drain(&q, &handlers, "w", &Unlimited, &queue_worker::WorkerConfig::default()).await.unwrap();
    assert_eq!((r.units_failed, r.dead_lettered), (0, 0), "{r:?}");
    tickwork_sim::scan_all(&local.db, &summaries)
        .await
        .unwrap()
        .iter()
        .filter_map(|i| tickwork::schema::get_s(i, "sk").filter(|k| k.starts_with("sched#")).map(str::to_string))
        .collect()
}

pub(crate) fn fire(t: &str, name: &str, occ: &str) -> (String, String, String) {
    (t.to_string(), name.to_string(), occ.to_string())
}

fn schedules(deps: &pulse_sweep::Deps) -> &Schedules {
    &deps.schedules
}

#[tokio::test]
async fn each_occurrence_fires_once_at_the_first_tick_after_it_and_an_idle_tick_reads_once() {
    let (local, _, deps, queue) =
        provisioned("sched", "2026-12-01T14:00:00Z", &[Tenant::new("acme", "Europe/Berlin")]).await;
    let s = schedules(&deps);
    assert_eq!(s.put("acme", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap(), Changed::Added);
    assert_eq!(
        s.put("acme", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap(),
        Changed::Unchanged,
        "the same definition again writes nothing"
    );
    s.put("acme", "Europe/Berlin", def("standup", "cron 30 9 * * 1-5"), &POLICY).await.unwrap();
    s.put("acme", "Europe/Berlin", def("call", "at 2026-12-02T12:00"), &POLICY).await.unwrap();
    // The ticks that run the new zone and visit the new tenant, then an idle one: one read,
    // whatever the schedules.
    tick(&local, &deps, "2026-12-01T14:15:00Z").await;
    tick(&local, &deps, "2026-12-01T14:30:00Z").await;
    let before = deps.db.meter().read_write_requests();
    tick(&local, &deps, "2026-12-01T14:45:00Z").await;
    let after = deps.db.meter().read_write_requests();
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0), "an idle tick is one read");
    assert_eq!(fires(&local, &queue).await, BTreeSet::new(), "nothing owed before it was added");
    // 08:00 Berlin is 07:00Z: not at 06:45, at 07:00.
    tick(&local, &deps, "2026-12-02T06:45:00Z").await;
    assert_eq!(fires(&local, &queue).await, BTreeSet::new(), "none before its instant");
    let r = tick(&local, &deps, "2026-12-02T07:00:00Z").await;
    assert_eq!(r.fires, 1);
    let acme: BTreeSet<_> = fires(&local, &queue).await.into_iter().filter(|f| f.0 == "acme").collect();
    assert_eq!(acme, BTreeSet::from([fire("acme", "nudge", "2026-12-02T08:00:00+01:00")]));
    // A duplicate event at the same instant, and a late one: nothing more.
    tick(&local, &deps, "2026-12-02T07:00:00Z").await;
    tick(&local, &deps, "2026-12-02T07:15:00Z").await;
    assert_eq!(fires(&local, &queue).await.len(), 1);
    // 09:30 Wednesday, and the one-off at 12:00.
    tick(&local, &deps, "2026-12-02T08:30:00Z").await;
    tick(&local, &deps, "2026-12-02T11:00:00Z").await;
    let want = BTreeSet::from([
        fire("acme", "nudge", "2026-12-02T08:00:00+01:00"),
        fire("acme", "standup", "2026-12-02T09:30:00+01:00"),
        fire("acme", "call", "2026-12-02T12:00:00+01:00"),
    ]);
    assert_eq!(fires(&local, &queue).await, want);
    // The one-off left nothing behind; the others wait for tomorrow, and the state item says when.
    assert_eq!(s.get("acme", "call").await.unwrap(), None);
    let names: Vec<String> = s.list("acme").await.unwrap().into_iter().map(|s| s.def.name).collect();
    assert_eq!(names, ["nudge", "standup"]);
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    assert_eq!(state.sched_next, Some(ms("2026-12-03T07:00:00Z")));
    // Saturday: the standup (weekdays) does not fire, the nudge does.
    tick(&local, &deps, "2026-12-05T09:00:00Z").await;
    let got = fires(&local, &queue).await;
    assert!(got.contains(&fire("acme", "nudge", "2026-12-05T08:00:00+01:00")), "{got:?}");
    assert!(!got.iter().any(|(_, n, o)| n == "standup" && o.starts_with("2026-12-05")));
    // Three days of nudges caught up (the 3rd, 4th and 5th), each once.
    assert_eq!(got.iter().filter(|(_, n, _)| n == "nudge").count(), 4);
    // The worker's shipped `sched` handler: one row a fire, its effect written once.
    let rows = Box::pin(handled(&local, &queue)).await;
    let want: BTreeSet<String> = got.iter().map(|(_, n, o)| format!("sched#{n}#{o}")).collect();
    assert_eq!(rows, want);
}

#[tokio::test]
async fn a_change_a_pause_a_move_and_a_suspension_in_the_middle_of_a_day_fire_nothing_twice_and_lose_nothing() {
    let local = Local::new().await;
    let p = unique("schedmid");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-01T10:00:00Z"));
    let ids = ["changed", "paused", "moved", "suspended"];
    let tenants: Vec<Tenant> = ids.iter().map(|id| Tenant::new(*id, "Europe/Berlin")).collect();
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let s = schedules(&deps);
    for id in ids {
        s.put(id, "Europe/Berlin", def("evening", "daily 18:00"), &POLICY).await.unwrap();
    }
    // Every quarter-hour from the adding to the end of Thursday the 3rd; at noon Berlin on the
    // 2nd (11:00Z) the changes, at noon on the 3rd the resumes.
    let mut t = ms("2026-12-01T10:15:00Z");
    while t < ms("2026-12-04T00:00:00Z") {
        let at = jiff::Timestamp::from_millisecond(t).unwrap().to_string();
        if at == "2026-12-02T11:00:00Z" {
            local.clock.set(t);
            assert_eq!(
                s.put("changed", "Europe/Berlin", def("evening", "daily 20:00"), &POLICY).await.unwrap(),
                Changed::Changed
            );
            s.set_paused("paused", "evening", true, "Europe/Berlin").await.unwrap();
            assert!(deps.tenants.move_zone("moved", "America/New_York").await.unwrap());
            assert_eq!(s.retarget("moved", "America/New_York").await.unwrap(), 1);
            assert!(deps.tenants.suspend("suspended").await.unwrap());
        }
        if at == "2026-12-03T11:00:00Z" {
            local.clock.set(t);
            s.set_paused("paused", "evening", false, "Europe/Berlin").await.unwrap();
            assert!(deps.tenants.resume("suspended").await.unwrap());
            s.retarget("suspended", "Europe/Berlin").await.unwrap();
        }
        tick(&local, &deps, &at).await;
        t += 900_000;
    }
    let got = fires(&local, &queue).await;
    let by: BTreeMap<&str, Vec<&str>> = ids
        .iter()
        .map(|id| (*id, got.iter().filter(|(t, _, _)| t == id).map(|(_, _, o)| o.as_str()).collect()))
        .collect();
    let first = "2026-12-01T18:00:00+01:00";
    assert_eq!(
        by["changed"],
        [first, "2026-12-02T20:00:00+01:00", "2026-12-03T20:00:00+01:00"],
        "20:00 from the change"
    );
    assert_eq!(by["paused"], [first, "2026-12-03T18:00:00+01:00"], "nothing while paused, nothing missed fired late");
    assert_eq!(
        by["moved"],
        [first, "2026-12-02T18:00:00-05:00", "2026-12-03T18:00:00-05:00"],
        "its local time kept in its new zone from the next occurrence"
    );
    assert_eq!(by["suspended"], [first, "2026-12-03T18:00:00+01:00"], "nothing while suspended");
}

#[tokio::test]
async fn a_process_that_dies_before_or_after_its_fire_transaction_fires_each_occurrence_once() {
    let local = Local::new().await;
    for fault in [Fault::CrashBefore, Fault::CrashAfter] {
        let p = unique("schedcrash");
        ok(&tickctl(&local, &p, &["provision"]));
        let (deps, queue) = sweep(&local, &p, None);
        local.clock.set(ms("2026-12-01T10:00:00Z"));
        pulse_sweep::add_tenants(&deps, &[Tenant::new("a", "Asia/Kolkata"), Tenant::new("b", "Asia/Kolkata")])
            .await
            .unwrap();
        for id in ["a", "b"] {
            schedules(&deps).put(id, "Asia/Kolkata", def("nudge", "daily 08:00"), &POLICY).await.unwrap();
        }
        tick(&local, &deps, "2026-12-01T10:15:00Z").await;
        tick(&local, &deps, "2026-12-01T10:30:00Z").await;
        // Kolkata's midnight (18:30Z): the calendar's run for the 2nd, done before the fires.
        tick(&local, &deps, "2026-12-01T18:30:00Z").await;
        // 08:00 in Kolkata is 02:30Z: the tick's first transaction is the fires'.
        let faults = Faults::new();
        faults.plan(Planned { op: Some("TransactWriteItems"), nth: 1, fault });
        let (crashing, _) = sweep(&local, &p, Some(&faults));
        local.clock.set(ms("2026-12-02T02:30:00Z"));
        let tk = Tick::parse(&Tick::envelope(ms("2026-12-02T02:30:00Z"), false)).unwrap();
        assert!(
            pulse_sweep::run(&crashing, &tk, &Unlimited, "w").await.is_err(),
            "{fault:?}: the crash stops the tick"
        );
        assert!(faults.crashed());
        // After: the first transaction's fires landed (`a` and `b` fall in different due shards,
        // so it holds one of them); before: nothing did.
        let landed = fires(&local, &queue).await.len();
        assert_eq!(landed > 0, fault == Fault::CrashAfter, "{fault:?}: {landed} landed");
        // The next process, a day later (the record left behind is owed two occurrences then, so
        // fires that landed without their record's replacement would be queued again in a batch
        // of another composition).
        tick(&local, &deps, "2026-12-03T02:30:00Z").await;
        let got = fires(&local, &queue).await;
        assert_eq!(
            got,
            BTreeSet::from([
                fire("a", "nudge", "2026-12-02T08:00:00+05:30"),
                fire("a", "nudge", "2026-12-03T08:00:00+05:30"),
                fire("b", "nudge", "2026-12-02T08:00:00+05:30"),
                fire("b", "nudge", "2026-12-03T08:00:00+05:30"),
            ]),
            "{fault:?}"
        );
    }
}

/// A one-off group larger than its first page (45 tenants' one-off at one instant; 40 members the
/// first page) is fixed in a transaction of its own, then fired, its progress in its record: the
/// process dying after the fire's transaction, or before it; the next tick fires the rest, each
/// once, and the one-off leaves nothing behind (definitions, members, record; its head kept
/// firing, to expire) once cleaned. (A group of more pages, under random faults:
/// `campaign::a_campaign_under_random_faults_and_joins_fires_each_member_once_and_leaves_nothing`.)
#[tokio::test]
async fn a_group_larger_than_a_page_goes_out_a_page_at_a_time_and_a_crash_between_pages_repeats_nothing() {
    let local = Local::new().await;
    for (fault, nth, landed) in [(Fault::CrashAfter, 2, 45), (Fault::CrashBefore, 2, 0)] {
        let p = unique("schedpages");
        ok(&tickctl(&local, &p, &["provision"]));
        let (deps, queue) = sweep(&local, &p, None);
        local.clock.set(ms("2026-12-24T06:00:00Z"));
        let ids: Vec<String> = (0..45).map(|i| format!("t{i:02}")).collect();
        let tenants: Vec<Tenant> = ids.iter().map(|id| Tenant::new(id.as_str(), "Europe/Berlin")).collect();
        pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
        let rows = ids
            .iter()
            .map(|id| (id.clone(), "Europe/Berlin".to_string(), def("call", "at 2026-12-24T09:00")))
            .collect();
        schedules(&deps).put_many(rows, &POLICY).await.unwrap();
        // The new tenants' first sight first: the 08:00Z tick's transactions are the fires'.
        tick(&local, &deps, "2026-12-24T06:15:00Z").await;
        tick(&local, &deps, "2026-12-24T06:30:00Z").await;
        let faults = Faults::new();
        faults.plan(Planned { op: Some("TransactWriteItems"), nth, fault });
        let (crashing, _) = sweep(&local, &p, Some(&faults));
        local.clock.set(ms("2026-12-24T08:00:00Z"));
        let tk = Tick::parse(&Tick::envelope(ms("2026-12-24T08:00:00Z"), false)).unwrap();
        assert!(
            pulse_sweep::run(&crashing, &tk, &Unlimited, "w").await.is_err(),
            "{fault:?}: the crash stops the tick"
        );
        assert!(faults.crashed());
        assert_eq!(fires(&local, &queue).await.len(), landed, "{fault:?}: the fix's transaction, then the fire's");
        let r = tick(&local, &deps, "2026-12-24T08:15:00Z").await;
        assert_eq!(r.fires, 45 - landed as u64, "{fault:?}: the rest");
        let got = fires(&local, &queue).await;
        let want: BTreeSet<_> = ids.iter().map(|id| fire(id, "call", "2026-12-24T09:00:00+01:00")).collect();
        assert_eq!(got, want, "{fault:?}: each once (`fires` checks every key was queued once)");
        // Nothing left behind: no definition, member, head or due record. The fire's definitions
        // and members are cleaned after it; its cleaning record's next visit finds none left and
        // closes the group (its record deleted, its head kept firing to expire).
        assert_eq!(r.schedules_cleaned, 45, "{fault:?}");
        tick(&local, &deps, "2026-12-24T08:30:00Z").await;
        for id in &ids {
            assert!(schedules(&deps).list(id).await.unwrap().is_empty(), "{fault:?}: {id}'s definition");
        }
        let control = tickwork_sim::scan_all(&local.db, &format!("{p}-control")).await.unwrap();
        // (The shards' cursors, `~`, stay.)
        let left: Vec<&str> = control
            .iter()
            .filter(|i| tickwork::schema::get_s(i, "sk") != Some("~"))
            // (A fired group's head stays, firing, set to expire when no one can join it.)
            .filter(|i| !(i.contains_key("firing") && i.contains_key(tickwork::schema::TTL)))
            .filter_map(|i| tickwork::schema::get_s(i, "pk"))
            .filter(|pk| ["smem#", "shead#", "sdue#", "sched#"].iter().any(|x| pk.starts_with(x)))
            .collect();
        assert!(left.is_empty(), "{fault:?}: {left:?}");
        let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
        assert_eq!(state.sched_next, None, "{fault:?}");
    }
}

/// A provisioned stack (tables prefixed `prefix`), its sweep and queue, and tenants `a` and `b`
/// in Berlin added on 2026-12-01 at 10:00Z.
async fn two_tenants(prefix: &str) -> (Local, String, pulse_sweep::Deps, String) {
    provisioned(prefix, "2026-12-01T10:00:00Z", &[Tenant::new("a", "Europe/Berlin"), Tenant::new("b", "Europe/Berlin")])
        .await
}

/// A provisioned stack under a new `prefix`, its clock at `at`, `tenants` added: the local
/// server, the prefix, the sweep and its queue.
async fn provisioned(prefix: &str, at: &str, tenants: &[Tenant]) -> (Local, String, pulse_sweep::Deps, String) {
    let local = Local::new().await;
    let p = unique(prefix);
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p, None);
    local.clock.set(ms(at));
    pulse_sweep::add_tenants(&deps, tenants).await.unwrap();
    (local, p, deps, queue)
}

/// A record due before its shard's cursor (a one-off added just after its instant, once the sweep
/// has fired a later record of the same shard) is written after the cursor, and fires at the next
/// tick; the cursor never passes a record it has not read.
#[tokio::test]
async fn a_record_due_before_its_shards_cursor_is_written_after_it_and_fires() {
    let (local, _, deps, queue) = two_tenants("schedcursor").await;
    let shard = |t: &str, d: ScheduleDef| {
        tickwork::schedules::due_shard(&tickwork::schedules::Group::of(t, &d, "Europe/Berlin").id())
    };
    let call = || def("call", "at 2026-12-02T07:30");
    let name =
        (0..).map(|i| format!("n{i}")).find(|n| shard("a", def(n, "daily 08:00")) == shard("b", call())).unwrap();
    let s = schedules(&deps);
    s.put("a", "Europe/Berlin", def(&name, "daily 08:00"), &POLICY).await.unwrap();
    tick(&local, &deps, "2026-12-01T10:15:00Z").await;
    tick(&local, &deps, "2026-12-01T10:30:00Z").await;
    // 08:00 Berlin: `a` fires, and the shard's cursor moves past its record (07:00Z).
    assert_eq!(tick(&local, &deps, "2026-12-02T07:00:00Z").await.fires, 1);
    // `b`'s one-off at 07:30 Berlin (06:30Z), added 35 minutes after it: owed, due before the
    // cursor.
    local.clock.set(ms("2026-12-02T07:05:00Z"));
    s.put("b", "Europe/Berlin", call(), &POLICY).await.unwrap();
    assert_eq!(tick(&local, &deps, "2026-12-02T07:15:00Z").await.fires, 1);
    let got = fires(&local, &queue).await;
    assert!(got.contains(&fire("b", "call", "2026-12-02T07:30:00+01:00")), "{got:?}");
    assert_eq!(got.len(), 2);
}

#[tokio::test]
async fn bad_input_is_refused_by_name_and_writes_nothing() {
    let local = Local::new().await;
    let p = unique("schedbad");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, _) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-01T10:00:00Z"));
    let s = schedules(&deps);
    let long_ago = def("old", "at 2026-11-20T09:00");
    let e = s.put("acme", "Europe/Berlin", long_ago, &POLICY).await.unwrap_err().to_string();
    assert!(e.contains("too far in the past"), "{e}");
    let in_the_gap = ScheduleDef::new(
        "x",
        "at 2027-03-28T02:30".parse().unwrap(),
        0,
        Dst { gap: tickwork::schedules::Gap::Skip, ..Dst::default() },
    )
    .unwrap();
    let e = s.put("acme", "Europe/Berlin", in_the_gap, &POLICY).await.unwrap_err().to_string();
    assert!(e.contains("does not exist in Europe/Berlin"), "{e}");
    let e = s.put("acme", "Mars/Olympus", def("n", "daily 08:00"), &POLICY).await.unwrap_err().to_string();
    assert!(e.contains("Mars/Olympus"), "{e}");
    let long = def("a-name-of-twenty-six-bytes", "daily 08:00");
    // A member's sort key is the tenant id (1,024 bytes at most); its definition's partition key
    // holds it too (2,048).
    let e = s.put(&"x".repeat(1_100), "UTC", long, &POLICY).await.unwrap_err().to_string();
    assert!(e.contains("longer than DynamoDB allows"), "{e}");
    let e = s.set_paused("acme", "nope", true, "UTC").await.unwrap_err().to_string();
    assert!(e.contains("no schedule `nope`"), "{e}");
    assert!(s.list("acme").await.unwrap().is_empty());
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    assert_eq!((state.sched_next, state.sched_adds), (None, 0), "nothing written");
}

/// Group ids whose head has no due record in the control table: a group that never fires again.
async fn heads_without_records(local: &Local, prefix: &str) -> Vec<String> {
    let items = tickwork_sim::scan_all(&local.db, &format!("{prefix}-control")).await.unwrap();
    let s = |i: &tickwork::item::Item, a: &str| tickwork::schema::get_s(i, a).unwrap_or_default().to_string();
    let recorded: BTreeSet<String> = items
        .iter()
        .filter(|i| s(i, "pk").starts_with("sdue#") && s(i, "sk") != "~")
        .filter_map(|i| s(i, "sk").split_once('#').map(|(_, g)| g.to_string()))
        .collect();
    items
        .iter()
        .filter_map(|i| s(i, "pk").strip_prefix("shead#").map(|r| r.rsplit('#').next().unwrap_or_default().to_string()))
        .filter(|g| !recorded.contains(g))
        .collect()
}

/// Deletes every item of `table` whose `ttl` has passed at `now_ms`, as DynamoDB's TTL would (any
/// time after it; here all at once, at the latest moment the test looks). Chaos applies it too.
pub(crate) async fn expire(local: &Local, table: &str, now_ms: i64) -> usize {
    let mut n = 0;
    for item in tickwork_sim::scan_all(&local.db, table).await.unwrap() {
        let Some(ttl) = tickwork::schema::get_i64(&item, tickwork::schema::TTL) else { continue };
        if ttl * 1000 <= now_ms {
            let k: tickwork::item::Item =
                ["pk", "sk"].iter().filter_map(|a| Some((a.to_string(), item.get(*a)?.clone()))).collect();
            local.db.client().delete_item().table_name(table).set_key(Some(k)).send().await.unwrap();
            n += 1;
        }
    }
    n
}

/// A sweep stopped for 90 days of event time, with every expired item deleted as DynamoDB's TTL
/// would: no group loses its record, and on resume every group fires again — a tenant that joined
/// a group during the stop too (its join wrote no record: the group had a head). Before records
/// carried no TTL, every group's record was gone and nothing fired again.
#[tokio::test]
async fn a_sweep_stopped_for_90_days_with_ttl_deletions_fires_every_group_again() {
    let local = Local::new().await;
    let p = unique("schedstop");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-01T10:00:00Z"));
    let ids = ["a", "b", "c"];
    let mut tenants: Vec<Tenant> = ids.iter().map(|id| Tenant::new(*id, "Europe/Berlin")).collect();
    tenants.push(Tenant::new("joiner", "Europe/Berlin"));
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let s = schedules(&deps);
    for (id, spec) in [("a", "daily 08:00"), ("b", "daily 08:00"), ("c", "weekly mon-fri 09:30")] {
        s.put(id, "Europe/Berlin", def("nudge", spec), &POLICY).await.unwrap();
    }
    tick(&local, &deps, "2026-12-02T07:15:00Z").await;
    // Stopped. Halfway through, a tenant joins the `daily 08:00` group.
    local.clock.set(ms("2027-01-15T12:00:00Z"));
    s.put("joiner", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap();
    let back = ms("2027-03-02T07:00:00Z");
    expire(&local, &format!("{p}-control"), back).await;
    assert_eq!(heads_without_records(&local, &p).await, Vec::<String>::new(), "every group kept its record");
    for at in ["2027-03-02T07:00:00Z", "2027-03-03T07:15:00Z", "2027-03-03T08:45:00Z"] {
        tick(&local, &deps, at).await;
    }
    let got = fires(&local, &queue).await;
    for id in ["a", "b", "joiner"] {
        assert!(got.contains(&(id.into(), "nudge".into(), "2027-03-03T08:00:00+01:00".into())), "{id}: {got:?}");
    }
    assert!(got.contains(&("c".into(), "nudge".into(), "2027-03-03T09:30:00+01:00".into())), "{got:?}");
    assert!(
        got.iter().any(|(t, _, o)| t == "a" && o.starts_with("2027-03-0") && o < &"2027-03-03".to_string()),
        "caught up at the resume within the lateness bound: {got:?}"
    );
    // A fired record is deleted once the cursor is past it: a group keeps one record, no more.
    let control = tickwork_sim::scan_all(&local.db, &format!("{p}-control")).await.unwrap();
    let records = control
        .iter()
        .filter(|i| {
            let s = |a: &str| tickwork::schema::get_s(i, a).unwrap_or_default().to_string();
            s("pk").starts_with("sdue#") && s("sk") != "~"
        })
        .count();
    assert_eq!(records, 2, "one pending record for each of the two groups");
}

/// One-offs as `docs/schedules.md` says: paused across its instant, it is not fired late (its
/// resume is refused, nothing written); retargeted to a zone where a skipped gap removes it, it is
/// removed, not left active with a head and no record; a tenant moved but not retargeted yet keeps
/// a local one-off for the retarget (fired at its local time in the new zone) and has its `at
/// <instant>` fired, whatever the zone. Before the fixes: the resumed one fired at once, the moved
/// ones were deleted unfired, the retargeted one left a head with no record.
#[tokio::test]
async fn one_offs_paused_moved_or_retargeted_fire_as_the_docs_say_and_leave_no_head_without_a_record() {
    let local = Local::new().await;
    let p = unique("schedone");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-24T07:00:00Z"));
    let tenants = [
        Tenant::new("paused", "Europe/Berlin"),
        Tenant::new("instant", "Europe/Berlin"),
        Tenant::new("local", "Europe/Berlin"),
        Tenant::new("gap", "America/New_York"),
    ];
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let s = schedules(&deps);
    s.put("paused", "Europe/Berlin", def("call", "at 2026-12-24T09:00"), &POLICY).await.unwrap();
    s.put("instant", "Europe/Berlin", def("ping", "at 2026-12-24T08:00:00Z"), &POLICY).await.unwrap();
    s.put("local", "Europe/Berlin", def("call", "at 2026-12-24T09:00"), &POLICY).await.unwrap();
    let skip = Dst { gap: tickwork::schedules::Gap::Skip, ..Dst::default() };
    let in_berlins_gap = ScheduleDef::new("x", "at 2027-03-28T02:30".parse().unwrap(), 0, skip).unwrap();
    s.put("gap", "America/New_York", in_berlins_gap, &POLICY).await.unwrap();
    local.clock.set(ms("2026-12-24T07:30:00Z"));
    s.set_paused("paused", "call", true, "Europe/Berlin").await.unwrap();
    for (id, zone) in [("instant", "America/New_York"), ("local", "America/New_York"), ("gap", "Europe/Berlin")] {
        assert!(deps.tenants.move_zone(id, zone).await.unwrap());
    }
    assert_eq!(s.retarget("gap", "Europe/Berlin").await.unwrap(), 1, "removed");
    assert!(s.get("gap", "x").await.unwrap().is_none(), "a one-off a gap removes in its new zone is removed");
    tick(&local, &deps, "2026-12-24T08:15:00Z").await;
    local.clock.set(ms("2026-12-24T08:30:00Z"));
    let e = s.set_paused("paused", "call", false, "Europe/Berlin").await.unwrap_err().to_string();
    assert!(e.contains("can never fire"), "{e}");
    assert!(s.get("paused", "call").await.unwrap().unwrap().paused, "nothing written");
    // Berlin's 09:00 passes with `local` in New York: its definition waits for the retarget.
    tick(&local, &deps, "2026-12-24T08:45:00Z").await;
    assert!(s.get("local", "call").await.unwrap().is_some(), "kept for its retarget");
    assert_eq!(s.retarget("local", "America/New_York").await.unwrap(), 1);
    for at in ["2026-12-24T09:00:00Z", "2026-12-24T14:00:00Z", "2026-12-24T14:15:00Z"] {
        tick(&local, &deps, at).await;
    }
    let got: Vec<(String, String, String)> = fires(&local, &queue).await.into_iter().collect();
    let want = [("instant", "ping", "2026-12-24T09:00:00+01:00"), ("local", "call", "2026-12-24T09:00:00-05:00")];
    let want: Vec<(String, String, String)> =
        want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    assert_eq!(got, want, "the instant fired in any zone, the local one in its new zone, the paused one never");
    assert!(s.get("local", "call").await.unwrap().is_none(), "finished once fired");
    assert_eq!(heads_without_records(&local, &p).await, Vec::<String>::new());
}

/// `tickctl schedules next` over Chatham's autumn change (2027-04-04, 03:45 +13:45 becomes 02:45
/// +12:45: 02:45 to 03:44 happen twice), then the sweep ticking every quarter-hour through the
/// same window: it fires exactly the instants listed, each once.
#[tokio::test]
async fn schedules_next_lists_exactly_the_instants_the_sweep_then_fires() {
    let local = Local::new().await;
    let p = unique("schednext");
    ok(&tickctl(&local, &p, &["provision"]));
    ok(&tickctl(&local, &p, &["tenants", "add", "kiwi", "--zone", "Pacific/Chatham"]));
    for (name, spec, fold) in
        [("first", "daily 03:00", "first"), ("last", "daily 03:00", "last"), ("hourly", "cron 15 * * * *", "first")]
    {
        ok(&tickctl(&local, &p, &["schedules", "add", "kiwi", name, "--spec", spec, "--fold", fold]));
    }
    let listed = ok(&tickctl(&local, &p, &["schedules", "list", "kiwi"]));
    assert_eq!(listed.lines().count(), 3, "{listed}");
    let (from, until) = ("2027-04-03T12:00:00Z", "2027-04-05T00:00:00Z");
    let out = ok(&tickctl(&local, &p, &["--json", "schedules", "next", "kiwi", "--count", "40", "--from", from]));
    let coming: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let want: BTreeSet<(String, String, String)> = coming
        .iter()
        .filter(|c| c["due"].as_str().unwrap() <= until)
        .map(|c| fire("kiwi", c["name"].as_str().unwrap(), c["occurrence"].as_str().unwrap()))
        .collect();
    // The fold, as each policy reads it: 03:00 once at +13:45 (first) and once at +12:45 (last).
    assert!(want.contains(&fire("kiwi", "first", "2027-04-04T03:00:00+13:45")), "{want:?}");
    assert!(want.contains(&fire("kiwi", "last", "2027-04-04T03:00:00+12:45")), "{want:?}");
    assert!(want.contains(&fire("kiwi", "hourly", "2027-04-04T03:15:00+13:45")));
    assert!(!want.contains(&fire("kiwi", "hourly", "2027-04-04T03:15:00+12:45")), "a repeated time fires once");
    let (deps, queue) = sweep(&local, &p, None);
    let mut t = ms(from);
    while t <= ms(until) {
        tick(&local, &deps, &jiff::Timestamp::from_millisecond(t).unwrap().to_string()).await;
        t += 900_000;
    }
    // The first tick caught up what came due before `from` (within the lateness bound): only
    // what is due after it is what `next` lists.
    let fired: BTreeSet<(String, String, String)> = fires(&local, &queue)
        .await
        .into_iter()
        .filter(|(_, _, o)| o.parse::<jiff::Timestamp>().unwrap().as_millisecond() > ms(from))
        .collect();
    assert_eq!(fired, want);
}

/// Schedules none of which is due within the day (`TICKWORK_IDLE_SCHEDULES` of them: 5,000 in
/// `make test`): every tick of the day is one read. Imported through the library's bulk path.
#[tokio::test]
async fn many_schedules_none_due_today_cost_one_read_a_tick_all_day() {
    let n: usize = std::env::var("TICKWORK_IDLE_SCHEDULES").ok().and_then(|v| v.parse().ok()).unwrap_or(5_000);
    let local = Local::new().await;
    let p = unique("schedidle");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, _) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-01T00:00:00Z"));
    let zones = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "Australia/Lord_Howe", "Pacific/Chatham"];
    let rows: Vec<(String, String, ScheduleDef)> = (0..n)
        .map(|i| (format!("t{i:06}"), zones[i % zones.len()].to_string(), def("report", "monthly 15 08:00")))
        .collect();
    let started = std::time::Instant::now();
    let r = schedules(&deps).put_many(rows, &POLICY).await.unwrap();
    assert_eq!(r.added, n as u64);
    eprintln!("{n} schedules imported in {:.1} s", started.elapsed().as_secs_f64());
    settle(&local, &deps).await;
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    // The earliest: Chatham's 08:00 on the 15th (+13:45).
    assert_eq!(state.sched_next, Some(ms("2026-12-14T18:15:00Z")));
    let before = deps.db.meter().read_write_requests();
    let mut t = ms("2026-12-02T00:00:00Z");
    while t < ms("2026-12-03T00:00:00Z") {
        tick(&local, &deps, &jiff::Timestamp::from_millisecond(t).unwrap().to_string()).await;
        t += 900_000;
    }
    let after = deps.db.meter().read_write_requests();
    assert_eq!((after.0 - before.0, after.1 - before.1), (96, 0), "{n} schedules, a day of ticks: one read each");
}

/// `tickctl schedules import`: good rows added (again: unchanged), bad rows and rows naming no
/// tenant reported by line, exit 1; `remove` cancels a one-off before it fires.
#[tokio::test]
async fn an_import_adds_the_good_rows_reports_the_bad_ones_and_a_one_off_can_be_cancelled() {
    let local = Local::new().await;
    let p = unique("schedimp");
    ok(&tickctl(&local, &p, &["provision"]));
    ok(&tickctl(&local, &p, &["tenants", "add", "acme", "--zone", "Europe/Berlin"]));
    let file = std::env::temp_dir().join(format!("{p}.csv"));
    std::fs::write(
        &file,
        "tenant,name,spec,spread\nacme,nudge,daily 08:00,30\nacme,call,at 2099-01-01T09:00,\nghost,nudge,daily 08:00,\nacme,bad,daily 25:00,\n",
    )
    .unwrap();
    let out = tickctl(&local, &p, &["schedules", "import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("added 2, changed 0, unchanged 0"), "{text}");
    assert!(
        text.contains("line 4: no tenant `ghost`") && text.contains("line 5: `25:00` is not a local time"),
        "{text}"
    );
    // `status` says when the sweep's next schedule is due (and that no wake is set yet).
    // The stream's mapping hands the imported records to the sweep (`sched_next` lowered).
    settle(&local, &sweep(&local, &p, None).0).await;
    let st = ok(&tickctl(&local, &p, &["status"]));
    assert!(st.contains("schedules: next due") && st.contains("wake set for -"), "{st}");
    let again = tickctl(&local, &p, &["schedules", "import", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("added 0, changed 0, unchanged 2"));
    ok(&tickctl(&local, &p, &["schedules", "remove", "acme", "call"]));
    let listed = ok(&tickctl(&local, &p, &["--json", "schedules", "list", "acme"]));
    let names: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&listed)
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["nudge"]);
    let e = tickctl(&local, &p, &["schedules", "remove", "acme", "call"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("has no schedule `call`"));
    std::fs::remove_file(file).ok();
}

/// The cost model's fire tick (`tickwork_cost::schedules::fire_tick`) against the live one: 200
/// schedules due at 08:00 Berlin, every request and unit by table and operation.
#[tokio::test]
async fn the_schedules_cost_model_predicts_a_live_fire_tick() {
    let local = Local::new().await;
    let p = unique("schedcost");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, _) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-01T00:00:00Z"));
    let ids: Vec<String> = (0..200).map(|i| format!("t{i:06}")).collect();
    let tenants: Vec<Tenant> = ids.iter().map(|id| Tenant::new(id.as_str(), "Europe/Berlin")).collect();
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let rows = ids.iter().map(|id| (id.clone(), "Europe/Berlin".to_string(), def("nudge", "daily 08:00"))).collect();
    schedules(&deps).put_many(rows, &POLICY).await.unwrap();
    // The zone's run and the woken tenants' visit first: the 07:00Z tick fires and does nothing else.
    for at in ["2026-12-01T00:15:00Z", "2026-12-01T00:30:00Z", "2026-12-01T06:45:00Z"] {
        tick(&local, &deps, at).await;
    }
    let before = deps.db.meter().snapshot();
    let r = tick(&local, &deps, "2026-12-01T07:00:00Z").await;
    assert_eq!(r.fires, 200);
    let mut live: BTreeMap<(String, String), (u64, f64)> = BTreeMap::new();
    for (k, v) in deps.db.meter().snapshot() {
        let b = before.get(&k).cloned().unwrap_or_default();
        let logical = k.table.rsplit('-').next().unwrap().to_string();
        if k.index.is_some() || v.requests == b.requests && v.rcu == b.rcu && v.wcu == b.wcu {
            continue;
        }
        let e = live.entry((logical, k.op.clone())).or_default();
        e.0 += v.requests - b.requests;
        e.1 += (v.rcu - b.rcu) + (v.wcu - b.wcu);
    }
    let due: Vec<tickwork_cost::schedules::Due> = ids
        .iter()
        .map(|id| tickwork_cost::schedules::Due {
            tenant: id.clone(),
            name: "nudge".into(),
            occurrence: "2026-12-01T08:00:00+01:00".into(),
        })
        .collect();
    let calls =
        tickwork_cost::schedules::fire_tick(&due, &deps.cfg.job, &QueueConfig::default(), ms("2026-12-01T07:00:00Z"))
            .unwrap();
    let mut model: BTreeMap<(String, String), (u64, f64)> = BTreeMap::new();
    for c in calls {
        let e = model.entry((c.table.to_string(), c.op.to_string())).or_default();
        e.0 += c.n;
        e.1 += c.units * c.n.max(1) as f64;
    }
    assert_eq!(model, live, "model (left) against the live tick (right)");
    let requests: u64 = model.values().map(|(n, _)| n).sum();
    let units: f64 = model.values().map(|(_, u)| u).sum();
    eprintln!("200 fires: {requests} requests, {units} units");
}

/// Review findings, each a test: a schedule removed and added again under its name does not take
/// its former group's record for its own (it fired the new time twice: once from each record); a
/// member whose tenant's zone no longer reads is reported, the ticks after it are idle, and its
/// group goes on to its next occurrence.
#[tokio::test]
async fn a_schedule_added_again_ignores_its_former_group_and_a_tenant_whose_zone_does_not_read_is_reported() {
    let (local, p, deps, queue) =
        provisioned("schedagain", "2026-12-01T10:00:00Z", &[Tenant::new("acme", "Europe/Berlin")]).await;
    let s = schedules(&deps);
    s.put("acme", "Europe/Berlin", def("nudge", "daily 09:00"), &POLICY).await.unwrap();
    // Beside it in its due shard, a London tenant's 08:00 (08:00Z, the former record's time): the
    // 08:00Z chunk holds both, so a fire repeated there would be queued in a batch of its own
    // composition, not found as already queued.
    pulse_sweep::add_tenants(&deps, &[Tenant::new("beta", "Europe/London")]).await.unwrap();
    let group = |t: &str, zone: &str, d: ScheduleDef| tickwork::schedules::Group::of(t, &d, zone).id();
    let shard = tickwork::schedules::due_shard(&group("acme", "Europe/Berlin", def("nudge", "daily 09:00")));
    let name = (0..)
        .map(|i| format!("n{i}"))
        .find(|n| tickwork::schedules::due_shard(&group("beta", "Europe/London", def(n, "daily 08:00"))) == shard)
        .unwrap();
    s.put("beta", "Europe/London", def(&name, "daily 08:00"), &POLICY).await.unwrap();
    tick(&local, &deps, "2026-12-01T10:15:00Z").await;
    tick(&local, &deps, "2026-12-01T10:30:00Z").await;
    local.clock.set(ms("2026-12-01T19:00:00Z"));
    assert!(s.remove("acme", "nudge").await.unwrap());
    s.put("acme", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap();
    for at in ["2026-12-01T23:15:00Z", "2026-12-02T07:00:00Z", "2026-12-02T08:00:00Z", "2026-12-02T08:15:00Z"] {
        tick(&local, &deps, at).await;
    }
    let acme: BTreeSet<_> = fires(&local, &queue).await.into_iter().filter(|f| f.0 == "acme").collect();
    assert_eq!(acme, BTreeSet::from([fire("acme", "nudge", "2026-12-02T08:00:00+01:00")]));
    // A tenant whose stored zone no longer reads (written around the library's checks).
    let mut bad = tickwork::tenants::Tenant::new("odd", "UTC").to_item(8);
    bad.insert("zone".into(), tickwork::schema::av_s("Mars/Olympus"));
    local.db.client().put_item().table_name(format!("{p}-tenants")).set_item(Some(bad)).send().await.unwrap();
    local.clock.set(ms("2026-12-02T08:20:00Z"));
    s.put("odd", "UTC", def("ping", "daily 08:30"), &POLICY).await.unwrap();
    let r = tick(&local, &deps, "2026-12-02T08:30:00Z").await;
    assert_eq!((r.fires, r.failed_tenants), (0, 1), "isolated, counted");
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    // Its group goes on to its next occurrence (08:30Z tomorrow); the earliest record is acme's
    // 08:00 in Berlin.
    assert_eq!(state.sched_next, Some(ms("2026-12-03T07:00:00Z")), "its group goes on");
    let before = deps.db.meter().read_write_requests();
    tick(&local, &deps, "2026-12-02T08:45:00Z").await;
    tick(&local, &deps, "2026-12-02T09:00:00Z").await;
    let after = deps.db.meter().read_write_requests();
    assert_eq!((after.0 - before.0, after.1 - before.1), (2, 0), "the ticks after are idle");
    assert_eq!(tick(&local, &deps, "2026-12-03T08:30:00Z").await.failed_tenants, 1, "reported again at the next");
}

/// The sweep wakes itself at a schedule's instant: a tick that fires sets the one-time Scheduler
/// schedule (as the template declares it) for the next record due before the next tick, lets its
/// lease go, and the wake's invocation (the Scheduler shape, at that instant) fires it; an idle
/// tick that finds a record due before the next tick sets the wake once.
/// The sweep's wake on the local Scheduler: the template's schedule (disabled, far ahead, until
/// the sweep sets it), and `deps` setting it.
async fn with_waker(
    local: &Local,
    p: &str,
    deps: &mut pulse_sweep::Deps,
) -> (aws_sdk_scheduler::Client, pulse_sweep::wake::WakeConfig) {
    use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, ScheduleState, Target};
    let mut b = aws_sdk_scheduler::config::Builder::from(&local.sdk);
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r.map(pulse_sweep::wake::scheduler_accesses));
    }
    let scheduler = aws_sdk_scheduler::Client::from_conf(b.build());
    let cfg = pulse_sweep::wake::WakeConfig {
        schedule: format!("{p}-sweep-wake"),
        target_arn: format!("arn:aws:lambda:us-east-1:123456789012:function:{p}-pulse-sweep"),
        role_arn: format!("arn:aws:iam::123456789012:role/{p}-WakeRole"),
    };
    scheduler
        .create_schedule()
        .name(&cfg.schedule)
        .schedule_expression("at(2099-01-01T00:00:00)")
        .flexible_time_window(FlexibleTimeWindow::builder().mode(FlexibleTimeWindowMode::Off).build().unwrap())
        .target(Target::builder().arn(&cfg.target_arn).role_arn(&cfg.role_arn).build().unwrap())
        .state(ScheduleState::Disabled)
        .send()
        .await
        .unwrap();
    deps.waker = Some(std::sync::Arc::new(pulse_sweep::wake::SchedulerWaker::new(scheduler.clone(), cfg.clone())));
    (scheduler, cfg)
}

/// A provisioned stack on the template's quarter-hour tick, its sweep setting its wake on the
/// local Scheduler, and tenant `acme` in Berlin added on 2026-12-01 at 10:00Z.
async fn waking_stack(
    prefix: &str,
) -> (Local, pulse_sweep::Deps, String, aws_sdk_scheduler::Client, pulse_sweep::wake::WakeConfig) {
    waking_stack_with(prefix, "840", &[Tenant::new("acme", "Europe/Berlin")]).await
}

/// [`waking_stack`] with a lease of `lease_secs` and `tenants`.
async fn waking_stack_with(
    prefix: &str,
    lease_secs: &str,
    tenants: &[Tenant],
) -> (Local, pulse_sweep::Deps, String, aws_sdk_scheduler::Client, pulse_sweep::wake::WakeConfig) {
    let local = Local::new().await;
    let p = unique(prefix);
    ok(&tickctl(&local, &p, &["provision"]));
    // The template's quarter-hour schedule (the code's default interval is a minute).
    let env = [("TICKWORK_PULSE_INTERVAL_SECS", "900"), ("TICKWORK_PULSE_LEASE_SECS", lease_secs)];
    let mut deps = local.stack_sweep(&p, &env, None);
    let queue = format!("{p}-queue");
    let (scheduler, cfg) = with_waker(&local, &p, &mut deps).await;
    local.clock.set(ms("2026-12-01T10:00:00Z"));
    pulse_sweep::add_tenants(&deps, tenants).await.unwrap();
    (local, deps, queue, scheduler, cfg)
}

/// A timer added minutes before its instant is handed over at it: the stream's batch that lowers
/// `sched_next` sets the wake (before, it waited for the next quarter-hour tick). When a tick with
/// calendar work holds the lease (kept after its run), the wake is set for when the lease lapses:
/// a wake that found it held would fire nothing, and the timer would wait for the next tick.
#[tokio::test]
async fn a_timer_added_minutes_before_its_instant_is_woken_for_by_its_batch() {
    for lease_held in [false, true] {
        // Denver's midnight is 07:00Z: that tick runs its day and keeps the lease until 07:10.
        let mut tenants = vec![Tenant::new("acme", "Europe/Berlin")];
        if lease_held {
            tenants.push(Tenant::new("den", "America/Denver"));
        }
        let (local, deps, queue, scheduler, cfg) = waking_stack_with("schedsoon", "600", &tenants).await;
        // Berlin's midnight at 23:00Z; at 07:00Z only Denver's, when it has a tenant.
        for at in ["2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z", "2026-12-01T23:00:00Z", "2026-12-02T07:00:00Z"] {
            tick(&local, &deps, at).await;
        }
        // 07:01Z: a timer for 08:04 Berlin (07:04Z).
        local.clock.set(ms("2026-12-02T07:01:00Z"));
        schedules(&deps).put("acme", "Europe/Berlin", def("call", "at 2026-12-02T08:04"), &POLICY).await.unwrap();
        assert_eq!(settle(&local, &deps).await, 1);
        let wake = scheduler.get_schedule().name(&cfg.schedule).send().await.unwrap();
        let want = if lease_held { "at(2026-12-02T07:11:00)" } else { "at(2026-12-02T07:04:00)" };
        assert_eq!(wake.schedule_expression(), Some(want), "lease held {lease_held}");
        // The wake's invocation, at that minute: it takes the lease and fires the timer.
        let at = if lease_held { "2026-12-02T07:11:00Z" } else { "2026-12-02T07:04:00Z" };
        local.clock.set(ms(at) + 1_000);
        let event = serde_json::json!({"scheduled-time": at, "execution-id": "wake-1"});
        let r = Box::pin(pulse_sweep::run(&deps, &Tick::parse(&event).unwrap(), &Unlimited, "wake")).await.unwrap();
        assert_eq!(r.fires, 1, "lease held {lease_held}: {r:?}");
        assert!(fires(&local, &queue).await.contains(&fire("acme", "call", "2026-12-02T08:04:00+01:00")));
    }
}

/// A fire its invocation's budget stops goes on a minute later (a wake), not at the next
/// quarter-hour tick; and no due shard is starved by another that keeps getting work: here shard 0
/// gains a timer due every minute, three other shards have one each, and each invocation's budget
/// covers a few of the shards' pages and chunks, not all (the shards fire at once and share it).
/// Before, the stopped tick set no wake and every invocation began at shard 0: the timers in the
/// other shards never fired.
#[tokio::test]
async fn a_fire_stopped_by_its_budget_goes_on_within_a_minute_and_starves_no_shard() {
    let (local, deps, queue, scheduler, cfg) = waking_stack("schedstop").await;
    let s = schedules(&deps);
    // A timer's name that lands in shard `k`, due at 08:0m Berlin on the 2nd.
    let mut n = 0;
    let mut timer = |k: u32, m: u32| loop {
        n += 1;
        let d = def(&format!("t{n}"), &format!("at 2026-12-02T08:{m:02}"));
        if tickwork::schedules::due_shard(&tickwork::schedules::Group::of("acme", &d, "Europe/Berlin").id()) == k {
            return d;
        }
    };
    // Three later shards with a timer each (a shard with nothing due spends no budget).
    let mut later = Vec::new();
    for k in 1..4 {
        let d = timer(k, 0);
        later.push(d.name.clone());
        s.put("acme", "Europe/Berlin", d, &POLICY).await.unwrap();
    }
    // The tenant visited and its day pulsed: the invocations below spend their budget on fires.
    for at in ["2026-12-01T10:15:00Z", "2026-12-01T23:15:00Z", "2026-12-02T06:45:00Z"] {
        tick(&local, &deps, at).await;
    }
    let mut stopped = 0;
    for m in 0..6u32 {
        let at = ms("2026-12-02T07:00:00Z") + i64::from(m) * 60_000;
        local.clock.set(at - 60_000);
        s.put("acme", "Europe/Berlin", timer(0, m), &POLICY).await.unwrap();
        settle(&local, &deps).await;
        local.clock.set(at + 1_000);
        let event = Tick::envelope(at, false);
        // A step a page read and a step a chunk written, shared by the shards at once: at the
        // first minute 4 shards' page and chunk are due, 8 steps, and the budget covers the 4
        // pages and one chunk (the first shard in the tick's order gets to its chunk first).
        let budget = tickwork::budget::Steps::new(5);
        let r = pulse_sweep::run(&deps, &Tick::parse(&event).unwrap(), &budget, &format!("w{m}")).await.unwrap();
        if m == 0 {
            assert_eq!(r.outcome, tickwork_lambda::Outcome::Partial, "{r:?}");
        }
        if r.outcome == tickwork_lambda::Outcome::Partial {
            stopped += 1;
            let wake = scheduler.get_schedule().name(&cfg.schedule).send().await.unwrap();
            let next =
                jiff::Timestamp::from_millisecond(at + 60_000).unwrap().strftime("at(%Y-%m-%dT%H:%M:%S)").to_string();
            assert_eq!(wake.schedule_expression(), Some(next.as_str()), "a stopped fire goes on a minute later");
        }
    }
    assert!(stopped >= 1);
    let fired: BTreeSet<String> = fires(&local, &queue).await.into_iter().map(|(_, name, _)| name).collect();
    for name in &later {
        assert!(fired.contains(name), "`{name}` in a later shard fired: {fired:?}");
    }
}

/// The due shards fire at once, each under its own lease: a shard whose lease another invocation
/// still holds (one firing it, or one that died holding it) waits for the wake a minute on, while
/// every other shard's timers are handed over at the tick; once the lease is let go, the wake
/// fires the rest, each once. Before, one lease fenced every shard's transactions, and the shards
/// fired one after another (two transactions holding one lease item at once cancel each other).
#[tokio::test]
async fn a_due_shard_whose_lease_is_held_waits_and_the_others_fire() {
    let (local, deps, queue, scheduler, cfg) = waking_stack("schedheld").await;
    let s = schedules(&deps);
    // Two timers in each shard, due at 08:00 Berlin on the 2nd.
    let mut names: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let mut n = 0;
    while names.values().map(Vec::len).sum::<usize>() < 2 * tickwork::schedules::DUE_SHARDS as usize {
        n += 1;
        let d = def(&format!("t{n}"), "at 2026-12-02T08:00");
        let k = tickwork::schedules::due_shard(&tickwork::schedules::Group::of("acme", &d, "Europe/Berlin").id());
        let of_k = names.entry(k).or_default();
        if of_k.len() < 2 {
            of_k.push(d.name.clone());
            s.put("acme", "Europe/Berlin", d, &POLICY).await.unwrap();
        }
    }
    for at in ["2026-12-01T10:15:00Z", "2026-12-01T23:15:00Z", "2026-12-02T06:45:00Z"] {
        tick(&local, &deps, at).await;
    }
    // Another invocation holds shard 2's lease (until 07:14, the template's 840 s).
    local.clock.set(ms("2026-12-02T07:00:00Z"));
    let other = match deps.leases.acquire(&pulse_sweep::due_lease(&deps, 2), "another").await.unwrap() {
        tickwork::lease::Acquire::Acquired(l) => l,
        held => panic!("{held:?}"),
    };
    let r = tick(&local, &deps, "2026-12-02T07:00:00Z").await;
    let others = 2 * (u64::from(tickwork::schedules::DUE_SHARDS) - 1);
    assert_eq!((r.fires, r.outcome), (others, tickwork_lambda::Outcome::Partial), "{r:?}");
    let fired =
        |f: &BTreeSet<(String, String, String)>| -> BTreeSet<String> { f.iter().map(|(_, n, _)| n.clone()).collect() };
    let got = fired(&fires(&local, &queue).await);
    for (k, of_k) in &names {
        for name in of_k {
            assert_eq!(got.contains(name), *k != 2, "shard {k}'s `{name}`: {got:?}");
        }
    }
    let wake = scheduler.get_schedule().name(&cfg.schedule).send().await.unwrap();
    assert_eq!(wake.schedule_expression(), Some("at(2026-12-02T07:01:00)"), "the held shard waits a minute");
    // The other holder lets it go; the wake fires shard 2's timers, and nothing twice.
    deps.leases.release(&other).await.unwrap();
    local.clock.set(ms("2026-12-02T07:01:01Z"));
    let event = serde_json::json!({"scheduled-time": "2026-12-02T07:01:00Z", "execution-id": "wake-1"});
    let r = Box::pin(pulse_sweep::run(&deps, &Tick::parse(&event).unwrap(), &Unlimited, "wake")).await.unwrap();
    assert_eq!((r.fires, r.outcome), (2, tickwork_lambda::Outcome::Completed), "{r:?}");
    let all: BTreeSet<String> = names.values().flatten().cloned().collect();
    assert_eq!(fired(&fires(&local, &queue).await), all, "each once (`fires` asserts once)");
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    assert_eq!(state.sched_next, None, "nothing left due");
}

/// A schedule whose due record a release before this one wrote under 4 due shards (its key names
/// shard `gid % 4`, where today's count puts it elsewhere) fires once at its instant, its record
/// deleted where it is and its successor put where today's count puts it; and when an attempt of that
/// release had put the record's successor beside it and died before its transaction, that one
/// goes on instead: one record for the group, each occurrence once (`fires` asserts it).
#[tokio::test]
async fn a_record_written_under_four_due_shards_fires_once_and_its_group_keeps_one_record() {
    use tickwork::schedules::{due_shard, own_successor, record::due_pk, DueRecord, Group};
    for crashed_before in [false, true] {
        let (local, _, deps, queue) =
            provisioned("schedlegacy", "2026-12-01T10:00:00Z", &[Tenant::new("acme", "Europe/Berlin")]).await;
        // A name whose group's shard under 4 differs from its shard under today's count.
        let legacy = |gid: &str| u32::from_str_radix(&gid[..8], 16).unwrap() % 4;
        let d = (0..)
            .map(|i| def(&format!("nudge{i}"), "daily 08:00"))
            .find(|d| {
                let gid = Group::of("acme", d, "Europe/Berlin").id();
                legacy(&gid) != due_shard(&gid)
            })
            .unwrap();
        let gid = Group::of("acme", &d, "Europe/Berlin").id();
        let old = legacy(&gid);
        schedules(&deps).put("acme", "Europe/Berlin", d.clone(), &POLICY).await.unwrap();
        tick(&local, &deps, "2026-12-01T10:15:00Z").await;
        // Move its record to where the release before would have written it.
        async fn records(local: &Local, table: &str, gid: &str) -> Vec<tickwork::item::Item> {
            tickwork_sim::scan_all(&local.db, table)
                .await
                .unwrap()
                .into_iter()
                .filter(|i| {
                    tickwork::schema::get_s(i, "pk").is_some_and(|k| k.starts_with("sdue#"))
                        && tickwork::schema::get_s(i, "sk").is_some_and(|k| k.ends_with(gid))
                })
                .collect()
        }
        let control = deps.tables.control.clone();
        let mut item = records(&local, &control, &gid).await.remove(0);
        let rec = DueRecord::from_item(&item).unwrap();
        let c = deps.db.client();
        c.delete_item().table_name(&control).set_key(Some(rec.key(&deps.cfg.job))).send().await.unwrap();
        item.insert("pk".into(), tickwork::schema::av_s(due_pk(&deps.cfg.job, old)));
        c.put_item().table_name(&control).set_item(Some(item)).send().await.unwrap();
        if crashed_before {
            let read = DueRecord { shard: Some(old), ..rec.clone() };
            let next = own_successor(&read).unwrap().unwrap();
            let beside = DueRecord { shard: Some(old), ..next };
            c.put_item().table_name(&control).set_item(Some(beside.to_item(&deps.cfg.job))).send().await.unwrap();
        }
        for at in ["2026-12-01T23:00:00Z", "2026-12-02T07:00:00Z"] {
            tick(&local, &deps, at).await;
        }
        let left = records(&local, &control, &gid).await;
        assert_eq!(left.len(), 1, "crashed before {crashed_before}: one record for the group: {left:?}");
        let shard = DueRecord::from_item(&left[0]).unwrap().shard();
        assert_eq!(shard, if crashed_before { old } else { due_shard(&gid) }, "crashed before {crashed_before}");
        tick(&local, &deps, "2026-12-03T07:00:00Z").await;
        let got = fires(&local, &queue).await;
        for day in ["2026-12-02", "2026-12-03"] {
            assert!(got.contains(&fire("acme", &d.name, &format!("{day}T08:00:00+01:00"))), "{day}: {got:?}");
        }
    }
}

#[tokio::test]
async fn the_sweep_wakes_at_a_schedules_instant_between_ticks() {
    use aws_sdk_scheduler::types::ScheduleState;
    let (local, deps, queue, scheduler, cfg) = waking_stack("schedwake").await;
    let s = schedules(&deps);
    s.put("acme", "Europe/Berlin", def("early", "daily 08:00"), &POLICY).await.unwrap();
    s.put("acme", "Europe/Berlin", def("later", "daily 08:05"), &POLICY).await.unwrap();
    s.put("acme", "Europe/Berlin", def("quarter", "daily 08:15"), &POLICY).await.unwrap();
    for at in ["2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z", "2026-12-01T23:00:00Z"] {
        tick(&local, &deps, at).await;
    }
    // 07:00Z fires 08:00 Berlin and sets the wake for 08:05 (07:05Z).
    let r = tick(&local, &deps, "2026-12-02T07:00:00Z").await;
    assert_eq!(r.fires, 1);
    let got = scheduler.get_schedule().name(&cfg.schedule).send().await.unwrap();
    assert_eq!(got.schedule_expression(), Some("at(2026-12-02T07:05:00)"));
    assert_eq!(got.state(), Some(&ScheduleState::Enabled));
    let t = got.target().unwrap();
    assert_eq!((t.arn(), t.role_arn()), (cfg.target_arn.as_str(), cfg.role_arn.as_str()));
    // The wake's invocation, as Scheduler sends it: the lease was let go, and 08:05 fires.
    local.clock.set(ms("2026-12-02T07:05:01Z"));
    settle(&local, &deps).await;
    let event = serde_json::json!({"scheduled-time": "2026-12-02T07:05:00Z", "execution-id": "wake-1"});
    // Another invocation (its own owner): it takes the lease only if the tick let it go.
    let r = pulse_sweep::run(&deps, &Tick::parse(&event).unwrap(), &Unlimited, "wake-invocation").await.unwrap();
    assert_eq!(r.fires, 1, "{r:?}");
    let got = fires(&local, &queue).await;
    assert!(got.contains(&fire("acme", "later", "2026-12-02T08:05:00+01:00")), "{got:?}");
    // The wake let its lease go: the 07:15 tick is not held off, and fires 08:15.
    local.clock.set(ms("2026-12-02T07:10:00Z"));
    s.put("acme", "Europe/Berlin", def("soon", "daily 08:40"), &POLICY).await.unwrap();
    let r = tick(&local, &deps, "2026-12-02T07:15:00Z").await;
    assert_eq!(r.fires, 1, "{r:?}");
    // 07:40 (the schedule added at 07:10) is before the 07:45 tick: the 07:30 tick sets the wake
    // (its one read and the wake recorded), and the same event again reads only.
    let before = deps.db.meter().read_write_requests();
    tick(&local, &deps, "2026-12-02T07:30:00Z").await;
    let after = deps.db.meter().read_write_requests();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (2, 1),
        "07:30: the state read, the wake claimed and its claim read back"
    );
    let got = scheduler.get_schedule().name(&cfg.schedule).send().await.unwrap();
    assert_eq!(got.schedule_expression(), Some("at(2026-12-02T07:40:00)"));
    tick(&local, &deps, "2026-12-02T07:30:00Z").await;
    let last = deps.db.meter().read_write_requests();
    assert_eq!((last.0 - after.0, last.1 - after.1), (1, 0), "set once");
}

/// The `sched_next` protocol under interleavings the local server never makes on its own: a
/// schedule added while a firing tick is between its read of the earliest record and its write of
/// `sched_next`, its record handed over by the stream's mapping before that write (the batch is
/// counted, so the tick's write is refused, and made again from the shards read after the count)
/// or after it (the batch lowers what the tick set). Either way the new schedule fires on time,
/// not a day late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_added_while_a_tick_sets_sched_next_is_not_passed_over() {
    let local = Local::new().await;
    for handed_before_the_write in [true, false] {
        let p = unique("schedrace");
        ok(&tickctl(&local, &p, &["provision"]));
        let (admin, queue) = sweep(&local, &p, None);
        local.clock.set(ms("2026-12-01T10:00:00Z"));
        pulse_sweep::add_tenants(&admin, &[Tenant::new("acme", "Europe/Berlin")]).await.unwrap();
        admin.schedules.put("acme", "Europe/Berlin", def("early", "daily 08:00"), &POLICY).await.unwrap();
        for at in ["2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z", "2026-12-01T23:00:00Z"] {
            tick(&local, &admin, at).await;
        }
        // The firing tick's UpdateItems: the lease, its due shard's lease taken and let go, then
        // `sched_next`; the fourth stalls.
        let stall = Faults::new();
        stall.plan(Planned { op: Some("UpdateItem"), nth: 4, fault: Fault::Stall });
        let run = stalled_tick(&local, &p, &stall, "2026-12-02T07:00:00Z").await;
        // The tick found tomorrow's 08:00 the earliest; meanwhile 08:30 today is added.
        admin.schedules.put("acme", "Europe/Berlin", def("later", "daily 08:30"), &POLICY).await.unwrap();
        if handed_before_the_write {
            assert_eq!(settle(&local, &admin).await, 1);
        }
        stall.release();
        assert_eq!(run.await.unwrap().unwrap().fires, 1);
        if !handed_before_the_write {
            assert_eq!(settle(&local, &admin).await, 1);
        }
        let state = admin.marks.read_strong(&admin.cfg.job).await.unwrap();
        // Exactly the new record: not passed over, and not left in the past either (a set refused
        // by the batch's count is made again from the shards read after it, so the next ticks
        // stay one read).
        assert_eq!(
            state.sched_next,
            Some(ms("2026-12-02T07:30:00Z")),
            "handed over before the write {handed_before_the_write}"
        );
        for at in ["2026-12-02T07:15:00Z", "2026-12-02T07:30:00Z"] {
            tick(&local, &admin, at).await;
        }
        assert!(fires(&local, &queue).await.contains(&fire("acme", "later", "2026-12-02T08:30:00+01:00")));
    }
}

/// A fire is ready in the queue since its instant, not since the sweep got to it: after two hours
/// without a tick, the worker's `QueueLag` says two hours (and `QueueLagAlarm`, at 15 minutes,
/// fires), where an item ready from its enqueue would have said nothing was late.
#[tokio::test]
async fn a_late_fire_counts_in_the_queue_lag_from_its_instant() {
    let (local, _, deps, queue) =
        provisioned("schedlag", "2026-12-01T14:00:00Z", &[Tenant::new("acme", "Europe/Berlin")]).await;
    schedules(&deps).put("acme", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap();
    tick(&local, &deps, "2026-12-01T14:15:00Z").await;
    // 08:00 Berlin is 07:00Z; no tick runs until 09:00Z.
    let r = tick(&local, &deps, "2026-12-02T09:00:00Z").await;
    assert_eq!(r.fires, 1);
    let q = tickwork::queue::Queue::new(local.fresh_db(), &queue, QueueConfig::default(), local.clock());
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let handlers = queue_worker::summary::registry(local.fresh_db(), &summaries, local.clock());
    let w = queue_worker::drain(&q, &handlers, "w", &Unlimited, &queue_worker::WorkerConfig::default()).await.unwrap();
    assert_eq!(w.finished, 2, "the fire and the day pulse of December 1st: {w:?}");
    assert_eq!(w.oldest_ready_ms, 2 * 3_600_000, "the wait since 08:00 Berlin: {w:?}");
}

/// A due record that does not read (here its fold, as a newer version might write it) is set
/// aside with its whole item in the same transaction that moves its shard's cursor past it: the
/// other group due at the same tick fires, the tick reports the failed unit, `tickctl schedules
/// doctor` and `status` name the group, an idle tick stays one read, and `doctor --repair-all`
/// writes the record again from the group's head so its owed occurrence fires, once. Before, the
/// record was counted and passed: the group never fired again and nothing named it.
#[tokio::test]
async fn an_unreadable_record_is_set_aside_named_and_repaired_and_its_occurrence_fires_once() {
    let (local, p, deps, queue) = two_tenants("schedbad").await;
    let s = schedules(&deps);
    s.put("a", "Europe/Berlin", def("nudge", "daily 08:00"), &POLICY).await.unwrap();
    s.put("b", "Europe/Berlin", def("nudge", "cron 0 8 * * *"), &POLICY).await.unwrap();
    tick(&local, &deps, "2026-12-01T10:15:00Z").await;
    tick(&local, &deps, "2026-12-01T10:30:00Z").await;
    // The record of a's group: the one whose spec is `daily 08:00`.
    let control = format!("{p}-control");
    let items = tickwork_sim::scan_all(&local.db, &control).await.unwrap();
    let g = |i: &tickwork::item::Item, a: &str| tickwork::schema::get_s(i, a).unwrap_or_default().to_string();
    let rec = items
        .iter()
        .find(|i| g(i, "pk").starts_with("sdue#") && g(i, "spec") == "daily 08:00")
        .expect("a's group has its record");
    let gid = g(rec, "sk").split_once('#').unwrap().1.to_string();
    let key: tickwork::item::Item = ["pk", "sk"].iter().map(|a| (a.to_string(), rec[*a].clone())).collect();
    local
        .db
        .client()
        .update_item()
        .table_name(&control)
        .set_key(Some(key))
        .update_expression("SET #f = :f")
        .expression_attribute_names("#f", "fold")
        .expression_attribute_values(":f", aws_sdk_dynamodb::types::AttributeValue::S("sideways".into()))
        .send()
        .await
        .unwrap();
    let r = tick(&local, &deps, "2026-12-02T07:00:00Z").await;
    assert_eq!(
        fires(&local, &queue).await,
        BTreeSet::from([fire("b", "nudge", "2026-12-02T08:00:00+01:00")]),
        "the other group due at the same tick fires"
    );
    assert_eq!(r.failed_tenants, 1, "the bad record is reported: {r:?}");
    assert_eq!(heads_without_records(&local, &p).await, vec![gid.clone()], "set aside, not lost");
    let doctor = tickctl(&local, &p, &["--json", "schedules", "doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "a group set aside fails the check");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["group"], gid.as_str());
    assert!(rows[0]["problem"].as_str().unwrap().contains("sideways"), "{rows:?}");
    let status = ok(&tickctl(&local, &p, &["status"]));
    assert!(status.contains(&gid), "status names the group: {status}");
    // Set aside, it costs nothing: an idle tick is one read.
    let before = deps.db.meter().read_write_requests();
    tick(&local, &deps, "2026-12-02T07:15:00Z").await;
    let after = deps.db.meter().read_write_requests();
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 0), "an idle tick is one read");
    let repaired = ok(&tickctl(&local, &p, &["schedules", "doctor", "--repair-all"]));
    assert!(repaired.contains("from its head"), "{repaired}");
    assert_eq!(heads_without_records(&local, &p).await, Vec::<String>::new());
    let again = tickctl(&local, &p, &["schedules", "doctor", "--repair", &gid]);
    assert_ne!(again.status.code(), Some(0), "a repair run twice is refused, and writes nothing");
    tick(&local, &deps, "2026-12-02T07:30:00Z").await;
    tick(&local, &deps, "2026-12-02T07:45:00Z").await;
    assert_eq!(
        fires(&local, &queue).await,
        BTreeSet::from([
            fire("a", "nudge", "2026-12-02T08:00:00+01:00"),
            fire("b", "nudge", "2026-12-02T08:00:00+01:00")
        ]),
        "the owed occurrence fires once, at the first tick after the repair"
    );
    assert_eq!(ok(&tickctl(&local, &p, &["--json", "schedules", "doctor"])).trim(), "[]");
    // And the next day both groups fire as before.
    tick(&local, &deps, "2026-12-03T07:00:00Z").await;
    assert_eq!(fires(&local, &queue).await.iter().filter(|f| f.2.starts_with("2026-12-03")).count(), 2);
}

/// A duplicate tick that read its due groups before another invocation ran a zone's whole run,
/// and took the lease after that one let it go (a tick that fires schedules does), plans again
/// under the lease and does nothing. Before, it went on from its stale plan, found every shard
/// done, met nobody and took a zone with tenants out of the registry: they were never pulsed
/// again, with no error (chaos seed 47: three Los Angeles tenants owed a day and a week). The
/// registry rule (`found_empty`) guards the same case on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_tick_that_finds_a_run_done_by_another_keeps_the_zone() {
    let local = Local::new().await;
    let p = unique("dup");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, _) = sweep(&local, &p, None);
    local.clock.set(ms("2026-11-28T10:00:00Z"));
    let ids = ["t1", "t2", "t3"];
    pulse_sweep::add_tenants(&deps, &ids.map(|id| Tenant::new(id, "Asia/Tokyo"))).await.unwrap();
    tick(&local, &deps, "2026-11-28T10:00:00Z").await;
    tick(&local, &deps, "2026-11-28T10:15:00Z").await;
    // A timer due at Tokyo's midnight: the tick that fires it lets its lease go as it ends.
    schedules(&deps).put("t1", "Asia/Tokyo", def("call", "at 2026-11-29T00:00"), &POLICY).await.unwrap();
    settle(&local, &deps).await;
    // The duplicate reads the state item (its due groups) and stops before its lease: a paused
    // process.
    let midnight = ms("2026-11-28T15:00:00Z");
    local.clock.set(midnight);
    let event = Tick::parse(&Tick::envelope(midnight, false)).unwrap();
    let stall = Faults::new();
    stall.plan(Planned { op: None, nth: 2, fault: Fault::Stall });
    let (dup, _) = sweep(&local, &p, Some(&stall));
    let dup = tokio::spawn({
        let event = event.clone();
        async move { pulse_sweep::run(&dup, &event, &Unlimited, "dup").await.unwrap() }
    });
    while !stall.is_stalled() && !dup.is_finished() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(stall.is_stalled(), "the duplicate pauses at its second call, its lease");
    // Meanwhile the run: stopped by its budget, then finished by a second invocation of the same
    // tick, which checkpoints each shard as it ends and fires the timer.
    let first = pulse_sweep::run(&deps, &event, &tickwork::budget::Steps::new(2), "a").await.unwrap();
    assert_eq!(first.outcome, tickwork_lambda::Outcome::Partial, "{first:?}");
    let second = pulse_sweep::run(&deps, &event, &Unlimited, "b").await.unwrap();
    assert_eq!((second.groups_completed, second.fires), (1, 1), "{second:?}");
    stall.release();
    let r = dup.await.unwrap();
    // The lease says another holder wrote after the duplicate's read: it plans again from the
    // state item as it is now, finds the run done, and does nothing (before, it went on from its
    // stale plan, started the run again and found every shard done).
    assert_eq!((r.outcome, r.groups_due), (tickwork_lambda::Outcome::AlreadyDone, 0), "{r:?}");
    assert_eq!(r.groups_removed, 0, "{r:?}");
    let state = deps.marks.read_strong("pulse-sweep").await.unwrap();
    assert!(state.groups.contains("Asia/Tokyo"), "{state:?}");
    assert!(!state.runs.contains_key("Asia/Tokyo"), "no run started again: {state:?}");
    // Nor could a stale plan start it (a helper's advance, which no lease records): the start is
    // refused once the mark is at the run's date.
    deps.marks.start_run("pulse-sweep", "Asia/Tokyo", "2026-11-29", midnight).await.unwrap();
    let state = deps.marks.read_strong("pulse-sweep").await.unwrap();
    assert!(!state.runs.contains_key("Asia/Tokyo"), "a done run is not started again: {state:?}");
    // The next midnight pulses all three for the 29th.
    let r = tick(&local, &deps, "2026-11-29T15:00:00Z").await;
    assert_eq!(r.pulses.get("day").copied(), Some(3), "{r:?}");
}

/// A large fire while writers keep changing schedules in its shards: near-term adds (each counted
/// on its shard's cursor, which refuses a sweep's move made from an older count), pauses, spec
/// changes, removes and a tenant moved between zones, one every 20 ms, for as long as the fire
/// runs. Each refused move of a chunk reads the cursor again and the range it passes: the writers'
/// records lie past it (due later), so the move goes again at once. Every due occurrence is handed
/// over once, in one invocation. Before, each refused move read the shard again, three times at
/// most, and left the rest to the next tick, which the writers refused again: the fire stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fire_finishes_while_writers_change_schedules_in_its_shards() {
    const TIMERS: usize = 1_000;
    let local = Local::new().await;
    let p = unique("schedbusy");
    ok(&tickctl(&local, &p, &["provision"]));
    // Two groups' member pages at once a shard: the local server serves one request at a time,
    // and the default 32 in each of 16 shards would queue the writers' requests behind the fire's
    // (DynamoDB serves them side by side), leaving few changes to interleave with it.
    let deps = local.stack_sweep(&p, &[("TICKWORK_PULSE_FIRE_CONCURRENCY", "2")], None);
    let queue = format!("{p}-queue");
    local.clock.set(ms("2026-12-01T10:00:00Z"));
    let mut tenants: Vec<Tenant> = (0..10).map(|i| Tenant::new(format!("t{i}"), "Europe/Berlin")).collect();
    tenants.push(Tenant::new("w", "Europe/Berlin"));
    tenants.push(Tenant::new("mover", "Europe/Berlin"));
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let s = schedules(&deps);
    // A thousand distinct timers (a group and a due record each) at 08:00 Berlin on the 2nd.
    for i in 0..TIMERS {
        s.put(&format!("t{}", i % 10), "Europe/Berlin", def(&format!("n{i}"), "at 2026-12-02T08:00"), &POLICY)
            .await
            .unwrap();
    }
    s.put("mover", "Europe/Berlin", def("later", "daily 08:30"), &POLICY).await.unwrap();
    for at in ["2026-12-01T10:15:00Z", "2026-12-01T23:15:00Z", "2026-12-02T06:45:00Z"] {
        tick(&local, &deps, at).await;
    }
    local.clock.set(ms("2026-12-02T07:00:01Z"));
    // The writers: schedules of `w` and `mover`, none due at the fire's instant.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers = tokio::spawn({
        let (deps, done) = (deps.clone(), done.clone());
        async move {
            let s = schedules(&deps);
            let mut n = 0u32;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let name = format!("w{}", n / 4);
                match n % 4 {
                    // Near-term: 08:20-08:59 Berlin, within the hour, counted on its shard's cursor.
                    0 => {
                        let d = def(&name, &format!("at 2026-12-02T08:{:02}", 20 + n / 4 % 40));
                        s.put("w", "Europe/Berlin", d, &POLICY).await.unwrap();
                    }
                    1 => {
                        s.set_paused("w", &name, true, "Europe/Berlin").await.unwrap();
                    }
                    2 => {
                        let d = def(&name, &format!("at 2026-12-02T09:{:02}", n / 4 % 60));
                        s.put("w", "Europe/Berlin", d, &POLICY).await.unwrap();
                        s.remove("w", &name).await.unwrap();
                    }
                    _ => {
                        let zone = if n / 4 % 2 == 0 { "Europe/Paris" } else { "Europe/Berlin" };
                        assert!(deps.tenants.move_zone("mover", zone).await.unwrap());
                        s.retarget("mover", zone).await.unwrap();
                    }
                }
                n += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            n
        }
    });
    let event = Tick::parse(&Tick::envelope(ms("2026-12-02T07:00:00Z"), false)).unwrap();
    let mut invocations = 0;
    let mut fired = 0;
    while fired < TIMERS as u64 && invocations < 4 {
        invocations += 1;
        // Each invocation a new owner, its lease let go at the end (a tick that fired does).
        let r = pulse_sweep::run(&deps, &event, &Unlimited, &format!("i{invocations}")).await.unwrap();
        fired += r.fires;
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let ops = writers.await.unwrap();
    let got = fires(&local, &queue).await;
    let at_eight: BTreeSet<_> = got
        .iter()
        .filter(|(_, _, occ)| occ == "2026-12-02T08:00:00+01:00")
        .map(|(t, n, _)| (t.clone(), n.clone()))
        .collect();
    let want: BTreeSet<_> = (0..TIMERS).map(|i| (format!("t{}", i % 10), format!("n{i}"))).collect();
    assert_eq!(at_eight, want, "every timer handed over (each once: `fires` checks)");
    assert!(ops >= 8, "the writers ran during the fire: {ops} changes");
    println!("{TIMERS} timers fired in {invocations} invocation(s) beside {ops} schedule changes");
    assert_eq!(invocations, 1, "the fire finished in one invocation");
}
