//! A drain that fails (its queue client's requests keep failing through the SDK's retries) hands
//! on as a bounded chain after a backoff, instead of leaving its backlog to the hourly safety
//! poll (`queue_worker::handon`). As in `delivery.rs`, the worker is invoked through the Lambda
//! Invoke API stand-in by the real SDK client and runs under real deadlines; the faults are
//! injected at the SDK boundary of the worker's queue client, its fleet's lease client clean.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::Value;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::Local;

/// Each item's handler calls, when each began.
#[derive(Default)]
pub(crate) struct Counting(pub(crate) Mutex<BTreeMap<String, Vec<Instant>>>);

impl queue_worker::Handler for Counting {
    fn handle<'a>(&'a self, job: &'a tickwork::queue::Job) -> BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        Box::pin(async move {
            self.0.lock().unwrap().entry(job.id.clone()).or_default().push(Instant::now());
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(())
        })
    }
}

/// One invocation as the engine ran it: its event, when it started, and how it ended.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) event: Value,
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
    pub(crate) result: Result<queue_worker::Report, String>,
}

/// The worker's engine, what it ran, and the stream signal that starts the first drain.
pub(crate) struct Rig {
    pub(crate) engine: lambda_standin::invoke::Engine,
    pub(crate) runs: Arc<Mutex<Vec<Run>>>,
    pub(crate) handler: Arc<Counting>,
    pub(crate) signal: Value,
    pub(crate) _api: lambda_standin::invoke::InvokeApi,
}

/// A worker whose queue client goes through `faults`, its fleet of one slot started through
/// the Invoke API stand-in, each invocation given `timeout`; `items` ready in one shard.
pub(crate) async fn rig(faults: &Faults, items: usize, timeout: Duration) -> Rig {
    let local = Local::new().await;
    let control = local.control().await;
    let table = local.table(&queue_table()).await;
    let clock: SharedClock = Arc::new(SystemClock);
    let qcfg = QueueConfig { shards: 1, visibility: timeout + Duration::from_secs(1), ..Default::default() };
    let setup = Queue::new(local.fresh_db_with_gsis(&table, &queue_table()), &table, qcfg.clone(), clock.clone());
    for i in 0..items {
        let item =
            NewItem { id: format!("item#{i:02}"), kind: "count".into(), payload: "{}".into(), tenant: None, due_ms: 0 };
        setup.enqueue(&item).await.unwrap();
    }
    let handler = Arc::new(Counting::default());
    let handlers = queue_worker::Registry::new().with("count", handler.clone());
    let cfg = queue_worker::WorkerConfig {
        concurrency: 2,
        // One drain at a time: which poll fails is then the drain's own second one.
        drains: 1,
        batch: 4,
        handler_timeout: Duration::from_millis(1000),
        // What a drain keeps after its last unit for its settles and its hand-on (a release, an
        // acquire, an Invoke). The stand-in ends an invocation at its deadline, as Lambda does,
        // and one ended inside its hand-on starts no successor: its backlog waits for the safety
        // poll. Under `make test`'s load those requests passed 300 ms (the duplicate-events test
        // went idle with 246 of 300 items run, once); the template's margin is 5 s.
        margin: Duration::from_millis(if timeout < Duration::from_secs(5) { 1000 } else { 300 }),
        ..Default::default()
    };
    let runs: Arc<Mutex<Vec<Run>>> = Default::default();
    let deps: Arc<Mutex<Option<Arc<queue_worker::Deps>>>> = Default::default();
    let engine = {
        let (deps, runs) = (deps.clone(), runs.clone());
        lambda_standin::invoke::Engine::new(
            2,
            timeout,
            Arc::new(move |payload: Vec<u8>, deadline: i64| {
                let deps = deps.lock().unwrap().clone().expect("the worker");
                let runs = runs.clone();
                Box::pin(async move {
                    let event: Value = serde_json::from_slice(&payload).expect("an event");
                    let started = Instant::now();
                    let result = queue_worker::handle(&deps, event.clone(), deadline).await.map_err(|e| e.to_string());
                    runs.lock().unwrap().push(Run { event, started, ended: Instant::now(), result });
                }) as BoxFuture<'static, ()>
            }),
        )
    };
    let api = lambda_standin::invoke::InvokeApi::start(engine.handler()).await.unwrap();
    let invoker = queue_worker::LambdaInvoker::new(local.lambda_with(&api.endpoint(), None), "stack-queue-worker");
    let fleet = queue_worker::Fleet::new(
        tickwork::lease::LeaseStore::new(local.fresh_db(), &control, clock.clone()),
        Some(Arc::new(invoker)),
        cfg.drains,
        qcfg.visibility,
        Duration::from_secs(1),
    )
    .unwrap();
    let one_try = tickwork::retry::RetryPolicy { max_attempts: 1, ..tickwork_tests::quick_retry() };
    let db = local.db_with(Some(faults), None, &one_try);
    db.register_gsis(&table, queue_table().gsi_shapes());
    let mut worker = queue_worker::Deps::new(Queue::new(db, &table, qcfg, clock.clone()), handlers, cfg, clock);
    worker.fleet = Some(fleet);
    *deps.lock().unwrap() = Some(Arc::new(worker));
    let arn = format!("arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2026-11-29T00:00:00.000");
    let signal =
        serde_json::json!({"Records": [{"eventSource": "aws:dynamodb", "eventName": "INSERT", "eventSourceARN": arn}]});
    Rig { engine, runs, handler, signal, _api: api }
}

fn failures_of(event: &Value) -> u64 {
    event[queue_worker::fleet::DRAIN_EVENT]["failures"].as_u64().unwrap_or(0)
}

/// The second poll fails (a 500 with no retry left): the drain stops with 16 of 20 items left
/// (its first page was 4 keys) and fails its invocation; its successor starts after the first backoff (5 s), and the
/// backlog finishes with every item run once. With the failed drain starting nothing (as before),
/// the 16 items waited for the hourly safety poll: shown failing so (4 of 20 ran).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_drain_hands_on_after_a_backoff_and_the_backlog_finishes() {
    let faults = Faults::new();
    faults.plan(Planned { op: Some("Query"), nth: 2, fault: Fault::ServerError });
    let Rig { engine, runs, handler, signal, _api } = rig(&faults, 20, Duration::from_secs(14)).await;
    engine.invoke(signal.to_string().into_bytes()).await;
    assert!(engine.idle(Duration::from_secs(90)).await, "the drains ended");
    let runs = runs.lock().unwrap().clone();
    let counts = handler.0.lock().unwrap().clone();
    let failed: Vec<&Run> = runs.iter().filter(|r| r.result.is_err()).collect();
    assert_eq!(failed.len(), 1, "the one faulted poll fails one invocation: {runs:#?}");
    assert!(failed[0].result.as_ref().unwrap_err().to_lowercase().contains("query"), "{:?}", failed[0].result);
    assert_eq!(counts.len(), 20, "every item ran: {counts:?}");
    assert!(counts.values().all(|c| c.len() == 1), "each once: {counts:?}");
    let next = runs.iter().find(|r| failures_of(&r.event) == 1).expect("a successor after the failure");
    assert!(next.result.is_ok(), "{:?}", next.result);
    let after: Vec<Instant> = counts.values().map(|c| c[0]).filter(|at| *at > failed[0].ended).collect();
    assert!(!after.is_empty() && after.len() < 20, "the failed drain ran some and left the rest: {}", after.len());
    let waited = after.iter().min().unwrap().duration_since(failed[0].ended);
    // The failed drain hands on just before its end is recorded (its invocation returns after the
    // hand-on), so the wait measured from its end is the backoff less that gap, which grows under
    // load (4.89 s once in `make test`): at least 4 s shows the backoff waited, at most 7 s that
    // it was not the hourly safety poll.
    assert!(
        (Duration::from_millis(4_000)..Duration::from_millis(7_000)).contains(&waited),
        "the successor runs them after the backoff of 5 s, not the safety poll: {waited:?}"
    );
    assert!(runs.iter().all(|r| failures_of(&r.event) <= 1), "the chain reset after a drain that succeeded");
    // Invoked by the failed drain as it ended (its invocation returns after the hand-on), and
    // waiting out the backoff itself: not a drain the safety poll or a signal started later.
    assert!(
        next.started > failed[0].started && next.started < failed[0].ended + Duration::from_secs(1),
        "started by the failed drain as it ended"
    );
}

/// A fault that persists (every Query fails): the chain is the failed drain and three links
/// (`MAX_FAILED_LINKS`), each failing, and then nothing more starts: the safety poll and the
/// `Errors` alarm take over. Nothing is run, nothing is lost: the items are still ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_that_persists_ends_the_chain_after_three_links() {
    let faults = Faults::new();
    for nth in 1..=40 {
        faults.plan(Planned { op: Some("Query"), nth, fault: Fault::ServerError });
    }
    // A budget short enough that the later backoffs (20 s, 60 s) are not waited for: the chain's
    // length, not its pace, is what this shows.
    let Rig { engine, runs, handler, signal, _api } = rig(&faults, 6, Duration::from_secs(12)).await;
    engine.invoke(signal.to_string().into_bytes()).await;
    assert!(engine.idle(Duration::from_secs(90)).await, "the drains ended");
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), 1 + queue_worker::handon::MAX_FAILED_LINKS as usize, "{runs:#?}");
    assert!(runs.iter().all(|r| r.result.is_err()), "{runs:#?}");
    let mut chain: Vec<u64> = runs.iter().map(|r| failures_of(&r.event)).collect();
    chain.sort();
    assert_eq!(chain, [0, 1, 2, 3]);
    assert!(handler.0.lock().unwrap().is_empty());
}

/// Fails the first settle that would finish an item (`SET #state = :done`), before it is sent:
/// the finish is refused as if DynamoDB had failed it through every SDK retry.
#[derive(Debug, Clone, Default)]
struct FirstFinishFails(Arc<std::sync::atomic::AtomicBool>);

impl aws_smithy_runtime_api::client::interceptors::Intercept for FirstFinishFails {
    fn name(&self) -> &'static str {
        "FirstFinishFails"
    }

    fn read_before_execution(
        &self,
        ctx: &aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef<'_>,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let finish = ctx
            .input()
            .downcast_ref::<aws_sdk_dynamodb::operation::update_item::UpdateItemInput>()
            .and_then(|u| u.update_expression())
            .is_some_and(|e| e.starts_with("SET #state = :done"));
        if finish && !self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err("injected: the finish failed through the SDK's retries".into());
        }
        Ok(())
    }
}

/// Three batch items of ten units each; the first finish fails. The drain tries that settle again
/// (`queue_worker::drain::SETTLE_RETRY_MS`) and every item ends done, each unit run once. Before,
/// the drain stopped with that item still claimed, and the next drain after its visibility timeout
/// read it as a death: split into parts that each ran alone, its ten units run again. The test
/// runs that next drain too, so it fails that way when the settle is not tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_that_fails_is_tried_again_and_its_units_do_not_run_again() {
    let local = Local::new().await;
    let table = local.table(&queue_table()).await;
    let clock: SharedClock = Arc::new(SystemClock);
    let qcfg = QueueConfig { shards: 1, visibility: Duration::from_secs(3), ..Default::default() };
    let setup = Queue::new(local.fresh_db_with_gsis(&table, &queue_table()), &table, qcfg.clone(), clock.clone());
    for i in 0..3 {
        let mut b = tickwork::batch::Batch::new(Default::default());
        let tenants: Vec<String> = (0..10).map(|t| format!("t{i}-{t}")).collect();
        b.add(vec![serde_json::Map::from_iter([("window".to_string(), Value::from("2026-11-29"))])], tenants);
        let item =
            NewItem { id: format!("item#{i}"), kind: "count".into(), payload: b.to_payload(), tenant: None, due_ms: 0 };
        setup.enqueue(&item).await.unwrap();
    }
    let fails = FirstFinishFails::default();
    let db = local.db_intercepted(fails.clone(), &table, &queue_table());
    let q = Queue::new(db, &table, qcfg.clone(), clock.clone());
    let handler = Arc::new(Counting::default());
    let handlers = queue_worker::Registry::new().with("count", handler.clone());
    let cfg = queue_worker::WorkerConfig::default();
    let budget = tickwork::budget::Deadline::new(clock.clone(), clock.now_ms() + 30_000, 0);
    let first = queue_worker::drain(&q, &handlers, "w1", &budget, &cfg).await;
    assert!(fails.0.load(std::sync::atomic::Ordering::SeqCst), "a finish was failed");
    // The next drain, after the visibility timeout: an item left claimed would come back now.
    tokio::time::sleep(qcfg.visibility + Duration::from_millis(500)).await;
    let budget = tickwork::budget::Deadline::new(clock.clone(), clock.now_ms() + 30_000, 0);
    let second = queue_worker::drain(&q, &handlers, "w2", &budget, &cfg).await.unwrap();
    let counts = handler.0.lock().unwrap().clone();
    assert_eq!(counts.len(), 30, "every unit ran: {counts:?}");
    assert!(counts.values().all(|c| c.len() == 1), "each once: {first:?} then {second:?}");
    let first = first.expect("the drain that met the failed finish succeeded");
    assert_eq!((first.finished, first.lost, first.split, second.claimed), (3, 0, 0, 0), "{first:?} {second:?}");
}
