//! A boundary shared by shard workers: its time against the number of workers, measured beside
//! the model's prediction ([`tickctl::boundary`]).
//!
//! The local server answers one request at a time in a few milliseconds, where DynamoDB answers
//! many at once in tens: the speed-up of concurrent workers would be invisible, or the server's
//! queue. So every request of the workers waits a fixed latency first (the SDK's HTTP client
//! behind an asynchronous delay), as a DynamoDB round trip would; the model is given that latency plus the
//! server's own time a request, measured first with one worker and no added latency.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use aws_config::SdkConfig;
use tickctl::boundary::{predict_on, BoundaryInput};
use tickwork::budget::Unlimited;
use tickwork::clock::{ManualClock, SharedClock};
use tickwork::config::Env;
use tickwork::meter::{CapacitySource, Meter};
use tickwork::queue::{queue_table, QueueConfig};
use tickwork::schema::{self, control_table};
use tickwork::tenants::{tenants_table, Position, Tenant, Tenants};
use tickwork::Db;
use tickwork_lambda::Tick;
use tickwork_tests::slow::{Delay, Log, Slow};

const TENANTS: usize = 320;
const SHARDS: u32 = 16;
const PAGE: u32 = 25;
const LATENCY_MS: u64 = 500;
const WORKERS: [u32; 5] = [1, 2, 4, 8, 16];
const ZONE: &str = "Asia/Tokyo";

pub(crate) fn db(sdk: &SdkConfig, latency: Duration) -> Db {
    sized_db(sdk, Delay::fixed(latency), None)
}

/// A client whose every request is late by `delay` for its size ([`tickwork_tests::slow`]), kept
/// in `log` when given.
pub(crate) fn sized_db(sdk: &SdkConfig, delay: Delay, log: Option<Log>) -> Db {
    let b = aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_partition(aws_sdk_dynamodb::config::retry::RetryPartition::new(format!("scale-{}", fastrand::u64(..))));
    let b = b.http_client(Slow::sized(sdk, delay, log));
    Db::new(aws_sdk_dynamodb::Client::from_conf(b.build()), Meter::new(CapacitySource::Estimate))
}

/// The pulse sweep's three tables under `prefix`, each new.
pub(crate) async fn sweep_tables(admin: &Db, prefix: &str) -> Result<pulse_sweep::Tables> {
    let tables = pulse_sweep::Tables {
        control: format!("{prefix}-control"),
        tenants: format!("{prefix}-tenants"),
        queue: format!("{prefix}-queue"),
    };
    for (def, name) in
        [(control_table(), &tables.control), (tenants_table(), &tables.tenants), (queue_table(), &tables.queue)]
    {
        schema::create_table(admin.client(), &def, name).await.with_context(|| format!("creating {name}"))?;
    }
    Ok(tables)
}

/// One boundary of `TENANTS` tenants over `SHARDS` shards by `workers` workers: its wall time,
/// and the requests the workers made.
async fn boundary(sdk: &SdkConfig, workers: u32, latency: Duration) -> Result<(Duration, u64)> {
    let prefix = format!("scale{}-{workers}-{:x}", std::process::id(), fastrand::u32(..));
    let admin = db(sdk, Duration::ZERO);
    let tables = sweep_tables(&admin, &prefix).await?;
    let at = "2026-11-29T15:00:00Z".parse::<jiff::Timestamp>()?.as_millisecond();
    // Every worker's clock stands at the boundary: leases and the event guard read it.
    let shared: SharedClock = std::sync::Arc::new(ManualClock::at(at));
    // Shared mode even for one worker (the leader alone, as when no helper starts).
    let n = workers.max(2).to_string();
    let page = PAGE.to_string();
    let env = Env::from_pairs([
        (tickwork::env::PULSE_SHARD_WORKERS, n.as_str()),
        (tickwork::env::PULSE_PAGE_SIZE, page.as_str()),
    ]);
    let cfg = pulse_sweep::PulseConfig::from_env(&env, Duration::from_secs(1))?;
    let deps =
        |d: Db| pulse_sweep::Deps::new(d, shared.clone(), cfg.clone(), tables.clone(), SHARDS, QueueConfig::default());
    let list: Vec<Tenant> = (0..TENANTS)
        .map(|i| Tenant {
            id: format!("t{i:05}"),
            zone: ZONE.into(),
            active: true,
            since_ms: Some(at - 86_400_000 * 30),
            pos: Position::Follows,
        })
        .collect();
    Tenants::new(admin.clone(), &tables.tenants, SHARDS).put_all(&list).await?;
    let setup = deps(admin.clone());
    setup.marks.register_groups(&cfg.job, &[ZONE.to_string()], SHARDS).await?;
    setup.marks.set_marks(&cfg.job, &[(ZONE, "2026-11-29")]).await?;

    let start = Instant::now();
    let mut running = Vec::new();
    let mut dbs = Vec::new();
    for w in 0..workers {
        if w == 1 {
            // The leader starts its helpers once the run is started (asynchronous Invoke).
            while !setup.marks.read_strong(&cfg.job).await?.runs.contains_key(ZONE) {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        let d = db(sdk, latency);
        dbs.push(d.clone());
        let deps = deps(d);
        let tick = if w == 0 { Tick::envelope(at, false) } else { Tick::helper_envelope(at, &format!("bench#{w}"), w) };
        let tick = Tick::parse(&tick)?;
        running.push(tokio::spawn(
            async move { pulse_sweep::run(&deps, &tick, &Unlimited, &format!("worker-{w}")).await },
        ));
    }
    for r in running {
        r.await??;
    }
    let took = start.elapsed();
    let state = setup.marks.read_strong(&cfg.job).await?;
    ensure!(
        state.marks.get(ZONE).map(String::as_str) == Some("2026-11-30"),
        "the boundary did not complete: {state:?}"
    );
    let units = tickwork_sim::queued_units(&admin, &tables.queue).await?;
    let days = units.keys().filter(|k| k.contains("#day#")).count();
    ensure!(days == TENANTS && units.values().all(|n| *n == 1), "{days} day pulses, not {TENANTS} once each");
    let requests = dbs.iter().map(|d| d.meter().total().requests).sum();
    Ok((took, requests))
}

/// The local server's own time a request: 200 reads of one item, one after another, no latency
/// added.
pub(crate) async fn service_ms(sdk: &SdkConfig) -> Result<f64> {
    let d = db(sdk, Duration::ZERO);
    let table = format!("svc{}-{:x}-control", std::process::id(), fastrand::u32(..));
    schema::create_table(d.client(), &control_table(), &table).await?;
    let start = Instant::now();
    for _ in 0..200 {
        d.get_strong(&table, schema::key("probe", "probe")).await?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0 / 200.0)
}

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    println!(
        "== A boundary shared by shard workers: {TENANTS} tenants of one zone, {SHARDS} shards, pages of {PAGE}; every request waits {LATENCY_MS} ms first (a DynamoDB round trip), the model beside =="
    );
    // The local server's own time a request, at one worker with no added latency.
    let (bare, requests) = boundary(sdk, 1, Duration::ZERO).await?;
    let service_ms = bare.as_secs_f64() * 1000.0 / requests.max(1) as f64;
    println!("local server: {requests} requests in {:.2} s at one worker, {service_ms:.1} ms a request (the model's single server: one request at a time)", bare.as_secs_f64());
    // Each shard's tenants, placed as the tenants table places them.
    let mut shard_tenants = vec![0u64; SHARDS as usize];
    for i in 0..TENANTS {
        shard_tenants[tickwork::shard::shard_of(&format!("t{i:05}"), SHARDS) as usize] += 1;
    }
    println!(
        "{:>8} {:>12} {:>12} {:>8} {:>10} {:>10}",
        "workers", "measured s", "model s", "ratio", "speed-up", "requests"
    );
    // One invocation's working time: the template's 300 s timeout less the deadline margin the
    // functions read (never reached here; the model needs it to count rounds of shards).
    let margin = tickwork::config::CoreConfig::from_env(&tickwork::config::Env::from_pairs([]))?.margin;
    let invocation_ms = (Duration::from_secs(300) - margin).as_millis() as f64;
    let mut first = None;
    for w in WORKERS {
        let (took, made) = boundary(sdk, w, Duration::from_millis(LATENCY_MS)).await?;
        let model = predict_on(
            &BoundaryInput {
                tenants: TENANTS as u64,
                shards: SHARDS,
                page_size: PAGE,
                workers: w,
                latency_ms: LATENCY_MS as f64,
                invoke_ms: 0.0,
                wcu_per_page: 0.0,
                rcu_per_page: 0.0,
                queue_shards: 1,
                invocation_ms,
                interval_ms: 900_000.0,
                shard_tenants: shard_tenants.clone(),
            },
            service_ms,
        );
        let measured = took.as_secs_f64();
        let base = *first.get_or_insert(measured);
        println!(
            "{w:>8} {measured:>12.2} {:>12.2} {:>8.3} {:>9.1}x {made:>10}",
            model.total_ms / 1000.0,
            measured / (model.total_ms / 1000.0),
            base / measured
        );
    }
    println!();
    Ok(())
}
