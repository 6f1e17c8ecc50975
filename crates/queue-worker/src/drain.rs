//! The drain loop: poll, claim, run, settle, until the queue is empty or the budget says stop.
//!
//! 1. Until the budget says stop: poll each shard (starting at a random one, so concurrent workers
//!    spread out) for up to `batch` ready items — a key-condition Query that never reads a claimed,
//!    unexpired item. A pause marker among them stops the worker before it claims anything.
//! 2. Claim each candidate (conditional update; losing the race is normal and free of side
//!    effects; an item whose claims are exhausted is dead-lettered there) and stop claiming when
//!    the remaining time falls under the margin — the Lambda form of the spot-termination notice
//!    in `003_*`.
//! 3. Run the claimed jobs' handlers (bounded concurrency), each **time-boxed** (a handler that
//!    hangs is stopped and its item retried) and **caught** (a handler that panics fails its own
//!    item, not its batch-mates); then finish each (conditional on owner and claim generation) or
//!    fail it (retry with backoff, or dead-letter after the last attempt). Everything claimed is
//!    settled before returning.
//!    An item that carries a batch ([`tickwork::batch`]) runs its units the same way, each as a
//!    job of its own (its unit key is the job id the handler is idempotent on); units stop
//!    starting when the budget is spent. One settle covers the item: finished when every unit
//!    is, otherwise the units left (failed or not started) go back as a smaller batch and the
//!    ones that can never succeed become a dead letter of their own — one bad tenant never holds
//!    back the others.
//! 4. When a full round of polls finds nothing, return: an empty queue costs one Query per shard.

use std::panic::AssertUnwindSafe;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use serde::Serialize;
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::queue::{Claim, Job, Queue, QueueError, Settle, PAUSE_PREFIX};

use crate::config::WorkerConfig;
use crate::registry::{HandlerError, Registry};

/// Counts from one invocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: tickwork_lambda::Outcome,
    /// Poll queries made.
    pub polls: u64,
    /// Candidates seen.
    pub candidates: u64,
    /// Items claimed.
    pub claimed: u64,
    /// Claims lost to another worker.
    pub taken: u64,
    /// Finished.
    pub finished: u64,
    /// Failed and scheduled for retry.
    pub retried: u64,
    /// Dead-lettered (failed permanently, out of attempts, or exhausted by dead workers).
    pub dead_lettered: u64,
    /// Our claim expired before we settled it (someone else owns it now).
    pub lost: u64,
    /// Units run from batches (each a handler call).
    pub units: u64,
    /// Units that failed (retried later or dead-lettered).
    pub units_failed: u64,
    /// Stopped claiming because of the deadline.
    pub stopped_by_deadline: bool,
}

/// Claims and runs ready items until the queue is empty or `budget` says stop.
pub async fn drain(
    queue: &Queue,
    handlers: &Registry,
    owner: &str,
    budget: &dyn Budget,
    cfg: &WorkerConfig,
) -> Result<Report, QueueError> {
    let mut r = Report::default();
    let shards = queue.poll_shards();
    let offset = fastrand::u32(0..shards);
    'rounds: loop {
        let mut found = false;
        for i in 0..shards {
            if budget.exhausted() {
                r.stopped_by_deadline = true;
                break 'rounds;
            }
            let k = (offset + i) % shards;
            let candidates = queue.poll(k, cfg.batch).await?;
            r.polls += 1;
            if candidates.iter().any(|c| c.id.starts_with(PAUSE_PREFIX)) {
                r.outcome = tickwork_lambda::Outcome::Paused;
                return Ok(r);
            }
            r.candidates += candidates.len() as u64;
            if candidates.is_empty() {
                continue;
            }
            found = true;
            let mut jobs = Vec::with_capacity(candidates.len());
            for c in candidates {
                if budget.exhausted() {
                    r.stopped_by_deadline = true;
                    break;
                }
                match queue.claim(&c.id, owner).await? {
                    Claim::Claimed(job) => jobs.push(job),
                    Claim::Taken => r.taken += 1,
                    Claim::DeadLettered => r.dead_lettered += 1,
                }
            }
            r.claimed += jobs.len() as u64;
            // Finish what we hold, even when the deadline stopped further claims.
            let runs: Vec<BoxFuture<'_, Result<(Settle, UnitCounts), QueueError>>> = jobs
                .iter()
                .map(|job| Box::pin(run_one(queue, handlers, job, cfg, budget)) as BoxFuture<'_, _>)
                .collect();
            let settled: Vec<Result<(Settle, UnitCounts), QueueError>> =
                stream::iter(runs).buffer_unordered(cfg.concurrency).collect().await;
            for s in settled {
                let (s, u) = s?;
                r.units += u.run;
                r.units_failed += u.failed;
                match s {
                    Settle::Settled => r.finished += 1,
                    Settle::Retrying { .. } => r.retried += 1,
                    Settle::DeadLettered => r.dead_lettered += 1,
                    Settle::NotOwner => r.lost += 1,
                }
            }
            if r.stopped_by_deadline {
                break 'rounds;
            }
        }
        if !found {
            break;
        }
    }
    r.outcome = match (r.stopped_by_deadline, r.claimed + r.dead_lettered) {
        (true, _) => tickwork_lambda::Outcome::Partial,
        (false, 0) => tickwork_lambda::Outcome::Idle,
        (false, _) => tickwork_lambda::Outcome::Completed,
    };
    Ok(r)
}

/// Units run and failed in one item's batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct UnitCounts {
    run: u64,
    failed: u64,
}

/// Runs one job's handler (or its batch's units), time-boxed and with panics caught, and settles
/// the item.
async fn run_one(
    queue: &Queue,
    handlers: &Registry,
    job: &Job,
    cfg: &WorkerConfig,
    budget: &dyn Budget,
) -> Result<(Settle, UnitCounts), QueueError> {
    match Batch::of_job(job) {
        None => {}
        Some(Ok(b)) => return run_batch(queue, handlers, job, &b, cfg, budget).await,
        Some(Err(e)) => {
            tracing::error!(id = %job.id, error = %e, "batch cannot be read; dead-lettering");
            return Ok((queue.dead_letter(job, &e).await?, UnitCounts::default()));
        }
    }
    let settle = match call(handlers, job, cfg).await {
        Ok(()) => queue.finish(job).await,
        Err(HandlerError::Retry(msg)) => {
            tracing::warn!(id = %job.id, kind = %job.kind, attempts = job.attempts, error = %msg, "job failed; will retry");
            queue.fail(job, &msg).await
        }
        Err(HandlerError::Permanent(msg)) => {
            tracing::error!(id = %job.id, kind = %job.kind, error = %msg, "job cannot succeed; dead-lettering");
            queue.dead_letter(job, &msg).await
        }
    }?;
    Ok((settle, UnitCounts::default()))
}

/// What happened to one unit of a batch.
#[derive(Debug)]
enum UnitEnd {
    Done,
    NotStarted,
    Failed(HandlerError),
}

/// Runs a batch's units and settles the item once ([`Queue::settle_batch`]).
async fn run_batch(
    queue: &Queue,
    handlers: &Registry,
    job: &Job,
    b: &Batch,
    cfg: &WorkerConfig,
    budget: &dyn Budget,
) -> Result<(Settle, UnitCounts), QueueError> {
    let units = b.units(&job.kind);
    let runs: Vec<BoxFuture<'_, (String, UnitEnd)>> = units
        .iter()
        .map(|u| {
            Box::pin(async move {
                if budget.exhausted() {
                    return (u.key.clone(), UnitEnd::NotStarted);
                }
                let unit = Job {
                    id: u.key.clone(),
                    payload: u.payload.clone(),
                    tenant: Some(u.tenant.clone()),
                    ..job.clone()
                };
                match call(handlers, &unit, cfg).await {
                    Ok(()) => (u.key.clone(), UnitEnd::Done),
                    Err(e) => {
                        tracing::warn!(id = %job.id, unit = %u.key, error = %e, "unit failed");
                        (u.key.clone(), UnitEnd::Failed(e))
                    }
                }
            }) as BoxFuture<'_, _>
        })
        .collect();
    let ends: Vec<(String, UnitEnd)> = stream::iter(runs).buffer_unordered(cfg.concurrency).collect().await;
    let sorted = sort_ends(ends, units.len(), job.attempts >= queue.config().max_attempts);
    if sorted.left.is_empty() && sorted.dead.is_empty() {
        return Ok((queue.finish(job).await?, sorted.counts));
    }
    let remaining = (!sorted.left.is_empty()).then(|| b.subset(&job.kind, |k| sorted.left.contains(k)).to_payload());
    let dead_payload = (!sorted.dead.is_empty()).then(|| b.subset(&job.kind, |k| sorted.dead.contains(k)).to_payload());
    let dead_why = sorted.dead_why.unwrap_or_default();
    let settle = queue
        .settle_batch(
            job,
            remaining.as_deref(),
            sorted.error.as_deref(),
            dead_payload.as_deref().map(|p| (p, dead_why.as_str())),
        )
        .await?;
    Ok((settle, sorted.counts))
}

/// A batch's units as they ended, sorted for its one settle.
#[derive(Debug, Default, PartialEq)]
struct Sorted {
    /// Units to run again (failed with a retry left, or not started).
    left: std::collections::BTreeSet<String>,
    /// Units dead-lettered (failed for good, or failed on the item's last attempt).
    dead: std::collections::BTreeSet<String>,
    /// Why units go back after a backoff; `None` when only the deadline stopped them (the claim
    /// then does not count as an attempt).
    error: Option<String>,
    /// Why the dead ones are dead (the first).
    dead_why: Option<String>,
    counts: UnitCounts,
}

/// Sorts unit ends. Pure. Attempts are counted per item, so on its last attempt a unit that failed
/// goes to the dead letters alone, and the units the deadline kept from starting go back without
/// losing an attempt: one failing unit never takes its batch-mates with it. A key that ended twice
/// (a tenant listed twice) is dead if either run was.
fn sort_ends(ends: Vec<(String, UnitEnd)>, total: usize, last_attempt: bool) -> Sorted {
    let mut s = Sorted::default();
    let (mut retry_err, mut retries) = (None, 0u64);
    for (key, end) in ends {
        match end {
            UnitEnd::Done => s.counts.run += 1,
            UnitEnd::NotStarted => {
                s.left.insert(key);
            }
            UnitEnd::Failed(HandlerError::Retry(m)) if last_attempt => {
                s.counts.run += 1;
                s.counts.failed += 1;
                s.dead_why.get_or_insert_with(|| format!("{key}: failed on the last attempt: {m}"));
                s.dead.insert(key);
            }
            UnitEnd::Failed(HandlerError::Retry(m)) => {
                s.counts.run += 1;
                s.counts.failed += 1;
                retries += 1;
                retry_err.get_or_insert_with(|| format!("{key}: {m}"));
                s.left.insert(key);
            }
            UnitEnd::Failed(HandlerError::Permanent(m)) => {
                s.counts.run += 1;
                s.counts.failed += 1;
                s.dead_why.get_or_insert_with(|| format!("{key}: {m}"));
                s.dead.insert(key);
            }
        }
    }
    s.left.retain(|k| !s.dead.contains(k));
    s.error = retry_err.map(|first| format!("{retries} of {total} units failed; first: {first}"));
    s
}

/// One handler call, time-boxed and with panics caught.
async fn call(handlers: &Registry, job: &Job, cfg: &WorkerConfig) -> Result<(), HandlerError> {
    match handlers.get(&job.kind) {
        None => Err(HandlerError::Permanent(format!("no handler for kind `{}`", job.kind))),
        Some(h) => {
            match tokio::time::timeout(cfg.handler_timeout, AssertUnwindSafe(h.handle(job)).catch_unwind()).await {
                Ok(Ok(r)) => r,
                Ok(Err(panic)) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    Err(HandlerError::Retry(format!("handler panicked: {what}")))
                }
                Err(_) => {
                    Err(HandlerError::Retry(format!("handler ran longer than {} s", cfg.handler_timeout.as_secs_f64())))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(v: &[(&str, &str)]) -> Vec<(String, UnitEnd)> {
        v.iter()
            .map(|(k, e)| {
                let end = match *e {
                    "done" => UnitEnd::Done,
                    "not started" => UnitEnd::NotStarted,
                    "retry" => UnitEnd::Failed(HandlerError::Retry("slow".into())),
                    _ => UnitEnd::Failed(HandlerError::Permanent("bad".into())),
                };
                (k.to_string(), end)
            })
            .collect()
    }

    fn set(v: &[&str]) -> std::collections::BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn failures_go_back_with_an_error_and_the_deadline_alone_costs_no_attempt() {
        let s = sort_ends(ends(&[("a", "done"), ("b", "retry"), ("c", "not started"), ("d", "permanent")]), 4, false);
        assert_eq!((s.left, s.dead.clone()), (set(&["b", "c"]), set(&["d"])));
        assert_eq!(s.error.as_deref(), Some("1 of 4 units failed; first: b: slow"));
        assert_eq!(s.dead_why.as_deref(), Some("d: bad"));
        assert_eq!(s.counts, UnitCounts { run: 3, failed: 2 });
        let s = sort_ends(ends(&[("a", "done"), ("c", "not started")]), 2, false);
        assert_eq!((s.left, s.error), (set(&["c"]), None), "only the deadline: no attempt spent");
    }

    #[test]
    fn on_the_last_attempt_only_the_failed_units_are_dead() {
        let s = sort_ends(ends(&[("a", "done"), ("b", "retry"), ("c", "not started")]), 3, true);
        assert_eq!((s.left, s.dead), (set(&["c"]), set(&["b"])), "c never ran: it goes back");
        assert_eq!(s.error, None, "so that c's next claim is not an attempt past the last");
        assert!(s.dead_why.unwrap().contains("last attempt"));
    }

    #[test]
    fn a_key_that_ended_twice_is_in_one_place() {
        let s = sort_ends(ends(&[("a", "retry"), ("a", "permanent")]), 2, false);
        assert_eq!((s.left, s.dead), (set(&[]), set(&["a"])));
    }
}
