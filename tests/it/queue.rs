use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use queue_worker::{drain, Handler, HandlerError, Registry, WorkerConfig};
use tickwork::budget::{Deadline, Unlimited};
use tickwork::clock::{Clock, ManualClock, SharedClock, SystemClock};
use tickwork::queue::{queue_table, Claim, Job, NewItem, Queue, QueueConfig, Settle};
use tickwork_tests::{count_where, Local};

/// Counts runs per job id and can fail or slow down by kind.
#[derive(Default)]
struct Recorder {
    runs: Mutex<HashMap<String, Vec<String>>>,
    clock: Option<ManualClock>,
    advance_ms: i64,
}

impl Handler for Recorder {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            self.runs.lock().unwrap().entry(job.id.clone()).or_default().push(job.owner.clone());
            if let Some(c) = &self.clock {
                c.advance(self.advance_ms);
            }
            match job.kind.as_str() {
                "poison" => Err(HandlerError::Retry("always fails".into())),
                _ => Ok(()),
            }
        })
    }
}

fn items(n: usize, kind: &str, due_ms: i64) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            id: format!("{kind}#{i:05}"),
            kind: kind.into(),
            payload: format!(r#"{{"n":{i}}}"#),
            tenant: Some(format!("t{i}")),
            due_ms,
        })
        .collect()
}

async fn queue_with(local: &Local, cfg: QueueConfig, clock: SharedClock) -> Queue {
    let table = local.table(&queue_table()).await;
    Queue::new(local.fresh_db_with_gsis(&table, &queue_table()), table, cfg, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_workers_drain_2000_items_each_finished_once() {
    let local = Local::new().await;
    let clock: SharedClock = Arc::new(SystemClock);
    let q = queue_with(&local, QueueConfig::default(), clock.clone()).await;
    let c = q.enqueue_many(&items(2000, "work", 0), 32).await.unwrap();
    assert_eq!((c.enqueued, c.existed), (2000, 0));
    // Enqueuing the same ids again changes nothing.
    let again = q.enqueue_many(&items(50, "work", 0), 8).await.unwrap();
    assert_eq!((again.enqueued, again.existed), (0, 50));

    let rec = Arc::new(Recorder::default());
    let reg = Registry::new().with("work", rec.clone());
    let mut tasks = Vec::new();
    for w in 0..4 {
        let q = Queue::new(
            local.fresh_db_with_gsis(q.table(), &queue_table()),
            q.table(),
            QueueConfig::default(),
            clock.clone(),
        );
        let reg = reg.clone();
        tasks.push(tokio::spawn(async move {
            drain(&q, &reg, &format!("worker-{w}"), &Unlimited, &WorkerConfig::default()).await.unwrap()
        }));
    }
    let mut finished = 0;
    let mut taken = 0;
    for t in tasks {
        let r = t.await.unwrap();
        finished += r.finished;
        taken += r.taken;
        assert_eq!(r.lost, 0);
    }
    assert_eq!(finished, 2000, "every item finished exactly once across workers");
    {
        let runs = rec.runs.lock().unwrap();
        assert_eq!(runs.len(), 2000);
        assert!(runs.values().all(|owners| owners.len() == 1), "no item ran under two owners");
    }
    assert_eq!(count_where(q.db(), q.table(), "state", "done").await, 2000);
    for k in 0..q.config().shards {
        assert!(q.poll(k, 10).await.unwrap().is_empty(), "shard {k} drained");
    }
    eprintln!("4 workers: {finished} finished, {taken} claims lost to another worker");
}

#[tokio::test]
async fn a_dead_workers_item_comes_back_after_the_visibility_timeout_not_before() {
    let local = Local::new().await;
    let cfg = QueueConfig { visibility: Duration::from_secs(30), ..Default::default() };
    let q = queue_with(&local, cfg, local.clock()).await;
    let t0 = 1_700_000_000_000;
    local.clock.set(t0);
    q.enqueue(&items(1, "work", t0)[0]).await.unwrap();
    let mut ready = Vec::new();
    for k in 0..q.config().shards {
        ready.extend(q.poll(k, 10).await.unwrap());
    }
    let cand = ready.pop().expect("one ready item");
    let Claim::Claimed(dead) = q.claim(&cand.id, "dead-worker").await.unwrap() else { panic!("claim") };
    // The dead worker never finishes. Just before its claim expires nobody can take the item.
    let rec = Arc::new(Recorder::default());
    let reg = Registry::new().with("work", rec.clone());
    local.clock.set(t0 + 29_999);
    let r = drain(&q, &reg, "rescuer", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!((r.candidates, r.claimed), (0, 0), "not before the visibility timeout");
    assert_eq!(q.claim(&cand.id, "rescuer").await.unwrap(), Claim::Taken);
    local.clock.set(t0 + 30_000);
    let r = drain(&q, &reg, "rescuer", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!((r.claimed, r.finished), (1, 1), "claimed again once the claim expired");
    assert_eq!(rec.runs.lock().unwrap()[&cand.id], vec!["rescuer".to_string()]);
    // The dead worker, waking up, owns nothing.
    assert_eq!(q.finish(&dead).await.unwrap(), Settle::NotOwner);
}

#[tokio::test]
async fn a_poison_item_backs_off_then_is_dead_lettered_and_others_proceed() {
    let local = Local::new().await;
    let cfg = QueueConfig {
        max_attempts: 3,
        backoff_base: Duration::from_secs(1),
        backoff_max: Duration::from_secs(60),
        ..Default::default()
    };
    let q = queue_with(&local, cfg, local.clock()).await;
    let t0 = 1_700_000_000_000;
    local.clock.set(t0);
    q.enqueue_many(&items(5, "work", t0), 4).await.unwrap();
    q.enqueue(&items(1, "poison", t0)[0]).await.unwrap();
    let rec = Arc::new(Recorder::default());
    let reg = Registry::new().with("work", rec.clone()).with("poison", rec.clone());
    let mut delays = Vec::new();
    let mut dead = 0;
    for _ in 0..10 {
        let r = drain(&q, &reg, "w", &Unlimited, &WorkerConfig::default()).await.unwrap();
        dead += r.dead_lettered;
        if dead > 0 {
            break;
        }
        let item = q.get("poison#00000").await.unwrap().unwrap();
        let vis: i64 = item["visible_at"].as_n().unwrap().parse().unwrap();
        delays.push(vis - local.clock.now_ms());
        local.clock.set(vis); // jump to when it is visible again
    }
    assert_eq!(delays, vec![1_000, 2_000], "growing delays between the 3 attempts");
    assert_eq!(dead, 1);
    assert_eq!(rec.runs.lock().unwrap()["poison#00000"].len(), 3, "attempted the configured number of times");
    let letters = q.dead_letters().await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].id.as_str(), letters[0].attempts), ("poison#00000", 3));
    assert!(letters[0].last_error.contains("always fails"));
    assert_eq!(count_where(q.db(), q.table(), "state", "done").await, 5, "the other items were processed");
    // Out of the ready index: later drains do not see it.
    local.clock.advance(3_600_000);
    let r = drain(&q, &reg, "w", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!(r.candidates, 0);
    // An operator can retry it (back in the queue with attempts reset) or purge it.
    assert!(q.retry_dead("poison#00000").await.unwrap());
    assert!(q.dead_letters().await.unwrap().is_empty());
}

#[tokio::test]
async fn unknown_kind_and_bad_payload_are_dead_lettered_without_affecting_others() {
    let local = Local::new().await;
    let q = queue_with(&local, QueueConfig::default(), local.clock()).await;
    let t0 = local.clock.now_ms();
    q.enqueue_many(&items(3, "work", t0), 4).await.unwrap();
    q.enqueue(&items(1, "mystery", t0)[0]).await.unwrap();
    let summaries = local.table(&queue_worker::summary::summaries_table()).await;
    let mut reg = queue_worker::summary::registry(local.db.clone(), &summaries, local.clock());
    let rec = Arc::new(Recorder::default());
    reg = reg.with("work", rec);
    // A fan-out item whose payload names another tenant: refused, never retried.
    q.enqueue(&NewItem {
        id: "utc-daily#2026-11-29#t1".into(),
        kind: "utc-daily".into(),
        payload: r#"{"tenant":"t2","window":"2026-11-29"}"#.into(),
        tenant: Some("t1".into()),
        due_ms: t0,
    })
    .await
    .unwrap();
    let r = drain(&q, &reg, "w", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!((r.finished, r.dead_lettered, r.retried), (3, 2, 0));
    let letters = q.dead_letters().await.unwrap();
    let by_id: HashMap<_, _> = letters.iter().map(|l| (l.id.as_str(), l.last_error.as_str())).collect();
    assert!(by_id["mystery#00000"].contains("no handler for kind `mystery`"));
    assert!(by_id["utc-daily#2026-11-29#t1"].contains("another tenant"));
    assert_eq!(count_where(&local.db, &summaries, "pk", "t2").await, 0, "no row written for the wrong tenant");
}

#[tokio::test]
async fn an_empty_poll_is_one_query_per_shard_and_bills_no_items() {
    let local = Local::new().await;
    let q = queue_with(&local, QueueConfig::default(), local.clock()).await;
    q.db().meter().reset();
    let r = drain(&q, &Registry::new(), "w", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!(r.polls, 8);
    let m = q.db().meter();
    let query = m.op("Query");
    assert_eq!((query.requests, query.items_read), (8, 0));
    assert_eq!(m.read_write_requests(), (8, 0), "no writes");
    assert_eq!(query.rcu, 8.0 * 0.5, "DynamoDB's minimum per Query, nothing more");
}

#[tokio::test]
async fn polling_never_reads_a_claimed_unexpired_item() {
    let local = Local::new().await;
    let cfg = QueueConfig { shards: 1, ..Default::default() };
    let q = queue_with(&local, cfg, local.clock()).await;
    let t0 = local.clock.now_ms();
    q.enqueue_many(&items(10, "work", t0), 4).await.unwrap();
    for c in q.poll(0, 4).await.unwrap() {
        assert!(matches!(q.claim(&c.id, "other").await.unwrap(), Claim::Claimed(_)));
    }
    q.db().meter().reset();
    let ready = q.poll(0, 100).await.unwrap();
    assert_eq!(ready.len(), 6);
    assert_eq!(q.db().meter().op("Query").items_read, 6, "the 4 claimed items were not read (key condition)");
}

#[tokio::test]
async fn a_worker_near_its_deadline_stops_claiming_and_finishes_what_it_holds() {
    let local = Local::new().await;
    let cfg = QueueConfig { shards: 1, ..Default::default() };
    let q = queue_with(&local, cfg, local.clock()).await;
    let t0 = local.clock.now_ms();
    q.enqueue_many(&items(30, "work", t0), 4).await.unwrap();
    // Each job takes 40 ms of (simulated) time; the deadline leaves room for about one batch.
    let rec = Arc::new(Recorder { clock: Some(local.clock.clone()), advance_ms: 40, ..Default::default() });
    let reg = Registry::new().with("work", rec.clone());
    let budget = Deadline::new(local.clock(), t0 + 1_000, 600);
    let cfg = WorkerConfig { batch: 10, ..Default::default() };
    let r = drain(&q, &reg, "w", &budget, &cfg).await.unwrap();
    assert!(r.stopped_by_deadline && r.work_left, "{r:?}");
    // Claimed only as a handler slot freed (the next one as the last units of the held ones
    // start): about the 10 jobs the budget had room for, plus the ones running when it ran out;
    // every one it started finished, and one claimed as the budget ran out went back unstarted.
    assert_eq!(r.claims_ahead, 0, "no item claimed to sit: {r:?}");
    assert!((10..=10 + cfg.concurrency as u64).contains(&r.finished), "{r:?}");
    assert!(r.refunded <= 1, "{r:?}");
    assert_eq!(r.claimed, r.finished + r.refunded, "what it held was finished or given back: {r:?}");
    let claimed = r.finished as usize;
    assert_eq!(count_where(q.db(), q.table(), "state", "done").await, claimed);
    assert_eq!(count_where(q.db(), q.table(), "state", "claimed").await, 0, "nothing left claimed");
    assert_eq!(count_where(q.db(), q.table(), "state", "pending").await, 30 - claimed, "the rest untouched");
}

/// Attempts are per unit: a part a settle leaves behind carries what its units spent. A batch of
/// three tenants' units, claimed once: x's and y's failed (x stays in the item, y leaves as a part
/// of its own), z's did not run. y's part has spent the claim as x has, with its error and its
/// tenant in the trouble index; z's part has spent nothing and is no trouble. (y's part started
/// from no attempt before: a unit split off a batch got the limit again, its backoff starting
/// over.)
#[tokio::test]
async fn the_parts_a_settle_leaves_carry_the_attempts_their_units_spent() {
    use tickwork::batch::Batch;
    use tickwork::queue::{derived_id, BatchSettle, REST, TROUBLE};
    let local = Local::new().await;
    let q = queue_with(&local, QueueConfig { max_attempts: 3, ..Default::default() }, local.clock()).await;
    let part = |t: &str| {
        let mut b = Batch::default();
        b.add(vec![serde_json::json!({"day": "2026-12-01"}).as_object().unwrap().clone()], [t.to_string()]);
        b
    };
    let mut whole = part("x");
    for t in ["y", "z"] {
        whole.add(vec![serde_json::json!({"day": "2026-12-01"}).as_object().unwrap().clone()], [t.to_string()]);
    }
    let now = local.clock.now_ms();
    let item = NewItem { id: "b1".into(), kind: "k".into(), payload: whole.to_payload(), tenant: None, due_ms: now };
    q.enqueue(&item).await.unwrap();
    let Claim::Claimed(job) = q.claim("b1", "w").await.unwrap() else { panic!("claim") };
    assert_eq!(job.attempts, 1);
    let plan = BatchSettle {
        remaining: vec![part("x").to_payload(), part("y").to_payload()],
        error: Some("1 of 3 units failed: boom".into()),
        fresh: vec![part("z").to_payload()],
        ..Default::default()
    };
    assert!(matches!(q.settle_batch(&job, &plan).await.unwrap(), Settle::Retrying { .. }));
    let read = |id: String| {
        let q = q.clone();
        async move { q.get(&id).await.unwrap().unwrap_or_else(|| panic!("{id}")) }
    };
    let n = |i: &tickwork::item::Item, a: &str| i.get(a).and_then(|v| v.as_n().ok()).map(|s| s.to_string());
    let s = |i: &tickwork::item::Item, a: &str| i.get(a).and_then(|v| v.as_s().ok()).cloned();
    let x = read("b1".into()).await;
    let y = read(derived_id("b1", REST, 1, "w", 0)).await;
    let z = read(derived_id("b1", REST, 1, "w", 1)).await;
    assert_eq!((n(&x, "attempts"), s(&x, TROUBLE)), (Some("1".into()), Some("x".into())));
    assert_eq!((n(&y, "attempts"), s(&y, TROUBLE)), (Some("1".into()), Some("y".into())), "y spent the claim too");
    assert_eq!(s(&y, "last_error").as_deref(), Some("1 of 3 units failed: boom"));
    assert_eq!((n(&z, "attempts"), s(&z, TROUBLE)), (Some("0".into()), None), "z did not run: nothing spent");
    // y's next claim is its second, as x's is.
    local.clock.advance(3_600_000);
    let Claim::Claimed(y2) = q.claim(&derived_id("b1", REST, 1, "w", 0), "w2").await.unwrap() else { panic!() };
    assert_eq!(y2.attempts, 2);
}
