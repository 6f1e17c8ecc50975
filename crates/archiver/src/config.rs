//! The archiver's settings, read once at start-up; a setting that cannot be correct is refused
//! there, naming its variable.

/// The function's role in `template.yaml`'s terms, for the IAM suite log ([`tickwork::iam::acting_as`]).
pub const ROLE: &str = "archiver";

use std::time::Duration;

use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseConfig;
use tickwork_lambda::settings::lease_config;

/// The archiver's job name (lease, state item, pause switch).
pub const JOB: &str = "archiver";

/// Largest batch: the intent record lists every row of its batch, and must stay well inside an
/// item's 400 KB (500 rows of the longest change-row key, 512 bytes, is about 260 KB).
pub const MAX_PAGE_SIZE: i32 = 500;

/// Archiver settings.
#[derive(Debug, Clone)]
pub struct ArchiverConfig {
    /// Every tick a dry run ([`vars::DRY_RUN`]).
    pub dry_run: bool,
    /// Rows older than this are archived ([`vars::ARCHIVE_AGE_SECS`]).
    pub age: Duration,
    /// Rows per batch and per object ([`vars::ARCHIVE_PAGE_SIZE`]).
    pub page_size: i32,
    /// Change-feed shards ([`vars::CHANGE_SHARDS`]).
    pub shards: u32,
    /// Shards archived at once ([`vars::ARCHIVE_SHARD_CONCURRENCY`]).
    pub shard_concurrency: usize,
    /// Bucket ([`vars::ARCHIVE_BUCKET`], required).
    pub bucket: String,
    /// Key prefix ([`vars::ARCHIVE_PREFIX`]).
    pub prefix: String,
    /// Lease ([`vars::ARCHIVE_LEASE_SECS`], below [`vars::ARCHIVE_INTERVAL_SECS`]).
    pub lease: LeaseConfig,
    /// The longest an idle archiver trusts its next-due mark ([`vars::ARCHIVE_PROBE_EVERY_SECS`]).
    pub probe_every: Duration,
    /// Stop this long before the deadline.
    pub margin: Duration,
}

impl ArchiverConfig {
    /// Reads and validates the settings with the shared ones' defaults.
    pub fn from_env(env: &Env, skew: Duration) -> Result<Self, ConfigError> {
        let mut core = CoreConfig::from_env(env)?;
        core.clock_skew = skew;
        Self::from_core(env, &core)
    }

    /// Reads and validates the settings.
    pub fn from_core(env: &Env, core: &CoreConfig) -> Result<Self, ConfigError> {
        let s = Duration::from_secs;
        let interval = env.secs_in(vars::ARCHIVE_INTERVAL_SECS, s(300), s(60), s(86_400))?;
        let ttl = env.secs_or(vars::ARCHIVE_LEASE_SECS, s(290))?;
        let lease = lease_config(JOB, ttl, interval, core, vars::ARCHIVE_LEASE_SECS)?;
        let prefix = env.get(vars::ARCHIVE_PREFIX).unwrap_or_else(|| "archive".into());
        // The prefix starts every object key (at most 1,024 bytes of UTF-8, S3 User Guide, "Naming
        // objects"); ours stays printable ASCII and short so the rest of the key always fits.
        if prefix.len() > 256 || !prefix.chars().all(|c| c.is_ascii_graphic()) || prefix.starts_with('/') {
            return Err(ConfigError::invalid(
                vars::ARCHIVE_PREFIX,
                format!("`{prefix}` is not 1..=256 printable ASCII characters without a leading `/`"),
            ));
        }
        Ok(Self {
            dry_run: tickwork_lambda::forced_dry_run(env)?,
            age: env.secs_in(vars::ARCHIVE_AGE_SECS, s(30 * 86_400), s(60), s(366 * 86_400))?,
            page_size: env.int_in(vars::ARCHIVE_PAGE_SIZE, 100, 1..=MAX_PAGE_SIZE)?,
            shards: tickwork::config::change_shards(env)?,
            shard_concurrency: env.int_in(vars::ARCHIVE_SHARD_CONCURRENCY, 4usize, 1..=64)?,
            bucket: env.required(vars::ARCHIVE_BUCKET)?,
            prefix,
            lease,
            probe_every: env.secs_in(vars::ARCHIVE_PROBE_EVERY_SECS, s(3600), s(60), s(86_400))?,
            margin: core.margin,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_is_required_and_bad_settings_refused() {
        let cfg = |pairs: &[(&str, &str)]| {
            ArchiverConfig::from_env(&Env::from_pairs(pairs.iter().copied()), Duration::from_secs(1))
        };
        assert_eq!(cfg(&[]).unwrap_err().var, "TICKWORK_ARCHIVE_BUCKET");
        let b = ("TICKWORK_ARCHIVE_BUCKET", "b");
        for (var, value) in [
            ("TICKWORK_ARCHIVE_PAGE_SIZE", "501"),
            ("TICKWORK_ARCHIVE_AGE_SECS", "1e30"),
            ("TICKWORK_ARCHIVE_AGE_SECS", "10"),
            ("TICKWORK_CHANGE_SHARDS", "0"),
            ("TICKWORK_ARCHIVE_PREFIX", "/abs"),
            ("TICKWORK_ARCHIVE_PREFIX", "caf\u{e9}"),
        ] {
            assert_eq!(cfg(&[b, (var, value)]).unwrap_err().var, var, "{var}={value}");
        }
        assert!(cfg(&[b]).is_ok());
    }
}
