//! What to price: the load, and the deployment the environment describes.

use std::collections::BTreeSet;

use anyhow::{ensure, Result};
use tickwork::calendar::{self, Policy};
use tickwork::config::Env;
use tickwork::tenants;

/// What to price.
#[derive(Debug, Clone)]
pub struct CostInput {
    /// Active tenants, round-robin over `zones`, added at `start_ms`.
    pub tenants: usize,
    /// IANA zone names.
    pub zones: Vec<String>,
    /// Sweep tick interval (ms).
    pub tick_ms: i64,
    /// Sweep workers on phase-shifted ticks (each tick is an invocation).
    pub workers: u32,
    /// Ticks to price.
    pub ticks: u64,
    /// First tick (ms).
    pub start_ms: i64,
    /// A queue drain every this many ticks.
    pub drain_every: u32,
    /// Tenant enumeration shards (`TICKWORK_TENANT_SHARDS`).
    pub tenant_shards: u32,
    /// Queue shards (`TICKWORK_QUEUE_SHARDS`).
    pub queue_shards: u32,
    /// Tenants per page (`TICKWORK_PULSE_PAGE_SIZE`).
    pub page_size: usize,
    /// Tenants per fan-out page (`TICKWORK_FANOUT_PAGE_SIZE`).
    pub fanout_page_size: usize,
    /// Items a worker polls per shard (`TICKWORK_WORKER_BATCH`).
    pub worker_batch: usize,
    /// Catch-up rules.
    pub policy: Policy,
    /// The grains the sweep pulses (`TICKWORK_PULSE_GRAINS`).
    pub grains: tickwork::grains::Grains,
}

/// The model's default first tick, 2026-03-29T00:00Z: its month holds Berlin's spring DST change
/// (a 23-hour day), a month and a quarter end, so a default run prices every grain and the
/// shortest local day.
pub const DEFAULT_START_MS: i64 = 1_774_742_400_000;

/// The most tenants the model replays one by one; above, it runs at two sizes and each service
/// is a straight line through them (minutes at ten million tenants become seconds).
pub const FULL_MODEL_MAX: usize = 4_000;

impl CostInput {
    /// This load under the deployment the environment describes: the shard counts, page sizes,
    /// worker batch and catch-up rules, read by the functions' own readers (their defaults and
    /// bounds), so `tickctl cost` prices what is deployed. These fields of `self` are overwritten;
    /// only its queue shards stay the default when the variable is unset (the template's 1). The
    /// load itself (tenants, zones, tick, workers, ticks, start, drains) stays as given. Refuses
    /// a degenerate load (no tenant, a tick of 0, no tick, drains more often than ticks) naming
    /// it, where it would otherwise divide by zero.
    pub fn with_env(self, env: &Env) -> Result<Self> {
        ensure!(self.tenants >= 1, "--tenants must be at least 1");
        ensure!(self.workers >= 1, "--workers must be at least 1");
        ensure!((1_000..=86_400_000).contains(&self.tick_ms), "--tick must be 1s to 1d");
        ensure!(self.ticks >= 1, "nothing to price: --days or --ticks must be at least 1");
        ensure!(self.drain_every >= 1, "--worker-every must be at least one --tick");
        let tick = std::time::Duration::from_millis(self.tick_ms as u64);
        // Each function's own reading of its settings (defaults and bounds in one place), but the
        // queue shards: unset, they are the template's (1), not the code's (8).
        Ok(CostInput {
            tenant_shards: tickwork::config::tenant_shards(env)?,
            queue_shards: env.int_in(tickwork::env::QUEUE_SHARDS, self.queue_shards, 1..=1000)?,
            page_size: pulse_sweep::config::page_size(env)? as usize,
            fanout_page_size: tenant_fanout::config::page_size(env)? as usize,
            worker_batch: queue_worker::config::batch(env)? as usize,
            policy: pulse_sweep::config::policy(env, tick)?,
            grains: pulse_sweep::config::grains(env)?,
            ..self
        })
    }

    /// `tenants` over the 8 sample zones for 30 days from 2026-03-29 as `template.yaml` deploys
    /// the stack: one sweep every quarter hour, the worker's drains hourly at the latest, 8 tenant
    /// shards, 1 queue shard, pages of 1,000, catch-up `all`: `tickctl cost`'s defaults.
    pub fn deployed(tenants: usize) -> Self {
        CostInput {
            tenants,
            zones: tenants::SAMPLE_ZONES.iter().map(|z| z.to_string()).collect(),
            tick_ms: 900_000,
            workers: 1,
            ticks: 30 * 96,
            start_ms: DEFAULT_START_MS,
            drain_every: 4,
            tenant_shards: 8,
            queue_shards: 1,
            page_size: 1000,
            fanout_page_size: 1000,
            worker_batch: 10,
            policy: Policy { catch_up: calendar::CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 900_000 },
            grains: tickwork::grains::Grains::ALL,
        }
    }
}

/// A duration as people write it (`90s`, `15m`, `1h`, `2d`, `1h 30m`: humantime's grammar), in ms.
pub fn parse_interval(s: &str) -> Result<i64> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| anyhow::anyhow!("`{s}` is not a duration like 60s, 15m, 1h, 1d: {e}"))?;
    i64::try_from(d.as_millis()).map_err(|_| anyhow::anyhow!("`{s}` is too long"))
}

/// The zones to use: names as given, or the first `count` sample zones.
pub fn zones(names: &[String], count: Option<usize>) -> Result<Vec<String>> {
    if !names.is_empty() {
        let set: BTreeSet<&String> = names.iter().collect();
        ensure!(set.len() == names.len(), "a zone is named twice");
        return Ok(names.to_vec());
    }
    let n = count.unwrap_or(tenants::SAMPLE_ZONES.len());
    ensure!(
        (1..=tenants::SAMPLE_ZONES.len()).contains(&n),
        "--zones must be 1..={} (or name them with --zone)",
        tenants::SAMPLE_ZONES.len()
    );
    Ok(tenants::SAMPLE_ZONES[..n].iter().map(|s| s.to_string()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_and_bad_ones_are_named() {
        assert_eq!(parse_interval("1m").unwrap(), 60_000);
        assert_eq!(parse_interval("90s").unwrap(), 90_000);
        assert_eq!(parse_interval("2h").unwrap(), 7_200_000);
        assert_eq!(parse_interval("1d").unwrap(), 86_400_000);
        assert!(parse_interval("1x").unwrap_err().to_string().contains("`1x` is not a duration"));
        assert!(parse_interval("m").unwrap_err().to_string().contains("not a duration"));
        assert!(zones(&[], Some(9)).is_err());
    }
}
