//! Queue worker: claim ready items, run each kind's handler, finish, retry or dead-letter.
//!
//! The worker is a library as much as a Lambda: an application builds its own worker with its
//! own handlers registered ([`Deps::from_env_with`], [`Registry`]), and its `main.rs` stays the
//! same twenty lines. The protocol of one invocation is in [`mod@drain`].
//!
//! ## One invocation ([`handle`])
//! 1. Parse and guard the event (a malformed or future event is refused before any read). Two
//!    events start a drain: the slow safety schedule (an EventBridge scheduled event), and the
//!    queue table's stream (new items: [`signal_of`]), so an idle queue costs no request at all:
//!    the stream is read by Lambda's event source mapping, whose `GetRecords` calls the DynamoDB
//!    pricing page lists as free for Lambda triggers (not confirmed from a stored copy of that
//!    page; see `tickctl::bill`). An item retried with a backoff (a MODIFY, which the stream
//!    filter passes over) is waited for by the drain that failed it, or by the successor it
//!    hands on to ([`mod@drain`], step 6); the rest of a batch the deadline stopped is handed on.
//! 2. [`drain()`]: poll, claim, run, settle, until the queue is empty or the deadline nears; a
//!    pause marker in the ready index stops it before any claim (pausing costs no extra read).
//! 3. One metrics line (EMF) on every path: `Paused`, `FailedUnits` (dead letters), and the per-table detail.
//!
//! ## Layout
//! [`config`] settings; [`registry`] handlers by kind; [`targets`] kinds delivered to a Lambda
//! function, a queue or a bus; [`mod@drain`] the loop, `feed` its
//! candidates, `units` an item's units and its settle, `report` what it did, [`throttle`] a
//! target's refusals, [`fleet`] the drains at once and [`handon`] what each hands on; [`summary`]
//! the handlers this worker ships; this file the glue.

pub mod config;
pub mod drain;
mod feed;
pub mod fleet;
pub mod growing;
pub mod handon;
pub mod registry;
mod report;
pub mod summary;
pub mod targets;
pub mod throttle;
mod units;

use serde_json::Value;
use tickwork::budget::Deadline;
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::queue::{Queue, QueueConfig, QueueError};
use tickwork::Db;
use tickwork_lambda::{BadEvent, Base, JobReport, Outcome, Tick};

pub use config::WorkerConfig;
pub use drain::{drain, drain_with, Report};
pub use fleet::{DrainEvent, Fleet, Invoker, LambdaInvoker};
pub use registry::{Handler, HandlerError, Registry};

pub use config::{JOB, ROLE};

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
    /// Declared bound on clock differences (the event guard).
    pub skew: std::time::Duration,
    /// CloudWatch namespace of the metrics line.
    pub namespace: String,
    /// The drains at once and how one hands on ([`fleet`]); `None`: this drain alone.
    pub fleet: Option<Fleet>,
}

/// What a worker's handlers are built from.
pub struct HandlerContext<'a> {
    /// The metered client (handlers that write to DynamoDB use it, so their calls are billed to
    /// the worker and recorded).
    pub db: &'a Db,
    /// The wall clock.
    pub clock: &'a SharedClock,
    /// Settings.
    pub env: &'a Env,
    /// `<prefix>-<logical>` table names.
    pub core: &'a tickwork::config::CoreConfig,
}

impl Deps {
    /// The worker this crate's Lambda runs: the [`summary`] handlers.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        Self::from_env_with(env, |cx| {
            let summaries = cx.core.table_from(cx.env, vars::SUMMARIES_TABLE, "summaries");
            let fanout = cx.env.get(vars::FANOUT_JOB).unwrap_or_else(|| summary::UTC_DAILY.into());
            Ok(summary::registry_with_fanout_kind(cx.db.clone(), &summaries, cx.clock.clone(), &fanout))
        })
        .await
    }

    /// A worker with the handlers `handlers` registers: how an application runs its own jobs.
    pub async fn from_env_with(
        env: &Env,
        handlers: impl FnOnce(&HandlerContext<'_>) -> Result<Registry, ConfigError>,
    ) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "queue-worker").await?;
        let queue_table = base.core.table_from(env, vars::QUEUE_TABLE, "queue");
        let queue_cfg = QueueConfig::from_env(env)?;
        let cfg = WorkerConfig::from_core(env, &base.core, &queue_cfg)?;
        let registry = handlers(&HandlerContext { db: &base.db, clock: &base.clock, env, core: &base.core })?;
        let registry = targets::route(registry, env, &base.sdk, &base.clock)?;
        // Poll every ready shard any producer ever wrote to (tickwork::shard::ShardRegistry).
        let reg = tickwork::shard::ShardRegistry::new(base.db.clone(), &base.core.control_table);
        let shards = tickwork::iam::acting_as(ROLE, reg.resolve("queue", queue_cfg.shards))
            .await
            .map_err(tickwork_lambda::base::unresolved_shards)?;
        let invoker = LambdaInvoker::from_sdk(&base.sdk).map(|i| std::sync::Arc::new(i) as std::sync::Arc<dyn Invoker>);
        let fleet = Fleet::new(
            tickwork::lease::LeaseStore::new(base.db.clone(), &base.core.control_table, base.clock.clone()),
            invoker,
            cfg.drains,
            cfg.slot_hold(&queue_cfg),
            base.core.clock_skew,
        )?;
        Ok(Self {
            queue: Queue::new(base.db.clone(), queue_table, queue_cfg, base.clock.clone()).with_poll_shards(shards),
            handlers: registry,
            cfg,
            clock: base.clock,
            skew: base.core.clock_skew,
            namespace: base.core.metrics_namespace.clone(),
            fleet: Some(fleet),
        })
    }

    /// Builds from parts (tests, local drivers).
    pub fn new(queue: Queue, handlers: Registry, cfg: WorkerConfig, clock: SharedClock) -> Self {
        Self {
            queue,
            handlers,
            cfg,
            clock,
            skew: std::time::Duration::from_secs(1),
            namespace: "tickwork".into(),
            fleet: None,
        }
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

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        // Dead-lettered units are failed units (the one failed-units metric and alarm), whether
        // a whole item or a batch's units went; the lag is the age of the oldest ready item seen.
        vec![("FailedUnits", self.dead_units as f64), ("QueueLag", self.oldest_ready_ms as f64 / 1000.0)]
    }
}

/// The Lambda entry.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, WorkerError> {
    tickwork::iam::acting_as(ROLE, handle_as(deps, event, deadline_ms)).await
}

async fn handle_as(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, WorkerError> {
    deps.db().meter().reset();
    let result = run(deps, &event, deadline_ms).await;
    let (outcome, report, error) = match &result {
        Ok(r) => (r.outcome.name().to_string(), Some(r), None),
        Err(e) => ("failed".to_string(), None, Some(tickwork_lambda::error_chain(e))),
    };
    tickwork_lambda::job::emit(
        deps.db().meter(),
        &deps.namespace,
        JOB,
        deps.clock.now_ms(),
        &outcome,
        report,
        error.as_deref(),
    );
    match &result {
        Ok(r) => {
            tracing::info!(outcome = %r.outcome.name(), report = %serde_json::to_string(r).unwrap_or_default(), "queue worker")
        }
        Err(e) => tracing::error!(error = %tickwork_lambda::error_chain(e), "queue worker failed"),
    }
    result
}

/// The queue table's stream delivered new items (a DynamoDB Streams event: `Records`, each from
/// `aws:dynamodb` and, when it names its stream, `queue_table`'s): the records themselves are not
/// read, the drain polls the ready index as a scheduled tick does. `None` when the event is not a
/// stream event; an error naming the field when it claims to be one and is not (no record, another
/// source, another table's stream wired in by mistake).
pub fn signal_of(event: &Value, queue_table: &str) -> Option<Result<usize, BadEvent>> {
    tickwork_lambda::stream::records_of(event, queue_table).map(|r| r.map(<[Value]>::len))
}

async fn run(deps: &Deps, event: &Value, deadline_ms: Millis) -> Result<Report, WorkerError> {
    let slot = DrainEvent::parse(event).transpose()?;
    if slot.is_none() {
        match signal_of(event, deps.queue.table()) {
            Some(signal) => {
                signal?;
            }
            None => {
                let tick = Tick::parse(event)?;
                tick.guard(deps.clock.now_ms(), deps.cfg.interval.as_millis() as i64, deps.skew.as_millis() as i64)?;
                if tick.dry_run {
                    return Ok(Report { outcome: Outcome::DryRun, ..Default::default() });
                }
            }
        }
    }
    let started_ms = deps.clock.now_ms();
    let budget = Deadline::new(deps.clock.clone(), deadline_ms, deps.cfg.stop_before().as_millis() as i64);
    let owner = tickwork_lambda::owner_id("queue-worker");
    let Some(fleet) = &deps.fleet else {
        return Ok(drain(&deps.queue, &deps.handlers, &owner, &budget, &deps.cfg).await?);
    };
    let full_budget = deadline_ms - started_ms - deps.cfg.stop_before().as_millis() as i64;
    let grow = growing::Growing::new(fleet, slot.clone(), full_budget);
    let link = slot.as_ref().map(|e| e.link.clone()).unwrap_or_default();
    // A failed predecessor's backoff (handon): its fault has had time to pass.
    let wait = handon::wait_ms(&link, started_ms, full_budget);
    if wait > 0 {
        tracing::info!(
            wait_ms = wait,
            failures = link.failures,
            "after a failed drain: waiting before the first request"
        );
        tokio::time::sleep(std::time::Duration::from_millis(wait as u64)).await;
    }
    let (mut r, failed) =
        drain::drain_until(&deps.queue, &deps.handlers, &owner, &budget, &deps.cfg, &grow, &link.retry_at_ms).await;
    // Hand on (fleet step 2, handon): a slot drain (or one that took a slot) always ends its
    // slot, starting its successor when there is work left, retries it could not stay for
    // (drain step 6), or a failure (a bounded chain, after a backoff); a drain outside a slot
    // starts one in any free slot for the same reasons. A failed drain still fails its
    // invocation: the error is on the `Errors` alarm and in the failed-ticks queue.
    let now = deps.clock.now_ms();
    let retry_at = handon::handed_retries(&r.retry_at_ms, now, full_budget);
    let next = handon::next_link(failed.is_some(), r.work_left, &retry_at, link.failures, now);
    let handed = match grow.early() {
        // Handed on when the budget ended (`growing`).
        Some(early) => match (early.handed.is_some(), grow.own()) {
            // A slot taken after that hand-on (a backlog seen at the stop) is ended as any is.
            (started, Some(ev)) if !early.slot_ended => {
                let rest = if started { handon::beyond(next, early.handed.as_ref()) } else { next };
                fleet.end_slot_with(&ev, rest.as_ref()).await || started
            }
            // A successor runs: only what its link did not cover goes to a free slot.
            (true, _) => {
                if let Some(l) = handon::beyond(next, early.handed.as_ref()) {
                    fleet.hand_on_any(&l).await;
                }
                true
            }
            // The slot was given up and no successor started in it (a twin's took it, or the
            // Invoke failed): its slot again and only it, as a drain ending would.
            (false, Some(ev)) => fleet.end_slot_with(&ev, next.as_ref()).await,
            (false, None) => match &next {
                Some(l) => fleet.hand_on_any(l).await,
                None => false,
            },
        },
        None => match grow.own() {
            Some(ev) => fleet.end_slot_with(&ev, next.as_ref()).await,
            None => match &next {
                Some(l) => fleet.hand_on_any(l).await,
                None => false,
            },
        },
    };
    if let Some(e) = failed {
        if handed {
            tracing::warn!(
                failures = link.failures + 1,
                "the drain failed; a successor runs (after a backoff, unless it started when the budget ended)"
            );
        }
        return Err(e.into());
    }
    r.handed_on = handed;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_event_signals_work_and_a_scheduled_event_does_not() {
        let arn = "arn:aws:dynamodb:us-east-1:123456789012:table/app-queue/stream/2026-11-30T00:00:00.000";
        let stream = serde_json::json!({"Records": [
            {"eventSource": "aws:dynamodb", "eventName": "INSERT", "eventSourceARN": arn,
             "dynamodb": {"Keys": {"pk": {"S": "pulse#x"}}}}
        ]});
        assert_eq!(signal_of(&stream, "app-queue"), Some(Ok(1)));
        let e = signal_of(&stream, "other-queue").unwrap().unwrap_err().to_string();
        assert!(e.contains("eventSourceARN") && e.contains("other-queue"), "{e}");
        let tick = serde_json::json!({"time": "2026-11-30T00:00:00Z", "detail-type": "Scheduled Event"});
        assert_eq!(signal_of(&tick, "app-queue"), None);
        let sqs = serde_json::json!({"Records": [{"eventSource": "aws:sqs"}]});
        let e = signal_of(&sqs, "app-queue").unwrap().unwrap_err().to_string();
        assert!(e.contains("aws:sqs") && e.contains("Records[0]"), "{e}");
        assert!(signal_of(&serde_json::json!({"Records": 3}), "app-queue").unwrap().is_err());
        let e = signal_of(&serde_json::json!({"Records": []}), "app-queue").unwrap().unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
    }
}
