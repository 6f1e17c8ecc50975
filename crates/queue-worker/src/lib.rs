//! Queue worker: claim ready items, run each kind's handler, finish, retry or dead-letter.
//!
//! ## One invocation ([`drain`])
//! 1. Until the budget says stop: poll each shard (starting at a random one, so concurrent workers
//!    spread out) for up to `batch` ready items — a key-condition Query that never reads a claimed,
//!    unexpired item.
//! 2. Claim each candidate (conditional update; losing the race is normal and free of side effects)
//!    and stop claiming when the remaining time falls under the margin — the Lambda form of the
//!    spot-termination notice in `003_*`.
//! 3. Run the claimed jobs' handlers (bounded concurrency), then finish each (conditional on owner
//!    and claim generation) or fail it (retry with backoff, or dead-letter after the last attempt).
//!    Everything claimed is settled before returning.
//! 4. When a full round of polls finds nothing, return: an empty queue costs one Query per shard.
//!
//! Handlers implement [`Handler`]; a [`HandlerError::Permanent`] (undecodable payload, unknown kind)
//! dead-letters at once, a [`HandlerError::Retry`] goes through the backoff.

pub mod summary;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use serde::Serialize;
use serde_json::Value;
use tickwork::budget::{Budget, Deadline};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::queue::{Claim, Job, Queue, QueueConfig, QueueError, Settle};
use tickwork::Db;
use tickwork_lambda::{BadEvent, Base, Tick};

/// Why a handler did not complete a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Try again after the backoff.
    #[error("retryable: {0}")]
    Retry(String),
    /// Will never succeed (bad payload, unknown kind): dead-letter now.
    #[error("permanent: {0}")]
    Permanent(String),
}

/// The work for one kind of item. A handler only touches the rows of `job.tenant`.
pub trait Handler: Send + Sync {
    /// Runs the job; must be idempotent per job id (a job can run again after a crash).
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>>;
}

/// Handlers by kind.
#[derive(Clone, Default)]
pub struct Registry {
    map: HashMap<String, Arc<dyn Handler>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers `handler` for `kind`.
    pub fn with(mut self, kind: &str, handler: Arc<dyn Handler>) -> Self {
        self.map.insert(kind.to_string(), handler);
        self
    }
    /// The handler for `kind`.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Handler>> {
        self.map.get(kind)
    }
}

/// Worker settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Items polled per shard per round (`TICKWORK_WORKER_BATCH`, default 10).
    pub batch: i32,
    /// Handlers run at once (`TICKWORK_WORKER_CONCURRENCY`, default 4).
    pub concurrency: usize,
    /// Stop claiming this long before the deadline (`TICKWORK_DEADLINE_MARGIN_SECS`, default 5);
    /// must exceed the longest handler run.
    pub margin: Duration,
}

impl WorkerConfig {
    /// Reads and validates the settings.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let batch: i32 = env.parse_or("TICKWORK_WORKER_BATCH", 10)?;
        if !(1..=100).contains(&batch) {
            return Err(ConfigError::invalid("TICKWORK_WORKER_BATCH", format!("{batch} is not in 1..=100")));
        }
        Ok(Self {
            batch,
            concurrency: env.parse_or("TICKWORK_WORKER_CONCURRENCY", 4usize)?.max(1),
            margin: env.secs_or("TICKWORK_DEADLINE_MARGIN_SECS", Duration::from_secs(5))?,
        })
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self { batch: 10, concurrency: 4, margin: Duration::from_secs(5) }
    }
}

/// Counts from one invocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Report {
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
    /// Dead-lettered.
    pub dead_lettered: u64,
    /// Our claim expired before we settled it (someone else owns it now).
    pub lost: u64,
    /// Stopped claiming because of the deadline.
    pub stopped_by_deadline: bool,
}

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// The queue.
    pub queue: Queue,
    /// Handlers.
    pub handlers: Registry,
    /// Settings.
    pub cfg: WorkerConfig,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Deps {
    /// Builds from the environment; the `daily-summary` handler (and its `pulse` form) are registered.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "queue-worker").await?;
        let queue_table = env.get("TICKWORK_QUEUE_TABLE").unwrap_or_else(|| base.core.table("queue"));
        let summaries = env.get("TICKWORK_SUMMARIES_TABLE").unwrap_or_else(|| base.core.table("summaries"));
        let queue = Queue::new(base.db.clone(), queue_table, QueueConfig::from_env(env)?, base.clock.clone());
        Ok(Self {
            queue,
            handlers: summary::registry(base.db.clone(), &summaries, base.clock.clone()),
            cfg: WorkerConfig::from_env(env)?,
            clock: base.clock,
        })
    }

    fn db(&self) -> &Db {
        self.queue.db()
    }
}

/// Why an invocation failed (settled jobs stay settled; claimed, unsettled ones come back after
/// their visibility timeout).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// The queue.
    #[error(transparent)]
    Queue(#[from] QueueError),
}

impl From<WorkerError> for lambda_runtime::Diagnostic {
    fn from(e: WorkerError) -> Self {
        let error_type = match &e {
            WorkerError::BadEvent(_) => "BadEvent",
            WorkerError::Queue(_) => "Queue",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// The Lambda entry.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, WorkerError> {
    let tick = Tick::parse(&event)?;
    deps.db().meter().reset();
    let budget = Deadline::new(deps.clock.clone(), deadline_ms, deps.cfg.margin.as_millis() as i64);
    let owner = tickwork_lambda::owner_id("queue-worker");
    let report = if tick.dry_run {
        Report::default()
    } else {
        drain(&deps.queue, &deps.handlers, &owner, &budget, &deps.cfg).await?
    };
    deps.db().meter().emit("tickwork", "queue-worker", deps.clock.now_ms());
    tickwork::meter::emit_job_metrics(
        "tickwork",
        "queue-worker",
        deps.clock.now_ms(),
        &[
            ("Finished", report.finished as f64),
            ("Retried", report.retried as f64),
            ("DeadLettered", report.dead_lettered as f64),
            ("LostClaims", report.lost as f64),
            // Ready items the polls saw: what the queue held, as far as this invocation drained it.
            ("ReadySeen", report.candidates as f64),
        ],
    );
    tracing::info!(?report, "queue worker");
    Ok(report)
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
    let shards = queue.config().shards;
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
                }
            }
            r.claimed += jobs.len() as u64;
            // Finish what we hold, even when the deadline stopped further claims.
            let runs: Vec<BoxFuture<'_, Result<Settle, QueueError>>> =
                jobs.iter().map(|job| Box::pin(run_one(queue, handlers, job)) as BoxFuture<'_, _>).collect();
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
    Ok(r)
}

async fn run_one(queue: &Queue, handlers: &Registry, job: &Job) -> Result<Settle, QueueError> {
    let outcome = match handlers.get(&job.kind) {
        None => Err(HandlerError::Permanent(format!("no handler for kind `{}`", job.kind))),
        Some(h) => h.handle(job).await,
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
