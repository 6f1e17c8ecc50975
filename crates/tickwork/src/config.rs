//! Configuration from environment variables, parsed before any work starts.
//!
//! Why: a Lambda with a bad setting should fail at init naming the variable, not at 3 a.m. in
//! the middle of a sweep. Everything is read into typed structs once; a missing or malformed
//! variable is a [`ConfigError`] that says which one and why.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use crate::meter::CapacitySource;
use crate::retry::RetryPolicy;

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

    /// A duration given in seconds (fractions allowed), with a default.
    pub fn secs_or(&self, name: &str, default: Duration) -> Result<Duration, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(raw) => {
                let v: f64 = raw.trim().parse().map_err(|e| ConfigError::invalid(name, format!("`{raw}`: {e}")))?;
                if !(v.is_finite() && v >= 0.0) {
                    return Err(ConfigError::invalid(name, format!("`{raw}` is not a non-negative number of seconds")));
                }
                Ok(Duration::from_secs_f64(v))
            }
        }
    }
}

/// Settings every tickwork process shares.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// Prefix of every table name (`TICKWORK_TABLE_PREFIX`, default `tickwork`).
    pub table_prefix: String,
    /// Control table (`TICKWORK_CONTROL_TABLE`, default `<prefix>-control`).
    pub control_table: String,
    /// Capacity figures from the server or estimated (`TICKWORK_CAPACITY_SOURCE`).
    pub capacity_source: CapacitySource,
    /// Retry policy for data-plane calls.
    pub retry: RetryPolicy,
    /// Declared bound on clock differences (`TICKWORK_CLOCK_SKEW_SECS`, default 1).
    pub clock_skew: Duration,
}

impl CoreConfig {
    /// Reads the shared settings.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let table_prefix = env.get("TICKWORK_TABLE_PREFIX").unwrap_or_else(|| "tickwork".to_string());
        if !table_prefix.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(ConfigError::invalid(
                "TICKWORK_TABLE_PREFIX",
                format!("`{table_prefix}` has characters a table name cannot"),
            ));
        }
        let control_table = env.get("TICKWORK_CONTROL_TABLE").unwrap_or_else(|| format!("{table_prefix}-control"));
        let capacity_source = env.parse_or("TICKWORK_CAPACITY_SOURCE", CapacitySource::Server)?;
        let retry = RetryPolicy::from_env(env)?;
        let clock_skew = env.secs_or("TICKWORK_CLOCK_SKEW_SECS", Duration::from_secs(1))?;
        Ok(Self { table_prefix, control_table, capacity_source, retry, clock_skew })
    }

    /// The physical name of a logical table.
    pub fn table(&self, logical: &str) -> String {
        format!("{}-{logical}", self.table_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_variable() {
        let env = Env::from_pairs([("TICKWORK_CAPACITY_SOURCE", "guess")]);
        let e = CoreConfig::from_env(&env).unwrap_err();
        assert_eq!(e.var, "TICKWORK_CAPACITY_SOURCE");
        assert!(e.to_string().contains("guess"));
        let env = Env::from_pairs([("TICKWORK_CLOCK_SKEW_SECS", "-3")]);
        assert_eq!(CoreConfig::from_env(&env).unwrap_err().var, "TICKWORK_CLOCK_SKEW_SECS");
        assert_eq!(Env::from_pairs([]).required("X").unwrap_err().var, "X");
    }

    #[test]
    fn defaults() {
        let c = CoreConfig::from_env(&Env::from_pairs([])).unwrap();
        assert_eq!(c.control_table, "tickwork-control");
        assert_eq!(c.table("queue"), "tickwork-queue");
        assert_eq!(c.capacity_source, CapacitySource::Server);
    }
}
