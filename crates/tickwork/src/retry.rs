//! Retry policy: jittered exponential backoff for work, none for health probes.
//!
//! Why (`001_*`): throttling is usually a burst that on-demand tables absorb, so application
//! clients retry with jitter; but a readiness probe that retries hides the outage it exists to
//! report, so the probe client has retries disabled.
//!
//! The SDK's *standard* mode is used: full-jitter exponential backoff, a retry quota per
//! partition. *Adaptive* mode adds a client-side rate limiter that, after a single throttle, can
//! delay the next request by seconds; scheduled jobs with deadlines prefer bounded waits.

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::config::retry::{RetryConfig, RetryPartition};
use aws_sdk_dynamodb::Client;

use crate::config::{ConfigError, Env};

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
    /// Reads the policy; refuses zero attempts.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let d = Self::default();
        let max_attempts = env.parse_or("TICKWORK_RETRY_MAX_ATTEMPTS", d.max_attempts)?;
        if max_attempts == 0 {
            return Err(ConfigError::invalid("TICKWORK_RETRY_MAX_ATTEMPTS", "must be at least 1"));
        }
        Ok(Self {
            max_attempts,
            initial_backoff: env.secs_or("TICKWORK_RETRY_INITIAL_BACKOFF_SECS", d.initial_backoff)?,
            max_backoff: env.secs_or("TICKWORK_RETRY_MAX_BACKOFF_SECS", d.max_backoff)?,
        })
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
    let conf = aws_sdk_dynamodb::config::Builder::from(sdk)
        .retry_config(policy.sdk())
        .retry_partition(RetryPartition::new(partition.to_string()))
        .build();
    Client::from_conf(conf)
}

/// A DynamoDB client for health probes: one attempt, so an outage shows at once.
pub fn probe_client(sdk: &SdkConfig) -> Client {
    let conf = aws_sdk_dynamodb::config::Builder::from(sdk).retry_config(RetryConfig::disabled()).build();
    Client::from_conf(conf)
}
