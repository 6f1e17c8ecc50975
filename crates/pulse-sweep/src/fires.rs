//! Schedules' fires: at a tick where the state item says a schedule is due (`sched_next`), every
//! due record of every due shard ([`tickwork::schedules::store`]) is read page by page. A record
//! is a group's (tenants sharing a zone, spec, policy, name and spread offset): it is planned once
//! ([`tickwork::schedules::plan`]), and its members are read a page at a time and fired as their
//! tenants stand now. Beside the calendar's runs, not woven into them: the sweep calls this after
//! its groups.
//!
//! The due shards fire at once, each under a lease of its own ([`due_lease`]) taken only when it
//! has a record due: the shards' transactions share no item, so they do not cancel each other,
//! and a burst's writes go to every due partition at once. A shard whose lease another invocation
//! holds is left to the wake a minute on, as one the budget stopped.
//!
//! ## A shard, in order
//! 1. Its cursor (every shard's in one BatchGetItem) and the first record after it, due or not (a
//!    Query of one item: a shard with nothing due is done there, costing no lease, its earliest
//!    record known for `sched_next`); then, under its lease, the due records after the cursor
//!    (strongly consistent Query from it, key condition `sk < <now + 1>`), a page at a time; each
//!    record planned, and its
//!    successor decided ([`tickwork::schedules::successor`]: put before the transaction when it
//!    depends on the record alone; in a backlog, in it, unless an attempt before put the record's
//!    own, read first).
//! 2. Each record's first page of members (Query, strongly consistent, concurrently), and their
//!    tenants (BatchGetItem, strongly consistent, 100 a request).
//! 3. Per chunk of records, in order: the successors that depend on their records alone put
//!    (BatchWriteItem), then one transaction fenced by the shard's lease of the fires as batch items of kind
//!    [`SCHED_KIND`] (each unit keyed `sched#<tenant>#<name>#<occurrence>`; the members of one
//!    occurrence share one set, so a fire costs its tenant id's bytes), each record's end
//!    ([`RecordEnd`]), and the shard cursor moved past the chunk's last record, conditional on the
//!    cursor read. All or nothing: a fire is queued exactly when the cursor moves past its record,
//!    so a crash anywhere repeats nothing and loses nothing; a successor put before a crash is put
//!    again, the same, by the next attempt.
//! 4. A group larger than a page goes on alone before the records after it, a page and a
//!    transaction at a time, its member cursor in its record (a crash resumes after the last page
//!    written); its last page's transaction moves the shard cursor past it.
//!
//! A group that cannot be planned (a zone the tz database does not know) is set an hour ahead in
//! the same transaction and counted as a failed unit; a member whose item or tenant does not read
//! is counted and logged, and the rest of the group fired; a record that does not read at all is
//! set aside whole ([`tickwork::schedules::quarantine`]) in the transaction that passes it, counted
//! and logged with its group, for `tickctl schedules doctor` to show and repair. A chunk whose
//! cursor move a writer's count refused goes again at once when the cursor, read again, has not
//! moved and the range the move passes holds only the chunk's records (the writer's record is due
//! later: [`tickwork::schedules::Schedules::recount`]); else the shard is read again, and a chunk
//! that keeps being changed under the sweep stops its shard until the next tick (the cursor cannot
//! pass it). When every due record is done, `sched_next` becomes
//! the earliest record after the cursors, unless a batch of writers' records was counted since
//! the state item was read (`tickwork::schedules::lowering`).

use tickwork::budget::Budget;
use tickwork::schedules::{ShardCursor, DUE_SHARDS};

use crate::deps::Deps;
use crate::fire_shard::{fire_shard, ShardEnd};
use crate::report::{PulseError, Report};

pub use crate::fire_page::{FIRE_CHUNK, FIRE_PAGE};
pub use crate::fire_shard::due_lease;
pub use crate::fire_write::fire_items;
pub use tickwork::schedules::SCHED_KIND;

/// How firing ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FireEnd {
    /// Every due record done; `sched_next` set to this (the earliest record left).
    Done(Option<i64>),
    /// The budget stopped it, or a shard's lease was held (`sched_next` is left as it was: a wake
    /// a minute on goes on).
    Stopped,
    /// The lease moved on.
    LeaseLost,
}

/// The order a tick at `now_ms` starts the due shards in (they fire at once, but the first started
/// is the first served when the budget runs short), ticks every `interval_ms`: from the shard
/// after the one the previous regular tick started at, moved on a shard more for each whole
/// minute a wake runs past its tick. So [`DUE_SHARDS`] consecutive ticks start at each shard once,
/// whatever the interval, and a chain of wakes a minute (or five) apart rotates too. A tick its
/// budget stops keeps each shard's cursor, but from a fixed shard 0 the next tick would spend its
/// budget on the first shards again and never reach the last ones under a steady load. Pure.
pub(crate) fn shard_order(now_ms: i64, interval_ms: i64) -> impl Iterator<Item = u32> {
    let interval = interval_ms.max(60_000);
    let ticks = now_ms.div_euclid(interval);
    let minutes = now_ms.rem_euclid(interval) / 60_000;
    let first = (ticks + minutes).rem_euclid(i64::from(DUE_SHARDS)) as u32;
    (0..DUE_SHARDS).map(move |i| (first + i) % DUE_SHARDS)
}
/// Fires every record due at `now_ms`, the due shards at once, each under its own lease taken by
/// the holder of the sweep's lease (`holder`: its owner, and when that lease expires) when it has
/// a record due: no shard waits behind another, and a burst's writes go to every due partition at
/// once.
pub(crate) async fn fire_due(
    deps: &Deps,
    holder: (&str, i64),
    now_ms: i64,
    adds_seen: i64,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<FireEnd, PulseError> {
    let s = &deps.schedules;
    // Every shard's cursor in one read; then each shard's first record, due or not.
    let read_at = deps.clock.now_ms();
    let read = s.shard_cursors().await?;
    let read = &read;
    let shards = shard_order(now_ms, deps.cfg.policy.interval_ms).map(|k| async move {
        let mut r = Report::default();
        let from = (read[k as usize].clone(), read_at);
        let end = Box::pin(fire_shard(deps, holder, now_ms, k, from, budget, &mut r)).await;
        (k, end, r)
    });
    let mut ends = Vec::new();
    let mut failed = None;
    for (k, end, r) in futures::future::join_all(shards).await {
        report.absorb_fires(&r);
        match end {
            Ok(e) => ends.push((k, e)),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let (cursors, known) = match combine(ends, &report.shards_written) {
        Combined::Ended(end) => return Ok(end),
        Combined::Done { cursors, known } => (cursors, known),
    };
    // Records isolated as failed are set an hour ahead: the earliest may be one of them, and the
    // tick an hour on reads them again (and reports them again).
    let mut adds = adds_seen;
    // The shards that fired read again from where they left their cursors (one Query each).
    let mut earliest = s.earliest_from(&cursors, &known).await?;
    for attempt in 1..=SET_ATTEMPTS {
        if s.set_next(earliest, adds).await? || attempt == SET_ATTEMPTS {
            break;
        }
        // A batch of writers' records was counted since `adds` was read: read the count again
        // (strongly), then the shards, and set again. Left refused, `sched_next` stays where it
        // was, in the past, and every tick reads the shards until one sets it: under steady
        // writes that was every tick.
        adds = deps.marks.read_strong(&deps.cfg.job).await?.sched_adds;
        earliest = s.earliest(&cursors).await?;
    }
    Ok(FireEnd::Done(earliest))
}
/// What the due shards' ends make of a fire.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Combined {
    /// A shard stopped (its budget, or its lease held: the wake goes on) or lost its lease (the
    /// job's went too): `sched_next` is left as it was.
    Ended(FireEnd),
    /// Every shard done: each one's cursor as left, and its first record where already known
    /// (read before it had anything due, and no other shard's firing put a successor in it).
    Done { cursors: Vec<ShardCursor>, known: Vec<Option<Option<i64>>> },
}

/// The fire's end from each shard's (`ends`, by shard), `written` the shards another shard's
/// firing put a successor in. A lost lease outweighs a stop. Pure.
pub(crate) fn combine(ends: Vec<(u32, ShardEnd)>, written: &std::collections::BTreeSet<u32>) -> Combined {
    let mut cursors = vec![ShardCursor::default(); DUE_SHARDS as usize];
    let mut known = vec![None; DUE_SHARDS as usize];
    let mut stopped = false;
    for (k, end) in ends {
        match end {
            ShardEnd::Done(c, first) => {
                cursors[k as usize] = c;
                known[k as usize] = first.filter(|_| !written.contains(&k));
            }
            ShardEnd::Stopped => stopped = true,
            ShardEnd::LeaseLost => return Combined::Ended(FireEnd::LeaseLost),
        }
    }
    if stopped {
        return Combined::Ended(FireEnd::Stopped);
    }
    Combined::Done { cursors, known }
}

/// Times `sched_next` is set again in a tick when batches of writers' records keep being counted.
const SET_ATTEMPTS: u32 = 3;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_ends_make_the_fires_and_a_shard_another_put_a_successor_in_is_read_again() {
        let at = |c: &str| ShardCursor { cur: Some(c.into()), writes: 0 };
        let done = |k: u32, first: Option<Option<i64>>| (k, ShardEnd::Done(at(&k.to_string()), first));
        let none = std::collections::BTreeSet::new();
        let Combined::Done { cursors, known } =
            combine(vec![done(0, None), done(3, Some(Some(9))), done(5, Some(None))], &none)
        else {
            panic!("every shard done")
        };
        assert_eq!(
            (cursors[3].clone(), cursors[1].clone()),
            (at("3"), ShardCursor::default()),
            "a shard not read: none"
        );
        assert_eq!((known[0], known[3], known[5], known[1]), (None, Some(Some(9)), Some(None), None));
        // Shard 3 took a successor from another shard's record: its first read is older than it.
        let written = std::collections::BTreeSet::from([3]);
        let Combined::Done { known, .. } = combine(vec![done(3, Some(Some(9)))], &written) else { panic!() };
        assert_eq!(known[3], None);
        assert_eq!(combine(vec![done(0, None), (1, ShardEnd::Stopped)], &none), Combined::Ended(FireEnd::Stopped));
        let lost = vec![(1, ShardEnd::Stopped), (2, ShardEnd::LeaseLost), done(0, None)];
        assert_eq!(combine(lost, &none), Combined::Ended(FireEnd::LeaseLost), "a lost lease outweighs a stop");
    }

    #[test]
    fn four_consecutive_ticks_start_at_each_shard_whatever_the_interval_and_wakes_rotate_too() {
        let start = 1_764_576_000_000; // 2025-12-01T08:00Z
        for every_min in [1, 4, 15, 20, 60] {
            let interval = i64::from(every_min) * 60_000;
            let n = i64::from(DUE_SHARDS);
            for from in 0..3 {
                let firsts: std::collections::BTreeSet<u32> =
                    (from..from + n).map(|i| shard_order(start + i * interval, interval).next().unwrap()).collect();
                assert_eq!(firsts.len(), DUE_SHARDS as usize, "every {every_min} min: {firsts:?}");
            }
            let mut all: Vec<u32> = shard_order(start, interval).collect();
            all.sort_unstable();
            assert_eq!(all, (0..DUE_SHARDS).collect::<Vec<_>>(), "each tick fires every shard");
        }
        // Wakes a minute apart within a quarter-hour, and five minutes apart: each starts at the
        // next shard.
        let q = 900_000;
        for step in [60_000, 300_000] {
            let firsts: Vec<u32> = (1..4).map(|i| shard_order(start + i * step, q).next().unwrap()).collect();
            assert!(firsts.windows(2).all(|w| w[0] != w[1]), "{step}: {firsts:?}");
        }
    }
}
