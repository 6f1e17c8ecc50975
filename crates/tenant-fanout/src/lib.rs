//! Tenant fan-out: turn "every tenant" into one queue item per tenant per window.
//!
//! Why (`000_*`): the tenant list behind a daily job stopped at one page with no cursor, and most
//! tenants silently never got their daily work. Here every shard of the tenants index is paged by
//! cursor to exhaustion; near the deadline the per-shard cursors are persisted and the next
//! invocation resumes; the window is recorded complete only when every shard is drained.
//!
//! ## One invocation
//! 1. Parse the scheduled event; its `time` names the window (the UTC date for a daily job).
//! 2. Read the watermark item (1 eventually consistent GetItem): paused → stop; the window already
//!    fanned out → stop. This is the whole cost of an idle invocation.
//! 3. Take the job's lease (kept on success, released on failure); re-check the slot record
//!    (strongly consistent) in case another holder just finished.
//! 4. Read the checkpoint; for each shard not done (bounded concurrency): page tenants by cursor,
//!    enqueue `job#window#tenant` for each (conditional put: a repeat changes nothing), then save
//!    the shard's cursor, fenced. A crash repeats at most one page, harmlessly.
//! 5. When every shard is done: record the slot and advance the watermark, both fenced.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt, TryStreamExt};
use serde::Serialize;
use serde_json::Value;
use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::checkpoint::{CheckpointError, Checkpoints, ShardState};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::lease::{Fenced, LeaderError, Lease, LeaseConfig, LeaseStore};
use tickwork::pager::PageError;
use tickwork::queue::{NewItem, Queue, QueueConfig, QueueError};
use tickwork::slot::Slots;
use tickwork::tenants::Tenants;
use tickwork::watermark::{Advance, Watermarks};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, Tick};

/// Fan-out settings.
#[derive(Debug, Clone)]
pub struct FanoutConfig {
    /// Every tick a dry run (`TICKWORK_DRY_RUN`, default false).
    pub dry_run: bool,
    /// Job name and queue item kind (`TICKWORK_FANOUT_JOB`, default `daily-summary`).
    pub job: String,
    /// Tenants per page (`TICKWORK_FANOUT_PAGE_SIZE`, default 100).
    pub page_size: i32,
    /// Shards paged at once (`TICKWORK_FANOUT_SHARD_CONCURRENCY`, default 4).
    pub shard_concurrency: usize,
    /// Enqueue requests in flight per page (`TICKWORK_FANOUT_ENQUEUE_CONCURRENCY`, default 16).
    pub enqueue_concurrency: usize,
    /// Lease settings (`TICKWORK_FANOUT_LEASE_SECS` below `TICKWORK_FANOUT_INTERVAL_SECS`).
    pub lease: LeaseConfig,
    /// Stop this long before the deadline (`TICKWORK_DEADLINE_MARGIN_SECS`, default 5).
    pub margin: Duration,
}

impl FanoutConfig {
    /// Reads and validates the settings.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let job = env.get("TICKWORK_FANOUT_JOB").unwrap_or_else(|| "daily-summary".into());
        let interval = env.secs_or("TICKWORK_FANOUT_INTERVAL_SECS", Duration::from_secs(300))?;
        let ttl = env.secs_or("TICKWORK_FANOUT_LEASE_SECS", Duration::from_secs(240))?;
        let lease = LeaseConfig::new(format!("fanout-{job}"), ttl, interval, skew)
            .map_err(|e| ConfigError::invalid("TICKWORK_FANOUT_LEASE_SECS", e.problem))?;
        let page_size: i32 = env.parse_or("TICKWORK_FANOUT_PAGE_SIZE", 100)?;
        if !(1..=1000).contains(&page_size) {
            return Err(ConfigError::invalid("TICKWORK_FANOUT_PAGE_SIZE", format!("{page_size} is not in 1..=1000")));
        }
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            job,
            page_size,
            shard_concurrency: env.parse_or("TICKWORK_FANOUT_SHARD_CONCURRENCY", 4usize)?.max(1),
            enqueue_concurrency: env.parse_or("TICKWORK_FANOUT_ENQUEUE_CONCURRENCY", 16usize)?.max(1),
            lease,
            margin: env.secs_or("TICKWORK_DEADLINE_MARGIN_SECS", Duration::from_secs(5))?,
        })
    }
}

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
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

impl Deps {
    /// Builds everything from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "tenant-fanout").await?;
        let cfg = FanoutConfig::from_env(env, base.core.clock_skew)?;
        let tenant_shards = env.parse_or("TICKWORK_TENANT_SHARDS", 8u32)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: env.get("TICKWORK_TENANTS_TABLE").unwrap_or_else(|| base.core.table("tenants")),
            queue: env.get("TICKWORK_QUEUE_TABLE").unwrap_or_else(|| base.core.table("queue")),
        };
        let queue_cfg = QueueConfig::from_env(env)?;
        Ok(Self::new(base.db, base.clock, cfg, &tables, tenant_shards, queue_cfg))
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
        Self {
            tenants: Tenants::new(db.clone(), &t.tenants, tenant_shards),
            queue: Queue::new(db.clone(), &t.queue, queue, clock.clone()),
            leases: LeaseStore::new(db.clone(), &t.control, clock.clone()),
            slots: Slots::new(db.clone(), &t.control, clock.clone(), retention),
            marks: Watermarks::new(db.clone(), &t.control, clock.clone()),
            checkpoints: Checkpoints::new(db.clone(), &t.control, clock.clone(), retention),
            db,
            cfg,
            clock,
        }
    }
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

/// What an invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The window (`2026-11-29`).
    pub window: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Tenants visited in this invocation.
    pub tenants: u64,
    /// Items newly enqueued.
    pub enqueued: u64,
    /// Items that already existed (a repeated page).
    pub existed: u64,
    /// Shards still to do (resumed next invocation).
    pub shards_left: u32,
}

/// How an invocation ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every shard drained; window recorded.
    Completed,
    /// The budget ran out; cursors persisted.
    Partial,
    /// The window was already done (1 read).
    #[default]
    AlreadyDone,
    /// Another invocation holds the lease.
    Busy,
    /// The job is paused.
    Paused,
    /// Dry run: counted, wrote nothing.
    DryRun,
    /// Our lease was taken over mid-run; we stopped writing.
    LostLease,
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
}

impl From<FanoutError> for lambda_runtime::Diagnostic {
    fn from(e: FanoutError) -> Self {
        let error_type = match &e {
            FanoutError::BadEvent(_) => "BadEvent",
            FanoutError::Db(_) => "DynamoDb",
            FanoutError::Queue(_) => "Queue",
            FanoutError::Checkpoint(_) => "Checkpoint",
            FanoutError::Cursor(_) => "Cursor",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// The window a tick belongs to: its UTC date.
pub fn window_of(time_ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(time_ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string())
        .unwrap_or_else(|_| "invalid".into())
}

/// The queue item for one tenant in one window.
pub fn item_for(job: &str, window: &str, tenant: &tickwork::tenants::Tenant, due_ms: Millis) -> NewItem {
    NewItem {
        id: format!("{job}#{window}#{}", tenant.id),
        kind: job.to_string(),
        payload: serde_json::json!({"tenant": tenant.id, "window": window, "zone": tenant.zone}).to_string(),
        tenant: Some(tenant.id.clone()),
        due_ms,
    }
}

/// The Lambda entry: parse, run within the deadline, emit the capacity metrics.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, FanoutError> {
    let mut tick = Tick::parse(&event)?;
    tick.dry_run |= deps.cfg.dry_run;
    deps.db.meter().reset();
    let budget = Deadline::new(deps.clock.clone(), deadline_ms, deps.cfg.margin.as_millis() as i64);
    let owner = tickwork_lambda::owner_id("tenant-fanout");
    let result = run(deps, &tick, &budget, &owner).await;
    deps.db.meter().emit("tickwork", &deps.cfg.lease.job, deps.clock.now_ms());
    if let Ok(r) = &result {
        let counts = [("Enqueued", r.enqueued as f64), ("ShardsLeft", f64::from(r.shards_left))];
        tickwork::meter::emit_job_metrics("tickwork", &deps.cfg.lease.job, deps.clock.now_ms(), &counts);
    }
    match &result {
        Ok(r) => {
            tracing::info!(window = %r.window, outcome = ?r.outcome, tenants = r.tenants, enqueued = r.enqueued, existed = r.existed, shards_left = r.shards_left, "fan-out")
        }
        Err(e) => tracing::error!(error = %tickwork_lambda::error_chain(e), "fan-out failed"),
    }
    result
}

/// One fan-out invocation for `tick`, stopping when `budget` runs out.
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, FanoutError> {
    let window = window_of(tick.time_ms);
    let job = deps.cfg.lease.job.clone();
    let mut report = Report { window: window.clone(), ..Default::default() };

    // 2. The idle path: one eventually consistent read.
    let mark = deps.marks.read(&job).await?;
    if mark.paused {
        report.outcome = Outcome::Paused;
        return Ok(report);
    }
    if mark.marks.get("all").is_some_and(|m| m.as_str() >= window.as_str()) {
        report.outcome = Outcome::AlreadyDone;
        return Ok(report);
    }
    if tick.dry_run {
        return dry_run(deps, budget, report).await;
    }

    // 3. Lease, then the authoritative slot check.
    // Kept after success for the rest of the window; released on failure so another worker can
    // retry (every unit of work is idempotent).
    let busy = Report { outcome: Outcome::Busy, ..report.clone() };
    match deps
        .leases
        .run_if_leader(
            &deps.cfg.lease,
            owner,
            |lease| async move { fan_out(deps, &lease, &window, budget, report).await },
        )
        .await
    {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Ok(busy),
        Err(LeaderError::Db(e)) => Err(e.into()),
        Err(LeaderError::Action(e)) => Err(e),
    }
}

async fn fan_out(
    deps: &Deps,
    lease: &Lease,
    window: &str,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, FanoutError> {
    let job = &lease.job;
    if deps.slots.is_recorded(job, window).await? {
        report.outcome = Outcome::AlreadyDone;
        return Ok(report);
    }
    // Never start a page after the lease could have lapsed.
    let lease_end = Deadline::new(
        deps.clock.clone(),
        lease.safe_until_ms(deps.cfg.lease.clock_skew),
        deps.cfg.margin.as_millis() as i64,
    );
    let budget = AnyOf(vec![budget, &lease_end]);
    let fence = lease.fence(deps.leases.table());
    let states = deps.checkpoints.read(job, window).await?;
    let todo: Vec<(u32, ShardState)> = (0..deps.tenants.shards())
        .map(|k| (k, Checkpoints::state_of(&states, &k.to_string()).clone()))
        .filter(|(_, s)| *s != ShardState::Done)
        .collect();
    let now = deps.clock.now_ms();
    let results: Vec<ShardResult> = stream::iter(todo.into_iter().map(|(k, state)| {
        let fence = &fence;
        let budget = &budget;
        async move { shard(deps, fence, window, k, state, budget, now).await }
    }))
    .buffer_unordered(deps.cfg.shard_concurrency)
    .try_collect()
    .await?;
    let mut lost = false;
    for r in &results {
        report.tenants += r.tenants;
        report.enqueued += r.enqueued;
        report.existed += r.existed;
        report.shards_left += u32::from(!r.done);
        lost |= r.lost;
    }
    if lost {
        report.outcome = Outcome::LostLease;
        return Ok(report);
    }
    if report.shards_left > 0 {
        report.outcome = Outcome::Partial;
        return Ok(report);
    }
    // 5. Every shard drained: record the window, then the watermark, both fenced.
    match deps.slots.record(&fence, window).await? {
        tickwork::slot::Record::Stale => {
            report.outcome = Outcome::LostLease;
            return Ok(report);
        }
        tickwork::slot::Record::Recorded | tickwork::slot::Record::AlreadyRecorded => {}
    }
    match deps.marks.advance(&fence, "all", window).await? {
        Advance::Stale => report.outcome = Outcome::LostLease,
        Advance::Advanced | Advance::NotForward { .. } => report.outcome = Outcome::Completed,
    }
    Ok(report)
}

#[derive(Debug, Default)]
struct ShardResult {
    tenants: u64,
    enqueued: u64,
    existed: u64,
    done: bool,
    lost: bool,
}

#[derive(Debug, thiserror::Error)]
enum PageFail {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("lease lost")]
    Lost,
}

async fn shard(
    deps: &Deps,
    fence: &tickwork::lease::Fence,
    window: &str,
    k: u32,
    state: ShardState,
    budget: &dyn Budget,
    now: Millis,
) -> Result<ShardResult, FanoutError> {
    let mut res = ShardResult::default();
    let job = &deps.cfg.job;
    let shard_name = k.to_string();
    let counts = Arc::new(std::sync::Mutex::new((0u64, 0u64, 0u64)));
    let run = deps
        .tenants
        .for_each_page(k, state.cursor(), deps.cfg.page_size, budget, |tenants, next| {
            let counts = counts.clone();
            let shard_name = shard_name.clone();
            async move {
                let items: Vec<NewItem> = tenants.iter().map(|t| item_for(job, window, t, now)).collect();
                let c = deps.queue.enqueue_many(&items, deps.cfg.enqueue_concurrency).await?;
                {
                    let mut g = counts.lock().expect("counts");
                    g.0 += tenants.len() as u64;
                    g.1 += c.enqueued;
                    g.2 += c.existed;
                }
                // Position after this page's effects; a crash before this repeats the page harmlessly.
                let st = next.map(ShardState::Resume).unwrap_or(ShardState::Done);
                match deps.checkpoints.save(fence, window, &shard_name, &st).await? {
                    Fenced::Written => Ok(()),
                    Fenced::Stale | Fenced::ConditionFailed { .. } => Err(PageFail::Lost),
                }
            }
        })
        .await;
    let (t, e, x) = *counts.lock().expect("counts");
    res.tenants = t;
    res.enqueued = e;
    res.existed = x;
    match run {
        Ok(tickwork::pager::PageRun::Exhausted { .. }) => res.done = true,
        Ok(tickwork::pager::PageRun::Stopped { .. }) => {}
        Err(PageError::Handler(PageFail::Lost)) => res.lost = true,
        Err(PageError::Handler(PageFail::Queue(q))) => return Err(q.into()),
        Err(PageError::Handler(PageFail::Db(d))) | Err(PageError::Db(d)) => return Err(d.into()),
        Err(PageError::Cursor(c)) => return Err(c.into()),
    }
    Ok(res)
}

async fn dry_run(deps: &Deps, budget: &dyn Budget, mut report: Report) -> Result<Report, FanoutError> {
    for k in 0..deps.tenants.shards() {
        let mut n = 0u64;
        let run = deps
            .tenants
            .for_each_page(k, None, deps.cfg.page_size, budget, |t, _| {
                n += t.len() as u64;
                std::future::ready(Ok::<(), DbError>(()))
            })
            .await;
        match run {
            Ok(tickwork::pager::PageRun::Exhausted { .. }) => {}
            Ok(tickwork::pager::PageRun::Stopped { .. }) => report.shards_left += 1,
            Err(PageError::Db(d)) | Err(PageError::Handler(d)) => return Err(d.into()),
            Err(PageError::Cursor(c)) => return Err(c.into()),
        }
        report.tenants += n;
    }
    tracing::info!(window = %report.window, tenants = report.tenants, "dry run: would enqueue one item per tenant");
    report.outcome = Outcome::DryRun;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_is_the_utc_date_of_the_event() {
        // 2026-11-29T23:59:59.999Z and the first ms of the next day.
        assert_eq!(window_of(1_795_996_799_999), "2026-11-29");
        assert_eq!(window_of(1_795_996_800_000), "2026-11-30");
    }

    #[test]
    fn item_ids_are_the_idempotency_key() {
        let t =
            tickwork::tenants::Tenant { id: "t1".into(), zone: "Europe/Paris".into(), active: true, since_ms: None };
        let i = item_for("daily-summary", "2026-11-29", &t, 5);
        assert_eq!(i.id, "daily-summary#2026-11-29#t1");
        assert_eq!(i.tenant.as_deref(), Some("t1"));
        assert!(i.validate().is_ok());
    }

    #[test]
    fn lease_ttl_at_or_above_the_interval_is_refused() {
        let env = Env::from_pairs([("TICKWORK_FANOUT_INTERVAL_SECS", "60"), ("TICKWORK_FANOUT_LEASE_SECS", "60")]);
        let e = FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.var, "TICKWORK_FANOUT_LEASE_SECS");
        let env = Env::from_pairs([("TICKWORK_FANOUT_PAGE_SIZE", "0")]);
        assert_eq!(FanoutConfig::from_env(&env, Duration::from_secs(1)).unwrap_err().var, "TICKWORK_FANOUT_PAGE_SIZE");
    }
}
