//! Targets: a kind's units delivered to a function in another language, run in its real runtime
//! (Python under `awslambdaric`, JavaScript under `aws-lambda-ric`) behind the local Invoke API,
//! reached through the Lambda SDK client as on AWS; to an SQS queue (standard and FIFO) and an
//! EventBridge bus on the local server. Faults at the SDK boundary (interceptors).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType};
use aws_sdk_eventbridge::operation::put_events::{PutEventsInput, PutEventsOutput};
use aws_sdk_eventbridge::types::PutEventsResultEntry;
use aws_sdk_sqs::operation::send_message_batch::{SendMessageBatchInput, SendMessageBatchOutput};
use aws_sdk_sqs::types::{BatchResultErrorEntry, QueueAttributeName};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextMut, FinalizerInterceptorContextMut,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::OrchestratorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use lambda_standin::invoke::InvokeApi;
use lambda_standin::runtime::Function;
use queue_worker::targets::{parse_arn, Target};
use queue_worker::{Registry, Report, WorkerConfig};
use tickwork::budget::Unlimited;
use tickwork::clock::Clock;
use tickwork::config::Env;
use tickwork::queue::{Queue, QueueConfig};
use tickwork::tenants::Tenant;
use tickwork_lambda::Tick;
use tickwork_sim::queued_units;
use tickwork_tests::{ms, owed_from_yesterday, unique, Local};

/// The ARNs the tests route to: the IAM check deploys the template's target parameters with
/// these (`iam::param_values`). Each function test serves its ARN from an Invoke API of its own.
pub const FUNCTION_ARN: &str = "arn:aws:lambda:us-east-1:123456789012:function:tickwork-handler";
/// Every test queue's ARN begins so (moto's account and region).
pub const QUEUE_ARN_PREFIX: &str = "arn:aws:sqs:us-east-1:123456789012:tickwork-target-";
/// Every test bus's ARN begins so.
pub const BUS_ARN_PREFIX: &str = "arn:aws:events:us-east-1:123456789012:event-bus/tickwork-target-";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf()
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Runtime {
    Python,
    JavaScript,
}

/// The example handler of `runtime`, started under its runtime interface client.
pub(crate) async fn start(runtime: Runtime, local: &Local, effects: &str) -> Arc<Function> {
    let repo = repo();
    let (program, args, dir): (PathBuf, Vec<String>, PathBuf) = match runtime {
        Runtime::Python => (
            repo.join(".tools/python-handler/bin/python"),
            vec!["-m".into(), "awslambdaric".into(), "handler.handle".into()],
            repo.join("examples/python-handler"),
        ),
        Runtime::JavaScript => (
            PathBuf::from("node"),
            vec![
                repo.join("examples/javascript-handler/node_modules/aws-lambda-ric/bin/index.mjs")
                    .display()
                    .to_string(),
                "index.handler".into(),
            ],
            repo.join("examples/javascript-handler"),
        ),
    };
    let installed = match runtime {
        Runtime::Python => program.exists(),
        Runtime::JavaScript => dir.join("node_modules/aws-lambda-ric/dist/rapid-client.node").exists(),
    };
    assert!(installed, "{runtime:?}'s runtime interface client is not installed: run `make deps`");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = [
        ("EFFECTS_TABLE", effects),
        ("AWS_ENDPOINT_URL_DYNAMODB", local.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("EXAMPLE_FAIL_TENANTS", "t-fail"),
        ("EXAMPLE_RAISE_TENANTS", "t-raise"),
        ("EXAMPLE_POISON_TENANTS", "t-poison"),
    ];
    Arc::new(Function::start(program, &args, dir, &env, Duration::from_secs(20)).await.expect("the handler starts"))
}

/// A table with a string `pk`: the handlers' effects.
pub(crate) async fn effects_table(local: &Local) -> String {
    let name = unique("effects");
    local
        .db
        .client()
        .create_table()
        .table_name(&name)
        .attribute_definitions(
            AttributeDefinition::builder().attribute_name("pk").attribute_type(ScalarAttributeType::S).build().unwrap(),
        )
        .key_schema(KeySchemaElement::builder().attribute_name("pk").key_type(KeyType::Hash).build().unwrap())
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await
        .expect("effects table");
    name
}

/// Every `pk` of `table` with its `runtime`.
pub(crate) async fn effects(local: &Local, table: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut start = None;
    loop {
        let r = local.db.client().scan().table_name(table).set_exclusive_start_key(start).send().await.unwrap();
        for i in r.items() {
            let s = |k: &str| i.get(k).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            assert!(out.insert(s("pk"), s("runtime")).is_none(), "a key written twice");
        }
        start = r.last_evaluated_key().cloned();
        if start.is_none() {
            return out;
        }
    }
}

/// Ten tenants in UTC plus `t-fail` (its handler lists its units as failed, always), `t-raise`
/// (its units make the handler raise on their first attempt) and `t-poison` (its units make the
/// handler raise on every attempt), owed from yesterday, swept at
/// December 1st's midnight: November's month pulse and the days and week before it, queued as one
/// batch. Returns the queue and the unit keys queued.
async fn month_pulses(local: &Local) -> (Queue, BTreeSet<String>) {
    let tables = local.sweep_tables().await;
    let cfg = pulse_sweep::PulseConfig::from_env(&Env::from_pairs([]), Duration::from_secs(1)).unwrap();
    let deps = pulse_sweep::Deps::new(local.fresh_db(), local.clock(), cfg, tables.clone(), 1, QueueConfig::default());
    let now = ms("2026-11-30T12:00:00Z");
    local.clock.set(now);
    let mut ts: Vec<Tenant> = (0..10).map(|i| Tenant::new(format!("t{i:02}"), "UTC")).collect();
    ts.push(Tenant::new("t-fail", "UTC"));
    ts.push(Tenant::new("t-raise", "UTC"));
    ts.push(Tenant::new("t-poison", "UTC"));
    pulse_sweep::add_tenants(&deps, &owed_from_yesterday(ts, now)).await.unwrap();
    let at = ms("2026-12-01T00:05:00Z");
    local.clock.set(at);
    pulse_sweep::run(&deps, &Tick::parse(&Tick::envelope(at, false)).unwrap(), &Unlimited, "s").await.unwrap();
    let queued = queued_units(&local.db, &tables.queue).await.unwrap();
    assert!(queued.values().all(|n| *n == 1));
    let keys: BTreeSet<String> = queued.into_keys().collect();
    assert!(keys.contains("pulse#t00#month#2026-11"), "{keys:?}");
    let q = Queue::new(local.fresh_db(), &tables.queue, QueueConfig::default(), local.clock());
    (q, keys)
}

/// Drains until nothing is left to retry, two hours apart (past every backoff).
async fn drain_all(local: &Local, q: &Queue, reg: &Registry) -> Vec<Report> {
    let mut reports = Vec::new();
    for _ in 0..10 {
        let r = queue_worker::drain(q, reg, &unique("w"), &Unlimited, &WorkerConfig::default()).await.unwrap();
        let idle = r.claimed == 0;
        reports.push(r);
        if idle {
            return reports;
        }
        local.clock.set(local.clock.now_ms() + 2 * 3_600_000);
    }
    panic!("the queue did not empty: {reports:#?}");
}

async fn month_pulse_to(runtime: Runtime, arn: &str) {
    let local = Local::new().await;
    let table = effects_table(&local).await;
    let f = start(runtime, &local, &table).await;
    let api = InvokeApi::start(f.handler()).await.unwrap();
    let (q, keys) = month_pulses(&local).await;
    // Through the Lambda SDK client, as on AWS, routed by the worker's own setting.
    let sdk = local.sdk.to_builder().endpoint_url(api.endpoint()).build();
    let env = Env::from_pairs([("TICKWORK_TARGETS", format!("pulse={arn}").as_str())]);
    let reg = queue_worker::targets::route(Registry::new(), &env, &sdk, &local.clock()).unwrap();
    let reports = drain_all(&local, &q, &reg).await;
    let printed = f.printed();

    // Each (tenant, period) handled once, in this runtime; t-raise's too, on its second attempt.
    let got = effects(&local, &table).await;
    let lost = |k: &String| k.contains("#t-fail#") || k.contains("#t-poison#");
    let want: BTreeSet<String> = keys.iter().filter(|k| !lost(k)).cloned().collect();
    assert_eq!(got.keys().cloned().collect::<BTreeSet<_>>(), want, "{printed}");
    let name = match runtime {
        Runtime::Python => "python",
        Runtime::JavaScript => "nodejs",
    };
    assert!(got.values().all(|r| r == name));
    assert!(want.iter().any(|k| k.contains("#t-raise#")));
    // A raise failed its whole call: call-mates of the raising tenants' units went back with them.
    assert!(printed.contains("is not ready yet") && printed.contains("cannot be handled"), "{printed}");
    let raising = keys.iter().filter(|k| k.contains("#t-raise#") || k.contains("#t-poison#")).count() as u64;
    assert!(reports[0].retried >= 1 && reports[0].units_failed > raising, "{:#?}", reports[0]);
    // t-fail's units (listed in batchItemFailures) and t-poison's (raising every time) are
    // dead-lettered after the queue's attempts, without a batch-mate: on the last attempt a unit
    // is a call of its own, so a raise takes no call-mate down. Nothing else is.
    let dead = q.dead_letters().await.unwrap();
    let dead_units: u64 = dead.iter().map(|d| d.units.max(1)).sum();
    let doomed = keys.iter().filter(|k| lost(k)).count() as u64;
    assert_eq!(dead_units, doomed, "{dead:#?}");
    for d in &dead {
        let tenants: BTreeSet<&str> =
            d.tenant.iter().map(String::as_str).chain(d.tenants.iter().map(String::as_str)).collect();
        assert!(tenants.iter().all(|t| ["t-fail", "t-poison"].contains(t)), "{d:#?}");
        assert_eq!(d.attempts, QueueConfig::default().max_attempts);
    }
    let errors: String = dead.iter().map(|d| d.last_error.clone()).collect();
    assert!(errors.contains("batchItemFailures") || errors.contains("cannot be handled"), "{errors}");
    println!(
        "{runtime:?}: {} units, {} handled, {} dead-lettered alone, {} invocations, {} drains",
        keys.len(),
        got.len(),
        dead_units,
        f.invocations.load(std::sync::atomic::Ordering::SeqCst),
        reports.len()
    );
}

#[tokio::test]
async fn a_month_pulse_reaches_a_python_handler_in_its_runtime() {
    month_pulse_to(Runtime::Python, FUNCTION_ARN).await;
}

#[tokio::test]
async fn a_month_pulse_reaches_a_javascript_handler_in_its_runtime() {
    month_pulse_to(Runtime::JavaScript, FUNCTION_ARN).await;
}

// ------------------------------------------------------------------ SQS and EventBridge

/// Per request: the entry this fault took out of it (its id and index), if any.
#[derive(Debug, Clone)]
struct Removed(String, usize);
impl Storable for Removed {
    type Storer = StoreReplace<Self>;
}

/// Faults at the SDK boundary for SendMessageBatch and PutEvents. `fail_key`: the entry carrying
/// that unit key is taken out of its first request and reported failed by the service's fault
/// (SQS `InternalError`, EventBridge `InternalFailure`), as the service does for an entry it did
/// not accept. `lose_first`: the first request is applied and its answer lost. Records every
/// request's (key, deduplication id) pairs.
#[derive(Debug, Clone, Default)]
struct EntryFaults {
    fail_key: Option<String>,
    lose_first: bool,
    state: Arc<Mutex<FaultState>>,
}

#[derive(Debug, Default)]
struct FaultState {
    failed: bool,
    lost: bool,
    sent: Vec<Vec<(String, String)>>,
}

impl Intercept for EntryFaults {
    fn name(&self) -> &'static str {
        "entry-faults"
    }

    fn modify_before_serialization(
        &self,
        ctx: &mut BeforeSerializationInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut st = self.state.lock().unwrap();
        if let Some(i) = ctx.input_mut().downcast_mut::<SendMessageBatchInput>() {
            let entries = i.entries.get_or_insert_with(Vec::new);
            let key_of = |e: &aws_sdk_sqs::types::SendMessageBatchRequestEntry| {
                e.message_attributes()
                    .and_then(|a| a.get("key"))
                    .and_then(|v| v.string_value())
                    .unwrap_or("")
                    .to_string()
            };
            if let (Some(k), false) = (&self.fail_key, st.failed) {
                if let Some(at) = entries.iter().position(|e| key_of(e) == *k) {
                    st.failed = true;
                    let e = entries.remove(at);
                    cfg.interceptor_state().store_put(Removed(e.id().to_string(), at));
                }
            }
            st.sent.push(
                entries.iter().map(|e| (key_of(e), e.message_deduplication_id().unwrap_or("").to_string())).collect(),
            );
        }
        if let Some(i) = ctx.input_mut().downcast_mut::<PutEventsInput>() {
            let entries = i.entries.get_or_insert_with(Vec::new);
            let key_of = |e: &aws_sdk_eventbridge::types::PutEventsRequestEntry| {
                let d: serde_json::Value = serde_json::from_str(e.detail().unwrap_or("{}")).unwrap();
                d["key"].as_str().unwrap_or("").to_string()
            };
            if let (Some(k), false) = (&self.fail_key, st.failed) {
                if let Some(at) = entries.iter().position(|e| key_of(e) == *k) {
                    st.failed = true;
                    entries.remove(at);
                    cfg.interceptor_state().store_put(Removed(String::new(), at));
                }
            }
            st.sent.push(entries.iter().map(|e| (key_of(e), String::new())).collect());
        }
        Ok(())
    }

    fn modify_before_completion(
        &self,
        ctx: &mut FinalizerInterceptorContextMut<'_>,
        _rc: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let removed = cfg.load::<Removed>().cloned();
        let mut st = self.state.lock().unwrap();
        let Some(out) = ctx.output_or_error_mut() else { return Ok(()) };
        if self.lose_first && !st.lost {
            st.lost = true;
            *out = Err(OrchestratorError::other("the connection closed before the answer (the request was applied)"));
            return Ok(());
        }
        let (Ok(out), Some(Removed(id, at))) = (out, removed) else { return Ok(()) };
        if let Some(o) = out.downcast_mut::<SendMessageBatchOutput>() {
            let e = BatchResultErrorEntry::builder().id(id).sender_fault(false).code("InternalError").build().unwrap();
            o.failed.push(e);
        }
        if let Some(o) = out.downcast_mut::<PutEventsOutput>() {
            let e = PutEventsResultEntry::builder().error_code("InternalFailure").error_message("injected").build();
            o.entries.get_or_insert_with(Vec::new).insert(at, e);
            o.failed_entry_count += 1;
        }
        Ok(())
    }
}

async fn create_queue(local: &Local, fifo: bool) -> (aws_sdk_sqs::Client, String, String) {
    let sqs = aws_sdk_sqs::Client::new(&local.sdk);
    let name = format!("tickwork-target-{}{}", unique("q"), if fifo { ".fifo" } else { "" });
    let mut c = sqs.create_queue().queue_name(&name);
    if fifo {
        c = c.attributes(QueueAttributeName::FifoQueue, "true");
    }
    let url = c.send().await.expect("create queue").queue_url().unwrap().to_string();
    let arn = format!("{QUEUE_ARN_PREFIX}{}", name.trim_start_matches("tickwork-target-"));
    (sqs, url, arn)
}

/// Every message on the queue, received and deleted: (key attribute or body, body).
async fn receive_all(sqs: &aws_sdk_sqs::Client, url: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        let r = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap();
        if r.messages().is_empty() {
            return out;
        }
        for m in r.messages() {
            let key = m
                .message_attributes()
                .and_then(|a| a.get("key"))
                .and_then(|v| v.string_value())
                .unwrap_or_default()
                .to_string();
            out.push((key, m.body().unwrap_or_default().to_string()));
            sqs.delete_message().queue_url(url).receipt_handle(m.receipt_handle().unwrap()).send().await.unwrap();
        }
    }
}

fn sqs_client(local: &Local, faults: &EntryFaults) -> aws_sdk_sqs::Client {
    let mut b = aws_sdk_sqs::config::Builder::from(&local.sdk).interceptor(faults.clone());
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r.map(queue_worker::targets::sqs_accesses));
    }
    aws_sdk_sqs::Client::from_conf(b.build())
}

async fn to_queue(fifo: bool, faults: EntryFaults) -> (Vec<(String, String)>, BTreeSet<String>, Vec<Report>) {
    let local = Local::new().await;
    let (sqs, _, arn) = create_queue(&local, fifo).await;
    let (q, keys) = month_pulses(&local).await;
    // The worker sends to the URL it derives from the ARN, as it would on AWS.
    let Target::Queue { url, fifo: is_fifo, .. } = parse_arn(&arn).unwrap() else { panic!("{arn}") };
    assert_eq!(is_fifo, fifo);
    let target = queue_worker::targets::queue::QueueTarget::new(sqs_client(&local, &faults), &url, fifo);
    let reg = Registry::new().with("pulse", Arc::new(target));
    let reports = drain_all(&local, &q, &reg).await;
    assert!(q.dead_letters().await.unwrap().is_empty());
    (receive_all(&sqs, &url).await, keys, reports)
}

/// A standard queue: every unit delivered, once, its body the unit; the entry SQS failed is
/// sent again, alone, and arrives once.
#[tokio::test]
async fn every_unit_reaches_a_standard_queue_and_a_failed_entry_is_sent_again() {
    let faults = EntryFaults { fail_key: Some("pulse#t03#month#2026-11".into()), ..Default::default() };
    let (got, keys, reports) = to_queue(false, faults.clone()).await;
    let received: Vec<&String> = got.iter().map(|(k, _)| k).collect();
    assert_eq!(received.len(), keys.len(), "each unit once");
    assert_eq!(received.into_iter().cloned().collect::<BTreeSet<_>>(), keys);
    for (key, body) in &got {
        let b: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(b["key"], key.as_str());
        assert_eq!(b["kind"], "pulse");
    }
    let st = faults.state.lock().unwrap();
    assert!(st.failed);
    assert!(st.sent.iter().all(|r| r.len() <= 10), "10 entries a request at most");
    let resent: Vec<&Vec<(String, String)>> =
        st.sent.iter().filter(|r| r.iter().any(|(k, _)| k.contains("#t03#month#"))).collect();
    assert_eq!(resent.len(), 1, "taken out of the first request, in the retry only: {resent:?}");
    assert_eq!(reports[0].retried, 1, "{:#?}", reports[0]);
    assert_eq!(reports[0].units_failed, 1);
}

/// A FIFO queue whose first request was applied and its answer lost: the batch runs again with
/// the same deduplication ids, and SQS keeps each unit once; the group id is the tenant.
#[tokio::test]
async fn a_fifo_queue_sees_the_same_deduplication_ids_when_a_batch_runs_again() {
    let faults = EntryFaults { lose_first: true, ..Default::default() };
    let (got, keys, _) = to_queue(true, faults.clone()).await;
    let st = faults.state.lock().unwrap();
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sends: BTreeMap<String, usize> = BTreeMap::new();
    for (k, d) in st.sent.iter().flatten() {
        ids.entry(k.clone()).or_default().insert(d.clone());
        *sends.entry(k.clone()).or_default() += 1;
    }
    let again: Vec<&String> = sends.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k).collect();
    assert!(!again.is_empty(), "the lost request's units were sent again");
    for (k, d) in &ids {
        assert_eq!(d.len(), 1, "{k}: one deduplication id however often it is sent: {d:?}");
        assert_eq!(d.iter().next().unwrap().len(), 64);
    }
    let received: Vec<&String> = got.iter().map(|(k, _)| k).collect();
    assert_eq!(
        received.len(),
        keys.len(),
        "SQS dropped the resent copies: {} received for {} units",
        received.len(),
        keys.len()
    );
    assert_eq!(received.into_iter().cloned().collect::<BTreeSet<_>>(), keys);
}

/// An EventBridge bus, a rule on `source: tickwork` sending to a queue: every unit arrives once as
/// an event whose detail-type is the kind and detail the unit; the entry EventBridge failed is put
/// again.
#[tokio::test]
async fn every_unit_reaches_a_bus_as_an_event_and_a_failed_entry_is_put_again() {
    let local = Local::new().await;
    let (sqs, url, queue_arn) = create_queue(&local, false).await;
    let events = aws_sdk_eventbridge::Client::new(&local.sdk);
    let bus = format!("tickwork-target-{}", unique("bus"));
    events.create_event_bus().name(&bus).send().await.expect("create bus");
    let bus_arn = format!("{BUS_ARN_PREFIX}{}", bus.trim_start_matches("tickwork-target-"));
    events
        .put_rule()
        .name("to-queue")
        .event_bus_name(&bus)
        .event_pattern(r#"{"source": ["tickwork"]}"#)
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule("to-queue")
        .event_bus_name(&bus)
        .targets(aws_sdk_eventbridge::types::Target::builder().id("q").arn(&queue_arn).build().unwrap())
        .send()
        .await
        .unwrap();
    let (q, keys) = month_pulses(&local).await;
    let faults = EntryFaults { fail_key: Some("pulse#t05#month#2026-11".into()), ..Default::default() };
    let mut b = aws_sdk_eventbridge::config::Builder::from(&local.sdk).interceptor(faults.clone());
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r.map(queue_worker::targets::events_accesses));
    }
    let target =
        queue_worker::targets::bus::BusTarget::new(aws_sdk_eventbridge::Client::from_conf(b.build()), &bus_arn);
    let reg = Registry::new().with("pulse", Arc::new(target));
    let reports = drain_all(&local, &q, &reg).await;
    assert!(q.dead_letters().await.unwrap().is_empty());
    let mut got = Vec::new();
    for (_, body) in receive_all(&sqs, &url).await {
        let event: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(event["source"], "tickwork");
        assert_eq!(event["detail-type"], "pulse");
        got.push(event["detail"]["key"].as_str().unwrap().to_string());
    }
    assert_eq!(got.len(), keys.len(), "each unit once");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), keys);
    assert!(faults.state.lock().unwrap().failed);
    assert_eq!(reports[0].retried, 1, "{:#?}", reports[0]);
}
