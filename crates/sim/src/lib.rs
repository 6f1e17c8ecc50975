//! A local, end-to-end run of the pulse sweep: the real handlers, the real local servers, a
//! simulated clock. Several sweep workers tick on phase-shifted one-minute timers (the `000_*`
//! setting that produced duplicate ticks), queue workers drain the pulses, and every DynamoDB call
//! is metered. Used by `make run`, by the crash-injection test and by `make bench`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use pulse_sweep::{Deps, Outcome, PulseConfig, Tables};
use queue_worker::{drain, WorkerConfig};
use tickwork::budget::Unlimited;
use tickwork::calendar;
use tickwork::clock::{ManualClock, SharedClock};
use tickwork::config::Env;
use tickwork::meter::{CapacitySource, Meter, Tally};
use tickwork::queue::{queue_table, Queue, QueueConfig};
use tickwork::retry::RetryPolicy;
use tickwork::schema::{self, control_table};
use tickwork::tenants::{tenants_table, Position, Tenant};
use tickwork::Db;
use tickwork_lambda::Tick;

/// Zones of the simulated tenants: Berlin changes to summer time on 2026-03-29, and Tokyo,
/// Kolkata, Auckland and Berlin cross the March/April (month and quarter) boundary in range.
/// The zones the simulation spreads tenants over (round-robin).
pub const ZONES: [&str; 8] = tickwork::tenants::SAMPLE_ZONES;

pub mod chart;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Tenants, spread round-robin over [`ZONES`].
    pub tenants: usize,
    /// First tick (ms).
    pub start_ms: i64,
    /// Simulated days.
    pub days: u32,
    /// Tick interval (ms).
    pub tick_ms: i64,
    /// Sweep workers, phase-shifted by `tick_ms / workers`.
    pub workers: u32,
    /// Run the queue workers every this many ticks.
    pub drain_every: u32,
    /// Tenants per page.
    pub page_size: i32,
    /// Crash a sweep worker after every k-th DynamoDB call it makes (`None`: no crashes).
    pub crash_every: Option<u64>,
    /// Check after each watermark advance that no tenant is behind it.
    pub check_watermarks: bool,
    /// Run this many ticks instead of `days` worth.
    pub ticks: Option<u64>,
    /// Print a progress line every 6 simulated hours (stderr).
    pub progress: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            tenants: 1_000,
            start_ms: 1_774_742_400_000, // 2026-03-29T00:00:00Z
            days: 3,
            tick_ms: 60_000,
            workers: 3,
            drain_every: 5,
            page_size: 100,
            crash_every: None,
            check_watermarks: false,
            ticks: None,
            progress: false,
        }
    }
}

impl SimConfig {
    /// The same load as `tickctl cost` input, so the model can be checked against the run.
    pub fn cost_input(&self) -> tickctl::cost::CostInput {
        tickctl::cost::CostInput {
            tenants: self.tenants,
            zones: ZONES.iter().map(|z| z.to_string()).collect(),
            tick_ms: self.tick_ms,
            workers: self.workers,
            ticks: self.ticks.unwrap_or((i64::from(self.days) * 86_400_000 / self.tick_ms) as u64),
            start_ms: self.start_ms,
            drain_every: self.drain_every,
            tenant_shards: 8,
            queue_shards: QueueConfig::default().shards,
            page_size: self.page_size as usize,
            fanout_page_size: 1000,
            worker_batch: WorkerConfig::default().batch as usize,
            policy: tickwork::calendar::Policy {
                catch_up: tickwork::calendar::CatchUp::All,
                max_lateness_ms: 40 * 86_400_000,
                interval_ms: self.tick_ms,
            },
            grains: tickwork::grains::Grains::ALL,
        }
    }
}

/// One job's figures from `tickctl cost`'s model beside a run's.
#[derive(Debug, Clone)]
pub struct ModelVsLive {
    /// Job.
    pub job: String,
    /// Requests: (model, live).
    pub requests: (u64, u64),
    /// RCU: (model, live).
    pub rcu: (f64, f64),
    /// WCU: (model, live).
    pub wcu: (f64, f64),
}

/// The model's figures beside a run's, per job.
pub fn model_vs_live(cfg: &SimConfig, r: &SimReport) -> Result<Vec<ModelVsLive>> {
    let m = tickctl::cost::model(&cfg.cost_input())?;
    let mut sweep = r.idle;
    sweep.add(&r.boundary);
    let mut out = Vec::new();
    for (job, ops, t) in [("pulse-sweep", &r.sweep_ops, sweep), ("queue-worker", &r.worker_ops, r.worker)] {
        let j = m.job(job).context("model job")?;
        out.push(ModelVsLive {
            job: job.to_string(),
            requests: (j.requests(), ops.values().sum()),
            rcu: (j.rcu, t.rcu),
            wcu: (j.wcu, t.wcu),
        });
    }
    Ok(out)
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    /// Tenants.
    pub tenants: usize,
    /// Sweep invocations by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Pulses delivered, by (grain, period), each unit key once.
    pub pulses: BTreeMap<(String, String), u64>,
    /// Every unit key the worker's handlers completed, and how often.
    pub deliveries: BTreeMap<String, u64>,
    /// Totals over idle ticks.
    pub idle: Tally,
    /// Idle ticks.
    pub idle_ticks: u64,
    /// The most reads and writes any single idle tick made.
    pub idle_max: (u64, u64),
    /// Totals over ticks that did boundary work (including crashed ones).
    pub boundary: Tally,
    /// Boundary ticks.
    pub boundary_ticks: u64,
    /// Sweep request counts: (reads, writes), idle and boundary together.
    pub sweep_requests: (u64, u64),
    /// Queue-worker totals.
    pub worker: Tally,
    /// Sweep requests per operation (what `tickctl cost` predicts).
    pub sweep_ops: BTreeMap<String, u64>,
    /// Queue-worker requests per operation.
    pub worker_ops: BTreeMap<String, u64>,
    /// Invocations that crashed.
    pub crashes: u64,
    /// Summaries rows written by the daily-summary handler.
    pub summaries: u64,
    /// tickwork's own write units (sweep and worker; the handlers' effect writes, the summaries,
    /// not counted) per simulated UTC day, day 0 first.
    pub own_wcu_by_day: BTreeMap<u64, f64>,
    /// Requests per simulated hour from the start: (sweep, queue worker). The chart's data.
    pub requests_by_hour: BTreeMap<u64, (u64, u64)>,
    /// Pulses the sweep enqueued per simulated hour, by grain.
    pub pulses_by_hour: BTreeMap<String, BTreeMap<u64, u64>>,
    /// Pulses delivered per tenant zone, by grain.
    pub pulses_by_zone: BTreeMap<String, BTreeMap<String, u64>>,
    /// Wall time.
    pub wall: Duration,
    /// Table names used.
    pub tables: Option<Tables>,
}

/// Fails every call once armed and past its limit, as if the process had died mid-invocation.
#[derive(Debug, Clone, Default)]
pub struct Crash {
    calls: Arc<AtomicU64>,
    limit: Arc<AtomicI64>,
}

impl Crash {
    /// Calls since the last [`Crash::arm`].
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
    /// Crash at the `k`-th call from now (`None`: never).
    pub fn arm(&self, k: Option<u64>) {
        self.calls.store(0, Ordering::SeqCst);
        self.limit.store(k.map(|k| k as i64).unwrap_or(-1), Ordering::SeqCst);
    }
}

impl Intercept for Crash {
    fn name(&self) -> &'static str {
        "Crash"
    }
    fn read_before_execution(
        &self,
        _: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let limit = self.limit.load(Ordering::SeqCst);
        if limit > 0 && n as i64 >= limit {
            return Err("injected crash: the worker died here".into());
        }
        Ok(())
    }
}

fn client(sdk: &SdkConfig, name: &str, crash: Option<&Crash>) -> aws_sdk_dynamodb::Client {
    let mut b = aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_config(RetryPolicy::default().sdk())
        .retry_partition(aws_sdk_dynamodb::config::retry::RetryPartition::new(name.to_string()));
    if let Some(c) = crash {
        b = b.interceptor(c.clone());
    }
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r);
    }
    aws_sdk_dynamodb::Client::from_conf(b.build())
}

/// The SDK config for a local endpoint, with static test credentials.
pub async fn local_sdk(endpoint: &str) -> SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "local"))
        .endpoint_url(endpoint)
        .load()
        .await
}

/// Creates the tables, seeds tenants and drives the sweep and the queue workers.
pub async fn simulate(sdk: &SdkConfig, cfg: &SimConfig) -> Result<SimReport> {
    let wall = Instant::now();
    let prefix = format!("sim{}-{:x}", std::process::id(), fastrand::u32(..));
    let admin = Db::new(client(sdk, &format!("{prefix}-admin"), None), Meter::new(CapacitySource::Estimate));
    let tables = Tables {
        control: format!("{prefix}-control"),
        tenants: format!("{prefix}-tenants"),
        queue: format!("{prefix}-queue"),
    };
    let summaries = format!("{prefix}-summaries");
    for (def, name) in [
        (control_table(), &tables.control),
        (tenants_table(), &tables.tenants),
        (queue_table(), &tables.queue),
        (queue_worker::summary::summaries_table(), &summaries),
    ] {
        schema::create_table(admin.client(), &def, name).await.with_context(|| format!("creating {name}"))?;
    }
    let clock = ManualClock::at(cfg.start_ms);
    let shared: SharedClock = Arc::new(clock.clone());
    let interval_s = cfg.tick_ms / 1000;
    let env_pairs = [
        (tickwork::env::PULSE_INTERVAL_SECS, interval_s.to_string()),
        (tickwork::env::PULSE_LEASE_SECS, (interval_s * 5 / 6).to_string()),
        (tickwork::env::PULSE_PAGE_SIZE, cfg.page_size.to_string()),
    ];
    let env = Env::from_pairs(env_pairs.iter().map(|(k, v)| (*k, v.as_str())));
    let pulse_cfg = PulseConfig::from_env(&env, Duration::from_secs(1))?;

    let mut workers = Vec::new();
    for w in 0..cfg.workers {
        let crash = Crash::default();
        let meter = Meter::new(CapacitySource::Estimate);
        let db = Db::new(client(sdk, &format!("{prefix}-sweep{w}"), Some(&crash)), meter);
        db.register_gsis(&tables.queue, queue_table().gsi_shapes());
        db.register_gsis(&tables.tenants, tenants_table().gsi_shapes());
        workers
            .push((Deps::new(db, shared.clone(), pulse_cfg.clone(), tables.clone(), 8, QueueConfig::default()), crash));
    }
    let seed: Vec<Tenant> = (0..cfg.tenants).map(|i| tickwork::tenants::sample_tenant(i, &ZONES, None)).collect();
    pulse_sweep::add_tenants(&workers[0].0, &seed).await?;

    let worker_db = Db::new(client(sdk, &format!("{prefix}-worker"), None), Meter::new(CapacitySource::Estimate));
    worker_db.register_gsis(&tables.queue, queue_table().gsi_shapes());
    let queue = Queue::new(worker_db.clone(), &tables.queue, QueueConfig::default(), shared.clone());
    let (handlers, deliveries) =
        queue_worker::summary::registry(worker_db.clone(), &summaries, shared.clone()).counted();
    // The worker's owner id as a deployed worker has it (its length sizes a claimed item).
    let owner = tickwork_lambda::owner_id("queue-worker");

    let mut report = SimReport { tenants: cfg.tenants, ..Default::default() };
    let ticks = cfg.ticks.unwrap_or((i64::from(cfg.days) * 86_400_000 / cfg.tick_ms) as u64);
    let phase = cfg.tick_ms / i64::from(cfg.workers.max(1));
    let progress_every = (6 * 3_600_000 / cfg.tick_ms).max(1) as u64;
    for i in 0..ticks {
        if cfg.progress && i % progress_every == 0 {
            let at = jiff::Timestamp::from_millisecond(cfg.start_ms + i as i64 * cfg.tick_ms)
                .map(|t| t.to_string())
                .unwrap_or_default();
            eprintln!(
                "  {at}: {} sweep invocations, {} boundary ticks, {:.0} s",
                report.outcomes.values().sum::<u64>(),
                report.boundary_ticks,
                wall.elapsed().as_secs_f64()
            );
        }
        for (w, (deps, crash)) in workers.iter().enumerate() {
            let t = cfg.start_ms + i as i64 * cfg.tick_ms + w as i64 * phase;
            clock.set(t);
            deps.db.meter().reset();
            crash.arm(cfg.crash_every);
            let tick = Tick::parse(&Tick::envelope(t, false))?;
            let owner = format!("sweep-{w}-{i}");
            let result = pulse_sweep::run(deps, &tick, &Unlimited, &owner).await;
            crash.arm(None);
            let m = deps.db.meter();
            let total = m.total();
            *report.own_wcu_by_day.entry(((t - cfg.start_ms) / 86_400_000) as u64).or_default() += total.wcu;
            let (r, wr) = m.read_write_requests();
            for (op, n) in m.requests_by_op() {
                *report.sweep_ops.entry(op).or_default() += n;
            }
            report.sweep_requests.0 += r;
            report.sweep_requests.1 += wr;
            let hour = ((t - cfg.start_ms) / 3_600_000) as u64;
            report.requests_by_hour.entry(hour).or_default().0 += r + wr;
            let label = match &result {
                Ok(rep) => format!("{:?}", rep.outcome),
                Err(_) => "Crashed".to_string(),
            };
            *report.outcomes.entry(label).or_default() += 1;
            match &result {
                Ok(rep) if rep.outcome == Outcome::Idle => {
                    report.idle_ticks += 1;
                    report.idle.add(&total);
                    report.idle_max = (report.idle_max.0.max(r), report.idle_max.1.max(wr));
                }
                Ok(rep) => {
                    for (g, n) in &rep.pulses {
                        *report.pulses_by_hour.entry(g.clone()).or_default().entry(hour).or_default() += n;
                    }
                    report.boundary_ticks += 1;
                    report.boundary.add(&total);
                    if cfg.check_watermarks && rep.groups_completed > 0 {
                        let delivered = deliveries.lock().expect("deliveries").clone();
                        check_watermarks(deps, &delivered).await?;
                    }
                }
                Err(e) => {
                    ensure!(cfg.crash_every.is_some(), "sweep failed without an injected crash: {e}");
                    report.crashes += 1;
                    report.boundary_ticks += 1;
                    report.boundary.add(&total);
                }
            }
        }
        if (i + 1) % u64::from(cfg.drain_every.max(1)) == 0 {
            worker_db.meter().reset();
            drain(&queue, &handlers, &owner, &Unlimited, &WorkerConfig::default()).await?;
            report.worker.add(&worker_db.meter().total());
            let hour = ((i as i64 * cfg.tick_ms) / 3_600_000) as u64;
            report.requests_by_hour.entry(hour).or_default().1 += worker_db.meter().total().requests;
            let day = ((i as i64 * cfg.tick_ms) / 86_400_000) as u64;
            *report.own_wcu_by_day.entry(day).or_default() += own_wcu(&worker_db, &summaries);
            for (op, n) in worker_db.meter().requests_by_op() {
                *report.worker_ops.entry(op).or_default() += n;
            }
        }
    }
    clock.advance(cfg.tick_ms);
    worker_db.meter().reset();
    drain(&queue, &handlers, &owner, &Unlimited, &WorkerConfig::default()).await?;
    report.worker.add(&worker_db.meter().total());
    let last_hour = ((ticks as i64 * cfg.tick_ms).saturating_sub(1) / 3_600_000).max(0) as u64;
    report.requests_by_hour.entry(last_hour).or_default().1 += worker_db.meter().total().requests;
    let last_day = ((ticks as i64 * cfg.tick_ms) / 86_400_000) as u64;
    *report.own_wcu_by_day.entry(last_day.min(u64::from(cfg.days).saturating_sub(1))).or_default() +=
        own_wcu(&worker_db, &summaries);
    for (op, n) in worker_db.meter().requests_by_op() {
        *report.worker_ops.entry(op).or_default() += n;
    }
    report.deliveries = deliveries.lock().expect("deliveries").clone();
    report.pulses = count_pulses(&report.deliveries);
    let zone_of: BTreeMap<&str, &str> = seed.iter().map(|t| (t.id.as_str(), t.zone.as_str())).collect();
    for key in report.deliveries.keys() {
        if let ["pulse", tenant, grain, _] = key.split('#').collect::<Vec<_>>()[..] {
            let zone = zone_of.get(tenant).copied().unwrap_or("?").to_string();
            *report.pulses_by_zone.entry(zone).or_default().entry(grain.to_string()).or_default() += 1;
        }
    }
    report.summaries = count_items(&admin, &summaries).await?;
    report.wall = wall.elapsed();
    report.tables = Some(tables);
    Ok(report)
}

/// Write units a meter saw on every table but the handlers' effect table.
fn own_wcu(db: &Db, effect_table: &str) -> f64 {
    db.meter().snapshot().iter().filter(|(k, _)| k.table != effect_table).map(|(_, t)| t.wcu).sum()
}

/// Every watermark is at or behind its tenants: a group marked done for local date D has every
/// active tenant that follows it, and was added before D began (owed D − 1), with its day pulse
/// for D − 1 queued (a batch item read from the queue table, tooling only) or delivered.
pub async fn check_watermarks(deps: &Deps, delivered: &BTreeMap<String, u64>) -> Result<()> {
    let state = deps.marks.read(&deps.cfg.job).await?;
    let mut queued: std::collections::BTreeSet<String> =
        queued_units(&deps.db, &deps.tables.queue).await?.into_keys().collect();
    queued.extend(delivered.keys().cloned());
    for (group, mark) in &state.marks {
        let d: jiff::civil::Date = mark.parse()?;
        let want = d.yesterday()?.to_string();
        let began = calendar::start_of_day(d, &calendar::zone(group)?)?;
        for k in 0..deps.tenants.shards() {
            let mut ids = Vec::new();
            deps.tenants
                .for_each_zone_page(group, k, None, 500, &Unlimited, |t, _| {
                    ids.extend(
                        t.into_iter()
                            .filter_map(|t| t.ok())
                            .filter(|t| t.pos == Position::Follows && t.since_ms.is_none_or(|s| s < began))
                            .map(|t| t.id),
                    );
                    std::future::ready(Ok::<(), tickwork::DbError>(()))
                })
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for id in ids {
                let key = format!("pulse#{id}#day#{want}");
                ensure!(queued.contains(&key), "watermark {group}={mark} is ahead of tenant {id} (no `{key}` queued)");
            }
        }
    }
    Ok(())
}

/// Every item of `table`, strongly consistent, following the Scan's cursor to the end (tooling
/// and tests only: product code never scans). Unmetered: a check's reads are not the job's.
pub async fn scan_all(db: &Db, table: &str) -> Result<Vec<tickwork::capacity::Item>> {
    let mut out = Vec::new();
    let mut start = None;
    loop {
        let page = db
            .client()
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .with_context(|| format!("scan {table}"))?;
        out.extend(page.items().iter().cloned());
        match page.last_evaluated_key() {
            Some(k) if !k.is_empty() => start = Some(k.clone()),
            _ => return Ok(out),
        }
    }
}

/// Unit keys of every batch item still holding its payload (pending or claimed; a finished one
/// drops it), with how many items hold each, from a paginated Scan (tooling and tests only).
pub async fn queued_units(db: &Db, table: &str) -> Result<BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for u in queued(db, table).await? {
        *out.entry(u.key).or_default() += 1;
    }
    Ok(out)
}

/// Every unit of every batch item in the queue table, as a handler would receive it (its key and
/// payload), in the table's scan order.
pub async fn queued(db: &Db, table: &str) -> Result<Vec<tickwork::batch::Unit>> {
    let mut out = Vec::new();
    for item in scan_all(db, table).await? {
        let s = |k: &str| item.get(k).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let job = tickwork::queue::Job::unclaimed(s("pk"), s("kind"), s("payload"));
        if let Some(Ok(b)) = tickwork::batch::Batch::of_job(&job) {
            out.extend(b.units(&job.kind));
        }
    }
    Ok(out)
}

/// Pulses by (grain, period), each unit key counted once, from the worker's deliveries.
pub fn count_pulses(deliveries: &BTreeMap<String, u64>) -> BTreeMap<(String, String), u64> {
    let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
    for id in deliveries.keys() {
        let mut parts = id.split('#');
        if parts.next() == Some("pulse") {
            let (_tenant, grain, period) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            *out.entry((grain.to_string(), period.to_string())).or_default() += 1;
        }
    }
    out
}

async fn count_items(db: &Db, table: &str) -> Result<u64> {
    Ok(scan_all(db, table).await?.len() as u64)
}

/// The day pulses each tenant should have received: from the local date of the first tick (when
/// the tenants were added) to the last local date that ended before the final tick.
pub fn expected_day_pulses(cfg: &SimConfig, zone: &str) -> Result<Vec<String>> {
    let tz = calendar::zone(zone)?;
    let first = calendar::local_date(cfg.start_ms, &tz)?;
    let last_tick = cfg.start_ms + (i64::from(cfg.days) * 86_400_000 / cfg.tick_ms - 1) * cfg.tick_ms;
    let last = calendar::local_date(last_tick, &tz)?.yesterday()?;
    let mut out = Vec::new();
    let mut d = first;
    while d <= last {
        out.push(d.to_string());
        d = d.tomorrow()?;
    }
    Ok(out)
}

impl SimReport {
    /// The human summary `make run` prints.
    pub fn render(&self, cfg: &SimConfig) -> String {
        let mut s = String::new();
        let per = |t: &Tally, n: u64| if n == 0 { 0.0 } else { t.requests as f64 / n as f64 };
        s.push_str(&format!(
            "tenants: {} in {} zones; {} sweep workers on phase-shifted {}-s ticks over {} simulated days\n",
            self.tenants,
            ZONES.len().min(self.tenants),
            cfg.workers,
            cfg.tick_ms / 1000,
            cfg.days
        ));
        s.push_str(&format!("sweep invocations: {:?}\n", self.outcomes));
        s.push_str("pulses per grain and period (every tenant once per period):\n");
        for ((g, p), n) in &self.pulses {
            s.push_str(&format!("  {g:<8} {p:<12} {n}\n"));
        }
        s.push_str(&format!(
            "idle ticks:     {:>6}   requests/tick {:.2} (max reads {} writes {} in any idle tick), RCU {:.1} total\n",
            self.idle_ticks,
            per(&self.idle, self.idle_ticks),
            self.idle_max.0,
            self.idle_max.1,
            self.idle.rcu
        ));
        s.push_str(&format!(
            "boundary ticks: {:>6}   requests/tick {:.1}, items read {}, items written {}, RCU {:.1}, WCU {:.1}\n",
            self.boundary_ticks,
            per(&self.boundary, self.boundary_ticks),
            self.boundary.items_read,
            self.boundary.items_written,
            self.boundary.rcu,
            self.boundary.wcu
        ));
        s.push_str(&format!(
            "queue workers:  requests {}, RCU {:.1}, WCU {:.1}; daily summaries written: {}\n",
            self.worker.requests, self.worker.rcu, self.worker.wcu, self.summaries
        ));
        // Day 0 is every zone's first sight (each tenant's position written once); the days
        // after it are the steady state.
        let steady: Vec<f64> = self.own_wcu_by_day.iter().filter(|(d, _)| **d > 0).map(|(_, w)| *w).collect();
        if !steady.is_empty() && self.tenants > 0 {
            let per = steady.iter().sum::<f64>() / steady.len() as f64 / self.tenants as f64;
            s.push_str(&format!(
                "tickwork's own WCU per tenant-day, pulse sweep and worker, steady days (day 2 on; the summaries, the user's effect, not counted; the fan-out not run here): {per:.3} (the issue's bar for the whole stack: 0.5); by day: {}\n",
                self.own_wcu_by_day
                    .iter()
                    .map(|(d, w)| format!("day {}: {:.3}", d + 1, w / self.tenants as f64))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let total_rcu = self.idle.rcu + self.boundary.rcu + self.worker.rcu;
        let total_wcu = self.idle.wcu + self.boundary.wcu + self.worker.wcu;
        s.push_str(&format!(
            "total capacity: {total_rcu:.1} RCU, {total_wcu:.1} WCU (estimated by DynamoDB's size rules)\nwall time: {:.1} s\n",
            self.wall.as_secs_f64()
        ));
        s
    }
}
