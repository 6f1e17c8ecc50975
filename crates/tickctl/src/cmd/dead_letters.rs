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
                let mut t = table(&["id", "kind", "tenants", "attempts", "failed at", "last error"]);
                for d in &list {
                    t.add_row(vec![
                        d.id.clone(),
                        d.kind.clone(),
                        whose(d),
                        d.attempts.to_string(),
                        time(d.failed_at_ms),
                        d.last_error.clone(),
                    ]);
                }
                println!("{t}\n{} dead letter(s)", list.len());
            }
        }
        Dead::Retry { id } => {
            // Back into a shard the deployed workers poll, not the code's default count.
            let q = tickctl::deployed::queue_for_writes(base, env, "dead-letters retry").await?;
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

/// Whose work a dead letter holds: its tenant, or a batch's units and their first tenants.
fn whose(d: &tickwork::queue::DeadLetter) -> String {
    if let Some(t) = &d.tenant {
        return t.clone();
    }
    if d.tenants.is_empty() {
        return String::new();
    }
    let shown: Vec<&str> = d.tenants.iter().take(3).map(String::as_str).collect();
    let more = d.tenants.len().saturating_sub(shown.len());
    let rest = if more > 0 { format!(" (+{more})") } else { String::new() };
    format!("{}{rest}; {} unit(s)", shown.join(", "), d.units)
}
