//! What an operator does to the stack: the tables it declares, the jobs and functions by name,
//! pause and resume, provision, and one handler run in-process.

use anyhow::{Context, Result};
use tickwork::config::{ConfigError, Env};
use tickwork::queue::{queue_table, Queue, QueueConfig};
use tickwork::schema::{self, TableDef};
use tickwork::watermark::Watermarks;
use tickwork_lambda::Base;

pub use crate::function::Function;

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

/// The jobs `status` reports on (lease and watermark names): the leased functions the stack
/// deploys ([`crate::Parts`]).
pub fn jobs(env: &Env) -> Result<Vec<String>, ConfigError> {
    let parts = crate::Parts::from_env(env)?;
    [Function::PulseSweep, Function::TenantFanout, Function::Archiver]
        .iter()
        .filter(|f| parts.has(**f))
        .map(|f| f.job(env))
        .collect()
}

/// The queue as an operator sees it: every ready shard any producer ever wrote to.
pub async fn queue(base: &Base, env: &Env) -> Result<Queue> {
    let cfg = QueueConfig::from_env(env)?;
    let shards = tickwork::shard::ShardRegistry::new(base.db.clone(), &base.core.control_table)
        .effective("queue", cfg.shards)
        .await
        .unwrap_or(cfg.shards);
    Ok(Queue::new(
        base.db.clone(),
        base.core.table_from(env, tickwork::env::QUEUE_TABLE, "queue"),
        cfg,
        base.clock.clone(),
    )
    .with_poll_shards(shards))
}

/// Pauses or resumes a function at its next tick, through the one read that tick already makes:
/// the job's state item for the leased jobs, a marker in each ready shard for the queue worker
/// (its idle tick reads no state item, only the ready index). Returns the job name.
pub async fn set_paused(base: &Base, env: &Env, f: Function, paused: bool, reason: Option<&str>) -> Result<String> {
    let job = f.job(env)?;
    match f {
        Function::QueueWorker => queue(base, env).await?.set_paused(paused).await?,
        _ => {
            Watermarks::new(base.db.clone(), &base.core.control_table, base.clock.clone())
                .set_paused(&job, paused, if paused { reason } else { None })
                .await?;
        }
    }
    Ok(job)
}

/// Where a new bucket goes: S3 refuses a create without a location constraint outside
/// us-east-1 (`IllegalLocationConstraintException`), and one naming us-east-1 inside it. Pure.
fn bucket_location(region: Option<&str>) -> Option<aws_sdk_s3::types::CreateBucketConfiguration> {
    let region = region.filter(|r| *r != "us-east-1")?;
    Some(
        aws_sdk_s3::types::CreateBucketConfiguration::builder()
            .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::from(region))
            .build(),
    )
}

/// Creates every table (and the archive bucket when `TICKWORK_ARCHIVE_BUCKET` is set).
pub async fn provision(base: &Base, env: &Env) -> Result<Vec<String>> {
    let mut made = Vec::new();
    for def in all_tables() {
        let name = base.core.table(def.logical);
        schema::create_table(base.db.client(), &def, &name).await.with_context(|| format!("creating table {name}"))?;
        made.push(name);
    }
    if let Some(bucket) = env.get(tickwork::env::ARCHIVE_BUCKET) {
        let s3 = archiver::s3_client(&base.sdk);
        let region = base.sdk.region().map(|r| r.to_string());
        match s3
            .create_bucket()
            .bucket(&bucket)
            .set_create_bucket_configuration(bucket_location(region.as_deref()))
            .send()
            .await
        {
            Ok(_) => {}
            // Ours already (a second provision). `BucketAlreadyExists` is not: the name belongs to
            // another account, and the archiver could never write there.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_bucket_already_owned_by_you()) => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_outside_us_east_1_names_its_region() {
        assert_eq!(bucket_location(None), None);
        assert_eq!(bucket_location(Some("us-east-1")), None, "us-east-1 refuses a constraint naming itself");
        let eu = bucket_location(Some("eu-west-1")).expect("a constraint");
        assert_eq!(eu.location_constraint().map(|c| c.as_str()), Some("eu-west-1"));
    }
}
