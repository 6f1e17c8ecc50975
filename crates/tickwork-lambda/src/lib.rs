//! What every tickwork Lambda shares, kept out of the `tickwork` library so that it has no
//! Lambda types.
//!
//! ## Layout
//! - [`event`]: the scheduled event, parsed and guarded (a malformed or future event is refused).
//! - [`job`]: the one skeleton the leased jobs run in (pause, lease, budget, metrics on every path).
//! - [`settings`]: job names and leases validated the same way for every job.
//! - [`telemetry`]: logs and metrics that survive Lambda's log-level filter.
//! - this file: clients from the environment, the invocation deadline, owner ids, error reports.

pub mod event;
pub mod job;
pub mod settings;
pub mod telemetry;

use std::sync::Arc;

use aws_config::{BehaviorVersion, SdkConfig};
use tickwork::clock::{Millis, SharedClock, SystemClock};
use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::meter::Meter;
use tickwork::Db;

pub use event::{BadEvent, Tick};
pub use job::{JobCore, JobReport, LeasedJob, Outcome};
pub use telemetry::init_tracing;

/// An error and every cause under it, `outer: cause: root`, so the one line Lambda reports names
/// the root (an SDK error's code, a missing table) and not just the wrapper.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let c_s = c.to_string();
        // `#[error(transparent)]` wrappers repeat their cause's text: say it once.
        if !s.ends_with(&c_s) {
            s.push_str(": ");
            s.push_str(&c_s);
        }
        cur = c.source();
    }
    s
}

/// What a handler's error becomes when Lambda reports it: the caller-chosen type and the chain.
pub fn diagnostic(error_type: &str, e: &dyn std::error::Error) -> lambda_runtime::Diagnostic {
    lambda_runtime::Diagnostic { error_type: error_type.to_string(), error_message: error_chain(e) }
}

/// `TICKWORK_DRY_RUN=true` turns every tick of a function into a dry run (compute and report, write
/// nothing), whatever the event says: a first deployment can run on its real schedule and show in
/// its logs what it would do before it does it. The event's `detail.dry_run` still works alone.
pub fn forced_dry_run(env: &Env) -> Result<bool, ConfigError> {
    env.bool_or(tickwork::env::DRY_RUN, false)
}

/// [`invocation_deadline`] at the system clock's now: what each function's `main` passes on.
pub fn deadline_ms(runtime_deadline_ms: u64) -> i64 {
    invocation_deadline(runtime_deadline_ms, tickwork::clock::Clock::now_ms(&tickwork::clock::SystemClock))
}

/// How long an invocation may run when the runtime gave no deadline.
pub const LOCAL_DEADLINE_MS: i64 = 60_000;

/// The invocation's deadline (epoch ms). Lambda always sends one in the future; local emulators
/// (`cargo lambda watch`, others) may send none, which the runtime reports as 0 — taken literally,
/// every budget would be spent before the first page and the tick would do nothing. Such a deadline
/// becomes `now + 60 s`, with a warning.
pub fn invocation_deadline(deadline_ms: u64, now_ms: Millis) -> Millis {
    let d = i64::try_from(deadline_ms).unwrap_or(i64::MAX);
    if d > now_ms {
        d
    } else {
        tracing::warn!(deadline_ms, "no invocation deadline from the runtime (a local emulator?); allowing 60 s");
        now_ms + LOCAL_DEADLINE_MS
    }
}

/// A per-invocation owner id: never reused, so a restarted worker is a new owner (`003_*`).
pub fn owner_id(function: &str) -> String {
    format!("{function}-{:016x}", fastrand::u64(..))
}

/// Clients and shared settings, built once per process.
#[derive(Debug, Clone)]
pub struct Base {
    /// Shared settings.
    pub core: CoreConfig,
    /// The loaded SDK config (endpoints honour `AWS_ENDPOINT_URL_*`).
    pub sdk: SdkConfig,
    /// Metered DynamoDB client.
    pub db: Db,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Base {
    /// Reads settings (failing with the variable's name) and builds the clients.
    pub async fn from_env(env: &Env, function: &str) -> Result<Self, ConfigError> {
        let core = CoreConfig::from_env(env)?;
        let sdk = aws_config::defaults(BehaviorVersion::latest()).load().await;
        if sdk.region().is_none() {
            return Err(ConfigError::invalid("AWS_REGION", "is not set and no region is configured"));
        }
        let client = tickwork::retry::work_client(&sdk, &core.retry, function);
        let db = Db::new(client, Meter::new(core.capacity_source));
        Ok(Self { core, sdk, db, clock: Arc::new(SystemClock) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_deadline_becomes_sixty_seconds() {
        assert_eq!(invocation_deadline(0, 1_000), 61_000);
        assert_eq!(invocation_deadline(900, 1_000), 61_000, "a deadline already past at the start");
        assert_eq!(invocation_deadline(5_000, 1_000), 5_000);
    }

    #[test]
    fn error_chains_name_the_root_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("sweep failed")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("table `t` does not exist"));
        assert_eq!(error_chain(&e), "sweep failed: table `t` does not exist");
        let d = diagnostic("DynamoDb", &e);
        assert_eq!(
            (d.error_type.as_str(), d.error_message.as_str()),
            ("DynamoDb", "sweep failed: table `t` does not exist")
        );
    }

    #[test]
    fn owner_ids_are_unique() {
        assert_ne!(owner_id("w"), owner_id("w"));
    }
}
