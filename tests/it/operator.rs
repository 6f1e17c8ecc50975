//! `tickctl` as an operator runs it against a deployed stack (the binary, the local servers):
//! the read-only commands ask AWS for no write at all, read from the SDK boundary's own log of
//! what each call asked for (`tickwork::iam`, the log the IAM check reads).

use std::path::Path;
use std::process::Output;

use tickwork_tests::{unique, Local};

use crate::binary::ok;

/// The binary with the runbook's environment (the stack's table prefix, an endpoint, the
/// template's fan-out job), logging every call it makes to `log` when given.
fn tickctl(local: &Local, prefix: &str, log: Option<&Path>, args: &[&str]) -> Output {
    let mut c = crate::binary::tickctl_command(local, prefix);
    if let Some(dir) = log {
        c.env(tickwork::iam::IAM_LOG, dir);
    }
    c.args(args).output().expect("run tickctl")
}

/// The actions a command's calls asked for (`dynamodb:GetItem`, ...), every item of a batch or a
/// transaction its own.
fn actions(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    tickwork::iam::read_suite_log(dir).unwrap().into_iter().map(|l| l.access.action).collect()
}

const WRITES: [&str; 8] = [
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "s3:PutObject",
    "s3:DeleteObject",
    "lambda:InvokeFunction",
];

/// Every action a read-only command may ask for: an allow-list, so a write action this file does
/// not name (a new API, a transaction's check) fails the test rather than passing it.
const READS: [&str; 5] =
    ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:BatchGetItem", "s3:GetObject"];

/// `status`, `plan`, `dead-letters list`, `audit` and `cost`, each through the binary against a
/// stack with tenants and a dead letter: none asks for a write (a transaction's items are logged
/// as their own actions), and the ones that read do read.
#[tokio::test]
async fn read_only_commands_make_no_write_request() {
    let local = Local::new().await;
    let p = unique("ro");
    ok(&tickctl(&local, &p, None, &["provision"]));
    ok(&tickctl(&local, &p, None, &["tenants", "add", "acme", "--zone", "Europe/Berlin"]));
    ok(&tickctl(&local, &p, None, &["tenants", "add", "globex", "--zone", "Asia/Tokyo"]));
    // A dead letter, through the library as the worker leaves one.
    let env = tickwork::config::Env::from_pairs([
        ("TICKWORK_TABLE_PREFIX", p.as_str()),
        ("TICKWORK_QUEUE_MAX_ATTEMPTS", "1"),
    ]);
    let q = tickwork::queue::Queue::new(
        local.fresh_db(),
        format!("{p}-queue"),
        tickwork::queue::QueueConfig::from_env(&env).unwrap(),
        local.clock(),
    );
    let now = tickwork::clock::Clock::now_ms(&local.clock);
    let item = tickwork::queue::NewItem {
        id: "bad-1".into(),
        kind: "k".into(),
        payload: "{}".into(),
        tenant: None,
        due_ms: now,
    };
    q.enqueue(&item).await.unwrap();
    let tickwork::queue::Claim::Claimed(job) = q.claim("bad-1", "w").await.unwrap() else { panic!("claimed") };
    q.fail(&job, "boom").await.unwrap();
    // Without the stack's fan-out job, `status` would report on the code's default: refused.
    let o =
        crate::binary::tickctl_command(&local, &p).arg("status").env_remove("TICKWORK_FANOUT_JOB").output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let why = String::from_utf8_lossy(&o.stderr);
    assert!(why.contains("TICKWORK_FANOUT_JOB") && why.contains("--stack"), "{why}");
    let audit_log = std::env::temp_dir().join(format!("{p}.log"));
    std::fs::write(&audit_log, "").unwrap();

    let dir = std::env::temp_dir().join(format!("{p}-calls"));
    let commands: [(&str, Vec<&str>, bool); 5] = [
        ("status", vec!["status"], true),
        ("plan", vec!["plan"], true),
        ("dead-letters list", vec!["dead-letters", "list"], true),
        ("audit", vec!["audit", audit_log.to_str().unwrap()], false),
        ("cost", vec!["cost", "--tenants", "10", "--days", "1"], false),
    ];
    for (name, args, reads) in commands {
        let log = dir.join(name.replace(' ', "-"));
        let o = tickctl(&local, &p, Some(&log), &args);
        assert!(o.status.code().is_some_and(|c| c == 0 || c == 3), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let asked = actions(&log);
        let writes: Vec<&String> = asked.iter().filter(|a| WRITES.contains(&a.as_str())).collect();
        assert!(writes.is_empty(), "`tickctl {name}` asked for writes: {writes:?}");
        let other: Vec<&String> = asked.iter().filter(|a| !READS.contains(&a.as_str())).collect();
        assert!(other.is_empty(), "`tickctl {name}` asked for more than reads: {other:?}");
        assert_eq!(!asked.is_empty(), reads, "`tickctl {name}` read: {asked:?}");
    }
}

/// A worker's handler that counts its calls.
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl queue_worker::Handler for Counted {
    fn handle<'a>(
        &'a self,
        _: &'a tickwork::queue::Job,
    ) -> futures::future::BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }
}

/// `dead-letters retry` with the runbook's environment (a prefix and an endpoint, no shard count)
/// against a stack deployed with 1 queue shard, then 4: the item goes back into a shard the
/// deployed worker polls, and the worker runs it. Each id is one the code's default of 8 shards
/// put in a shard that stack never polls. Before any function recorded a count, and with none in
/// the environment, the retry is refused by name.
#[tokio::test]
async fn a_retried_dead_letter_lands_where_the_deployed_worker_polls() {
    use tickwork::queue::{shard_key, shard_of, Claim, NewItem, Queue, QueueConfig, SHARD};
    let local = Local::new().await;
    for deployed in [1u32, 4] {
        let p = unique("retry");
        ok(&tickctl(&local, &p, None, &["provision"]));
        let id = (0..).map(|i| format!("dl-{i}")).find(|id| shard_of(id, 8) >= deployed).unwrap();
        let cfg = QueueConfig { shards: deployed, max_attempts: 1, ..QueueConfig::default() };
        let q = Queue::new(local.fresh_db(), format!("{p}-queue"), cfg, local.clock()).with_poll_shards(deployed);
        let now = jiff::Timestamp::now().as_millisecond();
        local.clock.set(now);
        q.enqueue(&NewItem { id: id.clone(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: now })
            .await
            .unwrap();
        let Claim::Claimed(job) = q.claim(&id, "w").await.unwrap() else { panic!("claimed") };
        q.fail(&job, "boom").await.unwrap();
        if deployed == 1 {
            // No function of this stack has started yet: nothing says how many shards it polls.
            let o = tickctl(&local, &p, None, &["dead-letters", "retry", &id]);
            assert_eq!(o.status.code(), Some(1));
            let why = String::from_utf8_lossy(&o.stderr);
            assert!(why.contains("TICKWORK_QUEUE_SHARDS") && why.contains("--stack"), "{why}");
        }
        // The deployed worker's start-up records the count it polls.
        let reg = tickwork::shard::ShardRegistry::new(local.fresh_db(), format!("{p}-control"));
        assert_eq!(reg.resolve("queue", deployed).await.unwrap(), deployed);

        ok(&tickctl(&local, &p, None, &["dead-letters", "retry", &id]));
        let stored = q.get(&id).await.unwrap().expect("the item");
        assert_eq!(stored[SHARD].as_s().unwrap(), &shard_key(shard_of(&id, deployed)), "{deployed} shard(s)");
        let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let handlers = queue_worker::Registry::new().with("k", std::sync::Arc::new(Counted(calls.clone())));
        local.clock.set(jiff::Timestamp::now().as_millisecond() + 1_000);
        let r = queue_worker::drain(&q, &handlers, "worker", &tickwork::budget::Unlimited, &Default::default())
            .await
            .unwrap();
        assert_eq!((r.finished, calls.load(std::sync::atomic::Ordering::SeqCst)), (1, 1), "{deployed}: {r:?}");
        assert!(q.dead_letters().await.unwrap().is_empty());
    }
}
