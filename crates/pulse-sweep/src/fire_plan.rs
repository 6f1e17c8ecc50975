//! The decisions of a page of groups' due records, from what the sweep read (`fires` does the
//! reads and the writes): how many members a page reads, how each record's page of members ends
//! (the cursor moved on, the record replaced, or the group retired), what each member gets — fired
//! as [`member_fires`] says, or counted as failed when its item or its tenant does not read — and
//! what one transaction of pages writes. Pure.

use std::collections::HashMap;

use serde_json::{Map, Value};
use tickwork::batch::Batch;
use tickwork::schedules::{
    member_fires, own_successor, DueRecord, FirePlan, Group, Member, MemberFires, RecordEnd, Stage, Successor,
    TenantNow,
};
use tickwork::tenants::Tenant;

/// How long a record set aside waits before it is tried again.
pub const ISOLATED_RETRY_MS: i64 = 3_600_000;

/// Members a page reads at most: a thousand tenants' units make one batch item of a few tens of
/// kilobytes, so a page is one transaction of the fence, that item and the record's cursor.
pub const MEMBER_PAGE: usize = 1000;

/// Members a one-off group's first page reads ([`tickwork::schedules::ONE_OFF_FIRST_PAGE`]): a
/// group of fewer is retired with its members' memberships and definitions in that page's
/// transaction; a larger one is fixed (nothing fired), and its pages are a thousand members each.
pub const ONE_OFF_PAGE: usize = tickwork::schedules::ONE_OFF_FIRST_PAGE;

/// Units a page hands over at most (members × occurrences, a backlog caught up under `all`): at
/// the longest tenant ids a key allows (about 1 KB each in a batch item), their batch items stay
/// within a transaction's 4 MB.
pub const PAGE_UNITS: usize = 2_000;

/// A batch entry for one fire (the unit key's parts: name, then occurrence).
pub fn entry(name: &str, occurrence: &str) -> Map<String, Value> {
    Map::from_iter([
        ("name".to_string(), Value::String(name.to_string())),
        ("occurrence".to_string(), Value::String(occurrence.to_string())),
    ])
}

/// The members one page of `plan`'s fire reads: a one-off group's first page (its record open)
/// a few, every other page a thousand.
pub fn member_page(plan: &FirePlan, stage: Stage) -> usize {
    let cap = if plan.finished && stage == Stage::Open { ONE_OFF_PAGE } else { MEMBER_PAGE };
    (PAGE_UNITS / plan.fire.len().max(1)).clamp(1, cap)
}

/// A member's tenant as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TenantRead {
    Found(Tenant),
    /// Its item does not read: why.
    Unreadable(String),
}

/// What was read of one page of a record's members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PageRead {
    /// Each member, or its tenant and why its item does not read.
    pub(crate) members: Vec<Result<Member, (String, String)>>,
    /// More members follow.
    pub(crate) more: bool,
    /// The head's joins, read before the members when the group may be retired (a one-off
    /// done, or a group found empty).
    pub(crate) joins: Option<u64>,
    /// Found empty, and its head not there either: a record left over (see [`RecordEnd::Pass`]).
    pub(crate) headless: bool,
    /// A fixed group's head's count of members that left it, read before the page (its
    /// transaction is conditional on it: [`DueRecord::leaves_seen`]).
    pub(crate) leaves: Option<i64>,
}

/// One record and what its page does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) rec: DueRecord,
    pub(crate) action: Action,
}

/// A record's plan, and how its successor is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub(crate) plan: FirePlan,
    pub(crate) successor: Successor,
}

/// Fire a page of members as planned, or set the record aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    Page(Box<Planned>, PageRead),
    /// Its group cannot be planned (a zone the tz database no longer knows): counted as a failed
    /// unit and looked at again in [`ISOLATED_RETRY_MS`] (not at every tick, which would keep
    /// `sched_next` in the past and cost every idle tick a query).
    Isolate(String),
    /// A fired one-off group's cleaning record ([`Stage::Cleaning`]): whether its head is there
    /// and a member is left, and when its head may expire once the group is closed.
    Clean {
        /// Its head is there.
        head: bool,
        /// No member left.
        empty: bool,
        /// When no one can join its one-off any more (epoch seconds): its instant, the lateness
        /// bound and a day.
        expires_s: i64,
    },
}

/// How far after the sweep's instant a cleaning record moves at each visit: at once, so the
/// wake a minute on visits it again (its cleaning runs after the shards' fires, the lease let go).
pub const CLEAN_STEP_MS: i64 = 1;

/// The cleaning record of `rec`, a one-off group fixed and fired to its last member, at `now_ms`:
/// moved after the shard's cursor, out of the way of the shard's later records.
pub(crate) fn cleaning(rec: &DueRecord, now_ms: i64) -> DueRecord {
    DueRecord { pos_ms: now_ms + CLEAN_STEP_MS, cursor: None, plan_at: None, stage: Stage::Cleaning, ..rec.clone() }
}

/// How a page ends at `now_ms`: see [`RecordEnd`]. A group retired takes its record's own
/// successor with it (an attempt before may have put it). A one-off's first page with more
/// members to come fixes its group; its last fixed page leaves a cleaning record after the cursor.
pub(crate) fn page_end(rec: &DueRecord, p: &Planned, read: &PageRead, now_ms: i64) -> RecordEnd {
    let last = read.members.last().map(|m| match m {
        Ok(m) => m.tenant.clone(),
        Err((t, _)) => t.clone(),
    });
    let retire = |joins: u64| RecordEnd::Retire { joins, successor: own_successor(rec).ok().flatten() };
    let open_one_off = p.plan.finished && rec.stage == Stage::Open;
    match (read.more, last) {
        (true, Some(_)) if open_one_off => RecordEnd::Fix { head: read.joins.is_some() },
        (true, Some(last)) => RecordEnd::Advance(last),
        _ if p.plan.finished && rec.stage == Stage::Fixed => RecordEnd::Replaced(cleaning(rec, now_ms)),
        _ if p.plan.finished => read.joins.map_or(RecordEnd::Done(None), retire),
        (_, None) if rec.cursor.is_none() && read.headless => RecordEnd::Pass,
        (_, None) if rec.cursor.is_none() && read.joins.is_some() => read.joins.map_or(RecordEnd::Done(None), retire),
        _ => RecordEnd::Done(match &p.successor {
            Successor::Within { next, .. } => Some(next.clone()),
            Successor::Before(_) | Successor::None => None,
        }),
    }
}

/// The successor to put before the transaction in which `rec`'s page ends as `end`.
pub(crate) fn put_before(p: &Planned, end: &RecordEnd) -> Option<DueRecord> {
    match (&p.successor, end) {
        (Successor::Before(n), RecordEnd::Done(_)) => Some(n.clone()),
        _ => None,
    }
}

/// A record, how its page ends, and the finished one-off members that go with it (tenant, and
/// the definition's `ver` when it goes too: not for a member that did not read or whose tenant
/// did not, which leave their group reported, their definitions kept for an operator).
pub(crate) type End = (DueRecord, RecordEnd, Vec<(String, Option<u64>)>);

/// What one transaction of pages writes, and what it counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChunkPlan {
    /// The fires, as units of a batch.
    pub(crate) batch: Batch,
    /// Each record's end, and the finished one-off members that go with it.
    pub(crate) ends: Vec<End>,
    /// Successors put before the transaction (each depends on its record alone).
    pub(crate) before: Vec<DueRecord>,
    pub(crate) fired: u64,
    pub(crate) skipped: u64,
    pub(crate) dropped: u64,
    pub(crate) isolated: u64,
    /// When the chunk's earliest fire was due (at most `now_ms`): its queue items are ready
    /// since then, so the worker's `QueueLag` counts a schedule's wait from its instant, the
    /// sweep's part included, and an hour of lateness raises `QueueLagAlarm` however it came.
    pub(crate) ready_ms: i64,
    /// Why members were not fired (tenant, why), for the log.
    pub(crate) failures: Vec<(String, String)>,
    /// Members whose tenants are in another zone than their group's (tenant, zone), for the log:
    /// their schedules wait for a retarget.
    pub(crate) moved: Vec<(String, String)>,
    /// Fired one-off groups whose members and definitions are to be cleaned once this is written.
    pub(crate) cleaning: Vec<Group>,
    /// Definitions of a fixed group's members passed over as moved or unreadable (group, tenant,
    /// `ver` when its member read): unlinked from it before the transaction, so that its cleaning
    /// keeps them and no writer takes them for fired.
    pub(crate) unlink: Vec<(Group, String, Option<u64>)>,
}

/// The writes and counts of `segs` at `now_ms`, their members' tenants read as `tenants` (an id
/// absent: the tenant is gone).
pub(crate) fn chunk_plan(segs: &[Segment], tenants: &HashMap<String, TenantRead>, now_ms: i64) -> ChunkPlan {
    let mut c = ChunkPlan { batch: Batch::new(Map::new()), ready_ms: now_ms, ..Default::default() };
    for Segment { rec, action } in segs {
        let (plan, read) = match action {
            Action::Isolate(why) => {
                c.isolated += 1;
                c.failures.push((format!("group of `{}` in {}", rec.group.name, rec.group.zone), why.clone()));
                // Its due instant (its own successor is reckoned from it) and its plan's instant
                // kept: an hour on it fires what it owed now, not a plan of its own then.
                let aside = DueRecord {
                    pos_ms: now_ms + ISOLATED_RETRY_MS,
                    plan_at: Some(rec.plan_at.unwrap_or(now_ms)),
                    ..rec.clone()
                };
                c.ends.push((rec.clone(), RecordEnd::Done(Some(aside)), Vec::new()));
                continue;
            }
            Action::Clean { head, empty, expires_s } => {
                let end = match (empty, head) {
                    (true, true) => RecordEnd::Close { expires_s: *expires_s },
                    (true, false) => RecordEnd::Pass,
                    (false, _) => {
                        c.cleaning.push(rec.group.clone());
                        RecordEnd::Replaced(cleaning(rec, now_ms))
                    }
                };
                c.ends.push((rec.clone(), end, Vec::new()));
                continue;
            }
            Action::Page(p, read) => (p, read),
        };
        let end = page_end(rec, plan, read, now_ms);
        // A fixed group's page is conditional on the members that left it as read before it.
        let rec = &DueRecord { leaves_seen: read.leaves, ..rec.clone() };
        // A group fixed fires nothing in that transaction: fixed, its pages are read from its
        // start (the sweep fixes a group in a transaction of its own, the joins read just before).
        if matches!(end, RecordEnd::Fix { .. }) {
            c.ends.push((rec.clone(), end, Vec::new()));
            continue;
        }
        // A one-off retired in this page's transaction takes its members and definitions with it;
        // a fixed one leaves them to its cleaning, but for those passed over as moved or
        // unreadable, whose definitions are unlinked from it (kept, for a retarget or an operator).
        let retires = plan.plan.finished && matches!(end, RecordEnd::Retire { .. });
        let fixed = rec.stage == Stage::Fixed;
        if matches!(&end, RecordEnd::Replaced(n) if n.stage == Stage::Cleaning) {
            c.cleaning.push(rec.group.clone());
        }
        let (planned, plan) = (plan, &plan.plan);
        let mut owed: Vec<Vec<String>> = vec![Vec::new(); plan.fire.len()];
        let mut finished = Vec::new();
        for m in &read.members {
            let m = match m {
                Ok(m) => m,
                Err((tenant, why)) => {
                    c.isolated += 1;
                    c.failures.push((tenant.clone(), format!("member unreadable: {why}")));
                    if retires {
                        finished.push((tenant.clone(), None));
                    }
                    if fixed {
                        c.unlink.push((rec.group.clone(), tenant.clone(), None));
                    }
                    continue;
                }
            };
            let t = match tenants.get(&m.tenant) {
                Some(TenantRead::Unreadable(why)) => {
                    c.isolated += 1;
                    c.failures.push((m.tenant.clone(), format!("tenant unreadable: {why}")));
                    if retires {
                        finished.push((m.tenant.clone(), None));
                    }
                    if fixed {
                        c.unlink.push((rec.group.clone(), m.tenant.clone(), Some(m.ver)));
                    }
                    continue;
                }
                Some(TenantRead::Found(t)) => Some(TenantNow { zone: &t.zone, active: t.active }),
                None => None,
            };
            let fate = member_fires(&plan.fire, m, t, &rec.group);
            if retires || fixed {
                // A moved tenant's local one-off keeps its definition: its retarget owes it in the
                // new zone (or removes it, if its instant there has passed).
                let keeps_def = matches!(fate, MemberFires::Unreadable(_) | MemberFires::Moved(_));
                if retires {
                    finished.push((m.tenant.clone(), (!keeps_def).then_some(m.ver)));
                } else if fixed && keeps_def {
                    c.unlink.push((rec.group.clone(), m.tenant.clone(), Some(m.ver)));
                }
            }
            match fate {
                MemberFires::Fire(ix) => {
                    c.skipped += u64::from(plan.skipped);
                    for i in ix {
                        owed[i].push(m.tenant.clone());
                        // Its instant plus the spread, and never before the schedule was asked for
                        // (a one-off added after its instant).
                        c.ready_ms = c.ready_ms.min((plan.fire[i].at_ms + rec.group.offset_ms).max(m.since_ms));
                    }
                }
                MemberFires::Passed(n) => c.skipped += u64::from(n + plan.skipped),
                MemberFires::Moved(n) => {
                    c.skipped += u64::from(n + plan.skipped);
                    if let Some(t) = t {
                        c.moved.push((m.tenant.clone(), t.zone.to_string()));
                    }
                }
                MemberFires::Gone => c.dropped += 1,
                MemberFires::Unreadable(why) => {
                    c.isolated += 1;
                    c.failures.push((m.tenant.clone(), format!("tenant's zone unreadable: {why}")));
                }
            }
        }
        for (o, tenants) in plan.fire.iter().zip(owed) {
            c.fired += tenants.len() as u64;
            if !tenants.is_empty() {
                c.batch.add_with(vec![entry(&rec.group.name, &o.key)], rec.group.unit_fields(), tenants);
            }
        }
        c.before.extend(put_before(planned, &end));
        c.ends.push((rec.clone(), end, finished));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::{CatchUp, Policy};
    use tickwork::schedules::{first_record, member_of, plan, successor, Dst, Schedule, ScheduleDef};

    const POLICY: Policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 86_400_000, interval_ms: 900_000 };
    /// The sweep's instant in the tests of how a page ends (only a cleaning record takes it).
    const NOW: i64 = 1_800_000_000_000;

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn sched(tenant: &str, name: &str, spec: &str, since: &str) -> Schedule {
        Schedule {
            tenant: tenant.into(),
            def: ScheduleDef::new(name, spec.parse().unwrap(), 0, Dst::default()).unwrap(),
            paused: false,
            ver: 7,
            since_ms: ms(since),
            group: None,
        }
    }

    fn berlin(id: &str) -> (String, TenantRead) {
        (id.to_string(), TenantRead::Found(Tenant::new(id, "Europe/Berlin")))
    }

    fn c_rec(r: &DueRecord) -> DueRecord {
        cleaning(r, NOW - 60_000)
    }

    fn planned(rec: &DueRecord, now: i64) -> Planned {
        let plan = plan(rec, now, &POLICY).unwrap();
        let successor = successor(rec, &plan, now).unwrap();
        Planned { plan, successor }
    }

    #[test]
    fn a_page_fires_each_member_what_it_is_owed_and_counts_the_rest() {
        let since = "2026-12-01T10:00:00Z";
        let members: Vec<Member> = ["ok", "gone", "badtenant", "asleep", "late"]
            .iter()
            .map(|t| member_of(&sched(t, "n", "daily 08:00", since), "Europe/Berlin").unwrap().1)
            .collect();
        let (g, m0) = member_of(&sched("ok", "n", "daily 08:00", since), "Europe/Berlin").unwrap();
        let rec = first_record(&g, m0.owed_ms).unwrap().unwrap();
        let now = ms("2026-12-02T07:00:30Z");
        let p = planned(&rec, now);
        let mut read: Vec<Result<Member, (String, String)>> = members.iter().cloned().map(Ok).collect();
        // Joined after the occurrence: not owed it.
        read[4] = Ok(Member { owed_ms: now, since_ms: now, ..members[4].clone() });
        read.push(Err(("broken".into(), "no ver".into())));
        let mut asleep = Tenant::new("asleep", "Europe/Berlin");
        asleep.active = false;
        let tenants: HashMap<String, TenantRead> = [
            berlin("ok"),
            berlin("late"),
            ("badtenant".into(), TenantRead::Unreadable("no zone".into())),
            ("asleep".into(), TenantRead::Found(asleep)),
        ]
        .into_iter()
        .collect();
        let seg = Segment {
            rec: rec.clone(),
            action: Action::Page(Box::new(p.clone()), PageRead { members: read, ..Default::default() }),
        };
        let c = chunk_plan(&[seg], &tenants, now);
        let keys: Vec<String> = c.batch.units("sched").into_iter().map(|u| u.key).collect();
        assert_eq!(keys, ["sched#ok#n#2026-12-02T08:00:00+01:00"]);
        assert_eq!((c.fired, c.dropped, c.isolated, c.skipped), (1, 1, 2, 1), "gone; two unreadable; suspended");
        // Its successor, tomorrow's 08:00, depends on the record alone: put before the
        // transaction, which moves the cursor past the record and writes nothing of it.
        assert_eq!(c.ends, [(rec.clone(), RecordEnd::Done(None), vec![])]);
        assert_eq!(c.before.len(), 1);
        assert_eq!(c.before[0].due_ms, ms("2026-12-03T07:00:00Z"));
        assert_eq!(c.ready_ms, ms("2026-12-02T07:00:00Z"), "ready since its instant");
    }

    #[test]
    fn a_backlog_puts_its_successor_in_the_transaction_after_the_sweeps_position() {
        let (g, m) = member_of(&sched("a", "n", "daily 08:00", "2026-12-01T10:00:00Z"), "Europe/Berlin").unwrap();
        let rec = first_record(&g, m.owed_ms).unwrap().unwrap();
        // A day and a half late: the 2nd passed over (beyond the day's lateness), the 3rd fired,
        // and the successor (the 4th) is the plan's own, not the record's (the 3rd).
        let now = ms("2026-12-03T07:30:00Z");
        let p = planned(&rec, now);
        assert_eq!((p.plan.fire.len(), p.plan.skipped), (1, 1));
        let Successor::Within { next, check } = &p.successor else { panic!("{:?}", p.successor) };
        assert_eq!((next.due_ms, check.due_ms), (ms("2026-12-04T07:00:00Z"), ms("2026-12-03T07:00:00Z")));
        let read = PageRead { members: vec![Ok(m.clone())], ..Default::default() };
        assert_eq!(page_end(&rec, &p, &read, NOW), RecordEnd::Done(Some(next.clone())));
        assert_eq!(put_before(&p, &page_end(&rec, &p, &read, NOW)), None);
        // A slice of a long backlog: its successor is due already, positioned after now.
        let (g, m) = member_of(&sched("a", "n", "cron * * * * *", "2026-12-01T00:00:00Z"), "Europe/Berlin").unwrap();
        let rec = first_record(&g, m.owed_ms).unwrap().unwrap();
        let now = ms("2026-12-01T12:00:00Z");
        let Successor::Within { next, .. } = planned(&rec, now).successor else { panic!() };
        assert!(next.due_ms < now && next.pos_ms == now + 1, "{next:?}");
    }

    #[test]
    fn a_page_ends_by_moving_on_finishing_or_retiring_its_record() {
        let since = "2026-12-24T08:30:00Z";
        let once = sched("a", "call", "at 2026-12-24T09:00", since);
        let (g, m) = member_of(&once, "Europe/Berlin").unwrap();
        let rec = first_record(&g, m.owed_ms).unwrap().unwrap();
        let p = planned(&rec, ms("2026-12-24T08:31:00Z"));
        assert!(p.plan.finished);
        let read = |n: usize, more: bool, joins: Option<u64>| PageRead {
            members: (0..n).map(|i| Ok(Member { tenant: format!("t{i}"), ..m.clone() })).collect(),
            more,
            joins,
            headless: false,
            leaves: None,
        };
        // An open one-off's first page, more to come: the group fixed at the joins read before it,
        // nothing fired with it (fixed, its pages are read from its start).
        assert_eq!(page_end(&rec, &p, &read(3, true, Some(4)), NOW), RecordEnd::Fix { head: true });
        let seg = Segment { rec: rec.clone(), action: Action::Page(Box::new(p.clone()), read(3, true, Some(4))) };
        let c = chunk_plan(&[seg], &[berlin("t0"), berlin("t1"), berlin("t2")].into_iter().collect(), NOW);
        assert_eq!((c.fired, c.ends[0].1.clone()), (0, RecordEnd::Fix { head: true }));
        // Fixed: a full page moves the cursor on; the last leaves a cleaning record after the
        // sweep's instant (its members and definitions are deleted after the fire).
        let fixed = DueRecord { stage: Stage::Fixed, cursor: Some("t2".into()), ..rec.clone() };
        assert_eq!(page_end(&fixed, &p, &read(3, true, None), NOW), RecordEnd::Advance("t2".into()));
        let RecordEnd::Replaced(c) = page_end(&fixed, &p, &read(3, false, None), NOW) else { panic!() };
        assert_eq!((c.stage, c.pos_ms, c.cursor.clone(), c.due_ms), (Stage::Cleaning, NOW + 1, None, rec.due_ms));
        let seg = Segment { rec: fixed.clone(), action: Action::Page(Box::new(p.clone()), read(3, false, None)) };
        // One of them moved to New York (not retargeted yet): passed over, its definition unlinked
        // from the group so that the cleaning keeps it for the retarget.
        let mut ts: HashMap<String, TenantRead> = [berlin("t0"), berlin("t1"), berlin("t2")].into_iter().collect();
        ts.insert("t1".into(), TenantRead::Found(Tenant::new("t1", "America/New_York")));
        let c = chunk_plan(&[seg], &ts, NOW);
        assert_eq!((c.fired, c.ends[0].2.len(), c.cleaning.len()), (2, 0, 1), "fired; cleaned after, not in it");
        assert_eq!(c.unlink, [(rec.group.clone(), "t1".to_string(), Some(7))]);
        // The cleaning record's visits: members left, moved on and cleaned after; none, closed
        // (its head kept, firing, to expire when no one can join its one-off).
        let clean = |head, empty| Segment { rec: c_rec(&fixed), action: Action::Clean { head, empty, expires_s: 9 } };
        let c = chunk_plan(&[clean(true, false)], &HashMap::new(), NOW);
        assert!(matches!(&c.ends[0].1, RecordEnd::Replaced(n) if n.pos_ms == NOW + 1));
        assert_eq!((c.cleaning.len(), c.fired), (1, 0));
        let c = chunk_plan(&[clean(true, true)], &HashMap::new(), NOW);
        assert_eq!(c.ends[0].1, RecordEnd::Close { expires_s: 9 });
        assert_eq!(chunk_plan(&[clean(false, true)], &HashMap::new(), NOW).ends[0].1, RecordEnd::Pass);
        // The last page of an open one-off (its only one): the head goes at the joins read before
        // the members, its members and definitions with it.
        assert_eq!(page_end(&rec, &p, &read(3, false, Some(4)), NOW), RecordEnd::Retire { joins: 4, successor: None });
        let seg = Segment { rec: rec.clone(), action: Action::Page(Box::new(p.clone()), read(2, false, Some(4))) };
        let mut tenants: HashMap<String, TenantRead> = [berlin("t0"), berlin("t1")].into_iter().collect();
        let c = chunk_plan(std::slice::from_ref(&seg), &tenants, ms("2026-12-24T08:31:00Z"));
        assert_eq!(
            c.ends[0].2,
            [("t0".to_string(), Some(7)), ("t1".to_string(), Some(7))],
            "their definitions go at their version"
        );
        // A tenant moved to New York and not retargeted yet: its membership goes with the group,
        // its definition stays for the retarget (which owes it in the new zone).
        tenants.insert("t1".into(), TenantRead::Found(Tenant::new("t1", "America/New_York")));
        let c = chunk_plan(&[seg], &tenants, ms("2026-12-24T08:31:00Z"));
        assert_eq!(c.ends[0].2, [("t0".to_string(), Some(7)), ("t1".to_string(), None)]);
        assert_eq!(c.ready_ms, ms(since), "a one-off added after its instant is expected from its adding");
        // A recurring group: done; found empty at its first page: retired, with the successor an
        // attempt before may have put.
        let daily = sched("b", "nudge", "daily 09:00", "2026-12-01T10:00:00Z");
        let (g, m) = member_of(&daily, "Europe/Berlin").unwrap();
        let rec = first_record(&g, m.owed_ms).unwrap().unwrap();
        let p = planned(&rec, rec.due_ms);
        assert_eq!(page_end(&rec, &p, &read(1, false, None), NOW), RecordEnd::Done(None));
        let own = tickwork::schedules::own_successor(&rec).unwrap();
        assert_eq!(page_end(&rec, &p, &read(0, false, Some(9)), NOW), RecordEnd::Retire { joins: 9, successor: own });
        let resumed = DueRecord { cursor: Some("t5".into()), ..rec.clone() };
        assert_eq!(
            page_end(&resumed, &p, &read(0, false, None), NOW),
            RecordEnd::Done(None),
            "the end of a paged group"
        );
        // Empty, and no head: a record left over is passed, and nothing follows it.
        let headless = PageRead { headless: true, ..read(0, false, None) };
        assert_eq!(page_end(&rec, &p, &headless, NOW), RecordEnd::Pass);
        assert_eq!(put_before(&p, &RecordEnd::Pass), None);
        // A group that cannot be planned is set an hour aside.
        let seg = Segment { rec: rec.clone(), action: Action::Isolate("no zone".into()) };
        let c = chunk_plan(&[seg], &HashMap::new(), rec.due_ms);
        match &c.ends[0].1 {
            RecordEnd::Done(Some(n)) => {
                assert_eq!((n.pos_ms, n.due_ms), (rec.due_ms + ISOLATED_RETRY_MS, rec.due_ms));
                assert_eq!(n.plan_at, Some(rec.due_ms), "planned then as now");
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_page_reads_fewer_members_the_more_occurrences_it_fires() {
        let p = |n: usize| FirePlan {
            fire: (0..n).map(|i| tickwork::schedules::Occurrence { at_ms: i as i64, key: i.to_string() }).collect(),
            skipped: 0,
            next: None,
            finished: false,
        };
        assert_eq!(member_page(&p(1), Stage::Open), MEMBER_PAGE);
        let once = FirePlan { finished: true, ..p(1) };
        assert_eq!(member_page(&once, Stage::Open), ONE_OFF_PAGE, "an open one-off's first page");
        assert_eq!(member_page(&once, Stage::Fixed), MEMBER_PAGE, "a fixed one-off's pages");
        assert_eq!(member_page(&p(500), Stage::Open), 4);
        assert_eq!(member_page(&p(0), Stage::Open), MEMBER_PAGE);
    }
}
