//! What the sweep does with a group's due record, decided from the record and, for each member,
//! from the member and its tenant as read now: fire which occurrences, pass over how many, and what
//! record comes next. Pure; the sweep does the reads and the writes.
//!
//! ## The rules
//! - Owed by the group: occurrences after the record's `after`, due (instant plus the group's
//!   spread offset) by now, in the group's zone; the catch-up policy picks which fire.
//! - Owed by a member: those after the member's `owed` (when its schedule was added or changed;
//!   a one-off in the recent past is owed its instant).
//! - A member whose tenant is gone fires nothing (its removal deletes it). A tenant suspended, or
//!   moved to another zone (its schedules are moving to that zone's groups), passes them over.
//! - The next record: the first occurrence after what was handled. A one-off group that has fired
//!   (or was passed over) has none: its members and their definitions go too.

use crate::calendar::{zone, CatchUp, Policy};
use crate::clock::Millis;

use super::occurrence::{between, catch_up, next_after, spread_ms, Occurrence};
use super::record::{DueRecord, Group, Member, Schedule};
use super::spec::{Spec, SpecError};

/// Fires one record hands over at one tick at most (a backlog under `all` continues at the next).
pub const MAX_FIRES_PER_RECORD: usize = 500;

/// Where a member's tenant stands, as the sweep read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantNow<'a> {
    /// Its zone.
    pub zone: &'a str,
    /// Active (not suspended).
    pub active: bool,
}

/// What a group's due record fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirePlan {
    /// Occurrences to hand to the members owed them, oldest first.
    pub fire: Vec<Occurrence>,
    /// Occurrences the catch-up policy passed over.
    pub skipped: u32,
    /// The record that replaces this one.
    pub next: Option<DueRecord>,
    /// A one-off group that is done: its head, members and their definitions are deleted.
    pub finished: bool,
}

/// What one member gets of a group's fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberFires {
    /// These of the plan's occurrences (indexes into [`FirePlan::fire`]).
    Fire(Vec<usize>),
    /// Its tenant is suspended: this many owed occurrences are passed over.
    Passed(u32),
    /// Its tenant is in another zone now (its schedules move to that zone's groups when
    /// retargeted): this many owed occurrences are passed over here.
    Moved(u32),
    /// Its tenant is gone.
    Gone,
    /// Its tenant's zone is not one the tz database knows (written around the library's
    /// checks): nothing can be decided, and it is reported.
    Unreadable(String),
}

/// The group and member of an active schedule `s` in `zone` (what the store writes).
pub fn member_of(s: &Schedule, zone_name: &str) -> Result<(Group, Member), SpecError> {
    let tz = zone(zone_name).map_err(|e| SpecError(e.0))?;
    let owed_ms = owed_since(s, &tz)?;
    Ok((
        Group::of(&s.tenant, &s.def, zone_name),
        Member { tenant: s.tenant.clone(), ver: s.ver, since_ms: s.since_ms, owed_ms },
    ))
}

/// The group and member of a resumed or retargeted schedule `s` in `zone`: owed strictly after
/// its `since` (the resume or the move). The one-off's grace [`member_of`] gives is the add's
/// alone: what came due while it was paused, or before its tenant moved, is not fired late.
pub fn member_resumed(s: &Schedule, zone_name: &str) -> Result<(Group, Member), SpecError> {
    zone(zone_name).map_err(|e| SpecError(e.0))?;
    Ok((
        Group::of(&s.tenant, &s.def, zone_name),
        Member { tenant: s.tenant.clone(), ver: s.ver, since_ms: s.since_ms, owed_ms: s.since_ms },
    ))
}

/// A one-off member that its group can never fire (its instant at or before what it is owed
/// from, or removed by a skipped DST gap): the store refuses to write it, rather than leave an
/// active definition whose group has a head and no record.
pub fn never_fires(group: &Group, m: &Member) -> Result<bool, SpecError> {
    Ok(group.spec.one_off() && first_record(group, m.owed_ms)?.is_none())
}

/// The first record of `group`, for a member owed after `owed_ms` (the group's first writer).
pub fn first_record(group: &Group, owed_ms: Millis) -> Result<Option<DueRecord>, SpecError> {
    let tz = zone(&group.zone).map_err(|e| SpecError(e.0))?;
    next_record(group, &tz, owed_ms)
}

/// Occurrences after this instant are owed: the definition's `since`, except that a one-off in
/// the recent past stays owed (its instant is what it asked for; the add refuses one beyond the
/// lateness bound).
fn owed_since(s: &Schedule, tz: &jiff::tz::TimeZone) -> Result<Millis, SpecError> {
    if !s.def.spec.one_off() {
        return Ok(s.since_ms);
    }
    // Looked for from a year and more before its adding.
    Ok(match next_after(&s.def.spec, tz, s.def.dst, s.since_ms - 400 * 86_400_000)? {
        Some(o) => s.since_ms.min(o.at_ms - 1),
        None => s.since_ms,
    })
}

/// The coming fires of `s` in `zone` after `from_ms`: `(occurrence, due instant)`, the first
/// `count` — what the sweep fires when it keeps up (`tickctl schedules next`).
pub fn upcoming(
    s: &Schedule,
    zone_name: &str,
    from_ms: Millis,
    count: usize,
) -> Result<Vec<(Occurrence, Millis)>, SpecError> {
    let tz = zone(zone_name).map_err(|e| SpecError(e.0))?;
    let spread = spread_ms(&s.tenant, &s.def.name, s.def.spread_min);
    if s.paused {
        return Ok(Vec::new());
    }
    // Due after `from`: occurrences after `from - spread`, and none before the schedule is owed.
    let mut after = owed_since(s, &tz)?.max(from_ms - spread);
    let mut out = Vec::new();
    while out.len() < count {
        let Some(o) = next_after(&s.def.spec, &tz, s.def.dst, after)? else { break };
        after = o.at_ms;
        let due = o.at_ms + spread;
        out.push((o, due));
    }
    Ok(out)
}

fn next_record(group: &Group, tz: &jiff::tz::TimeZone, after_ms: Millis) -> Result<Option<DueRecord>, SpecError> {
    Ok(next_after(&group.spec, tz, group.dst, after_ms)?.map(|o| DueRecord {
        due_ms: o.at_ms + group.offset_ms,
        pos_ms: o.at_ms + group.offset_ms,
        group: group.clone(),
        after_ms,
        cursor: None,
        plan_at: None,
        shard: None,
        stage: super::record::Stage::Open,
        leaves_seen: None,
    }))
}

/// The record that follows `rec` when it fires its own occurrence alone (the one it was written
/// for, at its due instant less the spread): the next occurrence after it. It depends on the
/// record alone, so the sweep puts it before the transaction that moves past `rec`, outside it:
/// a crash between leaves a successor that the record's next attempt puts again, the same.
pub fn own_successor(rec: &DueRecord) -> Result<Option<DueRecord>, SpecError> {
    let tz = zone(&rec.group.zone).map_err(|e| SpecError(e.0))?;
    next_record(&rec.group, &tz, rec.due_ms - rec.group.offset_ms)
}

/// How a record's successor is written.
// One a record, never held in bulk: boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Successor {
    /// None: a one-off done.
    None,
    /// [`own_successor`], put before the transaction (the plan fired the record's own
    /// occurrence at most).
    Before(DueRecord),
    /// A backlog caught up past the record's own occurrence: the plan's successor, due later than
    /// the record's own would be, put in the transaction — if no attempt before put the record's
    /// own successor (`check`: the sweep reads it; there, the record fires its own occurrence
    /// only, and the successor already there goes on).
    Within {
        /// The plan's successor.
        next: DueRecord,
        /// The record's own successor, whose existence the sweep checks first.
        check: DueRecord,
    },
}

/// How `plan`'s successor of `rec` is written, positioned after `now_ms` (the sweep's instant, not
/// the plan's: a group paged over several ticks keeps its first page's) when it is due already:
/// the shard's cursor reaches `now_ms` at most this tick, and a successor at or before it could
/// sort behind where the cursor moves. One put before the transaction must sort after it too.
pub fn successor(rec: &DueRecord, plan: &FirePlan, now_ms: Millis) -> Result<Successor, SpecError> {
    let own = own_successor(rec)?;
    Ok(match (&plan.next, own) {
        (None, _) => Successor::None,
        (Some(n), Some(own)) if n.due_ms == own.due_ms && own.pos_ms > now_ms => Successor::Before(own),
        (Some(n), own) => {
            let next = DueRecord { pos_ms: n.pos_ms.max(now_ms + 1), ..n.clone() };
            match own {
                Some(check) => Successor::Within { next, check },
                None => Successor::Before(next),
            }
        }
    })
}

/// The plan for `rec` at `now_ms`.
pub fn plan(rec: &DueRecord, now_ms: Millis, policy: &Policy) -> Result<FirePlan, SpecError> {
    plan_until(rec, now_ms, policy, None)
}

/// The plan for `rec` at `now_ms` when its own successor is already written: its own occurrence
/// (and any before it) at most, and no successor of its own.
pub fn plan_own(rec: &DueRecord, now_ms: Millis, policy: &Policy) -> Result<FirePlan, SpecError> {
    let mut p = plan_until(rec, now_ms, policy, Some(rec.due_ms - rec.group.offset_ms))?;
    p.next = None;
    Ok(p)
}

fn plan_until(rec: &DueRecord, now_ms: Millis, policy: &Policy, cap: Option<Millis>) -> Result<FirePlan, SpecError> {
    let g = &rec.group;
    let tz = zone(&g.zone).map_err(|e| SpecError(e.0))?;
    let until = (now_ms - g.offset_ms).min(cap.unwrap_or(Millis::MAX));
    let mut missed: Vec<Occurrence> = between(&g.spec, &tz, g.dst, rec.after_ms, until)?;
    // A long backlog of a frequent spec under `all` goes out a slice a tick, oldest first: one
    // record's fires stay within a page's transaction, and the successor is due at once for the
    // next slice.
    let mut handled = rec.after_ms.max(until);
    if policy.catch_up == CatchUp::All && missed.len() > MAX_FIRES_PER_RECORD {
        missed.truncate(MAX_FIRES_PER_RECORD);
        handled = missed.last().map_or(handled, |o| o.at_ms);
    }
    let (fire, skipped) = catch_up(&missed, g.offset_ms, now_ms, policy);
    let next = next_record(g, &tz, handled)?;
    let finished = next.is_none() && g.spec.one_off();
    Ok(FirePlan { fire, skipped, next, finished })
}

/// What member `m` of `group` gets of the occurrences `fire`, its tenant read as `tenant`.
pub fn member_fires(fire: &[Occurrence], m: &Member, tenant: Option<TenantNow<'_>>, group: &Group) -> MemberFires {
    let Some(t) = tenant else { return MemberFires::Gone };
    let owed: Vec<usize> = fire.iter().enumerate().filter(|(_, o)| o.at_ms > m.owed_ms).map(|(i, _)| i).collect();
    // An instant is the same in every zone: a moved tenant's `at <instant>` still fires.
    let zone_bound = !matches!(group.spec, Spec::AtInstant(_));
    if zone_bound && t.zone != group.zone {
        if let Err(e) = zone(t.zone) {
            return MemberFires::Unreadable(e.0);
        }
        return MemberFires::Moved(owed.len() as u32);
    }
    if !t.active {
        return MemberFires::Passed(owed.len() as u32);
    }
    MemberFires::Fire(owed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::spec::{Dst, ScheduleDef};

    fn ms(s: &str) -> Millis {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }
    const POLICY: Policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 2 * 86_400_000, interval_ms: 900_000 };

    fn sched(spec: &str, since: &str) -> Schedule {
        Schedule {
            tenant: "acme".into(),
            def: ScheduleDef::new("nudge", spec.parse().unwrap(), 0, Dst::default()).unwrap(),
            paused: false,
            ver: 1,
            since_ms: ms(since),
            group: None,
        }
    }
    const BERLIN: TenantNow<'static> = TenantNow { zone: "Europe/Berlin", active: true };

    fn first(s: &Schedule) -> (DueRecord, Member) {
        let (g, m) = member_of(s, "Europe/Berlin").unwrap();
        (first_record(&g, m.owed_ms).unwrap().unwrap(), m)
    }
    fn keys(p: &FirePlan) -> Vec<String> {
        p.fire.iter().map(|o| o.key.clone()).collect()
    }

    #[test]
    fn a_record_fires_its_occurrence_and_names_the_next() {
        let s = sched("daily 08:00", "2026-12-01T14:00:00Z");
        let (r, m) = first(&s);
        assert_eq!(r.due_ms, ms("2026-12-02T07:00:00Z"), "owed from its adding: tomorrow's 08:00");
        let p = plan(&r, ms("2026-12-02T07:00:30Z"), &POLICY).unwrap();
        assert_eq!(keys(&p), ["2026-12-02T08:00:00+01:00"]);
        assert_eq!(member_fires(&p.fire, &m, Some(BERLIN), &r.group), MemberFires::Fire(vec![0]));
        let n = p.next.clone().unwrap();
        assert_eq!(n.due_ms, ms("2026-12-03T07:00:00Z"));
        // The same record read again (a crash before it was replaced) plans the same fire.
        assert_eq!(plan(&r, ms("2026-12-02T07:00:30Z"), &POLICY).unwrap(), p);
        // Its successor at its time fires the next day, not the first again.
        assert_eq!(keys(&plan(&n, ms("2026-12-03T07:01:00Z"), &POLICY).unwrap()), ["2026-12-03T08:00:00+01:00"]);
    }

    #[test]
    fn a_member_gets_what_it_is_owed_and_a_suspended_moved_or_removed_tenant_nothing() {
        let early = sched("daily 08:00", "2026-11-01T14:00:00Z");
        let (r, m) = first(&early);
        let p = plan(&r, ms("2026-11-03T07:05:00Z"), &POLICY).unwrap();
        assert_eq!(p.fire.len(), 2, "the 2nd and the 3rd");
        // A member that joined on the 2nd at noon is owed the 3rd only.
        let late = Member { owed_ms: ms("2026-11-02T12:00:00Z"), ..m.clone() };
        assert_eq!(member_fires(&p.fire, &late, Some(BERLIN), &r.group), MemberFires::Fire(vec![1]));
        let suspended = TenantNow { active: false, ..BERLIN };
        assert_eq!(member_fires(&p.fire, &m, Some(suspended), &r.group), MemberFires::Passed(2));
        // Moved to New York (the library moves its schedules after the tenant): nothing from the
        // Berlin group.
        let ny = TenantNow { zone: "America/New_York", active: true };
        assert_eq!(member_fires(&p.fire, &m, Some(ny), &r.group), MemberFires::Moved(2));
        assert_eq!(member_fires(&p.fire, &m, None, &r.group), MemberFires::Gone);
        let mars = TenantNow { zone: "Mars/Olympus", active: true };
        assert!(matches!(member_fires(&p.fire, &m, Some(mars), &r.group), MemberFires::Unreadable(_)));
    }

    #[test]
    fn a_successor_due_by_the_sweeps_instant_goes_in_the_transaction_after_it() {
        let s = sched("cron * * * * *", "2026-12-01T07:59:30Z");
        let (r, _) = first(&s);
        // Planned at its instant (08:00); the sweep at 08:00:30: the next minute is ahead.
        let at = ms("2026-12-01T08:00:00Z");
        let p = plan(&r, at, &POLICY).unwrap();
        assert!(matches!(successor(&r, &p, at + 30_000).unwrap(), Successor::Before(_)));
        // A group paged over several ticks keeps its plan's instant; at 08:03 its successor (08:01)
        // is due: put in the transaction after the sweep's instant, not before it at 08:01.
        let now = ms("2026-12-01T08:03:00Z");
        match successor(&r, &p, now).unwrap() {
            Successor::Within { next, check } => {
                assert_eq!((next.due_ms, next.pos_ms), (ms("2026-12-01T08:01:00Z"), now + 1));
                assert_eq!(check.due_ms, next.due_ms);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_one_off_fires_once_and_is_finished_even_when_added_just_after_its_instant() {
        let s = sched("at 2026-12-24T09:00", "2026-12-24T08:30:00Z");
        let (r, m) = first(&s);
        assert_eq!(r.due_ms, ms("2026-12-24T08:00:00Z"), "its instant, though just before the add");
        let p = plan(&r, ms("2026-12-24T08:31:00Z"), &POLICY).unwrap();
        assert_eq!((p.fire.len(), p.next.is_none(), p.finished), (1, true, true));
        assert_eq!(member_fires(&p.fire, &m, Some(BERLIN), &r.group), MemberFires::Fire(vec![0]));
        // Resumed (or retargeted) after its instant: owed from the resume, so it can never fire
        // (the store refuses it), where the add's grace would fire it late.
        let resumed = Schedule { since_ms: ms("2026-12-24T08:30:00Z"), ..s.clone() };
        let (g, m) = member_resumed(&resumed, "Europe/Berlin").unwrap();
        assert_eq!(m.owed_ms, resumed.since_ms);
        assert!(never_fires(&g, &m).unwrap());
        let (g, m) = member_of(&resumed, "Europe/Berlin").unwrap();
        assert!(!never_fires(&g, &m).unwrap(), "an add just after it is owed it");
        let before = Schedule { since_ms: ms("2026-12-24T07:30:00Z"), ..s.clone() };
        let (g, m) = member_resumed(&before, "Europe/Berlin").unwrap();
        assert!(!never_fires(&g, &m).unwrap(), "resumed before its instant, it fires");
        // A tenant moved to New York, its schedules not retargeted yet: a local one-off waits
        // (its definition stays for the retarget); an `at <instant>` fires, whatever the zone.
        let ny = TenantNow { zone: "America/New_York", active: true };
        assert_eq!(member_fires(&p.fire, &m, Some(ny), &r.group), MemberFires::Moved(1));
        let inst = sched("at 2026-12-24T08:00:00Z", "2026-12-24T07:30:00Z");
        let (ri, mi) = first(&inst);
        let pi = plan(&ri, ms("2026-12-24T08:01:00Z"), &POLICY).unwrap();
        assert_eq!(member_fires(&pi.fire, &mi, Some(ny), &ri.group), MemberFires::Fire(vec![0]));
    }

    #[test]
    fn a_long_backlog_of_a_frequent_spec_goes_out_a_slice_a_tick() {
        let s = sched("cron * * * * *", "2026-12-01T00:00:00Z");
        let (r, _) = first(&s);
        // Twelve hours of minutes (720) due at once: 500 now, the successor due at once.
        let p = plan(&r, ms("2026-12-01T12:00:00Z"), &POLICY).unwrap();
        assert_eq!((p.fire.len(), p.skipped), (MAX_FIRES_PER_RECORD, 0));
        let n = p.next.unwrap();
        assert_eq!(n.due_ms, p.fire.last().unwrap().at_ms + 60_000, "the next minute, long past");
        assert_eq!(plan(&n, ms("2026-12-01T12:15:00Z"), &POLICY).unwrap().fire.len(), 720 + 15 - 500);
    }

    #[test]
    fn a_long_outage_is_caught_up_by_policy_and_the_spread_delays_the_due_time() {
        let mut s = sched("daily 08:00", "2026-11-01T00:00:00Z");
        s.def.spread_min = 30;
        let (r, _) = first(&s);
        let offset = spread_ms("acme", "nudge", 30);
        assert_eq!(r.due_ms, ms("2026-11-01T07:00:00Z") + offset);
        // Five days later: the occurrences within two days' lateness fire (All), the older are
        // passed over.
        let now = ms("2026-11-06T07:00:00Z") + offset;
        let p = plan(&r, now, &POLICY).unwrap();
        assert_eq!(p.fire.len() as u32 + p.skipped, 6);
        // Which ones: those within the two days' lateness (November 4th, exactly two days late,
        // the 5th and the 6th) fire; the 1st to the 3rd are passed over.
        assert_eq!((p.fire.len() as u32, p.skipped), (3, 3));
        assert_eq!(p.fire.last().unwrap().key, "2026-11-06T08:00:00+01:00");
        assert_eq!(p.next.unwrap().due_ms, ms("2026-11-07T07:00:00Z") + offset);
    }
}
