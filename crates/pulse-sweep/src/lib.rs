//! Pulse sweep: per-tenant calendar boundary pulses (day, week, month, quarter, year in each
//! tenant's time zone), cheap between boundaries, each `(tenant, grain, period)` delivered with
//! one idempotency key.
//!
//! Every failure of `000_*` is made impossible here:
//! - *lease released too early*: the lease is kept after success; a second worker in the same
//!   window finds the watermark (or the lease) and returns;
//! - *7 GetItem per tenant per tick*: an idle tick is **one** eventually consistent GetItem of the
//!   watermark item; a boundary reads the group's tenants page by page and nothing per tenant —
//!   a tenant that follows its group stands where the group's watermark says ([`pulse`]);
//! - *the unconsumed finest grain*: quarter-hour and hour are declared and never written;
//! - *one page of tenants and no cursor*: tenants are paged per zone and shard to exhaustion, with
//!   a checkpoint that the next tick resumes from ([`sweep`]);
//! - *the watermark trusted alone*: the watermark moves in the same transaction as the run's last
//!   pulses, and each pulse carries its idempotency key to the handler that acts on it.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; its `time` is the logical now.
//! 2. Read the watermark item: pause switch, registered zone groups, per group the last local date
//!    completed, woken tenants ([`due_groups`]). Nothing due and nobody woken: return — **1 read,
//!    0 writes**, no lease. A registered zone the tz database does not know is reported as a
//!    failed unit every tick and never blocks the others.
//! 3. Take the lease (kept on success, released on failure).
//! 4. [`sweep`]: woken tenants first, then each due group page by page from its checkpoint; the
//!    pulses go out in batches (one queue item per flush, not per tenant), in fenced transactions
//!    with the checkpoints.
//! 5. When every shard of a group is done, its watermark advances in the run's last transaction.
//!
//! ## Layout
//! [`config`] settings; [`pulse`] a pulse's identity and the pure step from a tenant's position
//! to what it is owed; `sweep` the enumeration (one loop for the leader, the shard workers and
//! the dry run); `flush` what a run writes and when; `shared` a boundary shared by shard workers
//! (the lease per shard, the watermark last); [`helpers`] how the leader starts them; this file
//! the job's glue.

pub mod config;
mod flush;
pub mod helpers;
pub mod pulse;
mod shared;
mod sweep;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::calendar::{self, CalendarError};
use tickwork::checkpoint::{CheckpointError, Checkpoints};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::{Lease, LeaseStore};
use tickwork::queue::{InvalidItem, QueueConfig};
use tickwork::tenants::{AddError, Tenant, Tenants};
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, JobCore, JobReport, LeasedJob, Tick};

pub use config::{PulseConfig, MAX_LATENESS_LIMIT};
pub use flush::FlushCounts;
pub use pulse::{pulse_id, PULSE_KIND};
pub use shared::MAX_SHARED_SHARDS;
pub use tickwork_lambda::Outcome;

/// Physical table names.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Control table (lease, watermark, checkpoints).
    pub control: String,
    /// Tenants table.
    pub tenants: String,
    /// Queue table (pulses are queue items).
    pub queue: String,
}

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered client.
    pub db: Db,
    /// Settings.
    pub cfg: PulseConfig,
    /// Table names.
    pub tables: Tables,
    /// Tenants (with the zone registry).
    pub tenants: Tenants,
    /// Queue settings (for the shard of each pulse item).
    pub queue_cfg: QueueConfig,
    /// Leases.
    pub leases: LeaseStore,
    /// Watermark, pause switch, zone registry.
    pub marks: Watermarks,
    /// Per zone/shard positions.
    pub checkpoints: Checkpoints,
    /// Wall clock.
    pub clock: SharedClock,
    /// Starts helper invocations at a boundary ([`helpers`]; shared mode only). `None`: the
    /// leader pages every shard itself (outside Lambda, and in tests that drive the workers).
    pub helpers: Option<std::sync::Arc<dyn helpers::Helpers>>,
}

impl Deps {
    /// Builds from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "pulse-sweep").await?;
        let cfg = PulseConfig::from_core(env, &base.core)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
            queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
        };
        let shards = env.int_in(vars::TENANT_SHARDS, 8u32, 1..=1000)?;
        if cfg.shard_workers > 1 && shards > MAX_SHARED_SHARDS {
            return Err(ConfigError::invalid(
                vars::PULSE_SHARD_WORKERS,
                format!(
                    "shard workers need at most {MAX_SHARED_SHARDS} tenant shards ({} is {shards}): a shared run's watermark advances in one transaction checking every shard",
                    vars::TENANT_SHARDS
                ),
            ));
        }
        let helpers = (cfg.shard_workers > 1)
            .then(|| helpers::LambdaHelpers::from_sdk(&base.sdk))
            .flatten()
            .map(|h| std::sync::Arc::new(h) as std::sync::Arc<dyn helpers::Helpers>);
        let mut d = Self::new(base.db, base.clock, cfg, tables, shards, QueueConfig::from_env(env)?);
        d.helpers = helpers;
        d.core.namespace = base.core.metrics_namespace.clone();
        Ok(d.resolve_shards().await)
    }

    /// Start-up: records the shard counts this process writes with and enumerates every tenant
    /// shard ever written to ([`tickwork::shard::ShardRegistry`]).
    pub async fn resolve_shards(mut self) -> Self {
        let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), &self.tables.control);
        reg.resolve("queue", self.queue_cfg.shards).await;
        let n = reg.resolve("tenants", self.tenants.write_shards()).await;
        self.tenants = self.tenants.with_read_shards(n);
        self
    }

    /// Builds from parts (tests, local drivers).
    pub fn new(
        db: Db,
        clock: SharedClock,
        cfg: PulseConfig,
        tables: Tables,
        tenant_shards: u32,
        queue_cfg: QueueConfig,
    ) -> Self {
        let retention = Duration::from_secs(14 * 86_400);
        let marks = Watermarks::new(db.clone(), &tables.control, clock.clone());
        let leases = LeaseStore::new(db.clone(), &tables.control, clock.clone());
        Self {
            core: JobCore {
                function: "pulse-sweep",
                db: db.clone(),
                clock: clock.clone(),
                leases: leases.clone(),
                marks: marks.clone(),
                lease: cfg.lease.clone(),
                margin: cfg.margin,
                dry_run: cfg.dry_run,
                namespace: "tickwork".into(),
            },
            tenants: Tenants::new(db.clone(), &tables.tenants, tenant_shards).with_registry(marks.clone(), &cfg.job),
            checkpoints: Checkpoints::new(db.clone(), &tables.control, clock.clone(), retention),
            leases,
            marks,
            db,
            cfg,
            tables,
            queue_cfg,
            clock,
            helpers: None,
        }
    }
}

/// Adds tenants and registers their zones with the sweep ([`Tenants::add`]): every tenant
/// validated first, zones registered before tenants are written, `since` stamped.
pub async fn add_tenants(deps: &Deps, tenants: &[Tenant]) -> Result<(), PulseError> {
    deps.tenants.add(tenants, deps.clock.now_ms()).await?;
    Ok(())
}

/// What a tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// Zone groups whose local date moved on.
    pub groups_due: u32,
    /// Groups completed (watermark advanced) by this tick.
    pub groups_completed: u32,
    /// Tenants visited.
    pub tenants: u64,
    /// Pulses written, by grain.
    pub pulses: BTreeMap<String, u64>,
    /// Periods skipped by the catch-up policy, by grain.
    pub skipped: BTreeMap<String, u64>,
    /// Tenants isolated as failed (recorded and passed over; their items need a look).
    pub failed_tenants: u64,
    /// Registered zones the tz database does not know (never visited; fix the registry).
    pub unknown_zones: Vec<String>,
    /// Helper invocations this leader started (shared mode).
    pub helpers: u32,
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            // GroupsDue staying above 0 tick after tick is the watermark-lag alarm.
            ("GroupsDue", f64::from(self.groups_due.saturating_sub(self.groups_completed))),
            ("FailedUnits", (self.failed_tenants + self.unknown_zones.len() as u64) as f64),
        ]
    }
}

/// Why a tick failed. Nothing is lost: no watermark moved past unfinished tenants.
#[derive(Debug, thiserror::Error)]
pub enum PulseError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The calendar (an unreadable period).
    #[error(transparent)]
    Calendar(#[from] CalendarError),
    /// A checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A page cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// A pulse item refused before writing.
    #[error(transparent)]
    Item(#[from] InvalidItem),
    /// A tenant refused before writing.
    #[error(transparent)]
    Tenant(#[from] AddError),
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

impl From<PulseError> for lambda_runtime::Diagnostic {
    fn from(e: PulseError) -> Self {
        let error_type = match &e {
            PulseError::BadEvent(_) => "BadEvent",
            PulseError::Db(_) => "DynamoDb",
            PulseError::Calendar(_) => "Calendar",
            PulseError::Checkpoint(_) => "Checkpoint",
            PulseError::Cursor(_) => "Cursor",
            PulseError::Item(_) | PulseError::Tenant(_) => "Invalid",
            PulseError::PageFailed { .. } => "Tenants",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// A zone group whose local date moved past its watermark: one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueGroup {
    /// The zone.
    pub group: String,
    /// Its local date now (the run's window).
    pub local: String,
    /// When this run started, if an earlier tick started it.
    pub started_ms: Option<Millis>,
    /// The group's watermark (the last local date completed), `None` before its first run.
    pub mark: Option<String>,
    /// The largest tenant shard count any writer recorded in the state item: the run pages at
    /// least that many shards, even when this process's start-up registry read is older.
    pub recorded_shards: u32,
}

/// Tenants woken in one group (added, resumed or moved since its run), visited at this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeGroup {
    /// The zone.
    pub group: String,
    /// Tenant ids.
    pub ids: Vec<String>,
    /// The group's watermark.
    pub mark: Option<String>,
    /// A run of the group has started and not finished.
    pub run_in_progress: bool,
}

impl DueGroup {
    /// The run's name in checkpoints and failure records: `<zone>@<local date>`.
    pub fn run_id(&self) -> String {
        format!("{}@{}", self.group, self.local)
    }
}

/// A zone group is due when its local date (`YYYY-MM-DD`) is past its watermark, or it has none.
/// The one rule the sweep, `tickctl plan` and `tickctl cost` apply.
pub fn group_due(watermark: Option<&str>, local_date: &str) -> bool {
    watermark.is_none_or(|m| m < local_date)
}

/// What the state item says is due at `time_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Due {
    /// Groups whose local date is past their watermark.
    pub groups: Vec<DueGroup>,
    /// Tenants added, resumed or moved since their group's run, visited now.
    pub wake: Vec<WakeGroup>,
    /// Registered zones the tz database does not know: skipped, reported.
    pub unknown: Vec<String>,
}

impl Due {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.wake.is_empty()
    }
}

/// The groups whose local date at `time_ms` is past their watermark, with that date.
pub fn due_groups(state: &WatermarkState, time_ms: Millis) -> Due {
    let mut due = Due::default();
    for g in &state.groups {
        let local = match calendar::zone(g).and_then(|tz| calendar::local_date(time_ms, &tz)) {
            Ok(d) => d.to_string(),
            Err(e) => {
                tracing::error!(zone = %g, error = %e, "registered zone is unknown; it is skipped");
                due.unknown.push(g.clone());
                continue;
            }
        };
        let mark = state.marks.get(g).cloned();
        if group_due(mark.as_deref(), &local) {
            let started_ms = state.run_started(g, &local);
            due.groups.push(DueGroup {
                group: g.clone(),
                local,
                started_ms,
                mark: mark.clone(),
                recorded_shards: state.unit_shards,
            });
        }
        if let Some(w) = state.wake.get(g).filter(|w| !w.is_empty()) {
            let run_in_progress =
                state.runs.get(g).is_some_and(|(window, _)| mark.as_deref().is_none_or(|m| window.as_str() > m));
            due.wake.push(WakeGroup { group: g.clone(), ids: w.iter().cloned().collect(), mark, run_in_progress });
        }
    }
    due
}

impl LeasedJob for Deps {
    type Plan = Due;
    type Report = Report;
    type Error = PulseError;

    fn core(&self) -> &JobCore {
        &self.core
    }

    async fn due(&self, state: &WatermarkState, tick: &Tick) -> Result<(Report, Option<Due>), PulseError> {
        let due = due_groups(state, tick.time_ms);
        let report =
            Report { groups_due: due.groups.len() as u32, unknown_zones: due.unknown.clone(), ..Default::default() };
        Ok((report, (!due.is_empty()).then_some(due)))
    }

    async fn dry_run(&self, tick: &Tick, plan: Due, budget: &dyn Budget, report: Report) -> Result<Report, PulseError> {
        let r = sweep::sweep(self, tick, sweep::Mode::Dry, &plan, budget, report).await?;
        let (reads, _) = self.db.meter().read_write_requests();
        tracing::info!(tenants = r.tenants, pulses = ?r.pulses, skipped = ?r.skipped, reads_made = reads, "dry run: nothing written");
        Ok(r)
    }

    async fn work(
        &self,
        tick: &Tick,
        lease: &Lease,
        plan: Due,
        budget: &dyn Budget,
        report: Report,
    ) -> Result<Report, PulseError> {
        let fence = lease.fence(&self.tables.control);
        sweep::sweep(self, tick, sweep::Mode::Live(&fence), &plan, budget, report).await
    }

    async fn help(
        &self,
        tick: &Tick,
        plan: Due,
        budget: &dyn Budget,
        report: Report,
        owner: &str,
    ) -> Result<Report, PulseError> {
        shared::help(self, tick, &plan, owner, budget, report).await
    }
}

/// The Lambda entry: parse, guard, run inside the deadline, emit the bill ([`tickwork_lambda::job::handle`]).
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, PulseError> {
    tickwork_lambda::job::handle(deps, event, deadline_ms).await
}

/// One tick at `tick.time_ms`, within `budget` ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, PulseError> {
    tickwork_lambda::job::run(deps, tick, budget, owner).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_groups_compare_local_dates_and_skip_unknown_zones() {
        let mut s = WatermarkState::default();
        s.groups.insert("Europe/Berlin".into());
        s.groups.insert("America/Los_Angeles".into());
        s.marks.insert("Europe/Berlin".into(), "2026-11-29".into());
        s.marks.insert("America/Los_Angeles".into(), "2026-11-28".into());
        // A writer with 16 shards recorded itself in the state item: the run pages them all.
        s.unit_shards = 16;
        // 2026-11-29T12:00Z: Berlin 13:00 on the 29th (done), Los Angeles 04:00 on the 29th (due).
        let t = "2026-11-29T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let want = DueGroup {
            group: "America/Los_Angeles".into(),
            local: "2026-11-29".into(),
            started_ms: None,
            mark: Some("2026-11-28".into()),
            recorded_shards: 16,
        };
        assert_eq!(due_groups(&s, t), Due { groups: vec![want.clone()], wake: vec![], unknown: vec![] });
        s.groups.insert("Nowhere/Atlantis".into());
        let d = due_groups(&s, t);
        assert_eq!(
            (d.groups, d.unknown),
            (vec![want], vec!["Nowhere/Atlantis".to_string()]),
            "one bad zone blocks nothing"
        );
        s.runs.insert("America/Los_Angeles".into(), ("2026-11-29".into(), t - 5_000));
        assert_eq!(due_groups(&s, t).groups[0].started_ms, Some(t - 5_000));
    }
}
