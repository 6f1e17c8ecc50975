//! What `tickctl cost` prints: the month's bill by service and job, a scaled bill above the full
//! model's size, and the boundary shared by shard workers.

use anyhow::Result;
use tickctl::cost::{self, CostInput};

use super::style::{json, table, time};

pub fn print_cost(
    as_json: bool,
    input: &CostInput,
    r: &cost::CostReport,
    priced: &tickctl::bill::Priced,
) -> Result<i32> {
    if as_json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            model: &'a cost::CostReport,
            usd_per_month: &'a tickctl::bill::Priced,
        }
        json(&Out { model: r, usd_per_month: priced })?;
        return Ok(0);
    }
    let month = 30.0 / r.days;
    println!(
        "{} tenants in {} zones, {} sweep worker(s) every {} s, queue worker every {} s, {:.1} days from {}",
        input.tenants,
        input.zones.len(),
        input.workers,
        input.tick_ms / 1000,
        input.tick_ms * i64::from(input.drain_every) / 1000,
        r.days,
        time(input.start_ms)
    );
    let mut t = table(&[
        "job",
        "invocations",
        "read req",
        "write req",
        "RCU",
        "WCU",
        "req / 30 days",
        "RCU / 30 days",
        "WCU / 30 days",
    ]);
    let total = r.total();
    for j in r.jobs.iter().chain([&total, &r.before]) {
        let name = if j.job == "before" { "000_* before (sweep)".to_string() } else { j.job.clone() };
        t.add_row(vec![
            name,
            j.invocations.to_string(),
            j.reads.to_string(),
            j.writes.to_string(),
            format!("{:.0}", j.rcu),
            format!("{:.0}", j.wcu),
            format!("{:.0}", j.requests() as f64 * month),
            format!("{:.0}", j.rcu * month),
            format!("{:.0}", j.wcu * month),
        ]);
    }
    println!("{t}");
    let sweep = r.job("pulse-sweep").map(|j| j.requests()).unwrap_or(0).max(1);
    println!(
        "pulses: {}\nbefore / tickwork sweep: {:.1}x requests\nper operation: {}",
        r.pulses.iter().map(|(g, n)| format!("{g} {n}")).collect::<Vec<_>>().join(", "),
        r.before.requests() as f64 / sweep as f64,
        r.jobs
            .iter()
            .map(|j| format!(
                "{} {}",
                j.job,
                j.ops.iter().map(|(o, n)| format!("{o}={n}")).collect::<Vec<_>>().join(" ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let mut t = table(&["service", "item", "quantity", "unit", "USD / month"]);
    for l in &priced.bill.lines {
        t.add_row(vec![
            l.service.to_string(),
            l.item.clone(),
            format!("{:.2}", l.quantity),
            l.unit.to_string(),
            format!("{:.2}", l.usd),
        ]);
    }
    println!("\nthe bill, a month (prices: `--json` lists them with their names; `--price name=value` overrides)\n{t}");
    println!(
        "tickwork, whole stack: ${:.2} a month (DynamoDB ${:.2}, Lambda ${:.2}, CloudWatch ${:.2}, of which monitoring ${:.2})",
        priced.bill.total(),
        priced.bill.service("DynamoDB"),
        priced.bill.service("Lambda"),
        priced.bill.service("CloudWatch"),
        priced.bill.monitoring()
    );
    println!(
        "000_* before design, its DynamoDB alone (its sweep every minute, as it ran): ${:.2} a month",
        priced.before_dynamodb_usd
    );
    println!(
        "one EventBridge Scheduler schedule per tenant, firing a Lambda a local day: ${:.2} a month",
        priced.scheduler_per_tenant.total()
    );
    Ok(0)
}

/// The boundary of one zone group, as `cost` prints it.
#[derive(Debug, serde::Serialize)]
pub struct Boundary {
    /// What was asked, the assumptions included.
    pub input: tickctl::boundary::BoundaryInput,
    /// How it goes.
    pub time: tickctl::boundary::BoundaryTime,
    /// The target asked about, ms.
    pub target_ms: f64,
    /// The fewest workers that finish within the target (at most [`pulse_sweep::config::MAX_SHARD_WORKERS`]), if any.
    pub needed: Option<u32>,
    /// The tenant shard count allows a shared run ([`pulse_sweep::MAX_SHARED_SHARDS`]).
    pub shared_ok: bool,
    /// The burst's own cost: its units and its invocations, USD.
    pub burst_usd: f64,
    /// From the boundary until its last unit is handled.
    pub delivery: Delivery,
}

/// The boundary's delivery to the handlers: boundary-to-done.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Delivery {
    /// What was asked, the assumptions included.
    pub input: tickctl::delivery::DeliveryInput,
    /// How it goes.
    pub time: tickctl::delivery::DeliveryTime,
    /// The fewest drains that deliver within the target, if any.
    pub needed: Option<u32>,
    /// The handlers' writes a second at the peak (one write unit a unit, an assumption).
    pub handler_wcu_per_sec: f64,
    /// Within the table's write limit.
    pub within_limits: bool,
    /// Its own cost beyond the units' items: refunded claims and settles, slot writes, the
    /// drains' invocations and duration, USD.
    pub burst_usd: f64,
    /// The target's month, when the units go to one (`--deliver-to`).
    pub target: Option<tickctl::targets::TargetMonth>,
}

/// The boundary section (nothing with `--json`: it is in the JSON already).
pub fn print_boundary(as_json: bool, b: &Boundary) {
    if as_json {
        return;
    }
    let (i, t) = (&b.input, &b.time);
    println!(
        "\none zone group's boundary: {} tenants, {} shards, pages of {}, {} worker(s); assumed {} ms a request, {} ms an Invoke",
        i.tenants, i.shards, i.page_size, i.workers, i.latency_ms, i.invoke_ms
    );
    println!(
        "  done in {:.1} s{} ({} round(s) of shards, {:.1} s the longest shard, {} pages of it)",
        t.total_ms / 1000.0,
        if t.ticks > 1 {
            format!(", over {} ticks: work past an invocation waits for the next", t.ticks)
        } else {
            String::new()
        },
        t.rounds,
        t.shard_ms / 1000.0,
        t.pages_per_shard
    );
    println!(
        "  writes {:.0} units ({:.0} a second at the peak; the table's limit {:.0}), reads {:.0}; one ready-index key takes {:.0} a second, the checkpoint key {:.0} (a partition's limit {:.0}): {}",
        t.write_units,
        t.peak_wcu_per_sec,
        tickctl::boundary::TABLE_MAX_WCU_PER_SEC,
        t.read_units,
        t.peak_ready_wcu_per_sec,
        t.peak_checkpoint_wcu_per_sec,
        tickctl::boundary::PARTITION_MAX_WCU_PER_SEC,
        if t.within_limits { "within each" } else { "OVER A LIMIT: fewer workers, or more queue shards" }
    );
    match b.needed {
        Some(w) => println!(
            "  workers to finish within {:.0} s: {w} (TICKWORK_PULSE_SHARD_WORKERS / ShardWorkers)",
            b.target_ms / 1000.0
        ),
        None => {
            println!(
                "  no count of workers up to {} finishes within {:.0} s: more tenant shards",
                pulse_sweep::config::MAX_SHARD_WORKERS,
                b.target_ms / 1000.0
            )
        }
    }
    if !b.shared_ok {
        println!(
            "  (shard workers need at most {} tenant shards; this configuration has {})",
            pulse_sweep::MAX_SHARED_SHARDS,
            i.shards
        );
    }
    println!("  the burst itself: ${:.4} (its write and read units, its invocations)", b.burst_usd);
    let (di, dt) = (&b.delivery.input, &b.delivery.time);
    println!(
        "delivery to the handlers: {} units in items of {}, {} drain(s) of {} handler calls, {} ms a call of {} unit(s); a drain starts units for {:.0} s of its timeout",
        di.units, di.units_per_item, di.drains, di.concurrency, di.handler_ms, di.units_per_call, di.window_ms / 1000.0
    );
    println!(
        "  boundary-to-done: {:.1} s (the sweep writes for {:.1} s; {} drain invocations, {} claims, {} given back at a deadline)",
        dt.done_ms / 1000.0,
        di.arrive_ms / 1000.0,
        dt.invocations,
        dt.claims,
        dt.refunds
    );
    use tickctl::delivery::Bound;
    println!(
        "  the handlers take about {:.0} units a second at the peak, bound by {}",
        dt.peak_units_per_sec,
        match dt.bound {
            Bound::Drains => "the drains' calls".to_string(),
            Bound::Target => format!(
                "the target's concurrency ({} calls in flight across the drains, --target-concurrency)",
                di.target_concurrency.unwrap_or_default()
            ),
            Bound::Table => format!(
                "the handlers' table ({:.0} writes a second, --handler-table-wcu: a new on-demand table's until it has peaked higher, then twice its last peak; the drains ask more and it throttles them)",
                di.handler_wcu.unwrap_or_default()
            ),
        }
    );
    match b.delivery.needed {
        Some(d) => println!(
            "  drains to deliver within {:.0} s: {d} (TICKWORK_WORKER_DRAINS / WorkerConcurrency, at {} handler calls each)",
            b.target_ms / 1000.0,
            di.concurrency
        ),
        None => println!(
            "  no count of drains up to 100 delivers within {:.0} s: {}",
            b.target_ms / 1000.0,
            match dt.bound {
                Bound::Drains => "more handler calls a drain, or a faster handler",
                Bound::Target => "a higher reserved concurrency for the target",
                Bound::Table => "warm throughput for the handlers' table",
            }
        ),
    }
    println!("  the delivery itself: ${:.4} (drain time, hand-ons, refunds, slot writes)", b.delivery.burst_usd);
    if let Some(t) = &b.delivery.target {
        println!(
            "  to the target ({}, {} units a call): {:.0} units and {:.0} calls a month, {:.0} billed by its service, ${:.2} a month (the target's own work is not in it)",
            serde_json::to_value(t.kind).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default(),
            di.units_per_call,
            t.units,
            t.calls,
            t.billed,
            t.usd
        );
    }
}

/// The bill of a load above [`tickctl::cost::FULL_MODEL_MAX`] tenants: by service, from the model
/// at two sizes, and the boundary.
pub fn print_scaled(
    as_json: bool,
    input: &CostInput,
    sizes: (usize, usize),
    row: &tickctl::bill::AtScale,
    b: &Boundary,
) -> Result<i32> {
    if as_json {
        json(&serde_json::json!({
            "tenants": input.tenants,
            "modelled_at": [sizes.0, sizes.1],
            "usd_per_month": {
                "services": tickctl::bill::SERVICES,
                "tickwork": row.tickwork,
                "tickwork_total": row.tickwork.iter().sum::<f64>(),
                "before_dynamodb": row.before_dynamodb,
                "scheduler_per_tenant": row.scheduler,
            },
            "boundary": b,
        }))?;
        return Ok(0);
    }
    println!(
        "{} tenants in {} zones: the model runs in full at {} and {} tenants, each service a straight line through them",
        input.tenants,
        input.zones.len(),
        sizes.0,
        sizes.1
    );
    let mut t = table(&["design", "DynamoDB", "Lambda", "CloudWatch", "S3", "EventBridge", "USD / month"]);
    let mut line = |name: &str, v: &[f64]| {
        let mut cells = vec![name.to_string()];
        cells.extend(v.iter().map(|x| format!("{x:.2}")));
        cells.push(format!("{:.2}", v.iter().sum::<f64>()));
        t.add_row(cells);
    };
    line("tickwork, whole stack", &row.tickwork);
    line("one Scheduler schedule per tenant", &row.scheduler);
    println!("{t}");
    println!(
        "000_* before design, its DynamoDB alone: ${:.2} a month (it visits 100 tenants a tick and skips the rest)",
        row.before_dynamodb
    );
    print_boundary(false, b);
    Ok(0)
}
