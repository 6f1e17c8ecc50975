//! Boundary-to-done against the number of drains, measured beside the model's prediction
//! ([`tickctl::delivery`]).
//!
//! A boundary's items (already written, as the sweep leaves them) are carried to a handler that
//! takes a fixed time a unit, by the real worker with a short real function timeout, its drains
//! handing on at their deadlines and started through the Lambda Invoke API stand-in by the SDK's
//! client, at most `drains` at once ([`lambda_standin::invoke::Engine`]). Every DynamoDB request
//! waits a fixed latency first, as a DynamoDB round trip would (as in the `scale` section); the
//! model is given that latency plus the local server's own time a request, measured first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use aws_config::SdkConfig;
use futures::future::BoxFuture;
use serde_json::Value;
use tickctl::delivery::{predict, DeliveryInput};
use tickwork::batch::Batch;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork::schema::{self, control_table};

const ITEMS: u64 = 64;
const UNITS_PER_ITEM: u64 = 250;
const HANDLER_MS: u64 = 20;
const CONCURRENCY: u32 = 16;
const LATENCY_MS: u64 = 20;
const TIMEOUT: Duration = Duration::from_secs(3);
const HANDLER_TIMEOUT: Duration = Duration::from_millis(500);
const MARGIN: Duration = Duration::from_millis(200);
const DRAINS: [u32; 5] = [1, 2, 4, 8, 16];

/// The throttling target's concurrency: a reserved concurrency of 16 against the fleet's drains
/// of 16 calls each.
const TARGET_CAP: u64 = 16;
/// The drains run against the throttling target.
const THROTTLED_DRAINS: [u32; 2] = [2, 4];

/// A handler that takes `HANDLER_MS` a unit (the timer's own rounding measured: the model is
/// given the handler's time as it was) and notes when the last one ended. With a `cap`, it is a
/// target of that concurrency: a call beyond it is refused at once as throttled, as Lambda
/// answers 429 over a function's reserved concurrency.
struct Timed {
    done: Arc<AtomicU64>,
    spent_us: Arc<AtomicU64>,
    last: Arc<Mutex<Option<Instant>>>,
    cap: Option<u64>,
    running: Arc<AtomicU64>,
    throttled: Arc<AtomicU64>,
}

impl queue_worker::Handler for Timed {
    fn handle<'a>(&'a self, _: &'a tickwork::queue::Job) -> BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        Box::pin(async move {
            if let Some(cap) = self.cap {
                if self.running.fetch_add(1, Ordering::SeqCst) >= cap {
                    self.running.fetch_sub(1, Ordering::SeqCst);
                    self.throttled.fetch_add(1, Ordering::SeqCst);
                    // As Lambda's 429 with a `Retry-After` of 1 s: the backoff fits the bench's 3 s
                    // invocations (without a hint it doubles to 60 s, for AWS's 300 s ones).
                    return Err(queue_worker::HandlerError::Throttled {
                        why: "over the target's concurrency".into(),
                        after_ms: Some(1_000),
                    });
                }
            }
            let t = Instant::now();
            tokio::time::sleep(Duration::from_millis(HANDLER_MS)).await;
            self.spent_us.fetch_add(t.elapsed().as_micros() as u64, Ordering::SeqCst);
            self.done.fetch_add(1, Ordering::SeqCst);
            *self.last.lock().unwrap() = Some(Instant::now());
            if self.cap.is_some() {
                self.running.fetch_sub(1, Ordering::SeqCst);
            }
            Ok(())
        })
    }
}

/// What one run measured.
struct Measured {
    took: Duration,
    /// The handler's mean time a unit, ms.
    handler_ms: f64,
    invocations: u64,
    claims: u64,
    refunds: u64,
    taken: u64,
    peak: u64,
    /// Calls the target refused as throttled.
    throttled: u64,
}

async fn boundary(sdk: &SdkConfig, drains: u32, latency: Duration, cap: Option<u64>) -> Result<Measured> {
    let prefix = format!("deliv{}-{drains}-{:x}", std::process::id(), fastrand::u32(..));
    let admin = crate::scale::db(sdk, Duration::ZERO);
    let (control, table) = (format!("{prefix}-control"), format!("{prefix}-queue"));
    schema::create_table(admin.client(), &control_table(), &control).await.context("control table")?;
    schema::create_table(admin.client(), &queue_table(), &table).await.context("queue table")?;
    let clock: SharedClock = Arc::new(SystemClock);
    let qcfg = QueueConfig { shards: 1, visibility: TIMEOUT + Duration::from_secs(1), ..Default::default() };
    let setup = Queue::new(admin, &table, qcfg.clone(), clock.clone());
    for i in 0..ITEMS {
        let mut b = Batch::new(Default::default());
        let tenants = (0..UNITS_PER_ITEM).map(|u| format!("t{i:03}-{u:04}"));
        b.add(vec![serde_json::Map::from_iter([("window".to_string(), Value::from("2026-11-29"))])], tenants);
        let item =
            NewItem { id: format!("b{i:03}"), kind: "timed".into(), payload: b.to_payload(), tenant: None, due_ms: 0 };
        setup.enqueue(&item).await?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let spent_us = Arc::new(AtomicU64::new(0));
    let last: Arc<Mutex<Option<Instant>>> = Default::default();
    let throttled = Arc::new(AtomicU64::new(0));
    let timed = Timed {
        done: done.clone(),
        spent_us: spent_us.clone(),
        last: last.clone(),
        cap,
        running: Default::default(),
        throttled: throttled.clone(),
    };
    let handlers = queue_worker::Registry::new().with("timed", Arc::new(timed));
    let cfg = queue_worker::WorkerConfig {
        concurrency: CONCURRENCY as usize,
        drains,
        handler_timeout: HANDLER_TIMEOUT,
        margin: MARGIN,
        ..Default::default()
    };
    let reports: Arc<Mutex<Vec<queue_worker::Report>>> = Default::default();
    let deps: Arc<Mutex<Option<Arc<queue_worker::Deps>>>> = Default::default();
    let engine = {
        let (deps, reports) = (deps.clone(), reports.clone());
        lambda_standin::invoke::Engine::new(
            drains as usize,
            TIMEOUT,
            Arc::new(move |payload: Vec<u8>, deadline: i64| {
                let deps = deps.lock().unwrap().clone().expect("the worker");
                let reports = reports.clone();
                Box::pin(async move {
                    let Ok(event) = serde_json::from_slice::<Value>(&payload) else { return };
                    match queue_worker::handle(&deps, event, deadline).await {
                        Ok(r) => reports.lock().unwrap().push(r),
                        Err(e) => eprintln!("a drain failed: {e}"),
                    }
                }) as BoxFuture<'static, ()>
            }),
        )
    };
    let api = lambda_standin::invoke::InvokeApi::start(engine.handler()).await?;
    let lambda = aws_sdk_lambda::Client::from_conf(
        aws_sdk_lambda::config::Builder::from(sdk).endpoint_url(api.endpoint()).build(),
    );
    let db = crate::scale::db(sdk, latency);
    let fleet = queue_worker::Fleet::new(
        tickwork::lease::LeaseStore::new(db.clone(), &control, clock.clone()),
        Some(Arc::new(queue_worker::LambdaInvoker::new(lambda, "bench-queue-worker"))),
        drains,
        qcfg.visibility,
        Duration::from_secs(1),
    )?;
    let mut worker = queue_worker::Deps::new(Queue::new(db, &table, qcfg, clock.clone()), handlers, cfg, clock);
    worker.fleet = Some(fleet);
    *deps.lock().unwrap() = Some(Arc::new(worker));
    let arn = format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}/stream/2026-11-29T00:00:00.000");
    let signal =
        serde_json::json!({"Records": [{"eventSource": "aws:dynamodb", "eventName": "INSERT", "eventSourceARN": arn}]});
    let start = Instant::now();
    engine.invoke(signal.to_string().into_bytes()).await;
    ensure!(engine.idle(Duration::from_secs(600)).await, "the drains did not end");
    let units = ITEMS * UNITS_PER_ITEM;
    ensure!(done.load(Ordering::SeqCst) == units, "{} of {units} units ran", done.load(Ordering::SeqCst));
    let took = last.lock().unwrap().context("no unit ran")?.duration_since(start);
    let reports = reports.lock().unwrap();
    let sum = |f: fn(&queue_worker::Report) -> u64| reports.iter().map(f).sum::<u64>();
    Ok(Measured {
        took,
        handler_ms: spent_us.load(Ordering::SeqCst) as f64 / 1000.0 / units as f64,
        invocations: engine.counts.started.load(Ordering::SeqCst),
        claims: sum(|r| r.claimed),
        refunds: sum(|r| r.refunded),
        taken: sum(|r| r.taken),
        peak: engine.counts.peak.load(Ordering::SeqCst),
        throttled: throttled.load(Ordering::SeqCst),
    })
}

/// The model's boundary-to-done for this section's boundary: `drains` of `concurrency` calls, a
/// handler of `handler_ms` a unit as measured, every request the latency plus the local server's
/// own time.
fn model(drains: u32, concurrency: u32, handler_ms: f64, service_ms: f64) -> tickctl::delivery::DeliveryTime {
    predict(&DeliveryInput {
        units: ITEMS * UNITS_PER_ITEM,
        units_per_item: UNITS_PER_ITEM,
        arrive_ms: 0.0,
        signal_ms: 0.0,
        handler_ms,
        units_per_call: 1,
        request_ms: LATENCY_MS as f64 + service_ms,
        invoke_ms: 0.0,
        concurrency,
        drains,
        window_ms: (TIMEOUT - HANDLER_TIMEOUT - MARGIN).as_millis() as f64,
        poll_keys: queue_worker::WorkerConfig { drains, ..Default::default() }.poll_keys() as u32,
        target_concurrency: None,
        handler_wcu: None,
    })
}

pub async fn run(sdk: &SdkConfig) -> Result<()> {
    let units = ITEMS * UNITS_PER_ITEM;
    println!(
        "== Boundary-to-done: {units} units in {ITEMS} items, a handler of {HANDLER_MS} ms a unit, {CONCURRENCY} at once a drain, a {} s function (units stop {} ms before its end), every request waits {LATENCY_MS} ms first; the model beside ==",
        TIMEOUT.as_secs(),
        (HANDLER_TIMEOUT + MARGIN).as_millis()
    );
    let service_ms = crate::scale::service_ms(sdk).await?;
    println!("local server: {service_ms:.1} ms a request (added to the latency in the model)");
    println!(
        "{:>7} {:>11} {:>9} {:>7} {:>9} {:>10} {:>12} {:>7} {:>8} {:>6} {:>5}",
        "drains",
        "measured s",
        "model s",
        "ratio",
        "speed-up",
        "handler ms",
        "invocations",
        "claims",
        "refunds",
        "races",
        "peak"
    );
    let mut first = None;
    for d in DRAINS {
        let m = boundary(sdk, d, Duration::from_millis(LATENCY_MS), None).await?;
        let model = model(d, CONCURRENCY, m.handler_ms, service_ms);
        let measured = m.took.as_secs_f64();
        let base = *first.get_or_insert(measured);
        println!(
            "{d:>7} {measured:>11.2} {:>9.2} {:>7.3} {:>8.1}x {:>10.2} {:>6} ({:>3}) {:>7} {:>8} {:>6} {:>5}",
            model.done_ms / 1000.0,
            measured / (model.done_ms / 1000.0),
            base / measured,
            m.handler_ms,
            m.invocations,
            model.invocations,
            m.claims,
            m.refunds,
            m.taken,
            m.peak
        );
    }
    println!("(invocations: measured, and the model's in brackets; races: claims lost to another drain)\n");
    throttling(sdk, service_ms).await
}

/// The same boundary delivered to a target of [`TARGET_CAP`] calls at once, below the fleet's
/// drains × 16: the drains halve their calls at each throttle and grow back as calls pass
/// (`queue_worker::throttle::CallLimit`), and no unit spends an attempt on a throttle. The model
/// is given the target's concurrency as the fleet's (a fleet that never exceeded it): the ratio
/// is what the throttles and their backoffs cost beside a fleet sized to the target.
async fn throttling(sdk: &SdkConfig, service_ms: f64) -> Result<()> {
    println!(
        "== Boundary-to-done with a throttling target: at most {TARGET_CAP} calls at once (a reserved concurrency), drains of {CONCURRENCY} calls above it; the model given {TARGET_CAP} calls at once =="
    );
    println!(
        "{:>7} {:>11} {:>9} {:>7} {:>10} {:>10} {:>12}",
        "drains", "measured s", "model s", "ratio", "handler ms", "throttled", "invocations"
    );
    for d in THROTTLED_DRAINS {
        let m = boundary(sdk, d, Duration::from_millis(LATENCY_MS), Some(TARGET_CAP)).await?;
        let model = model(d, (TARGET_CAP as u32 / d).max(1), m.handler_ms, service_ms);
        let measured = m.took.as_secs_f64();
        println!(
            "{d:>7} {measured:>11.2} {:>9.2} {:>7.3} {:>10.2} {:>10} {:>6} ({:>3})",
            model.done_ms / 1000.0,
            measured / (model.done_ms / 1000.0),
            m.handler_ms,
            m.throttled,
            m.invocations,
            model.invocations
        );
    }
    println!("(throttled: calls the target refused; every unit ran once and none was dead-lettered)\n");
    Ok(())
}
