//! `tickctl audit LOG`: a function's log lines against the rules of an idle tick and a clean run.

use anyhow::{Context, Result};
use tickwork::config::Env;

use crate::render::{self, bytes_bar, json};

pub fn run(env: &Env, as_json: bool, log: &str) -> Result<i32> {
    // An idle queue worker or archiver reads one Query per shard: the shard counts configured.
    let mut rules = tickctl::audit::Rules::default();
    rules.idle_reads.insert("queue-worker".into(), u64::from(tickwork::queue::queue_shards(env)?));
    rules.idle_reads.insert("archiver".into(), u64::from(tickwork::config::change_shards(env)?));
    let a = if log == "-" {
        let pb = bytes_bar(None, "reading stdin");
        let a = tickctl::audit::audit(std::io::stdin().lock(), &rules, |b| pb.set_position(b))?;
        pb.finish_and_clear();
        a
    } else {
        let f = std::fs::File::open(log).with_context(|| format!("opening {log}"))?;
        let pb = bytes_bar(f.metadata().ok().map(|m| m.len()), log);
        let a = tickctl::audit::audit(std::io::BufReader::new(f), &rules, |b| pb.set_position(b))?;
        pb.finish_and_clear();
        a
    };
    if as_json {
        json(&a)?;
    } else {
        render::print_audit(&a);
    }
    Ok(if a.findings.is_empty() { 0 } else { 3 })
}
