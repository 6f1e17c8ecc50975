//! Tenant fan-out: turn "every tenant" into one unit of work per tenant per UTC day, carried one
//! page of tenants per queue item.
//!
//! Why (`000_*`): the tenant list behind a daily job stopped at one page with no cursor, and most
//! tenants silently never got their daily work. Here every shard of the tenants index is paged by
//! cursor to exhaustion; near the deadline the per-shard cursors are persisted and the next
//! invocation resumes; a window is recorded complete only when every shard is drained, and a
//! window not finished during its own day is caught up on the next ticks.
//!
//! The fan-out owns per-UTC-day work (its default job is `utc-daily`). Per-tenant *local* days
//! belong to the pulse sweep's day pulses: a daily summary is the end of a tenant's own day, which
//! for a tenant west of UTC comes hours after the UTC date turns. One producer per meaning.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; its `time` names today's window.
//! 2. Read the watermark item (1 eventually consistent GetItem): paused → stop; no window after
//!    the watermark through today ([`window::due_windows`]) → stop. This is the whole cost of an
//!    idle invocation.
//! 3. Take the job's lease (kept on success, released on failure).
//! 4. [`fanout`]: each due window, oldest first.
//!
//! ## Layout
//! [`config`] settings; [`window`] windows and items (pure); [`fanout`] the work; this file the
//! job's glue.

pub mod config;
mod fanout;
pub mod window;

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::checkpoint::{CheckpointError, Checkpoints};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::{Lease, LeaseStore};
use tickwork::queue::{Queue, QueueConfig, QueueError};
use tickwork::slot::Slots;
use tickwork::tenants::Tenants;
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, JobCore, JobReport, LeasedJob, Tick};

pub use config::FanoutConfig;
pub use tickwork_lambda::Outcome;
pub use window::{batch_for, window_of};

/// The watermark group of the fan-out: one mark, the last window completed.
pub const MARK_GROUP: &str = "all";

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered client.
    pub db: Db,
    /// Settings.
    pub cfg: FanoutConfig,
    /// Tenants table.
    pub tenants: Tenants,
    /// The queue items go to.
    pub queue: Queue,
    /// Leases.
    pub leases: LeaseStore,
    /// Slot records.
    pub slots: Slots,
    /// Watermark and pause switch.
    pub marks: Watermarks,
    /// Per-shard cursors.
    pub checkpoints: Checkpoints,
    /// Wall clock (lease expiry, deadlines).
    pub clock: SharedClock,
}

/// Physical table names.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Control table.
    pub control: String,
    /// Tenants table.
    pub tenants: String,
    /// Queue table.
    pub queue: String,
}

impl Deps {
    /// Builds everything from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "tenant-fanout").await?;
        let cfg = FanoutConfig::from_core(env, &base.core)?;
        let tenant_shards = env.int_in(vars::TENANT_SHARDS, 8u32, 1..=1000)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
            queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
        };
        let queue_cfg = QueueConfig::from_env(env)?;
        let mut d = Self::new(base.db, base.clock, cfg, &tables, tenant_shards, queue_cfg);
        d.core.namespace = base.core.metrics_namespace.clone();
        Ok(d.resolve_shards().await)
    }

    /// Start-up: records the shard counts this process writes with and enumerates every tenant
    /// shard ever written to ([`tickwork::shard::ShardRegistry`]).
    pub async fn resolve_shards(mut self) -> Self {
        let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), self.leases.table());
        reg.resolve("queue", self.queue.config().shards).await;
        let n = reg.resolve("tenants", self.tenants.write_shards()).await;
        self.tenants = self.tenants.with_read_shards(n);
        self
    }

    /// Builds from parts (tests, local drivers).
    pub fn new(
        db: Db,
        clock: SharedClock,
        cfg: FanoutConfig,
        t: &Tables,
        tenant_shards: u32,
        queue: QueueConfig,
    ) -> Self {
        let retention = Duration::from_secs(14 * 86_400);
        let marks = Watermarks::new(db.clone(), &t.control, clock.clone());
        let leases = LeaseStore::new(db.clone(), &t.control, clock.clone());
        Self {
            core: JobCore {
                function: "tenant-fanout",
                db: db.clone(),
                clock: clock.clone(),
                leases: leases.clone(),
                marks: marks.clone(),
                lease: cfg.lease.clone(),
                margin: cfg.margin,
                dry_run: cfg.dry_run,
                namespace: "tickwork".into(),
            },
            tenants: Tenants::new(db.clone(), &t.tenants, tenant_shards),
            queue: Queue::new(db.clone(), &t.queue, queue, clock.clone()),
            slots: Slots::new(db.clone(), &t.control, clock.clone(), retention),
            checkpoints: Checkpoints::new(db.clone(), &t.control, clock.clone(), retention),
            leases,
            marks,
            db,
            cfg,
            clock,
        }
    }
}

/// What an invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The window worked on last (`2026-11-29`).
    pub window: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Windows due (the oldest unfinished through today).
    pub windows_due: u32,
    /// Windows completed by this invocation.
    pub windows_done: u32,
    /// Tenants visited in this invocation.
    pub tenants: u64,
    /// Units enqueued (one per tenant, in one batch item per page).
    pub enqueued: u64,
    /// Tenants isolated as failed (their item unreadable; recorded).
    pub failed_tenants: u64,
    /// Shards still to do (resumed next invocation).
    pub shards_left: u32,
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![("ShardsLeft", f64::from(self.shards_left)), ("FailedUnits", self.failed_tenants as f64)]
    }
}

/// Why an invocation failed. Nothing is lost: the window is not recorded and the next
/// invocation resumes from the last checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum FanoutError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The queue.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// Most of a page failed ([`tickwork::failures::systemic`]): not a bad tenant but a bad run.
    #[error("{failed} of {of} tenants of a page failed (first: {first}); stopping rather than isolating them all")]
    PageFailed {
        /// Tenants that failed.
        failed: usize,
        /// Page size.
        of: usize,
        /// The first error.
        first: String,
    },
}

impl From<FanoutError> for lambda_runtime::Diagnostic {
    fn from(e: FanoutError) -> Self {
        let error_type = match &e {
            FanoutError::BadEvent(_) => "BadEvent",
            FanoutError::Db(_) => "DynamoDb",
            FanoutError::Queue(_) => "Queue",
            FanoutError::Checkpoint(_) => "Checkpoint",
            FanoutError::Cursor(_) => "Cursor",
            FanoutError::PageFailed { .. } => "Tenants",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// What a tick found due.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Windows, oldest first.
    pub windows: Vec<String>,
    /// The job has no watermark yet: set it to the day before its first window before working,
    /// so that window, if unfinished today, is caught up tomorrow.
    pub init_mark: Option<String>,
}

impl LeasedJob for Deps {
    type Plan = Plan;
    type Report = Report;
    type Error = FanoutError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Plan>), FanoutError> {
        let mark = state.marks.get(MARK_GROUP).map(String::as_str);
        let windows = window::due_windows(mark, tick.time_ms, self.cfg.max_lateness_days);
        let report = Report {
            window: windows.first().cloned().unwrap_or_else(|| window_of(tick.time_ms)),
            outcome: Outcome::AlreadyDone,
            windows_due: windows.len() as u32,
            ..Default::default()
        };
        let init_mark = match (mark, windows.first()) {
            (None, Some(first)) => {
                first.parse::<jiff::civil::Date>().ok().and_then(|d| d.yesterday().ok()).map(|d| d.to_string())
            }
            _ => None,
        };
        Ok((report, (!windows.is_empty()).then_some(Plan { windows, init_mark })))
    }

    async fn dry_run(&self, _: &Tick, plan: Plan, budget: &dyn Budget, report: Report) -> Result<Report, FanoutError> {
        fanout::fan_out(self, fanout::Mode::Dry, &plan.windows[..1], budget, report).await
    }

    async fn work(
        &self,
        _: &Tick,
        lease: &Lease,
        plan: Plan,
        budget: &dyn Budget,
        mut report: Report,
    ) -> Result<Report, FanoutError> {
        let fence = lease.fence(self.leases.table());
        if let Some(before) = &plan.init_mark {
            if let tickwork::watermark::Advance::Stale = self.marks.advance(&fence, MARK_GROUP, before).await? {
                report.outcome = Outcome::LostLease;
                return Ok(report);
            }
        }
        fanout::fan_out(self, fanout::Mode::Live(&fence), &plan.windows, budget, report).await
    }
}

/// The Lambda entry ([`tickwork_lambda::job::handle`]).
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, FanoutError> {
    tickwork_lambda::job::handle(deps, event, deadline_ms).await
}

/// One fan-out invocation for `tick`, stopping when `budget` runs out ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, FanoutError> {
    tickwork_lambda::job::run(deps, tick, budget, owner).await
}
