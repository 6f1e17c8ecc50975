//! Helpers: how the leader of a boundary tick shares its shards with other invocations of its own
//! function. Lambda's own concurrency is the engine: the leader sends `n` asynchronous
//! invocations (`InvocationType: Event`, "Invoke", AWS Lambda API reference) of the same function
//! with a helper event ([`Tick::helper_envelope`]); each takes the shards it can under a lease per
//! shard (`shared`), and whichever finds every shard done advances the watermark.
//!
//! A helper that never starts (throttled, the asynchronous queue full) loses nothing: its shards
//! are taken by the other workers, or by the next tick, from their checkpoints. So starting
//! helpers is best effort and a failure to start one is logged, never the tick's failure.

use std::fmt::Debug;

use futures::future::BoxFuture;
use tickwork_lambda::Tick;

/// Starts helper invocations for a tick.
pub trait Helpers: Send + Sync + Debug {
    /// Asks for `n` helpers of the tick at `tick.time_ms`; answers how many were started.
    fn start<'a>(&'a self, tick: &'a Tick, leader: &'a str, n: u32) -> BoxFuture<'a, u32>;
}

/// The deployed engine: asynchronous invocations of this very function.
#[derive(Debug, Clone)]
pub struct LambdaHelpers {
    client: aws_sdk_lambda::Client,
    /// `AWS_LAMBDA_FUNCTION_NAME`, set by Lambda in every function's environment.
    function: String,
}

impl LambdaHelpers {
    /// Invokes `function` with `client` (tests point it at a local Invoke API).
    pub fn new(client: aws_sdk_lambda::Client, function: impl Into<String>) -> Self {
        Self { client, function: function.into() }
    }

    /// The engine for the function this process runs as; `None` outside Lambda (no
    /// `AWS_LAMBDA_FUNCTION_NAME`): the leader then pages every shard itself.
    pub fn from_sdk(sdk: &aws_config::SdkConfig) -> Option<Self> {
        let function = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok().filter(|f| !f.is_empty())?;
        Some(Self { client: tickwork_lambda::lambda_client(sdk), function })
    }
}

impl Helpers for LambdaHelpers {
    fn start<'a>(&'a self, tick: &'a Tick, leader: &'a str, n: u32) -> BoxFuture<'a, u32> {
        Box::pin(async move {
            let mut started = 0;
            for i in 1..=n {
                let event = Tick::helper_envelope(tick.time_ms, &format!("{leader}#helper{i}"), i);
                let sent = self
                    .client
                    .invoke()
                    .function_name(&self.function)
                    .invocation_type(aws_sdk_lambda::types::InvocationType::Event)
                    .payload(aws_sdk_lambda::primitives::Blob::new(event.to_string()))
                    .send()
                    .await;
                match sent {
                    Ok(_) => started += 1,
                    Err(e) => {
                        tracing::warn!(error = %tickwork_lambda::error_chain(&e), helper = i, "a helper did not start; the other workers and the next tick take its shards");
                        break;
                    }
                }
            }
            started
        })
    }
}
