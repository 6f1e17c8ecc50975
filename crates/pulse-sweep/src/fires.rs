//! Schedules' fires: at a tick where the state item says a schedule is due (`sched_next`), every
//! due record of every due shard ([`tickwork::schedules::store`]) is read page by page. A record
//! is a group's (tenants sharing a zone, spec, policy, name and spread offset): it is planned once
//! ([`tickwork::schedules::plan`]), and its members are read a page at a time and fired as their
//! tenants stand now. Beside the calendar's runs, not woven into them: the sweep calls this after
//! its groups.
//!
//! ## A shard, in order
//! 1. Its cursor (GetItem), then the due records after it (strongly consistent Query from the
//!    cursor, key condition `sk < <now + 1>`), a page at a time; each record planned, and its
//!    successor decided ([`tickwork::schedules::successor`]: put before the transaction when it
//!    depends on the record alone; in a backlog, in it, unless an attempt before put the record's
//!    own, read first).
//! 2. Each record's first page of members (Query, strongly consistent, concurrently), and their
//!    tenants (BatchGetItem, strongly consistent, 100 a request).
//! 3. Per chunk of records, in order: the successors that depend on their records alone put
//!    (BatchWriteItem), then one fenced transaction of the fires as batch items of kind
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
//! counted and passed. A chunk that another writer changed under the sweep stops its shard until
//! the next tick (the cursor cannot pass it). When every due record is done, `sched_next` becomes
//! the earliest record after the cursors, unless a schedule was added since the state item was
//! read.

use std::collections::HashMap;

use futures::stream::{self, StreamExt};
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::queue::{enqueue_item, NewItem};
use tickwork::schedules::{plan, plan_own, successor, DueRecord, RecordEnd, Successor, DUE_SHARDS};

use crate::deps::Deps;
use crate::fire_plan::{chunk_plan, member_page, page_end, Action, ChunkPlan, PageRead, Planned, Segment, TenantRead};
use crate::report::{PulseError, Report};

pub use tickwork::schedules::SCHED_KIND;

/// Due records read a page.
pub const FIRE_PAGE: i32 = 200;

/// Records whose pages are written in one transaction: each a write or two at most beside the
/// fires' batch items, the fence and the shard cursor, well inside a transaction's 100 items.
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

/// How a shard's writes went.
enum Wrote {
    /// On to the next page.
    On,
    /// A chunk was changed under the sweep: the shard stops here until the next tick.
    Halted,
    Stopped,
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
    let s = &deps.schedules;
    let mut cursors = Vec::with_capacity(DUE_SHARDS as usize);
    for k in 0..DUE_SHARDS {
        let mut cursor = s.shard_cursor(k).await?;
        'pages: loop {
            if budget.exhausted() {
                return Ok(FireEnd::Stopped);
            }
            let start = cursor
                .as_deref()
                .map(|c| tickwork::pager::Cursor::encode(&s.due_key(k, c)))
                .transpose()
                .map_err(|e| PulseError::Db(tickwork::DbError::Invalid(e.to_string())))?;
            let (page, next) = s.due_page(k, now_ms, FIRE_PAGE, start.as_ref()).await?;
            // Boxed, as the pages' own futures below: a page's reads and writes held inline made
            // the sweep's future outgrow a test thread's stack.
            match Box::pin(fire_page(deps, fence, now_ms, k, &mut cursor, page, budget, report)).await? {
                Wrote::On if next.is_some() => {}
                Wrote::On | Wrote::Halted => break 'pages,
                Wrote::Stopped => return Ok(FireEnd::Stopped),
                Wrote::LeaseLost => return Ok(FireEnd::LeaseLost),
            }
        }
        cursors.push(cursor);
    }
    let earliest = s.earliest(&cursors).await?;
    // Records isolated as failed are set an hour ahead: the earliest may be one of them, and the
    // tick an hour on reads them again (and reports them again).
    s.set_next(earliest, adds_seen).await?;
    Ok(FireEnd::Done(earliest))
}

/// One due record read, or the sort key of one that does not read (the cursor passes it).
enum Step {
    Seg(Segment),
    Bad(String),
}

/// One page of shard `k`'s due records, in order, the shard's `cursor` moved as they are done.
#[allow(clippy::too_many_arguments)]
async fn fire_page(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut Option<String>,
    page: Vec<Result<DueRecord, (tickwork::item::Item, String)>>,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let steps: Vec<Result<Step, PulseError>> = stream::iter(page.into_iter().map(|r| async move {
        let rec = match r {
            Ok(r) => r,
            Err((key, problem)) => {
                tracing::error!(key = ?key, problem = %problem, "due record unreadable: counted and passed");
                let sk = tickwork::schema::get_s(&key, tickwork::schema::SK).unwrap_or_default().to_string();
                return Ok(Step::Bad(sk));
            }
        };
        let planned = match plan_record(deps, &rec, now_ms).await? {
            Ok(p) => p,
            Err(why) => return Ok(Step::Seg(Segment { rec, action: Action::Isolate(why) })),
        };
        let read = Box::pin(read_page(deps, &rec, &planned)).await?;
        Ok(Step::Seg(Segment { rec, action: Action::Page(Box::new(planned), read) }))
    }))
    .buffered(deps.cfg.tenant_concurrency)
    .collect()
    .await;
    let steps: Vec<Step> = steps.into_iter().collect::<Result<_, _>>()?;
    let segs: Vec<&Segment> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Seg(s) => Some(s),
            Step::Bad(_) => None,
        })
        .collect();
    let tenants = Box::pin(read_tenants(deps, &segs)).await?;
    // In order: complete records gathered into chunks; a group larger than a page goes on alone
    // (the records before it written first), so the cursor only ever passes records done.
    let mut pending: Vec<Segment> = Vec::new();
    let mut to: Option<String> = None;
    for step in steps {
        let seg = match step {
            Step::Bad(sk) => {
                report.failed_tenants += 1;
                to = Some(sk);
                continue;
            }
            Step::Seg(seg) => seg,
        };
        let sk = sk_of(deps, &seg.rec);
        if advances(&seg) {
            match Box::pin(flush(deps, fence, now_ms, k, cursor, &mut pending, &mut to, &tenants, report)).await? {
                Wrote::On => {}
                other => return Ok(other),
            }
            match Box::pin(run_alone(deps, fence, now_ms, k, cursor, seg, &tenants, budget, report)).await? {
                Wrote::On => continue,
                other => return Ok(other),
            }
        }
        pending.push(seg);
        to = Some(sk);
        if pending.len() == FIRE_CHUNK {
            match Box::pin(flush(deps, fence, now_ms, k, cursor, &mut pending, &mut to, &tenants, report)).await? {
                Wrote::On => {}
                other => return Ok(other),
            }
        }
    }
    Box::pin(flush(deps, fence, now_ms, k, cursor, &mut pending, &mut to, &tenants, report)).await
}

/// A record's plan and successor: `Err` naming why it cannot be planned. In a backlog, the
/// record's own successor is read first: put by an attempt before, it goes on, and the record
/// fires its own occurrence only.
async fn plan_record(deps: &Deps, rec: &DueRecord, now_ms: i64) -> Result<Result<Planned, String>, PulseError> {
    let policy = &deps.cfg.policy;
    let why = |e: tickwork::schedules::SpecError| format!("cannot be planned: {e}");
    let p = match plan(rec, now_ms, policy) {
        Ok(p) => p,
        Err(e) => return Ok(Err(why(e))),
    };
    let succ = match successor(rec, &p, now_ms) {
        Ok(s) => s,
        Err(e) => return Ok(Err(why(e))),
    };
    if let Successor::Within { check, .. } = &succ {
        if deps.schedules.record_exists(check.key(deps.schedules.job())).await? {
            return Ok(plan_own(rec, now_ms, policy)
                .map(|plan| Planned { plan, successor: Successor::None })
                .map_err(why));
        }
    }
    Ok(Ok(Planned { plan: p, successor: succ }))
}

/// The sort key of `rec` in its shard.
fn sk_of(deps: &Deps, rec: &DueRecord) -> String {
    tickwork::schema::get_s(&rec.key(deps.schedules.job()), tickwork::schema::SK).unwrap_or_default().to_string()
}

/// `seg`'s page is not its group's last.
fn advances(seg: &Segment) -> bool {
    match &seg.action {
        Action::Page(p, read) => matches!(page_end(&seg.rec, p, read), RecordEnd::Advance(_)),
        Action::Isolate(_) => false,
    }
}

/// Writes the `pending` records (the cursor moved to `to`), in chunks that fit a transaction.
#[allow(clippy::too_many_arguments)]
async fn flush(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut Option<String>,
    pending: &mut Vec<Segment>,
    to: &mut Option<String>,
    tenants: &HashMap<String, TenantRead>,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let Some(target) = to.take() else { return Ok(Wrote::On) };
    let chunk = std::mem::take(pending);
    match Box::pin(write_chunk(deps, fence, now_ms, k, cursor, &chunk, &target, tenants, report)).await? {
        Written::Yes => Ok(Wrote::On),
        Written::LeftToNextTick => Ok(Wrote::Halted),
        Written::LeaseLost => Ok(Wrote::LeaseLost),
    }
}

/// A group larger than a page, from `seg` (its first page, read) to its last page, each page its
/// own transaction; the last moves the shard cursor past it.
#[allow(clippy::too_many_arguments)]
async fn run_alone(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut Option<String>,
    mut seg: Segment,
    tenants: &HashMap<String, TenantRead>,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let sk = sk_of(deps, &seg.rec);
    let mut own_tenants = None;
    loop {
        let t = own_tenants.as_ref().unwrap_or(tenants);
        let Action::Page(planned, read) = &seg.action else { unreachable!("a set-aside record has one page") };
        let end = page_end(&seg.rec, planned, read);
        let written = match &end {
            RecordEnd::Advance(_) => {
                Box::pin(write_chunk(deps, fence, now_ms, k, cursor, std::slice::from_ref(&seg), "", t, report)).await?
            }
            _ => {
                Box::pin(write_chunk(deps, fence, now_ms, k, cursor, std::slice::from_ref(&seg), &sk, t, report))
                    .await?
            }
        };
        match (written, end) {
            (Written::Yes, RecordEnd::Advance(last)) => {
                if budget.exhausted() {
                    return Ok(Wrote::Stopped);
                }
                let rec = DueRecord { cursor: Some(last), ..seg.rec.clone() };
                let planned = (**planned).clone();
                let read = Box::pin(read_page(deps, &rec, &planned)).await?;
                seg = Segment { rec, action: Action::Page(Box::new(planned), read) };
                own_tenants = Some(Box::pin(read_tenants(deps, &[&seg])).await?);
            }
            (Written::Yes, _) => return Ok(Wrote::On),
            (Written::LeftToNextTick, _) => return Ok(Wrote::Halted),
            (Written::LeaseLost, _) => return Ok(Wrote::LeaseLost),
        }
    }
}

/// The next page of `rec`'s members for `p`: after its member cursor (a one-off group's from its
/// start: its fired members are deleted as they go). A group that may be retired — a one-off
/// done, or no member at its first page — has its head's joins read first, and an empty group is
/// looked at again after that read: a member that joined before it is seen, one after it moves
/// the joins and refuses the retirement.
async fn read_page(deps: &Deps, rec: &DueRecord, p: &Planned) -> Result<PageRead, PulseError> {
    let s = &deps.schedules;
    let gid = rec.group.id();
    let one_off = rec.group.spec.one_off();
    let limit = member_page(&p.plan, one_off) as i32;
    let start = if one_off { None } else { rec.cursor.as_deref() };
    let joins = if p.plan.finished { s.head_joins(&gid).await? } else { None };
    let (members, more) = s.members_page(&gid, start, limit).await?;
    if !members.is_empty() || rec.cursor.is_some() || p.plan.finished {
        return Ok(PageRead { members, more, joins });
    }
    let joins = s.head_joins(&gid).await?;
    let (members, more) = s.members_page(&gid, None, limit).await?;
    let joins = if members.is_empty() { joins } else { None };
    Ok(PageRead { members, more, joins })
}

/// The tenants of the members `segs` read.
async fn read_tenants(deps: &Deps, segs: &[&Segment]) -> Result<HashMap<String, TenantRead>, PulseError> {
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
    /// A record or the shard cursor changed under the sweep (another writer, a page written
    /// twice): nothing of the chunk was written, and a later tick reads what is left.
    LeftToNextTick,
    LeaseLost,
}

/// One transaction: the chunk's fires as batch items, its records' ends, and shard `k`'s cursor
/// moved from `cursor` to `to` (none: an advance within a group), fenced; the successors that
/// depend on their records alone put first.
#[allow(clippy::too_many_arguments)]
async fn write_chunk(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut Option<String>,
    chunk: &[Segment],
    to: &str,
    tenants: &HashMap<String, TenantRead>,
    report: &mut Report,
) -> Result<Written, PulseError> {
    let ChunkPlan { batch, ends, before, fired, skipped, dropped, isolated, ready_ms, failures } =
        chunk_plan(chunk, tenants, now_ms);
    let mut queued = Vec::new();
    for item in fire_items(batch, ready_ms) {
        queued.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now_ms)?);
    }
    let mut moves: Vec<_> =
        ends.iter().flat_map(|(rec, end, finished)| deps.schedules.record_items(rec, end, finished)).collect();
    if !to.is_empty() {
        moves.push(deps.schedules.cursor_move(k, cursor.as_deref(), to));
    }
    // Many pages (small groups, or a backlog caught up) make many items: halves, in order, each
    // its own transaction, while the whole (with the fence) passes DynamoDB's transaction limits.
    let whole: Vec<_> =
        std::iter::once(fence.condition_check()).chain(queued.iter().cloned()).chain(moves.iter().cloned()).collect();
    if tickwork::limits::transaction(&whole).is_err() && chunk.len() > 1 {
        let (a, b) = chunk.split_at(chunk.len() / 2);
        let mid = sk_of(deps, &a[a.len() - 1].rec);
        return Ok(match Box::pin(write_chunk(deps, fence, now_ms, k, cursor, a, &mid, tenants, report)).await? {
            Written::Yes => Box::pin(write_chunk(deps, fence, now_ms, k, cursor, b, to, tenants, report)).await?,
            other => other,
        });
    }
    Box::pin(deps.schedules.put_records(&before)).await?;
    // A batch item already there holds exactly these units (its id is their digest): they are
    // queued, and the records move on without it. Anything else that fails leaves the chunk.
    for _ in 0..2 {
        let n = queued.len();
        let writes: Vec<_> = queued.iter().cloned().chain(moves.iter().cloned()).collect();
        match Box::pin(fenced_write(&deps.db, fence, writes)).await? {
            Fenced::Written => {
                for (tenant, why) in &failures {
                    tracing::warn!(tenant = %tenant, why = %why, "schedule fire isolated: not handed over");
                }
                if !to.is_empty() {
                    *cursor = Some(to.to_string());
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
                    "a due record or the shard cursor changed under the sweep: the shard is left to the next tick"
                );
                return Ok(Written::LeftToNextTick);
            }
        }
    }
    tracing::warn!("a chunk whose fires were found queued twice could not be written: left to the next tick");
    Ok(Written::LeftToNextTick)
}
