//! `tickctl cost`: what the jobs will cost before they run.
//!
//! Why: in `000_*` the bill was the first sign of trouble. This model predicts, for a number of
//! tenants, zones, sweep workers and a tick interval, the requests every handler makes, operation
//! by operation, by replaying the handlers' own decisions without any I/O:
//!
//! - which zone groups are due at each worker's tick ([`pulse_sweep::due_groups`]'s rule: local date
//!   past the watermark),
//! - what each tenant is owed ([`calendar::plan_tenant`], the function the sweep calls),
//! - which tenant and queue shard every id lands on ([`tenants::shard_of`], [`queue::shard_of`]),
//! - how many rounds of polls a queue drain makes ([`queue_worker::drain`]'s loop),
//!
//! and multiplying by the requests each code path makes (the constants below, one per call site,
//! checked against a live simulated run by `tests/it/cost.rs`). Capacity units follow DynamoDB's
//! size rules as [`tickwork::capacity`] applies them, on the items the handlers build (pulse queue
//! items are built by the sweep's own function and sized).
//!
//! Assumptions, stated: sweep invocations do not overlap (a boundary tick finishes before the next
//! worker's tick, so the leader takes an expired lease and nobody else contends), no retries, no
//! throttling. Sample tenant ids (`tenant-00000`, …) fix the shard loads; other ids spread by the
//! same hash, so shard loads — and a drain's rounds of polls — differ a little by chance.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{ensure, Context, Result};
use serde::Serialize;
use tickwork::calendar::{self, Grain, Policy};
use tickwork::capacity::{self, Consistency};
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
    /// Items a worker polls per shard (`TICKWORK_WORKER_BATCH`).
    pub worker_batch: usize,
    /// Catch-up rules.
    pub policy: Policy,
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
}

impl JobCost {
    fn new(job: &str) -> Self {
        Self { job: job.into(), ..Default::default() }
    }

    /// `n` requests of `op`, each costing `units` (RCU for a read, WCU for a write).
    fn add(&mut self, op: &str, n: u64, units: f64) {
        if n == 0 {
            return;
        }
        *self.ops.entry(op.into()).or_default() += n;
        if tickwork::meter::is_read(op) {
            self.reads += n;
            self.rcu += units * n as f64;
        } else {
            self.writes += n;
            self.wcu += units * n as f64;
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
        }
        t
    }

    /// The job named `job`.
    pub fn job(&self, job: &str) -> Option<&JobCost> {
        self.jobs.iter().find(|j| j.job == job)
    }
}

/// Requests per call site of the pulse sweep (crates/pulse-sweep/src/lib.rs).
mod sweep_calls {
    /// `run`: the watermark item (pause switch, zone registry, marks), every tick.
    pub const WATERMARK_GET: u64 = 1;
    /// `run_if_leader` → `LeaseStore::acquire`: one conditional UpdateItem when a group is due.
    pub const LEASE_UPDATE: u64 = 1;
    /// `sweep`: the group's checkpoint, one strongly consistent Query per due group (a state per
    /// shard; empty when the run starts).
    pub const CHECKPOINT_QUERY: u64 = 1;
    /// `Watermarks::start_run`: when the group's run started, one UpdateItem per group run.
    pub const RUN_START_UPDATE: u64 = 1;
    /// `read_cursors`: one Query per tenant.
    pub const CURSOR_QUERY: u64 = 1;
    /// `pulse_tenant`: one TransactWriteItems per tenant owed anything (pulses + cursor moves).
    pub const TENANT_TXN: u64 = 1;
    /// `Checkpoints::save` after every page (fenced: a transaction).
    pub const PAGE_CHECKPOINT_TXN: u64 = 1;
    /// `Watermarks::advance` per completed group (fenced: a transaction).
    pub const WATERMARK_TXN: u64 = 1;
}

/// Requests of one call site and the capacity units each costs (RCU for reads, WCU for writes),
/// by DynamoDB's size rules as [`tickwork::capacity`] applies them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calls {
    /// Operation.
    pub op: &'static str,
    /// Requests.
    pub n: u64,
    /// Units per request.
    pub units: f64,
}

const fn calls(op: &'static str, n: u64, units: f64) -> Calls {
    Calls { op, n, units }
}

/// Units of a small item (< 1 KB): a write, an eventually and a strongly consistent read.
const WRITE: f64 = 1.0;
const READ_EC: f64 = 0.5;
const READ_SC: f64 = 1.0;
/// A fenced write: the lease's ConditionCheck plus the write, both at the transactional 2x.
const FENCED_TXN: f64 = 4.0;

/// Tenant pages a sweep reads for shards holding `per_shard` tenants: every shard is paged to the
/// end — full pages, then a short page, or an empty one after a full page (DynamoDB returns a
/// cursor when a page is exactly full).
pub fn pages(per_shard: &[usize], page_size: usize) -> u64 {
    per_shard.iter().map(|n| (n / page_size.max(1)) as u64 + 1).sum()
}

/// The requests a sweep makes for one due zone group whose tenants sit `per_shard` in each
/// enumeration shard (index items of `item_bytes`), with one transaction of `tenant_txn_wcu` per
/// tenant when something is owed. Shared by the model and `tickctl plan`.
pub fn group_calls(
    per_shard: &[usize],
    item_bytes: usize,
    page_size: usize,
    tenant_txn_wcu: Option<f64>,
) -> Vec<Calls> {
    let page_size = page_size.max(1);
    let tenants: u64 = per_shard.iter().map(|n| *n as u64).sum();
    let mut out = vec![
        calls("UpdateItem", sweep_calls::RUN_START_UPDATE, WRITE),
        calls("Query", sweep_calls::CHECKPOINT_QUERY, capacity::query_units(std::iter::empty(), Consistency::Strong)),
    ];
    for n in per_shard {
        let page_units = capacity::query_units(std::iter::repeat_n(item_bytes, page_size), Consistency::Eventual);
        let last_units = capacity::query_units(std::iter::repeat_n(item_bytes, n % page_size), Consistency::Eventual);
        out.push(calls("Query", (n / page_size) as u64, page_units));
        out.push(calls("Query", 1, last_units));
    }
    let pages = pages(per_shard, page_size);
    out.push(calls("Query", tenants * sweep_calls::CURSOR_QUERY, READ_SC));
    out.push(calls("TransactWriteItems", pages * sweep_calls::PAGE_CHECKPOINT_TXN, FENCED_TXN));
    if let Some(wcu) = tenant_txn_wcu {
        out.push(calls("TransactWriteItems", tenants * sweep_calls::TENANT_TXN, wcu));
    }
    out.push(calls("TransactWriteItems", sweep_calls::WATERMARK_TXN, FENCED_TXN));
    out
}

/// The requests of a tick before any group's work: the watermark read, and the lease when
/// something is due.
pub fn tick_calls(due: bool) -> Vec<Calls> {
    let mut v = vec![calls("GetItem", sweep_calls::WATERMARK_GET, READ_EC)];
    if due {
        v.push(calls("UpdateItem", sweep_calls::LEASE_UPDATE, WRITE));
    }
    v
}

/// Reads and writes among `calls`.
pub fn reads_writes(calls: &[Calls]) -> (u64, u64) {
    calls.iter().fold((0, 0), |(r, w), c| if tickwork::meter::is_read(c.op) { (r + c.n, w) } else { (r, w + c.n) })
}

/// The WCU of one tenant's pulse transaction: each pulse's queue item (sized) and each cursor
/// move, at the transactional 2x — what `pulse_tenant` writes.
fn tenant_txn_wcu(
    tenant: &str,
    zone: &str,
    plans: &[calendar::GrainPlan],
    cfg: &queue::QueueConfig,
    now: i64,
) -> Result<f64> {
    let mut wcu = 0.0;
    for plan in plans {
        for p in &plan.pulse {
            let item = pulse_sweep::pulse_item(tenant, zone, plan.grain, p, now);
            let put = queue::enqueue_item("q", cfg, &item, now).map_err(|e| anyhow::anyhow!("{e}"))?;
            let size = put.put().map(|p| capacity::item_size(p.item())).unwrap_or(0);
            wcu += capacity::transactional(capacity::write_units(None, Some(size)));
        }
        if plan.advance_to.is_some() {
            wcu += capacity::transactional(WRITE);
        }
    }
    Ok(wcu)
}

/// The index item of a tenant as the zone index projects it (keys and the included attributes).
fn index_item_bytes(id: &str, zone: &str, shards: u32, since_ms: i64) -> usize {
    let t = tenants::Tenant { id: id.into(), zone: zone.into(), active: true, since_ms: Some(since_ms) };
    let mut item = t.to_item(shards);
    item.remove(tenants::TSHARD);
    capacity::item_size(&item)
}

/// One zone's state in the replay: every tenant of a zone was added together, so they share
/// cursors and are owed the same periods.
struct Zone {
    name: String,
    tz: jiff::tz::TimeZone,
    mark: Option<String>,
    cursors: BTreeMap<Grain, String>,
    tenants: Vec<String>,
    /// Tenants per enumeration shard.
    per_shard: Vec<usize>,
    /// Size of one tenant's zone-index item.
    item_bytes: usize,
    /// The before design's cursor per grain (one per zone: its visited tenants share a zone's clock).
    before_cursors: BTreeMap<Grain, String>,
}

/// Runs the model.
pub fn model(input: &CostInput) -> Result<CostReport> {
    ensure!(input.tenants > 0, "--tenants must be at least 1");
    ensure!(!input.zones.is_empty(), "at least one zone is needed");
    ensure!(input.workers > 0, "--workers must be at least 1");
    ensure!(input.tick_ms >= 1000, "--tick must be at least 1s");
    let names: Vec<&str> = input.zones.iter().map(String::as_str).collect();
    let mut zones = Vec::new();
    for z in &input.zones {
        let tz = calendar::zone(z).map_err(|e| anyhow::anyhow!("{e}"))?;
        zones.push(Zone {
            name: z.clone(),
            tz,
            mark: None,
            cursors: BTreeMap::new(),
            tenants: Vec::new(),
            per_shard: vec![0; input.tenant_shards.max(1) as usize],
            item_bytes: 0,
            before_cursors: BTreeMap::new(),
        });
    }
    for i in 0..input.tenants {
        let t = tenants::sample_tenant(i, &names, Some(input.start_ms));
        let z = zones.iter_mut().find(|z| z.name == t.zone).expect("zone of a sample tenant");
        z.per_shard[tenants::shard_of(&t.id, input.tenant_shards) as usize] += 1;
        z.item_bytes = z.item_bytes.max(index_item_bytes(&t.id, &t.zone, input.tenant_shards, input.start_ms));
        z.tenants.push(t.id);
    }

    let mut sweep = JobCost::new("pulse-sweep");
    let mut worker = JobCost::new("queue-worker");
    let mut pulses: BTreeMap<String, u64> = BTreeMap::new();
    let shards = input.queue_shards.max(1) as usize;
    let mut ready = vec![0usize; shards];
    let mut day_pulses_ready = 0u64;
    let phase = input.tick_ms / i64::from(input.workers);
    let qcfg = queue::QueueConfig { shards: input.queue_shards, ..Default::default() };
    let drain = |ready: &mut Vec<usize>, day: &mut u64, worker: &mut JobCost| {
        // drain(): rounds over every shard until a round finds nothing; a round takes up to
        // `batch` items from each shard; each item is a claim, maybe a summary put, a finish.
        let rounds = ready.iter().map(|n| n.div_ceil(input.worker_batch.max(1))).max().unwrap_or(0) as u64;
        let items: usize = ready.iter().sum();
        // A poll reads at most `batch` keys-only index items: one minimum read.
        worker.add("Query", (rounds + 1) * ready.len() as u64, READ_EC);
        // A claim moves the item's ready-index sort key (an index delete + put), a finish takes
        // it out of the index (a delete): 1 + 2 and 1 + 1 WCU.
        worker.add("UpdateItem", items as u64, WRITE + 2.0);
        worker.add("UpdateItem", items as u64, WRITE + 1.0);
        worker.add("PutItem", *day, WRITE); // the daily summary row, day pulses only
        worker.invocations += 1;
        ready.iter_mut().for_each(|n| *n = 0);
        *day = 0;
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
            for c in tick_calls(!due.is_empty()) {
                sweep.add(c.op, c.n, c.units);
            }
            for (zi, local) in due {
                let z = &mut zones[zi];
                let plans = calendar::plan_tenant(&z.tz, t, Some(input.start_ms), &z.cursors, &input.policy)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                let mut txn = None;
                if !plans.is_empty() {
                    let mut sum = 0.0;
                    for id in &z.tenants {
                        sum += tenant_txn_wcu(id, &z.name, &plans, &qcfg, t)?;
                    }
                    txn = Some(sum / z.tenants.len().max(1) as f64);
                }
                for c in group_calls(&z.per_shard, z.item_bytes, input.page_size, txn) {
                    sweep.add(c.op, c.n, c.units);
                }
                for plan in &plans {
                    for p in &plan.pulse {
                        for id in &z.tenants {
                            let pid = pulse_sweep::pulse_id(id, plan.grain, p);
                            ready[queue::shard_of(&pid, input.queue_shards) as usize] += 1;
                        }
                        *pulses.entry(plan.grain.to_string()).or_default() += z.tenants.len() as u64;
                        if plan.grain == Grain::Day {
                            day_pulses_ready += z.tenants.len() as u64;
                        }
                    }
                    if let Some(to) = plan.advance_to {
                        z.cursors.insert(plan.grain, to.id());
                    }
                }
                z.mark = Some(local);
            }
        }
        if (i + 1) % u64::from(input.drain_every.max(1)) == 0 {
            drain(&mut ready, &mut day_pulses_ready, &mut worker);
        }
    }
    // The simulator's last drain, after the final tick.
    drain(&mut ready, &mut day_pulses_ready, &mut worker);

    let before = model_before(input, &mut zones)?;
    Ok(CostReport {
        days: (input.ticks as f64 * input.tick_ms as f64) / 86_400_000.0,
        jobs: vec![sweep, worker],
        before,
        pulses,
    })
}

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
            c.add("PutItem", 1, WRITE);
            c.add("Scan", 1, scan_units);
            c.add("GetItem", 7 * visited as u64, READ_EC);
            for (zi, z) in zones.iter_mut().enumerate() {
                if per_zone[zi] == 0 {
                    continue;
                }
                for grain in Grain::ALL {
                    let id = before_period_id(grain, t, &z.tz)?;
                    if z.before_cursors.get(&grain) != Some(&id) {
                        // A pulse put and a cursor update, both at the transactional 2x.
                        c.add("TransactWriteItems", per_zone[zi], 2.0 * capacity::transactional(WRITE));
                        z.before_cursors.insert(grain, id);
                    }
                }
            }
            c.add("DeleteItem", 1, WRITE);
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

/// Parses `1m`, `90s`, `1h`, `2d`.
pub fn parse_interval(s: &str) -> Result<i64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().with_context(|| format!("`{s}` is not a duration (like 60s, 1m, 1h)"))?;
    let ms = match unit {
        "ms" => 1,
        "s" | "" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => anyhow::bail!("`{other}` in `{s}` is not a unit (ms, s, m, h, d)"),
    };
    Ok(n * ms)
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
        // 8 shard pages + 1 cursor query + 1 checkpoint query; 8 page checkpoints + 1 tenant txn
        // + 1 watermark.
        assert_eq!(s.ops["Query"], 10);
        assert_eq!(s.ops["TransactWriteItems"], 10);
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
        assert!(parse_interval("1w").unwrap_err().to_string().contains("`w`"));
        assert!(parse_interval("m").unwrap_err().to_string().contains("not a duration"));
        assert!(zones(&[], Some(9)).is_err());
    }
}
