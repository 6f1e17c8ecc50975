//! The settings every tickwork process shares, read once before any work starts.
//!
//! Why: a Lambda with a bad setting should fail at init naming the variable, not at 3 a.m. in
//! the middle of a sweep. Variable names and parsing live in [`crate::env`]; this module turns
//! them into the typed settings shared by every function.

use std::time::Duration;

use crate::env::{self as vars};
pub use crate::env::{ConfigError, Env};
use crate::meter::CapacitySource;
use crate::retry::RetryPolicy;

/// Settings every tickwork process shares.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// Prefix of every table name ([`vars::TABLE_PREFIX`]).
    pub table_prefix: String,
    /// Control table ([`vars::CONTROL_TABLE`]).
    pub control_table: String,
    /// Capacity figures from the server or estimated ([`vars::CAPACITY_SOURCE`]).
    pub capacity_source: CapacitySource,
    /// CloudWatch namespace of the job metrics ([`vars::METRICS_NAMESPACE`]).
    pub metrics_namespace: String,
    /// Retry policy for data-plane calls.
    pub retry: RetryPolicy,
    /// Declared bound on clock differences ([`vars::CLOCK_SKEW_SECS`]).
    pub clock_skew: Duration,
    /// Stop starting work this long before the deadline ([`vars::DEADLINE_MARGIN_SECS`]).
    pub margin: Duration,
    /// The function's timeout when declared ([`vars::FUNCTION_TIMEOUT_SECS`]); margins, leases
    /// and visibility timeouts are checked against it at start-up.
    pub function_timeout: Option<Duration>,
}

impl CoreConfig {
    /// Reads the shared settings; refuses a margin that leaves no time to work.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let table_prefix = env.get(vars::TABLE_PREFIX).unwrap_or_else(|| "tickwork".to_string());
        // DynamoDB table names: 3-255 characters of [a-zA-Z0-9_.-]; the longest suffix is `-summaries`.
        if table_prefix.len() > 200 || !table_prefix.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(ConfigError::invalid(
                vars::TABLE_PREFIX,
                format!("`{table_prefix}` is not 1..=200 characters of a-z, A-Z, 0-9, `-`, `_`, `.`"),
            ));
        }
        let control_table = env.get(vars::CONTROL_TABLE).unwrap_or_else(|| format!("{table_prefix}-control"));
        let capacity_source = env.parse_or(vars::CAPACITY_SOURCE, CapacitySource::Server)?;
        let metrics_namespace = env.get(vars::METRICS_NAMESPACE).unwrap_or_else(|| "tickwork".to_string());
        // CloudWatch namespaces: 1-255 of alphanumerics and . - _ / # : and space, not starting `AWS/`.
        if metrics_namespace.len() > 255
            || metrics_namespace.starts_with("AWS/")
            || !metrics_namespace.chars().all(|c| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c))
        {
            return Err(ConfigError::invalid(
                vars::METRICS_NAMESPACE,
                format!("`{metrics_namespace}` is not a valid CloudWatch namespace"),
            ));
        }
        let retry = RetryPolicy::from_env(env)?;
        let s = Duration::from_secs;
        let clock_skew = env.secs_in(vars::CLOCK_SKEW_SECS, s(1), Duration::ZERO, s(60))?;
        let margin = env.secs_in(vars::DEADLINE_MARGIN_SECS, s(5), Duration::ZERO, s(900))?;
        let function_timeout = match env.get(vars::FUNCTION_TIMEOUT_SECS) {
            None => None,
            Some(_) => Some(env.secs_in(vars::FUNCTION_TIMEOUT_SECS, s(60), s(1), s(900))?),
        };
        if let Some(t) = function_timeout {
            if margin >= t {
                return Err(ConfigError::invalid(
                    vars::DEADLINE_MARGIN_SECS,
                    format!("{} s leaves no time to work in a {} s function", margin.as_secs_f64(), t.as_secs_f64()),
                ));
            }
        }
        Ok(Self {
            table_prefix,
            control_table,
            capacity_source,
            metrics_namespace,
            retry,
            clock_skew,
            margin,
            function_timeout,
        })
    }

    /// The physical name of a logical table.
    pub fn table(&self, logical: &str) -> String {
        format!("{}-{logical}", self.table_prefix)
    }

    /// A table's name: its own variable when set, else `<prefix>-<logical>`.
    pub fn table_from(&self, env: &Env, var: &str, logical: &str) -> String {
        env.get(var).unwrap_or_else(|| self.table(logical))
    }
}

/// Tenant enumeration shards ([`vars::TENANT_SHARDS`]): one reading for every process that writes
/// or pages tenants (the sweep, the fan-out, `tickctl`), so that none accepts a count another
/// refuses. 0 is refused: no shard would hold a tenant.
pub fn tenant_shards(env: &Env) -> Result<u32, ConfigError> {
    env.int_in(vars::TENANT_SHARDS, 8u32, 1..=1000)
}

/// Change-feed shards ([`vars::CHANGE_SHARDS`]): the archiver's and `tickctl audit`'s one reading.
pub fn change_shards(env: &Env) -> Result<u32, ConfigError> {
    env.int_in(vars::CHANGE_SHARDS, 8u32, 1..=1000)
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
        assert_eq!((c.metrics_namespace.as_str(), c.margin), ("tickwork", Duration::from_secs(5)));
    }

    #[test]
    fn a_margin_at_or_above_the_timeout_is_refused() {
        let env = Env::from_pairs([("TICKWORK_FUNCTION_TIMEOUT_SECS", "45"), ("TICKWORK_DEADLINE_MARGIN_SECS", "45")]);
        assert_eq!(CoreConfig::from_env(&env).unwrap_err().var, "TICKWORK_DEADLINE_MARGIN_SECS");
        let env = Env::from_pairs([("TICKWORK_METRICS_NAMESPACE", "AWS/Lambda")]);
        assert_eq!(CoreConfig::from_env(&env).unwrap_err().var, "TICKWORK_METRICS_NAMESPACE");
    }
}
