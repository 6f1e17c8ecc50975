//! A slow table: every request waits before it is sent and before its answer is read,
//! asynchronously (the process's other requests go on meanwhile), as a round trip to DynamoDB
//! would — a fixed time, and a time for each kilobyte on the wire when a test or a benchmark says
//! a request's time grows with its size. The local server answers in a millisecond or two when
//! idle and in hundreds under the whole suite; a test of what must fit in a deadline runs on this
//! to meet the slow case every time, and the benchmarks to stand for DynamoDB's round trips.
//!
//! Each request can be kept ([`Sent`]): its operation, its bytes each way and its time, so that
//! a benchmark can say where its time went beside its model.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// How late a request is: `base`, and `per_kb` for each 1,024 bytes of its request and answer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Delay {
    /// Every request.
    pub base: Duration,
    /// Each kilobyte sent or received.
    pub per_kb: Duration,
}

impl Delay {
    /// A fixed delay.
    pub fn fixed(base: Duration) -> Self {
        Self { base, per_kb: Duration::ZERO }
    }

    /// The delay of `bytes` on the wire, beyond the base.
    pub fn of_bytes(&self, bytes: usize) -> Duration {
        self.per_kb.mul_f64(bytes as f64 / 1024.0)
    }
}

/// One request as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// Its operation (`Query`, `TransactWriteItems`, ...), from its `X-Amz-Target`.
    pub op: String,
    /// Bytes of its body.
    pub request_bytes: usize,
    /// Bytes of its answer's body (its `Content-Length`).
    pub response_bytes: usize,
    /// From its send to its answer, the delays included.
    pub took: Duration,
}

/// The requests kept, in the order they were answered.
pub type Log = Arc<Mutex<Vec<Sent>>>;

/// The SDK's own HTTP client behind a delay.
#[derive(Debug)]
pub struct Slow {
    inner: SharedHttpClient,
    delay: Delay,
    log: Option<Log>,
}

#[derive(Debug)]
struct SlowConnector {
    inner: SharedHttpConnector,
    delay: Delay,
    log: Option<Log>,
}

impl HttpConnector for SlowConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (inner, delay, log) = (self.inner.clone(), self.delay, self.log.clone());
        let op = request.headers().get("x-amz-target").and_then(|t| t.rsplit('.').next()).unwrap_or("").to_string();
        let request_bytes = request.body().bytes().map_or(0, <[u8]>::len);
        HttpConnectorFuture::new(async move {
            let start = Instant::now();
            tokio::time::sleep(delay.base + delay.of_bytes(request_bytes)).await;
            let response = inner.call(request).await?;
            let response_bytes =
                response.headers().get("content-length").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
            tokio::time::sleep(delay.of_bytes(response_bytes)).await;
            if let Some(log) = log {
                let sent = Sent { op, request_bytes, response_bytes, took: start.elapsed() };
                log.lock().expect("request log").push(sent);
            }
            Ok(response)
        })
    }
}

impl HttpClient for Slow {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(SlowConnector {
            inner: self.inner.http_connector(settings, components),
            delay: self.delay,
            log: self.log.clone(),
        })
    }
}

impl Slow {
    /// `sdk`'s HTTP client, each request `delay` late.
    pub fn of(sdk: &SdkConfig, delay: Duration) -> Self {
        Self::sized(sdk, Delay::fixed(delay), None)
    }

    /// `sdk`'s HTTP client, each request late by `delay` for its size, kept in `log` when given.
    pub fn sized(sdk: &SdkConfig, delay: Delay, log: Option<Log>) -> Self {
        // The SDK's default client resolves lazily, so it is built here to be wrapped.
        let inner = sdk.http_client().unwrap_or_else(|| aws_smithy_http_client::Builder::new().build_http());
        Self { inner, delay, log }
    }
}
