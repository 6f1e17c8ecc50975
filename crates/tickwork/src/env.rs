//! Every environment variable tickwork reads, named once, and the one place they are parsed.
//!
//! Why: a Lambda with a bad setting should fail at init naming the variable, not at 3 a.m. in the
//! middle of a sweep, and a setting that cannot be correct (a lease longer than its schedule, a
//! page of 0, `1e30` seconds) must be refused rather than clamped or allowed to panic. The names
//! are constants so that the configuration reference in `docs/configuration.md` can be checked
//! against [`VARS`] by a test: a variable the code reads and the docs omit fails the build.
//!
//! This module is a leaf: it imports nothing else from the crate.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

/// A setting that is missing or cannot be correct.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("configuration `{var}`: {problem}")]
pub struct ConfigError {
    /// The variable or setting.
    pub var: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A setting whose value is wrong.
    pub fn invalid(var: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { var: var.into(), problem: problem.into() }
    }
}

/// One documented variable: its name, its default as text, and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    /// The variable's name.
    pub name: &'static str,
    /// The default, as a reader would write it (`""` when required or derived).
    pub default: &'static str,
    /// Which functions read it (`all` for every function).
    pub read_by: &'static str,
    /// What it sets.
    pub doc: &'static str,
}

macro_rules! vars {
    ($( $(#[$m:meta])* $konst:ident = $name:literal, $default:literal, $by:literal, $doc:literal; )*) => {
        $( $(#[$m])* #[doc = concat!("`", $name, "`: ", $doc)] pub const $konst: &str = $name; )*
        /// Every variable the code reads, for the configuration reference and its test.
        pub const VARS: &[Var] = &[ $( Var { name: $name, default: $default, read_by: $by, doc: $doc }, )* ];
    };
}

vars! {
    TABLE_PREFIX = "TICKWORK_TABLE_PREFIX", "tickwork", "all",
        "physical table names are `<prefix>-<logical>` (the template sets the stack name)";
    CONTROL_TABLE = "TICKWORK_CONTROL_TABLE", "<prefix>-control", "all",
        "leases, watermarks, pause switches, checkpoints, cursors, archive intents";
    TENANTS_TABLE = "TICKWORK_TENANTS_TABLE", "<prefix>-tenants", "pulse-sweep, tenant-fanout",
        "the tenants table";
    QUEUE_TABLE = "TICKWORK_QUEUE_TABLE", "<prefix>-queue", "pulse-sweep, tenant-fanout, queue-worker",
        "the work queue table";
    SUMMARIES_TABLE = "TICKWORK_SUMMARIES_TABLE", "<prefix>-summaries", "queue-worker",
        "where the daily-summary handler writes";
    CHANGES_TABLE = "TICKWORK_CHANGES_TABLE", "<prefix>-changes", "archiver",
        "the change feed the archiver drains";
    CAPACITY_SOURCE = "TICKWORK_CAPACITY_SOURCE", "server", "all",
        "`server` (DynamoDB's ConsumedCapacity) or `estimate` (size rules; local servers)";
    METRICS_NAMESPACE = "TICKWORK_METRICS_NAMESPACE", "tickwork", "all",
        "CloudWatch namespace of the job metrics (the template sets `tickwork/<stack>`)";
    CLOCK_SKEW_SECS = "TICKWORK_CLOCK_SKEW_SECS", "1", "all",
        "declared bound on clock differences between nodes (0..=60)";
    RETRY_MAX_ATTEMPTS = "TICKWORK_RETRY_MAX_ATTEMPTS", "5", "all",
        "attempts per DynamoDB call including the first (1..=20)";
    RETRY_INITIAL_BACKOFF_SECS = "TICKWORK_RETRY_INITIAL_BACKOFF_SECS", "0.05", "all",
        "base of the full-jitter exponential backoff";
    RETRY_MAX_BACKOFF_SECS = "TICKWORK_RETRY_MAX_BACKOFF_SECS", "2", "all",
        "cap on one backoff wait";
    DEADLINE_MARGIN_SECS = "TICKWORK_DEADLINE_MARGIN_SECS", "5", "all",
        "stop starting work this long before the Lambda deadline (below the function's timeout)";
    FUNCTION_TIMEOUT_SECS = "TICKWORK_FUNCTION_TIMEOUT_SECS", "(unset)", "all",
        "the function's timeout (1..=900 s; the template sets each function's): margins, leases and the queue's visibility are checked against it at start-up; unset, nothing is checked against a timeout";
    IAM_LOG = "TICKWORK_IAM_LOG", "(unset)", "all",
        "tests only: a directory where every call a function's code makes is logged as the IAM access it needs (`make test` sets it; `make iam-check` holds the log against `template.yaml`)";
    DRY_RUN = "TICKWORK_DRY_RUN", "false", "pulse-sweep, tenant-fanout, archiver",
        "`true`: every tick computes and logs what it would do and writes nothing";
    TENANT_SHARDS = "TICKWORK_TENANT_SHARDS", "8", "pulse-sweep, tenant-fanout",
        "shards of the tenant enumeration indexes (1..=1000)";
    QUEUE_SHARDS = "TICKWORK_QUEUE_SHARDS", "8", "pulse-sweep, tenant-fanout, queue-worker",
        "shards of the queue's ready index (1..=1000)";
    QUEUE_VISIBILITY_SECS = "TICKWORK_QUEUE_VISIBILITY_SECS", "120", "pulse-sweep, tenant-fanout, queue-worker",
        "claim duration; at least the worker's timeout";
    QUEUE_MAX_ATTEMPTS = "TICKWORK_QUEUE_MAX_ATTEMPTS", "5", "pulse-sweep, tenant-fanout, queue-worker",
        "claims before an item is dead-lettered (1..=100)";
    QUEUE_BACKOFF_SECS = "TICKWORK_QUEUE_BACKOFF_SECS", "10", "queue-worker",
        "first retry delay, doubling per attempt; the drain that scheduled a retry stays for it when it falls due within its time and otherwise hands its instant on to a successor that waits for it; only a retry due past a whole invocation waits for the next drain or the hourly safety poll";
    QUEUE_BACKOFF_MAX_SECS = "TICKWORK_QUEUE_BACKOFF_MAX_SECS", "3600", "queue-worker",
        "longest retry delay";
    QUEUE_RETENTION_SECS = "TICKWORK_QUEUE_RETENTION_SECS", "1209600", "queue-worker",
        "how long a finished id is remembered (its idempotency window)";
    WORKER_BATCH = "TICKWORK_WORKER_BATCH", "10", "queue-worker",
        "ready keys a poll reads (1..=100); items are claimed from them one at a time, as handler slots free";
    WORKER_CONCURRENCY = "TICKWORK_WORKER_CONCURRENCY", "4", "queue-worker",
        "handler calls at once in one drain (1..=256)";
    WORKER_DRAINS = "TICKWORK_WORKER_DRAINS", "1", "queue-worker",
        "drains at once at most (1..=1000): the fleet's slots, within the function's reserved concurrency";
    WORKER_INTERVAL_SECS = "TICKWORK_WORKER_INTERVAL_SECS", "60", "queue-worker",
        "the worker's schedule interval (a scheduled event further ahead than this plus the skew is refused)";
    WORKER_HANDLER_TIMEOUT_SECS = "TICKWORK_WORKER_HANDLER_TIMEOUT_SECS", "30", "queue-worker",
        "a handler running longer is stopped and its item retried; below the visibility timeout";
    TARGETS = "TICKWORK_TARGETS", "", "queue-worker",
        "kinds delivered to a target instead of a built-in handler: `kind[,kind…]=ARN` entries separated by `;` (a Lambda function, an SQS queue or an EventBridge bus; docs/targets.md)";
    TARGET_BATCH = "TICKWORK_TARGET_BATCH", "10", "queue-worker",
        "units one Invoke of a function target carries (1..=100): keep it times the function's time a unit well under the handler timeout";
    PULSE_JOB = "TICKWORK_PULSE_JOB", "pulse-sweep", "pulse-sweep",
        "the sweep's job name (lease, watermark, pause switch)";
    PULSE_INTERVAL_SECS = "TICKWORK_PULSE_INTERVAL_SECS", "60", "pulse-sweep",
        "the sweep's schedule interval (equal to its `rate()`)";
    PULSE_GRAINS = "TICKWORK_PULSE_GRAINS", "day,week,month,quarter,year", "pulse-sweep",
        "the grains pulsed, comma-separated; a grain left out is not owed (its periods are neither pulsed nor caught up)";
    PULSE_LEASE_SECS = "TICKWORK_PULSE_LEASE_SECS", "50", "pulse-sweep",
        "the sweep's lease: above its timeout, below its interval";
    PULSE_CATCH_UP = "TICKWORK_PULSE_CATCH_UP", "all", "pulse-sweep",
        "`all`, `latest` or `skip` for periods missed during an outage";
    PULSE_MAX_LATENESS_SECS = "TICKWORK_PULSE_MAX_LATENESS_SECS", "3456000", "pulse-sweep",
        "older periods are skipped (above 0, at most 60 days)";
    PULSE_PAGE_SIZE = "TICKWORK_PULSE_PAGE_SIZE", "1000", "pulse-sweep",
        "tenants per page of the zone index (1..=1000)";
    PULSE_TENANT_CONCURRENCY = "TICKWORK_PULSE_TENANT_CONCURRENCY", "8", "pulse-sweep",
        "woken tenants read at once (1..=256)";
    PULSE_FIRE_CONCURRENCY = "TICKWORK_PULSE_FIRE_CONCURRENCY", "64", "pulse-sweep",
        "schedules' groups whose first member page is read at once in each due shard (1..=256; the 8 due shards fire at once)";
    PULSE_SHARD_WORKERS = "TICKWORK_PULSE_SHARD_WORKERS", "1", "pulse-sweep",
        "invocations a boundary's shards are paged by at once (1..=64; at most 96 tenant shards): above 1 the leader starts helpers, each shard under a lease of its own";
    WAKE_SCHEDULE = "TICKWORK_WAKE_SCHEDULE", "(unset)", "pulse-sweep",
        "the one-time EventBridge Scheduler schedule the sweep sets to wake itself at a schedule's instant before the next tick (unset: schedules fire at the tick)";
    WAKE_TARGET_ARN = "TICKWORK_WAKE_TARGET_ARN", "(unset)", "pulse-sweep",
        "the sweep function's ARN, the wake's target (with TICKWORK_WAKE_SCHEDULE)";
    WAKE_ROLE_ARN = "TICKWORK_WAKE_ROLE_ARN", "(unset)", "pulse-sweep",
        "the role EventBridge Scheduler assumes to invoke the sweep (with TICKWORK_WAKE_SCHEDULE)";
    CONTROL_FAILURES_URL = "TICKWORK_CONTROL_FAILURES_URL", "(unset)", "tickctl",
        "the control function's on-failure queue (the stack's ControlFailuresQueueUrl output), which `tickctl control-failures` lists";
    STACK_PARTS = "TICKWORK_STACK_PARTS", "fanout,archiver", "tickctl",
        "the optional parts the stack deploys (its Parts output, from the Fanout and Archiver parameters): `tickctl status` reports only those, and a command on a part not deployed is refused";
    STACK_VERSION = "TICKWORK_STACK_VERSION", "(unset)", "tickctl",
        "the release the stack runs (its Version output), which `tickctl status` shows beside its own";
    FANOUT_JOB = "TICKWORK_FANOUT_JOB", "utc-daily", "tenant-fanout",
        "the job fanned out per tenant per UTC day (its queue item kind)";
    FANOUT_INTERVAL_SECS = "TICKWORK_FANOUT_INTERVAL_SECS", "300", "tenant-fanout",
        "the fan-out's schedule interval";
    FANOUT_LEASE_SECS = "TICKWORK_FANOUT_LEASE_SECS", "290", "tenant-fanout",
        "the fan-out's lease: above its timeout, below its interval";
    FANOUT_PAGE_SIZE = "TICKWORK_FANOUT_PAGE_SIZE", "1000", "tenant-fanout",
        "tenants per page, and per queue item (1..=1000)";
    FANOUT_SHARD_CONCURRENCY = "TICKWORK_FANOUT_SHARD_CONCURRENCY", "4", "tenant-fanout",
        "shards paged at once (1..=64)";
    FANOUT_MAX_LATENESS_DAYS = "TICKWORK_FANOUT_MAX_LATENESS_DAYS", "7", "tenant-fanout",
        "an unfinished window is caught up for this many days (1..=60)";
    ARCHIVE_BUCKET = "TICKWORK_ARCHIVE_BUCKET", "(required)", "archiver",
        "where archived rows go";
    ARCHIVE_PREFIX = "TICKWORK_ARCHIVE_PREFIX", "archive", "archiver",
        "key prefix of archive objects";
    ARCHIVE_AGE_SECS = "TICKWORK_ARCHIVE_AGE_SECS", "2592000", "archiver",
        "rows older than this move to S3 (at least 60 s)";
    ARCHIVE_PAGE_SIZE = "TICKWORK_ARCHIVE_PAGE_SIZE", "100", "archiver",
        "rows per batch and per object (1..=500)";
    ARCHIVE_SHARD_CONCURRENCY = "TICKWORK_ARCHIVE_SHARD_CONCURRENCY", "4", "archiver",
        "shards archived at once (1..=64)";
    ARCHIVE_INTERVAL_SECS = "TICKWORK_ARCHIVE_INTERVAL_SECS", "300", "archiver",
        "the archiver's schedule interval";
    ARCHIVE_LEASE_SECS = "TICKWORK_ARCHIVE_LEASE_SECS", "290", "archiver",
        "the archiver's lease: above its timeout, below its interval";
    ARCHIVE_PROBE_EVERY_SECS = "TICKWORK_ARCHIVE_PROBE_EVERY_SECS", "3600", "archiver",
        "the longest an idle archiver trusts its next-due mark before probing every shard";
    CHANGE_SHARDS = "TICKWORK_CHANGE_SHARDS", "8", "archiver",
        "write shards of the change feed (1..=1000)";
}

/// Longest duration any setting accepts (a year): far beyond every sane value, and far inside
/// what `Duration` and millisecond arithmetic can hold, so `1e30` is an error, not a panic.
pub const MAX_SECS: f64 = 366.0 * 86_400.0;

/// Where settings come from: the process environment, or a map in tests.
#[derive(Debug, Clone, Default)]
pub struct Env {
    map: Option<HashMap<String, String>>,
}

impl Env {
    /// The process environment.
    pub fn process() -> Self {
        Self { map: None }
    }

    /// A fixed set of variables (tests).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self { map: Some(pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()) }
    }

    /// The raw value, treating empty as unset.
    pub fn get(&self, name: &str) -> Option<String> {
        let v = match &self.map {
            Some(m) => m.get(name).cloned(),
            None => std::env::var(name).ok(),
        };
        v.filter(|s| !s.trim().is_empty())
    }

    /// A required variable.
    pub fn required(&self, name: &str) -> Result<String, ConfigError> {
        self.get(name).ok_or_else(|| ConfigError::invalid(name, "is not set"))
    }

    /// A parsed variable with a default.
    pub fn parse_or<T>(&self, name: &str, default: T) -> Result<T, ConfigError>
    where
        T: FromStr,
        T::Err: std::fmt::Display,
    {
        match self.get(name) {
            None => Ok(default),
            Some(raw) => raw.trim().parse().map_err(|e| ConfigError::invalid(name, format!("`{raw}`: {e}"))),
        }
    }

    /// An integer with a default, refused outside `range` (never clamped: a 0 that silently
    /// became 1 would hide a typo).
    pub fn int_in<T>(&self, name: &str, default: T, range: std::ops::RangeInclusive<T>) -> Result<T, ConfigError>
    where
        T: FromStr + PartialOrd + Copy + std::fmt::Display,
        T::Err: std::fmt::Display,
    {
        let v = self.parse_or(name, default)?;
        if !range.contains(&v) {
            return Err(ConfigError::invalid(name, format!("{v} is not in {}..={}", range.start(), range.end())));
        }
        Ok(v)
    }

    /// A duration in seconds (fractions allowed), with a default; negative, non-finite or longer
    /// than [`MAX_SECS`] is refused.
    pub fn secs_or(&self, name: &str, default: Duration) -> Result<Duration, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(raw) => parse_secs(name, &raw),
        }
    }

    /// [`Env::secs_or`], refused outside `min..=max`.
    pub fn secs_in(
        &self,
        name: &str,
        default: Duration,
        min: Duration,
        max: Duration,
    ) -> Result<Duration, ConfigError> {
        let d = self.secs_or(name, default)?;
        if d < min || d > max {
            return Err(ConfigError::invalid(
                name,
                format!("{} s is not in {}..={} s", d.as_secs_f64(), min.as_secs_f64(), max.as_secs_f64()),
            ));
        }
        Ok(d)
    }

    /// A boolean (`true`/`false`) with a default.
    pub fn bool_or(&self, name: &str, default: bool) -> Result<bool, ConfigError> {
        self.parse_or(name, default)
    }
}

fn parse_secs(name: &str, raw: &str) -> Result<Duration, ConfigError> {
    let v: f64 = raw.trim().parse().map_err(|e| ConfigError::invalid(name, format!("`{raw}`: {e}")))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(ConfigError::invalid(name, format!("`{raw}` is not a non-negative number of seconds")));
    }
    if v > MAX_SECS {
        return Err(ConfigError::invalid(name, format!("`{raw}` s is longer than a year; no setting needs that")));
    }
    Duration::try_from_secs_f64(v).map_err(|e| ConfigError::invalid(name, format!("`{raw}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_numbers_are_errors_not_panics() {
        let env = Env::from_pairs([("A", "1e30"), ("B", "-1"), ("C", "NaN"), ("D", "inf"), ("E", "0.5")]);
        for v in ["A", "B", "C", "D"] {
            let e = env.secs_or(v, Duration::ZERO).unwrap_err();
            assert_eq!(e.var, v);
        }
        assert_eq!(env.secs_or("E", Duration::ZERO).unwrap(), Duration::from_millis(500));
        let env = Env::from_pairs([("N", "0"), ("M", "99999999999999999999")]);
        assert!(env.int_in::<u32>("N", 8, 1..=1000).unwrap_err().problem.contains("1..=1000"));
        assert_eq!(env.int_in::<u32>("M", 8, 1..=1000).unwrap_err().var, "M");
        assert_eq!(env.int_in::<u32>("unset", 8, 1..=1000).unwrap(), 8);
    }

    #[test]
    fn names_are_unique_and_documented() {
        let mut names: Vec<&str> = VARS.iter().map(|v| v.name).collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len(), "a variable is declared twice");
        assert!(VARS.iter().all(|v| v.name.starts_with("TICKWORK_") && !v.doc.is_empty()));
    }
}
