use std::sync::Arc;

use tickwork::clock::Clock;
use tickwork::config::{CoreConfig, Env};
use tickwork::queue::{Claim, NewItem, Queue, QueueConfig};
use tickwork::watermark::Watermarks;
use tickwork_lambda::Base;
use tickwork_tests::{unique, Local};

/// `provision`, then `status` (its JSON form) reflects a pause and a dead letter seeded through
/// the library, and `resume` / `retry` undo them.
#[tokio::test]
async fn provision_status_pause_and_dead_letters() {
    let local = Local::new().await;
    let prefix = unique("ctl");
    let env = Env::from_pairs([("TICKWORK_TABLE_PREFIX", prefix.as_str()), ("TICKWORK_QUEUE_MAX_ATTEMPTS", "1")]);
    let core = CoreConfig::from_env(&env).unwrap();
    let base = Base { core, sdk: local.sdk.clone(), db: local.db.clone(), clock: Arc::new(local.clock.clone()) };
    let made = tickctl::provision(&base, &env).await.unwrap();
    assert_eq!(made.len(), tickctl::all_tables().len());
    assert!(made.contains(&format!("{prefix}-control")));

    let marks = Watermarks::new(base.db.clone(), &base.core.control_table, base.clock.clone());
    marks.set_paused("pulse-sweep", true, Some("runaway writer")).await.unwrap();
    let q =
        Queue::new(base.db.clone(), base.core.table("queue"), QueueConfig::from_env(&env).unwrap(), base.clock.clone());
    let now = local.clock.now_ms();
    for id in ["ok-1", "bad-1"] {
        q.enqueue(&NewItem { id: id.into(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: now })
            .await
            .unwrap();
    }
    let Claim::Claimed(job) = q.claim("bad-1", "w").await.unwrap() else { panic!() };
    q.fail(&job, "boom").await.unwrap();

    let status = serde_json::to_value(tickctl::status(&base, &env).await.unwrap()).unwrap();
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert_eq!(sweep["watermark"]["paused"], true);
    assert_eq!(sweep["watermark"]["paused_reason"], "runaway writer");
    assert_eq!(status["dead_letters"], 1);
    let ready: u64 = status["ready_by_shard"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(ready, 1, "ok-1 is ready, bad-1 is dead");

    marks.set_paused("pulse-sweep", false, None).await.unwrap();
    assert!(q.retry_dead("bad-1").await.unwrap());
    assert!(!q.retry_dead("bad-1").await.unwrap(), "only dead letters can be retried");
    let status = serde_json::to_value(tickctl::status(&base, &env).await.unwrap()).unwrap();
    assert_eq!(status["dead_letters"], 0);
    let sweep = status["jobs"].as_array().unwrap().iter().find(|j| j["job"] == "pulse-sweep").unwrap();
    assert_eq!(sweep["watermark"]["paused"], false);
}

/// `invoke` refuses a function it does not know, naming it.
#[tokio::test]
async fn invoke_rejects_an_unknown_function_by_name() {
    let env = Env::from_pairs([]);
    let err = tickctl::invoke(&env, "no-such-fn", serde_json::json!({})).await.unwrap_err();
    assert!(err.to_string().contains("no-such-fn"));
}
