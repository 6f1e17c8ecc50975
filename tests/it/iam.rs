//! IAM, proven from the calls: every job runs through its scenarios with a [`Recorder`] at its
//! SDK boundary, and what it asked for is held against its policy in `template.yaml`.
//!
//! The rules applied are AWS's (see `tickwork::iam` for the sources): each item of a transaction
//! is authorised as its single-item action; BatchWriteItem and BatchGetItem as themselves; an index
//! Query on the index ARN; `ForAllValues:StringLike` on `dynamodb:LeadingKeys` matches every
//! partition key value of the request (and, as AWS documents, a request with no such key).
//!
//! Checked per function: nothing it does is denied; every action of every statement is used by
//! something it does; and removing any one action from any statement denies something it does
//! (the mutations are listed on stdout).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_yaml_ng::Value;
use tickwork::budget::Unlimited;
use tickwork::clock::Clock;
use tickwork::config::Env;
use tickwork::iam::{Access, Recorder, Resource};
use tickwork::queue::{queue_table, NewItem, Queue, QueueConfig};
use tickwork::tenants::{tenants_table, Tenant, Tenants};
use tickwork_lambda::Tick;
use tickwork_tests::faults::{Fault, Faults, Planned};
use tickwork_tests::{quick_retry, unique, Local};

use tickwork_tests::ms;

fn tick(at: i64) -> Tick {
    Tick::parse(&Tick::envelope(at, false)).unwrap()
}

// ------------------------------------------------------------------ the scenarios

async fn sweep_scenarios(local: &Local) -> (Recorder, Tables) {
    let rec = Recorder::new();
    let t = Tables::new(local).await;
    let db = local.db_with(None, Some(&rec), &quick_retry());
    db.register_gsis(&t.queue, queue_table().gsi_shapes());
    // Small pages, so that a budget-limited boundary tick leaves a checkpoint.
    let cfg = pulse_sweep::PulseConfig::from_env(
        &Env::from_pairs([("TICKWORK_PULSE_PAGE_SIZE", "2")]),
        Duration::from_secs(1),
    )
    .unwrap();
    let tables = pulse_sweep::Tables { control: t.control.clone(), tenants: t.tenants.clone(), queue: t.queue.clone() };
    local.clock.set(ms("2026-11-29T10:00:00Z"));
    let d = pulse_sweep::Deps::new(db, local.clock(), cfg, tables, 4, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    // Tenants are added by the operator's tools, not by the sweep: through another client.
    let admin = pulse_sweep::Deps {
        tenants: Tenants::new(local.fresh_db(), &t.tenants, 4).with_registry(
            tickwork::watermark::Watermarks::new(local.fresh_db(), &t.control, local.clock()),
            "pulse-sweep",
        ),
        ..d.clone()
    };
    let list = tickwork_tests::tenants(12, "Europe/Berlin", 0);
    pulse_sweep::add_tenants(&admin, &list).await.unwrap();
    // One tenant's position is corrupt: it is isolated and recorded as a failure.
    tickwork_tests::set_stored_position(&local.db, &t.tenants, "t3", "not-a-date").await;
    // The boundary tick stopped by its budget (a checkpoint), its resumption, then idle ticks.
    local.clock.set(ms("2026-11-29T10:00:00Z"));
    let r = pulse_sweep::run(&d, &tick(ms("2026-11-29T10:00:00Z")), &tickwork::budget::Steps::new(2), &unique("w"))
        .await
        .unwrap();
    assert_eq!(r.outcome, pulse_sweep::Outcome::Partial, "{r:?}");
    for at in ["2026-11-29T10:01:00Z", "2026-11-29T10:02:00Z"] {
        local.clock.set(ms(at));
        pulse_sweep::run(&d, &tick(ms(at)), &Unlimited, &unique("w")).await.unwrap();
    }
    // A tenant added after its zone's run: woken, read and brought to the mark at the next tick.
    pulse_sweep::add_tenants(&admin, &[Tenant::new("late", "Europe/Berlin")]).await.unwrap();
    for at in ["2026-11-29T10:03:00Z", "2026-11-29T23:00:00Z"] {
        local.clock.set(ms(at));
        pulse_sweep::run(&d, &tick(ms(at)), &Unlimited, &unique("w")).await.unwrap();
    }
    // A boundary in shared mode (`TICKWORK_PULSE_SHARD_WORKERS`): each shard under its own
    // lease, read after it is taken, the watermark advanced with a check of every shard.
    let shared_cfg = pulse_sweep::PulseConfig::from_env(
        &Env::from_pairs([("TICKWORK_PULSE_PAGE_SIZE", "2"), ("TICKWORK_PULSE_SHARD_WORKERS", "2")]),
        Duration::from_secs(1),
    )
    .unwrap();
    // Its helpers are invocations of the sweep itself, through the Lambda client (`StartHelpers`);
    // the stand-in takes them and runs nothing, so the leader pages every shard itself.
    let api = lambda_standin::invoke::InvokeApi::start(std::sync::Arc::new(|_| {
        Box::pin(async { lambda_standin::invoke::Answer::default() }) as futures::future::BoxFuture<'static, _>
    }))
    .await
    .unwrap();
    let helpers =
        pulse_sweep::helpers::LambdaHelpers::new(local.lambda_with(&api.endpoint(), Some(&rec)), "stack-pulse-sweep");
    let shared = pulse_sweep::Deps { cfg: shared_cfg, helpers: Some(std::sync::Arc::new(helpers)), ..d.clone() };
    let tokyo: Vec<Tenant> = (0..6).map(|i| Tenant::new(format!("jp{i}"), "Asia/Tokyo")).collect();
    pulse_sweep::add_tenants(&admin, &tokyo).await.unwrap();
    let at = ms("2026-11-30T15:05:00Z");
    local.clock.set(at);
    let r = pulse_sweep::run(&shared, &tick(at), &Unlimited, &unique("w")).await.unwrap();
    assert_eq!((r.outcome, r.groups_completed), (pulse_sweep::Outcome::Completed, 1), "{r:?}");
    assert_eq!(api.seen.lock().unwrap().len(), 1, "one helper started");
    (rec, t)
}

async fn fanout_scenarios(local: &Local) -> (Recorder, Tables) {
    let rec = Recorder::new();
    let t = Tables::new(local).await;
    let db = local.db_with(None, Some(&rec), &quick_retry());
    let cfg = tenant_fanout::FanoutConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let tables =
        tenant_fanout::Tables { control: t.control.clone(), tenants: t.tenants.clone(), queue: t.queue.clone() };
    local.clock.set(ms("2026-11-29T06:00:00Z"));
    let d = tenant_fanout::Deps::new(db, local.clock(), cfg, &tables, 4, QueueConfig::default())
        .resolve_shards()
        .await
        .expect("shard registry");
    let list = tickwork_tests::tenants(20, "UTC", 0);
    Tenants::new(local.fresh_db(), &t.tenants, 4).put_all(&list).await.unwrap();
    // A tenant item written around the checks (a position in no format we write): isolated and
    // recorded.
    tickwork_tests::set_stored_position(&local.db, &t.tenants, "t7", "not-a-date").await;
    for at in ["2026-11-29T06:00:00Z", "2026-11-29T06:05:00Z", "2026-11-30T00:05:00Z"] {
        local.clock.set(ms(at));
        tenant_fanout::run(&d, &tick(ms(at)), &Unlimited, &unique("f")).await.unwrap();
    }
    (rec, t)
}

async fn worker_scenarios(local: &Local) -> (Recorder, Tables) {
    let rec = Recorder::new();
    let t = Tables::new(local).await;
    let db = local.db_with(None, Some(&rec), &quick_retry());
    let cfg = QueueConfig { max_attempts: 2, backoff_base: Duration::ZERO, ..Default::default() };
    // Start-up: the worker polls every ready shard any producer ever wrote to.
    let shards = tickwork::shard::ShardRegistry::new(db.clone(), &t.control)
        .resolve("queue", cfg.shards)
        .await
        .expect("shard registry");
    let q = Queue::new(db.clone(), &t.queue, cfg.clone(), local.clock()).with_poll_shards(shards);
    let handlers = queue_worker::summary::registry(db, &t.summaries, local.clock());
    let admin = Queue::new(local.fresh_db(), &t.queue, cfg, local.clock());
    let now = local.clock.now_ms();
    let item = |id: &str, kind: &str, payload: &str| NewItem {
        id: id.into(),
        kind: kind.into(),
        payload: payload.into(),
        tenant: Some("t1".into()),
        due_ms: now,
    };
    for it in [
        item("p1", "pulse", r#"{"tenant":"t1","grain":"day","period":"2026-11-29"}"#),
        item("u1", "utc-daily", r#"{"tenant":"t1","window":"2026-11-29"}"#),
        item("m1", "mystery", "{}"),
        item("r1", "pulse", r#"{"tenant":"t1","grain":"day","period":"2026-11-2"}"#),
        item("e1", "pulse", r#"{"tenant":"t1","grain":"day","period":"2026-11-28"}"#),
    ] {
        admin.enqueue(&it).await.unwrap();
    }
    // e1's workers all died: its claims are spent, and the next claim dead-letters it.
    for _ in 0..2 {
        let tickwork::queue::Claim::Claimed(_) = admin.claim("e1", "dead").await.unwrap() else { panic!("claim") };
        local.clock.advance(121_000);
    }
    let failing: std::sync::Arc<dyn queue_worker::Handler> = std::sync::Arc::new(Flaky);
    let handlers = handlers.with("flaky", failing);
    admin.enqueue(&item("f1", "flaky", "{}")).await.unwrap();
    // A batch with a unit that fails for good: the unit's dead letter is a put of its own in the
    // settle's transaction (`LeaveParts`); the other units run.
    let window = |w: &str| vec![serde_json::Map::from_iter([("window".to_string(), serde_json::json!(w))])];
    let batch = |tenants: &[&str]| {
        let mut b = tickwork::batch::Batch::new(Default::default());
        b.add(window("2026-11-29"), tenants.iter().map(|t| t.to_string()));
        b
    };
    // t-bad's window is no date: its unit fails for good.
    let mut b1 = batch(&["t1", "t2"]);
    b1.add(window("2026-13-45"), ["t-bad".to_string()]);
    admin.enqueue(&item("b1", "utc-daily", &b1.to_payload())).await.unwrap();
    let batch = |tenants: &[&str]| batch(tenants).to_payload();
    // A batch whose worker died holding it: split into parts to run alone (`LeaveParts` again).
    admin.enqueue(&item("b2", "utc-daily", &batch(&["t3", "t4"]))).await.unwrap();
    let tickwork::queue::Claim::Claimed(_) = admin.claim("b2", "died").await.unwrap() else { panic!("claim") };
    local.clock.advance(121_000);
    for _ in 0..3 {
        queue_worker::drain(&q, &handlers, &unique("w"), &Unlimited, &queue_worker::WorkerConfig::default())
            .await
            .unwrap();
        local.clock.advance(1_000);
    }
    // A backlog a poll cannot hold: the drain takes drain slots and starts drains in them, through
    // the Lambda client (`DrainSlots`, `StartDrains`); a slot drain's end hands its slot on.
    let api = lambda_standin::invoke::InvokeApi::start(std::sync::Arc::new(|_| {
        Box::pin(async { lambda_standin::invoke::Answer::default() }) as futures::future::BoxFuture<'static, _>
    }))
    .await
    .unwrap();
    let invoker =
        queue_worker::LambdaInvoker::new(local.lambda_with(&api.endpoint(), Some(&rec)), "stack-queue-worker");
    let fleet = queue_worker::Fleet::new(
        tickwork::lease::LeaseStore::new(q.db().clone(), &t.control, local.clock()),
        Some(std::sync::Arc::new(invoker)),
        2,
        Duration::from_secs(130),
        Duration::from_secs(1),
    )
    .unwrap();
    let now = local.clock.now_ms();
    let many: Vec<NewItem> =
        (0..40).map(|i| NewItem { due_ms: now, ..item(&format!("many{i}"), "pulse", "{}") }).collect();
    admin.enqueue_many(&many, 4).await.unwrap();
    let grow = queue_worker::growing::Growing::new(&fleet, None, 60_000);
    // Polls of four keys: a shard with four ready items is a full page, which wants two drains:
    // this one (in a slot it takes) and one it starts.
    let small = queue_worker::WorkerConfig { batch: 4, ..Default::default() };
    let r = queue_worker::drain_with(&q, &handlers, &unique("w"), &Unlimited, &small, &grow).await.unwrap();
    assert_eq!(r.claimed, 40, "{r:?}");
    assert_eq!(grow.adopted().map(|e| e.slot), Some(0), "it took a slot");
    assert_eq!(api.seen.lock().unwrap().len(), 1, "a drain started");
    let ev = queue_worker::DrainEvent { slot: 1, owner: "gone".into(), token: 1, link: Default::default() };
    fleet.end_slot(&ev, false).await;
    (rec, t)
}

struct Flaky;
impl queue_worker::Handler for Flaky {
    fn handle<'a>(
        &'a self,
        _: &'a tickwork::queue::Job,
    ) -> futures::future::BoxFuture<'a, Result<(), queue_worker::HandlerError>> {
        Box::pin(async { Err(queue_worker::HandlerError::Retry("always".into())) })
    }
}

async fn archiver_scenarios(local: &Local) -> (Recorder, Tables, String) {
    let rec = Recorder::new().map(archiver::object::s3_accesses);
    let t = Tables::new(local).await;
    let bucket = unique("iam").to_lowercase();
    archiver::s3_client(&local.sdk).create_bucket().bucket(&bucket).send().await.unwrap();
    let cfg = archiver::ArchiverConfig::from_env(
        &Env::from_pairs([
            ("TICKWORK_ARCHIVE_BUCKET", bucket.as_str()),
            ("TICKWORK_CHANGE_SHARDS", "2"),
            ("TICKWORK_ARCHIVE_PAGE_SIZE", "10"),
        ]),
        Duration::from_secs(1),
    )
    .unwrap();
    let now = ms("2026-11-29T00:00:00Z");
    local.clock.set(now);
    for i in 0..30 {
        let data = serde_json::json!({"i": i});
        tickwork::changes::record_change(
            &local.db,
            &t.changes,
            2,
            "order",
            &format!("o{i}"),
            &data,
            now - 40 * 86_400_000 + i,
        )
        .await
        .unwrap();
    }
    let deps = |faults: Option<&Faults>| {
        let db = local.db_with(faults, Some(&rec), &quick_retry());
        let s3 = local.s3_with(faults, Some(&rec));
        archiver::Deps::new(db, s3, local.clock(), cfg.clone(), &t.control, t.changes.clone())
    };
    deps(None).resolve_shards().await.expect("shard registry");
    // A sweep that dies after recording an intent, before its object: the next one recovers it.
    let faults = Faults::new();
    faults.plan(Planned { op: Some("PutObject"), nth: 1, fault: Fault::CrashBefore });
    assert!(archiver::run(&deps(Some(&faults)), &tick(now), &Unlimited, "a").await.is_err());
    local.clock.advance(300_000);
    archiver::run(&deps(None), &tick(now + 300_000), &Unlimited, "b").await.unwrap();
    local.clock.advance(300_000);
    archiver::run(&deps(None), &tick(now + 600_000), &Unlimited, "c").await.unwrap();
    (rec, t, bucket)
}

/// Uniquely named tables of every kind.
struct Tables {
    control: String,
    tenants: String,
    queue: String,
    summaries: String,
    changes: String,
}

impl Tables {
    async fn new(local: &Local) -> Self {
        Self {
            control: local.control().await,
            tenants: local.table(&tenants_table()).await,
            queue: local.table(&queue_table()).await,
            summaries: local.table(&queue_worker::summary::summaries_table()).await,
            changes: local.table(&tickwork::changes::changes_table()).await,
        }
    }

    /// The template's logical id of a physical table.
    fn logical(&self, physical: &str) -> String {
        [
            (&self.control, "ControlTable"),
            (&self.tenants, "TenantsTable"),
            (&self.queue, "QueueTable"),
            (&self.summaries, "SummariesTable"),
            (&self.changes, "ChangesTable"),
        ]
        .iter()
        .find(|(p, _)| p.as_str() == physical)
        .map(|(_, l)| l.to_string())
        .unwrap_or_else(|| panic!("a call on an unexpected table `{physical}`"))
    }
}

// ------------------------------------------------------------------ the policy

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

fn untag(v: &Value) -> (String, &Value) {
    match v {
        Value::Tagged(t) => (t.tag.to_string(), &t.value),
        other => (String::new(), other),
    }
}

fn text(v: &Value, params: &serde_yaml_ng::Mapping) -> String {
    let (_, v) = untag(v);
    let mut s = v.as_str().unwrap_or_default().to_string();
    for (k, p) in params {
        s = s.replace(&format!("${{{}}}", k.as_str().unwrap()), p["Default"].as_str().unwrap_or_default());
    }
    s
}

/// A statement's resource, in the terms an [`Access`] is recorded in.
#[derive(Debug, Clone, PartialEq)]
enum Res {
    Table {
        logical: String,
        index: Option<String>,
    },
    Objects {
        bucket: String,
        prefix: String,
    },
    /// A function of the stack, by its name's suffix (`-queue-worker`).
    Function {
        suffix: String,
    },
    /// A Scheduler schedule of the stack (default group), by its name's suffix (`-sweep-wake`).
    Schedule {
        suffix: String,
    },
    /// A parameter's ARN (`!Ref FunctionTargetArn`): the targets' statements.
    Param {
        name: String,
    },
}

/// The ARNs the tests deploy a target parameter with (each test a stack of its own): patterns in
/// IAM's `StringLike` terms, since a test's queue or bus has a name of its own.
fn param_values(name: &str) -> Vec<String> {
    match name {
        "FunctionTargetArn" => vec![crate::targets::FUNCTION_ARN.to_string()],
        "QueueTargetArn" => vec![format!("{}*", crate::targets::QUEUE_ARN_PREFIX)],
        "BusTargetArn" => vec![format!("{}*", crate::targets::BUS_ARN_PREFIX)],
        other => panic!("a statement names parameter {other}, which no test deploys"),
    }
}

const FUNCTION_ARN: &str = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}";
const SCHEDULE_ARN: &str =
    "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/default/${AWS::StackName}";

fn resource(v: &Value) -> Res {
    let (tag, inner) = untag(v);
    let s = inner.as_str().expect("resource text");
    match tag.as_str() {
        "!Ref" => Res::Param { name: s.to_string() },
        "!GetAtt" => Res::Table { logical: s.trim_end_matches(".Arn").to_string(), index: None },
        "!Sub" if s.starts_with(FUNCTION_ARN) => Res::Function { suffix: s[FUNCTION_ARN.len()..].to_string() },
        "!Sub" if s.starts_with(SCHEDULE_ARN) => Res::Schedule { suffix: s[SCHEDULE_ARN.len()..].to_string() },
        "!Sub" => {
            let (arn, rest) = s.strip_prefix("${").and_then(|r| r.split_once(".Arn}")).expect("${X.Arn}...");
            if let Some(index) = rest.strip_prefix("/index/") {
                Res::Table { logical: arn.to_string(), index: Some(index.to_string()) }
            } else {
                Res::Objects {
                    bucket: arn.to_string(),
                    prefix: rest.trim_start_matches('/').trim_end_matches('*').to_string(),
                }
            }
        }
        other => panic!("resource with tag `{other}`: {s} (no wildcards, no literal ARNs)"),
    }
}

#[derive(Debug, Clone)]
struct Statement {
    sid: String,
    actions: Vec<String>,
    resources: Vec<Res>,
    leading_keys: Option<Vec<String>>,
}

fn statements(t: &Value, function: &str) -> Vec<Statement> {
    let params = t["Parameters"].as_mapping().unwrap();
    let f = &t["Resources"][function]["Properties"]["Policies"];
    let mut out = Vec::new();
    for policy in f.as_sequence().expect("Policies list") {
        for st in policy["Statement"].as_sequence().expect("an inline policy") {
            // `!If [Condition, statement, !Ref AWS::NoValue]`: a target's statement, present when
            // its parameter is set, as in the tests.
            let st = match untag(st) {
                (tag, v) if tag == "!If" => {
                    let parts = v.as_sequence().expect("!If [condition, then, else]");
                    assert_eq!(untag(&parts[2]).1.as_str(), Some("AWS::NoValue"), "{function}: {parts:?}");
                    &parts[1]
                }
                _ => st,
            };
            assert_eq!(st["Effect"].as_str(), Some("Allow"));
            // A Lambda statement's shape is checked on its own (invoke itself, nothing else).
            lambda_statement(st, function);
            let list = |v: &Value| -> Vec<Value> { v.as_sequence().cloned().unwrap_or_else(|| vec![v.clone()]) };
            let leading_keys = st.get("Condition").map(|c| {
                let like = &c["ForAllValues:StringLike"]["dynamodb:LeadingKeys"];
                assert!(!like.is_null(), "{function}: only ForAllValues:StringLike on dynamodb:LeadingKeys is used");
                list(like).iter().map(|v| text(v, params)).collect()
            });
            out.push(Statement {
                sid: st["Sid"].as_str().unwrap_or("?").to_string(),
                actions: list(&st["Action"]).iter().map(|a| a.as_str().unwrap().to_string()).collect(),
                resources: list(&st["Resource"]).iter().map(resource).collect(),
                leading_keys,
            });
        }
    }
    out
}

/// The function a function may invoke: itself, for the two that start invocations of their own
/// (the sweep's shard workers, the worker's drains).
fn invokes_itself(function: &str) -> Option<&'static str> {
    match function {
        "PulseSweepFunction" => Some("pulse-sweep"),
        "QueueWorkerFunction" => Some("queue-worker"),
        _ => None,
    }
}

/// A statement on Lambda rather than DynamoDB or S3: only `InvokeFunction`, and only on the
/// function itself (the recorder sees DynamoDB and S3 calls, so this one is checked here, by its
/// shape).
fn lambda_statement(st: &Value, function: &str) -> bool {
    let actions: Vec<&str> =
        st["Action"].as_sequence().map(|a| a.iter().filter_map(|x| x.as_str()).collect()).unwrap_or_default();
    if !actions.iter().any(|a| a.starts_with("lambda:")) {
        return false;
    }
    // The worker's function target: the ARN its parameter names, and only that.
    if let ("!Ref", Some("FunctionTargetArn")) = (untag(&st["Resource"]).0.as_str(), untag(&st["Resource"]).1.as_str())
    {
        assert_eq!(function, "QueueWorkerFunction", "only the worker delivers to a target");
        assert_eq!(actions.as_slice(), &["lambda:InvokeFunction"][..], "{function}: {st:?}");
        return false;
    }
    let own = invokes_itself(function).unwrap_or_else(|| panic!("{function} may invoke no function: {st:?}"));
    assert_eq!(actions.as_slice(), &["lambda:InvokeFunction"][..], "{function}: {st:?}");
    let (tag, arn) = untag(&st["Resource"]);
    let want = format!(
        "arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:${{AWS::StackName}}-{own}"
    );
    assert_eq!((tag.as_str(), arn.as_str()), ("!Sub", Some(want.as_str())), "{function} may invoke itself only");
    true
}

/// The sweep's and the worker's one Lambda statement each is there: without it, a boundary
/// shared by shard workers starts no helper, and a drain stopped by its deadline starts no
/// successor, on AWS (`AccessDeniedException` on `Invoke`), which no local server shows. Every
/// other function has none.
#[test]
fn only_the_sweep_and_the_worker_may_invoke_a_function_and_only_themselves() {
    let t = template();
    for function in
        ["PulseSweepFunction", "TenantFanoutFunction", "QueueWorkerFunction", "ArchiverFunction", "ControlFunction"]
    {
        let policies = t["Resources"][function]["Properties"]["Policies"].as_sequence().expect("Policies list");
        let lambda = policies
            .iter()
            .flat_map(|p| p["Statement"].as_sequence().cloned().unwrap_or_default())
            .filter(|st| lambda_statement(st, function))
            .count();
        let want = usize::from(invokes_itself(function).is_some());
        assert_eq!(lambda, want, "{function}: Lambda statements");
    }
}

/// The worker's drains invoke the worker, a chain as long as the backlog, and the SDK carries the
/// trace header whose lineage Lambda counts: by default (`RecursiveLoop: Terminate`) Lambda stops
/// an event that invoked a function more than 16 times through the Invoke API ("Lambda recursive
/// loop detection", Lambda Developer Guide; AWS Compute Blog, "Detecting and stopping recursive
/// loops in AWS Lambda functions", 2023-07-13), which would cut a long backlog silently. The worker
/// allows it (its own guards bound the chain, `queue_worker::handon`); the sweep's helpers are one
/// Invoke from their tick, so the sweep keeps the default, and no other function invokes itself.
#[test]
fn only_the_worker_whose_drains_chain_allows_recursive_invocation() {
    let t = template();
    for function in
        ["PulseSweepFunction", "TenantFanoutFunction", "QueueWorkerFunction", "ArchiverFunction", "ControlFunction"]
    {
        let got = t["Resources"][function]["Properties"]["RecursiveLoop"].as_str();
        let want = (function == "QueueWorkerFunction").then_some("Allow");
        assert_eq!(got, want, "{function}: RecursiveLoop");
    }
}

/// IAM's `StringLike`: `*` matches any run of characters, `?` one.
fn like(pattern: &str, value: &str) -> bool {
    fn go(p: &[u8], v: &[u8]) -> bool {
        match (p.first(), v.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], v) || (!v.is_empty() && go(p, &v[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &v[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &v[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), value.as_bytes())
}

/// An access in the template's terms: (action, resource, leading key).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Asked {
    action: String,
    logical: String,
    index: Option<String>,
    object_key: Option<String>,
    leading_key: Option<String>,
}

fn asked(a: &Access, tables: &Tables, bucket: Option<&str>) -> Asked {
    asked_with(a, &|t| tables.logical(t), &|b| assert_eq!(Some(b), bucket, "S3 call on an unexpected bucket"))
}

/// An access in the template's terms, given how a physical table maps to its logical id and how
/// a bucket is accepted.
fn asked_with(a: &Access, logical: &dyn Fn(&str) -> String, bucket_ok: &dyn Fn(&str)) -> Asked {
    let base =
        Asked { action: a.action.clone(), logical: String::new(), index: None, object_key: None, leading_key: None };
    match &a.resource {
        Resource::Table { table, index } => {
            Asked { logical: logical(table), index: index.clone(), leading_key: a.leading_key.clone(), ..base }
        }
        Resource::Object { bucket: b, key } => {
            bucket_ok(b);
            Asked { logical: "ArchiveBucket".into(), object_key: Some(key.clone()), ..base }
        }
        Resource::Function { name } => Asked { logical: format!("function:{name}"), ..base },
        Resource::Schedule { name } => Asked { logical: format!("schedule:{name}"), ..base },
        Resource::Queue { arn } => Asked { logical: format!("queue:{arn}"), ..base },
        Resource::Bus { arn } => Asked { logical: format!("bus:{arn}"), ..base },
        // A role of the stack, by its name's suffix (`<stack>-WakeRole`), as a `!GetAtt X.Arn`.
        Resource::Role { arn } => {
            Asked { logical: arn.rsplit(['/', '-']).next().unwrap_or_default().to_string(), ..base }
        }
        Resource::Bucket { .. } => panic!("{}: the functions never list a bucket", a.action),
    }
}

fn allows(st: &Statement, action: &str, a: &Asked) -> bool {
    if !st.actions.iter().any(|x| x == action) {
        return false;
    }
    let res_ok = st.resources.iter().any(|r| match r {
        Res::Table { logical, index } => a.object_key.is_none() && logical == &a.logical && index == &a.index,
        Res::Objects { bucket, prefix } => {
            bucket == &a.logical && a.object_key.as_deref().is_some_and(|k| k.starts_with(prefix.as_str()))
        }
        Res::Function { suffix } => a.logical.strip_prefix("function:").is_some_and(|n| n.ends_with(suffix.as_str())),
        Res::Schedule { suffix } => a.logical.strip_prefix("schedule:").is_some_and(|n| n.ends_with(suffix.as_str())),
        Res::Param { name } => {
            a.logical.split_once(':').is_some_and(|(_, arn)| param_values(name).iter().any(|p| like(p, arn)))
        }
    });
    let cond_ok = match (&st.leading_keys, &a.leading_key) {
        (None, _) => true,
        // ForAllValues with no key in the request is true (IAM User Guide, multivalued conditions).
        (Some(_), None) => true,
        (Some(patterns), Some(k)) => patterns.iter().any(|p| like(p, k)),
    };
    res_ok && cond_ok
}

fn denied<'a>(sts: &[Statement], accesses: &'a BTreeSet<Asked>) -> Vec<&'a Asked> {
    accesses.iter().filter(|a| !sts.iter().any(|st| allows(st, &a.action, a))).collect()
}

fn check(function: &str, sts: &[Statement], accesses: &BTreeSet<Asked>) -> Vec<String> {
    let d = denied(sts, accesses);
    assert!(d.is_empty(), "{function}: the template denies {d:#?}");
    if std::env::var(CHECK).as_deref() == Ok("allowed") {
        return Vec::new();
    }
    let mut mutations = Vec::new();
    for (i, st) in sts.iter().enumerate() {
        for action in &st.actions {
            assert!(
                accesses.iter().any(|a| allows(st, action, a)),
                "{function}: statement `{}` grants `{action}`, which nothing the function does uses",
                st.sid
            );
            // The mutation: the same policy without this one action in this one statement.
            let mut m = sts.to_vec();
            m[i].actions.retain(|x| x != action);
            let now_denied = denied(&m, accesses);
            assert!(!now_denied.is_empty(), "{function}: removing `{action}` from `{}` denies nothing", st.sid);
            mutations.push(format!(
                "{function}/{}: -{action} → denies {} call(s), e.g. {:?}",
                st.sid,
                now_denied.len(),
                now_denied[0]
            ));
        }
    }
    mutations
}

/// The scenarios above, each function's paths picked by hand (the paths that broke on AWS among
/// them): nothing they do is denied, as a check that needs no suite log. That every grant is used
/// and each one needed is the suite log's check ([`every_call_the_suite_made_is_allowed_and_every_grant_used`]),
/// over every path any test reaches.
#[tokio::test]
async fn the_scenarios_are_allowed_what_they_do() {
    let local = Local::new().await;
    let t = template();
    let mut seen: BTreeMap<&str, BTreeSet<Asked>> = BTreeMap::new();

    let (rec, tables) = sweep_scenarios(&local).await;
    seen.insert("PulseSweepFunction", rec.accesses().iter().map(|a| asked(a, &tables, None)).collect());
    assert!(rec.unmapped().is_empty(), "{:?}", rec.unmapped());
    let (rec, tables) = fanout_scenarios(&local).await;
    seen.insert("TenantFanoutFunction", rec.accesses().iter().map(|a| asked(a, &tables, None)).collect());
    let (rec, tables) = worker_scenarios(&local).await;
    assert!(rec.unmapped().is_empty(), "{:?}", rec.unmapped());
    assert!(
        rec.accesses()
            .iter()
            .any(|a| a.action == "dynamodb:PutItem"
                && a.leading_key.as_deref().is_some_and(|k| k.starts_with("b1#dead#"))),
        "the failing unit's dead letter is a put of its own"
    );
    seen.insert("QueueWorkerFunction", rec.accesses().iter().map(|a| asked(a, &tables, None)).collect());
    let (rec, tables, bucket) = archiver_scenarios(&local).await;
    assert!(rec.unmapped().is_empty(), "{:?}", rec.unmapped());
    seen.insert("ArchiverFunction", rec.accesses().iter().map(|a| asked(a, &tables, Some(&bucket))).collect());

    for (function, accesses) in &seen {
        let actions: BTreeSet<&str> = accesses.iter().map(|a| a.action.as_str()).collect();
        println!("{function}: {} distinct accesses, actions {actions:?}", accesses.len());
        let d = denied(&statements(&t, function), accesses);
        assert!(d.is_empty(), "{function}: the template denies {d:#?}");
    }
    // The archiver's intent is a Put and a Delete inside TransactWriteItems: the single-item
    // actions on the control table, scoped to its intent partition.
    let arch = &seen["ArchiverFunction"];
    for action in ["dynamodb:PutItem", "dynamodb:DeleteItem"] {
        assert!(arch.iter().any(|a| a.action == action
            && a.logical == "ControlTable"
            && a.leading_key.as_deref() == Some("intent#archiver")));
    }
}

#[test]
fn string_like_matches_as_iam_does() {
    assert!(like("cursor#*", "cursor#t1"));
    assert!(like("lease#pulse-sweep", "lease#pulse-sweep"));
    assert!(!like("lease#pulse-sweep", "lease#pulse-sweep2"));
    assert!(!like("wm#archiver", "wm#pulse-sweep"));
    assert!(like("a?c", "abc") && !like("a?c", "ac"));
}

// ------------------------------------------------------------------ the whole suite

/// The template's function of a role ([`tickwork::iam::acting_as`]).
fn function_of_role(role: &str) -> &'static str {
    match role {
        "pulse-sweep" => "PulseSweepFunction",
        "tenant-fanout" => "TenantFanoutFunction",
        "queue-worker" => "QueueWorkerFunction",
        "archiver" => "ArchiverFunction",
        "control" => "ControlFunction",
        other => panic!("a call made as `{other}`, which is no function of the template"),
    }
}

/// A test table's logical id, from the `-<logical>` its name ends with (every test names tables
/// `<unique>-<logical>`, and a deployed stack `<stack>-<logical>`).
fn logical_by_suffix(physical: &str) -> String {
    for (suffix, logical) in [
        ("-control", "ControlTable"),
        ("-tenants", "TenantsTable"),
        ("-queue", "QueueTable"),
        ("-summaries", "SummariesTable"),
        ("-changes", "ChangesTable"),
    ] {
        if physical.ends_with(suffix) {
            return logical.to_string();
        }
    }
    panic!("a call on `{physical}`, which is none of the stack's tables")
}

/// `allowed`: hold the log against the template's denials only, not every grant's use (a log of
/// part of the product, as `make chaos` runs it, leaves some grants unused).
const CHECK: &str = "TICKWORK_IAM_CHECK";

/// Every call any test of the suite made while a function's code ran (the IAM suite log,
/// `TICKWORK_IAM_LOG`, written by `make test` and `make chaos`), held against that function's
/// policy: nothing denied, every action of every statement used, and removing any one action
/// denies something. Run after the suite by `make iam-check`; alone it has nothing to read.
///
/// Left out: the example's own worker (`examples/monthly-report`, executable `month-*`), whose
/// handler writes a table of its own that its deployer grants, and calls on tables a test named
/// `no-such-*` so that the function refuses them.
#[tokio::test]
#[ignore = "reads the suite's log: `make iam-check` runs it after `make test` or `make chaos`"]
async fn every_call_the_suite_made_is_allowed_and_every_grant_used() {
    let allowed_only = std::env::var(CHECK).as_deref() == Ok("allowed");
    let dir = std::env::var(tickwork::iam::IAM_LOG).expect("TICKWORK_IAM_LOG names the suite log's directory");
    let logged = tickwork::iam::read_suite_log(std::path::Path::new(&dir)).expect("the suite log");
    let t = template();
    let mut seen: BTreeMap<&str, BTreeSet<Asked>> = BTreeMap::new();
    let mut skipped = 0;
    for l in &logged {
        // The example's own worker, and the tests that point a function at a table that does not
        // exist (`no-such-*`: a missing table is refused by name).
        let absent = matches!(&l.access.resource, Resource::Table { table, .. } if table.starts_with("no-such"));
        // `tickctl` runs with an operator's credentials, not a role of the template.
        if l.exe.starts_with("month") || absent || l.role == tickctl::ROLE {
            skipped += 1;
            continue;
        }
        assert!(!l.access.action.starts_with("unmapped:"), "{}: a call no mapper knows: {l:?}", l.exe);
        let a = asked_with(&l.access, &|t| logical_by_suffix(t), &|_| {});
        seen.entry(function_of_role(&l.role)).or_default().insert(a);
    }
    let mut mutations = Vec::new();
    for (function, accesses) in &seen {
        let actions: BTreeSet<&str> = accesses.iter().map(|a| a.action.as_str()).collect();
        println!("{function}: {} distinct accesses, actions {actions:?}", accesses.len());
        mutations.extend(check(function, &statements(&t, function), accesses));
    }
    if allowed_only {
        // `make chaos`: the four jobs under faults; the control function is not among them.
        println!("{} distinct calls logged ({skipped} left out), every one allowed", logged.len());
        return;
    }
    assert_eq!(seen.len(), 5, "every function's code ran: {:?}", seen.keys());
    // The paths that once broke on AWS alone are among those recorded.
    let worker = &seen["QueueWorkerFunction"];
    assert!(
        worker
            .iter()
            .any(|a| a.action == "dynamodb:PutItem" && a.leading_key.as_deref().is_some_and(|k| k.contains("#dead#"))),
        "a batch's unit dead letter was recorded"
    );
    println!(
        "{} distinct calls logged ({skipped} left out: the example's worker, absent tables, tickctl)",
        logged.len()
    );
    println!("mutations tried ({}), each denied something a test made the function do:", mutations.len());
    for m in &mutations {
        println!("  {m}");
    }
    assert!(mutations.len() >= 40, "{} mutations", mutations.len());
}
