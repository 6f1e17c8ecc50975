//! `make bench`: figures measured side by side in one run against the local servers.
//!
//! Throughput on a shared machine is noisy and the local server is a single-threaded Python
//! process, so absolute rates say little about AWS; ratios measured in the same run (a claim next
//! to a raw UpdateItem) are what to compare. Capacity figures are estimated by DynamoDB's rules and
//! do not depend on the machine.
//!
//! Usage: `tickwork-bench [queue] ...` (no argument: every section).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use aws_config::{BehaviorVersion, SdkConfig};
use futures::future::BoxFuture;
use queue_worker::{drain, Handler, HandlerError, Registry, WorkerConfig};
use tickwork::budget::Unlimited;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::meter::{CapacitySource, Meter};
use tickwork::queue::{queue_table, Job, NewItem, Queue, QueueConfig};
use tickwork::retry::{work_client, RetryPolicy};
use tickwork::schema::{self, av_n, key};
use tickwork::Db;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let all = args.is_empty();
    let endpoint = std::env::var("AWS_ENDPOINT_URL_DYNAMODB")
        .context("AWS_ENDPOINT_URL_DYNAMODB is not set: run through `make bench`, which starts the local servers")?;
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "bench"))
        .endpoint_url(&endpoint)
        .load()
        .await;
    println!("tickwork bench against {endpoint} (moto, requests serialised)\n");
    if all || args.iter().any(|a| a == "queue") {
        queue(&sdk).await?;
    }
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
