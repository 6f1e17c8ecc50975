//! A Lambda function in any runtime as a kind's handler: one synchronous Invoke per batch of
//! units, in the SQS event's shape, answered with the partial-batch response
//! ([`super::envelope`]).
//!
//! A unit the function lists in `batchItemFailures` fails (retried under the queue's policy, then
//! dead-lettered alone, [`crate::units`]); the rest are done. A function error (it raised, timed
//! out, ran out of memory: `X-Amz-Function-Error`, Lambda API reference, "Invoke"), an answer
//! Lambda would read as a complete failure, or a failed request (not found, denied) fails the
//! whole call: every unit it carried is retried. A throttled request (`TooManyRequestsException`:
//! the function is over its concurrency, reserved or the account's) fails none: its units go back
//! with their attempt refunded, after the `Retry-After` Lambda gives ([`crate::throttle`]).

use futures::future::BoxFuture;
use tickwork::clock::SharedClock;
use tickwork::queue::Job;

use super::envelope::{failures, sqs_event, MAX_INVOKE_BYTES};
use crate::registry::{Handler, HandlerError};

/// Units one Invoke carries by default (`TICKWORK_TARGET_BATCH`, 1..=100): the default batch
/// size of an SQS event source mapping, so a function tuned behind SQS handles it in the time it
/// is used to. The whole call must end within the worker's handler timeout (30 s): 10 units leave
/// a function 3 s a unit.
pub const FUNCTION_BATCH: usize = 10;

/// The function batch the worker reads (`TICKWORK_TARGET_BATCH`).
pub fn function_batch(env: &tickwork::config::Env) -> Result<usize, tickwork::config::ConfigError> {
    env.int_in(tickwork::env::TARGET_BATCH, FUNCTION_BATCH, 1..=100)
}

/// A function target.
pub struct FunctionTarget {
    client: aws_sdk_lambda::Client,
    batch: usize,
    arn: String,
    region: String,
    kind_source: String,
    clock: SharedClock,
}

impl std::fmt::Debug for FunctionTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionTarget").field("arn", &self.arn).finish()
    }
}

impl FunctionTarget {
    /// Invokes `arn` with `client`, `batch` units at most a call; `source` is what the records
    /// name as their `eventSourceARN`.
    pub fn new(
        client: aws_sdk_lambda::Client,
        arn: &str,
        region: &str,
        source: &str,
        batch: usize,
        clock: SharedClock,
    ) -> Self {
        Self { client, batch: batch.max(1), arn: arn.into(), region: region.into(), kind_source: source.into(), clock }
    }

    async fn invoke(&self, jobs: &[Job]) -> Vec<Result<(), HandlerError>> {
        let keys: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
        let event = sqs_event(jobs, &self.kind_source, &self.region, self.clock.now_ms()).to_string();
        let all = |e: HandlerError| vec![Err(e); jobs.len()];
        let out = match self
            .client
            .invoke()
            .function_name(&self.arn)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_sdk_lambda::primitives::Blob::new(event))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                let why = format!("invoking {}: {}", self.arn, tickwork_lambda::error_chain(&e));
                return all(match throttle_of(&e) {
                    Some(after_ms) => HandlerError::Throttled { why, after_ms },
                    None => HandlerError::Retry(why),
                });
            }
        };
        let answer = out.payload().map(|p| p.as_ref().to_vec()).unwrap_or_default();
        if let Some(kind) = out.function_error() {
            let text = String::from_utf8_lossy(&answer);
            return all(HandlerError::Retry(format!("{} failed ({kind}): {}", self.arn, clip(&text))));
        }
        match failures(&answer, &keys) {
            Ok(failed) => jobs
                .iter()
                .map(|j| match failed.contains(&j.id) {
                    false => Ok(()),
                    true => Err(HandlerError::Retry(format!("{} listed it in batchItemFailures", self.arn))),
                })
                .collect(),
            Err(why) => all(HandlerError::Retry(format!("{}: the whole batch failed: {why}", self.arn))),
        }
    }
}

/// Whether an Invoke was refused as a throttle, and Lambda's hint (`Retry-After`, carried as
/// `retryAfterSeconds`; "Invoke", Lambda API reference, `TooManyRequestsException`). Pure.
pub fn throttle_of<R>(
    e: &aws_sdk_lambda::error::SdkError<aws_sdk_lambda::operation::invoke::InvokeError, R>,
) -> Option<Option<u64>> {
    use aws_sdk_lambda::error::ProvideErrorMetadata;
    use aws_sdk_lambda::operation::invoke::InvokeError;
    match e.as_service_error()? {
        InvokeError::TooManyRequestsException(t) => Some(crate::throttle::hint_of_seconds(t.retry_after_seconds())),
        other => crate::throttle::is_throttle_code(other.code()).then_some(None),
    }
}

fn clip(s: &str) -> &str {
    match s.char_indices().nth(300) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl Handler for FunctionTarget {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move { self.invoke(std::slice::from_ref(job)).await.remove(0) })
    }

    fn batch_limit(&self) -> usize {
        self.batch
    }

    fn whole_call_failures(&self) -> bool {
        true
    }

    fn handle_batch<'a>(&'a self, jobs: &'a [Job]) -> BoxFuture<'a, Vec<Result<(), HandlerError>>> {
        Box::pin(async move {
            // Several Invokes when the records would pass the synchronous payload limit.
            let now = self.clock.now_ms();
            let sizes: Vec<usize> = jobs
                .iter()
                .map(|j| sqs_event(std::slice::from_ref(j), &self.kind_source, &self.region, now).to_string().len())
                .collect();
            let mut out = Vec::with_capacity(jobs.len());
            for r in super::envelope::chunks(&sizes, usize::MAX, MAX_INVOKE_BYTES - 1024) {
                out.extend(self.invoke(&jobs[r]).await);
            }
            out
        })
    }
}
