//! The fan-out's settings, read once at start-up; a setting that cannot be correct is refused
//! there, naming its variable.

/// The function's role in `template.yaml`'s terms, for the IAM suite log ([`tickwork::iam::acting_as`]).
pub const ROLE: &str = "tenant-fanout";

use std::time::Duration;

use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseConfig;
use tickwork_lambda::settings::{check_job_name, lease_config};

/// The fanned-out job ([`vars::FANOUT_JOB`]), also its queue items' kind. The one reading, for
/// the fan-out and `tickctl` alike.
pub fn job(env: &Env) -> Result<String, ConfigError> {
    let job = env.get(vars::FANOUT_JOB).unwrap_or_else(|| "utc-daily".into());
    check_job_name(vars::FANOUT_JOB, &job)?;
    Ok(job)
}

/// The fan-out's own job name (its lease and state item) for fanned-out `job`.
pub fn lease_job(job: &str) -> String {
    format!("fanout-{job}")
}

/// Tenants per page, and per queue item ([`vars::FANOUT_PAGE_SIZE`]): the fan-out's and `tickctl
/// cost`'s one reading.
pub fn page_size(env: &Env) -> Result<i32, ConfigError> {
    env.int_in(vars::FANOUT_PAGE_SIZE, 1000, 1..=1000)
}

/// Fan-out settings.
#[derive(Debug, Clone)]
pub struct FanoutConfig {
    /// Every tick a dry run ([`vars::DRY_RUN`]).
    pub dry_run: bool,
    /// Job name and queue item kind ([`vars::FANOUT_JOB`]); the lease is `fanout-<job>`.
    pub job: String,
    /// Tenants per page ([`vars::FANOUT_PAGE_SIZE`]).
    pub page_size: i32,
    /// Shards paged at once ([`vars::FANOUT_SHARD_CONCURRENCY`]).
    pub shard_concurrency: usize,
    /// How many days an unfinished window is caught up ([`vars::FANOUT_MAX_LATENESS_DAYS`]).
    pub max_lateness_days: u32,
    /// Lease settings ([`vars::FANOUT_LEASE_SECS`] below [`vars::FANOUT_INTERVAL_SECS`]).
    pub lease: LeaseConfig,
    /// Stop this long before the deadline ([`vars::DEADLINE_MARGIN_SECS`]).
    pub margin: Duration,
}

impl FanoutConfig {
    /// Reads and validates the settings with the shared ones' defaults.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let mut core = CoreConfig::from_env(env)?;
        core.clock_skew = skew;
        Self::from_core(env, &core)
    }

    /// Reads and validates the settings.
    pub fn from_core(env: &Env, core: &CoreConfig) -> Result<Self, ConfigError> {
        let s = Duration::from_secs;
        let job = job(env)?;
        let interval = env.secs_in(vars::FANOUT_INTERVAL_SECS, s(300), s(60), s(86_400))?;
        let ttl = env.secs_or(vars::FANOUT_LEASE_SECS, s(290))?;
        let lease = lease_config(&lease_job(&job), ttl, interval, core, vars::FANOUT_LEASE_SECS)?;
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            job,
            page_size: page_size(env)?,
            shard_concurrency: env.int_in(vars::FANOUT_SHARD_CONCURRENCY, 4usize, 1..=64)?,
            max_lateness_days: env.int_in(vars::FANOUT_MAX_LATENESS_DAYS, 7u32, 1..=60)?,
            lease,
            margin: core.margin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_be_correct_are_refused() {
        let s = Duration::from_secs;
        let cfg = |pairs: &[(&str, &str)]| FanoutConfig::from_env(&Env::from_pairs(pairs.iter().copied()), s(1));
        let e = cfg(&[("TICKWORK_FANOUT_INTERVAL_SECS", "60"), ("TICKWORK_FANOUT_LEASE_SECS", "60")]).unwrap_err();
        assert_eq!(e.var, "TICKWORK_FANOUT_LEASE_SECS");
        for (var, value) in [
            ("TICKWORK_FANOUT_PAGE_SIZE", "0"),
            ("TICKWORK_FANOUT_SHARD_CONCURRENCY", "0"),
            ("TICKWORK_FANOUT_MAX_LATENESS_DAYS", "0"),
            ("TICKWORK_FANOUT_JOB", "a b"),
        ] {
            assert_eq!(cfg(&[(var, value)]).unwrap_err().var, var, "{var}={value}");
        }
        // The template's timeout (270 s) under the default 290 s lease: fine; a 300 s function: refused.
        assert!(cfg(&[("TICKWORK_FUNCTION_TIMEOUT_SECS", "270")]).is_ok());
        assert_eq!(cfg(&[("TICKWORK_FUNCTION_TIMEOUT_SECS", "300")]).unwrap_err().var, "TICKWORK_FANOUT_LEASE_SECS");
    }
}
