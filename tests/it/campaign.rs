//! A one-off campaign larger than a page (a million tenants' `at 2026-12-24T09:00`; here 130):
//! its first page fixes its members (the head marked `firing` at the joins read before it), the
//! rest go out a thousand a transaction behind the record's cursor, and its members and
//! definitions are cleaned after the fire. A member joining while the first page is written
//! refuses that page and is fired with the group; one joining after it (whatever its id sorts
//! before) goes to the group's next generation and is fired there: each once, and nothing left.

use std::collections::BTreeSet;

use tickwork::budget::Unlimited;
use tickwork::schedules::{Group, Schedule};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::{ms, unique, Local};

use crate::binary::{ok, tickctl};
use crate::schedules::{def, fire, fires, sweep, tick, POLICY};

const AT: &str = "at 2026-12-24T09:00";
const OCC: &str = "2026-12-24T09:00:00+01:00";

/// The items a campaign leaves in the control table (shard cursors aside): keys by prefix.
async fn left(local: &Local, p: &str) -> Vec<String> {
    let control = tickwork_sim::scan_all(&local.db, &format!("{p}-control")).await.unwrap();
    control
        .iter()
        .filter(|i| tickwork::schema::get_s(i, "sk") != Some("~"))
        .filter_map(|i| tickwork::schema::get_s(i, "pk"))
        .filter(|pk| ["smem#", "shead#", "sdue#", "sched#"].iter().any(|x| pk.starts_with(x)))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_fixes_its_members_at_its_first_page_and_a_join_during_its_fire_fires_once() {
    let local = Local::new().await;
    let p = unique("campaign");
    ok(&tickctl(&local, &p, &["provision"]));
    let (deps, queue) = sweep(&local, &p, None);
    local.clock.set(ms("2026-12-24T06:00:00Z"));
    let ids: Vec<String> = (0..130).map(|i| format!("t{i:03}")).collect();
    // A racer joins while the first page is written; two join after it, one sorting before every
    // member (behind any cursor), one after.
    let late = ["a-early", "z-late"];
    let everyone: Vec<&str> = ids.iter().map(String::as_str).chain(["racer"]).chain(late).collect();
    let tenants: Vec<Tenant> = everyone.iter().map(|id| Tenant::new(*id, "Europe/Berlin")).collect();
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let rows = ids.iter().map(|id| (id.clone(), "Europe/Berlin".to_string(), def("call", AT))).collect();
    deps.schedules.put_many(rows, &POLICY).await.unwrap();
    // The new tenants' first sight first: the 08:00Z tick's transactions are the fires'.
    tick(&local, &deps, "2026-12-24T06:15:00Z").await;
    tick(&local, &deps, "2026-12-24T06:30:00Z").await;
    let gen0 = Group::of("t000", &def("call", AT), "Europe/Berlin");
    let gid = |s: Option<Schedule>| s.and_then(|s| s.group).unwrap();

    // The fire's first transaction (the page that fixes the group) stalls; the racer joins
    // meanwhile. Its second (the first again, read anew) lands, and the process dies after it.
    let faults = Faults::new();
    faults.plan(Planned { op: Some("TransactWriteItems"), nth: 1, fault: Fault::Stall });
    faults.plan(Planned { op: Some("TransactWriteItems"), nth: 2, fault: Fault::CrashAfter });
    let (racing, _) = sweep(&local, &p, Some(&faults));
    local.clock.set(ms("2026-12-24T08:00:00Z"));
    let t = Tick::parse(&Tick::envelope(ms("2026-12-24T08:00:00Z"), false)).unwrap();
    let run = tokio::spawn(async move { pulse_sweep::run(&racing, &t, &Unlimited, "racing").await });
    while !faults.is_stalled() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    deps.schedules.put("racer", "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
    assert_eq!(gid(deps.schedules.get("racer", "call").await.unwrap()), gen0.id(), "joined before the fixing");
    faults.release();
    assert!(run.await.unwrap().is_err(), "the crash stops the tick");
    assert!(faults.crashed());
    let first = fires(&local, &queue).await;
    assert_eq!(first.len(), pulse_sweep::ONE_OFF_PAGE, "the first page, read again after the racer's join");
    assert!(first.contains(&fire("racer", "call", OCC)), "the racer sorts first: in the page that fixed the group");

    // Fixed: a join now goes to the next generation, whatever its id sorts before.
    for t in late {
        deps.schedules.put(t, "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
        assert_eq!(gid(deps.schedules.get(t, "call").await.unwrap()), gen0.next_gen().id(), "{t}");
    }
    // The next tick fires the rest a thousand a page behind the cursor, and the next generation.
    let r = tick(&local, &deps, "2026-12-24T08:15:00Z").await;
    assert_eq!(r.fires, 130 + 1 - 40 + 2, "{r:?}");
    let want: BTreeSet<_> = everyone.iter().map(|id| fire(id, "call", OCC)).collect();
    assert_eq!(fires(&local, &queue).await, want, "each once (`fires` checks every key was queued once)");
    // Cleaned after the fire, the lease let go: every definition and membership of the fired
    // group; its head and cleaning record wait for the next visit, which finds none left.
    assert_eq!(r.schedules_cleaned, 131, "{r:?}");
    for id in &everyone {
        assert!(deps.schedules.list(id).await.unwrap().is_empty(), "{id}'s definition");
    }
    let mut waiting = left(&local, &p).await;
    waiting.sort();
    assert_eq!(waiting.len(), 2, "the head and the cleaning record: {waiting:?}");
    assert!(waiting[0].starts_with("sdue#") && waiting[1] == format!("shead#{}#{}", deps.cfg.job, gen0.id()));
    let state = deps.marks.read_strong(&deps.cfg.job).await.unwrap();
    assert_eq!(state.sched_next, Some(ms("2026-12-24T08:15:00Z") + 1), "the cleaning record's visit is due");
    let r = tick(&local, &deps, "2026-12-24T08:30:00Z").await;
    assert_eq!((r.fires, r.schedules_cleaned), (0, 0), "{r:?}");
    assert!(left(&local, &p).await.is_empty(), "retired: nothing left");
    assert_eq!(deps.marks.read_strong(&deps.cfg.job).await.unwrap().sched_next, None);
    // A join now starts the group afresh (its head gone), owed the instant it asked for.
    deps.schedules.put("t001", "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
    assert_eq!(gid(deps.schedules.get("t001", "call").await.unwrap()), gen0.id());
}
