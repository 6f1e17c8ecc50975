//! A chunk of due records written: the fires' queue items, the records' ends and the shard
//! cursor's move in one fenced transaction, the successors that depend on their records alone put
//! first; and what a shard's writes tell the sweep to do next.

use std::collections::HashMap;

use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::queue::{enqueue_item, NewItem};
use tickwork::schedules::{DueRecord, Quarantined, RecordEnd, ShardCursor, SCHED_KIND};

use crate::deps::Deps;
use crate::fire_plan::{chunk_plan, Action, ChunkPlan, Segment, TenantRead};
use crate::report::{PulseError, Report};

/// The queue items of a chunk's fires: the batch split to the queue's limits, each item named by
/// the digest of its units' keys (the same units, the same item), ready since `ready_ms` (when
/// the earliest fire was due). The sweep writes these, and the cost model sizes them.
pub fn fire_items(batch: Batch, ready_ms: i64) -> Vec<NewItem> {
    batch
        .split()
        .into_iter()
        .map(|b| NewItem {
            id: format!("{SCHED_KIND}#{}", b.fingerprint(SCHED_KIND)),
            kind: SCHED_KIND.into(),
            payload: b.to_payload(),
            tenant: None,
            due_ms: ready_ms,
        })
        .collect()
}

/// How a shard's writes went.
pub(crate) enum Wrote {
    /// On to the next page.
    On,
    /// The shard's cursor changed since it was read (a writer's record): read it again.
    Reread,
    /// Written, with a record set aside (it changed under the sweep): a group running alone stops.
    SetAside,
    /// A chunk was changed under the sweep: the shard stops here until the next tick.
    Halted,
    Stopped,
    LeaseLost,
}

/// The sort key of `rec` in its shard.
pub(crate) fn sk_of(deps: &Deps, rec: &DueRecord) -> String {
    tickwork::schema::get_s(&rec.key(deps.schedules.job()), tickwork::schema::SK).unwrap_or_default().to_string()
}

/// One transaction: the chunk's fires as batch items, its records' ends, and shard `k`'s cursor
/// moved from `cursor` to `to` (empty: an advance within a group), fenced; the successors that
/// depend on their records alone put first. A record whose own condition fails (changed under the
/// sweep), or a cursor changed since it was read, asks for the shard to be read again; at the last
/// reading such a record is set an hour aside and the rest written. `bad` are records passed that
/// did not read: set aside in the quarantine partition in the same transaction.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write_chunk(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    (mut chunk, bad): (Vec<Segment>, Vec<Quarantined>),
    to: &str,
    tenants: &HashMap<String, TenantRead>,
    last_try: bool,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let mut to = to.to_string();
    let mut set_aside = false;
    let mut recounts = 0;
    for _ in 0..=chunk.len() + RECOUNTS {
        let ChunkPlan {
            batch,
            ends,
            before,
            fired,
            skipped,
            dropped,
            isolated,
            ready_ms,
            failures,
            moved,
            cleaning,
            unlink,
        } = chunk_plan(&chunk, tenants, now_ms);
        let mut queued = Vec::new();
        for item in fire_items(batch, ready_ms) {
            queued.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now_ms)?);
        }
        // Each record's writes, and which record each is of.
        let mut moves = Vec::new();
        let mut owner = Vec::new();
        for (i, (rec, end, finished)) in ends.iter().enumerate() {
            let items = deps.schedules.record_items(rec, end, finished, rec.plan_at.unwrap_or(now_ms));
            owner.extend(std::iter::repeat_n(Some(i), items.len()));
            moves.extend(items);
        }
        // One copy a group (its partition holds one a group): a second record of the group in
        // the same transaction would be two writes of one item, which DynamoDB refuses whole.
        let mut copied = std::collections::HashSet::new();
        for q in bad.iter().filter(|q| copied.insert(q.group.as_str())) {
            moves.push(deps.schedules.quarantine_put(q));
            owner.push(None);
        }
        if !to.is_empty() {
            moves.push(deps.schedules.cursor_move(k, cursor, &to));
            owner.push(None);
        }
        // Many pages (small groups, or a backlog caught up) make many items: split in order, each
        // part its own transaction, while the whole (with the fence) passes DynamoDB's limits:
        // as many records first as their items leave room for.
        let whole: Vec<_> = std::iter::once(fence.condition_check())
            .chain(queued.iter().cloned())
            .chain(moves.iter().cloned())
            .collect();
        if tickwork::limits::transaction(&whole).is_err() && chunk.len() > 1 {
            // When the count fits and the bytes do not (large groups' batch items), halves.
            let at = if whole.len() <= tickwork::limits::MAX_TRANSACTION_ITEMS {
                chunk.len() / 2
            } else {
                split_at(&owner, queued.len(), chunk.len())
            };
            let b = chunk.split_off(at);
            let mid = sk_of(deps, &chunk[chunk.len() - 1].rec);
            // The records that do not read go with the half whose cursor move passes them: one
            // after the middle set aside (and deleted) with the first would be read again, and
            // set aside again after a repair, if the second half stopped.
            let (bad_a, bad_b): (Vec<_>, Vec<_>) = bad.into_iter().partition(|q| q.from.1 <= mid);
            let a =
                write_chunk(deps, fence, now_ms, k, cursor, (chunk, bad_a), &mid, tenants, last_try, budget, report);
            return Ok(match Box::pin(a).await? {
                Wrote::On | Wrote::SetAside => {
                    let b =
                        write_chunk(deps, fence, now_ms, k, cursor, (b, bad_b), &to, tenants, last_try, budget, report);
                    Box::pin(b).await?
                }
                other => other,
            });
        }
        // The successors put outside the transaction are a step of their own: none starts once
        // the lease could have lapsed (a stale sweep's successor would start a second chain).
        if budget.exhausted() {
            return Ok(Wrote::Stopped);
        }
        Box::pin(deps.schedules.put_records(&before)).await?;
        // A fixed group's members passed over (moved, unreadable) keep their definitions, for a
        // retarget or an operator: unlinked first (a crash after leaves them unlinked, which the
        // next attempt finds so), so that its cleaning does not delete them.
        for (g, tenant, ver) in &unlink {
            Box::pin(deps.schedules.unlink(tenant, &g.name, *ver, &g.id())).await?;
        }
        let mut passed = passed_keys(deps, &ends, &before);
        passed.extend(bad.iter().map(|q| tickwork::schema::key(&q.from.0, &q.from.1)));
        let mut failed = None;
        // A batch item already there holds exactly these units (its id is their digest): they
        // are queued, and the records move on without it.
        for _ in 0..2 {
            let n = queued.len();
            let writes: Vec<_> = queued.iter().cloned().chain(moves.iter().cloned()).collect();
            match Box::pin(fenced_write(&deps.db, fence, writes)).await? {
                Fenced::Written => {
                    for (tenant, why) in &failures {
                        tracing::warn!(tenant = %tenant, why = %why, "schedule fire isolated: not handed over");
                    }
                    for (tenant, zone) in &moved {
                        tracing::warn!(tenant = %tenant, zone = %zone, "tenant in another zone than its schedule's group: passed over until Schedules::retarget moves it");
                    }
                    if !to.is_empty() {
                        *cursor = ShardCursor { cur: Some(to.clone()), ..cursor.clone() };
                    }
                    report.fires += fired;
                    report.fires_skipped += skipped;
                    report.schedules_dropped += dropped;
                    report.cleaning.extend(cleaning.iter().cloned());
                    report.failed_tenants += isolated + bad.len() as u64;
                    for q in &bad {
                        tracing::error!(
                            group = %q.group,
                            problem = %q.problem,
                            "due record unreadable: set aside (tickctl schedules doctor shows it and repairs it)"
                        );
                    }
                    // Behind the cursor now: removed, so that no record is left to expire while
                    // owed (a lost delete leaves one that nothing reads; the fires stand).
                    if let Err(e) = Box::pin(deps.schedules.delete_records(passed)).await {
                        tracing::warn!(error = %e, "fired due records not deleted: left behind the shard cursor");
                    }
                    return Ok(if set_aside { Wrote::SetAside } else { Wrote::On });
                }
                Fenced::Stale => return Ok(Wrote::LeaseLost),
                Fenced::ConditionFailed { index, .. } if index < n => {
                    queued.remove(index);
                }
                Fenced::ConditionFailed { index, .. } => {
                    failed = Some(index - n);
                    break;
                }
            }
        }
        // Only the cursor's move refused: when writers counted records past the move's end
        // alone, the move goes again at once from the cursor read again.
        if failed.is_some_and(|i| i + 1 == moves.len()) && !to.is_empty() && recounts < RECOUNTS {
            recounts += 1;
            let known = known_keys(deps, &before, &ends);
            match Box::pin(deps.schedules.recount(k, cursor, &to, &known)).await {
                Ok(Some(fresh)) => {
                    *cursor = fresh;
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(shard = k, error = %e, "a refused cursor move not read again: the shard is"),
            }
        }
        match refusal(failed, &owner, last_try) {
            Refusal::Reread => return Ok(Wrote::Reread),
            Refusal::SetAside(i) => {
                tracing::warn!(group = %chunk[i].rec.group.id(), "a due record or its group changed under the sweep: set an hour aside");
                let why = "changed under the sweep while its fire was written".to_string();
                chunk[i].action = Action::Isolate(why);
                set_aside = true;
                // A group's page within it moved no cursor: the cursor passes it now, its copy
                // an hour on.
                if to.is_empty() {
                    to = sk_of(deps, &chunk[i].rec);
                }
            }
            Refusal::Halt => {
                tracing::warn!(
                    "a chunk whose fires were found queued twice could not be written: left to the next tick"
                );
                return Ok(Wrote::Halted);
            }
        }
    }
    Ok(Wrote::Halted)
}

/// Where a chunk of `records` too large for one transaction is split: the most records first whose
/// writes (`owner`: the record each write is of, none for a set-aside copy or the cursor's move)
/// fit beside the fence, the chunk's `queued` batch items (all of them: a part's are no more), the
/// set-aside copies and the cursor's move; at least one record, and never all. Pure.
pub(crate) fn split_at(owner: &[Option<usize>], queued: usize, records: usize) -> usize {
    let others = 1 + queued + owner.iter().filter(|o| o.is_none()).count();
    let room = tickwork::limits::MAX_TRANSACTION_ITEMS.saturating_sub(others);
    let mut writes = vec![0usize; records];
    for i in owner.iter().flatten() {
        writes[*i] += 1;
    }
    let mut used = 0;
    let fit = writes.iter().take_while(|w| {
        used += **w;
        used <= room
    });
    fit.count().clamp(1, records.saturating_sub(1).max(1))
}

/// Times a chunk's refused cursor move goes again at once, the cursor read again, before its
/// shard is read again ([`tickwork::schedules::Schedules::recount`]).
const RECOUNTS: usize = 3;

/// The sort keys a chunk's transaction holds by a condition of its own or writes itself: its
/// records that end with a write (a group that has a head: a writer only counts a join on it, and
/// never puts a record at its key) and their successors (put before it, or in it). A record it
/// passes with no write of its own (a group without a head, `Pass`; one set aside) is left out: a
/// writer re-creating that group, or a repair, may have put a record at its very key since, which
/// a move clear by key alone would pass, and the delete after it remove. The shard is read again
/// for those.
fn known_keys(deps: &Deps, before: &[DueRecord], ends: &[crate::fire_plan::End]) -> std::collections::BTreeSet<String> {
    let written = ends.iter().filter(|(_, e, _)| !matches!(e, RecordEnd::Pass)).flat_map(|(r, e, _)| {
        let successor = match e {
            RecordEnd::Done(Some(n)) | RecordEnd::Replaced(n) | RecordEnd::Retire { successor: Some(n), .. } => Some(n),
            _ => None,
        };
        std::iter::once(r).chain(successor)
    });
    written.chain(before).map(|r| sk_of(deps, r)).collect()
}

/// The keys of the records the chunk's transaction moves the cursor past and keeps (done, passed
/// or set aside; a retired one is deleted in it, an advanced one is not passed), less any key a
/// successor is written at.
pub(crate) fn passed_keys(
    deps: &Deps,
    ends: &[crate::fire_plan::End],
    before: &[DueRecord],
) -> Vec<tickwork::item::Item> {
    let job = deps.schedules.job();
    let successors: Vec<_> = before
        .iter()
        .chain(ends.iter().filter_map(|(_, e, _)| match e {
            RecordEnd::Done(Some(n)) | RecordEnd::Replaced(n) => Some(n),
            _ => None,
        }))
        .map(|n| n.key(job))
        .collect();
    ends.iter()
        .filter(|(_, e, _)| matches!(e, RecordEnd::Done(_) | RecordEnd::Pass))
        .map(|(r, _, _)| r.key(job))
        .filter(|k| !successors.contains(k))
        .collect()
}

/// What a refused chunk does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Read the shard again from its cursor: it sees the change.
    Reread,
    /// Set this record (of the chunk) an hour aside, and write the rest.
    SetAside(usize),
    /// Leave the chunk to the next tick.
    Halt,
}

/// What to do when the chunk's write `failed` (its index among the records' writes, whose record
/// each is: `owner`, none for the shard cursor's move; `None` when its batch items kept being
/// found queued): the cursor changed, or a record did and this is not the shard's last reading,
/// read the shard again; a record at the last reading, set it aside. Pure.
pub(crate) fn refusal(failed: Option<usize>, owner: &[Option<usize>], last_try: bool) -> Refusal {
    match failed.map(|i| owner.get(i).copied().flatten()) {
        None => Refusal::Halt,
        // The cursor changed since it was read: a writer's record may sort before the move.
        Some(None) => Refusal::Reread,
        // One record changed under the sweep (a member joined a group being retired, a definition
        // changed under a one-off done).
        Some(Some(_)) if !last_try => Refusal::Reread,
        Some(Some(i)) => Refusal::SetAside(i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_too_large_for_a_transaction_is_split_after_as_many_records_as_fit() {
        // 200 one-offs retired with a member each: 4 writes a record, and the cursor's move.
        let owner: Vec<Option<usize>> =
            (0..200).flat_map(|i| std::iter::repeat_n(Some(i), 4)).chain(std::iter::once(None)).collect();
        // Beside the fence, 2 batch items and the move: 96 writes, 24 records.
        assert_eq!(split_at(&owner, 2, 200), 24);
        // Records of no write of their own (a daily group's successor put before): all but one
        // fit, and the last part is never empty.
        assert_eq!(split_at(&[None], 2, 200), 199);
        // One record larger than a transaction alone still goes first, alone.
        assert_eq!(split_at(&[Some(0); 150], 1, 2), 1);
        assert_eq!(split_at(&[], 0, 1), 1);
    }

    #[test]
    fn a_refused_chunk_reads_its_shard_again_and_sets_a_record_aside_only_at_the_last_reading() {
        // Two records' writes (the first has two), then the cursor's move.
        let owner = [Some(0), Some(0), Some(1), None];
        assert_eq!(refusal(Some(3), &owner, false), Refusal::Reread, "the cursor moved");
        assert_eq!(refusal(Some(3), &owner, true), Refusal::Reread, "the cursor moved, even at the last");
        assert_eq!(refusal(Some(2), &owner, false), Refusal::Reread);
        assert_eq!(refusal(Some(1), &owner, true), Refusal::SetAside(0));
        assert_eq!(refusal(Some(2), &owner, true), Refusal::SetAside(1));
        assert_eq!(refusal(None, &owner, true), Refusal::Halt, "queued items found twice");
    }
}
