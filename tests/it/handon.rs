//! The hand-on gaps (issue 33), each closed and shown here against the local server: a drain
//! whose slot cannot be released still starts its successor, and a drain of a sharded queue that
//! its deadline stops after one short page hands on for the shards it never polled.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use futures::future::BoxFuture;
use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::Local;

/// The drain events a fleet asked Lambda to start.
#[derive(Debug, Default)]
struct Started(Mutex<Vec<Value>>);

impl queue_worker::Invoker for Started {
    fn invoke<'a>(&'a self, event: &'a Value) -> BoxFuture<'a, Result<(), String>> {
        self.0.lock().unwrap().push(event.clone());
        Box::pin(async { Ok(()) })
    }
}

impl Started {
    fn events(&self) -> Vec<queue_worker::DrainEvent> {
        self.0.lock().unwrap().iter().map(|e| queue_worker::DrainEvent::parse(e).unwrap().unwrap()).collect()
    }
}

fn fleet(db: tickwork::Db, control: &str, invoker: Arc<Started>) -> queue_worker::Fleet {
    let clock: SharedClock = Arc::new(SystemClock);
    queue_worker::Fleet::new(
        tickwork::lease::LeaseStore::new(db, control, clock),
        Some(invoker),
        1,
        Duration::from_secs(330),
        Duration::from_secs(1),
    )
    .unwrap()
}

/// The control table fails the drain's release of its slot (a 500 with no retry left, as when it
/// fails the drain itself). The drain still starts its successor, in that slot, handed the lease
/// as it is (its owner and token, unexpired); the successor's own end releases it, and the slot
/// is free for the next. Before, the successor's start tried to take the slot the failed release
/// had left taken, was refused, and the work waited for the hourly safety poll.
#[tokio::test]
async fn a_failed_slot_release_still_starts_a_successor() {
    let local = Local::new().await;
    let control = local.control().await;
    let started = Arc::new(Started::default());
    let clean = fleet(local.fresh_db(), &control, started.clone());
    assert!(clean.hand_on_any(&queue_worker::handon::Link::default()).await, "slot 0 taken");
    let first = started.events()[0].clone();

    let faults = Faults::new();
    faults.plan(Planned { op: Some("UpdateItem"), nth: 1, fault: Fault::ServerError });
    let one_try = tickwork::retry::RetryPolicy { max_attempts: 1, ..tickwork_tests::quick_retry() };
    let failing = fleet(local.db_with(Some(&faults), None, &one_try), &control, started.clone());
    let link = queue_worker::handon::Link { retry_at_ms: vec![1_000], ..Default::default() };
    assert!(failing.end_slot_with(&first, Some(&link)).await, "a successor started");
    assert_eq!(faults.calls_of("UpdateItem"), 1, "the release was tried and failed");
    let next = started.events()[1].clone();
    assert_eq!((next.slot, &next.owner, next.token), (first.slot, &first.owner, first.token), "the same lease");
    assert_eq!(next.link, link, "with what the drain handed on");

    // The successor ends with nothing left: its release (of the lease it was handed) succeeds.
    assert!(!clean.end_slot_with(&next, None).await, "nothing more to start");
    assert!(clean.hand_on_any(&queue_worker::handon::Link::default()).await, "the slot is free again");
    assert_eq!(started.events().len(), 3);
}

/// A deadline that comes as the first claim is answered: the budget a drain checks between
/// steps, set by an interceptor on the queue client's first `UpdateItem` answer.
#[derive(Debug, Clone, Default)]
struct DeadlineAtFirstClaim(Arc<AtomicBool>);

impl Budget for DeadlineAtFirstClaim {
    fn exhausted(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Intercept for DeadlineAtFirstClaim {
    fn name(&self) -> &'static str {
        "DeadlineAtFirstClaim"
    }

    fn read_after_execution(
        &self,
        _: &FinalizerInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<Metadata>().is_some_and(|m| m.name() == "UpdateItem") {
            self.0.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// Four queue shards with one item each, every item out of attempts (claimed five times, never
/// settled), so a claim buries it and holds nothing: the drain's first poll finds a page of one
/// (short: that shard is used up) and its deadline comes as that claim is answered, before any
/// other shard is polled. Nothing is held or given back, and three items are ready in shards it
/// never read: it reports work left, so it hands on. Before, "work left" was a full page or keys
/// in hand, and this drain's short page looked like an empty queue.
#[tokio::test]
async fn a_deadline_after_a_short_page_of_one_shard_of_four_hands_on() {
    let local = Local::new().await;
    let table = local.table(&queue_table()).await;
    let clock: SharedClock = Arc::new(SystemClock);
    let qcfg = QueueConfig { shards: 4, ..Default::default() };
    let setup = Queue::new(local.fresh_db(), &table, qcfg.clone(), clock.clone());
    let mut shards = std::collections::BTreeSet::new();
    for i in 0.. {
        let id = format!("item#{i}");
        if shards.insert(tickwork::shard::shard_of(&id, 4)) {
            setup
                .enqueue(&NewItem { id: id.clone(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: 0 })
                .await
                .unwrap();
            local
                .db
                .client()
                .update_item()
                .table_name(&table)
                .key("pk", AttributeValue::S(id))
                .update_expression("SET attempts = :n")
                .expression_attribute_values(":n", AttributeValue::N(qcfg.max_attempts.to_string()))
                .send()
                .await
                .unwrap();
        }
        if shards.len() == 4 {
            break;
        }
    }
    let deadline = DeadlineAtFirstClaim::default();
    let db = local.db_intercepted(deadline.clone(), &table, &queue_table());
    let q = Queue::new(db, &table, qcfg, clock);
    let handlers = queue_worker::Registry::new();
    let r = queue_worker::drain(&q, &handlers, "w", &deadline, &queue_worker::WorkerConfig::default()).await.unwrap();
    assert_eq!((r.polls, r.claimed, r.dead_lettered, r.refunded), (1, 0, 1, 0), "{r:?}");
    assert!(r.stopped_by_deadline && r.work_left, "three shards unread are work left: {r:?}");
}
