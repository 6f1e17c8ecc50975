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
//! 4. When a full round of polls finds nothing, return: an empty queue costs one Query per shard.

use std::panic::AssertUnwindSafe;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use futures::FutureExt;
use serde::Serialize;
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
            let runs: Vec<BoxFuture<'_, Result<Settle, QueueError>>> =
                jobs.iter().map(|job| Box::pin(run_one(queue, handlers, job, cfg)) as BoxFuture<'_, _>).collect();
            let settled: Vec<Result<Settle, QueueError>> =
                stream::iter(runs).buffer_unordered(cfg.concurrency).collect().await;
            for s in settled {
                match s? {
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

/// Runs one job's handler, time-boxed and with panics caught, and settles the item.
async fn run_one(queue: &Queue, handlers: &Registry, job: &Job, cfg: &WorkerConfig) -> Result<Settle, QueueError> {
    let outcome = match handlers.get(&job.kind) {
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
    };
    match outcome {
        Ok(()) => queue.finish(job).await,
        Err(HandlerError::Retry(msg)) => {
            tracing::warn!(id = %job.id, kind = %job.kind, attempts = job.attempts, error = %msg, "job failed; will retry");
            queue.fail(job, &msg).await
        }
        Err(HandlerError::Permanent(msg)) => {
            tracing::error!(id = %job.id, kind = %job.kind, error = %msg, "job cannot succeed; dead-lettering");
            queue.dead_letter(job, &msg).await
        }
    }
}
