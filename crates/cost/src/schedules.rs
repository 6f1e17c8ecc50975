//! What schedules cost: one fire tick's requests and units replayed through the sweep's own rules
//! (`pulse_sweep`'s fires: pages of [`pulse_sweep::FIRE_PAGE`] due records, transactions of
//! [`pulse_sweep::FIRE_CHUNK`]), with the items the code builds sized by DynamoDB's rules, and the
//! month's bill of a daily schedule per tenant beside one EventBridge Scheduler schedule each.
//!
//! Every fire today is its own due record, so a fire costs the same whether tenants share a spec
//! or not: tenants sharing a (zone, spec) are not yet fired as a group.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use tickwork::batch::Batch;
use tickwork::capacity::{self, Consistency};
use tickwork::queue::{enqueue_item, QueueConfig};
use tickwork::schedules::{due_shard, DueRecord};

use crate::bill::{scheduler_per_tenant, Prices, Stack};
use crate::cost::calls::{table, Calls, READ_STRONG, TXN_SMALL, WRITE};

/// One schedule due at the tick: its tenant, name and occurrence.
#[derive(Debug, Clone)]
pub struct Due {
    /// Tenant id.
    pub tenant: String,
    /// Schedule name.
    pub name: String,
    /// The occurrence key it fires (`2026-12-01T08:00:00+01:00`).
    pub occurrence: String,
}

fn record(d: &Due, due_ms: i64) -> DueRecord {
    DueRecord {
        due_ms,
        tenant: d.tenant.clone(),
        name: d.name.clone(),
        ver: 1,
        zone: "Europe/Berlin".into(),
        after_ms: due_ms,
    }
}

/// The calls of a tick at which `due` fire (each its own record, its tenant active, one fire each),
/// for the sweep's `job` and queue settings, after the tick's state read and lease.
pub fn fire_tick(due: &[Due], job: &str, queue: &QueueConfig, now_ms: i64) -> Result<Vec<Calls>> {
    let mut v = crate::cost::tick_calls(true);
    let mut by_shard: BTreeMap<u32, Vec<&Due>> = BTreeMap::new();
    for d in due {
        by_shard.entry(due_shard(&d.tenant, &d.name)).or_default().push(d);
    }
    let page = pulse_sweep::FIRE_PAGE as usize;
    for k in 0..tickwork::schedules::DUE_SHARDS {
        let shard = by_shard.get(&k).map(Vec::as_slice).unwrap_or(&[]);
        // Pages to the end: a full page returns a cursor, and the next one is read (empty).
        let mut pages: Vec<&[&Due]> = shard.chunks(page).collect();
        if shard.len() % page == 0 {
            pages.push(&[]);
        }
        for p in pages {
            let sizes = p.iter().map(|d| capacity::item_size(&record(d, now_ms).to_item(job)));
            v.push(Calls {
                table: table::CONTROL,
                op: "Query",
                n: 1,
                units: capacity::query_units(sizes, Consistency::Strong),
            });
            if p.is_empty() {
                continue;
            }
            // Definitions: 100 keys a BatchGetItem, each a small item read strongly consistently.
            for c in p.chunks(100) {
                v.push(Calls { table: table::CONTROL, op: "BatchGetItem", n: 1, units: READ_STRONG * c.len() as f64 });
            }
            // Tenants: one strongly consistent GetItem each.
            v.push(Calls { table: table::TENANTS, op: "GetItem", n: p.len() as u64, units: READ_STRONG });
            for chunk in p.chunks(pulse_sweep::FIRE_CHUNK) {
                let mut batch = Batch::new(Default::default());
                for d in chunk {
                    batch.add(vec![pulse_sweep::fire_entry(&d.name, &d.occurrence)], [d.tenant.clone()]);
                }
                // The fence's check, and per record the successor's put and the fired one's delete.
                let control: f64 = TXN_SMALL
                    + chunk
                        .iter()
                        .map(|d| {
                            let put = capacity::write_units(
                                None,
                                Some(capacity::item_size(&record(d, now_ms + 86_400_000).to_item(job))),
                            );
                            capacity::transactional(put) + TXN_SMALL
                        })
                        .sum::<f64>();
                v.push(Calls { table: table::CONTROL, op: "TransactWriteItems", n: 1, units: control });
                for item in pulse_sweep::fire_items(batch, now_ms) {
                    let w = enqueue_item("queue", queue, &item, now_ms)?;
                    let size = w.put().map(|p| capacity::item_size(p.item())).unwrap_or(0);
                    // Written in the same transaction: billed on the control table's request.
                    v.push(Calls {
                        table: table::QUEUE,
                        op: "TransactWriteItems",
                        n: 0,
                        units: capacity::transactional(capacity::write_units(None, Some(size))),
                    });
                }
            }
        }
    }
    // The earliest record left, a shard at a time, `sched_next` set, and the lease let go (a tick
    // that fires lets it go as it ends).
    v.push(Calls {
        table: table::CONTROL,
        op: "Query",
        n: u64::from(tickwork::schedules::DUE_SHARDS),
        units: READ_STRONG,
    });
    v.push(Calls { table: table::CONTROL, op: "UpdateItem", n: 2, units: WRITE });
    Ok(v)
}

/// A burst: `fires` schedules due at the same instant (a populous zone's 08:00).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BurstInput {
    /// Fires due at once.
    pub fires: u64,
    /// From their instant until the sweep runs, ms: 0 when the instant is a tick's (a local hour
    /// falls on a quarter hour in every zone), up to a minute when a wake runs it (Scheduler's
    /// 60-second precision, the wake rounded up to the minute).
    pub start_ms: f64,
    /// One DynamoDB request's latency, ms: requests made at once overlap it.
    pub latency_ms: f64,
    /// A server's own time a request that does not overlap, ms: 0 for DynamoDB; a local server
    /// that serves one request at a time (moto) is measured for the benchmark.
    pub serial_ms: f64,
    /// Tenants read at once (`TICKWORK_PULSE_TENANT_CONCURRENCY`).
    pub tenant_concurrency: u32,
    /// How long one sweep invocation fires, ms (its timeout less the margin).
    pub invocation_ms: f64,
    /// The sweep's tick, ms: what an invocation stopped by its deadline leaves waits for it.
    pub interval_ms: f64,
}

/// How a burst is handed to the queue.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BurstTime {
    /// Due-record pages read (of [`pulse_sweep::FIRE_PAGE`]).
    pub pages: u64,
    /// Requests, in order (the sweep fires shard after shard, page after page).
    pub requests: u64,
    /// The requests' own time, ms (before the partition's write limit).
    pub requests_ms: f64,
    /// From the fires' instant until the last is queued, ms.
    pub handover_ms: f64,
    /// Sweep invocations it takes (more than one: the rest waited for a tick).
    pub invocations: u64,
    /// The least time the due partitions' write limit allows, ms: every fire replaces its due
    /// record (a put and a delete, transactional: [`DUE_WCU_PER_FIRE`]) in its own due shard's
    /// partition, of at most 1,000 write units a second, and the sweep fires one shard after
    /// another: one partition takes the writes at a time.
    pub partition_floor_ms: f64,
}

/// Write units a fire spends in its due partition: the successor's put and the fired record's
/// delete, each a transactional write of a small item (2 units each).
pub const DUE_WCU_PER_FIRE: f64 = 4.0;

/// The sweep's part of a burst, from its own paging (pure): per page of due records a Query, the
/// definitions 100 keys a BatchGetItem, the tenants `tenant_concurrency` at a time, and a
/// transaction per [`pulse_sweep::FIRE_CHUNK`] records, each request `latency_ms`, one page after
/// another over [`tickwork::schedules::DUE_SHARDS`] shards; then the earliest record left and
/// `sched_next`. Not modelled: the calendar groups the same invocation sweeps first (at a local
/// hour that is not midnight, a tick with no boundary: a read).
pub fn burst(b: &BurstInput) -> BurstTime {
    let page = pulse_sweep::FIRE_PAGE as u64;
    let shards = u64::from(tickwork::schedules::DUE_SHARDS);
    let mut t = BurstTime::default();
    let mut work_ms = 0.0;
    for k in 0..shards {
        let n = b.fires / shards + u64::from(k < b.fires % shards);
        let full = n / page;
        let rest = n % page;
        // A full last page returns a cursor: one more (empty) page is read.
        let sizes: Vec<u64> = std::iter::repeat_n(page, full as usize).chain(std::iter::once(rest)).collect();
        for p in sizes {
            // A Query; then the definitions 100 keys a BatchGetItem, the tenants a GetItem each,
            // `tenant_concurrency` at once, and a transaction a chunk.
            let one_by_one = 1 + if p == 0 { 0 } else { p.div_ceil(100) + p.div_ceil(pulse_sweep::FIRE_CHUNK as u64) };
            let tenants = if p == 0 { 0 } else { p };
            let rounds = tenants.div_ceil(u64::from(b.tenant_concurrency.max(1)));
            t.pages += 1;
            t.requests += one_by_one + tenants;
            work_ms += one_by_one as f64 * (b.latency_ms + b.serial_ms)
                + rounds as f64 * b.latency_ms
                + tenants as f64 * b.serial_ms;
        }
    }
    // Then the earliest record left (a Query a shard) and `sched_next` set.
    t.requests += shards + 1;
    work_ms += (shards + 1) as f64 * (b.latency_ms + b.serial_ms);
    t.requests_ms = work_ms;
    t.partition_floor_ms = b.fires as f64 * DUE_WCU_PER_FIRE / crate::boundary::PARTITION_MAX_WCU_PER_SEC * 1000.0;
    // Requests faster than the partitions take their writes are throttled down to them.
    let work_ms = work_ms.max(t.partition_floor_ms);
    let window = b.invocation_ms.max(1.0);
    let extra = (work_ms / window).ceil().max(1.0) - 1.0;
    t.invocations = extra as u64 + 1;
    // Each invocation stopped by its deadline leaves the rest to the next tick.
    t.handover_ms = b.start_ms + extra * b.interval_ms + (work_ms - extra * window);
    t
}

/// A fire's cost, and a month of one daily schedule per tenant beside the Scheduler.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SchedulesCost {
    /// Tenants, each with one daily schedule.
    pub tenants: u64,
    /// Fires in the modelled tick.
    pub fires: u64,
    /// Requests a fire.
    pub requests_per_fire: f64,
    /// Read units a fire.
    pub rcu_per_fire: f64,
    /// Write units a fire (tenants sharing a spec or not: the same today).
    pub wcu_per_fire: f64,
    /// A month of fires, DynamoDB, US dollars.
    pub month_usd: f64,
    /// One EventBridge Scheduler schedule per tenant instead, a month, US dollars.
    pub scheduler_month_usd: f64,
}

/// The units of `calls`: requests, read units, write units.
pub fn totals(calls: &[Calls]) -> (u64, f64, f64) {
    calls.iter().fold((0, 0.0, 0.0), |(n, r, w), c| {
        let units = c.units * c.n.max(1) as f64;
        if tickwork::meter::is_read(c.op) {
            (n + c.n, r + units, w)
        } else {
            (n + c.n, r, w + units)
        }
    })
}

/// One daily schedule for each of `tenants`, modelled from a tick firing `sample` of them at once
/// (the per-fire cost of a large tick), priced for 30 days.
pub fn month(tenants: u64, sample: u64, job: &str, prices: &Prices) -> Result<SchedulesCost> {
    let due: Vec<Due> = (0..sample)
        .map(|i| Due {
            tenant: format!("tenant-{i:07}"),
            name: "nudge".into(),
            occurrence: "2026-12-01T08:00:00+01:00".into(),
        })
        .collect();
    let calls = fire_tick(&due, job, &QueueConfig::default(), 1_796_108_400_000)?;
    let (n, r, w) = totals(&calls);
    let f = sample.max(1) as f64;
    let fires_month = tenants as f64 * 30.0;
    let sched = scheduler_per_tenant(tenants as usize, &Stack::default(), prices);
    Ok(SchedulesCost {
        tenants,
        fires: sample,
        requests_per_fire: n as f64 / f,
        rcu_per_fire: r / f,
        wcu_per_fire: w / f,
        month_usd: prices.units_usd(r / f * fires_month, w / f * fires_month),
        scheduler_month_usd: sched.total(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst_of(fires: u64) -> BurstInput {
        BurstInput {
            fires,
            start_ms: 0.0,
            latency_ms: 10.0,
            serial_ms: 0.0,
            tenant_concurrency: 8,
            invocation_ms: 255_000.0,
            interval_ms: 900_000.0,
        }
    }

    #[test]
    fn a_burst_is_paged_shard_by_shard_and_what_passes_an_invocation_waits_for_a_tick() {
        // 800 fires: 200 a shard, a full page and an empty one each; a full page is a Query, 2
        // BatchGets, 200 tenants' GetItems in 25 rounds of 8, and 5 transactions.
        let t = burst(&burst_of(800));
        // Then 4 Queries for the earliest record and `sched_next`'s update.
        assert_eq!((t.pages, t.requests, t.invocations), (8, 4 * (208 + 1) + 5, 1));
        assert_eq!(t.requests_ms, (4.0 * (33.0 + 1.0) + 5.0) * 10.0);
        // 1.41 s of requests, but 3,200 write units for one partition at a time: 3.2 s.
        assert_eq!(t.partition_floor_ms, 3_200.0);
        assert_eq!(t.handover_ms, 3_200.0);
        let slow = burst(&BurstInput { latency_ms: 30.0, ..burst_of(800) });
        assert_eq!(slow.handover_ms, 141.0 * 30.0, "the requests, when they take longer");
        // A million: 5,000 pages of 208 requests in 33 rounds, 1,650 s; but one due partition at a
        // time takes their 4 million write units, at 1,000 a second: 4,000 s, in windows of
        // 255 s, the rest waiting a tick each time.
        let m = burst(&burst_of(1_000_000));
        assert_eq!(m.requests, 5_000 * 208 + 4 + 5);
        // A server that serves one request at a time adds its own time to every request.
        let serial = burst(&BurstInput { serial_ms: 1.0, ..burst_of(800) });
        assert_eq!(serial.requests_ms, t.requests_ms + serial.requests as f64);
        assert_eq!(m.partition_floor_ms, 4_000_000.0);
        assert_eq!(m.invocations, 16);
        assert_eq!(m.handover_ms, 15.0 * 900_000.0 + (4_000_000.0 - 15.0 * 255_000.0));
    }

    #[test]
    fn a_fire_costs_about_four_write_units_and_a_million_daily_fires_cost_more_than_the_scheduler() {
        let c = month(1_000_000, 10_000, "pulse-sweep", &Prices::default()).unwrap();
        assert!((4.0..4.5).contains(&c.wcu_per_fire), "{c:?}");
        assert!((1.9..2.2).contains(&c.rcu_per_fire), "{c:?}");
        // 30 million fires: 30 M × ~4.1 WCU at $0.625/M is about $78, beside the Scheduler's
        // 16 million paid invocations at $1/M plus their Lambda requests.
        assert!(c.month_usd > c.scheduler_month_usd, "{c:?}");
    }
}
