//! Randomised fault schedules over all four jobs, with the real handlers, real concurrency and
//! the real local servers; after each schedule, every promise checked.
//!
//! One seed is a few simulated days of a small deployment (six zones, DST and a month and quarter
//! end in range): two sweep schedules phase-shifted, the fan-out, the archiver with a change-feed
//! writer that also rewrites entities, the queue worker. Every invocation is a fresh process whose
//! DynamoDB and S3 clients carry a [`Faults`] interceptor and whose clock is offset within the
//! skew bound. Per seed, drawn from it:
//! - crashes at a random call of any job, before the request is sent and after it was applied
//!   (answer lost); leases left to expire;
//! - throttling on ~20 % of calls, cancellation reasons inside transactions (conflicts,
//!   throttled items), unprocessed batch writes, S3 500/503/SlowDown, answers lost and retried;
//! - duplicate deliveries of one event to two invocations at once, late (hours old) and
//!   out-of-order events, a 30-hour outage;
//! - delivery on AWS's terms: a target that answers a round's calls with 429s (a Retry-After of a
//!   second), a drain event delivered twice (two drains at once) or aged out of Lambda's
//!   asynchronous queue (no drain that round);
//! - a leader stalled past its lease while another takes over, then resuming;
//! - tenants added, suspended, resumed and re-zoned while boundaries run;
//! - schedules put, changed, paused, resumed, removed and added as one-offs while the sweep fires
//!   (and their tenants suspended, resumed, moved); expired items deleted as DynamoDB's TTL would;
//! - budgets that stop invocations between pages.
//!
//! Then, faults off, the stack settles and [`checks`] holds it to: every owed `(tenant, grain,
//! period)` pulsed exactly once (owed periods computed by [`expect`], independently of the
//! calendar code), no watermark ahead of a tenant, every queue item finished once or
//! dead-lettered and every summary written once, every due change-row version archived in
//! exactly one object and deleted only if archived and never a newer one, every fan-out window
//! enqueued for every tenant, every schedule's fires against an oracle of its own ([`scheds`]:
//! each an occurrence of a live definition, none early, none queued twice, none lost), no unit
//! isolated by mistake, no unit dead-lettered by throttles, no panic.
//!
//! `make chaos` runs 200 seeds (`CHAOS_SEEDS`), `make chaos SEED=n` replays one; `make test` runs
//! a CI-sized subset. To diagnose a replay: `CHAOS_TRACE=1` prints each round and each invocation's
//! end, `CHAOS_DUMP=<text>` prints every control, queue and tenants item holding that text once the
//! seed has settled (how seed 47's zone missing from the registry was found).

mod checks;
pub(crate) mod expect;
mod sched_world;
mod scheds;
mod world;

use std::collections::BTreeMap;

pub use world::{Classes, Config, Plant};

/// What one seed did and found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Faults injected, by kind.
    pub injected: BTreeMap<String, u64>,
    /// Other things the schedule did, by kind (overlaps, late events, skews, stalls, churn...).
    pub events: BTreeMap<String, u64>,
    /// Checks made.
    pub checks: u64,
    /// What failed.
    pub violations: Vec<String>,
}

impl Report {
    fn add(&mut self, o: &Report) {
        for (k, v) in &o.injected {
            *self.injected.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &o.events {
            *self.events.entry(k.clone()).or_default() += v;
        }
        self.checks += o.checks;
        self.violations.extend(o.violations.iter().cloned());
    }
}

/// Runs `seeds` seeds with `classes` (and a planted bug, for the harness's own test); prints the
/// table; returns the sum.
pub async fn run_seeds(seeds: &[u64], classes: Classes, plant: Plant, days: u32) -> Report {
    use futures::stream::{self, StreamExt};
    let mut total = Report::default();
    let mut failed = Vec::new();
    // Two seeds per local server at once: a seed mostly waits on its server.
    let at_once = 2 * tickwork_tests::Local::servers();
    let results: Vec<(u64, Report)> = stream::iter(seeds.iter().copied())
        .map(|seed| async move { (seed, world::run(Config { seed, classes, plant, days }).await) })
        .buffered(at_once)
        .collect()
        .await;
    for (seed, r) in results {
        if !r.violations.is_empty() {
            failed.push(seed);
            for v in r.violations.iter().take(5) {
                println!("  seed {seed}: {v}");
            }
        }
        total.add(&r);
    }
    println!("{}", table(seeds.len(), &total, &failed));
    total
}

fn table(seeds: usize, r: &Report, failed: &[u64]) -> String {
    let mut s = format!("chaos: {seeds} seeds, {} checks, {} violations", r.checks, r.violations.len());
    if !failed.is_empty() {
        s += &format!(" (seeds {failed:?}; replay one with `make chaos SEED=n`)");
    }
    s += "\n  faults injected:\n";
    for (k, v) in &r.injected {
        s += &format!("    {k:<28} {v:>8}\n");
    }
    s += "  schedule:\n";
    for (k, v) in &r.events {
        s += &format!("    {k:<28} {v:>8}\n");
    }
    s
}

fn seeds_from_env(default: u64) -> Vec<u64> {
    if let Ok(one) = std::env::var("SEED") {
        return vec![one.trim().parse().expect("SEED is a number")];
    }
    let n: u64 = std::env::var("CHAOS_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    (1..=n).collect()
}

/// The CI-sized subset (`CHAOS_SEEDS` or `SEED` to change it); `make chaos` runs 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn randomised_fault_schedules_break_no_promise() {
    let seeds = seeds_from_env(8);
    let days = std::env::var("CHAOS_DAYS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let r = run_seeds(&seeds, Classes::all(), Plant::None, days).await;
    assert!(
        r.violations.is_empty(),
        "{} violations: {:#?}",
        r.violations.len(),
        &r.violations[..r.violations.len().min(20)]
    );
    assert!(r.checks > 1000 * seeds.len() as u64 / 10, "{} checks", r.checks);
    for kind in
        ["crash before send", "crash after apply", "throttle", "transaction conflict", "S3 error / server error"]
    {
        assert!(
            r.injected.get(kind).copied().unwrap_or(0) > 0 || seeds.len() < 5,
            "no `{kind}` injected: {:?}",
            r.injected
        );
    }
}

/// The harness tested: a bug planted at the SDK boundary (the archiver's deletes stripped of
/// their version condition, i.e. deleting by key alone) gets through when the archiver is never
/// made to crash after an object's put — nothing rewrites a row between a read and its delete
/// within one sweep — and is caught when it is, because the next sweep's recovery then deletes
/// rows the writer rewrote in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_planted_bug_gets_through_without_the_fault_that_exposes_it_and_is_caught_with_it() {
    let seeds: Vec<u64> = (101..=104).collect();
    let without = Classes { crash_before: false, crash_after: false, crash_after_put: false, ..Classes::quiet() };
    let r = run_seeds(&seeds, without, Plant::UnconditionalArchiveDeletes, 2).await;
    assert!(r.violations.is_empty(), "without crashes the planted bug stays hidden: {:?}", r.violations);
    let with = Classes { crash_after_put: true, ..Classes::quiet() };
    let r = run_seeds(&seeds, with, Plant::UnconditionalArchiveDeletes, 2).await;
    assert!(
        r.violations.iter().any(|v| v.contains("newer row deleted") || v.contains("not archived")),
        "with crashes the planted bug is caught: {:?}",
        r.violations
    );
}

/// `make chaos`: 200 seeds (or `CHAOS_SEEDS`, or one `SEED`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "slow: `make chaos` runs it"]
async fn chaos_full() {
    let seeds = seeds_from_env(200);
    let r = run_seeds(&seeds, Classes::all(), Plant::None, 3).await;
    assert!(r.violations.is_empty(), "{} violations", r.violations.len());
}
