//! Which shard a key belongs to: one stable hash for every sharded index.
//!
//! Why (`001_*`): a low-cardinality index key is a hot partition, so tenants, queue items and
//! change rows are spread over N index partitions by `hash(id) mod N`. The hash must never change
//! between releases (std's `DefaultHasher` may), or an upgrade would move every item to another
//! shard where nobody looks for it. FNV-1a is eight lines; it does not warrant a dependency.
//!
//! The shard count is baked into every stored key, so lowering it (8 → 4) would strand whatever
//! sits in shards 4..8: tenants never visited, queue items never polled, change rows never
//! archived. So every count a writer uses is recorded in a [`ShardRegistry`] (control table,
//! `pk = shards#<table>`, a number set), and a reader enumerates up to the largest count ever
//! recorded, whatever it is configured with now. Writers record once per process; readers read at
//! start-up.

/// FNV-1a, 64 bit.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shard of `id` among `shards` (at least one).
pub fn shard_of(id: &str, shards: u32) -> u32 {
    (fnv1a(id.as_bytes()) % u64::from(shards.max(1))) as u32
}

/// The shard counts ever used to write one table's sharded keys.
#[derive(Debug, Clone)]
pub struct ShardRegistry {
    db: crate::db::Db,
    table: String,
}

/// Attribute: the counts (a number set).
pub const COUNTS: &str = "counts";

/// The registry item of a table (by its logical name: `tenants`, `queue`, `changes`).
pub fn registry_key(logical: &str) -> crate::item::Item {
    crate::schema::key(format!("shards#{logical}"), "shards")
}

impl ShardRegistry {
    /// The registry in `control_table`.
    pub fn new(db: crate::db::Db, control_table: impl Into<String>) -> Self {
        Self { db, table: control_table.into() }
    }

    /// Records that `logical`'s keys are written with `count` shards (idempotent: a set `ADD`).
    pub async fn record(&self, logical: &str, count: u32) -> Result<(), crate::DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(registry_key(logical)))
            .update_expression("ADD #c :n")
            .expression_attribute_names("#c", COUNTS)
            .expression_attribute_values(":n", aws_sdk_dynamodb::types::AttributeValue::Ns(vec![count.to_string()]));
        self.db.update(req).await.map(|_| ())
    }

    /// What a process that reads or writes `logical` with `configured` shards does at start-up:
    /// records its count, then answers how many shards to enumerate. An error is returned, never
    /// papered over with `configured`: a process that fell back once (a throttle at a cold start)
    /// would enumerate a lowered count for the rest of its life and pass over every shard above
    /// it, completing runs and windows without them. The functions fail their start-up instead,
    /// and Lambda starts them again on the next invocation.
    pub async fn resolve(&self, logical: &str, configured: u32) -> Result<u32, crate::DbError> {
        self.record(logical, configured).await?;
        self.effective(logical, configured).await
    }

    /// The largest count any writer of `logical` recorded, `None` before any did: what a reader
    /// that records nothing (an operator's tool) takes as the deployed count.
    pub async fn recorded(&self, logical: &str) -> Result<Option<u32>, crate::DbError> {
        let item = self.db.get_strong(&self.table, registry_key(logical)).await?;
        Ok(item
            .as_ref()
            .and_then(|i| i.get(COUNTS))
            .and_then(|v| v.as_ns().ok())
            .and_then(|v| v.iter().filter_map(|n| n.parse::<u32>().ok()).max()))
    }

    /// How many shards a reader of `logical` must enumerate when configured with `configured`:
    /// the largest count ever recorded, or `configured` if larger.
    pub async fn effective(&self, logical: &str, configured: u32) -> Result<u32, crate::DbError> {
        let recorded = self.recorded(logical).await?.unwrap_or(0);
        if recorded > configured {
            tracing::warn!(
                table = logical,
                configured,
                recorded,
                "shard count lowered: reading every shard ever written to"
            );
        }
        Ok(configured.max(recorded))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_spread() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let mut counts = [0u32; 8];
        for i in 0..8000 {
            counts[shard_of(&format!("daily#2026-11-29#tenant-{i}"), 8) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }
}
