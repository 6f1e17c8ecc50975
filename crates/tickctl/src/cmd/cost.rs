//! `tickctl cost`: the model's input from the command line and the deployment's environment, the
//! month's bill, and the boundary shared by shard workers.

use anyhow::{Context, Result};
use tickctl::cost::{self, CostInput};
use tickwork::config::Env;
use tickwork::queue::QueueConfig;

use crate::cli::CostArgs;
use crate::render;
use tickctl::targets::TargetKind;

pub fn run(env: &Env, as_json: bool, a: &CostArgs) -> Result<i32> {
    let tick_ms = cost::parse_interval(&a.tick).context("--tick")?;
    let drain_ms = cost::parse_interval(&a.worker_every).context("--worker-every")?;
    anyhow::ensure!(tick_ms > 0, "--tick must be above 0");
    let start_ms = match &a.start {
        Some(s) => s.parse::<jiff::Timestamp>().with_context(|| format!("--start `{s}`"))?.as_millisecond(),
        None => cost::DEFAULT_START_MS,
    };
    // Refuses a bad queue setting as every other command would.
    QueueConfig::from_env(env)?;
    let tenants = usize::try_from(a.tenants)?;
    let input = CostInput {
        zones: cost::zones(&a.zone, a.zones.map(usize::from))?,
        tick_ms,
        workers: a.workers,
        ticks: a.ticks.unwrap_or(u64::from(a.days) * 86_400_000 / tick_ms as u64),
        start_ms,
        drain_every: u32::try_from(drain_ms / tick_ms).unwrap_or(u32::MAX),
        ..CostInput::deployed(tenants)
    }
    .with_env(env)?;
    let mut prices = tickctl::bill::Prices::default();
    for p in &a.price {
        prices.set(p)?;
    }
    let stack = tickctl::bill::Stack { dashboard: a.dashboard, ..Default::default() };
    if a.control {
        let ops: Vec<_> = tickwork_cost::control::OPS
            .iter()
            .map(|op| (*op, tickwork_cost::control::per_thousand(op, &prices)))
            .collect();
        render::print_control(as_json, &ops)?;
        return Ok(0);
    }
    if a.schedules {
        // A tick firing 10,000 schedules at once gives the per-fire cost of a large tick.
        let job = pulse_sweep::config::job(env)?;
        let s = tickctl::schedules::month(input.tenants as u64, 10_000, &job, &prices)?;
        let burst = burst(env, a, &input, &s, &prices)?;
        render::print_schedules(as_json, &s, &burst)?;
        return Ok(0);
    }
    let boundary = boundary(env, a, &input, &prices)?;
    if input.tenants > cost::FULL_MODEL_MAX {
        // Replaying every tenant's every tick would take minutes at this scale: the model runs in
        // full at two sizes and each service is a straight line through them (as `make bench`).
        let sizes = (1_000, cost::FULL_MODEL_MAX);
        let base = CostInput { tenants: sizes.0, ..input.clone() };
        let rows = tickctl::bill::at_scales(&base, sizes, &[input.tenants as u64], &stack, &prices)?;
        return render::print_scaled(as_json, &input, sizes, &rows[0], &boundary);
    }
    let (r, priced) = tickctl::bill::price(&input, &stack, &prices)?;
    render::print_cost(as_json, &input, &r, &priced)?;
    render::print_boundary(as_json, &boundary);
    Ok(0)
}

/// The boundary of the load's largest zone group (or `--group-tenants`), shared by
/// `--shard-workers`, with the assumptions named on the command line.
fn boundary(env: &Env, a: &CostArgs, input: &CostInput, prices: &tickctl::bill::Prices) -> Result<render::Boundary> {
    use tickctl::boundary::{page_units, predict, workers_needed, BoundaryInput};
    let latency_ms = cost::parse_interval(&a.latency).context("--latency")? as f64;
    let invoke_ms = cost::parse_interval(&a.invoke_latency).context("--invoke-latency")? as f64;
    let target_ms = cost::parse_interval(&a.target).context("--target")? as f64;
    anyhow::ensure!(latency_ms > 0.0, "--latency must be above 0");
    let workers = match a.shard_workers {
        Some(w) => w,
        None => pulse_sweep::config::shard_workers(env)?,
    };
    let tenants = a.group_tenants.unwrap_or((input.tenants as u64).div_ceil(input.zones.len().max(1) as u64));
    let (wcu_per_page, rcu_per_page) = page_units(input.page_size as u32, input.queue_shards)?;
    let b = BoundaryInput {
        tenants,
        shards: input.tenant_shards,
        page_size: input.page_size as u32,
        workers,
        latency_ms,
        invoke_ms,
        wcu_per_page,
        rcu_per_page,
        queue_shards: input.queue_shards,
        invocation_ms: invocation_ms(env)?,
        interval_ms: input.tick_ms as f64,
        shard_tenants: vec![],
    };
    let t = predict(&b);
    let burst_usd = tickctl::boundary::burst_usd(&b, &t, tickctl::bill::Stack::default().memory_mb, prices);
    let units_a_month = pulses_a_month(input)?;
    let delivery = delivery(env, a, tenants, &t, latency_ms, invoke_ms, target_ms, units_a_month, prices)?;
    Ok(render::Boundary {
        needed: workers_needed(&b, target_ms).filter(|w| *w <= pulse_sweep::config::MAX_SHARD_WORKERS),
        target_ms,
        shared_ok: pulse_sweep::config::check_shared_shards(workers, input.tenant_shards).is_ok(),
        input: b,
        time: t,
        burst_usd,
        delivery,
    })
}

/// The boundary's delivery: its day pulses carried to the handlers by the worker's drains as the
/// template deploys them (timeout, handler timeout and margin, concurrency, drains), unless the
/// command line or the environment says otherwise.
#[allow(clippy::too_many_arguments)]
fn delivery(
    env: &Env,
    a: &CostArgs,
    tenants: u64,
    sweep: &tickctl::boundary::BoundaryTime,
    latency_ms: f64,
    invoke_ms: f64,
    target_ms: f64,
    units_a_month: f64,
    prices: &tickctl::bill::Prices,
) -> Result<render::Delivery> {
    use tickctl::delivery::{drains_needed, predict};
    let batch = queue_worker::targets::function::function_batch(env)? as u64;
    let d =
        drains_input(env, a, tenants, tickwork::batch::MAX_BATCH_UNITS as u64, sweep.total_ms, latency_ms, invoke_ms)?;
    let time = predict(&d);
    // Each unit's handler writes one row (the shipped handlers' summary), every drain busy; a
    // queue or a bus writes nothing of ours.
    let handler_wcu_per_sec = match a.deliver_to {
        TargetKind::Sqs | TargetKind::SqsFifo | TargetKind::Events => 0.0,
        _ => time.peak_units_per_sec,
    };
    let burst_usd = tickctl::delivery::burst_usd(&d, &time, tickctl::bill::Stack::default().memory_mb, prices);
    Ok(render::Delivery {
        needed: drains_needed(&d, target_ms, 100),
        handler_wcu_per_sec,
        // The drains ask no more than the handlers' table takes (when it bounds them, it
        // throttles them: each throttle a back-off, no attempt spent).
        within_limits: time.bound != tickctl::delivery::Bound::Table,
        target: (a.deliver_to != TargetKind::Rust).then(|| {
            tickctl::targets::month(a.deliver_to, units_a_month, tickctl::targets::PULSE_UNIT_BYTES, batch, prices)
        }),
        input: d,
        time,
        burst_usd,
    })
}

/// The pulses (units) the load's tenants are owed a month, from the model at 1,000 tenants (a
/// tenant's pulses do not depend on how many others there are).
fn pulses_a_month(input: &CostInput) -> Result<f64> {
    let base = CostInput { tenants: input.tenants.min(1_000), ..input.clone() };
    let r = cost::model(&base)?;
    let per_tenant = r.pulses.values().sum::<u64>() as f64 / base.tenants.max(1) as f64;
    Ok(per_tenant * input.tenants as f64 * 30.0 / r.days.max(1e-9))
}

/// `--burst` fires due in the same minute: the sweep's hand-over ([`tickctl::schedules::burst`],
/// woken at the minute's end at worst) and the drains' delivery of the fires' batch items (one
/// item a transaction of records).
fn burst(
    env: &Env,
    a: &CostArgs,
    input: &CostInput,
    per_fire: &tickctl::schedules::SchedulesCost,
    prices: &tickctl::bill::Prices,
) -> Result<render::Burst> {
    use tickctl::delivery::predict;
    use tickctl::schedules::{burst, BurstInput};
    let latency_ms = cost::parse_interval(&a.latency).context("--latency")? as f64;
    let invoke_ms = cost::parse_interval(&a.invoke_latency).context("--invoke-latency")? as f64;
    let target_ms = cost::parse_interval(&a.target).context("--target")? as f64;
    let sweep = pulse_sweep::PulseConfig::from_env(env, std::time::Duration::from_secs(1))?;
    let b = BurstInput {
        fires: a.burst,
        groups: a.burst_groups.min(a.burst),
        // A local hour falls on a quarter-hour tick in every zone: the tick fires it.
        start_ms: 0.0,
        latency_ms,
        per_kb_ms: a.latency_per_kb_ms,
        tenant_id_bytes: a.tenant_id_bytes,
        one_off: a.burst_one_off,
        server: tickctl::schedules::ServerTime::DYNAMODB,
        tenant_concurrency: sweep.tenant_concurrency as u32,
        fire_concurrency: sweep.fire_concurrency as u32,
        table_wcu: f64::from(a.control_table_wcu),
        table_rcu: f64::from(a.table_rcu),
        invocation_ms: invocation_ms(env)?,
        interval_ms: input.tick_ms as f64,
    };
    let t = burst(&b);
    // A batch item holds a page of a group's members, or a transaction's groups of one; they
    // land while the sweep fires.
    let per_item = (a.burst / b.groups).clamp(pulse_sweep::FIRE_CHUNK as u64, pulse_sweep::MEMBER_PAGE as u64);
    let d = drains_input(env, a, a.burst, per_item, t.handover_ms, latency_ms, invoke_ms)?;
    let delivery = predict(&d);
    // A fire's whole cost beside the Scheduler's: the sweep's units, the drains', and the
    // handler's one write or the target's calls.
    let sweep = tickctl::schedules::sweep_per_fire(per_fire, &b, &t);
    let drains_usd = tickctl::delivery::burst_usd(&d, &delivery, tickctl::bill::Stack::default().memory_mb, prices);
    let batch = queue_worker::targets::function::function_batch(env)? as u64;
    let handler_usd = tickctl::targets::per_million_fires(a.deliver_to, batch, prices);
    let full = tickctl::schedules::full_cost(&sweep, drains_usd, a.burst.max(1), handler_usd, prices);
    Ok(render::Burst { input: b, time: t, done_ms: delivery.done_ms, target_ms, delivery: d, full })
}

/// How long one sweep invocation works: the functions' own reading of timeout and margin (bounds,
/// margin below timeout), the template's timeout where none is declared.
fn invocation_ms(env: &Env) -> Result<f64> {
    let core = tickwork::config::CoreConfig::from_env(env)?;
    let timeout =
        core.function_timeout.unwrap_or(std::time::Duration::from_secs(pulse_sweep::config::DEPLOYED_TIMEOUT_SECS));
    anyhow::ensure!(
        core.margin < timeout,
        "{} ({} s) leaves no time to work in a {} s function",
        tickwork::env::DEADLINE_MARGIN_SECS,
        core.margin.as_secs_f64(),
        timeout.as_secs_f64()
    );
    Ok(timeout.saturating_sub(core.margin).as_millis() as f64)
}

/// The drains' part of a delivery of `units` in items of `units_per_item`, landing over
/// `arrive_ms`: the worker as deployed (unless the command line says otherwise), its handler or
/// its target (`--deliver-to`: a call's batch and time) as assumed on the command line.
fn drains_input(
    env: &Env,
    a: &CostArgs,
    units: u64,
    units_per_item: u64,
    arrive_ms: f64,
    request_ms: f64,
    invoke_ms: f64,
) -> Result<tickctl::delivery::DeliveryInput> {
    let handler_ms = cost::parse_interval(&a.handler).context("--handler")? as f64;
    let signal_ms = cost::parse_interval(&a.signal_latency).context("--signal-latency")? as f64;
    let round_trip_ms = cost::parse_interval(&a.call_latency).context("--call-latency")? as f64;
    let worker = tickctl::delivery::deployed_worker(env)?;
    let batch = queue_worker::targets::function::function_batch(env)? as u64;
    Ok(tickctl::delivery::DeliveryInput {
        units,
        units_per_item,
        arrive_ms,
        signal_ms,
        handler_ms: a.deliver_to.call_ms(handler_ms, round_trip_ms, batch),
        units_per_call: a.deliver_to.units_per_call(batch),
        request_ms,
        invoke_ms,
        concurrency: a.concurrency.unwrap_or(worker.concurrency as u32),
        drains: a.drains.unwrap_or(worker.drains),
        window_ms: worker.window_ms,
        poll_keys: worker.poll_keys,
        target_concurrency: a.target_concurrency,
        handler_wcu: match a.deliver_to {
            TargetKind::Sqs | TargetKind::SqsFifo | TargetKind::Events => None,
            TargetKind::Rust | TargetKind::Function => Some(f64::from(a.handler_table_wcu)),
        },
    })
}
