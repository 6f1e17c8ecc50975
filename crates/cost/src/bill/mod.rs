//! The monthly bill in US dollars: the request model of [`crate::cost`] priced, with every other
//! service the stack runs on (Lambda, CloudWatch metrics, alarms and logs, S3, EventBridge).
//!
//! Why a bill and not request counts: a design that saves DynamoDB requests can still cost more
//! than it saves in metrics and logs (each distinct custom metric is billed every month, whether
//! or not it moves). Pricing the whole stack is how that shows.
//!
//! Prices are [`Prices`] ([`prices`]); the stack priced is [`Stack`] ([`stack`]).

/// The prices, a module of the crate's own (what the delivery and boundary models price with too,
/// so they need not import the bill that imports them); here under their old path.
pub use crate::prices;
pub mod stack;

use anyhow::Result;
use serde::Serialize;

use crate::cost::{CostInput, CostReport, JobCost};

pub use prices::Prices;
pub use stack::{custom_metrics, log_bytes_per_invocation, Stack, BASE_MS, PER_REQUEST_MS};

/// The "service" of the handlers' own writes (the summary rows a pulse or a fan-out unit makes):
/// the user's work, the same in every design, shown and left out of the totals compared.
pub const EFFECT: &str = "DynamoDB (your handlers' writes)";

/// One line of the bill.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line {
    /// AWS service.
    pub service: &'static str,
    /// What is billed.
    pub item: String,
    /// How much of it a month.
    pub quantity: f64,
    /// Its unit.
    pub unit: &'static str,
    /// US dollars a month.
    pub usd: f64,
}

/// A month's bill.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Bill {
    /// Every line.
    pub lines: Vec<Line>,
}

impl Bill {
    fn add(&mut self, service: &'static str, item: impl Into<String>, quantity: f64, unit: &'static str, usd: f64) {
        self.lines.push(Line { service, item: item.into(), quantity, unit, usd });
    }

    /// Dollars a month, the handlers' effect ([`EFFECT`]) left out.
    pub fn total(&self) -> f64 {
        // `+ 0.0`: an empty f64 sum is -0.0, printed "-0.00".
        self.lines.iter().filter(|l| l.service != EFFECT).map(|l| l.usd).sum::<f64>() + 0.0
    }

    /// Dollars a month for one service.
    pub fn service(&self, service: &str) -> f64 {
        self.lines.iter().filter(|l| l.service == service).map(|l| l.usd).sum::<f64>() + 0.0
    }

    /// The monitoring part (custom metrics, alarms, the dashboard), logs excluded.
    pub fn monitoring(&self) -> f64 {
        self.lines.iter().filter(|l| l.service == "CloudWatch" && !l.item.starts_with("logs")).map(|l| l.usd).sum()
    }
}

/// An idle archiver's day (hourly ticks, each one read of its state item; once a day it probes
/// every change shard, one Query each, and records what it saw): the requests, read units and
/// write units, as `tests/it/idle_day.rs` measures them.
pub const ARCHIVER_IDLE_DAY: (u64, f64, f64) = (33, 16.0, 1.0);

/// The requests each function makes on an idle day (no tenant, nothing queued): what
/// `tests/it/idle_day.rs` measures, function by function.
pub const IDLE_DAY_REQUESTS: [(&str, u64); 4] =
    [("pulse-sweep", 96), ("tenant-fanout", 44), ("archiver", ARCHIVER_IDLE_DAY.0), ("queue-worker", 24)];

/// Request units of every modelled job over a month, the archiver's idle days, storage.
fn dynamodb(bill: &mut Bill, r: &CostReport, tenants: usize, p: &Prices) {
    let month = 30.0 / r.days.max(1e-9);
    let mut effect = (0.0, 0.0);
    for j in &r.jobs {
        // The handlers' effect writes (the summary rows) are the user's work in every design: a
        // line of their own, out of the totals compared.
        let e = j.tables.get(crate::cost::table::SUMMARIES).map_or(0.0, |t| t.1) * month;
        let e_req = j.ops.get("PutItem").copied().unwrap_or(0) as f64 * month * f64::from(e > 0.0);
        effect = (effect.0 + e_req, effect.1 + e);
        let wcu = j.wcu * month - e;
        bill.add(
            "DynamoDB",
            format!("{}: {:.0} RRU, {:.0} WRU", j.job, j.rcu * month, wcu),
            j.requests() as f64 * month - e_req,
            "requests",
            p.units_usd(j.rcu * month, wcu),
        );
    }
    bill.add(
        EFFECT,
        format!("the handlers' own writes (summary rows): {:.0} WRU", effect.1),
        effect.0,
        "requests",
        p.units_usd(0.0, effect.1),
    );
    let (req, rru, wru) = ARCHIVER_IDLE_DAY;
    bill.add(
        "DynamoDB",
        "archiver: idle (no change feed in this model)",
        req as f64 * 30.0,
        "requests",
        30.0 * p.units_usd(rru, wru),
    );
    // Tenants (about 150 B each with both index entries) and the control items; queue items expire.
    let gb = tenants as f64 * 150.0 * 3.0 / 1e9;
    bill.add("DynamoDB", "storage: tenants and their index entries", gb, "GB-month", gb * p.ddb_storage_gb_month);
}

/// Invocations a month per function, and the requests each makes on average: the sweep's and the
/// fan-out's from the model (their schedules); the archiver's idle day; the worker's safety polls
/// (hourly) and, at most, one stream-started drain per queue item enqueued (a flush's items
/// arrive together and one batching window gathers them, so fewer in practice).
fn invocations(r: &CostReport) -> Vec<(&'static str, f64, f64)> {
    let month = 30.0 / r.days.max(1e-9);
    let job = |n: &str| r.jobs.iter().find(|j| j.job == n).cloned().unwrap_or_default();
    let (sweep, worker, fanout) = (job("pulse-sweep"), job("queue-worker"), job("tenant-fanout"));
    let per = |j: &JobCost, n: f64, extra: f64| if n > 0.0 { (j.requests() as f64 * month + extra) / n } else { 0.0 };
    let sweep_n = sweep.invocations as f64 * month;
    let fanout_n = fanout.invocations as f64 * month;
    // Items enqueued: each is claimed once (an UpdateItem of two per item, claim and finish).
    let items = (worker.ops.get("UpdateItem").copied().unwrap_or(0)
        + fanout.ops.get("UpdateItem").copied().unwrap_or(0)) as f64
        / 2.0
        * month;
    let worker_n = 24.0 * 30.0 + items;
    // A drain's handler calls run the deployed concurrency at once: its duration counts the queue's
    // requests one after another and the handlers' own (the summary rows) that many to a time.
    let concurrency = crate::delivery::deployed_worker(&tickwork::config::Env::from_pairs([]))
        .map(|d| d.concurrency as f64)
        .unwrap_or(1.0);
    // The model books the fan-out's units' summary rows with the fan-out; the worker writes them.
    let puts = |j: &JobCost| j.ops.get("PutItem").copied().unwrap_or(0) as f64 * month;
    let fanout_handlers = puts(&fanout);
    let handlers = puts(&worker) + fanout_handlers;
    let serial = -puts(&worker) + handlers / concurrency;
    vec![
        ("pulse-sweep", sweep_n, per(&sweep, sweep_n, 0.0)),
        ("tenant-fanout", fanout_n, per(&fanout, fanout_n, -fanout_handlers)),
        ("archiver", 24.0 * 30.0, ARCHIVER_IDLE_DAY.0 as f64 / 24.0),
        ("queue-worker", worker_n, per(&worker, worker_n, serial)),
    ]
}

/// What delivery adds a day at a boundary's deadlines, beyond each item's one claim and settle
/// (which the model counts): every zone group's day pulses carried by the deployed worker
/// ([`crate::delivery`], its assumptions: 10 ms a handler call, 50 ms a request, 100 ms an Invoke,
/// the items written at once): the hand-on invocations, the items given back and claimed again,
/// the slot writes. Its dollars a day.
pub fn delivery_day_usd(tenants: usize, zones: usize, stack: &Stack, p: &Prices) -> f64 {
    let Ok(w) = crate::delivery::deployed_worker(&tickwork::config::Env::from_pairs([])) else { return 0.0 };
    let group = (tenants as u64).div_ceil(zones.max(1) as u64);
    let d = crate::delivery::DeliveryInput {
        units: group,
        units_per_item: tickwork::batch::MAX_BATCH_UNITS as u64,
        arrive_ms: 0.0,
        signal_ms: 0.0,
        handler_ms: 10.0,
        units_per_call: 1,
        request_ms: 50.0,
        invoke_ms: 100.0,
        concurrency: w.concurrency as u32,
        drains: w.drains,
        window_ms: w.window_ms,
        poll_keys: w.poll_keys,
        // A month of boundaries: the handlers' table has peaked before and serves twice that.
        target_concurrency: None,
        handler_wcu: None,
    };
    let t = crate::delivery::predict(&d);
    // Only what the month's model does not count already: the drain duration is priced with the
    // worker's invocations, the first claim and settle of every item with its requests.
    let extra = crate::delivery::DeliveryTime {
        drain_ms: 0.0,
        invocations: t.invocations.saturating_sub(1),
        claims: t.refunds,
        polls: 0,
        ..t
    };
    zones as f64 * crate::delivery::burst_usd(&d, &extra, stack.memory_mb, p)
}

/// The month's bill of the whole stack for the model's answer `r` at `tenants` tenants in
/// `zones` zones.
pub fn bill(r: &CostReport, tenants: usize, zones: usize, stack: &Stack, p: &Prices) -> Bill {
    let mut b = Bill::default();
    dynamodb(&mut b, r, tenants, p);
    let delivery = 30.0 * delivery_day_usd(tenants, zones, stack, p);
    b.add(
        "DynamoDB",
        "queue-worker at boundaries: items given back at drain deadlines and claimed again, drain slots, hand-on invocations",
        30.0,
        "days",
        delivery,
    );
    let gb = f64::from(stack.memory_mb) / 1024.0;
    let mut log_gb = 0.0;
    for (f, n, req) in invocations(r) {
        let secs = (BASE_MS + PER_REQUEST_MS * req) / 1000.0;
        b.add(
            "Lambda",
            format!("{f}: {n:.0} invocations, ~{:.0} ms at {} MB arm64", secs * 1000.0, stack.memory_mb),
            n,
            "invocations",
            n * p.lambda_requests_million / 1e6 + n * secs * gb * p.lambda_arm_gb_second,
        );
        log_gb += n * log_bytes_per_invocation(f) as f64 / 1e9;
    }
    let metrics = custom_metrics() as f64;
    b.add("CloudWatch", "custom metrics (no dimensions)", metrics, "metrics", metrics * p.cw_metric_month);
    let alarm_metrics = f64::from(stack.single_metric_alarms + stack.math_alarms.0 * stack.math_alarms.1);
    b.add(
        "CloudWatch",
        format!(
            "alarms: {} on one metric, {} metric-math reading {} each",
            stack.single_metric_alarms, stack.math_alarms.0, stack.math_alarms.1
        ),
        alarm_metrics,
        "alarm metrics",
        alarm_metrics * p.cw_alarm_metric_month,
    );
    if stack.dashboard {
        b.add("CloudWatch", "dashboard", 1.0, "dashboards", p.cw_dashboard_month);
    }
    b.add("CloudWatch", "logs ingested", log_gb, "GB", log_gb * p.cw_logs_ingest_gb);
    let stored = log_gb * f64::from(stack.log_retention_days) / 30.0;
    b.add("CloudWatch", "logs stored", stored, "GB-month", stored * p.cw_logs_storage_gb_month);
    // The archive: nothing to move in this model (no change feed); the bucket's own requests.
    b.add("S3", "archive objects (no change feed in this model)", 0.0, "PUT", 0.0);
    let events: f64 =
        invocations(r).iter().filter(|(f, _, _)| *f != "queue-worker").map(|(_, n, _)| n).sum::<f64>() + 24.0 * 30.0;
    b.add("EventBridge", "scheduled rule events", events, "events", events * p.rule_event_million / 1e6);
    b
}

/// The `000_*` before design's DynamoDB bill: its sweep's request units (as [`crate::cost`]
/// models it, every minute), priced.
pub fn before_dynamodb(r: &CostReport, p: &Prices) -> f64 {
    let month = 30.0 / r.days.max(1e-9);
    p.units_usd(r.before.rcu * month, r.before.wcu * month)
}

/// One EventBridge Scheduler schedule per tenant (time zones built in), each firing a Lambda
/// invocation once a local day: what a team would build instead. Scheduler invocations beyond
/// the free ones, plus the Lambda requests and a minimal run (the effect's own write is the
/// user's, in both designs).
pub fn scheduler_per_tenant(tenants: usize, stack: &Stack, p: &Prices) -> Bill {
    let mut b = Bill::default();
    let n = tenants as f64 * 30.0;
    let paid = (n / 1e6 - p.scheduler_free_millions).max(0.0);
    b.add("EventBridge", "Scheduler invocations (one schedule a tenant)", n, "invocations", paid * p.scheduler_million);
    let secs = (BASE_MS + PER_REQUEST_MS) / 1000.0;
    let gb = f64::from(stack.memory_mb) / 1024.0;
    b.add(
        "Lambda",
        "one invocation a tenant-day",
        n,
        "invocations",
        n * p.lambda_requests_million / 1e6 + n * secs * gb * p.lambda_arm_gb_second,
    );
    b
}

/// The model's answer in dollars a month: the bill, the before design's DynamoDB at its own
/// one-minute schedule, one Scheduler schedule per tenant, and the prices used.
#[derive(Debug, Clone, Serialize)]
pub struct Priced {
    /// The whole stack.
    pub bill: Bill,
    /// The `000_*` design's DynamoDB alone.
    pub before_dynamodb_usd: f64,
    /// One EventBridge Scheduler schedule per tenant.
    pub scheduler_per_tenant: Bill,
    /// The prices used.
    pub prices: Prices,
}

/// Models `input` and prices it. The before design ran every minute whatever tickwork's tick:
/// its part of the report is modelled at that schedule, so the table, the ratio and the dollars
/// all speak of the same thing.
pub fn price(input: &CostInput, stack: &Stack, prices: &Prices) -> Result<(CostReport, Priced)> {
    price_with(input, stack, prices, true)
}

/// [`price`], the `000_*` design at its own one-minute schedule only when `before` (the slow
/// part of the model at any size, and the same at every size: it visits 100 tenants a tick).
fn price_with(input: &CostInput, stack: &Stack, prices: &Prices, before: bool) -> Result<(CostReport, Priced)> {
    let mut r = crate::cost::model(input)?;
    if before && input.tick_ms != 60_000 {
        let every_minute = CostInput {
            tick_ms: 60_000,
            ticks: input.ticks * input.tick_ms as u64 / 60_000,
            policy: tickwork::calendar::Policy { interval_ms: 60_000, ..input.policy },
            ..input.clone()
        };
        r.before = crate::cost::model_before_only(&every_minute)?;
    }
    let priced = Priced {
        bill: bill(&r, input.tenants, input.zones.len(), stack, prices),
        before_dynamodb_usd: before_dynamodb(&r, prices),
        scheduler_per_tenant: scheduler_per_tenant(input.tenants, stack, prices),
        prices: prices.clone(),
    };
    Ok((r, priced))
}

/// The services a bill is shown by, in order.
pub const SERVICES: [&str; 5] = ["DynamoDB", "Lambda", "CloudWatch", "S3", "EventBridge"];

/// The month's bill by service at one number of tenants, for the three designs side by side.
#[derive(Debug, Clone, Serialize)]
pub struct AtScale {
    /// Tenants.
    pub tenants: u64,
    /// tickwork, per service (in [`SERVICES`] order).
    pub tickwork: Vec<f64>,
    /// The `000_*` design: its DynamoDB (the only part it had a model of); it visits at most 100
    /// tenants a tick whatever their number, so its bill does not grow (it skips them instead).
    pub before_dynamodb: f64,
    /// One EventBridge Scheduler schedule per tenant, per service.
    pub scheduler: Vec<f64>,
}

fn by_service(b: &Bill) -> Vec<f64> {
    SERVICES.iter().map(|s| b.service(s)).collect()
}

/// The bill at each of `scales` tenants. tickwork's is the model at `a` and `b` tenants (both
/// modelled in full), each service extended as a straight line through the two: its cost is a
/// fixed part (monitoring, idle ticks) and a part per tenant (pulses, pages, batch items), which
/// the model shows at these sizes; modelling ten million tenants tick by tick would take hours.
/// The Scheduler's is its formula at every scale.
pub fn at_scales(
    base: &CostInput,
    (a, b): (usize, usize),
    scales: &[u64],
    stack: &Stack,
    p: &Prices,
) -> Result<Vec<AtScale>> {
    anyhow::ensure!(a > 0 && b > a, "two model sizes, the second larger");
    let (_, pa) = price(&CostInput { tenants: a, ..base.clone() }, stack, p)?;
    let (_, pb) = price_with(&CostInput { tenants: b, ..base.clone() }, stack, p, false)?;
    let (sa, sb) = (by_service(&pa.bill), by_service(&pb.bill));
    Ok(scales
        .iter()
        .map(|&n| {
            let x = (n as f64 - a as f64) / (b - a) as f64;
            AtScale {
                tenants: n,
                tickwork: sa.iter().zip(&sb).map(|(ya, yb)| (ya + (yb - ya) * x).max(0.0)).collect(),
                before_dynamodb: pa.before_dynamodb_usd,
                scheduler: by_service(&scheduler_per_tenant(n as usize, stack, p)),
            }
        })
        .collect())
}

/// The fewest tenants, to the nearest `step`, at which one Scheduler schedule per tenant costs
/// more a month than tickwork's whole stack: below it the Scheduler is the cheaper design (the
/// README and `docs/cost.md` quote it). From the same two full-model runs as [`at_scales`].
pub fn scheduler_break_even(base: &CostInput, stack: &Stack, p: &Prices, step: u64, max: u64) -> Result<Option<u64>> {
    let scales: Vec<u64> = (1..=max / step).map(|k| k * step).collect();
    let rows = at_scales(base, (1_000, crate::cost::FULL_MODEL_MAX), &scales, stack, p)?;
    Ok(rows.iter().find(|r| r.scheduler.iter().sum::<f64>() > r.tickwork.iter().sum::<f64>()).map(|r| r.tenants))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bar, from the model with `tickctl cost`'s defaults (1,000 tenants in 8 zones, 30
    /// days, the template's schedules and the prices above): the work itself (DynamoDB and Lambda)
    /// costs under a twentieth of the `000_*` design's DynamoDB, monitoring at most $5 (at 1,000
    /// tenants it is nearly the whole bill: five metrics and fifteen alarms, $3.00, about the
    /// before design's DynamoDB alone), and tickwork's own writes (the summaries, the user's effect,
    /// not counted) at most 0.5 WCU a tenant-day.
    #[test]
    fn the_work_costs_a_twentieth_of_the_before_designs_dynamodb() {
        let input = CostInput::deployed(1000);
        let (r, priced) = price(&input, &Stack::default(), &Prices::default()).unwrap();
        let (total, before) = (priced.bill.total(), priced.before_dynamodb_usd);
        let work = priced.bill.service("DynamoDB") + priced.bill.service("Lambda");
        println!(
            "whole stack ${total:.2} a month, the work ${work:.4}, monitoring ${:.2}; before ${before:.2}",
            priced.bill.monitoring()
        );
        assert!(work * 20.0 < before, "the work ${work:.4} vs the before design's DynamoDB ${before:.2}");
        assert!(priced.bill.monitoring() <= 5.0);
        assert!((total - priced.bill.monitoring() - work).abs() < 0.05, "the rest is logs: {total} {work}");
        let effect: f64 = r.jobs.iter().map(|j| j.tables.get(crate::cost::table::SUMMARIES).map_or(0.0, |t| t.1)).sum();
        let own = (r.total().wcu - effect) / (1000.0 * r.days);
        println!("tickwork's own WCU per tenant-day: {own:.3}");
        assert!(own <= 0.5, "{own}");
        assert_eq!(r.before.invocations, 30 * 1440, "the before design at its own one-minute schedule");
    }

    #[test]
    fn monitoring_stays_under_five_dollars_and_the_scheduler_gets_its_free_tier() {
        let r = CostReport { days: 30.0, jobs: vec![], before: JobCost::default(), pulses: Default::default() };
        let b = bill(&r, 1000, 8, &Stack::default(), &Prices::default());
        // 5 metrics at $0.30, 15 single-metric alarms at $0.10.
        assert!((b.monitoring() - (5.0 * 0.30 + 15.0 * 0.10)).abs() < 1e-9, "{}", b.monitoring());
        assert!(b.monitoring() <= 5.0);
        let with_dash = bill(&r, 1000, 8, &Stack { dashboard: true, ..Stack::default() }, &Prices::default());
        assert!((with_dash.monitoring() - b.monitoring() - 3.0).abs() < 1e-9);
        // 1,000 tenants: 30,000 invocations, inside the 14 million free.
        let s = scheduler_per_tenant(1000, &Stack::default(), &Prices::default());
        assert_eq!(s.service("EventBridge"), 0.0);
        let s = scheduler_per_tenant(10_000_000, &Stack::default(), &Prices::default());
        assert!((s.service("EventBridge") - (300.0 - 14.0)).abs() < 1e-6);
    }

    /// The README's "below about half a million tenants the Scheduler costs less", and
    /// `docs/cost.md`'s "each further tenant costs tickwork about a tenth", from the model (a
    /// drain's handler calls run sixteen at once, so the worker's Lambda time is a sixteenth of
    /// its calls').
    #[test]
    fn the_scheduler_costs_less_below_about_half_a_million_tenants_and_ten_times_more_above() {
        let (stack, p) = (Stack::default(), Prices::default());
        let base = CostInput::deployed(1_000);
        let n = scheduler_break_even(&base, &stack, &p, 10_000, 2_000_000).unwrap().expect("a break-even");
        println!("break-even at {n} tenants");
        assert!((450_000..=550_000).contains(&n), "break-even at {n} tenants");
        let rows =
            at_scales(&base, (1_000, crate::cost::FULL_MODEL_MAX), &[5_000_000, 10_000_000], &stack, &p).unwrap();
        let per = |f: fn(&AtScale) -> f64| (f(&rows[1]) - f(&rows[0])) / 5_000_000.0;
        let ratio = per(|r| r.tickwork.iter().sum()) / per(|r| r.scheduler.iter().sum());
        println!("a further tenant costs tickwork {ratio:.3} of the Scheduler's");
        assert!((0.08..=0.11).contains(&ratio), "a further tenant costs tickwork {ratio:.3} of the Scheduler's");
    }
}
