//! How long one zone group's boundary takes, shared by shard workers
//! (`TICKWORK_PULSE_SHARD_WORKERS`), and what it asks of the tables: computed from counts, so a
//! group of millions of tenants is answered at once (the bill's replay of every tenant is not).
//!
//! The requests are the shared run's, in order ([`pulse_sweep`]'s `run_group_shared`):
//! - every worker: the state item (1 GetItem) and the run's checkpoints (1 Query); at the end the
//!   checkpoints again (1 Query) and, for the last, the advance (1 TransactWriteItems);
//! - the leader first: its lease (1 UpdateItem), the run's start (1 UpdateItem), then one
//!   asynchronous Invoke per helper, one after another;
//! - per shard: its lease (1 UpdateItem) and its checkpoint (1 GetItem), then per page one Query
//!   and one fenced TransactWriteItems (a shared run flushes every page), then the run's
//!   checkpoints again (1 Query). A shard has `floor(t / page) + 1` pages: a last full page is
//!   followed by an empty one (DynamoDB returns a cursor after a full page);
//! - helpers begin when the leader has started the run (3 requests and the invokes), after their
//!   own 2 reads.
//!
//! Shards are taken by whichever worker is free, so the run lasts the leader's overhead, then
//! `ceil(shards / workers)` rounds of one shard's requests, each request one latency.
//!
//! The limits checked (DynamoDB Developer Guide, "Service, account, and table quotas"): an
//! on-demand table's default maximum of 40,000 write request units a second, and 1,000 write
//! units a second on one partition key. Every pulse item has a partition key of its own (its id,
//! a digest of its units); the ready index puts them on `TICKWORK_QUEUE_SHARDS` partition keys;
//! every flush saves its shard's checkpoint under the job's one checkpoint key (`ckpt#<job>`),
//! which bounds the useful workers (about 50 at 50 ms a request).

use serde::Serialize;

/// An on-demand table's default maximum write throughput, write request units a second
/// ("Service, account, and table quotas in Amazon DynamoDB", Developer Guide, read 2026-11-30).
pub const TABLE_MAX_WCU_PER_SEC: f64 = 40_000.0;
/// The most write units a second one partition key takes (same page: "a single partition can
/// support a maximum of 1,000 write capacity units").
pub const PARTITION_MAX_WCU_PER_SEC: f64 = 1_000.0;

/// What a boundary is asked to do, and the assumptions named.
#[derive(Debug, Clone, Serialize)]
pub struct BoundaryInput {
    /// Tenants of the zone group.
    pub tenants: u64,
    /// Tenant shards (`TICKWORK_TENANT_SHARDS`).
    pub shards: u32,
    /// Tenants per page (`TICKWORK_PULSE_PAGE_SIZE`).
    pub page_size: u32,
    /// Concurrent workers, the leader included (`TICKWORK_PULSE_SHARD_WORKERS`).
    pub workers: u32,
    /// One DynamoDB request's latency, ms (an assumption: `--latency`).
    pub latency_ms: f64,
    /// One asynchronous Invoke's latency, ms, until a helper runs (an assumption: `--invoke-latency`).
    pub invoke_ms: f64,
    /// Write units one page's flush costs (its batch items, doubled in a transaction, their ready
    /// index entries and the checkpoint).
    pub wcu_per_page: f64,
    /// Read units one page costs (the zone index Query).
    pub rcu_per_page: f64,
    /// Queue ready-index shards (`TICKWORK_QUEUE_SHARDS`).
    pub queue_shards: u32,
    /// What one invocation may work before it stops (the function's timeout less the margin), ms.
    pub invocation_ms: f64,
    /// The sweep's schedule interval, ms: work left when an invocation stops waits for the next
    /// tick.
    pub interval_ms: f64,
    /// Tenants of each shard when known (the benchmark counts them); empty: an even split.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shard_tenants: Vec<u64>,
}

/// How the boundary goes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BoundaryTime {
    /// Pages of the largest shard.
    pub pages_per_shard: u64,
    /// Requests one shard takes.
    pub requests_per_shard: u64,
    /// Rounds of shards a worker pages one after another.
    pub rounds: u64,
    /// The leader's requests and invokes before its first shard, ms.
    pub overhead_ms: f64,
    /// From the tick to the watermark, ms.
    pub total_ms: f64,
    /// One shard's time, ms: above `invocation_ms`, a shard needs more than one invocation.
    pub shard_ms: f64,
    /// Every shard fits in one invocation of its worker.
    pub fits_one_invocation: bool,
    /// Ticks the boundary spans (1: done within the tick that found it due).
    pub ticks: u64,
    /// Write units the boundary writes.
    pub write_units: f64,
    /// Read units it reads.
    pub read_units: f64,
    /// Write units a second while every worker pages.
    pub peak_wcu_per_sec: f64,
    /// Of which on one ready-index partition key.
    pub peak_ready_wcu_per_sec: f64,
    /// On the checkpoints' one partition key (`ckpt#<job>`): every flush saves its shard there.
    pub peak_checkpoint_wcu_per_sec: f64,
    /// Within the table's and the partitions' limits.
    pub within_limits: bool,
}

/// The boundary's time and load on DynamoDB, whose requests do not wait for each other at these
/// rates. Pure.
pub fn predict(b: &BoundaryInput) -> BoundaryTime {
    predict_on(b, 0.0)
}

/// The response time of a single server taking `service_ms` a request, with `n` clients each
/// waiting `think_ms` between requests: exact mean-value analysis of a closed network of one
/// queue and one delay (Reiser and Lavenberg, 1980). With no service time, no wait.
pub fn response_ms(n: u32, service_ms: f64, think_ms: f64) -> f64 {
    let mut queue = 0.0;
    let mut r = service_ms;
    for k in 1..=n.max(1) {
        r = service_ms * (1.0 + queue);
        let x = f64::from(k) / (think_ms + r).max(1e-9);
        queue = x * r;
    }
    r
}

/// [`predict`] against a server that answers one request at a time, `server_ms` each (the local
/// server): each request then waits the latency and its turn at the server, which grows with
/// the workers still paging ([`response_ms`]).
pub fn predict_on(b: &BoundaryInput, server_ms: f64) -> BoundaryTime {
    let shards = u64::from(b.shards.max(1));
    let workers = u64::from(b.workers.max(1)).min(shards);
    let page = u64::from(b.page_size.max(1));
    let sizes: Vec<u64> = if b.shard_tenants.is_empty() {
        vec![b.tenants.div_ceil(shards); shards as usize]
    } else {
        b.shard_tenants.clone()
    };
    let requests = |t: u64| 3 + 2 * (t / page + 1);
    let request_ms = |busy: u64| b.latency_ms + response_ms(busy as u32, server_ms, b.latency_ms);
    let overhead_ms = 4.0 * request_ms(1) + (workers - 1) as f64 * b.invoke_ms;
    // Shards go to whichever worker is free first, in order; a shard's requests wait for the
    // server as the workers busy at its start do.
    let mut free: Vec<f64> =
        (0..workers).map(|i| if i == 0 { overhead_ms } else { 5.0 * request_ms(1) + i as f64 * b.invoke_ms }).collect();
    let mut shard_ms = 0.0f64;
    for t in &sizes {
        let (i, start) = free.iter().copied().enumerate().min_by(|a, b| a.1.total_cmp(&b.1)).expect("a worker");
        let busy = free.iter().filter(|f| **f > start).count() as u64 + 1;
        let ms = requests(*t) as f64 * request_ms(busy);
        shard_ms = shard_ms.max(ms);
        free[i] = start + ms;
    }
    // A worker busy longer than an invocation stops and its shards wait for the next tick.
    let end = free.iter().copied().fold(0.0, f64::max);
    let invocation = b.invocation_ms.max(1.0);
    let ticks = (end / invocation).ceil().max(1.0) as u64;
    let total_ms = (ticks - 1) as f64 * b.interval_ms + (end - (ticks - 1) as f64 * invocation) + 2.0 * request_ms(1);
    let pages_per_shard = sizes.iter().map(|t| t / page + 1).max().unwrap_or(1);
    let pages: u64 = sizes.iter().map(|t| t / page + 1).sum();
    let write_units = pages as f64 * b.wcu_per_page;
    let read_units = pages as f64 * b.rcu_per_page;
    // Each worker flushes a page every two requests.
    let flushes_per_sec = workers as f64 * 1000.0 / (2.0 * request_ms(workers)).max(0.001);
    let peak_wcu_per_sec = flushes_per_sec * b.wcu_per_page;
    let peak_ready_wcu_per_sec = flushes_per_sec / f64::from(b.queue_shards.max(1));
    // A checkpoint update in a transaction: 2 write units, all on one partition key.
    let peak_checkpoint_wcu_per_sec = flushes_per_sec * 2.0;
    BoundaryTime {
        pages_per_shard,
        requests_per_shard: requests(sizes.iter().copied().max().unwrap_or(0)),
        rounds: shards.div_ceil(workers),
        overhead_ms,
        total_ms,
        shard_ms,
        fits_one_invocation: shard_ms <= b.invocation_ms,
        ticks,
        write_units,
        read_units,
        peak_wcu_per_sec,
        peak_ready_wcu_per_sec,
        peak_checkpoint_wcu_per_sec,
        within_limits: peak_wcu_per_sec <= TABLE_MAX_WCU_PER_SEC
            && peak_ready_wcu_per_sec <= PARTITION_MAX_WCU_PER_SEC
            && peak_checkpoint_wcu_per_sec <= PARTITION_MAX_WCU_PER_SEC,
    }
}

/// The fewest workers (up to the shard count) that finish within `target_ms`, when any does.
pub fn workers_needed(b: &BoundaryInput, target_ms: f64) -> Option<u32> {
    (1..=b.shards.max(1)).find(|w| predict(&BoundaryInput { workers: *w, ..b.clone() }).total_ms <= target_ms)
}

/// The burst's own bill: its write and read units, and every worker's invocations (one a tick
/// the boundary spans) at `memory_mb` for as long as the boundary runs within them. Pure.
pub fn burst_usd(b: &BoundaryInput, t: &BoundaryTime, memory_mb: u32, p: &crate::prices::Prices) -> f64 {
    let workers = f64::from(b.workers.max(1));
    let busy_s = t.total_ms.min(b.invocation_ms * t.ticks as f64) / 1000.0;
    let gb_s = workers * busy_s * f64::from(memory_mb) / 1024.0;
    p.units_usd(t.read_units, t.write_units)
        + gb_s * p.lambda_arm_gb_second
        + workers * t.ticks as f64 * p.lambda_requests_million / 1e6
}

/// Write and read units of one full page's flush and Query, from the items the sweep builds:
/// `tenants` ids like `t0000001` owed a day pulse, in one batch item.
pub fn page_units(page_size: u32, queue_shards: u32) -> anyhow::Result<(f64, f64)> {
    use tickwork::calendar::{Grain, Period};
    use tickwork::capacity::{self, Consistency};
    let day = Period::containing(Grain::Day, "2026-11-29".parse()?)?;
    let entries = vec![pulse_sweep::pulse::entry(Grain::Day, &day)];
    let mut batch = tickwork::batch::Batch::new(serde_json::Map::new());
    for i in 0..page_size {
        batch.add(entries.clone(), [format!("t{i:07}")]);
    }
    let qcfg = tickwork::queue::QueueConfig { shards: queue_shards.max(1), ..Default::default() };
    let mut wcu = 2.0 * 2.0; // the shard lease's check and the checkpoint, transactional
    for b in batch.split() {
        // The item, doubled in a transaction, and its keys-only ready-index entry: sized as the
        // bill's model sizes them.
        let (id, bytes) = crate::cost::batch_item_bytes("Z@2026-11-30", &b, &qcfg, 0)?;
        wcu += capacity::transactional(capacity::write_units(None, Some(bytes))) + crate::cost::ready_entry_units(&id);
    }
    let tenant = tickwork::tenants::Tenant::new("t0000000", "Europe/Berlin");
    let rcu = capacity::query_units(
        std::iter::repeat_n(crate::cost::index_item_bytes(&tenant, 8), page_size as usize),
        Consistency::Eventual,
    );
    Ok((wcu, rcu))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(workers: u32) -> BoundaryInput {
        BoundaryInput {
            tenants: 1_600,
            shards: 16,
            page_size: 25,
            workers,
            latency_ms: 100.0,
            invoke_ms: 0.0,
            wcu_per_page: 10.0,
            rcu_per_page: 1.0,
            queue_shards: 1,
            invocation_ms: 295_000.0,
            interval_ms: 900_000.0,
            shard_tenants: vec![],
        }
    }

    #[test]
    fn shards_are_paged_in_rounds_of_the_workers() {
        // 100 tenants a shard in pages of 25: 4 full pages and an empty one; 3 + 2 * 5 requests.
        let one = predict(&input(1));
        assert_eq!((one.pages_per_shard, one.requests_per_shard, one.rounds), (5, 13, 16));
        assert_eq!(one.total_ms, 400.0 + 16.0 * 1_300.0 + 200.0);
        let eight = predict(&input(8));
        assert_eq!(eight.rounds, 2);
        assert!(eight.total_ms < one.total_ms / 6.0);
        // More workers than shards: one round.
        assert_eq!(predict(&input(64)).rounds, 1);
        assert_eq!(workers_needed(&input(1), 3_400.0), Some(8));
        assert_eq!(workers_needed(&input(1), 100.0), None);
    }

    #[test]
    fn a_single_server_queues_the_workers() {
        // One client: no queue. Many: each waits for the others' service.
        assert_eq!(response_ms(1, 20.0, 200.0), 20.0);
        let r16 = response_ms(16, 20.0, 200.0);
        assert!(r16 > 16.0 * 20.0 - 200.0 && r16 < 16.0 * 20.0, "{r16}");
        assert_eq!(response_ms(16, 0.0, 200.0), 0.0);
        let slow = predict_on(&input(16), 20.0);
        assert!(slow.total_ms > predict(&input(16)).total_ms * 1.5);
    }

    #[test]
    fn work_beyond_an_invocation_waits_for_the_next_tick() {
        let mut b = input(1);
        b.invocation_ms = 10_000.0;
        let t = predict(&b);
        // 16 shards of 1.3 s: 21.2 s of work, three invocations a quarter hour apart.
        assert_eq!(t.ticks, 3);
        assert!(t.total_ms > 2.0 * 900_000.0 && t.total_ms < 2.0 * 900_000.0 + 10_000.0, "{}", t.total_ms);
    }

    #[test]
    fn a_burst_costs_its_units_and_its_invocations() {
        let p = crate::prices::Prices::default();
        let b = input(8);
        let t = predict(&b);
        let usd = burst_usd(&b, &t, 256, &p);
        let units = t.write_units * p.ddb_write_million / 1e6 + t.read_units * p.ddb_read_million / 1e6;
        let lambda = 8.0 * t.total_ms / 1000.0 * 0.25 * p.lambda_arm_gb_second + 8.0 * p.lambda_requests_million / 1e6;
        assert!((usd - units - lambda).abs() < 1e-12, "{usd} vs {units} + {lambda}");
        // By hand: 16 shards × 5 pages × 10 WRU = 800 WRU at $0.625/M, 80 RRU at $0.125/M;
        // 8 workers × 3.3 s (2 rounds of 1.3 s, 0.7 s start and end) × 0.25 GB at $0.0000133334,
        // and 8 requests at $0.20/M: $0.0005 + $0.00001 + $0.00008800044 + $0.0000016.
        assert!((usd - 0.000_599_600_44).abs() < 1e-12, "{usd}");
        assert!(burst_usd(&b, &t, 512, &p) > usd, "more memory, more GB-seconds");
    }

    #[test]
    fn the_limits_are_checked_at_the_peak() {
        let mut b = input(16);
        b.wcu_per_page = 3_000.0;
        let t = predict(&b);
        // 16 workers, a flush every 200 ms: 80 flushes a second.
        assert_eq!(t.peak_wcu_per_sec, 240_000.0);
        assert!(!t.within_limits);
        b.wcu_per_page = 10.0;
        assert!(predict(&b).within_limits);
    }

    #[test]
    fn a_page_of_a_thousand_tenants_is_some_dozen_write_units() {
        let (wcu, rcu) = page_units(1000, 1).unwrap();
        assert!((10.0..200.0).contains(&wcu), "{wcu}");
        assert!((5.0..50.0).contains(&rcu), "{rcu}");
    }
}
