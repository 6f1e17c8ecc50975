//! Schedules' fires: at a tick where the state item says a schedule is due (`sched_next`), every
//! due record of every due shard ([`tickwork::schedules::store`]) is read page by page, planned
//! ([`tickwork::schedules::plan`]: its definition and its tenant as they are now), its fires
//! enqueued, and replaced by its successor. Beside the calendar's runs, not woven into them: the
//! sweep calls this after its groups.
//!
//! ## One page, in order
//! 1. The due records (strongly consistent Query, key condition `sk < <now + 1>`), their
//!    definitions (BatchGetItem) and their tenants (GetItem each).
//! 2. Per chunk of records, one fenced transaction: the fires as batch items of kind
//!    [`SCHED_KIND`] (each unit keyed `sched#<tenant>#<name>#<occurrence>`), the successors put
//!    and the fired records deleted. All or nothing: a fire is queued exactly when its record
//!    moves on, so a crash anywhere repeats nothing and loses nothing (a batch write beside a
//!    plain put would re-fire after a crash, into a batch of another composition at a later tick).
//!
//! A record whose tenant or definition cannot be read, or that cannot be planned (a zone the tz
//! database does not know), is isolated: counted as a failed unit, set an hour ahead in the same
//! transaction, the rest of the page fired. A record that does not read at all is left in place. When every due record is done, `sched_next` becomes
//! the earliest record left, unless a schedule was added since the state item was read.

use std::collections::HashMap;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::queue::{enqueue_item, NewItem};
use tickwork::schedules::{DueRecord, FirePlan, DUE_SHARDS};
use tickwork::tenants::Tenant;

use crate::deps::Deps;
use crate::fire_plan::{chunk_plan, plan_records, Action, ChunkPlan, Planned};
use crate::report::{PulseError, Report};

pub use tickwork::schedules::SCHED_KIND;

/// Due records read a page.
pub const FIRE_PAGE: i32 = 200;

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
            if !fire_page(deps, fence, now_ms, page, report).await? {
                return Ok(FireEnd::LeaseLost);
            }
            match next {
                Some(n) => start = Some(n),
                None => break,
            }
        }
    }
    let earliest = deps.schedules.earliest().await?;
    // Records isolated as failed are still there and due: the earliest is one of them, and the
    // next tick reads them again (and reports them again) until an operator mends them.
    deps.schedules.set_next(earliest, adds_seen).await?;
    Ok(FireEnd::Done(earliest))
}

/// One page: `false` when the lease moved on.
async fn fire_page(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    page: Vec<Result<DueRecord, (tickwork::item::Item, String)>>,
    report: &mut Report,
) -> Result<bool, PulseError> {
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
    if records.is_empty() {
        return Ok(true);
    }
    let refs: Vec<&DueRecord> = records.iter().collect();
    let defs = deps.schedules.definitions(&refs).await?;
    let mut ids: Vec<&str> = records.iter().map(|r| r.tenant.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    // Boxed: an unboxed closure over borrowed ids is not accepted where the job's future must be
    // `Send` for every lifetime (as in the sweep's wake visits).
    let gets: Vec<BoxFuture<'_, Result<Option<Tenant>, tickwork::DbError>>> =
        ids.iter().map(|id| Box::pin(deps.tenants.get(id)) as BoxFuture<'_, _>).collect();
    let read: Vec<Result<Option<Tenant>, tickwork::DbError>> =
        stream::iter(gets).buffered(deps.cfg.tenant_concurrency).collect().await;
    let mut tenants: HashMap<&str, Option<Tenant>> = HashMap::new();
    let mut unreadable: HashMap<&str, String> = HashMap::new();
    for (id, r) in ids.iter().copied().zip(read) {
        match r {
            Ok(t) => {
                tenants.insert(id, t);
            }
            Err(e) if e.is_unit_specific() => {
                unreadable.insert(id, e.to_string());
            }
            Err(e) => return Err(e.into()),
        }
    }
    let planned = plan_records(&records, &defs, &tenants, &unreadable, now_ms, &deps.cfg.policy);
    for chunk in planned.chunks(FIRE_CHUNK) {
        if !write_chunk(deps, fence, now_ms, chunk, report).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Records replaced in one transaction: two writes each (the successor, the delete) beside the
/// fires' batch items and the fence, well inside a transaction's 100 items.
pub const FIRE_CHUNK: usize = 40;

/// One transaction: the chunk's fires as batch items, its records replaced, fenced. `false` when
/// the lease moved on.
async fn write_chunk(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    chunk: &[Planned],
    report: &mut Report,
) -> Result<bool, PulseError> {
    for p in chunk {
        match &p.plan {
            Action::Isolate(why) => {
                tracing::warn!(tenant = %p.rec.tenant, schedule = %p.rec.name, why = %why, "schedule isolated: tried again in an hour")
            }
            Action::Plan(FirePlan::Drop { why }) => {
                tracing::info!(tenant = %p.rec.tenant, schedule = %p.rec.name, why, "due record dropped unfired")
            }
            Action::Plan(FirePlan::Fire { .. }) => {}
        }
    }
    let ChunkPlan { batch, next, done, finished, fired, skipped, dropped, isolated, ready_ms } =
        chunk_plan(chunk, deps.schedules.job(), now_ms);
    let mut queued = Vec::new();
    for item in fire_items(batch, ready_ms) {
        queued.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now_ms)?);
    }
    let replace = deps.schedules.replace_items(&next, &done, &finished);
    // Many fires (a backlog caught up) make many batch items: halves, each its own transaction,
    // while the whole (with the fence) passes DynamoDB's transaction limits (tickwork::limits).
    let whole: Vec<_> =
        std::iter::once(fence.condition_check()).chain(queued.iter().cloned()).chain(replace.iter().cloned()).collect();
    if tickwork::limits::transaction(&whole).is_err() && chunk.len() > 1 {
        let (a, b) = chunk.split_at(chunk.len() / 2);
        return Ok(Box::pin(write_chunk(deps, fence, now_ms, a, report)).await?
            && Box::pin(write_chunk(deps, fence, now_ms, b, report)).await?);
    }
    // A batch item already there holds exactly these units (its id is their digest): they are
    // queued, and the records move on without it. Anything else that fails leaves the chunk.
    for _ in 0..2 {
        let n = queued.len();
        let writes: Vec<_> = queued.iter().cloned().chain(replace.iter().cloned()).collect();
        match fenced_write(&deps.db, fence, writes).await? {
            Fenced::Written => {
                report.fires += fired;
                report.fires_skipped += skipped;
                report.schedules_dropped += dropped;
                report.failed_tenants += isolated;
                return Ok(true);
            }
            Fenced::Stale => return Ok(false),
            Fenced::ConditionFailed { index, .. } if index < n => {
                queued.remove(index);
            }
            // A record another writer moved since the page was read: nothing of the chunk was
            // written; a later page or tick reads what is left.
            Fenced::ConditionFailed { index, .. } => {
                tracing::warn!(index, "a due record changed under the sweep: its chunk is left to the next tick");
                return Ok(true);
            }
        }
    }
    tracing::warn!("a chunk whose fires were found queued twice could not be written: left to the next tick");
    Ok(true)
}
