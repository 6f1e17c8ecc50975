//! A burst of schedules due at one local hour, handed to the queue by the real sweep, beside the
//! burst model ([`tickctl::schedules::burst`]).
//!
//! `FIRES` tenants in Berlin, each with a `daily 08:00` schedule, imported through the library's
//! bulk path; the sweep's tick at 07:00Z (08:00 in Berlin) fires them all, every DynamoDB request
//! waiting `LATENCY_MS` first, as a round trip would (as in the `scale` section). The model is
//! given that latency, and the local server's own time a request, measured first, as time that
//! does not overlap (moto serves one request at a time); the local server enforces no partition
//! write limit, so the model's request time is what is compared (its partition floor is printed
//! beside).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use aws_config::SdkConfig;
use tickctl::schedules::{burst, BurstInput};
use tickwork::budget::Unlimited;
use tickwork::clock::{ManualClock, SharedClock};
use tickwork::config::Env;
use tickwork::queue::QueueConfig;
use tickwork::schedules::{ScheduleDef, Schedules};
use tickwork::schema::{self, control_table};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;

const FIRES: u64 = 1_600;
const LATENCY_MS: u64 = 20;

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    println!(
        "== A burst: {FIRES} schedules due at 08:00 in Berlin, fired by the sweep's tick; every request waits {LATENCY_MS} ms first, the model beside =="
    );
    let service_ms = serial_ms(sdk, 8).await?;
    let prefix = format!("burst{}-{:x}", std::process::id(), fastrand::u32(..));
    let admin = crate::scale::db(sdk, Duration::ZERO);
    let tables = crate::scale::sweep_tables(&admin, &prefix).await?;
    let ms = |s: &str| s.parse::<jiff::Timestamp>().map(|t| t.as_millisecond());
    let clock = Arc::new(ManualClock::at(ms("2026-12-01T05:00:00Z")?));
    let shared: SharedClock = clock.clone();
    let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1))?;
    let setup =
        pulse_sweep::Deps::new(admin.clone(), shared.clone(), cfg.clone(), tables.clone(), 1, QueueConfig::default());
    let tenants: Vec<Tenant> = (0..FIRES).map(|i| Tenant::new(format!("t{i:05}"), "Europe/Berlin")).collect();
    pulse_sweep::add_tenants(&setup, &tenants).await?;
    let schedules = Schedules::new(admin.clone(), &tables.control, &cfg.job, shared.clone());
    let def = ScheduleDef::new("nudge", "daily 08:00".parse()?, 0, Default::default())?;
    let rows = tenants.iter().map(|t| (t.id.clone(), t.zone.clone(), def.clone())).collect();
    let added = schedules.put_many(rows, &cfg.policy).await?;
    ensure!(added.added == FIRES, "{} of {FIRES} schedules added", added.added);
    // The sweep's `ScheduleWrites` mapping hands the new records over (`sched_next` lowered).
    let writes =
        lambda_standin::streams::StreamMapping::new(sdk, &tables.control, &[pulse_sweep::lowering::FILTER], 1000)?;
    let setup_ref = &setup;
    writes
        .pump(|event| async move { Box::pin(pulse_sweep::handle(setup_ref, event, i64::MAX)).await.map(|_| ()) })
        .await?;
    // The tick of 06:45Z visits the new tenants (their first sight), so that 07:00Z's is the burst's.
    for at in ["2026-12-01T06:45:00Z"] {
        clock.set(ms(at)?);
        pulse_sweep::run(&setup, &Tick::parse(&Tick::envelope(ms(at)?, false))?, &Unlimited, "setup").await?;
    }
    let slow = crate::scale::db(sdk, Duration::from_millis(LATENCY_MS));
    let deps = pulse_sweep::Deps::new(slow, shared.clone(), cfg.clone(), tables.clone(), 1, QueueConfig::default());
    let at = ms("2026-12-01T07:00:00Z")?;
    clock.set(at);
    let before = deps.db.meter().read_write_requests();
    let start = Instant::now();
    let r = pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(at, false))?, &Unlimited, "burst").await?;
    let took = start.elapsed();
    let after = deps.db.meter().read_write_requests();
    ensure!(r.fires == FIRES, "{} of {FIRES} fired: {r:?}", r.fires);
    let requests = (after.0 - before.0) + (after.1 - before.1);
    let b = BurstInput {
        fires: FIRES,
        groups: 1,
        start_ms: 0.0,
        latency_ms: LATENCY_MS as f64,
        serial_ms: service_ms,
        tenant_concurrency: cfg.tenant_concurrency as u32,
        fire_concurrency: cfg.fire_concurrency as u32,
        // The local server enforces no table throughput.
        table_wcu: f64::INFINITY,
        table_rcu: f64::INFINITY,
        invocation_ms: f64::MAX,
        interval_ms: 900_000.0,
    };
    let m = burst(&b);
    println!(
        "local server: {service_ms:.1} ms a request when 8 are made at once (its one-at-a-time time, given to the model as time that does not overlap)"
    );
    println!(
        "{:>12} {:>10} {:>14} {:>10} {:>7} {:>16}",
        "", "requests", "hand-over s", "model s", "ratio", "partition floor s"
    );
    println!(
        "{:>12} {:>10} {:>14.2} {:>10.2} {:>7.3} {:>16.1}",
        "measured",
        requests,
        took.as_secs_f64(),
        m.requests_ms / 1000.0,
        took.as_secs_f64() * 1000.0 / m.requests_ms,
        m.partition_floor_ms / 1000.0
    );
    println!(
        "{:>12} {:>10} (the fires' pages and closing reads; the tick's own lease, state and calendar requests are the rest)",
        "model", m.requests
    );
    println!();
    Ok(())
}

/// The local server's own time a request when `at_once` are made at a time: what it serialises.
pub(crate) async fn serial_ms(sdk: &SdkConfig, at_once: usize) -> Result<f64> {
    use futures::stream::{self, StreamExt};
    let d = crate::scale::db(sdk, Duration::ZERO);
    let table = format!("ser{}-{:x}-control", std::process::id(), fastrand::u32(..));
    schema::create_table(d.client(), &control_table(), &table).await?;
    let n = 400;
    let start = Instant::now();
    let done: Vec<_> = stream::iter(0..n)
        .map(|_| d.get_strong(&table, schema::key("probe", "probe")))
        .buffer_unordered(at_once)
        .collect()
        .await;
    for r in done {
        r?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0 / n as f64)
}
