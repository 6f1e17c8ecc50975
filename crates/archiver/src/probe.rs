//! Which shards hold due rows, without the lease: one Query per shard, key condition
//! `shard = :s`, `Limit 1`: the shard's oldest row. Its sort key below the cutoff means the shard
//! has due rows; otherwise its timestamp is the shard's oldest not-yet-due row. The minimum over
//! shards (or the probe's own time, when a shard is empty: rows written later are newer) is
//! recorded in the state item as `oldest`, with the probe time: until the cutoff passes `oldest`,
//! an idle tick needs only its one read (`job.rs`).

use tickwork::changes::{shard_key, BY_SHARD, SHARD, TSID};
use tickwork::clock::Millis;
use tickwork::schema::{av_s, get_s};

use crate::deps::Deps;
use crate::report::ArchiveError;

/// What the probe found in one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardProbe {
    /// Shard.
    pub k: u32,
    /// It holds rows below the cutoff.
    pub due: bool,
    /// The timestamp of its oldest row not yet due, when it has one.
    pub oldest_ms: Option<Millis>,
}

/// The key-condition Query for shard `k`'s due rows.
pub fn due_query(
    deps: &Deps,
    k: u32,
    cutoff: &str,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    deps.db
        .client()
        .query()
        .table_name(&deps.table)
        .index_name(BY_SHARD)
        .key_condition_expression("#shard = :s AND #tsid < :cutoff")
        .expression_attribute_names("#shard", SHARD)
        .expression_attribute_names("#tsid", TSID)
        .expression_attribute_values(":s", av_s(shard_key(k)))
        .expression_attribute_values(":cutoff", av_s(cutoff))
}

/// One Limit-1 Query per shard: which shards are due, and the oldest row that is not.
pub async fn probe(deps: &Deps, cutoff: &str) -> Result<Vec<ShardProbe>, ArchiveError> {
    let mut out = Vec::new();
    for k in 0..deps.cfg.shards {
        let q = deps
            .db
            .client()
            .query()
            .table_name(&deps.table)
            .index_name(BY_SHARD)
            .key_condition_expression("#shard = :s")
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_values(":s", av_s(shard_key(k)))
            .limit(1);
        let page = deps.db.query(q).await?;
        out.push(classify(k, page.items().first().and_then(|i| get_s(i, TSID)), cutoff));
    }
    Ok(out)
}

/// What shard `k`'s oldest row (its sort key `<13-digit ms>#<pk>`, `None`: an empty shard) says
/// against `cutoff`. Pure.
pub fn classify(k: u32, oldest_tsid: Option<&str>, cutoff: &str) -> ShardProbe {
    match oldest_tsid {
        Some(t) if t < cutoff => ShardProbe { k, due: true, oldest_ms: None },
        Some(t) => ShardProbe { k, due: false, oldest_ms: t.get(..13).and_then(|s| s.parse().ok()) },
        None => ShardProbe { k, due: false, oldest_ms: None },
    }
}

/// Nothing can be due, so the tick needs no probe: the cutoff has not passed the oldest row not
/// yet due at the last probe, and that probe is younger than `probe_every` (rows written since
/// are newer than it). `None` marks: never probed. Pure.
pub fn nothing_due(
    cutoff_ms: Millis,
    oldest_ms: Option<Millis>,
    probed_ms: Option<Millis>,
    now_ms: Millis,
    probe_every_ms: i64,
) -> bool {
    match (oldest_ms, probed_ms) {
        (Some(oldest), Some(probed)) => cutoff_ms <= oldest && now_ms - probed < probe_every_ms,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_due_when_its_oldest_row_is_below_the_cutoff() {
        let cutoff = tickwork::changes::cutoff_key(2_000_000_000_000);
        let row = |ms: i64| format!("{ms:013}#order#1");
        assert_eq!(
            classify(3, Some(&row(1_999_999_999_999)), &cutoff),
            ShardProbe { k: 3, due: true, oldest_ms: None }
        );
        assert_eq!(
            classify(3, Some(&row(2_000_000_000_001)), &cutoff),
            ShardProbe { k: 3, due: false, oldest_ms: Some(2_000_000_000_001) }
        );
        assert_eq!(classify(3, None, &cutoff), ShardProbe { k: 3, due: false, oldest_ms: None });
    }

    #[test]
    fn an_idle_tick_skips_the_probe_only_while_its_last_one_holds() {
        let hour = 3_600_000;
        assert!(nothing_due(100, Some(200), Some(1_000), 1_000 + hour - 1, hour));
        assert!(!nothing_due(201, Some(200), Some(1_000), 1_000, hour), "the cutoff passed the oldest row");
        assert!(!nothing_due(100, Some(200), Some(1_000), 1_000 + hour, hour), "the probe is stale");
        assert!(!nothing_due(100, None, Some(1_000), 1_000, hour), "never probed");
    }
}
