//! Pulse sweep: per-tenant calendar boundary pulses (day, week, month, quarter, year in each
//! tenant's time zone), cheap between boundaries and exactly once per `(tenant, grain, period)`.
//!
//! Every failure of `000_*` is made impossible here:
//! - *lease released too early*: the lease is kept after success; a second worker in the same
//!   window finds the watermark (or the lease) and returns;
//! - *7 GetItem per tenant per tick*: an idle tick is **one** eventually consistent GetItem of the
//!   watermark item; a boundary tick reads each tenant's cursors with **one** Query;
//! - *the unconsumed finest grain*: quarter-hour and hour are declared and never written;
//! - *one page of tenants and no cursor*: tenants are paged per zone and shard to exhaustion, with
//!   a checkpoint that the next tick resumes from;
//! - *the watermark trusted alone*: each pulse's queue-item id is its idempotency key, written in
//!   the same transaction that advances the tenant's cursor.
//!
//! ## One tick
//! 1. Parse the event; its `time` is the logical now (a duplicate delivery maps to the same periods).
//! 2. Read the watermark item (1 eventually consistent GetItem): the pause switch, the registered
//!    zone groups, and per group the last local date completed. No group whose local date moved
//!    on: return. That is the whole cost of an idle tick: **1 read, 0 writes**, no lease.
//! 3. Take the lease (kept on success, released on failure).
//! 4. For each due group: page its tenants (`by_zone` index, each shard, from the checkpoint); per
//!    tenant (bounded concurrency) read all cursors with one Query, plan with
//!    [`tickwork::calendar::plan_tenant`], and write the pulses (queue items, `attribute_not_exists`)
//!    and the cursor advances in one transaction. Checkpoint after each page.
//! 5. When every tenant of the group succeeded, advance the group's watermark — last, fenced.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use futures::stream::{self, StreamExt};
use serde::Serialize;
use serde_json::Value;
use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::calendar::{self, CalendarError, CatchUp, Grain, Period, Policy};
use tickwork::checkpoint::{CheckpointError, Checkpoints, ShardState};
use tickwork::clock::{Millis, SharedClock};
use tickwork::config::{ConfigError, Env};
use tickwork::lease::{Fenced, LeaderError, Lease, LeaseConfig, LeaseStore};
use tickwork::pager::{PageError, PageRun};
use tickwork::queue::{enqueue_item, NewItem, QueueConfig};
use tickwork::schema::{av_s, get_s, key, PK};
use tickwork::tenants::{Tenant, Tenants};
use tickwork::watermark::{Advance, Watermarks};
use tickwork::{Db, DbError};
use tickwork_lambda::{BadEvent, Base, Tick};

/// Attribute of a cursor item holding the last pulsed period.
pub const PERIOD: &str = "period";
/// Queue item kind of a pulse.
pub const PULSE_KIND: &str = "pulse";

/// The cursor partition of a tenant (one item per grain, sort key = grain name).
pub fn cursor_pk(tenant: &str) -> String {
    format!("cursor#{tenant}")
}

/// The pulse's queue-item id: its idempotency key.
pub fn pulse_id(tenant: &str, grain: Grain, period: &Period) -> String {
    format!("pulse#{tenant}#{grain}#{}", period.id())
}

/// Sweep settings.
#[derive(Debug, Clone)]
pub struct PulseConfig {
    /// Every tick a dry run (`TICKWORK_DRY_RUN`, default false).
    pub dry_run: bool,
    /// Job name (`TICKWORK_PULSE_JOB`, default `pulse-sweep`).
    pub job: String,
    /// Lease (`TICKWORK_PULSE_LEASE_SECS`, default 50, below `TICKWORK_PULSE_INTERVAL_SECS`, default 60).
    pub lease: LeaseConfig,
    /// Catch-up (`TICKWORK_PULSE_CATCH_UP` all|latest|skip, `TICKWORK_PULSE_MAX_LATENESS_SECS`, default 40 days).
    pub policy: Policy,
    /// Tenants per page (`TICKWORK_PULSE_PAGE_SIZE`, default 100).
    pub page_size: i32,
    /// Tenants processed at once (`TICKWORK_PULSE_TENANT_CONCURRENCY`, default 8).
    pub tenant_concurrency: usize,
    /// Stop this long before the deadline (`TICKWORK_DEADLINE_MARGIN_SECS`, default 5).
    pub margin: Duration,
}

/// Longest lateness accepted: keeps a tenant's catch-up inside one 100-item transaction.
pub const MAX_LATENESS_LIMIT: Duration = Duration::from_secs(60 * 86_400);

impl PulseConfig {
    /// Reads and validates settings; a lease TTL at or above the interval is refused.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let job = env.get("TICKWORK_PULSE_JOB").unwrap_or_else(|| "pulse-sweep".into());
        let interval = env.secs_or("TICKWORK_PULSE_INTERVAL_SECS", Duration::from_secs(60))?;
        let ttl = env.secs_or("TICKWORK_PULSE_LEASE_SECS", Duration::from_secs(50))?;
        let lease = LeaseConfig::new(&job, ttl, interval, skew)
            .map_err(|e| ConfigError::invalid("TICKWORK_PULSE_LEASE_SECS", e.problem))?;
        let catch_up: CatchUp = env.parse_or("TICKWORK_PULSE_CATCH_UP", CatchUp::All)?;
        let lateness = env.secs_or("TICKWORK_PULSE_MAX_LATENESS_SECS", Duration::from_secs(40 * 86_400))?;
        if lateness > MAX_LATENESS_LIMIT {
            return Err(ConfigError::invalid("TICKWORK_PULSE_MAX_LATENESS_SECS", "at most 60 days (5,184,000 s)"));
        }
        let page_size: i32 = env.parse_or("TICKWORK_PULSE_PAGE_SIZE", 100)?;
        if !(1..=1000).contains(&page_size) {
            return Err(ConfigError::invalid("TICKWORK_PULSE_PAGE_SIZE", format!("{page_size} is not in 1..=1000")));
        }
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            policy: Policy {
                catch_up,
                max_lateness_ms: lateness.as_millis() as i64,
                interval_ms: interval.as_millis() as i64,
            },
            job,
            lease,
            page_size,
            tenant_concurrency: env.parse_or("TICKWORK_PULSE_TENANT_CONCURRENCY", 8usize)?.max(1),
            margin: env.secs_or("TICKWORK_DEADLINE_MARGIN_SECS", Duration::from_secs(5))?,
        })
    }
}

/// Physical table names.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Control table (lease, watermark, checkpoints, cursors).
    pub control: String,
    /// Tenants table.
    pub tenants: String,
    /// Queue table (pulses are queue items).
    pub queue: String,
}

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// Metered client.
    pub db: Db,
    /// Settings.
    pub cfg: PulseConfig,
    /// Table names.
    pub tables: Tables,
    /// Tenants.
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
}

impl Deps {
    /// Builds from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "pulse-sweep").await?;
        let cfg = PulseConfig::from_env(env, base.core.clock_skew)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: env.get("TICKWORK_TENANTS_TABLE").unwrap_or_else(|| base.core.table("tenants")),
            queue: env.get("TICKWORK_QUEUE_TABLE").unwrap_or_else(|| base.core.table("queue")),
        };
        let shards = env.parse_or("TICKWORK_TENANT_SHARDS", 8u32)?;
        Ok(Self::new(base.db, base.clock, cfg, tables, shards, QueueConfig::from_env(env)?))
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
        Self {
            tenants: Tenants::new(db.clone(), &tables.tenants, tenant_shards),
            leases: LeaseStore::new(db.clone(), &tables.control, clock.clone()),
            marks: Watermarks::new(db.clone(), &tables.control, clock.clone()),
            checkpoints: Checkpoints::new(db.clone(), &tables.control, clock.clone(), retention),
            db,
            cfg,
            tables,
            queue_cfg,
            clock,
        }
    }
}

/// Adds tenants and registers their zones with the sweep: the supported way to add tenants, since
/// a zone the sweep does not know is a zone it never visits. Unknown zones are refused first.
pub async fn add_tenants(deps: &Deps, tenants: &[Tenant]) -> Result<(), PulseError> {
    let mut zones: Vec<String> = tenants.iter().map(|t| t.zone.clone()).collect();
    zones.sort();
    zones.dedup();
    for z in &zones {
        calendar::zone(z)?;
    }
    // Register first: a registered zone with no tenants costs nothing; the reverse skips tenants.
    deps.marks.register_groups(&deps.cfg.job, &zones).await?;
    // Calendar work is owed from the day a tenant is added, even if its first visit comes late.
    let now = deps.clock.now_ms();
    let stamped: Vec<Tenant> =
        tenants.iter().map(|t| Tenant { since_ms: t.since_ms.or(Some(now)), ..t.clone() }).collect();
    deps.tenants.put_all(&stamped).await?;
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
    /// Tenants whose pulses failed (retried next tick).
    pub failed_tenants: u64,
}

/// How a tick ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nothing advanced (1 read).
    #[default]
    Idle,
    /// The job is paused (1 read).
    Paused,
    /// Another worker holds the lease.
    Busy,
    /// Every due group completed.
    Completed,
    /// Stopped by the budget or by failed tenants; resumes next tick.
    Partial,
    /// Our lease was taken over; we stopped writing.
    LostLease,
    /// Dry run: planned, wrote nothing.
    DryRun,
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
    /// The calendar (unknown zone, unreadable cursor).
    #[error(transparent)]
    Calendar(#[from] CalendarError),
    /// A checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
}

impl From<PulseError> for lambda_runtime::Diagnostic {
    fn from(e: PulseError) -> Self {
        let error_type = match &e {
            PulseError::BadEvent(_) => "BadEvent",
            PulseError::Db(_) => "DynamoDb",
            PulseError::Calendar(_) => "Calendar",
            PulseError::Checkpoint(_) => "Checkpoint",
            PulseError::Cursor(_) => "Cursor",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// The Lambda entry: parse, run inside the deadline, emit the bill.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, PulseError> {
    let mut tick = Tick::parse(&event)?;
    tick.dry_run |= deps.cfg.dry_run;
    deps.db.meter().reset();
    tracing::debug!(tick_ms = tick.time_ms, remaining_ms = deadline_ms - deps.clock.now_ms(), "tick");
    let budget = Deadline::new(deps.clock.clone(), deadline_ms, deps.cfg.margin.as_millis() as i64);
    let owner = tickwork_lambda::owner_id("pulse-sweep");
    let result = run(deps, &tick, &budget, &owner).await;
    deps.db.meter().emit("tickwork", &deps.cfg.job, deps.clock.now_ms());
    if let Ok(r) = &result {
        // GroupsDue staying above 0 tick after tick is the watermark-lag alarm.
        let grain = |g: Grain| r.pulses.get(g.name()).copied().unwrap_or(0) as f64;
        tickwork::meter::emit_job_metrics(
            "tickwork",
            &deps.cfg.job,
            deps.clock.now_ms(),
            &[
                ("GroupsDue", f64::from(r.groups_due.saturating_sub(r.groups_completed))),
                ("Pulses", r.pulses.values().sum::<u64>() as f64),
                ("PulsesDay", grain(Grain::Day)),
                ("PulsesWeek", grain(Grain::Week)),
                ("PulsesMonth", grain(Grain::Month)),
                ("PulsesQuarter", grain(Grain::Quarter)),
                ("PulsesYear", grain(Grain::Year)),
                ("SkippedPeriods", r.skipped.values().sum::<u64>() as f64),
                ("FailedTenants", r.failed_tenants as f64),
            ],
        );
    }
    match &result {
        Ok(r) => {
            tracing::info!(outcome = ?r.outcome, groups_due = r.groups_due, tenants = r.tenants, pulses = ?r.pulses, skipped = ?r.skipped, failed = r.failed_tenants, "pulse sweep")
        }
        Err(e) => tracing::error!(error = %tickwork_lambda::error_chain(e), "pulse sweep failed"),
    }
    result
}

/// A zone group is due when its local date (`YYYY-MM-DD`) is past its watermark, or it has none.
/// The one rule the sweep, `tickctl plan` and `tickctl cost` apply.
pub fn group_due(watermark: Option<&str>, local_date: &str) -> bool {
    watermark.is_none_or(|m| m < local_date)
}

/// The groups whose local date at `time_ms` is past their watermark, with that date.
pub fn due_groups(
    state: &tickwork::watermark::WatermarkState,
    time_ms: Millis,
) -> Result<Vec<(String, String)>, CalendarError> {
    let mut due = Vec::new();
    for g in &state.groups {
        let tz = calendar::zone(g)?;
        let local = calendar::local_date(time_ms, &tz)?.to_string();
        if group_due(state.marks.get(g).map(String::as_str), &local) {
            due.push((g.clone(), local));
        }
    }
    Ok(due)
}

/// One tick at `tick.time_ms`, within `budget`.
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, PulseError> {
    let mut report = Report::default();
    let state = deps.marks.read(&deps.cfg.job).await?;
    if state.paused {
        report.outcome = Outcome::Paused;
        return Ok(report);
    }
    let due = due_groups(&state, tick.time_ms)?;
    report.groups_due = due.len() as u32;
    if due.is_empty() {
        return Ok(report);
    }
    if tick.dry_run {
        return dry_run(deps, tick, &due, budget, report).await;
    }
    // Kept after success for the rest of the window; released on failure so another worker can
    // retry (every unit of work is idempotent).
    let busy = Report { outcome: Outcome::Busy, ..report.clone() };
    match deps
        .leases
        .run_if_leader(
            &deps.cfg.lease,
            owner,
            |lease| async move { sweep(deps, tick, &lease, &due, budget, report).await },
        )
        .await
    {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Ok(busy),
        Err(LeaderError::Db(e)) => Err(e.into()),
        Err(LeaderError::Action(e)) => Err(e),
    }
}

#[derive(Default)]
struct Tally {
    tenants: u64,
    failed: u64,
    pulses: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
}

async fn sweep(
    deps: &Deps,
    tick: &Tick,
    lease: &Lease,
    due: &[(String, String)],
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    let lease_end = Deadline::new(
        deps.clock.clone(),
        lease.safe_until_ms(deps.cfg.lease.clock_skew),
        deps.cfg.margin.as_millis() as i64,
    );
    let budget = AnyOf(vec![budget, &lease_end]);
    let fence = lease.fence(&deps.tables.control);
    let tally = Mutex::new(Tally::default());
    let mut partial = false;
    for (group, local) in due {
        let tz = calendar::zone(group)?;
        let run_id = format!("{group}@{local}");
        let states = deps.checkpoints.read(&deps.cfg.job, &run_id).await?;
        let mut group_done = true;
        for k in 0..deps.tenants.shards() {
            let state = Checkpoints::state_of(&states, &k.to_string()).clone();
            if state == ShardState::Done {
                continue;
            }
            if budget.exhausted() {
                group_done = false;
                break;
            }
            let outcome = deps
                .tenants
                .for_each_zone_page(group, k, state.cursor(), deps.cfg.page_size, &budget, |tenants, next| {
                    let (tz, fence, run_id, tally) = (&tz, &fence, &run_id, &tally);
                    async move {
                        let results: Vec<Result<TenantResult, PulseError>> = stream::iter(tenants.iter())
                            .map(|t| pulse_tenant(deps, t, tz, tick.time_ms))
                            .buffer_unordered(deps.cfg.tenant_concurrency)
                            .collect()
                            .await;
                        let mut failed = 0;
                        {
                            let mut g = tally.lock().expect("tally");
                            g.tenants += tenants.len() as u64;
                            for r in results {
                                match r {
                                    Ok(tr) => {
                                        for (grain, n) in tr.pulses {
                                            *g.pulses.entry(grain).or_default() += n;
                                        }
                                        for (grain, n) in tr.skipped {
                                            *g.skipped.entry(grain).or_default() += n;
                                        }
                                    }
                                    Err(e) => {
                                        tracing::warn!(error = %e, "tenant failed; the group's watermark waits");
                                        failed += 1;
                                    }
                                }
                            }
                            g.failed += failed;
                        }
                        if failed > 0 {
                            // Do not checkpoint past a failed tenant: the next tick redoes this page.
                            return Err(PageStop::TenantsFailed);
                        }
                        let st = next.map(ShardState::Resume).unwrap_or(ShardState::Done);
                        match deps.checkpoints.save(fence, run_id, &k.to_string(), &st).await? {
                            Fenced::Written => Ok(()),
                            _ => Err(PageStop::Lost),
                        }
                    }
                })
                .await;
            match outcome {
                Ok(PageRun::Exhausted { .. }) => {}
                Ok(PageRun::Stopped { .. }) | Err(PageError::Handler(PageStop::TenantsFailed)) => group_done = false,
                Err(PageError::Handler(PageStop::Lost)) => {
                    report.outcome = Outcome::LostLease;
                    fill(&mut report, tally.into_inner().expect("tally"));
                    return Ok(report);
                }
                Err(PageError::Handler(PageStop::Db(e))) | Err(PageError::Db(e)) => return Err(e.into()),
                Err(PageError::Cursor(c)) => return Err(c.into()),
            }
        }
        if !group_done {
            partial = true;
            continue;
        }
        // Every tenant of the group succeeded: the watermark, last and fenced.
        match deps.marks.advance(&fence, group, local).await? {
            Advance::Advanced | Advance::NotForward { .. } => report.groups_completed += 1,
            Advance::Stale => {
                report.outcome = Outcome::LostLease;
                fill(&mut report, tally.into_inner().expect("tally"));
                return Ok(report);
            }
        }
    }
    report.outcome = if partial { Outcome::Partial } else { Outcome::Completed };
    fill(&mut report, tally.into_inner().expect("tally"));
    Ok(report)
}

fn fill(report: &mut Report, t: Tally) {
    report.tenants = t.tenants;
    report.failed_tenants = t.failed;
    report.pulses = t.pulses;
    report.skipped = t.skipped;
}

#[derive(Debug, thiserror::Error)]
enum PageStop {
    #[error("tenants failed")]
    TenantsFailed,
    #[error("lease lost")]
    Lost,
    #[error(transparent)]
    Db(#[from] DbError),
}

#[derive(Debug, Default)]
struct TenantResult {
    pulses: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
}

/// All of a tenant's cursors, with one strongly consistent Query on its cursor partition.
pub async fn read_cursors(deps: &Deps, tenant: &str) -> Result<BTreeMap<Grain, String>, PulseError> {
    let q = deps
        .db
        .client()
        .query()
        .table_name(&deps.tables.control)
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":pk", av_s(cursor_pk(tenant)))
        .consistent_read(true);
    let out = deps.db.query(q).await?;
    if out.last_evaluated_key().is_some_and(|k| !k.is_empty()) {
        // At most 7 small items: a second page would mean the partition holds something else.
        return Err(DbError::Invalid(format!("cursor partition of `{tenant}` has more than one page")).into());
    }
    let mut m = BTreeMap::new();
    for item in out.items() {
        let grain: Grain = get_s(item, "sk").unwrap_or_default().parse()?;
        if let Some(p) = get_s(item, PERIOD) {
            m.insert(grain, p.to_string());
        }
    }
    Ok(m)
}

/// The queue item of one pulse: its id is the idempotency key (tenant, grain, period).
pub fn pulse_item(tenant: &str, zone: &str, grain: Grain, period: &Period, now_ms: Millis) -> NewItem {
    NewItem {
        id: pulse_id(tenant, grain, period),
        kind: PULSE_KIND.into(),
        payload: serde_json::json!({"tenant": tenant, "grain": grain, "period": period.id(), "zone": zone}).to_string(),
        tenant: Some(tenant.to_string()),
        due_ms: now_ms,
    }
}

async fn pulse_tenant(
    deps: &Deps,
    t: &Tenant,
    tz: &jiff::tz::TimeZone,
    now_ms: Millis,
) -> Result<TenantResult, PulseError> {
    for attempt in 0..2 {
        let cursors = read_cursors(deps, &t.id).await?;
        let plans = calendar::plan_tenant(tz, now_ms, t.since_ms, &cursors, &deps.cfg.policy)?;
        let mut res = TenantResult::default();
        let mut items: Vec<TransactWriteItem> = Vec::new();
        for plan in &plans {
            for p in &plan.pulse {
                let item = pulse_item(&t.id, &t.zone, plan.grain, p, now_ms);
                items.push(
                    enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, deps.clock.now_ms())
                        .map_err(|e| DbError::Invalid(e.to_string()))?,
                );
                *res.pulses.entry(plan.grain.to_string()).or_default() += 1;
            }
            if plan.skipped > 0 {
                *res.skipped.entry(plan.grain.to_string()).or_default() += u64::from(plan.skipped);
            }
            if let Some(to) = plan.advance_to {
                items.push(cursor_advance(&deps.tables.control, &t.id, plan.grain, &to));
            }
        }
        if items.is_empty() {
            return Ok(res);
        }
        match deps.db.transact_write(items).await {
            Ok(_) => return Ok(res),
            // Someone advanced these cursors since our read (another worker after a lease lapse):
            // re-read and re-plan once; nothing was written by the cancelled transaction.
            Err(DbError::TransactionCanceled { reasons })
                if attempt == 0 && reasons.iter().any(|r| r.condition_failed()) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(DbError::Invalid(format!("tenant `{}`: cursors kept moving under us", t.id)).into())
}

fn cursor_advance(table: &str, tenant: &str, grain: Grain, to: &Period) -> TransactWriteItem {
    let update = Update::builder()
        .table_name(table)
        .set_key(Some(key(cursor_pk(tenant), grain.name())))
        .update_expression("SET #p = :p")
        .condition_expression("attribute_not_exists(#p) OR #p < :p")
        .expression_attribute_names("#p", PERIOD)
        .expression_attribute_values(":p", av_s(to.id()))
        .build()
        .expect("update has table, key and expression");
    TransactWriteItem::builder().update(update).build()
}

async fn dry_run(
    deps: &Deps,
    tick: &Tick,
    due: &[(String, String)],
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    let tally = Mutex::new(Tally::default());
    for (group, local) in due {
        let tz = calendar::zone(group)?;
        for k in 0..deps.tenants.shards() {
            let tally = &tally;
            let tz = &tz;
            let r = deps
                .tenants
                .for_each_zone_page(group, k, None, deps.cfg.page_size, budget, |tenants, _| async move {
                    for t in &tenants {
                        let cursors = read_cursors(deps, &t.id).await.map_err(|e| DbError::Invalid(e.to_string()))?;
                        let plans = calendar::plan_tenant(tz, tick.time_ms, t.since_ms, &cursors, &deps.cfg.policy)
                            .map_err(|e| DbError::Invalid(e.to_string()))?;
                        let mut g = tally.lock().expect("tally");
                        g.tenants += 1;
                        for p in plans {
                            *g.pulses.entry(p.grain.to_string()).or_default() += p.pulse.len() as u64;
                            *g.skipped.entry(p.grain.to_string()).or_default() += u64::from(p.skipped);
                        }
                    }
                    Ok::<(), DbError>(())
                })
                .await;
            match r {
                Ok(_) => {}
                Err(PageError::Db(e)) | Err(PageError::Handler(e)) => return Err(e.into()),
                Err(PageError::Cursor(c)) => return Err(c.into()),
            }
        }
        tracing::info!(group = %group, local_date = %local, "dry run: group planned");
    }
    fill(&mut report, tally.into_inner().expect("tally"));
    let (reads, _) = deps.db.meter().read_write_requests();
    let txns: u64 = report.pulses.values().copied().max().unwrap_or(0);
    tracing::info!(tenants = report.tenants, pulses = ?report.pulses, skipped = ?report.skipped, reads_made = reads, transactions_needed = txns, "dry run: nothing written");
    report.outcome = Outcome::DryRun;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_and_lateness_are_validated() {
        let e = PulseConfig::from_env(&Env::from_pairs([("TICKWORK_PULSE_LEASE_SECS", "60")]), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(e.var, "TICKWORK_PULSE_LEASE_SECS");
        assert!(e.problem.contains("below the schedule interval"));
        let e = PulseConfig::from_env(&Env::from_pairs([("TICKWORK_PULSE_CATCH_UP", "some")]), Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(e.var, "TICKWORK_PULSE_CATCH_UP");
        let e = PulseConfig::from_env(
            &Env::from_pairs([("TICKWORK_PULSE_MAX_LATENESS_SECS", "99999999")]),
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e.var, "TICKWORK_PULSE_MAX_LATENESS_SECS");
        assert!(PulseConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn due_groups_compare_local_dates() {
        let mut s = tickwork::watermark::WatermarkState::default();
        s.groups.insert("Europe/Berlin".into());
        s.groups.insert("America/Los_Angeles".into());
        s.marks.insert("Europe/Berlin".into(), "2026-11-29".into());
        s.marks.insert("America/Los_Angeles".into(), "2026-11-28".into());
        // 2026-11-29T12:00Z: Berlin 13:00 on the 29th (done), Los Angeles 04:00 on the 29th (due).
        let t = "2026-11-29T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        assert_eq!(due_groups(&s, t).unwrap(), vec![("America/Los_Angeles".to_string(), "2026-11-29".to_string())]);
        s.groups.insert("Nowhere/Atlantis".into());
        assert!(due_groups(&s, t).unwrap_err().0.contains("Nowhere/Atlantis"));
    }

    #[test]
    fn pulse_ids_bind_the_tenant() {
        let p = Period::parse(Grain::Day, "2026-11-29").unwrap();
        assert_eq!(pulse_id("t42", Grain::Day, &p), "pulse#t42#day#2026-11-29");
    }
}
