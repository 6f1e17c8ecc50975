//! `tickctl cost`: what the jobs will cost before they run.
//!
//! Why: in `000_*` the bill was the first sign of trouble. This model predicts, for a number of
//! tenants, zones, sweep workers and a tick interval, the requests every handler makes, operation
//! by operation, by replaying the handlers' own decisions without any I/O:
//!
//! - which zone groups are due at each worker's tick ([`pulse_sweep::group_due`]: local date past
//!   the watermark),
//! - what each tenant is owed ([`pulse_sweep::pulse::owed`], the function the sweep calls: a
//!   tenant's first sight, then its group's periods),
//! - which tenant shard every id lands on, in the index's order ([`tenants::shard_of`]), and when
//!   the sweep flushes ([`pulse_sweep::FlushCounts`], the sweep's own rule),
//! - the batch items those flushes write (built with [`tickwork::batch`] and the queue's own item
//!   builder, then sized), their queue shards, and how many rounds of polls a drain makes
//!   ([`queue_worker::drain`]'s loop),
//!
//! and multiplying by the requests each code path makes (the constants below, one per call site,
//! checked against a live simulated run by `tests/it/cost.rs`). Capacity units follow DynamoDB's
//! size rules as [`tickwork::capacity`] applies them.
//!
//! Assumptions, stated: sweep invocations do not overlap (a boundary tick finishes before the next
//! worker's tick, so the leader takes an expired lease and nobody else contends), no retries, no
//! throttling. Sample tenant ids (`tenant-00000`, …) fix the shard loads; other ids spread by the
//! same hash, so shard loads — and a drain's rounds of polls — differ a little by chance.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{ensure, Result};
use serde::Serialize;
use tickwork::calendar::{self, Grain, Policy};
use tickwork::capacity::{self, Consistency};
use tickwork::config::Env;
use tickwork::{queue, tenants};

/// What to price.
#[derive(Debug, Clone)]
pub struct CostInput {
    /// Active tenants, round-robin over `zones`, added at `start_ms`.
    pub tenants: usize,
    /// IANA zone names.
    pub zones: Vec<String>,
    /// Sweep tick interval (ms).
    pub tick_ms: i64,
    /// Sweep workers on phase-shifted ticks (each tick is an invocation).
    pub workers: u32,
    /// Ticks to price.
    pub ticks: u64,
    /// First tick (ms).
    pub start_ms: i64,
    /// A queue drain every this many ticks.
    pub drain_every: u32,
    /// Tenant enumeration shards (`TICKWORK_TENANT_SHARDS`).
    pub tenant_shards: u32,
    /// Queue shards (`TICKWORK_QUEUE_SHARDS`).
    pub queue_shards: u32,
    /// Tenants per page (`TICKWORK_PULSE_PAGE_SIZE`).
    pub page_size: usize,
    /// Tenants per fan-out page (`TICKWORK_FANOUT_PAGE_SIZE`).
    pub fanout_page_size: usize,
    /// Items a worker polls per shard (`TICKWORK_WORKER_BATCH`).
    pub worker_batch: usize,
    /// Catch-up rules.
    pub policy: Policy,
}

/// The model's default first tick, 2026-03-29T00:00Z: its month holds Berlin's spring DST change
/// (a 23-hour day), a month and a quarter end, so a default run prices every grain and the
/// shortest local day.
pub const DEFAULT_START_MS: i64 = 1_774_742_400_000;

/// The most tenants the model replays one by one; above, it runs at two sizes and each service
/// is a straight line through them (minutes at ten million tenants become seconds).
pub const FULL_MODEL_MAX: usize = 4_000;

impl CostInput {
    /// This load under the deployment the environment describes: the shard counts, page sizes,
    /// worker batch and catch-up rules the functions read, with the same defaults and bounds
    /// (an unset one is the deployed default), so `tickctl cost` prices what is deployed. The
    /// load itself (tenants, zones, tick, workers, ticks, start, drains) stays as given. Refuses
    /// a degenerate load (no tenant, a tick of 0, no tick, drains more often than ticks) naming
    /// it, where it would otherwise divide by zero.
    pub fn with_env(self, env: &Env) -> Result<Self> {
        use tickwork::env as vars;
        ensure!(self.tenants >= 1, "--tenants must be at least 1");
        ensure!(self.workers >= 1, "--workers must be at least 1");
        ensure!((1_000..=86_400_000).contains(&self.tick_ms), "--tick must be 1s to 1d");
        ensure!(self.ticks >= 1, "nothing to price: --days or --ticks must be at least 1");
        ensure!(self.drain_every >= 1, "--worker-every must be at least one --tick");
        let s = std::time::Duration::from_secs;
        let lateness = env.secs_in(vars::PULSE_MAX_LATENESS_SECS, s(40 * 86_400), s(1), s(60 * 86_400))?;
        Ok(CostInput {
            tenant_shards: env.int_in(vars::TENANT_SHARDS, self.tenant_shards, 1..=1000)?,
            queue_shards: env.int_in(vars::QUEUE_SHARDS, self.queue_shards, 1..=1000)?,
            page_size: env.int_in(vars::PULSE_PAGE_SIZE, self.page_size, 1..=1000)?,
            fanout_page_size: env.int_in(vars::FANOUT_PAGE_SIZE, self.fanout_page_size, 1..=1000)?,
            worker_batch: env.int_in(vars::WORKER_BATCH, self.worker_batch, 1..=100)?,
            policy: Policy {
                catch_up: env.parse_or(vars::PULSE_CATCH_UP, self.policy.catch_up)?,
                max_lateness_ms: lateness.as_millis() as i64,
                interval_ms: self.tick_ms,
            },
            ..self
        })
    }

    /// `tenants` over the 8 sample zones for 30 days from 2026-03-29 as `template.yaml` deploys
    /// the stack: one sweep every quarter hour, the worker's drains hourly at the latest, 8 tenant
    /// shards, 1 queue shard, pages of 1,000, catch-up `all`: `tickctl cost`'s defaults.
    pub fn deployed(tenants: usize) -> Self {
        CostInput {
            tenants,
            zones: tenants::SAMPLE_ZONES.iter().map(|z| z.to_string()).collect(),
            tick_ms: 900_000,
            workers: 1,
            ticks: 30 * 96,
            start_ms: DEFAULT_START_MS,
            drain_every: 4,
            tenant_shards: 8,
            queue_shards: 1,
            page_size: 1000,
            fanout_page_size: 1000,
            worker_batch: 10,
            policy: Policy { catch_up: calendar::CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 900_000 },
        }
    }
}

/// Requests one job makes, per operation, and the units they cost.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JobCost {
    /// Job.
    pub job: String,
    /// Requests per DynamoDB operation.
    pub ops: BTreeMap<String, u64>,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Read capacity units.
    pub rcu: f64,
    /// Write capacity units.
    pub wcu: f64,
    /// Invocations.
    pub invocations: u64,
    /// Units per table (`queue`, `queue/ready` for an index): (RCU, WCU).
    pub tables: BTreeMap<String, (f64, f64)>,
}

impl JobCost {
    fn new(job: &str) -> Self {
        Self { job: job.into(), ..Default::default() }
    }

    /// `n` requests of `op` on `table`, each costing `units` (RCU for a read, WCU for a write).
    fn add_on(&mut self, table: &str, op: &str, n: u64, units: f64) {
        if n == 0 {
            return;
        }
        *self.ops.entry(op.into()).or_default() += n;
        let e = self.tables.entry(table.into()).or_default();
        if tickwork::meter::is_read(op) {
            self.reads += n;
            self.rcu += units * n as f64;
            e.0 += units * n as f64;
        } else {
            self.writes += n;
            self.wcu += units * n as f64;
            e.1 += units * n as f64;
        }
    }

    /// Write units an index bills for writes already counted as requests on its table.
    fn add_index_units(&mut self, index: &str, wcu: f64) {
        self.wcu += wcu;
        self.tables.entry(index.into()).or_default().1 += wcu;
    }

    fn add_calls(&mut self, calls: &[Calls]) {
        for c in calls {
            self.add_on(c.table, c.op, c.n, c.units);
        }
    }

    /// Requests of every kind.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }
}

/// The model's answer.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    /// Simulated days the input spans.
    pub days: f64,
    /// tickwork's jobs.
    pub jobs: Vec<JobCost>,
    /// The `000_*` "before" sweep under the same input.
    pub before: JobCost,
    /// Pulses per grain the sweep would write.
    pub pulses: BTreeMap<String, u64>,
}

impl CostReport {
    /// Every tickwork job together.
    pub fn total(&self) -> JobCost {
        let mut t = JobCost::new("total");
        for j in &self.jobs {
            for (op, n) in &j.ops {
                *t.ops.entry(op.clone()).or_default() += n;
            }
            t.reads += j.reads;
            t.writes += j.writes;
            t.rcu += j.rcu;
            t.wcu += j.wcu;
            t.invocations += j.invocations;
            for (k, (r, w)) in &j.tables {
                let e = t.tables.entry(k.clone()).or_default();
                e.0 += r;
                e.1 += w;
            }
        }
        t
    }

    /// The job named `job`.
    pub fn job(&self, job: &str) -> Option<&JobCost> {
        self.jobs.iter().find(|j| j.job == job)
    }
}

/// Tables as the model names them (logical; an index after a slash).
pub mod table {
    /// Leases, watermarks, checkpoints.
    pub const CONTROL: &str = "control";
    /// Tenants.
    pub const TENANTS: &str = "tenants";
    /// The zone index of the tenants.
    pub const TENANTS_BY_ZONE: &str = "tenants/by_zone";
    /// The shard index of the tenants (the fan-out's enumeration).
    pub const TENANTS_BY_SHARD: &str = "tenants/by_shard";
    /// Queue items.
    pub const QUEUE: &str = "queue";
    /// The queue's ready index.
    pub const QUEUE_READY: &str = "queue/ready";
    /// Daily summaries (the shipped handler's effect).
    pub const SUMMARIES: &str = "summaries";
}

/// Requests of one call site, the table they go to, and the capacity units each costs (RCU for
/// reads, WCU for writes), by DynamoDB's size rules as [`tickwork::capacity`] applies them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calls {
    /// Table (logical).
    pub table: &'static str,
    /// Operation.
    pub op: &'static str,
    /// Requests.
    pub n: u64,
    /// Units per request.
    pub units: f64,
}

const fn calls(table: &'static str, op: &'static str, n: u64, units: f64) -> Calls {
    Calls { table, op, n, units }
}

/// Units of a small item (< 1 KB): a write, an eventually and a strongly consistent read.
const WRITE: f64 = 1.0;
const READ_EC: f64 = 0.5;
const READ_STRONG: f64 = 1.0;
/// A small item written in a transaction, and the lease's ConditionCheck there: 2 units each.
const TXN_SMALL: f64 = 2.0;

/// Tenant pages a sweep reads for shards holding `per_shard` tenants: every shard is paged to the
/// end — full pages, then a short page, or an empty one after a full page (DynamoDB returns a
/// cursor when a page is exactly full).
pub fn pages(per_shard: &[usize], page_size: usize) -> u64 {
    per_shard.iter().map(|n| (n / page_size.max(1)) as u64 + 1).sum()
}

/// The requests of a tick before any group's work (the watermark read, and the lease when
/// something is due), per call site of `tickwork_lambda::job`.
pub fn tick_calls(due: bool) -> Vec<Calls> {
    let mut v = vec![calls(table::CONTROL, "GetItem", 1, READ_EC)];
    if due {
        v.push(calls(table::CONTROL, "UpdateItem", 1, WRITE));
    }
    v
}

/// Reads and writes among `calls`.
pub fn reads_writes(calls: &[Calls]) -> (u64, u64) {
    calls.iter().fold((0, 0), |(r, w), c| if tickwork::meter::is_read(c.op) { (r + c.n, w) } else { (r, w + c.n) })
}

/// One tenant of a run as the model sees it: its id, and whether it carries a position of its own
/// (a first sight).
struct RunTenant<'a> {
    id: &'a str,
    explicit: bool,
}

/// A batch item a flush wrote: what the worker will claim, run and finish.
#[derive(Debug, Clone)]
struct QueuedBatch {
    shard: u32,
    bytes: usize,
    day_units: u64,
}

/// One zone group's run, replayed: the sweep's pages, its flush decisions
/// ([`pulse_sweep::FlushCounts`]) and the batch items it writes. Returns the calls, and the batch
/// items for the queue worker. `per_shard` holds each shard's tenants in index order.
fn run_calls(
    per_shard: &[Vec<RunTenant<'_>>],
    item_bytes: usize,
    page_size: usize,
    owed: &pulse_sweep::pulse::Owed,
    run: &str,
    qcfg: &queue::QueueConfig,
    now: i64,
) -> Result<(Vec<Calls>, Vec<QueuedBatch>)> {
    // The run's name is `<zone>@<local date>`.
    let zone = run.split('@').next().unwrap_or_default();
    use pulse_sweep::FlushCounts;
    let page_size = page_size.max(1);
    let mut out = vec![
        calls(table::CONTROL, "UpdateItem", 1, WRITE), // Watermarks::start_run
        calls(table::CONTROL, "Query", 1, capacity::query_units(std::iter::empty(), Consistency::Strong)), // Checkpoints::read
    ];
    let mut queued = Vec::new();
    let entries = owed.entries();
    let day_each = owed.pulses.iter().filter(|(g, _)| *g == Grain::Day).count() as u64;
    let common = serde_json::Map::from_iter([("zone".to_string(), serde_json::Value::String(zone.to_string()))]);
    // Pending, as the sweep keeps it: units, position writes, shards with a new checkpoint.
    let mut batch = tickwork::batch::Batch::new(common);
    let mut counts = FlushCounts::default();
    let mut shards_pending = BTreeSet::new();
    let flush = |batch: &mut tickwork::batch::Batch,
                 counts: &mut FlushCounts,
                 shards_pending: &mut BTreeSet<usize>,
                 last: bool,
                 out: &mut Vec<Calls>,
                 queued: &mut Vec<QueuedBatch>|
     -> Result<()> {
        let mut wcu = TXN_SMALL; // the lease's ConditionCheck
        for b in batch.clone().split() {
            let (id, bytes) = batch_item_bytes(run, &b, qcfg, now)?;
            let day_units = b.sets.iter().map(|s| s.tenants.len() as u64).sum::<u64>() * day_each;
            wcu += capacity::transactional(capacity::write_units(None, Some(bytes)));
            out.push(calls(table::QUEUE_READY, "TransactWriteItems", 0, ready_entry_units(&id)));
            queued.push(QueuedBatch { shard: queue::shard_of(&id, qcfg.shards), bytes, day_units });
        }
        wcu += TXN_SMALL * counts.repositions as f64;
        wcu += TXN_SMALL * if last { 1 } else { shards_pending.len() } as f64;
        out.push(calls(table::CONTROL, "TransactWriteItems", 1, wcu));
        batch.sets.clear();
        *counts = FlushCounts::default();
        shards_pending.clear();
        Ok(())
    };
    for (k, tenants) in per_shard.iter().enumerate() {
        let n = tenants.len();
        let full = capacity::query_units(std::iter::repeat_n(item_bytes, page_size), Consistency::Eventual);
        let short = capacity::query_units(std::iter::repeat_n(item_bytes, n % page_size), Consistency::Eventual);
        out.push(calls(table::TENANTS_BY_ZONE, "Query", (n / page_size) as u64, full));
        out.push(calls(table::TENANTS_BY_ZONE, "Query", 1, short));
        for page in tenants.chunks(page_size) {
            for t in page {
                if !entries.is_empty() {
                    batch.add(entries.clone(), [t.id.to_string()]);
                    counts.units += entries.len();
                    counts.bytes += FlushCounts::unit_bytes(t.id, &entries);
                }
                counts.repositions += usize::from(t.explicit);
                if counts.full() {
                    shards_pending.insert(k);
                    counts.checkpoints = shards_pending.len();
                    flush(&mut batch, &mut counts, &mut shards_pending, false, &mut out, &mut queued)?;
                }
            }
            shards_pending.insert(k);
            counts.checkpoints = shards_pending.len();
            if counts.full() {
                flush(&mut batch, &mut counts, &mut shards_pending, false, &mut out, &mut queued)?;
            }
        }
        // A shard that is empty, or whose last page was full, ends with an empty page.
        if n % page_size == 0 {
            shards_pending.insert(k);
            counts.checkpoints = shards_pending.len();
            if counts.full() {
                flush(&mut batch, &mut counts, &mut shards_pending, false, &mut out, &mut queued)?;
            }
        }
    }
    flush(&mut batch, &mut counts, &mut shards_pending, true, &mut out, &mut queued)?;
    Ok((out, queued))
}

/// The pulse item a flush of run `run` writes for batch `b`, as the sweep builds it: its id and
/// its size in bytes (the model sizes every write from it).
pub(crate) fn batch_item_bytes(
    run: &str,
    b: &tickwork::batch::Batch,
    qcfg: &queue::QueueConfig,
    now: i64,
) -> Result<(String, usize)> {
    let item = pulse_sweep::pulse::batch_item(&format!("{}#{run}", pulse_sweep::PULSE_KIND), b, now);
    let put = queue::enqueue_item("q", qcfg, &item, now).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((item.id, put.put().map(|p| capacity::item_size(p.item())).unwrap_or(0)))
}

/// The ready-index entry of a queue item (keys only: id, shard, visible time), in write units.
pub(crate) fn ready_entry_units(id: &str) -> f64 {
    let entry = tickwork::capacity::Item::from([
        ("pk".to_string(), tickwork::schema::av_s(id)),
        (queue::SHARD.to_string(), tickwork::schema::av_s(queue::shard_key(0))),
        (queue::VISIBLE_AT.to_string(), tickwork::schema::av_n(1_774_742_400_000i64)),
    ]);
    capacity::write_units(None, Some(capacity::item_size(&entry)))
}

/// The index item of a tenant as the zone index projects it (keys and the included attributes).
pub(crate) fn index_item_bytes(t: &tenants::Tenant, shards: u32) -> usize {
    let mut item = t.to_item(shards);
    item.remove(tenants::TSHARD);
    capacity::item_size(&item)
}

/// Requests of one zone group's run for `tickctl plan`: (reads, writes), from tenant counts
/// alone; `first_sight` when its tenants carry positions of their own.
pub fn run_requests(per_shard: &[usize], page_size: usize, first_sight: bool) -> Result<(u64, u64)> {
    let ids: Vec<Vec<String>> = per_shard.iter().map(|n| (0..*n).map(|i| format!("t{i:07}")).collect()).collect();
    let shards: Vec<Vec<RunTenant<'_>>> =
        ids.iter().map(|v| v.iter().map(|id| RunTenant { id, explicit: first_sight }).collect()).collect();
    let owed = pulse_sweep::pulse::Owed::default();
    let (c, _) = run_calls(&shards, 0, page_size, &owed, "UTC@2000-01-01", &queue::QueueConfig::default(), 0)?;
    Ok(reads_writes(&c))
}

/// One zone's state in the replay: every tenant of a zone was added together, so they share
/// their position and are owed the same periods.
struct Zone {
    name: String,
    tz: jiff::tz::TimeZone,
    mark: Option<String>,
    /// Tenant ids per enumeration shard, in the index's order.
    per_shard: Vec<Vec<String>>,
    /// Size of one tenant's zone-index item (the largest).
    item_bytes: usize,
    tenants: usize,
    /// The before design's cursor per grain (one per zone: its visited tenants share a zone's clock).
    before_cursors: BTreeMap<Grain, String>,
}

/// The input's tenants, round-robin over its zones, as the sweep sees them (per zone and shard)
/// and as the fan-out does (per shard).
fn seed(input: &CostInput) -> Result<(Vec<Zone>, Vec<Vec<tenants::Tenant>>)> {
    let names: Vec<&str> = input.zones.iter().map(String::as_str).collect();
    let mut zones = Vec::new();
    for z in &input.zones {
        let tz = calendar::zone(z).map_err(|e| anyhow::anyhow!("{e}"))?;
        zones.push(Zone {
            name: z.clone(),
            tz,
            mark: None,
            per_shard: vec![Vec::new(); input.tenant_shards.max(1) as usize],
            item_bytes: 0,
            tenants: 0,
            before_cursors: BTreeMap::new(),
        });
    }
    let mut fanout_shards: Vec<Vec<tenants::Tenant>> = vec![Vec::new(); input.tenant_shards.max(1) as usize];
    for i in 0..input.tenants {
        let mut t = tenants::sample_tenant(i, &names, Some(input.start_ms));
        t.pos = tenants::Position::Fresh;
        fanout_shards[tenants::shard_of(&t.id, input.tenant_shards) as usize].push(t.clone());
        let z = zones.iter_mut().find(|z| z.name == t.zone).expect("zone of a sample tenant");
        z.item_bytes = z.item_bytes.max(index_item_bytes(&t, input.tenant_shards));
        z.per_shard[tenants::shard_of(&t.id, input.tenant_shards) as usize].push(t.id);
        z.tenants += 1;
    }
    for z in &mut zones {
        for ids in &mut z.per_shard {
            ids.sort();
        }
    }

    Ok((zones, fanout_shards))
}

/// The `000_*` design alone under `input` (its own schedule is the input's tick).
pub fn model_before_only(input: &CostInput) -> Result<JobCost> {
    let (mut zones, _) = seed(input)?;
    model_before(input, &mut zones)
}

/// Runs the model.
pub fn model(input: &CostInput) -> Result<CostReport> {
    ensure!(input.tenants > 0, "--tenants must be at least 1");
    ensure!(!input.zones.is_empty(), "at least one zone is needed");
    ensure!(input.workers > 0, "--workers must be at least 1");
    ensure!(input.tick_ms >= 1000, "--tick must be at least 1s");
    let (mut zones, mut fanout_shards) = seed(input)?;

    let mut sweep = JobCost::new("pulse-sweep");
    let mut worker = JobCost::new("queue-worker");
    let mut pulses: BTreeMap<String, u64> = BTreeMap::new();
    let shards = input.queue_shards.max(1) as usize;
    let mut ready: Vec<Vec<QueuedBatch>> = vec![Vec::new(); shards];
    let phase = input.tick_ms / i64::from(input.workers);
    let qcfg = queue::QueueConfig { shards: input.queue_shards, ..Default::default() };
    let drain = |ready: &mut Vec<Vec<QueuedBatch>>, worker: &mut JobCost| {
        // drain(): rounds over every shard until a round finds nothing; a round takes up to
        // `batch` items from each shard; each item is a claim, its units, a finish.
        let rounds = ready.iter().map(|q| q.len().div_ceil(input.worker_batch.max(1))).max().unwrap_or(0) as u64;
        // A poll reads at most `batch` keys-only index items: one minimum read.
        worker.add_on(table::QUEUE_READY, "Query", (rounds + 1) * ready.len() as u64, READ_EC);
        for b in ready.iter().flatten() {
            // The claim grows the item by its owner and claim fields and moves its ready-index key
            // (a delete and a put); the finish drops the payload (billed on the item before) and
            // leaves the index (a delete).
            let claimed = b.bytes + CLAIM_BYTES;
            worker.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(None, Some(claimed)));
            worker.add_index_units(table::QUEUE_READY, 2.0 * WRITE);
            worker.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(Some(claimed), None));
            worker.add_index_units(table::QUEUE_READY, WRITE);
            // The daily summary row, one per day unit (a conditional put).
            worker.add_on(table::SUMMARIES, "PutItem", b.day_units, WRITE);
        }
        worker.invocations += 1;
        ready.iter_mut().for_each(|q| q.clear());
    };
    for i in 0..input.ticks {
        for w in 0..input.workers {
            let t = input.start_ms + i as i64 * input.tick_ms + i64::from(w) * phase;
            sweep.invocations += 1;
            let mut due = Vec::new();
            for (zi, z) in zones.iter().enumerate() {
                let local = calendar::local_date(t, &z.tz).map_err(|e| anyhow::anyhow!("{e}"))?.to_string();
                if pulse_sweep::group_due(z.mark.as_deref(), &local) {
                    due.push((zi, local));
                }
            }
            sweep.add_calls(&tick_calls(!due.is_empty()));
            for (zi, local) in due {
                let z = &mut zones[zi];
                let first_sight = z.mark.is_none();
                let today: jiff::civil::Date = local.parse()?;
                let target = pulse_sweep::pulse::Target {
                    tz: &z.tz,
                    today,
                    late_at: t,
                    mark: z.mark.as_deref().map(str::parse).transpose()?,
                    policy: &input.policy,
                };
                let sample = tenants::Tenant {
                    id: String::new(),
                    zone: z.name.clone(),
                    active: true,
                    since_ms: Some(input.start_ms),
                    pos: if first_sight { tenants::Position::Fresh } else { tenants::Position::Follows },
                };
                let owed = pulse_sweep::pulse::owed(&sample, &target, pulse_sweep::pulse::Visit::Run)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let explicit = owed.reposition.is_some();
                let shards: Vec<Vec<RunTenant<'_>>> =
                    z.per_shard.iter().map(|v| v.iter().map(|id| RunTenant { id, explicit }).collect()).collect();
                let run = format!("{}@{local}", z.name);
                let (c, queued) = run_calls(&shards, z.item_bytes, input.page_size, &owed, &run, &qcfg, t)?;
                for call in &c {
                    // Index entries ride on a base-table write (no request of their own); a
                    // read call with no request is just a shard with no full page.
                    if call.n == 0 && tickwork::meter::is_write(call.op) {
                        sweep.add_index_units(call.table, call.units);
                    }
                }
                sweep.add_calls(&c);
                for q in queued {
                    ready[q.shard as usize].push(q);
                }
                for (g, _) in &owed.pulses {
                    *pulses.entry(g.to_string()).or_default() += z.tenants as u64;
                }
                z.mark = Some(local);
            }
        }
        if (i + 1) % u64::from(input.drain_every.max(1)) == 0 {
            drain(&mut ready, &mut worker);
        }
    }
    // The simulator's last drain, after the final tick.
    drain(&mut ready, &mut worker);

    let before = model_before(input, &mut zones)?;
    let days = (input.ticks as f64 * input.tick_ms as f64) / 86_400_000.0;
    let fanout = model_fanout(&mut fanout_shards, input.fanout_page_size, days)?;
    Ok(CostReport { days, jobs: vec![sweep, worker, fanout], before, pulses })
}

/// The tenant fan-out on its hourly schedule over `days` (whole UTC days), and the worker's
/// handling of what it enqueues, from the items it really writes ([`tenant_fanout::window::batch_for`]
/// sized by [`capacity`]): an idle tick is one read; a window's tick reads the state item, takes the
/// lease, reads the window's slot and checkpoints, pages every shard to the end (full pages, then
/// a short or empty one), writes per page one fenced transaction (the batch item, the shard's
/// checkpoint, the lease check), and closes the window with the slot and the watermark in one. The
/// worker claims and finishes each batch item and its handler writes one summary row a tenant
/// (the user's effect, counted on the `summaries` table). Checked against a live run in
/// `tests/it/cost.rs`.
pub fn model_fanout(per_shard: &mut [Vec<tenants::Tenant>], page_size: usize, days: f64) -> Result<JobCost> {
    let mut c = JobCost::new("tenant-fanout");
    let windows = days.floor().max(0.0) as u64;
    let page_size = page_size.max(1);
    let shards = per_shard.len() as u32;
    for ids in per_shard.iter_mut() {
        ids.sort_by(|a, b| a.id.cmp(&b.id));
    }
    // The hourly ticks: 24 a day, one of them the window's.
    c.invocations = (days * 24.0).round() as u64;
    c.add_on(table::CONTROL, "GetItem", c.invocations, READ_EC);
    for _ in 0..windows {
        c.add_on(table::CONTROL, "UpdateItem", 1, WRITE); // the lease
        c.add_on(table::CONTROL, "GetItem", 1, READ_STRONG); // the slot (absent)
        c.add_on(table::CONTROL, "Query", 1, READ_STRONG); // the checkpoints (none)
        let window = "2026-03-29";
        for (k, ts) in per_shard.iter().enumerate() {
            let mut pages: Vec<&[tenants::Tenant]> = ts.chunks(page_size).collect();
            if ts.len() % page_size == 0 {
                pages.push(&[]);
            }
            for page in pages {
                let bytes = page.iter().map(|t| index_item_bytes(t, shards)).collect::<Vec<_>>();
                c.add_on(table::TENANTS_BY_SHARD, "Query", 1, capacity::query_units(bytes, Consistency::Eventual));
                let mut wcu = 2.0 * TXN_SMALL; // the lease check and the checkpoint
                if let Some(item) = tenant_fanout::window::batch_for("utc-daily", window, k as u32, page, 0) {
                    let put = queue::enqueue_item("q", &queue::QueueConfig::default(), &item, 0)
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let size = put.put().map(|p| capacity::item_size(p.item())).unwrap_or(0);
                    wcu += capacity::transactional(capacity::write_units(None, Some(size)));
                    c.add_index_units(table::QUEUE_READY, WRITE);
                    // The worker: claim (the item grows by its owner; its ready key moves), finish
                    // (billed on the item before; its ready key goes), one summary row a tenant.
                    let claimed = size + CLAIM_BYTES;
                    c.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(None, Some(claimed)));
                    c.add_index_units(table::QUEUE_READY, 2.0 * WRITE);
                    c.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(Some(claimed), None));
                    c.add_index_units(table::QUEUE_READY, WRITE);
                    c.add_on(table::SUMMARIES, "PutItem", page.len() as u64, WRITE);
                }
                c.add_on(table::CONTROL, "TransactWriteItems", 1, wcu);
            }
        }
        // The slot and the watermark, fenced.
        c.add_on(table::CONTROL, "TransactWriteItems", 1, 3.0 * TXN_SMALL);
    }
    Ok(c)
}

/// Bytes a claim adds to a queue item over the enqueued one: the `owner` attribute holding the
/// worker's id (`queue-worker-` and 16 hex digits, `tickwork_lambda::owner_id`); the state, the
/// attempt count and the visible time change in place.
const CLAIM_BYTES: usize = "owner".len() + "queue-worker-".len() + 16;

/// The `000_*` sweep (reproduced in `crates/bench`): every worker tick takes the lock (released
/// after the tick, so every tick takes it), Scans one page of 100 tenants with no cursor, reads
/// 7 cursors per visited tenant with GetItem, and writes a pulse + cursor transaction for every
/// grain whose period changed — the quarter-hour and hour grains included.
fn model_before(input: &CostInput, zones: &mut [Zone]) -> Result<JobCost> {
    const PAGE: usize = 100;
    let mut c = JobCost::new("before");
    let visited = input.tenants.min(PAGE);
    // Visited tenants per zone: the first page of a Scan, taken as round-robin like the seed.
    let mut per_zone = vec![0u64; zones.len()];
    for i in 0..visited {
        per_zone[i % zones.len()] += 1;
    }
    let phase = input.tick_ms / i64::from(input.workers);
    // The Scan reads whole tenant items; the first page of `visited`.
    let names: Vec<&str> = input.zones.iter().map(String::as_str).collect();
    let scan_units = capacity::query_units(
        (0..visited).map(|i| {
            let t = tenants::sample_tenant(i, &names, Some(input.start_ms));
            capacity::item_size(&t.to_item(input.tenant_shards))
        }),
        Consistency::Eventual,
    );
    for i in 0..input.ticks {
        for w in 0..input.workers {
            let t = input.start_ms + i as i64 * input.tick_ms + i64::from(w) * phase;
            c.invocations += 1;
            c.add_on(table::CONTROL, "PutItem", 1, WRITE);
            c.add_on(table::TENANTS, "Scan", 1, scan_units);
            c.add_on(table::CONTROL, "GetItem", 7 * visited as u64, READ_EC);
            for (zi, z) in zones.iter_mut().enumerate() {
                if per_zone[zi] == 0 {
                    continue;
                }
                for grain in Grain::ALL {
                    let id = before_period_id(grain, t, &z.tz)?;
                    if z.before_cursors.get(&grain) != Some(&id) {
                        // A pulse put and a cursor update, both at the transactional 2x.
                        c.add_on(
                            table::CONTROL,
                            "TransactWriteItems",
                            per_zone[zi],
                            2.0 * capacity::transactional(WRITE),
                        );
                        z.before_cursors.insert(grain, id);
                    }
                }
            }
            c.add_on(table::CONTROL, "DeleteItem", 1, WRITE);
        }
    }
    Ok(c)
}

/// The `000_*` design's period id of `grain` at `now_ms` — the quarter-hour and hour included,
/// which it pulsed although nothing subscribed. Shared by this model and the bench's reproduction.
pub fn before_period_id(grain: Grain, now_ms: i64, tz: &jiff::tz::TimeZone) -> Result<String> {
    let z = jiff::Timestamp::from_millisecond(now_ms)?.to_zoned(tz.clone());
    Ok(match grain {
        Grain::QuarterHour => format!("{}T{:02}:{:02}", z.date(), z.hour(), z.minute() / 15 * 15),
        Grain::Hour => format!("{}T{:02}", z.date(), z.hour()),
        g => calendar::Period::containing(g, z.date()).map_err(|e| anyhow::anyhow!("{e}"))?.id(),
    })
}

/// A duration as people write it (`90s`, `15m`, `1h`, `2d`, `1h 30m`: humantime's grammar), in ms.
pub fn parse_interval(s: &str) -> Result<i64> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| anyhow::anyhow!("`{s}` is not a duration like 60s, 15m, 1h, 1d: {e}"))?;
    i64::try_from(d.as_millis()).map_err(|_| anyhow::anyhow!("`{s}` is too long"))
}

/// The zones to use: names as given, or the first `count` sample zones.
pub fn zones(names: &[String], count: Option<usize>) -> Result<Vec<String>> {
    if !names.is_empty() {
        let set: BTreeSet<&String> = names.iter().collect();
        ensure!(set.len() == names.len(), "a zone is named twice");
        return Ok(names.to_vec());
    }
    let n = count.unwrap_or(tenants::SAMPLE_ZONES.len());
    ensure!(
        (1..=tenants::SAMPLE_ZONES.len()).contains(&n),
        "--zones must be 1..={} (or name them with --zone)",
        tenants::SAMPLE_ZONES.len()
    );
    Ok(tenants::SAMPLE_ZONES[..n].iter().map(|s| s.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(tenants: usize, days: u64) -> CostInput {
        CostInput {
            tenants,
            zones: zones(&[], None).unwrap(),
            tick_ms: 60_000,
            workers: 3,
            ticks: days * 1440,
            start_ms: 1_774_742_400_000,
            drain_every: 5,
            tenant_shards: 8,
            queue_shards: 8,
            page_size: 100,
            fanout_page_size: 1000,
            worker_batch: 10,
            policy: Policy { catch_up: calendar::CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 60_000 },
        }
    }

    #[test]
    fn idle_ticks_cost_one_read_each() {
        // One day from 00:00Z with one UTC tenant: the first tick is its first sight, the rest idle
        // but for the next midnight, which falls outside the 1,440 ticks.
        let mut i = input(1, 1);
        i.zones = vec!["UTC".into()];
        let r = model(&i).unwrap();
        let s = r.job("pulse-sweep").unwrap();
        assert_eq!(s.invocations, 3 * 1440);
        // 4,320 watermark reads.
        assert_eq!(s.ops["GetItem"], 4320);
        // The lease and the run's start.
        assert_eq!(s.ops["UpdateItem"], 2);
        // 8 shard pages + 1 checkpoint query; one transaction (the tenant's first-sight pulses,
        // its position write, the watermark): nothing per tenant.
        assert_eq!(s.ops["Query"], 9);
        assert_eq!(s.ops["TransactWriteItems"], 1);
        assert_eq!(r.pulses["day"], 1);
    }

    #[test]
    fn a_week_pulses_every_tenant_daily_and_the_before_design_costs_more() {
        let r = model(&input(1000, 7)).unwrap();
        // First sight pulses 03-28 for every tenant; then one day pulse per local midnight.
        assert!(r.pulses["day"] >= 7000, "{:?}", r.pulses);
        let s = r.job("pulse-sweep").unwrap();
        assert!(r.before.requests() > 50 * s.requests(), "before {} tickwork {}", r.before.requests(), s.requests());
    }

    #[test]
    fn intervals_parse_and_bad_ones_are_named() {
        assert_eq!(parse_interval("1m").unwrap(), 60_000);
        assert_eq!(parse_interval("90s").unwrap(), 90_000);
        assert_eq!(parse_interval("2h").unwrap(), 7_200_000);
        assert_eq!(parse_interval("1d").unwrap(), 86_400_000);
        assert!(parse_interval("1x").unwrap_err().to_string().contains("`1x` is not a duration"));
        assert!(parse_interval("m").unwrap_err().to_string().contains("not a duration"));
        assert!(zones(&[], Some(9)).is_err());
    }
}
