//! A one-off campaign larger than its first page (a million tenants' `at 2026-12-24T09:00`; here
//! 130): fixed before it fires (the head marked `firing` at the joins read just before), its
//! members go out a thousand a transaction behind the record's cursor, and its members and
//! definitions are cleaned after the fire. A member joining while the group is fixed refuses the
//! fix and is fired with the group; one joining after it (whatever its id sorts before) goes to
//! another generation of the group and is fired there; a member moved before the fire is owed in
//! its new zone, one moved after it is not fired again: each once, and nothing left.

use std::collections::BTreeSet;

use tickwork::budget::Unlimited;
use tickwork::schedules::{Group, Schedule};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_tests::faults::{Fault, Faults, Planned, Rates};
use tickwork_tests::{ms, unique, Local};

use crate::binary::{ok, tickctl};
use crate::schedules::{def, fire, fires, stalled_tick, sweep, tick, POLICY};

const AT: &str = "at 2026-12-24T09:00";
const OCC: &str = "2026-12-24T09:00:00+01:00";

/// The items a campaign leaves in the control table (shard cursors, and a closed campaign's head
/// set to expire, aside): keys by prefix.
async fn left(local: &Local, p: &str) -> Vec<String> {
    let control = tickwork_sim::scan_all(&local.db, &format!("{p}-control")).await.unwrap();
    control
        .iter()
        .filter(|i| tickwork::schema::get_s(i, "sk") != Some("~"))
        .filter(|i| !i.contains_key(tickwork::schema::TTL))
        .filter_map(|i| tickwork::schema::get_s(i, "pk"))
        .filter(|pk| ["smem#", "shead#", "sdue#", "sched#"].iter().any(|x| pk.starts_with(x)))
        .map(str::to_string)
        .collect()
}

/// Group `gid`'s head, if any.
async fn head(local: &Local, p: &str, job: &str, gid: &str) -> Option<tickwork::item::Item> {
    let db = local.fresh_db();
    db.get_strong(&format!("{p}-control"), tickwork::schema::key(format!("shead#{job}#{gid}"), "-")).await.unwrap()
}

/// A provisioned stack (tables prefixed `p`), its sweep and queue: tenants `members` and `others`
/// in Berlin added at 06:00Z and first seen by the 06:15Z and 06:30Z ticks (so the 08:00Z tick's
/// transactions are the campaign's), `members` sharing the campaign's one-off.
async fn campaign(local: &Local, p: &str, members: &[String], others: &[&str]) -> (pulse_sweep::Deps, String) {
    ok(&tickctl(local, p, &["provision"]));
    let (deps, queue) = sweep(local, p, None);
    local.clock.set(ms("2026-12-24T06:00:00Z"));
    let ids = members.iter().map(String::as_str).chain(others.iter().copied());
    let tenants: Vec<Tenant> = ids.map(|id| Tenant::new(id, "Europe/Berlin")).collect();
    pulse_sweep::add_tenants(&deps, &tenants).await.unwrap();
    let rows = members.iter().map(|id| (id.clone(), "Europe/Berlin".to_string(), def("call", AT))).collect();
    deps.schedules.put_many(rows, &POLICY).await.unwrap();
    tick(local, &deps, "2026-12-24T06:15:00Z").await;
    tick(local, &deps, "2026-12-24T06:30:00Z").await;
    (deps, queue)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_is_fixed_before_it_fires_and_a_join_a_move_or_a_retarget_during_it_fires_once() {
    let local = Local::new().await;
    let p = unique("campaign");
    let ids: Vec<String> = (0..130).map(|i| format!("t{i:03}")).collect();
    // A racer joins while the group is being fixed; two join after it, one sorting before every
    // member, one after; one after the group is closed.
    let late = ["a-early", "z-late"];
    let everyone: Vec<&str> = ids.iter().map(String::as_str).chain(["racer"]).chain(late).collect();
    let (deps, queue) = campaign(&local, &p, &ids, &["racer", "a-early", "z-late", "m-after"]).await;
    let gen0 = Group::of("t000", &def("call", AT), "Europe/Berlin");
    let job = deps.cfg.job.clone();
    let gid = |s: Option<Schedule>| s.and_then(|s| s.group);
    // `t005` moved to New York, its schedules not yet retargeted: its local one-off is passed over
    // here and kept for the retarget.
    assert!(deps.tenants.move_zone("t005", "America/New_York").await.unwrap());

    // The fix's transaction stalls; the racer joins meanwhile. The fix, refused, is read again
    // and made at once; the first page of fires lands, and the process dies after it.
    let faults = Faults::new();
    faults.plan(Planned { op: Some("TransactWriteItems"), nth: 1, fault: Fault::Stall });
    faults.plan(Planned { op: Some("TransactWriteItems"), nth: 3, fault: Fault::CrashAfter });
    let run = stalled_tick(&local, &p, &faults, "2026-12-24T08:00:00Z").await;
    deps.schedules.put("racer", "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
    assert_eq!(gid(deps.schedules.get("racer", "call").await.unwrap()), Some(gen0.id()), "joined before the fix");
    faults.release();
    assert!(run.await.unwrap().is_err(), "the crash stops the tick");
    assert!(faults.crashed());
    let first = fires(&local, &queue).await;
    assert_eq!(first.len(), 130, "the racer, and every member but the one moved");
    assert!(first.contains(&fire("racer", "call", OCC)) && !first.contains(&fire("t005", "call", OCC)));
    assert_eq!(gid(deps.schedules.get("t005", "call").await.unwrap()), None, "unlinked from the fired group");

    // Fixed: a join now goes to the generation of its minute, whatever its id sorts before.
    for t in late {
        deps.schedules.put(t, "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
        assert_eq!(gid(deps.schedules.get(t, "call").await.unwrap()), Some(gen0.with_gen(1).id()), "{t}");
    }
    // A fired member's tenant moves before the cleaning reaches it: its one-off has fired, and
    // goes (owed in New York, it would fire again); the one passed over is owed there.
    for t in ["t010", "t005"] {
        deps.tenants.move_zone(t, "America/New_York").await.unwrap();
        deps.schedules.retarget(t, "America/New_York").await.unwrap();
    }
    assert!(deps.schedules.get("t010", "call").await.unwrap().is_none(), "fired, then moved: removed");
    let moved = deps.schedules.get("t005", "call").await.unwrap().unwrap();
    assert_ne!(moved.group.as_deref().map(Group::base_id), Some(gen0.id().as_str()), "in New York's group");

    // The next tick: the campaign's cleaning record visited (every member but t010, removed, and
    // t005's membership; its definition, in New York's group now, stays) and the next generation.
    let r = tick(&local, &deps, "2026-12-24T08:15:00Z").await;
    assert_eq!((r.fires, r.schedules_cleaned), (2, 130), "{r:?}");
    for id in everyone.iter().filter(|t| **t != "t005") {
        assert!(deps.schedules.list(id).await.unwrap().is_empty(), "{id}'s definition");
    }
    let h = head(&local, &p, &job, &gen0.id()).await.expect("the fired group's head, firing");
    assert!(h.contains_key("firing") && !h.contains_key("ttl"), "{h:?}");
    // The visit after finds none left and closes it: the record goes, the head stays firing
    // until no one can join the one-off (its instant, the lateness bound and a day), then expires.
    tick(&local, &deps, "2026-12-24T08:30:00Z").await;
    let h = head(&local, &p, &job, &gen0.id()).await.expect("kept to expire");
    let expires = tickwork::schema::get_i64(&h, "ttl").unwrap();
    assert_eq!(expires * 1000, ms("2026-12-24T08:00:00Z") + deps.cfg.policy.max_lateness_ms + 86_400_000);
    let stray: Vec<String> = left(&local, &p).await.into_iter().filter(|k| k.contains(&gen0.id())).collect();
    assert!(stray.is_empty(), "nothing of the closed generation but its head: {stray:?}");
    // A join now goes to the generation of its minute (the closed one is never made again).
    deps.schedules.put("m-after", "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
    assert_eq!(gid(deps.schedules.get("m-after", "call").await.unwrap()), Some(gen0.with_gen(31).id()));
    // t005's one-off at 09:00 in New York.
    for at in ["2026-12-24T08:45:00Z", "2026-12-24T14:00:00Z"] {
        tick(&local, &deps, at).await;
    }
    let want: BTreeSet<_> = everyone
        .iter()
        .filter(|t| **t != "t005")
        .map(|id| fire(id, "call", OCC))
        .chain([fire("t005", "call", "2026-12-24T09:00:00-05:00"), fire("m-after", "call", OCC)])
        .collect();
    assert_eq!(fires(&local, &queue).await, want, "each once (`fires` checks every key was queued once)");
}

/// A campaign whose head was lost (an item deleted by hand): fixed all the same, its head put
/// firing, so no join makes a second record of it; every member fired once.
#[tokio::test]
async fn a_campaign_whose_head_was_lost_is_fixed_all_the_same_and_fires_each_member_once() {
    let local = Local::new().await;
    let p = unique("campaignh");
    let ids: Vec<String> = (0..60).map(|i| format!("h{i:02}")).collect();
    let (deps, queue) = campaign(&local, &p, &ids, &[]).await;
    let gen0 = Group::of("h00", &def("call", AT), "Europe/Berlin");
    let key = tickwork::schema::key(format!("shead#{}#{}", deps.cfg.job, gen0.id()), "-");
    let db = local.fresh_db();
    db.client().delete_item().table_name(format!("{p}-control")).set_key(Some(key)).send().await.unwrap();
    let r = tick(&local, &deps, "2026-12-24T08:00:00Z").await;
    assert_eq!(r.fires, 60, "{r:?}");
    let h = head(&local, &p, &deps.cfg.job, &gen0.id()).await.expect("put again, firing");
    assert!(h.contains_key("firing"));
    tick(&local, &deps, "2026-12-24T08:15:00Z").await;
    let want: BTreeSet<_> = ids.iter().map(|id| fire(id, "call", OCC)).collect();
    assert_eq!(fires(&local, &queue).await, want);
    assert!(left(&local, &p).await.is_empty(), "{:?}", left(&local, &p).await);
}

/// A member whose tenant moves while its page of a fixed campaign is being written (the page
/// read it in Berlin): its retarget counts its leaving on the head, the page's transaction is
/// refused and read again without it, and it fires once, in New York. Without the count, it fired
/// in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_moved_while_its_page_is_written_fires_once_where_it_went() {
    let local = Local::new().await;
    let p = unique("campaignm");
    let ids: Vec<String> = (0..60).map(|i| format!("v{i:02}")).collect();
    let (deps, queue) = campaign(&local, &p, &ids, &[]).await;
    // The fix (the tick's first transaction) lands; its page's (the second) stalls.
    let faults = Faults::new();
    faults.plan(Planned { op: Some("TransactWriteItems"), nth: 2, fault: Fault::Stall });
    let run = stalled_tick(&local, &p, &faults, "2026-12-24T08:00:00Z").await;
    deps.tenants.move_zone("v50", "America/New_York").await.unwrap();
    assert_eq!(deps.schedules.retarget("v50", "America/New_York").await.unwrap(), 1, "moved: not fired yet");
    faults.release();
    let r = run.await.unwrap().unwrap();
    assert_eq!(r.fires, 59, "{r:?}");
    for at in ["2026-12-24T08:15:00Z", "2026-12-24T14:00:00Z"] {
        tick(&local, &deps, at).await;
    }
    let want: BTreeSet<_> = ids
        .iter()
        .filter(|id| *id != "v50")
        .map(|id| fire(id, "call", OCC))
        .chain([fire("v50", "call", "2026-12-24T09:00:00-05:00")])
        .collect();
    assert_eq!(fires(&local, &queue).await, want);
}

/// A campaign of 1,100 (a first page of 40, a page of a thousand, one of 60) fired by a sweep
/// whose every tick is a process with random faults (throttles, conflicts, unprocessed batch
/// items, lost answers, and a crash before or after a random call), a tick every quarter hour,
/// with members joining between ticks: every member, and every joiner, handed over exactly once,
/// and once the faults stop, nothing left (definitions, members, heads, records). Seeds from
/// `CAMPAIGN_SEEDS` (1 by default, `make test`'s time: about 50 s a seed here).
#[tokio::test]
async fn a_campaign_under_random_faults_and_joins_fires_each_member_once_and_leaves_nothing() {
    let local = Local::new().await;
    let seeds: u64 = std::env::var("CAMPAIGN_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    for seed in 0..seeds {
        let mut rng = fastrand::Rng::with_seed(seed);
        let p = unique("campaignf");
        let ids: Vec<String> = (0..1_100).map(|i| format!("m{i:04}")).collect();
        let late: Vec<String> = (0..20).map(|i| format!("{}{i:02}", ["a", "n", "z"][i % 3])).collect();
        let others: Vec<&str> = late.iter().map(String::as_str).collect();
        let (deps, queue) = campaign(&local, &p, &ids, &others).await;
        let mut joined: Vec<String> = Vec::new();
        let (mut at, mut crashes) = (ms("2026-12-24T08:00:00Z"), 0);
        for round in 0..40 {
            // Joins between ticks (never the same tenant twice: a second add after its definition
            // was cleaned is a new schedule, owed again).
            for _ in 0..rng.usize(0..3) {
                if let Some(t) = late.iter().find(|t| !joined.contains(t)).cloned() {
                    deps.schedules.put(&t, "Europe/Berlin", def("call", AT), &POLICY).await.unwrap();
                    joined.push(t);
                }
            }
            let faulty = round < 24;
            let faults = Faults::new();
            if faulty {
                let rates = Rates { throttle: 100, txn: 100, unprocessed: 200, s3_error: 0, lose_answer: 30 };
                faults.random(rng.u64(..), rates);
                if rng.f64() < 0.3 {
                    let fault = if rng.bool() { Fault::CrashBefore } else { Fault::CrashAfter };
                    faults.plan(Planned { op: None, nth: rng.u64(1..=60), fault });
                }
            }
            let (process, _) = sweep(&local, &p, Some(&faults));
            local.clock.set(at);
            tickwork_tests::streams::settle(&local, &deps).await;
            let t = Tick::parse(&Tick::envelope(at, false)).unwrap();
            match Box::pin(pulse_sweep::run(&process, &t, &Unlimited, &unique("w"))).await {
                Ok(_) => {}
                Err(e) => {
                    let e = format!("{e:#}");
                    let explained = ["throttl", "injected", "after retries"].iter().any(|x| e.contains(x));
                    assert!(faults.crashed() || explained, "seed {seed}: a failure no fault explains: {e}");
                    crashes += 1;
                }
            }
            at += 900_000;
            if !faulty && left(&local, &p).await.is_empty() {
                break;
            }
        }
        let want: BTreeSet<_> = ids.iter().chain(&joined).map(|id| fire(id, "call", OCC)).collect();
        assert_eq!(fires(&local, &queue).await, want, "seed {seed}: each once ({crashes} ticks crashed)");
        assert!(left(&local, &p).await.is_empty(), "seed {seed}: {:?}", left(&local, &p).await);
        assert_eq!(deps.marks.read_strong(&deps.cfg.job).await.unwrap().sched_next, None, "seed {seed}");
        eprintln!("seed {seed}: {} members and {} joiners once, {crashes} ticks crashed", ids.len(), joined.len());
    }
}
