//! A slow table: every request waits a fixed time before it is sent, asynchronously (the
//! process's other requests go on meanwhile), as a round trip to a loaded DynamoDB would. The
//! local server answers in a millisecond or two when idle and in hundreds under the whole suite;
//! a test of what must fit in a deadline runs on this to meet the slow case every time.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;

/// The SDK's own HTTP client behind a delay.
#[derive(Debug)]
pub struct Slow {
    inner: SharedHttpClient,
    delay: Duration,
}

#[derive(Debug)]
struct SlowConnector {
    inner: SharedHttpConnector,
    delay: Duration,
}

impl HttpConnector for SlowConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (inner, delay) = (self.inner.clone(), self.delay);
        HttpConnectorFuture::new(async move {
            tokio::time::sleep(delay).await;
            inner.call(request).await
        })
    }
}

impl HttpClient for Slow {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(SlowConnector {
            inner: self.inner.http_connector(settings, components),
            delay: self.delay,
        })
    }
}

impl Slow {
    /// `sdk`'s HTTP client, each request `delay` late.
    pub fn of(sdk: &SdkConfig, delay: Duration) -> Self {
        // The SDK's default client resolves lazily, so it is built here to be wrapped.
        let inner = sdk.http_client().unwrap_or_else(|| aws_smithy_http_client::Builder::new().build_http());
        Self { inner, delay }
    }
}
