//! Schedule writes from many writers at once (`make bench BENCH=writes`): how many a second the
//! local server takes, how many of their transactions were refused and went again, and which item
//! each write lands on, beside the model of the hottest item at 5,000 writes a second.
//!
//! Why items, not only a rate: the local server serves one request at a time, so its writes a
//! second are its own, not DynamoDB's. What carries over to DynamoDB is where the writes land.
//! Every item written (each write of a transaction, each put, update and delete) is counted by its
//! key at the SDK boundary, so the hottest item's share of the writes is measured, and the model
//! multiplies it by 5,000 writes a second and the item's write units, against DynamoDB's 1,000
//! write units a second for one item's partition ("Best practices for designing and using
//! partition keys effectively"; a transactional write costs 2 units per KB, "Managing capacity
//! with transactions"). Then the stream's mapping hands the batch over, as the template's
//! `ScheduleWrites` mapping would, and the state-item updates it makes are counted.
//!
//! Two mixes: timers an hour or more ahead (a trial's end, a daily schedule's next 08:00 at
//! signup) touch no item another writer touches; timers due within the hour count themselves on
//! their due shard's cursor item (`CURSOR_REACH_MS`), which is shared by every writer of that
//! shard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_types::config_bag::ConfigBag;
use tickwork::calendar::{CatchUp, Policy};
use tickwork::clock::{ManualClock, SharedClock};
use tickwork::meter::{CapacitySource, Meter};
use tickwork::queue::QueueConfig;
use tickwork::schedules::{Dst, ScheduleDef, Schedules, DUE_SHARDS};
use tickwork::Db;

/// Schedule writes a run, over all writers.
const WRITES: usize = 1_200;
/// The rate the model is held to: EventBridge Scheduler's default `CreateSchedule` quota.
const TARGET_PER_SEC: f64 = 5_000.0;
/// One item's partition: DynamoDB's write units a second.
const ITEM_WCU_PER_SEC: f64 = 1_000.0;

/// Every item written, by `(table, pk, sk)`.
#[derive(Debug, Clone, Default)]
struct Tally(Arc<Mutex<HashMap<String, u64>>>);

impl Tally {
    fn note(&self, table: Option<&str>, key: Option<&HashMap<String, AttributeValue>>) {
        let s = |k: &str| key.and_then(|m| m.get(k)).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let id = format!("{}|{}|{}", table.unwrap_or(""), s("pk"), s("sk"));
        *self.0.lock().unwrap().entry(id).or_default() += 1;
    }
    fn hottest(&self) -> (String, u64) {
        let m = self.0.lock().unwrap();
        m.iter().max_by_key(|(_, n)| **n).map(|(k, n)| (k.clone(), *n)).unwrap_or_default()
    }
    fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

impl Intercept for Tally {
    fn name(&self) -> &'static str {
        "ItemTally"
    }
    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        _: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        use aws_sdk_dynamodb::operation as op;
        let input = ctx.input();
        if let Some(t) = input.downcast_ref::<op::transact_write_items::TransactWriteItemsInput>() {
            for w in t.transact_items() {
                if let Some(p) = w.put() {
                    self.note(Some(p.table_name()), Some(p.item()));
                } else if let Some(u) = w.update() {
                    self.note(Some(u.table_name()), Some(u.key()));
                } else if let Some(d) = w.delete() {
                    self.note(Some(d.table_name()), Some(d.key()));
                } else if let Some(c) = w.condition_check() {
                    self.note(Some(c.table_name()), Some(c.key()));
                }
            }
        } else if let Some(p) = input.downcast_ref::<op::put_item::PutItemInput>() {
            self.note(p.table_name(), p.item());
        } else if let Some(u) = input.downcast_ref::<op::update_item::UpdateItemInput>() {
            self.note(u.table_name(), u.key());
        }
        Ok(())
    }
}

fn tallied_db(sdk: &SdkConfig, tally: &Tally) -> Db {
    let conf = aws_sdk_dynamodb::config::Builder::from(sdk).interceptor(tally.clone()).build();
    Db::new(aws_sdk_dynamodb::Client::from_conf(conf), Meter::new(CapacitySource::Estimate))
}

/// What one run of `writers` writers measured.
struct Run {
    per_sec: f64,
    transactions: u64,
    hottest: (String, u64),
    lowering_updates: u64,
    stream_records: usize,
}

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    println!(
        "== Schedule writes: {WRITES} distinct timers a run (a group each), from 1, 8 and 32 writers at once; every item written counted by key; the stream's batch handed over after =="
    );
    println!(
        "{:>8} {:>8} {:>9} {:>10} {:>13} {:>24} {:>14} {:>16}",
        "mix",
        "writers",
        "writes/s",
        "txns/write",
        "refused+again",
        "hottest item (writes)",
        "stream records",
        "state updates"
    );
    let mut rows = Vec::new();
    for near in [false, true] {
        for writers in [1usize, 8, 32] {
            let r = one(sdk, writers, near).await?;
            let mix = if near { "<1 h" } else { ">1 h" };
            let refused = r.transactions.saturating_sub(WRITES as u64);
            println!(
                "{mix:>8} {writers:>8} {:>9.0} {:>10.3} {refused:>13} {:>24} {:>14} {:>16}",
                r.per_sec,
                r.transactions as f64 / WRITES as f64,
                format!("{} ({})", short(&r.hottest.0), r.hottest.1),
                r.stream_records,
                r.lowering_updates,
            );
            rows.push((near, writers, r));
        }
    }
    println!(
        "\nmodel at {TARGET_PER_SEC:.0} schedule writes a second (the hottest item's writes a schedule write, measured above, x its write units, against {ITEM_WCU_PER_SEC:.0} a second):"
    );
    for near in [false, true] {
        let worst = rows.iter().filter(|(n, _, _)| *n == near).map(|(_, _, r)| r.hottest.1).max().unwrap_or(0);
        let share = worst as f64 / WRITES as f64;
        // A transactional write of an item under 1 KB: 2 units (the cursor, a head, a definition).
        let wcu = share * TARGET_PER_SEC * 2.0;
        let mix = if near { "timers within the hour" } else { "timers an hour or more ahead" };
        println!(
            "  {mix}: hottest item {share:.3} writes a schedule write -> {wcu:.0} WCU/s ({}), ceiling {:.0} writes/s",
            if wcu <= ITEM_WCU_PER_SEC { "under the limit" } else { "over the limit" },
            if share > 0.0 { ITEM_WCU_PER_SEC / (share * 2.0) } else { f64::INFINITY }
        );
    }
    println!(
        "  before (every write in a transaction with the state item, 2 WCU at up to 20 zones, 10 at 100): 1.000 writes a schedule write -> {:.0} WCU/s, ceiling 500 writes/s (100 at 100 zones)",
        TARGET_PER_SEC * 2.0
    );
    println!(
        "  the state item now: one update (two when it lowers) a stream batch; a mapping's batches come at most a few a second a stream shard (1 s window)"
    );
    let per_key = TARGET_PER_SEC / f64::from(DUE_SHARDS);
    println!(
        "  the due records: {DUE_SHARDS} partition keys (one a due shard): {per_key:.0} new records a second each at {TARGET_PER_SEC:.0} distinct timers a second, 1 WCU a put: {}\n",
        if per_key <= ITEM_WCU_PER_SEC {
            format!("under one partition's {ITEM_WCU_PER_SEC:.0}")
        } else {
            format!("over one partition's {ITEM_WCU_PER_SEC:.0} unless DynamoDB splits the key by sort key (its split for heat), so more due shards are needed for that rate")
        }
    );
    Ok(())
}

fn short(key: &str) -> String {
    let parts: Vec<&str> = key.splitn(3, '|').collect();
    let pk = parts.get(1).copied().unwrap_or("");
    let kind = pk.split('#').next().unwrap_or("");
    match (kind, parts.get(2).copied().unwrap_or("")) {
        ("sdue", "~") => "a shard cursor".into(),
        ("wm", _) => "the state item".into(),
        (k, _) => format!("a {k} item"),
    }
}

async fn one(sdk: &SdkConfig, writers: usize, near: bool) -> Result<Run> {
    let tally = Tally::default();
    let db = tallied_db(sdk, &tally);
    let prefix = format!("writes{}-{writers}-{:x}", std::process::id(), fastrand::u32(..));
    let tables = crate::scale::sweep_tables(&db, &prefix).await?;
    let clock = Arc::new(ManualClock::at(1_796_112_000_000)); // 2026-12-01T08:00Z
    let shared: SharedClock = clock.clone();
    let cfg = pulse_sweep::PulseConfig::from_env(&tickwork::config::Env::from_pairs([]), Duration::from_secs(1))?;
    let policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 86_400_000, interval_ms: 900_000 };
    let schedules = Schedules::new(db.clone(), &tables.control, &cfg.job, shared.clone());
    tally.clear();
    let tx_before = db.meter().requests_by_op().get("TransactWriteItems").copied().unwrap_or(0);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..writers {
        let s = schedules.clone();
        tasks.push(tokio::spawn(async move {
            for i in (w..WRITES).step_by(writers) {
                // Within the hour: 08:05-08:59; else the next day, a minute apart.
                let at = if near {
                    format!("at 2026-12-01T08:{:02}", 5 + i % 55)
                } else {
                    format!("at 2026-12-02T{:02}:{:02}", 8 + i / 60 % 12, i % 60)
                };
                let def = ScheduleDef::new(&format!("n{i}"), at.parse()?, 0, Dst::default())?;
                s.put(&format!("t{i:05}"), "UTC", def, &policy).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    let transactions = db.meter().requests_by_op().get("TransactWriteItems").copied().unwrap_or(0) - tx_before;
    let hottest = tally.hottest();
    // The mapping hands the inserts over; the state item's updates are counted.
    let sweep = pulse_sweep::Deps::new(db.clone(), shared, cfg, tables.clone(), 1, QueueConfig::default());
    let before = db.meter().requests_by_op().get("UpdateItem").copied().unwrap_or(0);
    let writes =
        lambda_standin::streams::StreamMapping::new(sdk, &tables.control, &[pulse_sweep::lowering::FILTER], 1000)?;
    let sweep_ref = &sweep;
    let stream_records = writes
        .pump(|event| async move { Box::pin(pulse_sweep::handle(sweep_ref, event, i64::MAX)).await.map(|_| ()) })
        .await?;
    let lowering_updates = db.meter().requests_by_op().get("UpdateItem").copied().unwrap_or(0) - before;
    ensure!(stream_records == WRITES, "{stream_records} of {WRITES} records handed over");
    Ok(Run { per_sec: WRITES as f64 / secs, transactions, hottest, lowering_updates, stream_records })
}
