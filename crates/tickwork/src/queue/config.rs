//! The queue's settings, read once and refused at start-up when they cannot work.

use std::time::Duration;

use crate::config::{ConfigError, Env};

/// Ready-index shards ([`crate::env::QUEUE_SHARDS`]): the queue's and `tickctl audit`'s one
/// reading, without the rest of the queue's settings.
pub fn queue_shards(env: &Env) -> Result<u32, ConfigError> {
    env.int_in(crate::env::QUEUE_SHARDS, QueueConfig::default().shards, 1..=1000)
}

/// Queue settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Ready-index shards (`TICKWORK_QUEUE_SHARDS`, default 8).
    pub shards: u32,
    /// Claim duration (`TICKWORK_QUEUE_VISIBILITY_SECS`, default 120).
    pub visibility: Duration,
    /// Claims before an item is dead-lettered (`TICKWORK_QUEUE_MAX_ATTEMPTS`, default 5).
    pub max_attempts: u32,
    /// First retry delay (`TICKWORK_QUEUE_BACKOFF_SECS`, default 10); doubles per attempt.
    pub backoff_base: Duration,
    /// Longest retry delay (`TICKWORK_QUEUE_BACKOFF_MAX_SECS`, default 3600).
    pub backoff_max: Duration,
    /// How long finished ids are remembered (`TICKWORK_QUEUE_RETENTION_SECS`, default 14 days).
    pub retention: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            shards: 8,
            visibility: Duration::from_secs(120),
            max_attempts: 5,
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(3600),
            retention: Duration::from_secs(14 * 86_400),
        }
    }
}

impl QueueConfig {
    /// Reads and validates the settings.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        use crate::env as vars;
        let d = Self::default();
        let s = Duration::from_secs;
        let c = Self {
            shards: queue_shards(env)?,
            visibility: env.secs_in(vars::QUEUE_VISIBILITY_SECS, d.visibility, s(1), s(12 * 3600))?,
            max_attempts: env.int_in(vars::QUEUE_MAX_ATTEMPTS, d.max_attempts, 1..=100)?,
            backoff_base: env.secs_in(vars::QUEUE_BACKOFF_SECS, d.backoff_base, Duration::ZERO, s(86_400))?,
            backoff_max: env.secs_in(vars::QUEUE_BACKOFF_MAX_SECS, d.backoff_max, Duration::ZERO, s(7 * 86_400))?,
            retention: env.secs_in(vars::QUEUE_RETENTION_SECS, d.retention, s(3600), s(365 * 86_400))?,
        };
        c.validate()?;
        Ok(c)
    }

    /// Refuses settings that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1000).contains(&self.shards) {
            return Err(ConfigError::invalid(crate::env::QUEUE_SHARDS, format!("{} is not in 1..=1000", self.shards)));
        }
        if self.max_attempts == 0 {
            return Err(ConfigError::invalid(crate::env::QUEUE_MAX_ATTEMPTS, "must be at least 1"));
        }
        if self.visibility.is_zero() {
            return Err(ConfigError::invalid(crate::env::QUEUE_VISIBILITY_SECS, "must be above 0"));
        }
        Ok(())
    }

    /// Delay before the next attempt after `attempts` claims: base × 2^(attempts−1), capped.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(30);
        self.backoff_base.saturating_mul(1u32 << exp).min(self.backoff_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let c = QueueConfig {
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(60),
            ..Default::default()
        };
        let got: Vec<u64> = (1..=5).map(|a| c.backoff(a).as_secs()).collect();
        assert_eq!(got, vec![10, 20, 40, 60, 60]);
    }

    #[test]
    fn config_is_validated() {
        let e = QueueConfig::from_env(&Env::from_pairs([(crate::env::QUEUE_SHARDS, "0")])).unwrap_err();
        assert_eq!(e.var, crate::env::QUEUE_SHARDS);
        assert!(QueueConfig::from_env(&Env::from_pairs([(crate::env::QUEUE_MAX_ATTEMPTS, "0")])).is_err());
    }
}
