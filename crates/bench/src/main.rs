//! `make bench`: figures measured side by side in one run against the local servers.
//!
//! Throughput on a shared machine is noisy and the local server is a single-threaded Python
//! process, so absolute rates say little about AWS; ratios measured in the same run (a claim next
//! to a raw UpdateItem) are what to compare. Capacity figures are estimated by DynamoDB's rules and
//! do not depend on the machine.
//!
//! Usage: `tickwork-bench [bill] [pulse] [archive] [queue] [startup] [scale] [delivery] [burst] [control]` (no argument: every
//! section). `bill` needs no server: it prices the model and draws `docs/bill.svg`.
//! The client is built in the dev profile: the single-threaded local server bounds every rate here.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use aws_config::SdkConfig;
use futures::future::BoxFuture;
use queue_worker::{drain, Handler, HandlerError, Registry, WorkerConfig};
use tickwork::budget::Unlimited;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::meter::{CapacitySource, Meter};
use tickwork::queue::{queue_table, Job, NewItem, Queue, QueueConfig};
use tickwork::retry::{work_client, RetryPolicy};
use tickwork::schema::{self, av_n, key};
use tickwork::Db;

/// The sections `make bench BENCH=<section>` runs (all of them without one); the docs name no
/// other (`tests/it/docs.rs` reads this list).
pub const SECTIONS: [&str; 10] =
    ["bill", "pulse", "archive", "queue", "startup", "scale", "delivery", "burst", "control", "writes"];

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // A section misspelt ran nothing and said nothing.
    if let Some(bad) = args.iter().find(|a| !SECTIONS.contains(&a.as_str())) {
        anyhow::bail!("no bench section `{bad}`: the sections are {}", SECTIONS.join(", "));
    }
    let all = args.is_empty();
    if all || args.iter().any(|a| a == "bill") {
        bill::run("docs/bill.svg")?;
        if args.iter().all(|a| a == "bill") && !all {
            return Ok(());
        }
    }
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .context("AWS_ENDPOINT_URL_DYNAMODB is not set: run through `make bench`, which starts the local servers")?;
    let sdk = tickwork_sim::local_sdk(&endpoint).await;
    println!("tickwork bench against {endpoint} (moto, requests serialised)\n");
    if all || args.iter().any(|a| a == "pulse") {
        pulse(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "archive") {
        archive(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "queue") {
        queue(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "startup") {
        startup(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "scale") {
        scale::run(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "delivery") {
        delivery::run(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "burst") {
        burst::run(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "control") {
        control::run(&sdk).await?;
    }
    if all || args.iter().any(|a| a == "writes") {
        writes::run(&sdk).await?;
    }
    Ok(())
}

mod bill;
mod burst;
mod control;
mod delivery;
mod scale;
mod server_time;
mod startup;
mod writes;

/// Start-up time and peak memory of each Lambda binary (release build), 5 cold starts each.
async fn startup(sdk: &SdkConfig) -> Result<()> {
    const RUNS: usize = 5;
    let dir = std::env::var("TICKWORK_BENCH_BIN_DIR").unwrap_or_else(|_| "target/release".into());
    println!("== Lambda start-up: {RUNS} cold starts of each release binary in {dir}, two invocations each ==");
    let admin = db(sdk, "admin");
    let prefix = unique("startup");
    for def in tickctl::all_tables() {
        schema::create_table(admin.client(), &def, &format!("{prefix}-{}", def.logical)).await?;
    }
    let env = vec![
        (tickwork::env::TABLE_PREFIX.to_string(), prefix.clone()),
        (tickwork::env::ARCHIVE_BUCKET.to_string(), format!("{prefix}-archive")),
        (tickwork::env::CAPACITY_SOURCE.to_string(), "estimate".to_string()),
        ("RUST_LOG".to_string(), "warn".to_string()),
    ];
    println!(
        "{:<14} {:>9} {:>16} {:>16} {:>16} {:>14}",
        "function", "size MB", "init ms (max)", "1st call ms", "warm call ms", "peak RSS MB"
    );
    for f in ["pulse-sweep", "tenant-fanout", "queue-worker", "archiver", "control"] {
        let bin = std::path::Path::new(&dir).join(f);
        let size = std::fs::metadata(&bin)
            .with_context(|| {
                format!("{}: build it with `cargo build --release -p {f}` (make bench does)", bin.display())
            })?
            .len();
        let event = std::fs::read_to_string(format!("events/{f}.json"))?;
        let mut runs = Vec::new();
        for _ in 0..RUNS {
            runs.push(startup::measure(&bin, &event, &env).await?);
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.total_cmp(b));
            (v[v.len() / 2], v[v.len() - 1])
        };
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        let init = median(runs.iter().map(|r| ms(r.init)).collect());
        let first = median(runs.iter().map(|r| ms(r.first)).collect());
        let warm = median(runs.iter().map(|r| ms(r.second)).collect());
        let rss = median(runs.iter().map(|r| r.peak_rss as f64 / 1_048_576.0).collect());
        println!(
            "{f:<14} {:>9.1} {:>9.1} ({:>5.1}) {:>9.1} ({:>5.1}) {:>9.1} ({:>5.1}) {:>7.1} ({:>4.1})",
            size as f64 / 1_048_576.0,
            init.0,
            init.1,
            first.0,
            first.1,
            warm.0,
            warm.1,
            rss.0,
            rss.1
        );
    }
    println!(
        "(medians, max in brackets; x86_64 here, arm64 on Lambda; each call an idle tick against the local server;\n \
         the template gives every function 256 MB)\n"
    );
    Ok(())
}

fn db(sdk: &SdkConfig, name: &str) -> Db {
    Db::new(work_client(sdk, &RetryPolicy::default(), name), Meter::new(CapacitySource::Estimate))
}

fn unique(name: &str) -> String {
    format!("bench-{}-{name}-{:x}", std::process::id(), fastrand::u32(..))
}

struct Noop;
impl Handler for Noop {
    fn handle<'a>(&'a self, _job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Claims per second with 1, 2 and 4 workers, next to the raw UpdateItem rate.
async fn queue(sdk: &SdkConfig) -> Result<()> {
    const ITEMS: usize = 1_000;
    const RAW: usize = 1_000;
    println!("== queue: claims per second vs the server's raw UpdateItem rate ==");
    let admin = db(sdk, "admin");
    let control = unique("raw");
    schema::create_table(admin.client(), &schema::control_table(), &control).await?;

    let mut raw_rates = Vec::new();
    for clients in [1usize, 4] {
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let db = db(sdk, &format!("raw{c}"));
            let table = control.clone();
            let n = RAW / clients;
            tasks.push(tokio::spawn(async move {
                for i in 0..n {
                    let req = db
                        .client()
                        .update_item()
                        .table_name(&table)
                        .set_key(Some(key("raw", format!("{c}-{}", i % 50))))
                        .update_expression("SET n = :n")
                        .expression_attribute_values(":n", av_n(i));
                    db.update(req).await?;
                }
                anyhow::Ok(())
            }));
        }
        for t in tasks {
            t.await??;
        }
        let rate = RAW as f64 / started.elapsed().as_secs_f64();
        println!("raw UpdateItem, {clients} client(s): {RAW} updates, {rate:.0}/s");
        raw_rates.push(rate);
    }
    let raw = raw_rates.iter().cloned().fold(0.0, f64::max);

    let clock: SharedClock = Arc::new(SystemClock);
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>12} {:>14} {:>12}",
        "workers", "items", "claims/s", "vs raw", "lost races", "requests/item", "WCU/item"
    );
    for workers in [1usize, 2, 4] {
        let table = unique("queue");
        schema::create_table(admin.client(), &queue_table(), &table).await?;
        let seed = Queue::new(db(sdk, "seed"), &table, QueueConfig::default(), clock.clone());
        let items: Vec<NewItem> = (0..ITEMS)
            .map(|i| NewItem {
                id: format!("job-{i:05}"),
                kind: "noop".into(),
                payload: "{}".into(),
                tenant: None,
                due_ms: 0,
            })
            .collect();
        seed.enqueue_many(&items, 16).await?;
        let reg = Registry::new().with("noop", Arc::new(Noop));
        let started = Instant::now();
        let mut tasks = Vec::new();
        let meters: Vec<Meter> = (0..workers).map(|_| Meter::new(CapacitySource::Estimate)).collect();
        for (w, meter) in meters.iter().enumerate() {
            let d = Db::new(work_client(sdk, &RetryPolicy::default(), &format!("w{w}")), meter.clone());
            d.register_gsis(&table, queue_table().gsi_shapes());
            let q = Queue::new(d, &table, QueueConfig::default(), clock.clone());
            let reg = reg.clone();
            tasks.push(tokio::spawn(async move {
                drain(&q, &reg, &format!("bench-{w}"), &Unlimited, &WorkerConfig::default()).await
            }));
        }
        let (mut claimed, mut taken) = (0u64, 0u64);
        for t in tasks {
            let r = t.await??;
            claimed += r.claimed;
            taken += r.taken;
        }
        let secs = started.elapsed().as_secs_f64();
        anyhow::ensure!(claimed == ITEMS as u64, "claimed {claimed} of {ITEMS}");
        let (mut requests, mut wcu) = (0u64, 0f64);
        for m in &meters {
            let (r, w) = m.read_write_requests();
            requests += r + w;
            wcu += m.total().wcu;
        }
        let rate = claimed as f64 / secs;
        println!(
            "{workers:>8} {ITEMS:>8} {rate:>10.0} {:>9.2}x {taken:>12} {:>14.2} {:>12.2}",
            rate / raw,
            requests as f64 / ITEMS as f64,
            wcu / ITEMS as f64
        );
    }
    println!(
        "(a claim is 1 UpdateItem, a finish another, plus a share of the poll Query: about 2 requests/item at best;\n the local server handles one request at a time, so more workers add contention, not throughput)\n"
    );
    Ok(())
}

/// The `000_*` "before" pulse sweep, reproduced faithfully: a lease released in `finally`, a
/// tenant list of one page with no cursor, 7 GetItem per tenant per tick (one per grain), and
/// every grain pulsed, the finest included, as a transactional write plus a cursor update.
mod before {
    use anyhow::Result;
    use tickwork::calendar::{self, Grain};
    use tickwork::queue::{enqueue_item, NewItem, QueueConfig};
    use tickwork::schema::{av_n, av_s, key, PK};
    use tickwork::{Db, DbError};

    const PAGE_LIMIT: i32 = 100;

    /// One worker's tick.
    pub async fn tick(db: &Db, control: &str, tenants: &str, queue: &str, now_ms: i64, owner: &str) -> Result<()> {
        let lock = key("lock#pulse-sweep", "lock");
        let mut item = lock.clone();
        item.insert("owner".into(), av_s(owner));
        item.insert("expires_at".into(), av_n(now_ms + 50_000));
        let acquire = db
            .client()
            .put_item()
            .table_name(control)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR expires_at < :now")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":now", av_n(now_ms));
        match db.put(acquire).await {
            Ok(_) => {}
            Err(DbError::ConditionFailed { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let result = sweep(db, control, tenants, queue, now_ms).await;
        // The bug: released as soon as the action returns, success or not.
        let release = db
            .client()
            .delete_item()
            .table_name(control)
            .set_key(Some(lock))
            .condition_expression("#o = :o")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_values(":o", av_s(owner));
        db.delete(release).await?;
        result
    }

    async fn sweep(db: &Db, control: &str, tenants: &str, queue: &str, now_ms: i64) -> Result<()> {
        // One page, no cursor: tenants past it are never visited.
        let page = db.scan_page(db.client().scan().table_name(tenants).limit(PAGE_LIMIT)).await?;
        for t in page.items() {
            let id = t["pk"].as_s().map_err(|_| anyhow::anyhow!("tenant id"))?.clone();
            let zone = t["zone"].as_s().map_err(|_| anyhow::anyhow!("zone"))?.clone();
            let tz = calendar::zone(&zone)?;
            for grain in Grain::ALL {
                let k = key(format!("cursor#{id}"), grain.name());
                let got = db.get(db.client().get_item().table_name(control).set_key(Some(k.clone()))).await?;
                let cur = got.item().and_then(|i| i.get("period")).and_then(|v| v.as_s().ok()).cloned();
                let now_period = tickctl::cost::before_period_id(grain, now_ms, &tz)?;
                if cur.as_deref() == Some(now_period.as_str()) {
                    continue;
                }
                let pulse = NewItem {
                    id: format!("pulse#{id}#{grain}#{now_period}"),
                    kind: "pulse".into(),
                    payload: serde_json::json!({"tenant": id, "grain": grain, "period": now_period}).to_string(),
                    tenant: Some(id.clone()),
                    due_ms: now_ms,
                };
                let cursor = aws_sdk_dynamodb::types::Update::builder()
                    .table_name(control)
                    .set_key(Some(k))
                    .update_expression("SET period = :p")
                    .expression_attribute_values(":p", av_s(&now_period))
                    .build()?;
                let items = vec![
                    enqueue_item(queue, &QueueConfig::default(), &pulse, now_ms)?,
                    aws_sdk_dynamodb::types::TransactWriteItem::builder().update(cursor).build(),
                ];
                match db.transact_write(items).await {
                    Ok(_) | Err(DbError::TransactionCanceled { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}

/// The pulse sweep against the `000_*` "before" design, same tenants, same ticks, same server.
async fn pulse(sdk: &SdkConfig) -> Result<()> {
    use tickwork::tenants::{tenants_table, Tenant, Tenants};
    use tickwork_sim::{simulate, SimConfig, ZONES};
    const TENANTS: usize = 1_000;
    const WINDOW_TICKS: u64 = 10;
    println!("== pulse sweep: 1,000 tenants, 3 workers on phase-shifted 1-minute ticks ==");
    // 2026-11-29T23:55Z: a window that crosses UTC midnight.
    let start = 1_796_082_900_000;
    let window = SimConfig {
        tenants: TENANTS,
        start_ms: start,
        ticks: Some(WINDOW_TICKS),
        drain_every: u32::MAX,
        ..SimConfig::default()
    };
    let after = simulate(sdk, &window).await?;
    let after_req = after.sweep_requests.0 + after.sweep_requests.1;
    let after_rcu = after.idle.rcu + after.boundary.rcu;
    let after_wcu = after.idle.wcu + after.boundary.wcu;

    // The before design on its own tables, same tenants and zones.
    let meter = Meter::new(CapacitySource::Estimate);
    let d = Db::new(work_client(sdk, &RetryPolicy::default(), "before"), meter.clone());
    let (control, tenants, queue) = (unique("b-control"), unique("b-tenants"), unique("b-queue"));
    schema::create_table(d.client(), &schema::control_table(), &control).await?;
    schema::create_table(d.client(), &tenants_table(), &tenants).await?;
    schema::create_table(d.client(), &queue_table(), &queue).await?;
    let seed: Vec<Tenant> = (0..TENANTS).map(|i| tickwork::tenants::sample_tenant(i, &ZONES, None)).collect();
    Tenants::new(d.clone(), &tenants, 8).put_all(&seed).await?;
    meter.reset();
    let started = Instant::now();
    for i in 0..WINDOW_TICKS {
        for w in 0..3i64 {
            let now = start + i as i64 * 60_000 + w * 20_000;
            before::tick(&d, &control, &tenants, &queue, now, &format!("b{w}-{i}")).await?;
        }
    }
    let before_secs = started.elapsed().as_secs_f64();
    let (br, bw) = meter.read_write_requests();
    let bt = meter.total();
    let before_req = br + bw;
    let visited = {
        let mut n = 0;
        for t in &seed {
            let got = d
                .get(d.client().get_item().table_name(&control).set_key(Some(key(format!("cursor#{}", t.id), "day"))))
                .await?;
            n += u64::from(got.item().is_some());
        }
        n
    };
    println!(
        "window: {WINDOW_TICKS} minutes from 2026-11-29T23:55Z ({} worker-ticks), crossing UTC midnight",
        WINDOW_TICKS * 3
    );
    println!("{:<34} {:>10} {:>10} {:>10} {:>10} {:>10}", "design", "reads", "writes", "RCU", "WCU", "tenants");
    println!("{:<34} {br:>10} {bw:>10} {:>10.1} {:>10.1} {visited:>10}", "000_* before (measured)", bt.rcu, bt.wcu);
    println!(
        "{:<34} {:>10} {:>10} {:>10.1} {:>10.1} {:>10}",
        "tickwork (measured)", after.sweep_requests.0, after.sweep_requests.1, after_rcu, after_wcu, TENANTS
    );
    println!(
        "ratio before/tickwork: requests {:.1}x, RCU {:.1}x, WCU {:.1}x  (before took {before_secs:.0} s of server time)",
        before_req as f64 / after_req.max(1) as f64,
        bt.rcu / after_rcu.max(0.5),
        bt.wcu / after_wcu.max(1.0)
    );

    // A whole simulated day of tickwork (cheap enough to measure); the before design's day would be
    // about 3 million requests on this single-threaded server, so only its window is measured.
    let day = SimConfig { tenants: TENANTS, days: 1, drain_every: u32::MAX, ..SimConfig::default() };
    let full = simulate(sdk, &day).await?;
    println!(
        "tickwork, a whole simulated day (4,320 worker-ticks): reads {}, writes {}, RCU {:.1}, WCU {:.1}; idle ticks {} at {:.2} requests each",
        full.sweep_requests.0,
        full.sweep_requests.1,
        full.idle.rcu + full.boundary.rcu,
        full.idle.wcu + full.boundary.wcu,
        full.idle_ticks,
        full.idle.requests as f64 / full.idle_ticks.max(1) as f64
    );
    // The cost model (`tickctl cost`) for the same window and day, beside the measurements: it is
    // how the before design's day is known without three hours of this server.
    let model_window = tickctl::cost::model(&window.cost_input())?;
    let model_day = tickctl::cost::model(&day.cost_input())?;
    let mw = model_window.job("pulse-sweep").expect("sweep");
    let md = model_day.job("pulse-sweep").expect("sweep");
    println!("{:<34} {:>10} {:>10} {:>10} {:>10}", "model (tickctl cost)", "reads", "writes", "RCU", "WCU");
    let row = |label: &str, j: &tickctl::cost::JobCost| {
        println!("{label:<34} {:>10} {:>10} {:>10.1} {:>10.1}", j.reads, j.writes, j.rcu, j.wcu);
    };
    row("000_* before, window", &model_window.before);
    row("tickwork, window", mw);
    row("tickwork, day", md);
    row("000_* before, day", &model_day.before);
    println!(
        "before/tickwork over the day by the model: requests {:.0}x, RCU {:.0}x (the before day is the model's, checked against the measured window above)\n",
        model_day.before.requests() as f64 / md.requests().max(1) as f64,
        model_day.before.rcu / md.rcu.max(0.5)
    );
    Ok(())
}

/// The archiver against the `000_*` "before" archiver (oldest batch per shard, filtered in code),
/// on one change-feed table of 100,000 rows in 8 shards.
async fn archive(sdk: &SdkConfig) -> Result<()> {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use tickwork::changes::{change_item, changes_table, cutoff_key, shard_key, BY_SHARD, SHARD};
    const ROWS: usize = 100_000;
    const DUE: usize = 1_000;
    const SHARDS: u32 = 8;
    const BATCH: i32 = 100;
    const NOW: i64 = 1_795_910_400_000; // 2026-11-29T00:00Z
    const DAY: i64 = 86_400_000;
    println!("== archiver: {DUE} due rows among {ROWS} in {SHARDS} shards, batches of {BATCH} ==");
    let meter = Meter::new(CapacitySource::Estimate);
    let d = Db::new(work_client(sdk, &RetryPolicy::default(), "archive"), meter.clone());
    let table = unique("changes");
    let control = unique("a-control");
    let bucket = unique("archive").to_lowercase();
    schema::create_table(d.client(), &changes_table(), &table).await?;
    schema::create_table(d.client(), &schema::control_table(), &control).await?;
    let s3 = archiver::s3_client(sdk);
    s3.create_bucket().bucket(&bucket).send().await?;
    let seed_started = Instant::now();
    let writes: Vec<WriteRequest> = (0..ROWS)
        .map(|i| {
            let age = if i < DUE { 40 * DAY } else { DAY };
            let item =
                change_item(SHARDS, "order", &format!("o{i:06}"), &serde_json::json!({"i": i}), NOW - age + i as i64);
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(item)).build().expect("item"))
                .build()
        })
        .collect();
    d.batch_write_all(&table, writes, 10).await?;
    println!("seeded {ROWS} rows in {:.0} s", seed_started.elapsed().as_secs_f64());

    // The before design: read the oldest batch of every shard, keep what is past the cutoff.
    async fn before_sweep(d: &Db, table: &str, cutoff_ms: i64) -> Result<u64> {
        let cutoff = cutoff_key(cutoff_ms);
        let mut due = 0;
        for k in 0..SHARDS {
            let q = d
                .client()
                .query()
                .table_name(table)
                .index_name(BY_SHARD)
                .key_condition_expression("#s = :s")
                .expression_attribute_names("#s", SHARD)
                .expression_attribute_values(":s", tickwork::schema::av_s(shard_key(k)))
                .limit(BATCH);
            let out = d.query(q).await?;
            due += out
                .items()
                .iter()
                .filter(|i| i.get("tsid").and_then(|v| v.as_s().ok()).is_some_and(|t| t.as_str() < cutoff.as_str()))
                .count() as u64;
        }
        Ok(due)
    }
    let env = tickwork::config::Env::from_pairs([
        (tickwork::env::ARCHIVE_BUCKET, bucket.as_str()),
        (tickwork::env::CHANGE_SHARDS, "8"),
        (tickwork::env::ARCHIVE_PAGE_SIZE, "100"),
    ]);
    let cfg = archiver::ArchiverConfig::from_env(&env, std::time::Duration::from_secs(1))?;
    let clock: SharedClock = Arc::new(tickwork::clock::ManualClock::at(NOW));
    let deps = archiver::Deps::new(d.clone(), s3, clock, cfg, &control, table.clone());
    let tick = |ms: i64| tickwork_lambda::Tick::parse(&tickwork_lambda::Tick::envelope(ms, false));

    println!("{:<44} {:>12} {:>10} {:>10} {:>8}", "sweep", "items billed", "RCU", "archived", "secs");
    // Nothing due: the cutoff is older than every row.
    meter.reset();
    let t = Instant::now();
    let found = before_sweep(&d, &table, NOW - 60 * DAY).await?;
    println!(
        "{:<44} {:>12} {:>10.1} {:>10} {:>8.1}",
        "before, nothing due",
        meter.op("Query").items_read,
        meter.total().rcu,
        found,
        t.elapsed().as_secs_f64()
    );
    meter.reset();
    let t = Instant::now();
    let mut idle_cfg = deps.clone();
    idle_cfg.cfg.age = std::time::Duration::from_millis((60 * DAY) as u64);
    let r = archiver::run(&idle_cfg, &tick(NOW)?, &Unlimited, "idle").await?;
    println!(
        "{:<44} {:>12} {:>10.1} {:>10} {:>8.1}",
        "tickwork, nothing due",
        meter.op("Query").items_read,
        meter.total().rcu,
        r.archived,
        t.elapsed().as_secs_f64()
    );
    // 1,000 due (30-day age).
    meter.reset();
    let t = Instant::now();
    let found = before_sweep(&d, &table, NOW - 30 * DAY).await?;
    let before_items = meter.op("Query").items_read;
    println!(
        "{:<44} {:>12} {:>10.1} {:>10} {:>8.1}",
        "before, 1,000 due (reads only; one batch/shard)",
        before_items,
        meter.total().rcu,
        found,
        t.elapsed().as_secs_f64()
    );
    meter.reset();
    let t = Instant::now();
    let r = archiver::run(&deps, &tick(NOW)?, &Unlimited, "due").await?;
    let secs = t.elapsed().as_secs_f64();
    let after_items = meter.op("Query").items_read;
    println!(
        "{:<44} {:>12} {:>10.1} {:>10} {:>8.1}",
        "tickwork, 1,000 due (reads, S3, deletes)",
        after_items,
        meter.total().rcu,
        r.archived,
        secs
    );
    println!(
        "items billed per row archived: before {:.2} ({} of {DUE} due rows found in one sweep), tickwork {:.2}; tickwork archived {:.0} rows/s\n",
        before_items as f64 / found.max(1) as f64,
        found,
        after_items as f64 / r.archived.max(1) as f64,
        r.archived as f64 / secs
    );
    Ok(())
}
