//! Everything the handler needs, built once per process from the environment or from parts.

use std::time::Duration;

use tickwork::checkpoint::Checkpoints;
use tickwork::clock::SharedClock;
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseStore;
use tickwork::queue::{Queue, QueueConfig};
use tickwork::slot::Slots;
use tickwork::tenants::Tenants;
use tickwork::watermark::Watermarks;
use tickwork::Db;
use tickwork_lambda::{Base, JobCore};

use crate::config::FanoutConfig;

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered client.
    pub db: Db,
    /// Settings.
    pub cfg: FanoutConfig,
    /// Tenants table.
    pub tenants: Tenants,
    /// The queue items go to.
    pub queue: Queue,
    /// Leases.
    pub leases: LeaseStore,
    /// Slot records.
    pub slots: Slots,
    /// Watermark and pause switch.
    pub marks: Watermarks,
    /// Per-shard cursors.
    pub checkpoints: Checkpoints,
    /// Wall clock (lease expiry, deadlines).
    pub clock: SharedClock,
}

/// Physical table names.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Control table.
    pub control: String,
    /// Tenants table.
    pub tenants: String,
    /// Queue table.
    pub queue: String,
}

impl Deps {
    /// Builds everything from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "tenant-fanout").await?;
        let cfg = FanoutConfig::from_core(env, &base.core)?;
        let tenant_shards = tickwork::config::tenant_shards(env)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
            queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
        };
        let queue_cfg = QueueConfig::from_env(env)?;
        let mut d = Self::new(base.db, base.clock, cfg, &tables, tenant_shards, queue_cfg);
        d.core.namespace = base.core.metrics_namespace.clone();
        d.resolve_shards().await.map_err(tickwork_lambda::base::unresolved_shards)
    }

    /// Start-up: records the shard counts this process writes with and enumerates every tenant
    /// shard ever written to ([`tickwork::shard::ShardRegistry`]).
    pub async fn resolve_shards(mut self) -> Result<Self, tickwork::DbError> {
        tickwork::iam::acting_as(crate::config::ROLE, async move {
            let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), self.leases.table());
            reg.resolve("queue", self.queue.config().shards).await?;
            let n = reg.resolve("tenants", self.tenants.write_shards()).await?;
            self.tenants = self.tenants.with_read_shards(n);
            Ok(self)
        })
        .await
    }

    /// Builds from parts (tests, local drivers).
    pub fn new(
        db: Db,
        clock: SharedClock,
        cfg: FanoutConfig,
        t: &Tables,
        tenant_shards: u32,
        queue: QueueConfig,
    ) -> Self {
        let retention = Duration::from_secs(14 * 86_400);
        let core = JobCore::new(
            "tenant-fanout",
            db.clone(),
            clock.clone(),
            &t.control,
            cfg.lease.clone(),
            cfg.margin,
            cfg.dry_run,
        );
        Self {
            tenants: Tenants::new(db.clone(), &t.tenants, tenant_shards),
            queue: Queue::new(db.clone(), &t.queue, queue, clock.clone()),
            slots: Slots::new(db.clone(), &t.control, clock.clone(), retention),
            checkpoints: Checkpoints::new(db.clone(), &t.control, clock.clone(), retention),
            leases: core.leases.clone(),
            marks: core.marks.clone(),
            core,
            db,
            cfg,
            clock,
        }
    }
}
