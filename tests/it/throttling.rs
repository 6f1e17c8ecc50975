//! Throttling is not failure (issue 33): a function target over its concurrency answers 429
//! (`TooManyRequestsException`, as Lambda does: [`lambda_standin::invoke::Limits`]), and the units
//! it refused go back with their attempt refunded while the drain backs off
//! ([`queue_worker::throttle`]). Before, every 429 was a failed attempt: five in about 150 s and a
//! healthy unit was dead-lettered.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lambda_standin::invoke::InvokeApi;
use queue_worker::{Registry, WorkerConfig};
use tickwork::batch::Batch;
use tickwork::budget::Deadline;
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::config::Env;
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork::schema::get_u64;
use tickwork_tests::{count_where, unique, Local};

use crate::targets::{effects, effects_table, start, Runtime, FUNCTION_ARN};

/// 100 units of four batch items, delivered to a Python function in its runtime that Lambda
/// throttles for the first minute (every Invoke answered 429). Drains of 20 s run one after
/// another, each started with its predecessor's retries, as the hand-on starts them. Every unit's
/// effect is had exactly once, none is dead-lettered, every item ends done on its first attempt
/// (a throttle spent none), and the last effect comes within the longest throttle backoff of the
/// window's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_throttled_for_a_minute_loses_no_unit_and_dead_letters_none() {
    let local = Local::new().await;
    let effects_at = effects_table(&local).await;
    let f = start(Runtime::Python, &local, &effects_at).await;
    let api = InvokeApi::start(f.handler()).await.unwrap();
    let clock: SharedClock = Arc::new(SystemClock);
    let window = Duration::from_secs(60);
    let until = clock.now_ms() + window.as_millis() as i64;
    api.limits.throttled_until_ms.store(until, Ordering::SeqCst);

    let table = local.table(&queue_table()).await;
    let q = Queue::new(
        local.fresh_db_with_gsis(&table, &queue_table()),
        &table,
        QueueConfig { shards: 1, ..Default::default() },
        clock.clone(),
    );
    let mut keys = BTreeSet::new();
    for i in 0..4 {
        let mut b = Batch::new(Default::default());
        let tenants: Vec<String> = (0..25).map(|t| format!("t{i}-{t:02}")).collect();
        b.add(vec![serde_json::Map::from_iter([("window".to_string(), "2026-11-29".into())])], tenants);
        keys.extend(b.units("pulse").into_iter().map(|u| u.key));
        let item =
            NewItem { id: format!("item#{i}"), kind: "pulse".into(), payload: b.to_payload(), tenant: None, due_ms: 0 };
        q.enqueue(&item).await.unwrap();
    }
    let sdk = local.sdk.to_builder().endpoint_url(api.endpoint()).build();
    let env = Env::from_pairs([("TICKWORK_TARGETS", format!("pulse={FUNCTION_ARN}").as_str())]);
    let reg = queue_worker::targets::route(Registry::new(), &env, &sdk, &clock).unwrap();
    let cfg = WorkerConfig { concurrency: 4, ..Default::default() };

    let started = Instant::now();
    let (mut reports, mut retry_at) = (Vec::new(), Vec::new());
    while count_where(q.db(), q.table(), "state", "done").await < 4 {
        assert!(started.elapsed() < Duration::from_secs(300), "the queue did not empty: {reports:#?}");
        let budget = Deadline::new(clock.clone(), clock.now_ms() + 20_000, 500);
        let (r, failed) = queue_worker::drain::drain_until(
            &q,
            &reg,
            &unique("w"),
            &budget,
            &cfg,
            &queue_worker::growing::NoFleet,
            &retry_at,
        )
        .await;
        assert!(failed.is_none(), "{failed:?}");
        retry_at = r.retry_at_ms.clone();
        // A drain with nothing to claim and nothing to wait for: the next signal is a second away.
        if r.claimed == 0 && retry_at.is_empty() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        reports.push(r);
    }
    let refused = api.limits.throttled.load(Ordering::SeqCst);
    let throttled: u64 = reports.iter().map(|r| r.throttled).sum();
    let got = effects(&local, &effects_at).await;
    let last = tickwork_sim::scan_all(&local.db, &effects_at)
        .await
        .unwrap()
        .iter()
        .filter_map(|i| i.get("at").and_then(|v| v.as_n().ok()).and_then(|n| n.parse::<i64>().ok()))
        .max()
        .unwrap();
    println!(
        "{} Invokes refused with 429 in the first {} s, {throttled} units given back, {} drains; the last effect {:.1} s after the window closed",
        refused,
        window.as_secs(),
        reports.len(),
        (last - until) as f64 / 1000.0
    );
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), keys, "every unit's effect, once each");
    assert!(q.dead_letters().await.unwrap().is_empty(), "a throttle dead-letters nothing");
    for item in tickwork_sim::scan_all(q.db(), q.table()).await.unwrap() {
        assert_eq!(get_u64(&item, "attempts"), Some(1), "a throttle spends no attempt: {item:?}");
        assert!(get_u64(&item, "throttles").unwrap_or(0) >= 1, "each item was given back throttled: {item:?}");
    }
    assert!(refused > 0 && throttled > 0, "the target throttled: {reports:#?}");
    let bound = (queue_worker::throttle::MAX_BACKOFF_MS + 30_000) as i64;
    assert!(last - until <= bound, "the last effect came {} ms after the window", last - until);
}

/// Units by tenant: `a` can never succeed, `b` is throttled on its first call, `c` is throttled
/// on its first call and can never succeed on its second.
#[derive(Default)]
struct Scripted(std::sync::Mutex<std::collections::HashMap<String, u32>>);

impl queue_worker::Handler for Scripted {
    fn handle<'a>(
        &'a self,
        job: &'a tickwork::queue::Job,
    ) -> futures::future::BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        use queue_worker::HandlerError;
        let tenant = job.tenant.clone().unwrap_or_default();
        let n = {
            let mut calls = self.0.lock().unwrap();
            let n = calls.entry(job.id.clone()).or_default();
            *n += 1;
            *n
        };
        let throttle = || HandlerError::Throttled { why: "429".into(), after_ms: Some(1_000) };
        let r = match (tenant.as_str(), n) {
            ("a", _) => Err(HandlerError::Permanent("cannot".into())),
            ("b" | "c", 1) => Err(throttle()),
            ("c", _) => Err(HandlerError::Permanent("cannot either".into())),
            _ => Ok(()),
        };
        Box::pin(async move { r })
    }
}

/// One drain claims a batch of three units twice, the same owner at the same attempt (the first
/// claim's attempt refunded by a throttle): the first claim dead-letters `a` and gives `b` and
/// `c` back throttled; the second runs `b` and dead-letters `c`. Each claim's dead part has an id
/// of its own (the claim's throttles are in it), so both settles apply: the item ends done, `a`
/// and `c` dead-lettered alone, `b` run once after its throttle. With the ids naming only owner
/// and attempt, the second settle's dead part collided with the first's, its transaction was
/// refused, and the item was left claimed to be buried whole when its claim expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_claims_again_what_a_throttle_gave_back_settles_both_claims() {
    let local = Local::new().await;
    let table = local.table(&queue_table()).await;
    let clock: SharedClock = Arc::new(SystemClock);
    let q = Queue::new(
        local.fresh_db_with_gsis(&table, &queue_table()),
        &table,
        QueueConfig { shards: 1, ..Default::default() },
        clock.clone(),
    );
    let mut b = Batch::new(Default::default());
    b.add(
        vec![serde_json::Map::from_iter([("window".to_string(), "2026-11-29".into())])],
        vec!["a".into(), "b".into(), "c".into()],
    );
    let item = NewItem { id: "item".into(), kind: "k".into(), payload: b.to_payload(), tenant: None, due_ms: 0 };
    q.enqueue(&item).await.unwrap();
    let handler = Arc::new(Scripted::default());
    let handlers = Registry::new().with("k", handler.clone());
    let cfg = WorkerConfig { concurrency: 1, ..Default::default() };
    let budget = Deadline::new(clock.clone(), clock.now_ms() + 20_000, 0);
    let r = queue_worker::drain(&q, &handlers, "w", &budget, &cfg).await.expect("both settles apply");
    assert_eq!((r.claimed, r.finished, r.lost), (2, 1, 0), "{r:?}");
    let calls = handler.0.lock().unwrap().clone();
    let of = |t: &str| calls.iter().find(|(k, _)| k.contains(&format!("#{t}#"))).map(|(_, n)| *n);
    assert_eq!((of("a"), of("b"), of("c")), (Some(1), Some(2), Some(2)), "{calls:?}");
    let dead = q.dead_letters().await.unwrap();
    let mut tenants: Vec<String> =
        dead.iter().flat_map(|d| d.tenants.clone().into_iter().chain(d.tenant.clone())).collect();
    tenants.sort();
    assert_eq!(tenants, ["a", "c"], "{dead:#?}");
    assert_eq!(count_where(q.db(), q.table(), "state", "done").await, 1, "the item is done");
}
