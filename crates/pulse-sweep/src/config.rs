//! The sweep's settings, read once at start-up; a setting that cannot be correct is refused there,
//! naming its variable.

/// The function's role in `template.yaml`'s terms, for the IAM suite log ([`tickwork::iam::acting_as`]).
pub const ROLE: &str = "pulse-sweep";

use std::time::Duration;

use tickwork::calendar::{CatchUp, Policy};
use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseConfig;
use tickwork_lambda::settings::{check_job_name, lease_config};

/// Most shards a shared run may have: its watermark advances in one transaction holding a check
/// of every shard's checkpoint and the advance (at most 100 items, "TransactWriteItems",
/// DynamoDB API reference), with room to spare.
pub const MAX_SHARED_SHARDS: u32 = 96;

/// Longest lateness accepted: bounds what one tenant's catch-up adds to a batch.
pub const MAX_LATENESS_LIMIT: Duration = Duration::from_secs(60 * 86_400);

/// Most invocations a boundary may be shared by: past this, the checkpoint partition every worker
/// writes is the limit, not the workers (`tickctl cost` reports it).
pub const MAX_SHARD_WORKERS: u32 = 64;

/// The sweep's timeout as the template deploys it (`PulseSweepFunction.Timeout`, held to it by the
/// template test): what `tickctl cost` models a boundary's invocation with when the environment
/// names none. A 3,000,000-tenant group is about 300 s of paging for one worker; in a 300 s
/// invocation its tail waited for the next quarter-hour tick.
pub const DEPLOYED_TIMEOUT_SECS: u64 = 480;

/// Invocations a boundary's shards are paged by ([`vars::PULSE_SHARD_WORKERS`]): the sweep's and
/// `tickctl cost`'s one reading.
pub fn shard_workers(env: &Env) -> Result<u32, ConfigError> {
    env.int_in(vars::PULSE_SHARD_WORKERS, 1u32, 1..=MAX_SHARD_WORKERS)
}

/// Can `workers` share a boundary of `tenant_shards` shards? One worker always can; several need
/// at most [`MAX_SHARED_SHARDS`], since a shared run's watermark advances in one transaction
/// checking every shard. Pure; the sweep refuses the setting at start-up, `tickctl cost` says so.
pub fn check_shared_shards(workers: u32, tenant_shards: u32) -> Result<(), ConfigError> {
    if workers > 1 && tenant_shards > MAX_SHARED_SHARDS {
        return Err(ConfigError::invalid(
            vars::PULSE_SHARD_WORKERS,
            format!(
                "shard workers need at most {MAX_SHARED_SHARDS} tenant shards ({} is {tenant_shards}): a shared run's watermark advances in one transaction checking every shard",
                vars::TENANT_SHARDS
            ),
        ));
    }
    Ok(())
}

/// Tenants per page of the zone index ([`vars::PULSE_PAGE_SIZE`]): the sweep's and `tickctl
/// cost`'s one reading.
pub fn page_size(env: &Env) -> Result<i32, ConfigError> {
    env.int_in(vars::PULSE_PAGE_SIZE, 1000, 1..=1000)
}

/// What is pulsed for periods missed during an outage ([`vars::PULSE_CATCH_UP`],
/// [`vars::PULSE_MAX_LATENESS_SECS`]), on a schedule of `interval`: the sweep's and `tickctl
/// cost`'s one reading.
pub fn policy(env: &Env, interval: Duration) -> Result<Policy, ConfigError> {
    let catch_up: CatchUp = env.parse_or(vars::PULSE_CATCH_UP, CatchUp::All)?;
    let lateness = env.secs_in(
        vars::PULSE_MAX_LATENESS_SECS,
        Duration::from_secs(40 * 86_400),
        Duration::from_secs(1),
        MAX_LATENESS_LIMIT,
    )?;
    Ok(Policy { catch_up, max_lateness_ms: lateness.as_millis() as i64, interval_ms: interval.as_millis() as i64 })
}

/// The sweep's job name ([`vars::PULSE_JOB`]): its lease, state item and pause switch. The one
/// reading, for the sweep and `tickctl` alike.
pub fn job(env: &Env) -> Result<String, ConfigError> {
    let job = env.get(vars::PULSE_JOB).unwrap_or_else(|| "pulse-sweep".into());
    check_job_name(vars::PULSE_JOB, &job)?;
    Ok(job)
}

/// Sweep settings.
#[derive(Debug, Clone)]
pub struct PulseConfig {
    /// Every tick a dry run ([`vars::DRY_RUN`]).
    pub dry_run: bool,
    /// Job name ([`vars::PULSE_JOB`]).
    pub job: String,
    /// Lease ([`vars::PULSE_LEASE_SECS`], below [`vars::PULSE_INTERVAL_SECS`], above the timeout).
    pub lease: LeaseConfig,
    /// Catch-up ([`vars::PULSE_CATCH_UP`], [`vars::PULSE_MAX_LATENESS_SECS`]).
    pub policy: Policy,
    /// Tenants per page ([`vars::PULSE_PAGE_SIZE`]).
    pub page_size: i32,
    /// Woken tenants read at once ([`vars::PULSE_TENANT_CONCURRENCY`]).
    pub tenant_concurrency: usize,
    /// Groups' first member pages read at once in a due shard ([`vars::PULSE_FIRE_CONCURRENCY`]):
    /// a burst of distinct timers is a member Query a group, and these set its pace.
    pub fire_concurrency: usize,
    /// Stop this long before the deadline ([`vars::DEADLINE_MARGIN_SECS`]).
    pub margin: Duration,
    /// Invocations a boundary's shards are paged by at once ([`vars::PULSE_SHARD_WORKERS`]);
    /// 1: the leader alone, under the job's lease.
    pub shard_workers: u32,
    /// The grains pulsed ([`vars::PULSE_GRAINS`]).
    pub grains: tickwork::grains::Grains,
}

impl PulseConfig {
    /// Reads and validates settings with the shared ones' defaults.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let mut core = CoreConfig::from_env(env)?;
        core.clock_skew = skew;
        Self::from_core(env, &core)
    }

    /// Reads and validates settings; a lease TTL at or above the interval, or at or below the
    /// function's timeout, is refused.
    pub fn from_core(env: &Env, core: &CoreConfig) -> Result<Self, ConfigError> {
        let s = Duration::from_secs;
        let job = job(env)?;
        let interval = env.secs_in(vars::PULSE_INTERVAL_SECS, s(60), s(60), s(86_400))?;
        let ttl = env.secs_or(vars::PULSE_LEASE_SECS, s(50))?;
        let lease = lease_config(&job, ttl, interval, core, vars::PULSE_LEASE_SECS)?;
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            policy: policy(env, interval)?,
            job,
            lease,
            page_size: page_size(env)?,
            tenant_concurrency: env.int_in(vars::PULSE_TENANT_CONCURRENCY, 8usize, 1..=256)?,
            fire_concurrency: env.int_in(vars::PULSE_FIRE_CONCURRENCY, 64usize, 1..=256)?,
            margin: core.margin,
            shard_workers: shard_workers(env)?,
            grains: grains(env)?,
        })
    }
}

/// The grains pulsed ([`vars::PULSE_GRAINS`]; every one when unset); the cost model reads it too.
pub fn grains(env: &Env) -> Result<tickwork::grains::Grains, ConfigError> {
    match env.get(vars::PULSE_GRAINS) {
        None => Ok(tickwork::grains::Grains::ALL),
        Some(v) => tickwork::grains::Grains::parse(&v).map_err(|e| ConfigError::invalid(vars::PULSE_GRAINS, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<PulseConfig, ConfigError> {
        PulseConfig::from_env(&Env::from_pairs(pairs.iter().copied()), Duration::from_secs(1))
    }

    #[test]
    fn settings_that_cannot_be_correct_are_refused() {
        let e = cfg(&[("TICKWORK_PULSE_LEASE_SECS", "60")]).unwrap_err();
        assert_eq!(e.var, "TICKWORK_PULSE_LEASE_SECS");
        assert!(e.problem.contains("below the schedule interval"));
        for (var, value) in [
            ("TICKWORK_PULSE_CATCH_UP", "some"),
            ("TICKWORK_PULSE_GRAINS", "day,hour"),
            ("TICKWORK_PULSE_MAX_LATENESS_SECS", "99999999"),
            ("TICKWORK_PULSE_MAX_LATENESS_SECS", "0"),
            ("TICKWORK_PULSE_MAX_LATENESS_SECS", "1e30"),
            ("TICKWORK_PULSE_PAGE_SIZE", "0"),
            ("TICKWORK_PULSE_TENANT_CONCURRENCY", "0"),
            ("TICKWORK_PULSE_FIRE_CONCURRENCY", "0"),
            ("TICKWORK_PULSE_FIRE_CONCURRENCY", "257"),
            ("TICKWORK_PULSE_JOB", "Pulse Sweep"),
            ("TICKWORK_PULSE_INTERVAL_SECS", "1e30"),
        ] {
            assert_eq!(cfg(&[(var, value)]).unwrap_err().var, var, "{var}={value}");
        }
        let e = cfg(&[("TICKWORK_FUNCTION_TIMEOUT_SECS", "55")]).unwrap_err();
        assert_eq!(e.var, "TICKWORK_PULSE_LEASE_SECS", "a 50 s lease under a 55 s function");
        assert!(cfg(&[("TICKWORK_FUNCTION_TIMEOUT_SECS", "45")]).is_ok());
        assert!(cfg(&[]).is_ok());
    }

    #[test]
    fn shard_workers_are_bounded_and_need_a_shard_count_one_transaction_can_check() {
        for bad in ["0", "65"] {
            let e = shard_workers(&Env::from_pairs([("TICKWORK_PULSE_SHARD_WORKERS", bad)])).unwrap_err();
            assert_eq!(e.var, "TICKWORK_PULSE_SHARD_WORKERS", "{bad}");
        }
        assert_eq!(shard_workers(&Env::from_pairs([])).unwrap(), 1);
        assert!(check_shared_shards(1, 1000).is_ok(), "the leader alone pages any count");
        assert!(check_shared_shards(8, MAX_SHARED_SHARDS).is_ok());
        let e = check_shared_shards(2, MAX_SHARED_SHARDS + 1).unwrap_err();
        assert!(e.problem.contains("TICKWORK_TENANT_SHARDS"), "{e}");
    }
}
