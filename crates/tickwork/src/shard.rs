//! Which shard a key belongs to: one stable hash for every sharded index.
//!
//! Why (`001_*`): a low-cardinality index key is a hot partition, so tenants, queue items and
//! change rows are spread over N index partitions by `hash(id) mod N`. The hash must never change
//! between releases (std's `DefaultHasher` may), or an upgrade would move every item to another
//! shard where nobody looks for it. FNV-1a is eight lines; it does not warrant a dependency.

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
