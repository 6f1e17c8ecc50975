//! The decisions of a page of due records, from what the sweep read (`fires` does the reads and
//! the writes): what each record gets — fired or dropped as [`plan`] says, or set aside when its
//! tenant or definition cannot be read — and what one transaction of them writes. Pure.

use std::collections::HashMap;

use serde_json::{Map, Value};
use tickwork::batch::Batch;
use tickwork::calendar::Policy;
use tickwork::item::Item;
use tickwork::schedules::{plan, DueRecord, FirePlan, Schedule, TenantNow};
use tickwork::tenants::Tenant;

/// How long a record set aside waits before it is tried again.
pub const ISOLATED_RETRY_MS: i64 = 3_600_000;

/// A record and what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub(crate) rec: DueRecord,
    pub(crate) plan: Action,
    /// The definition's `ver` it was planned with.
    pub(crate) ver: u64,
    /// When the definition was added or last changed (a fire is not expected before it was
    /// asked for: a one-off added after its instant is due from its adding).
    pub(crate) since_ms: i64,
}

/// Fire (or drop) as planned, or set the record aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    Plan(FirePlan),
    /// Its tenant or definition cannot be read, or it cannot be planned: counted as a failed
    /// unit and looked at again in [`ISOLATED_RETRY_MS`] (not at every tick, which would keep
    /// `sched_next` in the past and cost every idle tick a query).
    Isolate(String),
}

/// A batch entry for one fire (the unit key's parts: name, then occurrence).
pub fn entry(name: &str, occurrence: &str) -> Map<String, Value> {
    Map::from_iter([
        ("name".to_string(), Value::String(name.to_string())),
        ("occurrence".to_string(), Value::String(occurrence.to_string())),
    ])
}

/// Each record's action, given its definition (`defs`, by tenant and name: a definition that
/// does not read is `Err`), its tenant (`tenants`: `None` when gone) or why its tenant could not
/// be read (`unreadable`).
pub(crate) fn plan_records(
    records: &[DueRecord],
    defs: &HashMap<(String, String), Result<Schedule, String>>,
    tenants: &HashMap<&str, Option<Tenant>>,
    unreadable: &HashMap<&str, String>,
    now_ms: i64,
    policy: &Policy,
) -> Vec<Planned> {
    records
        .iter()
        .map(|r| {
            let isolate = |why: String| Planned { rec: r.clone(), plan: Action::Isolate(why), ver: 0, since_ms: 0 };
            if let Some(e) = unreadable.get(r.tenant.as_str()) {
                return isolate(format!("tenant unreadable: {e}"));
            }
            let def = match defs.get(&(r.tenant.clone(), r.name.clone())) {
                Some(Ok(s)) => Some(s),
                Some(Err(e)) => return isolate(format!("definition unreadable: {e}")),
                None => None,
            };
            let t = tenants.get(r.tenant.as_str()).and_then(|t| t.as_ref());
            let now = t.map(|t| TenantNow { zone: &t.zone, active: t.active });
            match plan(r, def, now, now_ms, policy) {
                Ok(p) => Planned {
                    rec: r.clone(),
                    plan: Action::Plan(p),
                    ver: def.map_or(0, |d| d.ver),
                    since_ms: def.map_or(0, |d| d.since_ms),
                },
                Err(e) => isolate(format!("cannot be planned: {e}")),
            }
        })
        .collect()
}

/// What one transaction of planned records writes, and what it counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChunkPlan {
    /// The fires, as units of a batch.
    pub(crate) batch: Batch,
    /// Successor records (an isolated one: itself, an hour on).
    pub(crate) next: Vec<DueRecord>,
    /// The keys of the records replaced.
    pub(crate) done: Vec<Item>,
    /// Finished one-offs: tenant, name, the version fired.
    pub(crate) finished: Vec<(String, String, u64)>,
    pub(crate) fired: u64,
    pub(crate) skipped: u64,
    pub(crate) dropped: u64,
    pub(crate) isolated: u64,
    /// When the chunk's earliest fire was due (at most `now_ms`): its queue items are ready
    /// since then, so the worker's `QueueLag` counts a schedule's wait from its instant, the
    /// sweep's part included, and an hour of lateness raises `QueueLagAlarm` however it came.
    pub(crate) ready_ms: i64,
}

/// The writes and counts of `chunk` for `job` at `now_ms`.
pub(crate) fn chunk_plan(chunk: &[Planned], job: &str, now_ms: i64) -> ChunkPlan {
    let mut c = ChunkPlan { batch: Batch::new(Map::new()), ready_ms: now_ms, ..Default::default() };
    for Planned { rec: r, plan, ver, since_ms } in chunk {
        match plan {
            Action::Isolate(_) => {
                c.isolated += 1;
                c.next.push(DueRecord { due_ms: now_ms + ISOLATED_RETRY_MS, ..r.clone() });
            }
            Action::Plan(FirePlan::Drop { .. }) => c.dropped += 1,
            Action::Plan(FirePlan::Fire { fire, skipped, next, finished }) => {
                for o in fire {
                    c.batch.add(vec![entry(&r.name, &o.key)], [r.tenant.clone()]);
                    // Its instant plus the spread: the record's due for its first occurrence
                    // (a later one caught up is due no earlier than that); and never before
                    // the schedule was asked for (a one-off added after its instant).
                    c.ready_ms = c.ready_ms.min(o.at_ms.max(r.due_ms).max(*since_ms));
                }
                c.fired += fire.len() as u64;
                c.skipped += u64::from(*skipped);
                c.next.extend(next.clone());
                if *finished {
                    c.finished.push((r.tenant.clone(), r.name.clone(), *ver));
                }
            }
        }
        c.done.push(r.key(job));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::CatchUp;
    use tickwork::schedules::{first_record, Dst, ScheduleDef};

    const POLICY: Policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 86_400_000, interval_ms: 900_000 };

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn sched(tenant: &str, name: &str, spec: &str) -> Schedule {
        Schedule {
            tenant: tenant.into(),
            def: ScheduleDef::new(name, spec.parse().unwrap(), 0, Dst::default()).unwrap(),
            paused: false,
            ver: 7,
            since_ms: ms("2026-12-01T10:00:00Z"),
        }
    }

    #[test]
    fn each_record_is_fired_dropped_or_set_aside_by_what_was_read() {
        let ok = sched("ok", "n", "daily 08:00");
        let gone = sched("gone", "n", "daily 08:00");
        let bad_def = sched("baddef", "n", "daily 08:00");
        let bad_tenant = sched("badtenant", "n", "daily 08:00");
        let moon = sched("moon", "n", "daily 08:00");
        let all = [&ok, &gone, &bad_def, &bad_tenant, &moon];
        let records: Vec<DueRecord> = all.iter().map(|s| first_record(s, "Europe/Berlin").unwrap().unwrap()).collect();
        let mut defs: HashMap<(String, String), Result<Schedule, String>> =
            all.iter().map(|s| ((s.tenant.clone(), "n".into()), Ok((*s).clone()))).collect();
        defs.insert(("baddef".into(), "n".into()), Err("no spec".into()));
        let berlin = |id: &str| Some(Tenant::new(id, "Europe/Berlin"));
        let tenants: HashMap<&str, Option<Tenant>> = [
            ("ok", berlin("ok")),
            ("gone", None),
            ("baddef", berlin("baddef")),
            ("moon", Some(Tenant::new("moon", "Mars/Olympus"))),
        ]
        .into_iter()
        .collect();
        let unreadable: HashMap<&str, String> = [("badtenant", "throttled".to_string())].into_iter().collect();
        let p = plan_records(&records, &defs, &tenants, &unreadable, ms("2026-12-02T07:00:00Z"), &POLICY);
        let kind = |a: &Action| match a {
            Action::Plan(FirePlan::Fire { fire, .. }) => format!("fire {}", fire.len()),
            Action::Plan(FirePlan::Drop { why }) => format!("drop: {why}"),
            Action::Isolate(why) => format!("isolate: {why}"),
        };
        let got: Vec<String> = p.iter().map(|x| kind(&x.plan)).collect();
        assert_eq!(got[0], "fire 1");
        assert_eq!(got[1], "drop: tenant removed");
        assert!(got[2].starts_with("isolate: definition unreadable"), "{}", got[2]);
        assert!(got[3].starts_with("isolate: tenant unreadable: throttled"), "{}", got[3]);
        assert!(got[4].starts_with("isolate: cannot be planned") && got[4].contains("Mars/Olympus"), "{}", got[4]);
        assert_eq!(p[0].ver, 7, "planned with the definition's version");
    }

    #[test]
    fn a_chunk_writes_its_fires_successors_and_deletes_and_sets_the_isolated_aside() {
        let now = ms("2026-12-24T08:30:00Z");
        let once = sched("a", "call", "at 2026-12-24T09:00");
        // Added a minute ago: owed nothing yet.
        let daily = Schedule { since_ms: now - 60_000, ..sched("b", "nudge", "daily 09:00") };
        let r_once = first_record(&once, "Europe/Berlin").unwrap().unwrap();
        let r_daily = first_record(&daily, "Europe/Berlin").unwrap().unwrap();
        let berlin = |id: &str| Some(Tenant::new(id, "Europe/Berlin"));
        let defs = [(("a".into(), "call".into()), Ok(once.clone())), (("b".into(), "nudge".into()), Ok(daily.clone()))]
            .into_iter()
            .collect();
        let tenants: HashMap<&str, Option<Tenant>> = [("a", berlin("a")), ("b", berlin("b"))].into_iter().collect();
        let mut planned =
            plan_records(&[r_once.clone(), r_daily.clone()], &defs, &tenants, &HashMap::new(), now, &POLICY);
        planned.push(Planned { rec: r_daily.clone(), plan: Action::Isolate("x".into()), ver: 0, since_ms: 0 });
        let c = chunk_plan(&planned, "pulse-sweep", now);
        let keys: Vec<String> = c.batch.units("sched").into_iter().map(|u| u.key).collect();
        assert_eq!(keys, ["sched#a#call#2026-12-24T09:00:00+01:00"], "the one-off is due; the daily is not yet owed");
        assert_eq!((c.fired, c.isolated, c.dropped), (1, 1, 0));
        assert_eq!(c.finished, [("a".to_string(), "call".to_string(), 7)], "a one-off done goes at its version");
        assert_eq!(c.done, [r_once.key("pulse-sweep"), r_daily.key("pulse-sweep"), r_daily.key("pulse-sweep")]);
        assert_eq!(c.next.last().unwrap().due_ms, now + ISOLATED_RETRY_MS, "set an hour aside");
        assert_eq!(c.next.len(), 2, "the daily's successor and the isolated one; the one-off has none");
        // The one-off was due at 09:00 Berlin, half an hour ago: its item is ready since then.
        assert_eq!(c.ready_ms, ms("2026-12-24T08:00:00Z"));
        let none = chunk_plan(&planned[1..], "pulse-sweep", now);
        assert_eq!(none.ready_ms, now, "nothing fired: ready now");
        // A one-off added after its instant is expected from its adding.
        let added = ms("2026-12-24T08:20:00Z");
        let late = [Planned { since_ms: added, ..planned[0].clone() }];
        assert_eq!(chunk_plan(&late, "pulse-sweep", now).ready_ms, added);
    }
}
