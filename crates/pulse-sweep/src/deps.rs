//! Everything the handler needs, built once per process from the environment or from parts.

use std::time::Duration;

use tickwork::checkpoint::Checkpoints;
use tickwork::clock::SharedClock;
use tickwork::config::{ConfigError, Env};
use tickwork::env as vars;
use tickwork::lease::LeaseStore;
use tickwork::queue::QueueConfig;
use tickwork::tenants::{Tenant, Tenants};
use tickwork::watermark::Watermarks;
use tickwork::Db;
use tickwork_lambda::{Base, JobCore};

use crate::config::PulseConfig;
use crate::helpers;
use crate::report::PulseError;

/// Physical table names.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Control table (lease, watermark, checkpoints).
    pub control: String,
    /// Tenants table.
    pub tenants: String,
    /// Queue table (pulses are queue items).
    pub queue: String,
}

/// How long a run's own items (its shards' checkpoints and leases) outlive their last write,
/// deleted by TTL: long past any run, short enough that a year of runs does not pile up.
pub const RUN_RETENTION: Duration = Duration::from_secs(14 * 86_400);

/// Everything the handler needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// What every leased job has.
    pub core: JobCore,
    /// Metered client.
    pub db: Db,
    /// Settings.
    pub cfg: PulseConfig,
    /// Table names.
    pub tables: Tables,
    /// Tenants (with the zone registry).
    pub tenants: Tenants,
    /// Queue settings (for the shard of each pulse item).
    pub queue_cfg: QueueConfig,
    /// Leases.
    pub leases: LeaseStore,
    /// Watermark, pause switch, zone registry.
    pub marks: Watermarks,
    /// Per zone/shard positions.
    pub checkpoints: Checkpoints,
    /// Tenants' schedules and their due index ([`crate::fires`]).
    pub schedules: tickwork::schedules::Schedules,
    /// Wall clock.
    pub clock: SharedClock,
    /// Starts helper invocations at a boundary ([`helpers`]; shared mode only). `None`: the
    /// leader pages every shard itself (outside Lambda, and in tests that drive the workers).
    pub helpers: Option<std::sync::Arc<dyn helpers::Helpers>>,
    /// Wakes the sweep at a schedule's instant ([`crate::wake`]). `None`: schedules fire at the
    /// tick.
    pub waker: Option<std::sync::Arc<dyn crate::wake::Waker>>,
}

impl Deps {
    /// Builds from the environment; fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        let d = Self::configured(env).await?;
        d.resolve_shards().await.map_err(tickwork_lambda::base::unresolved_shards)
    }

    /// Built from the environment for an operator's reading (`tickctl plan`): every tenant shard
    /// any writer recorded is enumerated, and nothing is recorded. [`Deps::from_env`] records this
    /// process's counts, as a function's start-up must; an operator's tool with the code's
    /// defaults (8 queue shards where the template deploys 1) would widen the deployed worker's
    /// polling for good.
    pub async fn from_env_reading(env: &Env) -> Result<Self, ConfigError> {
        let mut d = Self::configured(env).await?;
        let reg = tickwork::shard::ShardRegistry::new(d.db.clone(), &d.tables.control);
        let n = reg
            .effective("tenants", d.tenants.write_shards())
            .await
            .map_err(tickwork_lambda::base::unresolved_shards)?;
        d.tenants = d.tenants.with_read_shards(n);
        Ok(d)
    }

    /// The dependencies as the environment configures them, before the shard registry is read.
    async fn configured(env: &Env) -> Result<Self, ConfigError> {
        let base = Base::from_env(env, "pulse-sweep").await?;
        let cfg = PulseConfig::from_core(env, &base.core)?;
        let tables = Tables {
            control: base.core.control_table.clone(),
            tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
            queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
        };
        let shards = tickwork::config::tenant_shards(env)?;
        crate::config::check_shared_shards(cfg.shard_workers, shards)?;
        let helpers = (cfg.shard_workers > 1)
            .then(|| helpers::LambdaHelpers::from_sdk(&base.sdk))
            .flatten()
            .map(|h| std::sync::Arc::new(h) as std::sync::Arc<dyn helpers::Helpers>);
        let waker = crate::wake::WakeConfig::from_env(env)?.map(|w| {
            let mut b = aws_sdk_scheduler::config::Builder::from(&base.sdk);
            if let Some(r) = tickwork::iam::suite_recorder() {
                b = b.interceptor(r.map(crate::wake::scheduler_accesses));
            }
            let client = aws_sdk_scheduler::Client::from_conf(b.build());
            std::sync::Arc::new(crate::wake::SchedulerWaker::new(client, w)) as std::sync::Arc<dyn crate::wake::Waker>
        });
        let mut d = Self::new(base.db, base.clock, cfg, tables, shards, QueueConfig::from_env(env)?);
        d.helpers = helpers;
        d.waker = waker;
        d.core.namespace = base.core.metrics_namespace.clone();
        Ok(d)
    }

    /// Start-up: records the shard counts this process writes with and enumerates every tenant
    /// shard ever written to ([`tickwork::shard::ShardRegistry`]).
    pub async fn resolve_shards(mut self) -> Result<Self, tickwork::DbError> {
        tickwork::iam::acting_as(crate::config::ROLE, async move {
            let reg = tickwork::shard::ShardRegistry::new(self.db.clone(), &self.tables.control);
            reg.resolve("queue", self.queue_cfg.shards).await?;
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
        cfg: PulseConfig,
        tables: Tables,
        tenant_shards: u32,
        queue_cfg: QueueConfig,
    ) -> Self {
        let retention = RUN_RETENTION;
        let core = JobCore::new(
            "pulse-sweep",
            db.clone(),
            clock.clone(),
            &tables.control,
            cfg.lease.clone(),
            cfg.margin,
            cfg.dry_run,
        );
        Self {
            tenants: Tenants::new(db.clone(), &tables.tenants, tenant_shards)
                .with_registry(core.marks.clone(), &cfg.job),
            checkpoints: Checkpoints::new(db.clone(), &tables.control, clock.clone(), retention),
            schedules: tickwork::schedules::Schedules::new(db.clone(), &tables.control, &cfg.job, clock.clone()),
            leases: core.leases.clone(),
            marks: core.marks.clone(),
            core,
            db,
            cfg,
            tables,
            queue_cfg,
            clock,
            helpers: None,
            waker: None,
        }
    }
}

/// Adds tenants and registers their zones with the sweep ([`Tenants::add`]): every tenant
/// validated first, zones registered before tenants are written, `since` stamped.
pub async fn add_tenants(deps: &Deps, tenants: &[Tenant]) -> Result<(), PulseError> {
    deps.tenants.add(tenants, deps.clock.now_ms()).await?;
    Ok(())
}
