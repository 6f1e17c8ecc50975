//! Retry policy: jittered exponential backoff for work, none for health probes.
//!
//! Why (`001_*`): throttling is usually a burst that on-demand tables absorb, so application
//! clients retry with jitter; but a readiness probe that retries hides the outage it exists to
//! report, so the probe client has retries disabled.
//!
//! The SDK's *standard* mode is used: full-jitter exponential backoff, a retry quota per
//! partition. [`ConflictClassifier`] adds what the SDK does not retry on its own: a transaction
//! cancelled only because another transaction held one of its items (`TransactionConflict`) or
//! because one of its items was throttled (`ThrottlingError`), and a single-item write refused with
//! `TransactionConflictException`. Nothing was applied in either case, so a retry is safe; on
//! AWS, concurrent fenced writes under one lease (the archiver's and the fan-out's shards) check
//! the same lease item and do conflict, which the local server, serialising every request, never
//! shows. *Adaptive* mode adds a client-side rate limiter that, after a single throttle, can
//! delay the next request by seconds; scheduled jobs with deadlines prefer bounded waits.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::retry::{ClassifyRetry, RetryAction, RetryConfig, RetryPartition};
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::interceptors::context::InterceptorContext;

use crate::env::{self as vars, ConfigError, Env};

/// How data-plane calls retry.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts including the first (`TICKWORK_RETRY_MAX_ATTEMPTS`, default 5).
    pub max_attempts: u32,
    /// Base of the exponential backoff (`TICKWORK_RETRY_INITIAL_BACKOFF_SECS`, default 0.05).
    pub initial_backoff: Duration,
    /// Cap on one wait (`TICKWORK_RETRY_MAX_BACKOFF_SECS`, default 2).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 5, initial_backoff: Duration::from_millis(50), max_backoff: Duration::from_secs(2) }
    }
}

impl RetryPolicy {
    /// Reads the policy; refuses zero attempts and waits that cannot fit an invocation.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let d = Self::default();
        let max_attempts = env.int_in(vars::RETRY_MAX_ATTEMPTS, d.max_attempts, 1..=20)?;
        let s = Duration::from_secs;
        let initial_backoff =
            env.secs_in(vars::RETRY_INITIAL_BACKOFF_SECS, d.initial_backoff, Duration::ZERO, s(10))?;
        let max_backoff = env.secs_in(vars::RETRY_MAX_BACKOFF_SECS, d.max_backoff, Duration::ZERO, s(60))?;
        if max_backoff < initial_backoff {
            return Err(ConfigError::invalid(vars::RETRY_MAX_BACKOFF_SECS, "is below the initial backoff"));
        }
        Ok(Self { max_attempts, initial_backoff, max_backoff })
    }

    /// The SDK retry config: standard mode (full jitter).
    pub fn sdk(&self) -> RetryConfig {
        RetryConfig::standard()
            .with_max_attempts(self.max_attempts)
            .with_initial_backoff(self.initial_backoff)
            .with_max_backoff(self.max_backoff)
    }
}

/// A DynamoDB client for work: retries per `policy`, in its own retry partition (`partition`
/// isolates its retry quota, e.g. per test or per job).
pub fn work_client(sdk: &SdkConfig, policy: &RetryPolicy, partition: &str) -> Client {
    let mut b = aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_config(policy.sdk())
        .retry_partition(RetryPartition::new(partition.to_string()))
        .retry_classifier(ConflictClassifier);
    // The suite log of IAM accesses (`tickwork::iam`), when a test run asks for it.
    if let Some(r) = crate::iam::suite_recorder() {
        b = b.interceptor(r);
    }
    Client::from_conf(b.build())
}

/// Cancellation reason codes that mean "nothing was applied, try again" (DynamoDB API reference,
/// TransactWriteItems, `CancellationReasons`).
pub const RETRYABLE_CANCEL_CODES: [&str; 3] =
    ["TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"];

/// Is a cancellation with these reason codes safe and useful to retry? Only when no item failed
/// for a reason a retry cannot change (a condition, a validation error).
pub fn cancellation_is_retryable<'a>(codes: impl IntoIterator<Item = Option<&'a str>>) -> bool {
    let mut any = false;
    for c in codes {
        match c {
            None | Some("None") => {}
            Some(c) if RETRYABLE_CANCEL_CODES.contains(&c) => any = true,
            Some(_) => return false,
        }
    }
    any
}

/// Classifies transaction conflicts and throttled transaction items as retryable (see the module
/// docs); everything else is left to the SDK's own classifiers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConflictClassifier;

impl ClassifyRetry for ConflictClassifier {
    fn classify_retry(&self, ctx: &InterceptorContext) -> RetryAction {
        let Some(Err(err)) = ctx.output_or_error() else { return RetryAction::NoActionIndicated };
        let Some(op) = err.as_operation_error() else { return RetryAction::NoActionIndicated };
        if let Some(TransactWriteItemsError::TransactionCanceledException(c)) =
            op.downcast_ref::<TransactWriteItemsError>()
        {
            let codes = c.cancellation_reasons().iter().map(|r| r.code());
            if cancellation_is_retryable(codes) {
                return RetryAction::transient_error();
            }
            return RetryAction::NoActionIndicated;
        }
        let code = op
            .downcast_ref::<aws_sdk_dynamodb::Error>()
            .and_then(|e| e.code().map(str::to_string))
            .or_else(|| {
                op.downcast_ref::<aws_sdk_dynamodb::operation::put_item::PutItemError>()
                    .and_then(|e| e.code().map(str::to_string))
            })
            .or_else(|| {
                op.downcast_ref::<aws_sdk_dynamodb::operation::update_item::UpdateItemError>()
                    .and_then(|e| e.code().map(str::to_string))
            })
            .or_else(|| {
                op.downcast_ref::<aws_sdk_dynamodb::operation::delete_item::DeleteItemError>()
                    .and_then(|e| e.code().map(str::to_string))
            });
        if code.as_deref() == Some("TransactionConflictException") {
            return RetryAction::transient_error();
        }
        RetryAction::NoActionIndicated
    }

    fn name(&self) -> &'static str {
        "TransactionConflict"
    }
}

/// A DynamoDB client for health probes: one attempt, so an outage shows at once.
pub fn probe_client(sdk: &SdkConfig) -> Client {
    let conf = aws_sdk_dynamodb::config::Builder::from(sdk).retry_config(RetryConfig::disabled()).build();
    Client::from_conf(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_conflicts_and_throttles_are_retried() {
        assert!(cancellation_is_retryable([None, Some("TransactionConflict")]));
        assert!(cancellation_is_retryable([Some("None"), Some("ThrottlingError")]));
        assert!(!cancellation_is_retryable([Some("ConditionalCheckFailed"), Some("TransactionConflict")]));
        assert!(!cancellation_is_retryable([None, None]), "no reason at all: not ours to guess");
        assert!(!cancellation_is_retryable([Some("ValidationError")]));
    }
}
