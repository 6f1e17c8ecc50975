//! Settings every leased job validates the same way.

use std::time::Duration;

use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::lease::LeaseConfig;

/// `TICKWORK_DRY_RUN=true` turns every tick of a function into a dry run (compute and report, write
/// nothing), whatever the event says: a first deployment can run on its real schedule and show in
/// its logs what it would do before it does it. The event's `detail.dry_run` still works alone.
pub fn forced_dry_run(env: &Env) -> Result<bool, ConfigError> {
    env.bool_or(tickwork::env::DRY_RUN, false)
}

/// Job names become key prefixes and metric properties: short, plain, and distinct per job.
pub fn check_job_name(var: &str, job: &str) -> Result<(), ConfigError> {
    if job.is_empty()
        || job.len() > 64
        || !job.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(ConfigError::invalid(var, format!("`{job}` is not 1..=64 characters of a-z, 0-9 and `-`")));
    }
    Ok(())
}

/// A lease that can be correct: below the interval, above twice the skew, and above the
/// function's timeout when it is declared (a lease that lapses while its holder still runs lets a
/// second worker in).
pub fn lease_config(
    job: &str,
    ttl: Duration,
    interval: Duration,
    core: &CoreConfig,
    var: &str,
) -> Result<LeaseConfig, ConfigError> {
    let lease =
        LeaseConfig::new(job, ttl, interval, core.clock_skew).map_err(|e| ConfigError::invalid(var, e.problem))?;
    if let Some(t) = core.function_timeout {
        if ttl <= t {
            return Err(ConfigError::invalid(
                var,
                format!(
                    "lease {} s must exceed the function's timeout {} s: a lease that lapses while its holder runs \
                     lets a second worker in",
                    ttl.as_secs_f64(),
                    t.as_secs_f64()
                ),
            ));
        }
    }
    Ok(lease)
}
