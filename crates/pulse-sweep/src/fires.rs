//! Schedules' fires: at a tick where the state item says a schedule is due (`sched_next`), every
//! due record of every due shard ([`tickwork::schedules::store`]) is read page by page. A record
//! is a group's (tenants sharing a zone, spec, policy, name and spread offset): it is planned once
//! ([`tickwork::schedules::plan`]), and its members are read a page at a time and fired as their
//! tenants stand now. Beside the calendar's runs, not woven into them: the sweep calls this after
//! its groups.
//!
//! ## One page of due records, in order
//! 1. The due records (strongly consistent Query, key condition `sk < <now + 1>`); each planned.
//! 2. Each record's first page of members (Query, strongly consistent, concurrently), and their
//!    tenants (BatchGetItem, strongly consistent, 100 a request).
//! 3. Per chunk of records, one fenced transaction: the fires as batch items of kind
//!    [`SCHED_KIND`] (each unit keyed `sched#<tenant>#<name>#<occurrence>`; the members of one
//!    occurrence share one set, so a fire costs its tenant id's bytes), and each record moved on
//!    ([`RecordEnd`]), conditional on the member cursor read. All or nothing: a fire is queued
//!    exactly when its record moves past its member, so a crash anywhere repeats nothing and
//!    loses nothing.
//! 4. A group larger than a page goes on alone, a page and a transaction at a time, its cursor
//!    in its record (a crash resumes after the last page written).
//!
//! A group that cannot be planned (a zone the tz database does not know) is set an hour ahead in
//! the same transaction and counted as a failed unit; a member whose item or tenant does not read
//! is counted and logged, and the rest of the group fired. A record that does not read at all is
//! left in place. When every due record is done, `sched_next` becomes the earliest record left,
//! unless a schedule was added since the state item was read.

use std::collections::HashMap;

use futures::stream::{self, StreamExt};
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::queue::{enqueue_item, NewItem};
use tickwork::schedules::{plan, DueRecord, FirePlan, RecordEnd, DUE_SHARDS};

use crate::deps::Deps;
use crate::fire_plan::{chunk_plan, member_page, Action, ChunkPlan, PageRead, Segment, TenantRead};
use crate::report::{PulseError, Report};

pub use tickwork::schedules::SCHED_KIND;

/// Due records read a page.
pub const FIRE_PAGE: i32 = 200;

/// Records whose pages are written in one transaction: each a write or two beside the fires'
/// batch items and the fence, well inside a transaction's 100 items.
pub const FIRE_CHUNK: usize = 40;

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

/// How firing ended.
pub(crate) enum FireEnd {
    /// Every due record done; `sched_next` set to this (the earliest record left).
    Done(Option<i64>),
    /// The budget stopped it (the next tick goes on: `sched_next` is left as it was).
    Stopped,
    /// The lease moved on.
    LeaseLost,
}

/// Fires every record due at `now_ms`, fenced by the sweep's lease.
pub(crate) async fn fire_due(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    adds_seen: i64,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<FireEnd, PulseError> {
    for k in 0..DUE_SHARDS {
        let mut start = None;
        loop {
            if budget.exhausted() {
                return Ok(FireEnd::Stopped);
            }
            let (page, next) = deps.schedules.due_page(k, now_ms, FIRE_PAGE, start.as_ref()).await?;
            // Boxed, as the pages' own futures below: a page's reads and writes held inline made
            // the sweep's future outgrow a test thread's stack.
            match Box::pin(fire_page(deps, fence, now_ms, page, budget, report)).await? {
                Wrote::All => {}
                Wrote::LeaseLost => return Ok(FireEnd::LeaseLost),
                Wrote::Stopped => return Ok(FireEnd::Stopped),
            }
            match next {
                Some(n) => start = Some(n),
                None => break,
            }
        }
    }
    let earliest = deps.schedules.earliest().await?;
    // Records isolated as failed are still there, set an hour ahead: the earliest may be one of
    // them, and the tick an hour on reads them again (and reports them again).
    deps.schedules.set_next(earliest, adds_seen).await?;
    Ok(FireEnd::Done(earliest))
}

/// How a page's writes ended.
enum Wrote {
    All,
    Stopped,
    LeaseLost,
}

/// One page of due records.
async fn fire_page(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    page: Vec<Result<DueRecord, (tickwork::item::Item, String)>>,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let mut records = Vec::new();
    for r in page {
        match r {
            Ok(r) => records.push(r),
            Err((key, problem)) => {
                tracing::error!(key = ?key, problem = %problem, "due record unreadable: isolated and left in place");
                report.failed_tenants += 1;
            }
        }
    }
    let planned: Vec<(DueRecord, Result<FirePlan, String>)> = records
        .into_iter()
        .map(|r| {
            let p = plan(&r, now_ms, &deps.cfg.policy).map_err(|e| format!("cannot be planned: {e}"));
            (r, p)
        })
        .collect();
    let reads: Vec<Result<Segment, PulseError>> = stream::iter(planned.into_iter().map(|(rec, p)| async move {
        Ok(match p {
            Ok(p) => {
                let read = Box::pin(read_page(deps, &rec, &p)).await?;
                Segment { rec, action: Action::Page(Box::new(p), read) }
            }
            Err(why) => Segment { rec, action: Action::Isolate(why) },
        })
    }))
    .buffered(deps.cfg.tenant_concurrency)
    .collect()
    .await;
    let segs: Vec<Segment> = reads.into_iter().collect::<Result<_, _>>()?;
    let tenants = read_tenants(deps, &segs).await?;
    let mut going_on = Vec::new();
    for chunk in segs.chunks(FIRE_CHUNK) {
        match Box::pin(write_chunk(deps, fence, now_ms, chunk, &tenants, report)).await? {
            Written::Yes => going_on.extend(chunk.iter().filter_map(advanced)),
            Written::LeftToNextTick => {}
            Written::LeaseLost => return Ok(Wrote::LeaseLost),
        }
    }
    // Groups larger than a page, each on alone.
    for (mut rec, plan) in going_on {
        loop {
            if budget.exhausted() {
                return Ok(Wrote::Stopped);
            }
            let read = Box::pin(read_page(deps, &rec, &plan)).await?;
            let seg = Segment { rec: rec.clone(), action: Action::Page(Box::new(plan.clone()), read) };
            let tenants = read_tenants(deps, std::slice::from_ref(&seg)).await?;
            match Box::pin(write_chunk(deps, fence, now_ms, std::slice::from_ref(&seg), &tenants, report)).await? {
                Written::Yes => match advanced(&seg) {
                    Some((next, _)) => rec = next,
                    None => break,
                },
                Written::LeftToNextTick => break,
                Written::LeaseLost => return Ok(Wrote::LeaseLost),
            }
        }
    }
    Ok(Wrote::All)
}

/// The record as it stands after `seg`'s page was written, when its group goes on.
fn advanced(seg: &Segment) -> Option<(DueRecord, FirePlan)> {
    let Action::Page(plan, read) = &seg.action else { return None };
    match crate::fire_plan::page_end(&seg.rec, plan, read) {
        RecordEnd::Advance(to) => Some((DueRecord { cursor: Some(to), ..seg.rec.clone() }, (**plan).clone())),
        _ => None,
    }
}

/// The next page of `rec`'s members for `plan`: after its cursor (a one-off group's from its
/// start: its fired members are deleted as they go). A group that may be retired — a one-off done,
/// or no member at its first page — has its head's joins read first, and an empty group is looked
/// at again after that read: a member that joined before it is seen, one after it moves the joins
/// and refuses the retirement.
async fn read_page(deps: &Deps, rec: &DueRecord, plan: &FirePlan) -> Result<PageRead, PulseError> {
    let s = &deps.schedules;
    let gid = rec.group.id();
    let one_off = rec.group.spec.one_off();
    let limit = member_page(plan, one_off) as i32;
    let start = if one_off { None } else { rec.cursor.as_deref() };
    let joins = if plan.finished { s.head_joins(&gid).await? } else { None };
    let (members, more) = s.members_page(&gid, start, limit).await?;
    if !members.is_empty() || rec.cursor.is_some() || plan.finished {
        return Ok(PageRead { members, more, joins });
    }
    let joins = s.head_joins(&gid).await?;
    let (members, more) = s.members_page(&gid, None, limit).await?;
    let joins = if members.is_empty() { joins } else { None };
    Ok(PageRead { members, more, joins })
}

/// The tenants of the members `segs` read.
async fn read_tenants(deps: &Deps, segs: &[Segment]) -> Result<HashMap<String, TenantRead>, PulseError> {
    let mut ids: Vec<&str> = segs
        .iter()
        .filter_map(|s| match &s.action {
            Action::Page(_, read) => {
                Some(read.members.iter().filter_map(|m| m.as_ref().ok()).map(|m| m.tenant.as_str()))
            }
            Action::Isolate(_) => None,
        })
        .flatten()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let read = deps.tenants.get_many(&ids).await?;
    Ok(read
        .into_iter()
        .map(|(id, t)| {
            let t = match t {
                Ok(t) => TenantRead::Found(t),
                Err(why) => TenantRead::Unreadable(why),
            };
            (id, t)
        })
        .collect())
}

/// How a chunk's transaction ended.
enum Written {
    Yes,
    /// A record changed under the sweep (another writer, a page written twice): nothing of the
    /// chunk was written, and a later tick reads what is left.
    LeftToNextTick,
    LeaseLost,
}

/// One transaction: the chunk's fires as batch items, its records moved on, fenced.
async fn write_chunk(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    chunk: &[Segment],
    tenants: &HashMap<String, TenantRead>,
    report: &mut Report,
) -> Result<Written, PulseError> {
    let ChunkPlan { batch, ends, fired, skipped, dropped, isolated, ready_ms, failures } =
        chunk_plan(chunk, tenants, now_ms);
    let mut queued = Vec::new();
    for item in fire_items(batch, ready_ms) {
        queued.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now_ms)?);
    }
    let moves: Vec<_> =
        ends.iter().flat_map(|(rec, end, finished)| deps.schedules.record_items(rec, end, finished)).collect();
    // Many pages (small groups, or a backlog caught up) make many items: halves, each its own
    // transaction, while the whole (with the fence) passes DynamoDB's transaction limits.
    let whole: Vec<_> =
        std::iter::once(fence.condition_check()).chain(queued.iter().cloned()).chain(moves.iter().cloned()).collect();
    if tickwork::limits::transaction(&whole).is_err() && chunk.len() > 1 {
        let (a, b) = chunk.split_at(chunk.len() / 2);
        return Ok(match Box::pin(write_chunk(deps, fence, now_ms, a, tenants, report)).await? {
            Written::LeaseLost => Written::LeaseLost,
            first => match Box::pin(write_chunk(deps, fence, now_ms, b, tenants, report)).await? {
                Written::Yes => first,
                other => other,
            },
        });
    }
    // A batch item already there holds exactly these units (its id is their digest): they are
    // queued, and the records move on without it. Anything else that fails leaves the chunk.
    for _ in 0..2 {
        let n = queued.len();
        let writes: Vec<_> = queued.iter().cloned().chain(moves.iter().cloned()).collect();
        match fenced_write(&deps.db, fence, writes).await? {
            Fenced::Written => {
                for (tenant, why) in &failures {
                    tracing::warn!(tenant = %tenant, why = %why, "schedule fire isolated: not handed over");
                }
                report.fires += fired;
                report.fires_skipped += skipped;
                report.schedules_dropped += dropped;
                report.failed_tenants += isolated;
                return Ok(Written::Yes);
            }
            Fenced::Stale => return Ok(Written::LeaseLost),
            Fenced::ConditionFailed { index, .. } if index < n => {
                queued.remove(index);
            }
            Fenced::ConditionFailed { index, .. } => {
                tracing::warn!(
                    index,
                    "a due record or group changed under the sweep: its chunk is left to the next tick"
                );
                return Ok(Written::LeftToNextTick);
            }
        }
    }
    tracing::warn!("a chunk whose fires were found queued twice could not be written: left to the next tick");
    Ok(Written::LeftToNextTick)
}
