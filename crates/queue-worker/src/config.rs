//! The worker's settings, read once at start-up; a setting that cannot be correct is refused
//! there, naming its variable.

use std::time::Duration;

use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::env as vars;
use tickwork::queue::QueueConfig;

/// The worker's job name (metrics line, `tickctl pause`, its drain slots).
pub const JOB: &str = "queue-worker";

/// The function's role in `template.yaml`'s terms, for the IAM suite log ([`tickwork::iam::acting_as`]).
pub const ROLE: &str = "queue-worker";

/// Items polled per shard per round ([`vars::WORKER_BATCH`]): the worker's and `tickctl cost`'s
/// one reading.
pub fn batch(env: &Env) -> Result<i32, ConfigError> {
    env.int_in(vars::WORKER_BATCH, 10, 1..=100)
}

/// Worker settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// Items polled per shard per round ([`vars::WORKER_BATCH`]).
    pub batch: i32,
    /// Handler calls at once in one drain ([`vars::WORKER_CONCURRENCY`]).
    pub concurrency: usize,
    /// Drains at once at most ([`vars::WORKER_DRAINS`], [`crate::fleet`]).
    pub drains: u32,
    /// Stop claiming and starting units this long before the deadline, on top of the handler
    /// timeout ([`vars::DEADLINE_MARGIN_SECS`]): whatever is started can finish and be settled
    /// before Lambda ends the invocation ([`WorkerConfig::stop_before`]).
    pub margin: Duration,
    /// A handler running longer is stopped and its item retried ([`vars::WORKER_HANDLER_TIMEOUT_SECS`]).
    pub handler_timeout: Duration,
    /// The schedule interval ([`vars::WORKER_INTERVAL_SECS`]), for the event guard.
    pub interval: Duration,
}

impl WorkerConfig {
    /// Reads and validates the settings (no timeout known: the handler timeout is checked against
    /// the visibility timeout only).
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let core = CoreConfig::from_env(env)?;
        Self::from_core(env, &core, &QueueConfig::from_env(env)?)
    }

    /// Reads and validates the settings: a handler must time out before its claim does, and a
    /// claim must outlast the function that holds it.
    pub fn from_core(env: &Env, core: &CoreConfig, queue: &QueueConfig) -> Result<Self, ConfigError> {
        let s = Duration::from_secs;
        let handler_timeout = env.secs_in(vars::WORKER_HANDLER_TIMEOUT_SECS, s(30), s(1), s(900))?;
        if handler_timeout >= queue.visibility {
            return Err(ConfigError::invalid(
                vars::WORKER_HANDLER_TIMEOUT_SECS,
                format!(
                    "{} s is not below the visibility timeout {} s: a handler still running when its claim expires runs twice",
                    handler_timeout.as_secs_f64(),
                    queue.visibility.as_secs_f64()
                ),
            ));
        }
        // A drain slot is held for the visibility timeout ([`WorkerConfig::slot_hold`]), and a
        // lease must outlast twice the clock-skew bound.
        if queue.visibility <= core.clock_skew * 2 {
            return Err(ConfigError::invalid(
                vars::QUEUE_VISIBILITY_SECS,
                format!(
                    "{} s is not above twice the clock-skew bound {} s: a claim (and a drain slot) could be taken over while it is held",
                    queue.visibility.as_secs_f64(),
                    core.clock_skew.as_secs_f64()
                ),
            ));
        }
        if let Some(t) = core.function_timeout {
            if t <= handler_timeout + core.margin {
                return Err(ConfigError::invalid(
                    vars::WORKER_HANDLER_TIMEOUT_SECS,
                    format!(
                        "{} s plus the deadline margin {} s leaves no time in the worker's timeout {} s: nothing could start and still be settled",
                        handler_timeout.as_secs_f64(),
                        core.margin.as_secs_f64(),
                        t.as_secs_f64()
                    ),
                ));
            }
            if queue.visibility < t {
                return Err(ConfigError::invalid(
                    vars::QUEUE_VISIBILITY_SECS,
                    format!(
                        "{} s is below the worker's timeout {} s: an item claimed early in an invocation could be claimed again while it runs",
                        queue.visibility.as_secs_f64(),
                        t.as_secs_f64()
                    ),
                ));
            }
        }
        Ok(Self {
            batch: batch(env)?,
            concurrency: env.int_in(vars::WORKER_CONCURRENCY, 4usize, 1..=256)?,
            drains: env.int_in(vars::WORKER_DRAINS, 1u32, 1..=1000)?,
            margin: core.margin,
            handler_timeout,
            interval: env.secs_in(vars::WORKER_INTERVAL_SECS, s(60), s(60), s(86_400))?,
        })
    }
}

impl WorkerConfig {
    /// How long before the invocation's deadline the worker stops claiming and starting: a unit
    /// started then may run for the handler timeout, and its item must still be settled.
    pub fn stop_before(&self) -> Duration {
        self.handler_timeout + self.margin
    }

    /// Keys a poll reads: the configured batch, and at least four a drain (up to DynamoDB's
    /// page of keys-only entries that a poll reads for one RCU or two), so that a full page can
    /// want the whole fleet ([`crate::fleet::wanted`]) and each drain has a share of its own.
    pub fn poll_keys(&self) -> i32 {
        self.batch.max(4 * self.drains.min(25) as i32)
    }

    /// How long a drain slot is held for the drain started in it: the claim's visibility, which
    /// is at least the function's timeout (checked at start-up), so the slot outlives its drain.
    pub fn slot_hold(&self, queue: &QueueConfig) -> Duration {
        queue.visibility
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        let s = Duration::from_secs;
        Self { batch: 10, concurrency: 4, drains: 1, margin: s(5), handler_timeout: s(30), interval: s(60) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_be_correct_are_refused() {
        let cfg = |pairs: &[(&str, &str)]| WorkerConfig::from_env(&Env::from_pairs(pairs.iter().copied()));
        assert_eq!(cfg(&[("TICKWORK_WORKER_BATCH", "0")]).unwrap_err().var, "TICKWORK_WORKER_BATCH");
        assert_eq!(cfg(&[("TICKWORK_WORKER_CONCURRENCY", "0")]).unwrap_err().var, "TICKWORK_WORKER_CONCURRENCY");
        let e = cfg(&[("TICKWORK_WORKER_HANDLER_TIMEOUT_SECS", "120")]).unwrap_err();
        assert_eq!(e.var, "TICKWORK_WORKER_HANDLER_TIMEOUT_SECS");
        let e = cfg(&[
            ("TICKWORK_FUNCTION_TIMEOUT_SECS", "55"),
            ("TICKWORK_QUEUE_VISIBILITY_SECS", "50"),
            ("TICKWORK_WORKER_HANDLER_TIMEOUT_SECS", "20"),
        ])
        .unwrap_err();
        assert_eq!(e.var, "TICKWORK_QUEUE_VISIBILITY_SECS");
        assert!(cfg(&[("TICKWORK_FUNCTION_TIMEOUT_SECS", "55")]).is_ok());
        let e =
            cfg(&[("TICKWORK_QUEUE_VISIBILITY_SECS", "2"), ("TICKWORK_WORKER_HANDLER_TIMEOUT_SECS", "1")]).unwrap_err();
        assert_eq!(e.var, "TICKWORK_QUEUE_VISIBILITY_SECS", "a claim within the skew bound: {e}");
    }
}
