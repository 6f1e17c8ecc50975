//! `tickctl dead-letters …`: list, retry or purge the queue's dead letters.

use anyhow::Result;
use tickwork::config::Env;
use tickwork_lambda::Base;

use crate::cli::Dead;
use crate::render::{done, json, table, time};

/// Runs one dead-letter action on the queue the environment names.
pub async fn run(base: &Base, env: &Env, as_json: bool, action: Dead) -> Result<()> {
    let q = tickctl::queue(base, env).await?;
    match action {
        Dead::List => {
            let list = q.dead_letters().await?;
            if as_json {
                json(&list)?;
            } else {
                let mut t = table(&["id", "kind", "tenant", "attempts", "failed at", "last error"]);
                for d in &list {
                    t.add_row(vec![
                        d.id.clone(),
                        d.kind.clone(),
                        d.tenant.clone().unwrap_or_default(),
                        d.attempts.to_string(),
                        time(d.failed_at_ms),
                        d.last_error.clone(),
                    ]);
                }
                println!("{t}\n{} dead letter(s)", list.len());
            }
        }
        Dead::Retry { id } => {
            anyhow::ensure!(q.retry_dead(&id).await?, "`{id}` is not a dead letter");
            done(as_json, "back in the queue", &id)?;
        }
        Dead::Purge { id } => {
            anyhow::ensure!(q.purge_dead(&id).await?, "`{id}` is not a dead letter");
            done(as_json, "purged", &id)?;
        }
    }
    Ok(())
}
