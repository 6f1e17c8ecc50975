//! What the sweep does with a due record, decided from the record, its definition and its
//! tenant as read now: fire which occurrences, pass over how many, and what record comes next.
//! Pure; the sweep does the reads and the writes.
//!
//! ## The rules
//! - A record whose definition is gone, paused or moved on (`ver`) is stale: dropped unfired (a
//!   change wrote its successor; a removal wants none).
//! - A tenant gone: the record is dropped. A tenant suspended: what came due is passed over and
//!   the record moves on (a resume writes a fresh record owed from the resume).
//! - Owed: occurrences after both the record's `after` and the definition's `since`, due (instant
//!   plus spread) by now, in the tenant's zone as it is now; the catch-up policy picks which fire.
//! - The next record: the first occurrence after what was handled. A one-off that has fired (or
//!   was passed over) has none, and its definition goes too: it leaves nothing behind.

use crate::calendar::{zone, CatchUp, Policy};
use crate::clock::Millis;

use super::occurrence::{between, catch_up, next_after, spread_ms, Occurrence};
use super::record::{DueRecord, Schedule};
use super::spec::SpecError;

/// Fires one record hands over at one tick at most (a backlog under `all` continues at the next).
pub const MAX_FIRES_PER_RECORD: usize = 500;

/// Where a schedule's tenant stands, as the sweep read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantNow<'a> {
    /// Its zone.
    pub zone: &'a str,
    /// Active (not suspended).
    pub active: bool,
}

/// What to do with one due record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirePlan {
    /// Delete it and fire nothing.
    Drop {
        /// Why, for the log.
        why: &'static str,
    },
    /// Fire `fire`, count `skipped`, and replace the record by `next` (none: delete it).
    Fire {
        /// Occurrences to hand to the queue, oldest first.
        fire: Vec<Occurrence>,
        /// Occurrences the catch-up policy (or a suspension) passed over.
        skipped: u32,
        /// The record that replaces this one.
        next: Option<DueRecord>,
        /// A one-off that is done: its definition is deleted too.
        finished: bool,
    },
}

/// The first record of a schedule added, changed or resumed, in `zone`.
pub fn first_record(s: &Schedule, zone_name: &str) -> Result<Option<DueRecord>, SpecError> {
    let tz = zone(zone_name).map_err(|e| SpecError(e.0))?;
    next_record(s, zone_name, &tz, owed_since(s, &tz)?)
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

fn next_record(
    s: &Schedule,
    zone_name: &str,
    tz: &jiff::tz::TimeZone,
    after_ms: Millis,
) -> Result<Option<DueRecord>, SpecError> {
    let spread = spread_ms(&s.tenant, &s.def.name, s.def.spread_min);
    Ok(next_after(&s.def.spec, tz, s.def.dst, after_ms)?.map(|o| DueRecord {
        due_ms: o.at_ms + spread,
        tenant: s.tenant.clone(),
        name: s.def.name.clone(),
        ver: s.ver,
        zone: zone_name.to_string(),
        after_ms,
    }))
}

/// The plan for `rec` at `now_ms`.
pub fn plan(
    rec: &DueRecord,
    def: Option<&Schedule>,
    tenant: Option<TenantNow<'_>>,
    now_ms: Millis,
    policy: &Policy,
) -> Result<FirePlan, SpecError> {
    let Some(s) = def else { return Ok(FirePlan::Drop { why: "schedule removed" }) };
    if s.paused || s.ver != rec.ver {
        return Ok(FirePlan::Drop { why: "schedule changed since the record was written" });
    }
    let Some(t) = tenant else { return Ok(FirePlan::Drop { why: "tenant removed" }) };
    let tz = zone(t.zone).map_err(|e| SpecError(e.0))?;
    let spread = spread_ms(&s.tenant, &s.def.name, s.def.spread_min);
    let owed_from = rec.after_ms.max(owed_since(s, &tz)?);
    let until = now_ms - spread;
    let mut missed: Vec<Occurrence> = between(&s.def.spec, &tz, s.def.dst, owed_from, until)?;
    // A long backlog of a frequent spec under `all` goes out a slice a tick, oldest first: one
    // record's fires stay within a transaction's items and bytes, and the successor is due at
    // once for the next slice.
    let mut handled = owed_from.max(until);
    if policy.catch_up == CatchUp::All && missed.len() > MAX_FIRES_PER_RECORD {
        missed.truncate(MAX_FIRES_PER_RECORD);
        handled = missed.last().map_or(handled, |o| o.at_ms);
    }
    let (fire, skipped) =
        if t.active { catch_up(&missed, spread, now_ms, policy) } else { (Vec::new(), missed.len() as u32) };
    let next = next_record(s, t.zone, &tz, handled)?;
    let finished = next.is_none() && s.def.spec.one_off();
    Ok(FirePlan::Fire { fire, skipped, next, finished })
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
        }
    }
    const BERLIN: TenantNow<'static> = TenantNow { zone: "Europe/Berlin", active: true };

    fn fired(p: &FirePlan) -> Vec<String> {
        match p {
            FirePlan::Fire { fire, .. } => fire.iter().map(|o| o.key.clone()).collect(),
            FirePlan::Drop { .. } => vec![],
        }
    }
    fn next(p: &FirePlan) -> Option<DueRecord> {
        match p {
            FirePlan::Fire { next, .. } => next.clone(),
            FirePlan::Drop { .. } => None,
        }
    }

    #[test]
    fn a_record_fires_its_occurrence_and_names_the_next() {
        let s = sched("daily 08:00", "2026-12-01T14:00:00Z");
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        assert_eq!(r.due_ms, ms("2026-12-02T07:00:00Z"), "owed from its adding: tomorrow's 08:00");
        let p = plan(&r, Some(&s), Some(BERLIN), ms("2026-12-02T07:00:30Z"), &POLICY).unwrap();
        assert_eq!(fired(&p), ["2026-12-02T08:00:00+01:00"]);
        let n = next(&p).unwrap();
        assert_eq!(n.due_ms, ms("2026-12-03T07:00:00Z"));
        // The same record read again (a crash before it was replaced) plans the same fire.
        assert_eq!(plan(&r, Some(&s), Some(BERLIN), ms("2026-12-02T07:00:30Z"), &POLICY).unwrap(), p);
        // Its successor at its time fires the next day, not the first again.
        let p2 = plan(&n, Some(&s), Some(BERLIN), ms("2026-12-03T07:01:00Z"), &POLICY).unwrap();
        assert_eq!(fired(&p2), ["2026-12-03T08:00:00+01:00"]);
    }

    #[test]
    fn stale_paused_removed_and_suspended_fire_nothing() {
        let s = sched("daily 08:00", "2026-12-01T14:00:00Z");
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        let at = ms("2026-12-02T07:05:00Z");
        let changed = Schedule { ver: 2, ..s.clone() };
        assert!(matches!(plan(&r, Some(&changed), Some(BERLIN), at, &POLICY).unwrap(), FirePlan::Drop { .. }));
        let paused = Schedule { paused: true, ..s.clone() };
        assert!(matches!(plan(&r, Some(&paused), Some(BERLIN), at, &POLICY).unwrap(), FirePlan::Drop { .. }));
        assert!(matches!(plan(&r, None, Some(BERLIN), at, &POLICY).unwrap(), FirePlan::Drop { .. }));
        assert!(matches!(plan(&r, Some(&s), None, at, &POLICY).unwrap(), FirePlan::Drop { .. }));
        let suspended = TenantNow { active: false, ..BERLIN };
        match plan(&r, Some(&s), Some(suspended), at, &POLICY).unwrap() {
            FirePlan::Fire { fire, skipped, next, .. } => {
                assert_eq!((fire.len(), skipped), (0, 1));
                assert_eq!(next.unwrap().due_ms, ms("2026-12-03T07:00:00Z"));
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn a_moved_tenant_keeps_its_local_time_in_its_new_zone() {
        let s = sched("daily 08:00", "2026-12-01T14:00:00Z");
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        // Moved to New York (the library moved it without a new record): the Berlin instant comes
        // due, nothing is owed yet in New York, and the next record is New York's 08:00.
        let ny = TenantNow { zone: "America/New_York", active: true };
        let p = plan(&r, Some(&s), Some(ny), ms("2026-12-02T07:00:00Z"), &POLICY).unwrap();
        assert_eq!(fired(&p), Vec::<String>::new());
        assert_eq!(next(&p).unwrap().due_ms, ms("2026-12-02T13:00:00Z"));
        assert_eq!(next(&p).unwrap().zone, "America/New_York");
    }

    #[test]
    fn a_one_off_fires_once_and_is_finished_even_when_added_just_after_its_instant() {
        let s = sched("at 2026-12-24T09:00", "2026-12-24T08:30:00Z");
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        assert_eq!(r.due_ms, ms("2026-12-24T08:00:00Z"), "its instant, though just before the add");
        match plan(&r, Some(&s), Some(BERLIN), ms("2026-12-24T08:31:00Z"), &POLICY).unwrap() {
            FirePlan::Fire { fire, next, finished, .. } => {
                assert_eq!(fire.len(), 1);
                assert_eq!((next, finished), (None, true));
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn a_long_backlog_of_a_frequent_spec_goes_out_a_slice_a_tick() {
        let s = sched("cron * * * * *", "2026-12-01T00:00:00Z");
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        // Twelve hours of minutes (720) due at once: 500 now, the successor due at once.
        match plan(&r, Some(&s), Some(BERLIN), ms("2026-12-01T12:00:00Z"), &POLICY).unwrap() {
            FirePlan::Fire { fire, skipped, next, .. } => {
                assert_eq!((fire.len(), skipped), (MAX_FIRES_PER_RECORD, 0));
                let n = next.unwrap();
                assert_eq!(n.due_ms, fire.last().unwrap().at_ms + 60_000, "the next minute, long past");
                match plan(&n, Some(&s), Some(BERLIN), ms("2026-12-01T12:15:00Z"), &POLICY).unwrap() {
                    FirePlan::Fire { fire: rest, .. } => assert_eq!(rest.len(), 720 + 15 - 500),
                    d => panic!("{d:?}"),
                }
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn a_long_outage_is_caught_up_by_policy_and_the_spread_delays_the_due_time() {
        let mut s = sched("daily 08:00", "2026-11-01T00:00:00Z");
        s.def.spread_min = 30;
        let r = first_record(&s, "Europe/Berlin").unwrap().unwrap();
        let offset = spread_ms("acme", "nudge", 30);
        assert_eq!(r.due_ms, ms("2026-11-01T07:00:00Z") + offset);
        // Five days later: the occurrences within two days' lateness fire (All), the older are
        // passed over.
        let now = ms("2026-11-06T07:00:00Z") + offset;
        match plan(&r, Some(&s), Some(BERLIN), now, &POLICY).unwrap() {
            FirePlan::Fire { fire, skipped, next, .. } => {
                assert_eq!(fire.len() as u32 + skipped, 6);
                // Which ones: those within the two days' lateness (November 4th, exactly two days
                // late, the 5th and the 6th) fire; the 1st to the 3rd are passed over.
                assert_eq!((fire.len() as u32, skipped), (3, 3));
                assert_eq!(fire.last().unwrap().key, "2026-11-06T08:00:00+01:00");
                assert_eq!(next.unwrap().due_ms, ms("2026-11-07T07:00:00Z") + offset);
            }
            d => panic!("{d:?}"),
        }
    }
}
