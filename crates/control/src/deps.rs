//! What every operation needs, read once per process from the environment the template gives
//! the function: the sweep's own readings (job, shard count, catch-up policy), so the control
//! function holds a tenant's `owed_from` and a timer's instant to the bounds the sweep keeps.

use tickwork::calendar::Policy;
use tickwork::clock::SharedClock;
use tickwork::config::{ConfigError, Env};
use tickwork::queue::{Queue, QueueConfig};
use tickwork::schedules::Schedules;
use tickwork::tenants::Tenants;
use tickwork::watermark::Watermarks;
use tickwork::Db;

/// The function's role in `template.yaml`'s terms, for the IAM suite log
/// ([`tickwork::iam::acting_as`]).
pub const ROLE: &str = "control";

/// What every operation needs, built once per process.
#[derive(Debug, Clone)]
pub struct Deps {
    /// The tenants table, with the sweep's zone registry.
    pub tenants: Tenants,
    /// The schedules the sweep fires.
    pub schedules: Schedules,
    /// The sweep's state item (watermarks, pause, zone registry).
    pub marks: Watermarks,
    /// The sweep's job name.
    pub job: String,
    /// The sweep's catch-up policy (what `owed_from` and a one-off's instant are held to).
    pub policy: Policy,
    /// Wall clock.
    pub clock: SharedClock,
    /// The grains the sweep pulses (what `tenants.explain` shows periods of).
    pub grains: tickwork::grains::Grains,
    /// The work queue, read by `tenants.explain` alone (a tenant's units that went wrong, the
    /// oldest ready item).
    pub queue: Queue,
}

impl Deps {
    /// From the environment the template gives the function (the sweep's job, tables, shard
    /// count and catch-up policy); fails naming the variable.
    pub async fn from_env(env: &Env) -> Result<Self, ConfigError> {
        use tickwork::env as vars;
        let base = tickwork_lambda::Base::from_env(env, ROLE).await?;
        let job = pulse_sweep::config::job(env)?;
        let shards = tickwork::config::tenant_shards(env)?;
        // The sweep's own reading of its interval: the policy's bounds are the sweep's.
        let s = std::time::Duration::from_secs;
        let interval = env.secs_in(vars::PULSE_INTERVAL_SECS, s(60), s(60), s(86_400))?;
        let policy = pulse_sweep::config::policy(env, interval)?;
        let tables = pulse_sweep::Tables {
            control: base.core.control_table.clone(),
            tenants: base.core.table_from(env, vars::TENANTS_TABLE, "tenants"),
            queue: base.core.table_from(env, vars::QUEUE_TABLE, "queue"),
        };
        let grains = pulse_sweep::config::grains(env)?;
        let queue_shards = tickwork::queue::queue_shards(env)?;
        Ok(Self { grains, ..Self::new(base.db, base.clock, &tables, shards, job, policy) }
            .with_queue_shards(queue_shards))
    }

    /// From parts (tests, `tickctl`).
    pub fn new(
        db: Db,
        clock: SharedClock,
        tables: &pulse_sweep::Tables,
        tenant_shards: u32,
        job: String,
        policy: Policy,
    ) -> Self {
        let marks = Watermarks::new(db.clone(), &tables.control, clock.clone());
        let tenants =
            Tenants::new(db.clone(), &tables.tenants, tenant_shards).with_registry(marks.clone(), job.clone());
        let schedules = Schedules::new(db.clone(), &tables.control, job.clone(), clock.clone());
        let queue = Queue::new(db, &tables.queue, QueueConfig::default(), clock.clone());
        Self { tenants, schedules, marks, job, policy, clock, grains: tickwork::grains::Grains::ALL, queue }
    }

    /// The queue's ready shards as the stack sets them (`TICKWORK_QUEUE_SHARDS`): what
    /// `tenants.explain` reads the oldest ready item of.
    pub fn with_queue_shards(mut self, shards: u32) -> Self {
        let cfg = QueueConfig { shards, ..self.queue.config().clone() };
        self.queue = Queue::new(self.queue.db().clone(), self.queue.table(), cfg, self.clock.clone());
        self
    }
}
