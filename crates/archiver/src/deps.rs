//! Everything the handler needs, built once per process from the environment or from parts.

use std::time::Duration;

use tickwork::checkpoint::Checkpoints;
use tickwork::clock::SharedClock;
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseStore;
use tickwork::watermark::Watermarks;
use tickwork::Db;
use tickwork_lambda::{Base, JobCore};

use crate::config::ArchiverConfig;
use crate::object::s3_client;

/// Everything the handler needs.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered DynamoDB client.
    pub db: Db,
    /// S3 client.
    pub s3: aws_sdk_s3::Client,
    /// Settings.
    pub cfg: ArchiverConfig,
    /// Change-feed table.
    pub table: String,
    /// Leases.
    pub leases: LeaseStore,
    /// State item: pause switch, `oldest`, `probed`.
    pub marks: Watermarks,
    /// Per-shard positions.
    pub checkpoints: Checkpoints,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Deps {
    /// Builds from the environment.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "archiver").await?;
        let cfg = ArchiverConfig::from_core(env, &base.core)?;
        let table = base.core.table_from(env, vars::CHANGES_TABLE, "changes");
        let s3 = s3_client(&base.sdk);
        let mut d = Self::new(base.db, s3, base.clock, cfg, &base.core.control_table, table);
        d.core.namespace = base.core.metrics_namespace.clone();
        d.resolve_shards().await.map_err(tickwork_lambda::base::unresolved_shards)
    }

    /// Start-up: records this process's change-feed shard count and archives every shard ever
    /// written to ([`tickwork::shard::ShardRegistry`]): rows written with a larger count before a
    /// setting was lowered are still found.
    pub async fn resolve_shards(mut self) -> Result<Self, tickwork::DbError> {
        tickwork::iam::acting_as(crate::config::ROLE, async move {
            let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), self.leases.table());
            self.cfg.shards = reg.resolve("changes", self.cfg.shards).await?;
            Ok(self)
        })
        .await
    }

    /// Builds from parts.
    pub fn new(
        db: Db,
        s3: aws_sdk_s3::Client,
        clock: SharedClock,
        cfg: ArchiverConfig,
        control: &str,
        table: String,
    ) -> Self {
        let core =
            JobCore::new("archiver", db.clone(), clock.clone(), control, cfg.lease.clone(), cfg.margin, cfg.dry_run);
        Self {
            checkpoints: Checkpoints::new(db.clone(), control, clock.clone(), Duration::from_secs(30 * 86_400)),
            leases: core.leases.clone(),
            marks: core.marks.clone(),
            core,
            db,
            s3,
            cfg,
            table,
            clock,
        }
    }
}
