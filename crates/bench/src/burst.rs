//! A burst of schedules due at one local hour, handed to the queue by the real sweep, beside the
//! burst model ([`tickctl::schedules::burst`]): once with one group (every tenant's `daily
//! 08:00`), once with every schedule its own group.
//!
//! `FIRES` tenants in Berlin, their schedules imported through the library's bulk path; the
//! sweep's tick at 07:00Z (08:00 in Berlin) fires them all, every DynamoDB request waiting
//! `LATENCY_MS` and `PER_KB_US` for each kilobyte it sends and receives, as a round trip would
//! ([`tickwork_tests::slow`]). The model is given the same, and the local server's own time a
//! request, measured first on the case's own tables ([`crate::server_time`]): it serves one
//! request at a time, and reads a whole table for a Query. The local server enforces no partition
//! or table limit, so the model's request time is what is compared.

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
use tickwork_tests::slow::{Delay, Log};

const FIRES: u64 = 1_600;
const LATENCY_MS: u64 = 20;
const PER_KB_US: u64 = 200;
/// The benchmark's tenant ids, `t00000`: 6 bytes.
const TENANT_ID_BYTES: u64 = 6;

/// One case's line.
struct Line {
    what: &'static str,
    requests: u64,
    model_requests: u64,
    measured_s: f64,
    model_s: f64,
}

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    println!(
        "== A burst: {FIRES} schedules due at 08:00 in Berlin, fired by the sweep's tick; every request waits {LATENCY_MS} ms and {PER_KB_US} µs a kilobyte each way, the model beside =="
    );
    let mut lines = Vec::new();
    for (what, groups) in [("one group", 1), ("each its own", FIRES)] {
        lines.push(case(sdk, what, groups).await?);
    }
    println!(
        "{:>14} {:>10} {:>10} {:>12} {:>10} {:>16}",
        "", "requests", "model", "hand-over s", "model s", "measured/model"
    );
    for l in &lines {
        println!(
            "{:>14} {:>10} {:>10} {:>12.2} {:>10.2} {:>16.3}",
            l.what,
            l.requests,
            l.model_requests,
            l.measured_s,
            l.model_s,
            l.measured_s / l.model_s
        );
    }
    let worst = lines.iter().map(|l| (l.measured_s / l.model_s - 1.0).abs()).fold(0.0, f64::max);
    println!(
        "(requests: the model's are the fires' pages and closing reads; the tick's own lease, state and calendar requests are the rest) — the model within {:.0} % of the measured: {}",
        worst * 100.0,
        if worst <= 0.25 { "within the 25 % asked" } else { "OVER the 25 % asked" }
    );
    println!();
    Ok(())
}

async fn case(sdk: &SdkConfig, what: &'static str, groups: u64) -> Result<Line> {
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
    // One group: every tenant's `daily 08:00` is the same; distinct: each its own name.
    let mut rows = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        let name = if groups == 1 { "nudge".to_string() } else { format!("nudge-{}", i as u64 % groups) };
        rows.push((
            t.id.clone(),
            t.zone.clone(),
            ScheduleDef::new(&name, "daily 08:00".parse()?, 0, Default::default())?,
        ));
    }
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
    let ids: Vec<String> = tenants.iter().map(|t| t.id.clone()).collect();
    let (server, kinds) = crate::server_time::measure(sdk, &tables.control, &tables.tenants, &ids).await?;
    println!("{what}: the local server's own time a request, 8 at once, on this case's tables:");
    for (kind, ms, w) in kinds {
        println!("  {kind:<28} {ms:>7.1} ms ({:.0} B sent, {:.0} B answered)", w.sent, w.got);
    }
    println!(
        "  so {:.1} ms a request, {:.1} more a Query, {:.2} a kilobyte sent, {:.2} a kilobyte answered",
        server.request_ms, server.query_ms, server.sent_per_kb_ms, server.got_per_kb_ms
    );
    let log: Log = Default::default();
    let delay = Delay { base: Duration::from_millis(LATENCY_MS), per_kb: Duration::from_micros(PER_KB_US) };
    let slow = crate::scale::sized_db(sdk, delay, Some(log.clone()));
    let deps = pulse_sweep::Deps::new(slow, shared.clone(), cfg.clone(), tables.clone(), 1, QueueConfig::default());
    let at = ms("2026-12-01T07:00:00Z")?;
    clock.set(at);
    let start = Instant::now();
    let r = pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(at, false))?, &Unlimited, "burst").await?;
    let took = start.elapsed();
    ensure!(r.fires == FIRES, "{} of {FIRES} fired: {r:?}", r.fires);
    let log = log.lock().expect("log");
    let mut by: std::collections::BTreeMap<&str, (usize, usize, usize, f64)> = Default::default();
    for x in log.iter() {
        let e = by.entry(x.op.as_str()).or_default();
        e.0 += 1;
        e.1 += x.request_bytes;
        e.2 += x.response_bytes;
        e.3 += x.took.as_secs_f64() * 1000.0;
    }
    println!("  the tick's requests (each its latency, its bytes' and its wait behind the others at the server):");
    for (op, (n, sent, got, ms)) in by {
        println!(
            "  {op:>20} {n:>5}, {:>7} B sent, {:>7} B answered, {:>8.1} ms each on average",
            sent / n,
            got / n,
            ms / n as f64
        );
    }
    let b = BurstInput {
        fires: FIRES,
        groups,
        start_ms: 0.0,
        latency_ms: LATENCY_MS as f64,
        per_kb_ms: PER_KB_US as f64 / 1000.0,
        tenant_id_bytes: TENANT_ID_BYTES,
        one_off: false,
        server,
        tenant_concurrency: cfg.tenant_concurrency as u32,
        fire_concurrency: cfg.fire_concurrency as u32,
        // The local server enforces no table throughput.
        table_wcu: f64::INFINITY,
        table_rcu: f64::INFINITY,
        invocation_ms: f64::MAX,
        interval_ms: 900_000.0,
    };
    let m = burst(&b);
    Ok(Line {
        what,
        requests: log.len() as u64,
        model_requests: m.requests,
        measured_s: took.as_secs_f64(),
        model_s: m.requests_ms / 1000.0,
    })
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
