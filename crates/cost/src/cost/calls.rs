//! The requests each call site makes and the units each costs, and one zone group's run replayed
//! through the sweep's own flush rule.

use std::collections::BTreeSet;

use anyhow::Result;
use tickwork::calendar::Grain;
use tickwork::capacity::{self, Consistency};
use tickwork::{queue, tenants};

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
pub(crate) const WRITE: f64 = 1.0;
pub(crate) const READ_EC: f64 = 0.5;
pub(crate) const READ_STRONG: f64 = 1.0;
/// A small item written in a transaction, and the lease's ConditionCheck there: 2 units each.
pub(crate) const TXN_SMALL: f64 = 2.0;

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
pub(crate) struct RunTenant<'a> {
    pub(crate) id: &'a str,
    pub(crate) explicit: bool,
}

/// A batch item a flush wrote: what the worker will claim, run and finish.
#[derive(Debug, Clone)]
pub(crate) struct QueuedBatch {
    pub(crate) shard: u32,
    pub(crate) bytes: usize,
    pub(crate) day_units: u64,
}

/// One zone group's run, replayed: the sweep's pages, its flush decisions
/// ([`pulse_sweep::FlushCounts`]) and the batch items it writes. Returns the calls, and the batch
/// items for the queue worker. `per_shard` holds each shard's tenants in index order.
pub(crate) fn run_calls(
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

/// Bytes a claim adds to a queue item over the enqueued one: the `owner` attribute holding the
/// worker's id (`queue-worker-` and 16 hex digits, `tickwork_lambda::owner_id`); the state, the
/// attempt count and the visible time change in place.
pub(crate) const CLAIM_BYTES: usize = "owner".len() + "queue-worker-".len() + 16;
