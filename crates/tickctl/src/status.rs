//! `tickctl status`: every job's lease and watermark, the queue's depth per shard, dead letters,
//! the archiver's positions. Reads only.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use tickwork::checkpoint::Checkpoints;
use tickwork::config::Env;
use tickwork::lease::{LeaseState, LeaseStore};
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork_lambda::Base;

use crate::control::{jobs, queue};

/// One job's coordination state.
#[derive(Debug, Serialize)]
pub struct JobStatus {
    /// Job.
    pub job: String,
    /// Lease item, if any.
    pub lease: Option<LeaseState>,
    /// Watermark item (marks, pause switch, groups).
    pub watermark: WatermarkState,
}

/// `status` counts ready queue items with one capped poll per shard, not a full enumeration: a
/// depth gauge for an operator, at most this many items read per shard.
pub const READY_CAP: u64 = 1000;

/// What `status` shows.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The release the stack runs (its `Version` output, [`tickwork::env::STACK_VERSION`]), when
    /// known; the functions also log it at start-up.
    pub stack_version: Option<String>,
    /// This `tickctl`'s release and the time zone database it decides with.
    pub tickctl_version: &'static str,
    /// The IANA time zone database this release's functions decide local times with.
    pub tzdb: &'static str,
    /// The optional parts the stack deploys.
    pub parts: crate::Parts,
    /// Per job.
    pub jobs: Vec<JobStatus>,
    /// Ready (visible now) items per queue shard, capped at 1,000.
    pub ready_by_shard: BTreeMap<u32, u64>,
    /// Dead letters.
    pub dead_letters: usize,
    /// Archiver positions per shard (cursor text or `done`).
    pub archiver_checkpoints: BTreeMap<String, String>,
    /// The queue worker's pause markers are in place.
    pub worker_paused: bool,
    /// Units isolated as failed (tenants, zones), per job, newest last.
    pub failures: BTreeMap<String, Vec<tickwork::failures::Failure>>,
    /// Schedule groups whose due record did not read, set aside by the sweep: `(group, problem)`.
    /// Their members fire nothing until `tickctl schedules doctor --repair` writes it again.
    pub schedules_set_aside: Vec<(String, String)>,
}

/// Reads every job's lease and watermark, queue depth per shard, dead letters, archiver positions.
pub async fn status(base: &Base, env: &Env) -> Result<Status> {
    let control = &base.core.control_table;
    let leases = LeaseStore::new(base.db.clone(), control, base.clock.clone());
    let marks = Watermarks::new(base.db.clone(), control, base.clock.clone());
    let mut jobs_out = Vec::new();
    for job in jobs(env)? {
        jobs_out.push(JobStatus { lease: leases.read(&job).await?, watermark: marks.read(&job).await?, job });
    }
    let queue = queue(base, env).await?;
    let mut ready = BTreeMap::new();
    for k in 0..queue.poll_shards() {
        // One keys-only poll; a shard with READY_CAP or more ready items shows READY_CAP. The
        // pause marker is not work.
        let n = queue
            .poll(k, READY_CAP as i32)
            .await?
            .iter()
            .filter(|c| !c.id.starts_with(tickwork::queue::PAUSE_PREFIX))
            .count() as u64;
        ready.insert(k, n);
    }
    let dead = queue.dead_letters().await?.len();
    let parts = crate::Parts::from_env(env)?;
    let ckpts = Checkpoints::new(base.db.clone(), control, base.clock.clone(), std::time::Duration::from_secs(86_400));
    let states = if parts.archiver { ckpts.read("archiver", "current").await? } else { BTreeMap::new() };
    let archiver_checkpoints = states
        .into_iter()
        .map(|(k, v)| {
            let text = match v {
                tickwork::checkpoint::ShardState::Start => "start".to_string(),
                tickwork::checkpoint::ShardState::Done => "done".to_string(),
                tickwork::checkpoint::ShardState::Resume(c) => c.as_str().to_string(),
            };
            (k, text)
        })
        .collect();
    let worker_paused = queue.get(&tickwork::queue::pause_marker(0)).await?.is_some();
    let mut failures = BTreeMap::new();
    for job in jobs(env)? {
        let list = tickwork::failures::list(&base.db, control, &job).await?;
        if !list.is_empty() {
            failures.insert(job, list);
        }
    }
    let sched = tickwork::schedules::Schedules::new(
        base.db.clone(),
        control,
        pulse_sweep::config::job(env)?,
        base.clock.clone(),
    );
    let schedules_set_aside = sched
        .quarantined_all()
        .await?
        .into_iter()
        .map(|q| match q {
            Ok(q) => (q.group, q.problem),
            Err((group, e)) => (group, e),
        })
        .collect();
    Ok(Status {
        stack_version: env.get(tickwork::env::STACK_VERSION),
        tickctl_version: tickwork::release::VERSION,
        tzdb: tickwork::release::tzdb(),
        parts,
        jobs: jobs_out,
        ready_by_shard: ready,
        dead_letters: dead,
        archiver_checkpoints,
        worker_paused,
        failures,
        schedules_set_aside,
    })
}
