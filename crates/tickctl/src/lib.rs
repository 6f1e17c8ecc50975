//! `tickctl`: what an operator runs when something looks wrong, and what a developer runs to get
//! a local stack going. Reads the same environment variables as the Lambdas.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Serialize;
use tickwork::checkpoint::Checkpoints;
use tickwork::config::Env;
use tickwork::lease::{LeaseState, LeaseStore};
use tickwork::queue::{queue_table, Queue, QueueConfig};
use tickwork::schema::{self, TableDef};
use tickwork::watermark::{WatermarkState, Watermarks};
use tickwork_lambda::Base;

/// Every table the stack declares, by logical name: the single source `provision` and the
/// template test use.
pub fn all_tables() -> Vec<TableDef> {
    vec![
        schema::control_table(),
        queue_table(),
        tickwork::tenants::tenants_table(),
        queue_worker::summary::summaries_table(),
        tickwork::changes::changes_table(),
    ]
}

/// The jobs `status` reports on (lease and watermark names).
pub fn jobs(env: &Env) -> Vec<String> {
    let fanout = env.get("TICKWORK_FANOUT_JOB").unwrap_or_else(|| "daily-summary".into());
    vec!["pulse-sweep".into(), format!("fanout-{fanout}"), "archiver".into()]
}

/// Creates every table (and the archive bucket when `TICKWORK_ARCHIVE_BUCKET` is set).
pub async fn provision(base: &Base, env: &Env) -> Result<Vec<String>> {
    let mut made = Vec::new();
    for def in all_tables() {
        let name = base.core.table(def.logical);
        schema::create_table(base.db.client(), &def, &name).await.with_context(|| format!("creating table {name}"))?;
        made.push(name);
    }
    if let Some(bucket) = env.get("TICKWORK_ARCHIVE_BUCKET") {
        let s3 = archiver::s3_client(&base.sdk);
        match s3.create_bucket().bucket(&bucket).send().await {
            Ok(_) => {}
            Err(e) if format!("{e:?}").contains("BucketAlready") => {}
            Err(e) => {
                return Err(anyhow::anyhow!(
                    "creating bucket {bucket}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(&e)
                ))
            }
        }
        made.push(format!("s3://{bucket}"));
    }
    Ok(made)
}

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

/// What `status` shows.
#[derive(Debug, Serialize)]
pub struct Status {
    /// Per job.
    pub jobs: Vec<JobStatus>,
    /// Ready (visible now) items per queue shard, capped at 1,000.
    pub ready_by_shard: BTreeMap<u32, u64>,
    /// Dead letters.
    pub dead_letters: usize,
    /// Archiver positions per shard (cursor text or `done`).
    pub archiver_checkpoints: BTreeMap<String, String>,
}

/// Reads every job's lease and watermark, queue depth per shard, dead letters, archiver positions.
pub async fn status(base: &Base, env: &Env) -> Result<Status> {
    let control = &base.core.control_table;
    let leases = LeaseStore::new(base.db.clone(), control, base.clock.clone());
    let marks = Watermarks::new(base.db.clone(), control, base.clock.clone());
    let mut jobs_out = Vec::new();
    for job in jobs(env) {
        jobs_out.push(JobStatus { lease: leases.read(&job).await?, watermark: marks.read(&job).await?, job });
    }
    let queue = Queue::new(base.db.clone(), base.core.table("queue"), QueueConfig::from_env(env)?, base.clock.clone());
    let mut ready = BTreeMap::new();
    for k in 0..queue.config().shards {
        // One keys-only poll; a shard with 1,000 or more ready items shows 1000.
        let n = queue.poll(k, 1000).await?.len() as u64;
        ready.insert(k, n);
    }
    let dead = queue.dead_letters().await?.len();
    let ckpts = Checkpoints::new(base.db.clone(), control, base.clock.clone(), std::time::Duration::from_secs(86_400));
    let states = ckpts.read("archiver", "current").await?;
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
    Ok(Status { jobs: jobs_out, ready_by_shard: ready, dead_letters: dead, archiver_checkpoints })
}

/// Runs one handler in-process on an event file, against the configured endpoints.
pub async fn invoke(env: &Env, function: &str, event: serde_json::Value) -> Result<serde_json::Value> {
    let deadline = tickwork::clock::Clock::now_ms(&tickwork::clock::SystemClock) + 60_000;
    let out = match function {
        "pulse-sweep" => {
            let d = pulse_sweep::Deps::from_env(env).await?;
            serde_json::to_value(pulse_sweep::handle(&d, event, deadline).await?)?
        }
        "tenant-fanout" => {
            let d = tenant_fanout::Deps::from_env(env).await?;
            serde_json::to_value(tenant_fanout::handle(&d, event, deadline).await?)?
        }
        "queue-worker" => {
            let d = queue_worker::Deps::from_env(env).await?;
            serde_json::to_value(queue_worker::handle(&d, event, deadline).await?)?
        }
        "archiver" => {
            let d = archiver::Deps::from_env(env).await?;
            serde_json::to_value(archiver::handle(&d, event, deadline).await?)?
        }
        other => anyhow::bail!("unknown function `{other}` (pulse-sweep, tenant-fanout, queue-worker, archiver)"),
    };
    Ok(out)
}
