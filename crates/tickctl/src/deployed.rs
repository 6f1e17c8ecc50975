//! What a command takes from the deployed stack rather than from the code's defaults: the
//! settings `template.yaml` sets and a command depends on. They come from the environment
//! (`--stack NAME` loads the stack's, which `make stack-env` writes from its outputs) or from the
//! state the stack's functions record; a command that needs one and finds neither refuses,
//! naming it. The code's defaults are not the template's (8 queue shards where it deploys 1; a
//! fan-out job the stack may have renamed), and an operator's command that followed them would
//! act on the wrong shard or the wrong job and report success.

use anyhow::Result;
use tickwork::config::Env;
use tickwork::queue::{Queue, QueueConfig};
use tickwork_lambda::Base;

/// How to give `tickctl` a deployed stack's settings, for every refusal.
const HOW: &str = "run tickctl with --stack NAME (`make stack-env STACK=NAME` writes the stack's settings)";

/// The queue shard count a write uses, from what the stack's functions recorded (`recorded`, the
/// largest; the deployed workers poll at least that many), or the environment's
/// `TICKWORK_QUEUE_SHARDS` before any function recorded one. Neither: refused. Pure.
pub fn queue_write_shards(recorded: Option<u32>, configured: Option<u32>, command: &str) -> Result<u32> {
    match (recorded, configured) {
        (Some(n), _) => Ok(n),
        (None, Some(n)) => Ok(n),
        (None, None) => anyhow::bail!(
            "`tickctl {command}` needs the stack's queue shard count: no function of the stack has recorded one, and {} is unset; {HOW}",
            tickwork::env::QUEUE_SHARDS
        ),
    }
}

/// The queue as a command that writes to it uses it: its items put in a shard the deployed
/// workers poll ([`queue_write_shards`]); its reads over every shard any producer wrote to.
pub async fn queue_for_writes(base: &Base, env: &Env, command: &str) -> Result<Queue> {
    let reg = tickwork::shard::ShardRegistry::new(base.db.clone(), &base.core.control_table);
    let recorded = reg.recorded("queue").await?;
    let configured = match env.get(tickwork::env::QUEUE_SHARDS) {
        Some(_) => Some(tickwork::queue::queue_shards(env)?),
        None => None,
    };
    let shards = queue_write_shards(recorded, configured, command)?;
    if recorded.is_none() {
        // The first writer of the queue's keys records its count, as every producer does, so
        // that the workers started later poll it.
        reg.record("queue", shards).await?;
    }
    let cfg = QueueConfig { shards, ..QueueConfig::from_env(env)? };
    let poll = reg.effective("queue", shards).await?;
    Ok(Queue::new(
        base.db.clone(),
        base.core.table_from(env, tickwork::env::QUEUE_TABLE, "queue"),
        cfg,
        base.clock.clone(),
    )
    .with_poll_shards(poll))
}

/// A setting the template sets that `command` needs from the environment (the stack's file, or
/// the shell), refused by name when unset: its code default may not be what the stack deploys.
pub fn required(env: &Env, var: &str, template_parameter: &str, command: &str) -> Result<()> {
    anyhow::ensure!(
        env.get(var).is_some(),
        "`tickctl {command}` needs the stack's {template_parameter} ({var} is unset, and its default may not be what the stack deploys); {HOW}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_the_queue_uses_the_count_the_stack_recorded() {
        assert_eq!(queue_write_shards(Some(1), Some(8), "x").unwrap(), 1, "the recorded count wins");
        assert_eq!(queue_write_shards(Some(4), None, "x").unwrap(), 4);
        assert_eq!(queue_write_shards(None, Some(2), "x").unwrap(), 2, "before any function recorded one");
        let e = queue_write_shards(None, None, "dead-letters retry").unwrap_err().to_string();
        assert!(e.contains("TICKWORK_QUEUE_SHARDS") && e.contains("--stack"), "{e}");
    }
}
