//! `tenants.explain`'s queue section against what the queue holds: a shared 08:00 fired for three
//! tenants in one batch item, run by the real drain whose handler fails one tenant for a while and
//! another for good. Each tenant's explanation names its own units that went wrong (and only its
//! own), when a retry runs, the dead letter's id that `tickctl dead-letters retry` takes, and
//! when the units were handled after all; `delivered_before` follows the queue's oldest ready
//! item. Every read is by key condition (the IAM check holds them to the control role's Query on
//! two indexes).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use queue_worker::{drain, Handler, HandlerError, Registry, WorkerConfig};
use tickwork::budget::Unlimited;
use tickwork::queue::{Job, Queue, QueueConfig};
use tickwork_lambda::Tick;
use tickwork_tests::{unique, Local};

use crate::binary::{ok, tickctl};

/// Fails `b` with a retry while `b_down`, and `c` for good while `c_broken`.
#[derive(Default)]
struct Flaky {
    b_down: Mutex<bool>,
    c_broken: Mutex<bool>,
    handled: Mutex<Vec<String>>,
}

impl Handler for Flaky {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            match job.tenant.as_deref() {
                Some("b") if *self.b_down.lock().unwrap() => Err(HandlerError::Retry("b's table is down".into())),
                Some("c") if *self.c_broken.lock().unwrap() => Err(HandlerError::Permanent("c has no plan".into())),
                _ => {
                    self.handled.lock().unwrap().push(job.id.clone());
                    Ok(())
                }
            }
        })
    }
}

fn at(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_a_tenants_retrying_dead_and_recovered_units_and_when_the_queue_delivered() {
    let local = Local::new().await;
    let p = unique("explain");
    ok(&tickctl(&local, &p, &["provision"]));
    let sweep = local.stack_sweep(&p, &[], None);
    let cdeps =
        control::Deps::new(local.fresh_db(), local.clock(), &sweep.tables, 8, "pulse-sweep".into(), sweep.cfg.policy);
    let call = |req: serde_json::Value| {
        let cdeps = cdeps.clone();
        async move {
            let a = serde_json::to_value(control::handle(&cdeps, req).await.unwrap()).unwrap();
            assert_eq!(a["ok"], true, "{a}");
            a["result"].clone()
        }
    };
    // Added the morning of the fire: their first day ends after it, so the tick pulses nothing.
    local.clock.set(at("2026-12-02T06:00:00Z"));
    for t in ["a", "b", "c"] {
        call(serde_json::json!({"op": "tenants.add", "tenants": [{"id": t, "zone": "UTC"}]})).await;
        call(serde_json::json!({"op": "schedules.put", "schedules": [{"tenant": t, "name": "nudge", "spec": "daily 08:00"}]}))
            .await;
    }
    let explain = |id: &'static str| async move { call(serde_json::json!({"op": "tenants.explain", "id": id})).await };

    // The 08:00 fires: one batch item of the three tenants' units, due at 08:00.
    let fire = at("2026-12-02T08:00:00Z");
    local.clock.set(fire + 60_000);
    tickwork_tests::streams::settle(&local, &sweep).await;
    pulse_sweep::run(&sweep, &Tick::parse(&Tick::envelope(fire + 60_000, false)).unwrap(), &Unlimited, "w")
        .await
        .unwrap();
    let a = explain("a").await;
    assert_eq!(a["queue"]["delivered_before"], "2026-12-02T08:00:00Z", "the fire waits: {a}");
    assert_eq!(a["queue"]["oldest_ready_age_s"], 60);
    assert_eq!((&a["queue"]["retrying"], &a["queue"]["dead"]), (&0.into(), &0.into()));

    // The drain: a's unit handled, b's fails (retry), c's fails for good.
    let qcfg = QueueConfig { backoff_base: std::time::Duration::from_secs(10), ..QueueConfig::default() };
    let queue = Queue::new(local.fresh_db(), &sweep.tables.queue, qcfg, local.clock());
    let flaky = Arc::new(Flaky { b_down: Mutex::new(true), c_broken: Mutex::new(true), ..Default::default() });
    let reg = Registry::new().with("sched", flaky.clone());
    let r = drain(&queue, &reg, "w1", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!(r.claimed, 1, "{r:?}");

    let a = explain("a").await;
    assert_eq!(a["queue"]["troubles"], serde_json::json!([]), "a's unit went through: {a}");
    assert_eq!(a["queue"]["delivered_before"], "2026-12-02T08:01:00Z", "nothing ready before now");
    let b = explain("b").await;
    assert_eq!((&b["queue"]["retrying"], &b["queue"]["dead"]), (&1.into(), &0.into()), "{b}");
    let bt = &b["queue"]["troubles"][0];
    assert_eq!((&bt["state"], &bt["attempts"]), (&"retrying".into(), &1.into()));
    assert!(bt["last_error"].as_str().unwrap().ends_with("b's table is down"), "{bt}");
    assert_eq!(bt["retry_at"], "2026-12-02T08:01:10Z", "after the backoff");
    assert!(b["findings"].to_string().contains("retries at 2026-12-02T08:01:10Z"), "{b}");
    let c = explain("c").await;
    assert_eq!((&c["queue"]["retrying"], &c["queue"]["dead"]), (&0.into(), &1.into()), "{c}");
    let dead_id = c["queue"]["troubles"][0]["id"].as_str().unwrap().to_string();
    assert!(c["findings"].to_string().contains(&format!("tickctl dead-letters retry {dead_id}")), "{c}");

    // What explain names is what the queue holds: each tenant's item holds its unit alone.
    let letters = queue.dead_letters().await.unwrap();
    assert_eq!(letters.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(), [dead_id.as_str()]);
    assert_eq!(letters[0].tenants, ["c"]);
    let retry_id = bt["id"].as_str().unwrap();
    let item = queue.get(retry_id).await.unwrap().expect("b's retry item");
    assert!(item["payload"].as_s().unwrap().contains(r#""tenants":["b"]"#), "{item:?}");

    // b's table is back; its retry runs at its backoff and is handled; c is retried by an operator.
    *flaky.b_down.lock().unwrap() = false;
    *flaky.c_broken.lock().unwrap() = false;
    local.clock.set(fire + 75_000);
    assert!(queue.retry_dead(&dead_id).await.unwrap());
    let r = drain(&queue, &reg, "w2", &Unlimited, &WorkerConfig::default()).await.unwrap();
    assert_eq!(r.claimed, 2, "{r:?}");
    for (id, ended) in [("b", "2026-12-02T08:01:15Z"), ("c", "2026-12-02T08:01:15Z")] {
        let e = explain(id).await;
        let q = &e["queue"];
        assert_eq!((&q["retrying"], &q["dead"], &q["recovered"]), (&0.into(), &0.into(), &1.into()), "{e}");
        assert_eq!((&q["troubles"][0]["state"], &q["troubles"][0]["ended_at"]), (&"recovered".into(), &ended.into()));
        assert_eq!(q["last_recovered"], ended);
        assert!(!e["findings"].to_string().contains("dead-lettered"), "{e}");
    }
    let handled: BTreeSet<String> = flaky.handled.lock().unwrap().iter().cloned().collect();
    assert_eq!(handled.len(), 3, "every tenant's unit handled once: {handled:?}");

    // tickctl renders the same section.
    local.clock.set(fire + 80_000);
    let text = ok(&tickctl(&local, &p, &["tenants", "explain", "b"]));
    assert!(text.contains("queue: 0 retrying, 0 dead, 1 recovered"), "{text}");
}
