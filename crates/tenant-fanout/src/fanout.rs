//! The work of a fan-out tick: for each due window, oldest first, every shard of the tenants
//! index paged from its checkpoint, one queue item per page of tenants (a batch,
//! [`tickwork::batch`]; its units are `<job>#<tenant>#<window>`).
//!
//! ## One window
//! 1. The slot record, strongly consistent: recorded means an earlier run finished the window
//!    (and perhaps crashed before its watermark, in the releases that wrote them apart): advance
//!    the watermark and move on.
//! 2. The window's checkpoint (one Query: a state per shard).
//! 3. Per shard not done (bounded concurrency): page tenants by cursor; per page, one batch item
//!    (id `<job>#<window>#<shard>#<hash of its first tenant>`, a conditional put) and the shard's
//!    new cursor in **one** fenced transaction: a crash repeats at most one page's reads, and a
//!    retried transaction whose answer was lost finds its own item. A tenant whose item is
//!    unreadable (its own fault) is isolated and recorded in the same transaction. Every shard's
//!    result is collected before any error is returned: one shard's failure never drops the
//!    pages the others have in flight.
//! 4. Every shard done: the slot record and the watermark in **one** fenced transaction, so they
//!    never disagree.

use std::sync::Mutex;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::budget::Budget;
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::clock::Millis;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::pager::{PageError, PageRun};
use tickwork::queue::{enqueue_item, QueueError};
use tickwork::DbError;
use tickwork_lambda::Outcome;

use crate::deps::Deps;
use crate::report::{FanoutError, Report};
use crate::window::batches_for;
use tickwork::db::MAX_TRANSACT_ITEMS;

/// Live (fenced by the lease) or dry (nothing written).
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    Live(&'a Fence),
    Dry,
}

#[derive(Debug, Default)]
struct ShardResult {
    tenants: u64,
    enqueued: u64,
    failed: u64,
    done: bool,
    lost: bool,
}

#[derive(Debug, thiserror::Error)]
enum PageStop {
    #[error(transparent)]
    Failed(#[from] FanoutError),
    #[error("lease lost")]
    Lost,
}

impl From<DbError> for PageStop {
    fn from(e: DbError) -> Self {
        PageStop::Failed(e.into())
    }
}

/// Steps 1 to 4 for each due window, oldest first, until one is left unfinished.
pub(crate) async fn fan_out(
    deps: &Deps,
    mode: Mode<'_>,
    windows: &[String],
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, FanoutError> {
    let job = deps.cfg.lease.job.clone();
    for window in windows {
        report.window = window.clone();
        report.shards_left = 0;
        if let Mode::Live(fence) = mode {
            if deps.slots.is_recorded(&job, window).await? {
                // Finished before; only its watermark is missing.
                if let tickwork::watermark::Advance::Stale =
                    deps.marks.advance(fence, crate::window::MARK_GROUP, window).await?
                {
                    report.outcome = Outcome::LostLease;
                    return Ok(report);
                }
                report.windows_done += 1;
                continue;
            }
        }
        let states = match mode {
            Mode::Live(_) => deps.checkpoints.read(&job, window).await?,
            Mode::Dry => Default::default(),
        };
        let todo: Vec<(u32, ShardState)> = (0..deps.tenants.shards())
            .map(|k| (k, Checkpoints::state_of(&states, &k.to_string()).clone()))
            .filter(|(_, s)| *s != ShardState::Done)
            .collect();
        let now = deps.clock.now_ms();
        let runs: Vec<BoxFuture<'_, Result<ShardResult, FanoutError>>> = todo
            .into_iter()
            .map(|(k, state)| Box::pin(shard(deps, mode, window, k, state, budget, now)) as BoxFuture<'_, _>)
            .collect();
        let results: Vec<Result<ShardResult, FanoutError>> =
            stream::iter(runs).buffer_unordered(deps.cfg.shard_concurrency).collect().await;
        let mut lost = false;
        let mut first_error = None;
        for r in results {
            match r {
                Ok(r) => {
                    report.tenants += r.tenants;
                    report.enqueued += r.enqueued;
                    report.failed_tenants += r.failed;
                    report.shards_left += u32::from(!r.done);
                    lost |= r.lost;
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if lost {
            report.outcome = Outcome::LostLease;
            return Ok(report);
        }
        if report.shards_left > 0 {
            report.outcome = match mode {
                Mode::Dry => Outcome::DryRun,
                Mode::Live(_) => Outcome::Partial,
            };
            return Ok(report);
        }
        match mode {
            Mode::Dry => {
                tracing::info!(window = %window, tenants = report.tenants, "dry run: would enqueue one batch per page");
                report.outcome = Outcome::DryRun;
                return Ok(report);
            }
            Mode::Live(fence) => {
                let writes = vec![
                    deps.slots.record_item(fence, window),
                    deps.marks.advance_item(&fence.job, crate::window::MARK_GROUP, window),
                ];
                match fenced_write(&deps.db, fence, writes).await? {
                    Fenced::Written => {}
                    // Recorded already (a duplicate run), or the watermark is there already: the
                    // watermark alone (forward only, so a no-op when it is).
                    Fenced::ConditionFailed { .. } => {
                        deps.marks.advance(fence, crate::window::MARK_GROUP, window).await?;
                    }
                    Fenced::Stale => {
                        report.outcome = Outcome::LostLease;
                        return Ok(report);
                    }
                }
                report.windows_done += 1;
            }
        }
    }
    report.outcome = Outcome::Completed;
    Ok(report)
}

async fn shard(
    deps: &Deps,
    mode: Mode<'_>,
    window: &str,
    k: u32,
    state: ShardState,
    budget: &dyn Budget,
    now: Millis,
) -> Result<ShardResult, FanoutError> {
    let res = Mutex::new(ShardResult::default());
    let shard_name = k.to_string();
    let run = deps
        .tenants
        .for_each_page(k, state.cursor(), deps.cfg.page_size, budget, |tenants, next| {
            let (res, shard_name) = (&res, &shard_name);
            async move {
                let mut ok = Vec::new();
                let mut failures = Vec::new();
                for t in tenants {
                    match t {
                        Ok(t) => ok.push(t),
                        Err(bad) => {
                            tracing::warn!(tenant = %bad.id, error = %bad, "tenant isolated: recorded and passed over");
                            failures.push((bad.id.clone(), bad.to_string()));
                        }
                    }
                }
                let seen = ok.len() + failures.len();
                if tickwork::failures::systemic(failures.len(), seen) {
                    return Err(PageStop::Failed(FanoutError::PageFailed {
                        failed: failures.len(),
                        of: seen,
                        first: failures[0].1.clone(),
                    }));
                }
                {
                    let mut r = res.lock().expect("res");
                    r.tenants += seen as u64;
                    r.failed += failures.len() as u64;
                }
                let Mode::Live(fence) = mode else { return Ok(()) };
                let at = deps.clock.now_ms();
                let mut writes = Vec::new();
                for item in batches_for(&deps.cfg.job, window, k, &ok, now) {
                    writes.push(
                        enqueue_item(deps.queue.table(), deps.queue.config(), &item, at)
                            .map_err(|e| PageStop::Failed(QueueError::from(e).into()))?,
                    );
                }
                let batches = writes.len();
                // Position after this page's effects, in the same transaction.
                let st = next.map(ShardState::Resume).unwrap_or(ShardState::Done);
                writes.push(deps.checkpoints.save_item(&fence.job, window, shard_name, &st));
                let records: Vec<_> = failures
                    .iter()
                    .map(|(t, e)| tickwork::failures::record(deps.leases.table(), &fence.job, window, t, e, at))
                    .collect();
                // Failure records ride in the page's transaction when they fit in it (100 items
                // with the fence, TransactWriteItems' limit); more are written first, fenced, in
                // transactions of their own (a record is an idempotent put: one written again
                // after a crash changes nothing).
                if writes.len() + records.len() < MAX_TRANSACT_ITEMS {
                    writes.extend(records);
                } else {
                    for chunk in records.chunks(MAX_TRANSACT_ITEMS - 1) {
                        match fenced_write(&deps.db, fence, chunk.to_vec()).await? {
                            Fenced::Written => {}
                            Fenced::Stale | Fenced::ConditionFailed { .. } => return Err(PageStop::Lost),
                        }
                    }
                }
                match fenced_write(&deps.db, fence, writes).await? {
                    Fenced::Written => {}
                    // A batch exists: this transaction landed before and its answer was lost.
                    Fenced::ConditionFailed { index, .. } if index < batches => {}
                    Fenced::Stale | Fenced::ConditionFailed { .. } => return Err(PageStop::Lost),
                }
                res.lock().expect("res").enqueued += ok.len() as u64;
                Ok(())
            }
        })
        .await;
    let mut res = res.into_inner().expect("res");
    match run {
        Ok(PageRun::Exhausted { .. }) => res.done = true,
        Ok(PageRun::Stopped { .. }) => {}
        Err(PageError::Handler(PageStop::Lost)) => res.lost = true,
        Err(PageError::Handler(PageStop::Failed(e))) => return Err(e),
        Err(PageError::Db(d)) => return Err(d.into()),
        Err(PageError::Cursor(c)) => return Err(c.into()),
    }
    Ok(res)
}
