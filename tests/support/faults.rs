//! Faults injected at the SDK boundary: an interceptor on a process's DynamoDB and S3 clients, so
//! the code under test is exactly what ships.
//!
//! What a fault does to the request and to the answer:
//!
//! | fault | the server | the caller sees |
//! |---|---|---|
//! | [`Fault::CrashBefore`] | nothing | this and every later call fail (the process died) |
//! | [`Fault::CrashAfter`] | applied | the answer lost, then every call fails (died after the write) |
//! | [`Fault::LoseAnswer`] | applied | a 500; the SDK sends the request again (a retry after a lost answer) |
//! | [`Fault::Throttle`] | nothing | `ThrottlingException` (S3: 503 `SlowDown`); the SDK backs off and retries |
//! | [`Fault::ServerError`] | nothing | a 500 (`InternalServerError`, S3 `InternalError`); retried |
//! | [`Fault::Conflict`] | nothing | TransactWriteItems cancelled with `TransactionConflict` (elsewhere a throttle) |
//! | [`Fault::TxnThrottle`] | nothing | TransactWriteItems cancelled with `ThrottlingError` on one item |
//! | [`Fault::Unprocessed`] | nothing | BatchWriteItem with every request in `UnprocessedItems` |
//! | [`Fault::Stall`] | — | the call blocks until the harness releases it (a paused process) |
//!
//! A fault that must not reach the server has its request neutralised before it is sent (turned
//! into a harmless `ListTables` / `ListBuckets`) and its answer replaced.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    BeforeTransmitInterceptorContextMut,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// The process dies before the request is sent.
    CrashBefore,
    /// The request is applied, then the process dies.
    CrashAfter,
    /// The request is applied and its answer lost; the SDK retries it.
    LoseAnswer,
    /// Throttled, not applied.
    Throttle,
    /// A server error, not applied.
    ServerError,
    /// A transaction conflict, not applied.
    Conflict,
    /// A throttled transaction item, not applied.
    TxnThrottle,
    /// Every batch write request unprocessed, not applied.
    Unprocessed,
    /// The call blocks until released ([`Faults::release`]).
    Stall,
}

impl Fault {
    /// A short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Fault::CrashBefore => "crash before send",
            Fault::CrashAfter => "crash after apply",
            Fault::LoseAnswer => "answer lost (retried)",
            Fault::Throttle => "throttle",
            Fault::ServerError => "server error",
            Fault::Conflict => "transaction conflict",
            Fault::TxnThrottle => "throttle in transaction",
            Fault::Unprocessed => "batch unprocessed",
            Fault::Stall => "stall past lease",
        }
    }
}

/// When a planned fault fires: the `nth` call (1-based) of operation `op` (any when `None`).
#[derive(Debug, Clone)]
pub struct Planned {
    /// Operation name (`DeleteItem`, `PutObject`, ...), or any.
    pub op: Option<&'static str>,
    /// Which call of it.
    pub nth: u64,
    /// What happens.
    pub fault: Fault,
}

/// Random faults: each call draws, with these chances (per mille).
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// Throttle (any operation; S3: SlowDown), per mille of attempts.
    pub throttle: u32,
    /// Conflict or throttled item on a TransactWriteItems attempt.
    pub txn: u32,
    /// Unprocessed BatchWriteItem attempt.
    pub unprocessed: u32,
    /// S3 500/503 attempt.
    pub s3_error: u32,
    /// Answer lost after a write was applied (once per call).
    pub lose_answer: u32,
}

#[derive(Debug, Default)]
struct State {
    crashed: bool,
    calls: BTreeMap<String, u64>,
    total: u64,
    plan: Vec<Planned>,
    rng: Option<fastrand::Rng>,
    rates: Rates,
    injected: BTreeMap<Fault, u64>,
    stalled: bool,
    released: bool,
}

/// The interceptor; clone it onto every client of one simulated process.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    st: Arc<(Mutex<State>, Condvar)>,
}

#[derive(Debug, Clone)]
struct Decision {
    fault: Fault,
    service: &'static str,
    original: Option<Vec<u8>>,
    items: usize,
}

impl Storable for Decision {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Clone, Copy)]
struct TxnItems(usize);

impl Storable for TxnItems {
    type Storer = StoreReplace<Self>;
}

impl Faults {
    /// No faults (yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a planned fault.
    pub fn plan(&self, p: Planned) -> &Self {
        self.st.0.lock().unwrap().plan.push(p);
        self
    }

    /// Crashes before the `nth` call of `op` (any op when `None`).
    pub fn crash_before(&self, op: Option<&'static str>, nth: u64) -> &Self {
        self.plan(Planned { op, nth, fault: Fault::CrashBefore })
    }

    /// Random faults from `seed` at `rates`.
    pub fn random(&self, seed: u64, rates: Rates) -> &Self {
        let mut g = self.st.0.lock().unwrap();
        g.rng = Some(fastrand::Rng::with_seed(seed));
        g.rates = rates;
        self
    }

    /// Has the process "died"?
    pub fn crashed(&self) -> bool {
        self.st.0.lock().unwrap().crashed
    }

    /// Calls seen so far (all operations).
    pub fn calls(&self) -> u64 {
        self.st.0.lock().unwrap().total
    }

    /// Calls of one operation seen so far.
    pub fn calls_of(&self, op: &str) -> u64 {
        self.st.0.lock().unwrap().calls.get(op).copied().unwrap_or(0)
    }

    /// Faults injected so far, by kind.
    pub fn injected(&self) -> BTreeMap<Fault, u64> {
        self.st.0.lock().unwrap().injected.clone()
    }

    /// Is a call blocked in a [`Fault::Stall`]?
    pub fn is_stalled(&self) -> bool {
        self.st.0.lock().unwrap().stalled
    }

    /// Lets a stalled call go on.
    pub fn release(&self) {
        let (m, cv) = &*self.st;
        m.lock().unwrap().released = true;
        cv.notify_all();
    }

    fn decide(&self, op: &str, first_attempt: bool, service: &'static str) -> Option<Fault> {
        let mut g = self.st.0.lock().unwrap();
        if first_attempt {
            g.total += 1;
            *g.calls.entry(op.to_string()).or_default() += 1;
            let n = g.calls[op];
            let total = g.total;
            if let Some(i) = g.plan.iter().position(|p| match p.op {
                Some(o) => o == op && p.nth == n,
                None => p.nth == total,
            }) {
                return Some(g.plan.remove(i).fault);
            }
        }
        let rates = g.rates.clone();
        let rng = g.rng.as_mut()?;
        let draw = |rng: &mut fastrand::Rng, per_mille: u32| per_mille > 0 && rng.u32(0..1000) < per_mille;
        let writes = matches!(
            op,
            "PutItem" | "UpdateItem" | "DeleteItem" | "TransactWriteItems" | "BatchWriteItem" | "PutObject"
        );
        if first_attempt && writes && draw(rng, rates.lose_answer) {
            return Some(Fault::LoseAnswer);
        }
        match (service, op) {
            ("s3", _) if draw(rng, rates.s3_error) => {
                Some(if rng.bool() { Fault::ServerError } else { Fault::Throttle })
            }
            ("dynamodb", "TransactWriteItems") if draw(rng, rates.txn) => {
                Some(if rng.bool() { Fault::Conflict } else { Fault::TxnThrottle })
            }
            ("dynamodb", "BatchWriteItem") if draw(rng, rates.unprocessed) => Some(Fault::Unprocessed),
            ("dynamodb", _) if draw(rng, rates.throttle) => Some(Fault::Throttle),
            _ => None,
        }
    }

    fn count(&self, f: Fault) {
        *self.st.0.lock().unwrap().injected.entry(f).or_default() += 1;
    }

    fn stall(&self) {
        let (m, cv) = &*self.st;
        let mut g = m.lock().unwrap();
        g.stalled = true;
        g.released = false;
        while !g.released {
            g = cv.wait(g).unwrap();
        }
        g.stalled = false;
    }
}

fn error_response(d: &Decision) -> (u16, Vec<(&'static str, String)>, String) {
    let ddb = |status: u16, ty: &str, msg: &str| {
        (
            status,
            vec![("content-type", "application/x-amz-json-1.0".to_string()), ("x-amzn-ErrorType", ty.to_string())],
            format!(r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{ty}","message":"{msg}"}}"#),
        )
    };
    let s3 = |status: u16, code: &str| {
        (
            status,
            vec![("content-type", "application/xml".to_string())],
            format!(
                r#"<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>injected</Message><RequestId>x</RequestId></Error>"#
            ),
        )
    };
    match (d.service, d.fault) {
        ("s3", Fault::Throttle) => s3(503, "SlowDown"),
        ("s3", _) => s3(500, "InternalError"),
        (_, Fault::Throttle) => ddb(400, "ThrottlingException", "Rate of requests exceeds the allowed throughput."),
        (_, Fault::Conflict | Fault::TxnThrottle) => {
            let code = if d.fault == Fault::Conflict { "TransactionConflict" } else { "ThrottlingError" };
            let mut reasons: Vec<String> = (0..d.items.max(1)).map(|_| r#"{"Code":"None"}"#.to_string()).collect();
            let at = d.items.saturating_sub(1) / 2;
            reasons[at] = format!(r#"{{"Code":"{code}","Message":"injected"}}"#);
            (
                400,
                vec![
                    ("content-type", "application/x-amz-json-1.0".to_string()),
                    ("x-amzn-ErrorType", "TransactionCanceledException".to_string()),
                ],
                format!(
                    r#"{{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","message":"Transaction cancelled, please refer cancellation reasons for specific reasons [{code}]","CancellationReasons":[{}]}}"#,
                    reasons.join(",")
                ),
            )
        }
        (_, Fault::Unprocessed) => {
            let items = d
                .original
                .as_ref()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                .map(|v| v["RequestItems"].clone())
                .unwrap_or(serde_json::json!({}));
            (
                200,
                vec![("content-type", "application/x-amz-json-1.0".to_string())],
                serde_json::json!({"UnprocessedItems": items}).to_string(),
            )
        }
        _ => ddb(500, "InternalServerError", "Internal server error"),
    }
}

impl Intercept for Faults {
    fn name(&self) -> &'static str {
        "Faults"
    }

    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(t) =
            ctx.input().downcast_ref::<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput>()
        {
            cfg.interceptor_state().store_put(TxnItems(t.transact_items().len()));
        }
        Ok(())
    }

    fn modify_before_transmit(
        &self,
        ctx: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.crashed() {
            return Err("injected: the process died".into());
        }
        let (service, op) = cfg
            .load::<Metadata>()
            .map(|m| (if m.service().eq_ignore_ascii_case("s3") { "s3" } else { "dynamodb" }, m.name().to_string()))
            .unwrap_or(("dynamodb", "?".into()));
        let attempt =
            cfg.load::<aws_smithy_runtime_api::client::retries::RequestAttempts>().map(|a| a.attempts()).unwrap_or(1);
        cfg.interceptor_state().unset::<Decision>();
        let Some(fault) = self.decide(&op, attempt <= 1, service) else { return Ok(()) };
        self.count(fault);
        match fault {
            Fault::CrashBefore => {
                self.st.0.lock().unwrap().crashed = true;
                return Err("injected: the process died before sending".into());
            }
            Fault::Stall => {
                // The call blocks its thread; tell the runtime first, so the tasks queued on this
                // worker move to another and the rest of the world goes on (a multi-thread
                // runtime is required).
                tokio::task::block_in_place(|| self.stall());
                return Ok(());
            }
            Fault::CrashAfter | Fault::LoseAnswer => {}
            _ => {
                // Not applied: send something harmless instead, answer with the fault.
                let original = ctx.request().body().bytes().map(|b| b.to_vec());
                let req = ctx.request_mut();
                if service == "s3" {
                    let uri = req.uri().to_string();
                    let root = uri.split('/').take(3).collect::<Vec<_>>().join("/") + "/";
                    let _ = req.set_uri(root);
                    let _ = req.set_method("GET");
                    *req.body_mut() = SdkBody::empty();
                    // Every header that describes the old body (chunked, trailer checksums,
                    // `Expect: 100-continue`) would make the server wait for it.
                    let names: Vec<String> = req.headers().iter().map(|(k, _)| k.to_string()).collect();
                    for n in names {
                        if !matches!(
                            n.to_ascii_lowercase().as_str(),
                            "host" | "authorization" | "x-amz-date" | "x-amz-security-token"
                        ) {
                            req.headers_mut().remove(n);
                        }
                    }
                    req.headers_mut().insert("content-length", "0");
                } else {
                    req.headers_mut().insert("x-amz-target", "DynamoDB_20120810.ListTables");
                    *req.body_mut() = SdkBody::from(r#"{"Limit":1}"#);
                    req.headers_mut().insert("content-length", "11");
                }
                let items = cfg.load::<TxnItems>().map(|t| t.0).unwrap_or(1);
                cfg.interceptor_state().store_put(Decision { fault, service, original, items });
                return Ok(());
            }
        }
        cfg.interceptor_state().store_put(Decision { fault, service, original: None, items: 1 });
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        ctx: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(d) = cfg.load::<Decision>().cloned() else { return Ok(()) };
        match d.fault {
            Fault::CrashAfter => {
                self.st.0.lock().unwrap().crashed = true;
                return Err("injected: the process died after the request was applied".into());
            }
            Fault::LoseAnswer => {
                let resp = ctx.response_mut();
                let (status, headers, body) = error_response(&Decision { fault: Fault::ServerError, ..d });
                *resp.status_mut() = aws_smithy_runtime_api::http::StatusCode::try_from(status).unwrap();
                for (k, v) in headers {
                    resp.headers_mut().insert(k, v);
                }
                *resp.body_mut() = SdkBody::from(body);
            }
            _ => {
                let (status, headers, body) = error_response(&d);
                let resp = ctx.response_mut();
                *resp.status_mut() = aws_smithy_runtime_api::http::StatusCode::try_from(status).unwrap();
                resp.headers_mut().remove("content-length");
                for (k, v) in headers {
                    resp.headers_mut().insert(k, v);
                }
                *resp.body_mut() = SdkBody::from(body);
            }
        }
        Ok(())
    }
}

/// Index lag, as DynamoDB has it and moto does not: a global secondary index is updated
/// asynchronously, so a Query on it may not yet show an item just written. This interceptor hides
/// the items whose `pk` is in its set from every Query on `index` (answers are rewritten after
/// they are parsed), until [`IndexLag::catch_up`].
#[derive(Debug, Clone)]
pub struct IndexLag {
    index: String,
    hidden: Arc<Mutex<std::collections::BTreeSet<String>>>,
    /// Items hidden so far.
    pub hid: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Debug, Clone)]
struct QueryIndex(String);

impl Storable for QueryIndex {
    type Storer = StoreReplace<Self>;
}

impl IndexLag {
    /// Lag on `index` for the items keyed `pks`.
    pub fn new(index: &str, pks: &[&str]) -> Self {
        Self {
            index: index.to_string(),
            hidden: Arc::new(Mutex::new(pks.iter().map(|p| p.to_string()).collect())),
            hid: Default::default(),
        }
    }

    /// The index has caught up: nothing is hidden any more.
    pub fn catch_up(&self) {
        self.hidden.lock().unwrap().clear();
    }
}

impl Intercept for IndexLag {
    fn name(&self) -> &'static str {
        "IndexLag"
    }

    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(q) = ctx.input().downcast_ref::<aws_sdk_dynamodb::operation::query::QueryInput>() {
            if let Some(i) = q.index_name() {
                cfg.interceptor_state().store_put(QueryIndex(i.to_string()));
            }
        }
        Ok(())
    }

    fn modify_before_completion(
        &self,
        ctx: &mut aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<QueryIndex>().map(|q| q.0.as_str()) != Some(self.index.as_str()) {
            return Ok(());
        }
        let hidden = self.hidden.lock().unwrap().clone();
        if let Some(Ok(out)) = ctx.output_or_error_mut() {
            if let Some(q) = out.downcast_mut::<aws_sdk_dynamodb::operation::query::QueryOutput>() {
                if let Some(items) = q.items.as_mut() {
                    let before = items.len();
                    items.retain(|i| i.get("pk").and_then(|v| v.as_s().ok()).is_none_or(|pk| !hidden.contains(pk)));
                    let gone = before - items.len();
                    q.count -= gone as i32;
                    q.scanned_count -= gone as i32;
                    self.hid.fetch_add(gone as u64, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        Ok(())
    }
}

/// An index that lags a claim: every Query on `index` also answers the items its previous answer
/// held (a claimed item's moved key not yet applied to the index), as DynamoDB's eventually
/// consistent global secondary indexes can and moto's never do.
#[derive(Debug, Clone, Default)]
pub struct StaleIndex {
    index: String,
    last: Arc<Mutex<Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>>>,
    /// Items answered again.
    pub echoed: Arc<std::sync::atomic::AtomicU64>,
}

impl StaleIndex {
    /// Lag on `index`.
    pub fn new(index: &str) -> Self {
        Self { index: index.to_string(), ..Default::default() }
    }
}

impl Intercept for StaleIndex {
    fn name(&self) -> &'static str {
        "StaleIndex"
    }

    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(q) = ctx.input().downcast_ref::<aws_sdk_dynamodb::operation::query::QueryInput>() {
            if let Some(i) = q.index_name() {
                cfg.interceptor_state().store_put(QueryIndex(i.to_string()));
            }
        }
        Ok(())
    }

    fn modify_before_completion(
        &self,
        ctx: &mut aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<QueryIndex>().map(|q| q.0.as_str()) != Some(self.index.as_str()) {
            return Ok(());
        }
        if let Some(Ok(out)) = ctx.output_or_error_mut() {
            if let Some(q) = out.downcast_mut::<aws_sdk_dynamodb::operation::query::QueryOutput>() {
                let mut last = self.last.lock().unwrap();
                let now: Vec<_> = q.items.clone().unwrap_or_default();
                let items = q.items.get_or_insert_with(Vec::new);
                for old in last.iter() {
                    if !items.iter().any(|i| i.get("pk") == old.get("pk")) {
                        items.insert(0, old.clone());
                        q.count += 1;
                        self.echoed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
                *last = now;
            }
        }
        Ok(())
    }
}
