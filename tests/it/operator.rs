//! `tickctl` as an operator runs it against a deployed stack (the binary, the local servers):
//! the read-only commands ask AWS for no write at all, read from the SDK boundary's own log of
//! what each call asked for (`tickwork::iam`, the log the IAM check reads).

use std::path::Path;
use std::process::{Command, Output};

use tickwork_tests::{unique, Local};

/// The binary with the runbook's environment (the stack's table prefix, an endpoint), logging
/// every call it makes to `log` when given.
fn tickctl(local: &Local, prefix: &str, log: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tickctl-cli"));
    c.args(args)
        .env("AWS_ENDPOINT_URL_DYNAMODB", &local.endpoint)
        .env("TICKWORK_TABLE_PREFIX", prefix)
        .env("TICKWORK_CAPACITY_SOURCE", "estimate")
        .env_remove("TICKWORK_ARCHIVE_BUCKET")
        .env_remove(tickwork::iam::IAM_LOG);
    if let Some(dir) = log {
        c.env(tickwork::iam::IAM_LOG, dir);
    }
    c.output().expect("run tickctl")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "exit {:?}: {}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
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
        assert_eq!(!asked.is_empty(), reads, "`tickctl {name}` read: {asked:?}");
    }
}
