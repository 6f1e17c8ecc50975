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
//!   ([`queue_worker::drain()`]'s loop),
//!
//! and multiplying by the requests each code path makes (the constants in [`calls`], one per call
//! site, checked against a live simulated run by `tests/it/cost.rs`). Capacity units follow
//! DynamoDB's size rules as [`tickwork::capacity`] applies them.
//!
//! Assumptions, stated: sweep invocations do not overlap (a boundary tick finishes before the next
//! worker's tick, so the leader takes an expired lease and nobody else contends), no retries, no
//! throttling. Sample tenant ids (`tenant-00000`, …) fix the shard loads; other ids spread by the
//! same hash, so shard loads — and a drain's rounds of polls — differ a little by chance.
//!
//! ## Layout
//! [`input`] what to price; [`report`] the answer; [`calls`] the call sites and one run replayed;
//! `seed` the tenants; [`fanout`] and [`before`] the fan-out and the `000_*` design; this file
//! the replay of every tick.

pub mod before;
pub mod calls;
pub mod fanout;
pub mod input;
pub mod report;
mod seed;

use std::collections::BTreeMap;

use anyhow::{ensure, Result};
use tickwork::calendar;
use tickwork::capacity;
use tickwork::{queue, tenants};

use before::model_before;
use seed::seed;

pub use before::before_period_id;
pub(crate) use calls::{batch_item_bytes, index_item_bytes, ready_entry_units};
pub use calls::{pages, reads_writes, run_requests, table, tick_calls, Calls};
use calls::{run_calls, QueuedBatch, RunTenant, CLAIM_BYTES, READ_EC, WRITE};
pub use fanout::model_fanout;
pub use input::{parse_interval, zones, CostInput, DEFAULT_START_MS, FULL_MODEL_MAX};
pub use report::{CostReport, JobCost};

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
                    grains: input.grains,
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

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::Policy;

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
            grains: tickwork::grains::Grains::ALL,
        }
    }

    #[test]
    fn idle_ticks_cost_one_read_each() {
        // One day from 00:00Z with one UTC tenant added then: the first tick is its first sight
        // (owed nothing yet: its first day ends at the next midnight, outside the 1,440 ticks),
        // the rest idle.
        let mut i = input(1, 1);
        i.zones = vec!["UTC".into()];
        let r = model(&i).unwrap();
        let s = r.job("pulse-sweep").unwrap();
        assert_eq!(s.invocations, 3 * 1440);
        // 4,320 watermark reads.
        assert_eq!(s.ops["GetItem"], 4320);
        // The lease and the run's start.
        assert_eq!(s.ops["UpdateItem"], 2);
        // 8 shard pages + 1 checkpoint query; one transaction (the tenant's position write, the
        // watermark): nothing per tenant.
        assert_eq!(s.ops["Query"], 9);
        assert_eq!(s.ops["TransactWriteItems"], 1);
        assert!(r.pulses.is_empty(), "{:?}", r.pulses);
    }

    #[test]
    fn a_week_pulses_every_tenant_daily_and_the_before_design_costs_more() {
        let r = model(&input(1000, 7)).unwrap();
        // Added at the start: one day pulse per local midnight after it (six or seven a tenant,
        // by zone), nothing for the days before.
        assert!((6_000..7_000).contains(&r.pulses["day"]), "{:?}", r.pulses);
        let s = r.job("pulse-sweep").unwrap();
        assert!(r.before.requests() > 50 * s.requests(), "before {} tickwork {}", r.before.requests(), s.requests());
    }
}
