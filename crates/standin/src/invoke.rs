//! A loopback stand-in for Lambda's Invoke API, and an engine that runs asynchronous invocations
//! the way Lambda does.
//!
//! Why: functions that invoke functions (the sweep's shard workers, the worker's drains) reach
//! Lambda through the SDK's client, and nothing here answers it. The Invoke API is one route —
//! `POST /2015-03-31/functions/{FunctionName}/invocations`, the invocation type in
//! `X-Amz-Invocation-Type` (`Event`: answered `202` at once and run later; `RequestResponse`:
//! answered `200` with the function's result, `X-Amz-Function-Error` set when it failed; "Invoke",
//! AWS Lambda API reference) — so a small server on `127.0.0.1:0` lets the real SDK client, its
//! signing, retries and interceptors included, drive local code.
//!
//! [`Engine`] is what runs the `Event` invocations: at most `reserved` at once (the function's
//! reserved concurrency; the rest wait in the queue, as Lambda's asynchronous queue holds a
//! throttled event), each with a real deadline `timeout` after it starts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// How the caller asked to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvocationType {
    /// Asynchronous: `202` at once.
    Event,
    /// Synchronous: the function's answer.
    RequestResponse,
    /// Permission check only: `204`.
    DryRun,
}

/// One invocation as the API received it.
#[derive(Debug, Clone)]
pub struct Request {
    /// `{FunctionName}` from the path.
    pub function: String,
    /// `X-Amz-Invocation-Type` (default `RequestResponse`).
    pub kind: InvocationType,
    /// The payload.
    pub payload: Vec<u8>,
}

/// A function's answer to a synchronous invocation.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// The result (or the error document).
    pub body: Vec<u8>,
    /// `Some("Unhandled")` when the function failed.
    pub function_error: Option<String>,
}

/// What Lambda refuses before it runs a function: a synchronous invocation over the function's
/// concurrency is answered `429 TooManyRequestsException` with `Reason`
/// `ReservedFunctionConcurrentInvocationLimitExceeded` ("Invoke", AWS Lambda API reference,
/// Errors; "Lambda function scaling": "when requests come in faster than your function can
/// scale, or when your function is at maximum concurrency, additional requests fail with a
/// throttling error (429 status code)"). The hint is Lambda's `Retry-After` header
/// (`retryAfterSeconds`). An `Event` invocation is never refused so: Lambda queues it and retries
/// the throttle itself.
#[derive(Debug, Default)]
pub struct Limits {
    /// Synchronous invocations the function may run at once (0: no limit).
    pub concurrency: AtomicU64,
    /// Until this instant (epoch ms) every synchronous invocation is throttled (0: never).
    pub throttled_until_ms: AtomicI64,
    /// The `Retry-After` a 429 carries, seconds (0: none).
    pub retry_after_s: AtomicU64,
    /// Invocations answered 429.
    pub throttled: AtomicU64,
    running: AtomicU64,
}

impl Limits {
    /// Whether an invocation arriving now is refused; if not, it counts as running until
    /// [`Limits::done`].
    fn admit(&self) -> bool {
        let now = jiff::Timestamp::now().as_millisecond();
        let over = |running: u64| {
            let cap = self.concurrency.load(Ordering::SeqCst);
            cap > 0 && running >= cap
        };
        if now < self.throttled_until_ms.load(Ordering::SeqCst)
            || self.running.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| (!over(r)).then_some(r + 1)).is_err()
        {
            self.throttled.fetch_add(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    fn done(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What runs an invocation.
pub type Handler = Arc<dyn Fn(Request) -> futures::future::BoxFuture<'static, Answer> + Send + Sync>;

/// The Invoke API on a loopback port; stops when dropped.
pub struct InvokeApi {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    /// Every request, in arrival order (function, type).
    pub seen: Arc<Mutex<Vec<(String, InvocationType)>>>,
    /// What it refuses ([`Limits`]): nothing until a test sets one.
    pub limits: Arc<Limits>,
}

impl Drop for InvokeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InvokeApi {
    /// Serves `handler` on `127.0.0.1:0`.
    pub async fn start(handler: Handler) -> Result<Self> {
        Self::start_on("127.0.0.1:0", handler).await
    }

    /// Serves `handler` on `addr` (a port a caller chose, to name it in an environment first).
    pub async fn start_on(addr: &str, handler: Handler) -> Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let seen: Arc<Mutex<Vec<(String, InvocationType)>>> = Default::default();
        let limits: Arc<Limits> = Default::default();
        let (log, lim) = (seen.clone(), limits.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((s, _)) = listener.accept().await else { return };
                let (h, log, lim) = (handler.clone(), log.clone(), lim.clone());
                tokio::spawn(async move {
                    let _ = serve(s, h, log, lim).await;
                });
            }
        });
        Ok(Self { addr, task, seen, limits })
    }

    /// The endpoint URL for the SDK's `endpoint_url`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn serve(
    stream: TcpStream,
    handler: Handler,
    log: Arc<Mutex<Vec<(String, InvocationType)>>>,
    limits: Arc<Limits>,
) -> Result<()> {
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let (mut len, mut kind) = (0usize, InvocationType::RequestResponse);
        loop {
            let mut h = String::new();
            r.read_line(&mut h).await?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim();
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.parse().unwrap_or(0);
                } else if k.eq_ignore_ascii_case("x-amz-invocation-type") {
                    kind = match v {
                        "Event" => InvocationType::Event,
                        "DryRun" => InvocationType::DryRun,
                        _ => InvocationType::RequestResponse,
                    };
                }
            }
        }
        let mut payload = vec![0; len];
        r.read_exact(&mut payload).await?;
        let function = path
            .strip_prefix("/2015-03-31/functions/")
            .and_then(|p| p.split('/').next())
            .map(|f| f.split('?').next().unwrap_or(f).to_string());
        let mut extra = String::new();
        let (status, body, error) = match (method.as_str(), function) {
            ("POST", Some(function)) if path.contains("/invocations") => {
                log.lock().expect("log").push((function.clone(), kind));
                let req = Request { function, kind, payload };
                match kind {
                    InvocationType::Event => {
                        tokio::spawn((handler)(req));
                        (202, Vec::new(), None)
                    }
                    InvocationType::DryRun => (204, Vec::new(), None),
                    InvocationType::RequestResponse if !limits.admit() => {
                        extra.push_str("x-amzn-ErrorType: TooManyRequestsException\r\n");
                        let after = limits.retry_after_s.load(Ordering::SeqCst);
                        if after > 0 {
                            extra.push_str(&format!("Retry-After: {after}\r\n"));
                        }
                        let body = br#"{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}"#;
                        (429, body.to_vec(), None)
                    }
                    InvocationType::RequestResponse => {
                        let a = (handler)(req).await;
                        limits.done();
                        (200, a.body, a.function_error)
                    }
                }
            }
            _ => (404, br#"{"Type":"User","message":"ResourceNotFoundException"}"#.to_vec(), None),
        };
        let mut head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nx-amzn-RequestId: standin-{}\r\nX-Amz-Executed-Version: $LATEST\r\n",
            match status {
                0..300 => "OK",
                429 => "Too Many Requests",
                _ => "Not Found",
            },
            body.len(),
            fastrand_id()
        );
        if let Some(e) = error {
            head.push_str(&format!("X-Amz-Function-Error: {e}\r\n"));
        }
        head.push_str(&extra);
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend(body);
        r.get_mut().write_all(&out).await?;
    }
}

fn fastrand_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// What the engine runs per event: the payload and its deadline (epoch ms).
pub type Run = Arc<dyn Fn(Vec<u8>, i64) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Runs asynchronous invocations as Lambda does: at most `reserved` at once, the rest queued,
/// each with a deadline `timeout` after it starts.
#[derive(Clone)]
pub struct Engine {
    permits: Arc<tokio::sync::Semaphore>,
    timeout: Duration,
    run: Run,
    /// Invocations started, running now, and the most at once.
    pub counts: Arc<EngineCounts>,
    /// What Lambda's asynchronous queue does that a test asks for ([`Delivery`]).
    pub delivery: Arc<Delivery>,
}

/// Lambda's asynchronous queue as its documentation warns it behaves ("Asynchronous invocation",
/// Lambda Developer Guide): "even if your function doesn't return an error, it's possible for it
/// to receive the same event from Lambda multiple times because the queue itself is eventually
/// consistent", and an event that waits in the queue past `MaximumEventAgeInSeconds` (the
/// function throttled, its concurrency taken) is discarded. Nothing happens until a test sets it.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Every `n`-th `Event` invocation received is run twice (0: none).
    pub duplicate_every: AtomicU64,
    /// An event still queued this long after it arrived is discarded, ms (0: never).
    pub max_age_ms: AtomicU64,
    /// `Event` invocations received.
    pub received: AtomicU64,
    /// Events run a second time.
    pub duplicated: AtomicU64,
    /// Events discarded for their age.
    pub aged_out: AtomicU64,
}

/// What an [`Engine`] has done.
#[derive(Debug, Default)]
pub struct EngineCounts {
    /// Started (a permit taken).
    pub started: AtomicU64,
    /// Finished.
    pub finished: AtomicU64,
    /// Running now.
    pub running: AtomicU64,
    /// The most running at once.
    pub peak: AtomicU64,
    /// Queued or running.
    pub pending: AtomicU64,
}

impl Engine {
    /// An engine of `reserved` concurrent invocations of `timeout` each.
    pub fn new(reserved: usize, timeout: Duration, run: Run) -> Self {
        Self {
            permits: Arc::new(tokio::sync::Semaphore::new(reserved.max(1))),
            timeout,
            run,
            counts: Default::default(),
            delivery: Default::default(),
        }
    }

    /// The API handler that runs `Event` invocations on this engine (and answers a synchronous
    /// one when it ends).
    pub fn handler(&self) -> Handler {
        let engine = self.clone();
        Arc::new(move |req: Request| {
            let engine = engine.clone();
            // Counted as pending as the request is taken, before the API answers 202: a caller
            // that waits for the engine to be idle right after an Invoke returned sees it.
            engine.counts.pending.fetch_add(1, Ordering::SeqCst);
            let twin = (req.kind == InvocationType::Event).then(|| {
                let d = &engine.delivery;
                let n = d.received.fetch_add(1, Ordering::SeqCst) + 1;
                let every = d.duplicate_every.load(Ordering::SeqCst);
                (every > 0 && n % every == 0).then(|| {
                    d.duplicated.fetch_add(1, Ordering::SeqCst);
                    engine.counts.pending.fetch_add(1, Ordering::SeqCst);
                })
            });
            Box::pin(async move {
                if let Some(Some(())) = twin {
                    let (twin, payload) = (engine.clone(), req.payload.clone());
                    tokio::spawn(async move { twin.run_counted(payload).await });
                }
                engine.run_counted(req.payload).await;
                Answer { body: b"null".to_vec(), function_error: None }
            })
        })
    }

    /// Runs one invocation when a permit frees (waits for it).
    pub async fn invoke(&self, payload: Vec<u8>) {
        self.counts.pending.fetch_add(1, Ordering::SeqCst);
        self.run_counted(payload).await
    }

    /// [`Engine::invoke`] of an invocation already counted as pending.
    async fn run_counted(&self, payload: Vec<u8>) {
        let c = &self.counts;
        let queued = tokio::time::Instant::now();
        let permit = self.permits.clone().acquire_owned().await.expect("engine semaphore");
        let max_age = self.delivery.max_age_ms.load(Ordering::SeqCst);
        if max_age > 0 && queued.elapsed() > Duration::from_millis(max_age) {
            self.delivery.aged_out.fetch_add(1, Ordering::SeqCst);
            c.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        c.started.fetch_add(1, Ordering::SeqCst);
        let now = c.running.fetch_add(1, Ordering::SeqCst) + 1;
        c.peak.fetch_max(now, Ordering::SeqCst);
        let deadline = jiff::Timestamp::now().as_millisecond() + self.timeout.as_millis() as i64;
        // Lambda ends the invocation at its deadline whatever the code does.
        let _ = tokio::time::timeout(self.timeout, (self.run)(payload, deadline)).await;
        c.running.fetch_sub(1, Ordering::SeqCst);
        c.finished.fetch_add(1, Ordering::SeqCst);
        c.pending.fetch_sub(1, Ordering::SeqCst);
        drop(permit);
    }

    /// Waits until nothing is queued or running (or `limit` passes; `false` then).
    pub async fn idle(&self, limit: Duration) -> bool {
        let end = tokio::time::Instant::now() + limit;
        while self.counts.pending.load(Ordering::SeqCst) > 0 {
            if tokio::time::Instant::now() > end {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(ran: Arc<AtomicU64>, each: Duration) -> Run {
        Arc::new(move |_: Vec<u8>, _: i64| {
            let ran = ran.clone();
            Box::pin(async move {
                ran.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(each).await;
            }) as futures::future::BoxFuture<'static, ()>
        })
    }

    #[tokio::test]
    async fn an_event_can_be_delivered_twice_and_one_queued_too_long_is_discarded() {
        let ran = Arc::new(AtomicU64::new(0));
        let e = Engine::new(1, Duration::from_secs(5), counting(ran.clone(), Duration::from_millis(200)));
        e.delivery.duplicate_every.store(2, Ordering::SeqCst);
        let h = e.handler();
        let ev = |n: u8| Request { function: "f".into(), kind: InvocationType::Event, payload: vec![n] };
        // The second event is run twice; with one at a time, the twin and the third wait behind
        // 200 ms runs and age out at 300 ms.
        e.delivery.max_age_ms.store(300, Ordering::SeqCst);
        for n in 0..3 {
            tokio::spawn((h)(ev(n)));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(e.idle(Duration::from_secs(5)).await);
        let d = &e.delivery;
        assert_eq!(d.received.load(Ordering::SeqCst), 3);
        assert_eq!(d.duplicated.load(Ordering::SeqCst), 1);
        let (ran, aged) = (ran.load(Ordering::SeqCst), d.aged_out.load(Ordering::SeqCst));
        assert_eq!(ran + aged, 4, "each delivery ran or aged out");
        assert!(aged >= 1 && ran >= 2, "ran {ran}, aged out {aged}");
    }
}
