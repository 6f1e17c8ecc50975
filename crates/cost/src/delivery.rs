//! Boundary-to-done: from a zone group's local midnight until the last of its units has been
//! handled, which is what a user waits for. The sweep's part is [`crate::boundary`]; this is the
//! rest, the queue's drains, computed from counts by a small event simulation (pure), so a
//! boundary of millions is answered at once and the benchmark's runs are predicted by the same
//! code.
//!
//! ## What is modelled (`queue_worker`'s drain and fleet, in order)
//! - The boundary's items land evenly while the sweep writes them (`arrive_ms`, from the boundary
//!   model); the first starts a drain `signal_ms` later (the stream's batching window and Lambda's
//!   start).
//! - A drain polls (one request), sees a backlog and starts the fleet: one slot lease (one request)
//!   and one asynchronous Invoke (one request, then `invoke_ms` until it runs) per drain, one after
//!   another, up to `drains` at once.
//! - A drain claims an item (one request) when its handler slots free, and runs its units
//!   `concurrency` at a time, `handler_ms` each; a poll every `poll_keys` items. Claims overlap the
//!   units still running, so a busy drain handles `concurrency / handler_ms` units a millisecond.
//! - It starts units for `window_ms` (the function's timeout less the handler timeout and the
//!   margin), then finishes the units it started, gives back the rest of its item (a settle: the
//!   item's claim and settle were billed for units that did not run; the **refund**), and hands
//!   on: a release, an acquire and an Invoke, and the successor polls and claims again.
//! - Nothing races: candidates are spread over drains (each begins at its own place in a page),
//!   so a lost claim is rare and not counted (the benchmark reports the races it saw).
//!
//! - Two ceilings bound the handlers' rate: the target's concurrency (in-flight calls across every
//!   drain: a function's reserved concurrency; a drain halves its calls at a throttle and grows
//!   them back, so the fleet runs at about that many), and the handlers' table (each unit one
//!   write: a new on-demand table sustains 4,000 writes a second until its traffic has peaked
//!   higher, then twice its previous peak; "Initial throughput and scaling properties", DynamoDB
//!   Developer Guide, on-demand capacity mode).
//!
//! Assumptions, named and overridable from `tickctl cost`: the latencies, the handler's time per
//! unit, the two ceilings, and no retries.

use serde::Serialize;

/// What one zone group's delivery is asked to do.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryInput {
    /// Units of the boundary (a tenant's pulses).
    pub units: u64,
    /// Units in one queue item (the batch limit: 2,000).
    pub units_per_item: u64,
    /// The items land evenly over this, ms from the boundary (the sweep's run); 0: at once.
    pub arrive_ms: f64,
    /// From the first item to the first drain running, ms (an assumption: `--signal-latency`).
    pub signal_ms: f64,
    /// A handler call's time, ms (an assumption: `--handler`; for a target, the request's round
    /// trip and, for a function, its handling of the units it carries).
    pub handler_ms: f64,
    /// Units one handler call carries: 1 for a handler in the worker; a target's batch
    /// ([`crate::targets::TargetKind::units_per_call`]).
    pub units_per_call: u64,
    /// One DynamoDB request's latency, ms.
    pub request_ms: f64,
    /// One asynchronous Invoke until its drain runs, ms.
    pub invoke_ms: f64,
    /// Handler calls at once in a drain (`TICKWORK_WORKER_CONCURRENCY`).
    pub concurrency: u32,
    /// Drains at once at most (`TICKWORK_WORKER_DRAINS`, the reserved concurrency).
    pub drains: u32,
    /// How long a drain starts units, ms: the function's timeout less the handler timeout and
    /// the margin.
    pub window_ms: f64,
    /// Keys a poll reads (`TICKWORK_WORKER_BATCH`).
    pub poll_keys: u32,
    /// Handler calls in flight the target allows across every drain (`--target-concurrency`: a
    /// function's reserved concurrency, a new account's 10); `None`: unbounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_concurrency: Option<u32>,
    /// Writes a second the handlers' table takes, a unit one write (`--handler-table-wcu`);
    /// `None`: no table of the handlers' bounds it (a queue or a bus takes the units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_wcu: Option<f64>,
}

/// A new on-demand table's sustained writes a second until its traffic has peaked higher (then it
/// serves twice its previous peak): "New on-demand tables will be able to sustain up to 4,000
/// writes per second" (DynamoDB Developer Guide, on-demand capacity mode, "Initial throughput and
/// scaling properties"; read 2026-12-06).
pub const NEW_ON_DEMAND_WCU_PER_SEC: f64 = 4_000.0;

/// A new on-demand table's sustained reads a second, as [`NEW_ON_DEMAND_WCU_PER_SEC`]: "up to
/// 12,000 reads per second" (the same page; a strongly consistent read of up to 4 KB is one).
pub const NEW_ON_DEMAND_RCU_PER_SEC: f64 = 12_000.0;

/// How the delivery goes.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeliveryTime {
    /// From the boundary until the last unit is handled, ms.
    pub done_ms: f64,
    /// Drain invocations, hand-ons included.
    pub invocations: u64,
    /// Items claimed (each billed at its size, as is its settle).
    pub claims: u64,
    /// Claims whose item was given back at a deadline with units unrun.
    pub refunds: u64,
    /// Polls of the ready index.
    pub polls: u64,
    /// Slot lease writes (acquire and release).
    pub slot_writes: u64,
    /// Drain time in all, ms (the Lambda duration billed).
    pub drain_ms: f64,
    /// Units handled a second while every drain is busy.
    pub peak_units_per_sec: f64,
    /// What bounds that rate.
    pub bound: Bound,
}

/// What bounds the handlers' rate.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Bound {
    /// The drains' own calls (more drains, or more calls a drain, go faster).
    #[default]
    Drains,
    /// The target's concurrency.
    Target,
    /// The handlers' table: the drains ask more writes a second than it takes, and it throttles
    /// them (each throttle a back-off that spends no attempt).
    Table,
}

#[derive(Debug, Clone)]
struct Drain {
    /// When it can take its next item.
    free: f64,
    /// When its invocation stops starting units.
    window_end: f64,
    /// When this invocation began.
    began: f64,
    /// Items claimed since its last poll.
    since_poll: u32,
    /// Items claimed in this invocation.
    claimed: u64,
}

/// The delivery's time and counts. Pure.
pub fn predict(d: &DeliveryInput) -> DeliveryTime {
    let r = d.request_ms;
    let per_item = d.units_per_item.max(1);
    let items = d.units.div_ceil(per_item);
    if items == 0 {
        return DeliveryTime::default();
    }
    // The drains that share the ceilings: no more than there are items.
    let busy = f64::from(d.drains.max(1)).min(items as f64);
    let c = calls_at_once(d, busy);
    // Units a ms one drain's share of the handlers' table takes.
    let table_share = d.handler_wcu.map(|w| w / 1000.0 / busy);
    // Ready items: (ready at, units), in order; a refund puts its rest at the front.
    let mut ready: std::collections::VecDeque<(f64, u64)> = (0..items)
        .map(|i| {
            let at = if items > 1 { d.arrive_ms * i as f64 / (items - 1) as f64 } else { 0.0 };
            let n = if i + 1 == items { d.units - per_item * (items - 1) } else { per_item };
            (at, n)
        })
        .collect();
    let mut t = DeliveryTime::default();
    let first = ready[0].0 + d.signal_ms;
    // The first drain polls, sees the backlog, and starts the rest one after another.
    let mut drains: Vec<Drain> = (0..d.drains.max(1))
        .map(|k| {
            let start = if k == 0 { first } else { first + r + f64::from(k) * 2.0 * r + d.invoke_ms };
            Drain { free: start + r, window_end: start + d.window_ms, began: start, since_poll: 0, claimed: 0 }
        })
        .collect();
    t.invocations = drains.len() as u64;
    t.polls = drains.len() as u64;
    t.slot_writes = drains.len() as u64 - 1;
    let mut done = 0.0f64;
    while let Some((at, units)) = ready.pop_front() {
        // The drain free first takes it (or the one whose successor will be).
        let k = (0..drains.len()).min_by(|a, b| drains[*a].free.total_cmp(&drains[*b].free)).expect("a drain");
        let dr = &mut drains[k];
        let mut start = dr.free.max(at);
        if start >= dr.window_end {
            // Its invocation is over: it hands on (release, acquire, Invoke), the successor polls.
            let next = dr.window_end + d.handler_ms + 3.0 * r + d.invoke_ms;
            t.drain_ms += dr.window_end + d.handler_ms + 2.0 * r - dr.began;
            *dr = Drain { free: next + r, window_end: next + d.window_ms, began: next, since_poll: 0, claimed: 0 };
            t.invocations += 1;
            t.polls += 1;
            t.slot_writes += 2;
            start = dr.free.max(at);
        }
        // The first claim of an invocation waits for its answer with every slot free; a later one
        // (and a poll when the keys in hand are used up) is made while the last item's units
        // still run, and idles the slots only for what outlasts a unit.
        let mut asks = 1.0;
        if dr.since_poll >= d.poll_keys.max(1) {
            asks += 1.0;
            t.polls += 1;
            dr.since_poll = 0;
        }
        start += if dr.claimed == 0 { asks * r } else { (asks * r - d.handler_ms).max(0.0) };
        t.claims += 1;
        dr.since_poll += 1;
        dr.claimed += 1;
        let per_call = d.units_per_call.max(1);
        let calls_time = units.div_ceil(per_call) as f64 * d.handler_ms / c;
        let time = table_share.map_or(calls_time, |w| calls_time.max(units as f64 / w));
        if start + time <= dr.window_end + d.handler_ms {
            dr.free = start + time;
            done = done.max(dr.free);
        } else {
            // The deadline stops it part way: the units it could start run, the rest go back.
            let left_ms = (dr.window_end - start).max(0.0);
            let by_calls = ((left_ms * c / d.handler_ms).floor() as u64) * per_call;
            let by_table = table_share.map_or(u64::MAX, |w| (left_ms * w).floor() as u64);
            let ran = by_calls.min(by_table).min(units);
            t.refunds += 1;
            dr.free = dr.window_end;
            done = done.max(dr.window_end + d.handler_ms);
            ready.push_front((dr.window_end + d.handler_ms + r, units - ran));
        }
    }
    for dr in &drains {
        t.drain_ms += (dr.free + r - dr.began).max(0.0);
    }
    t.slot_writes += drains.len() as u64 - 1;
    t.done_ms = done;
    // Units a second: what the drains ask, what the target allows, what the table takes.
    let per_call_s = d.units_per_call.max(1) as f64 * 1000.0 / d.handler_ms.max(1e-9);
    let drains = busy * f64::from(d.concurrency.max(1)) * per_call_s;
    let target = d.target_concurrency.map(|tc| f64::from(tc.max(1)) * per_call_s);
    let (mut peak, mut bound) = (drains, Bound::Drains);
    for (rate, b) in [(target, Bound::Target), (d.handler_wcu, Bound::Table)] {
        if let Some(rate) = rate.filter(|r| *r < peak) {
            (peak, bound) = (rate, b);
        }
    }
    t.peak_units_per_sec = peak;
    t.bound = bound;
    t
}

/// Handler calls at once in one of `busy` drains: its concurrency, or its share of the
/// target's. Pure.
fn calls_at_once(d: &DeliveryInput, busy: f64) -> f64 {
    let own = f64::from(d.concurrency.max(1));
    d.target_concurrency.map_or(own, |tc| own.min(f64::from(tc.max(1)) / busy))
}

/// The worker as deployed: `template.yaml`'s settings (a test holds these to the template), unless
/// the environment says otherwise, read by the worker's own readers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Deployed {
    /// Handler calls at once in a drain.
    pub concurrency: usize,
    /// Drains at once.
    pub drains: u32,
    /// How long a drain starts units, ms.
    pub window_ms: f64,
    /// Keys a poll reads.
    pub poll_keys: u32,
}

/// The template's worker: `Timeout`, `TICKWORK_WORKER_CONCURRENCY`, and `WorkerConcurrency`'s
/// default (`TICKWORK_WORKER_DRAINS`).
pub const TEMPLATE_WORKER: (u64, &str, &str) = (300, "16", "4");

/// [`Deployed`] from `env`, the template's values where it sets none.
pub fn deployed_worker(env: &tickwork::config::Env) -> anyhow::Result<Deployed> {
    use tickwork::env as vars;
    let (timeout, concurrency, drains) = TEMPLATE_WORKER;
    let timeout_s = timeout.to_string();
    let mut pairs: Vec<(String, String)> = vec![
        (vars::FUNCTION_TIMEOUT_SECS.into(), timeout_s),
        (vars::WORKER_CONCURRENCY.into(), concurrency.into()),
        (vars::WORKER_DRAINS.into(), drains.into()),
        (vars::QUEUE_VISIBILITY_SECS.into(), (timeout + 30).to_string()),
    ];
    for v in tickwork::env::VARS {
        if let Some(x) = env.get(v.name) {
            pairs.retain(|(k, _)| k != v.name);
            pairs.push((v.name.to_string(), x));
        }
    }
    let e = tickwork::config::Env::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let cfg = queue_worker::WorkerConfig::from_env(&e)?;
    let core = tickwork::config::CoreConfig::from_env(&e)?;
    let t = core.function_timeout.unwrap_or(std::time::Duration::from_secs(timeout));
    Ok(Deployed {
        concurrency: cfg.concurrency,
        drains: cfg.drains,
        window_ms: t.saturating_sub(cfg.stop_before()).as_millis() as f64,
        poll_keys: cfg.poll_keys() as u32,
    })
}

/// The delivery's own bill beyond its items' first claim and settle (which the month's model
/// counts): the drains' duration at `memory_mb` and their invocations, the claims and settles of
/// the items given back at a deadline (each at the item's size, estimated at 16 bytes a unit), the
/// slot writes and the polls. Pure.
pub fn burst_usd(d: &DeliveryInput, t: &DeliveryTime, memory_mb: u32, p: &crate::prices::Prices) -> f64 {
    let item_kb = ((d.units_per_item * 16 + 200) as f64 / 1024.0).ceil();
    let write_units = t.refunds as f64 * 2.0 * item_kb + t.slot_writes as f64;
    let read_units = t.polls as f64 * 0.5;
    let gb_s = t.drain_ms / 1000.0 * f64::from(memory_mb) / 1024.0;
    p.units_usd(read_units, write_units)
        + gb_s * p.lambda_arm_gb_second
        + t.invocations as f64 * p.lambda_requests_million / 1e6
}

/// The fewest drains (up to `max`) that deliver within `target_ms`, when any does.
pub fn drains_needed(d: &DeliveryInput, target_ms: f64, max: u32) -> Option<u32> {
    (1..=max.max(1)).find(|n| predict(&DeliveryInput { drains: *n, ..d.clone() }).done_ms <= target_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(drains: u32) -> DeliveryInput {
        DeliveryInput {
            units: 64_000,
            units_per_item: 1_000,
            arrive_ms: 0.0,
            signal_ms: 0.0,
            handler_ms: 10.0,
            units_per_call: 1,
            request_ms: 0.0,
            invoke_ms: 0.0,
            concurrency: 16,
            drains,
            window_ms: 1e9,
            poll_keys: 10,
            target_concurrency: None,
            handler_wcu: None,
        }
    }

    #[test]
    fn a_targets_concurrency_and_the_handlers_table_bound_the_rate() {
        // 64,000 units, 4 drains of 16 calls of 10 ms: 6,400 units a second, 10 s.
        let free = predict(&input(4));
        assert!((free.done_ms - 10_000.0).abs() < 100.0, "{free:?}");
        // A function with a reserved concurrency of 8: 2 calls a drain, 800 a second, 80 s.
        let reserved = predict(&DeliveryInput { target_concurrency: Some(8), ..input(4) });
        assert!((reserved.done_ms - 80_000.0).abs() < 500.0, "{reserved:?}");
        assert!((reserved.peak_units_per_sec - 800.0).abs() < 1e-6);
        assert_eq!((free.bound, reserved.bound), (Bound::Drains, Bound::Target));
        // A new on-demand table's 4,000 writes a second: 16 s, whatever the drains.
        let table = predict(&DeliveryInput { handler_wcu: Some(NEW_ON_DEMAND_WCU_PER_SEC), ..input(4) });
        assert!((table.done_ms - 16_000.0).abs() < 200.0, "{table:?}");
        assert_eq!((table.peak_units_per_sec, table.bound), (4_000.0, Bound::Table));
        // One item keeps one drain busy: it has the whole table, up to its own 1,600 a second.
        let one = predict(&DeliveryInput { units: 1_000, handler_wcu: Some(4_000.0), ..input(4) });
        assert!((one.done_ms - 625.0).abs() < 1.0, "{one:?}");
        let more = predict(&DeliveryInput { handler_wcu: Some(NEW_ON_DEMAND_WCU_PER_SEC), ..input(8) });
        assert!((more.done_ms - table.done_ms).abs() < 200.0, "more drains do not pass the table: {more:?}");
        // The deadline stops a drain part way at the table's rate too: no unit lost.
        let short = predict(&DeliveryInput { window_ms: 2_500.0, handler_wcu: Some(4_000.0), ..input(4) });
        assert!(short.refunds > 0 && short.done_ms >= table.done_ms, "{short:?}");
    }

    #[test]
    fn a_drain_handles_concurrency_units_per_handler_time() {
        // 64,000 units at 16 per 10 ms: 40 s for one drain, a fourth for four.
        let one = predict(&input(1));
        assert_eq!((one.done_ms, one.claims, one.invocations, one.refunds), (40_000.0, 64, 1, 0));
        let four = predict(&input(4));
        assert_eq!(four.done_ms, 10_000.0);
        assert_eq!(four.peak_units_per_sec, 6_400.0);
    }

    #[test]
    fn requests_and_invokes_add_their_latency() {
        let mut d = input(1);
        d.request_ms = 20.0;
        // A poll and a claim before the first unit; each later claim overlaps the running units
        // but for the 10 ms it outlasts a unit (30 ms with a poll, every 10 items).
        let t = predict(&d);
        assert_eq!(t.done_ms, 40_000.0 + 40.0 + 57.0 * 10.0 + 6.0 * 30.0, "{t:?}");
        assert_eq!(t.polls, 7);
        d.drains = 2;
        d.invoke_ms = 100.0;
        // The second drain begins after the first's poll, a lease, an invoke call and the invoke.
        let t = predict(&d);
        assert!(t.done_ms > 20_400.0 && t.done_ms < 20_700.0, "{}", t.done_ms);
        assert_eq!(t.slot_writes, 2, "the second drain's lease, taken and given back");
    }

    #[test]
    fn a_drain_stopped_by_its_deadline_hands_on_and_gives_back_its_item() {
        let mut d = input(1);
        d.window_ms = 10_300.0;
        let t = predict(&d);
        // Windows of 10.3 s: each ends part way through an item, which is given back, and the
        // successor starts after the handler's tail.
        assert_eq!(t.invocations, 4, "{t:?}");
        assert_eq!(t.refunds, 3, "{t:?}");
        assert_eq!(t.claims, 67, "64 items and the 3 given back");
        assert!(t.done_ms > 40_000.0 && t.done_ms < 40_100.0, "{}", t.done_ms);
    }

    #[test]
    fn items_arriving_over_the_sweep_bound_the_time_from_below() {
        let mut d = input(16);
        d.arrive_ms = 30_000.0;
        let t = predict(&d);
        // 16 drains could do it in 2.5 s; the last item lands at 30 s and takes 625 ms.
        assert!(t.done_ms >= 30_000.0 && t.done_ms <= 30_700.0, "{}", t.done_ms);
    }

    #[test]
    fn the_template_worker_starts_units_for_265_seconds_of_its_300() {
        let d = deployed_worker(&tickwork::config::Env::from_pairs([])).unwrap();
        assert_eq!((d.concurrency, d.drains, d.window_ms, d.poll_keys), (16, 4, 265_000.0, 16));
        let e = tickwork::config::Env::from_pairs([("TICKWORK_WORKER_DRAINS", "8")]);
        assert_eq!(deployed_worker(&e).unwrap().drains, 8, "the environment says otherwise");
    }

    #[test]
    fn a_target_that_takes_ten_units_a_call_runs_ten_times_fewer_calls() {
        // 64,000 units, 10 a call of 30 ms: 6,400 calls at 16 at once, 12 s for one drain.
        let d = DeliveryInput { units_per_call: 10, handler_ms: 30.0, ..input(1) };
        let t = predict(&d);
        assert_eq!(t.done_ms, 12_000.0);
        assert_eq!(t.peak_units_per_sec, 16.0 * 10.0 * 1000.0 / 30.0);
        // A deadline part way through an item gives back only the units of the calls not made.
        let t = predict(&DeliveryInput { window_ms: 5_000.0, ..d });
        assert!(t.refunds >= 1 && t.done_ms > 12_000.0, "{t:?}");
    }

    #[test]
    fn the_drains_needed_for_a_target_are_found() {
        let d = input(1);
        assert_eq!(drains_needed(&d, 10_000.0, 16), Some(4));
        assert_eq!(drains_needed(&d, 1_000.0, 16), None);
    }
}
