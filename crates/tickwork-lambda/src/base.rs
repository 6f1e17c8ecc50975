//! Clients and shared settings, built once per process from the environment.

use std::sync::Arc;

use aws_config::{BehaviorVersion, SdkConfig};
use tickwork::clock::{SharedClock, SystemClock};
use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::meter::Meter;
use tickwork::Db;

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

/// A shard registry that could not be read at start-up, as the start-up's error: the function
/// refuses to start rather than enumerate its configured (perhaps lowered) count for the rest of
/// its life ([`tickwork::shard::ShardRegistry::resolve`]); Lambda starts it again next time.
pub fn unresolved_shards(e: tickwork::DbError) -> ConfigError {
    ConfigError::invalid(
        "shard registry",
        format!("cannot be read at start-up ({e}); refusing to start with the configured shard count"),
    )
}
