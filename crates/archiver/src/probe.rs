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
        let first = page.items().first().and_then(|i| get_s(i, TSID)).map(str::to_string);
        out.push(match first {
            Some(t) if t.as_str() < cutoff => ShardProbe { k, due: true, oldest_ms: None },
            Some(t) => ShardProbe { k, due: false, oldest_ms: t.get(..13).and_then(|s| s.parse().ok()) },
            None => ShardProbe { k, due: false, oldest_ms: None },
        });
    }
    Ok(out)
}
