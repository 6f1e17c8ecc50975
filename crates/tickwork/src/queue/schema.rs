//! The queue table: its attributes, states, indexes and keys.

use crate::capacity::Projection;
use crate::schema::{n, s, GsiDef, TableDef, PK, TTL};

/// Attribute: item kind (selects the handler).
pub const KIND: &str = "kind";
/// Attribute: JSON payload.
pub const PAYLOAD: &str = "payload";
/// Attribute: the tenant the item belongs to.
pub const TENANT: &str = "tenant";
/// Attribute: claims so far.
pub const ATTEMPTS: &str = "attempts";
/// Attribute: current claimer.
pub const OWNER: &str = "owner";
/// Attribute: lifecycle state.
pub const STATE: &str = "state";
/// Attribute: when the item may be taken next (ms).
pub const VISIBLE_AT: &str = "visible_at";
/// Attribute: ready-index partition, present only while live.
pub const SHARD: &str = "shard";
/// Attribute: dead-letter index partition, present only on dead letters.
pub const DLQ: &str = "dlq";
/// Attribute: when it was dead-lettered (ms).
pub const FAILED_AT: &str = "failed_at";
/// Attribute: last failure message.
pub const LAST_ERROR: &str = "last_error";
/// Attribute: a part split from an item whose worker died (BOOL), run alone by the worker.
pub const SUSPECT: &str = "suspect";
/// Attribute: claims of the item given back because its handler's target throttled (N): a
/// throttle refunds the claim's attempt (the unit did nothing wrong) until this many, after which
/// it counts as a failure, so a target throttled for good still ends in the dead letters.
pub const THROTTLES: &str = "throttles";
/// Attribute: creation time (ms).
pub const CREATED_AT: &str = "created_at";
/// Attribute: the one tenant whose units an item holds, set when the item leaves its first path
/// (a failure to retry, a throttle, a death, a dead letter) and kept on its done tombstone until
/// that expires: the partition of [`TROUBLE_INDEX`], so `tenants.explain` finds a tenant's units
/// that went wrong, and when they were handled after all, by key condition. Absent on the happy
/// path (no index write there); an item of several tenants' units stands under [`SEVERAL`] while
/// it is live.
pub const TROUBLE: &str = "trouble";
/// The [`TROUBLE`] of an item of several tenants' units that went wrong (no tenant id holds `#`):
/// kept while the item is live and removed when it is done, so its partition holds what is still
/// waiting, and `tenants.explain` can say that a unit of any tenant may be among them.
pub const SEVERAL: &str = "#several";
/// Attribute: when the item was finished (ms), on its done tombstone.
pub const FINISHED_AT: &str = "finished_at";
/// Ready index name.
pub const READY_INDEX: &str = "ready";
/// Dead-letter index name.
pub const DEAD_INDEX: &str = "dead";
/// A tenant's units that went wrong, by tenant ([`TROUBLE`]): sparse, written only off the happy
/// path.
pub const TROUBLE_INDEX: &str = "trouble";

pub(super) const PENDING: &str = "pending";
pub(super) const CLAIMED: &str = "claimed";
pub(super) const DONE: &str = "done";
pub(super) const DEAD: &str = "dead";
pub(super) const PAUSE: &str = "pause";
pub(super) const DLQ_PARTITION: &str = "dlq";

/// Id prefix of the pause markers (never a producer's id: ids are validated against it).
pub const PAUSE_PREFIX: &str = "pause#queue#";

/// The pause marker of ready shard `k`.
pub fn pause_marker(k: u32) -> String {
    format!("{PAUSE_PREFIX}{k}")
}

/// Longest accepted item id (DynamoDB's partition key limit is 2048 bytes).
pub const MAX_ID_BYTES: usize = 1024;
/// Largest accepted payload (items are limited to 400 KB).
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// The queue table's definition.
pub fn queue_table() -> TableDef {
    TableDef {
        logical: "queue",
        pk: s(PK),
        sk: None,
        gsis: vec![
            GsiDef { name: READY_INDEX, pk: s(SHARD), sk: Some(n(VISIBLE_AT)), projection: Projection::KeysOnly },
            GsiDef {
                name: DEAD_INDEX,
                pk: s(DLQ),
                sk: Some(n(FAILED_AT)),
                projection: Projection::Include(vec![KIND.into(), TENANT.into(), ATTEMPTS.into(), LAST_ERROR.into()]),
            },
            GsiDef {
                name: TROUBLE_INDEX,
                pk: s(TROUBLE),
                sk: Some(n(CREATED_AT)),
                projection: Projection::Include(vec![
                    KIND.into(),
                    STATE.into(),
                    ATTEMPTS.into(),
                    LAST_ERROR.into(),
                    VISIBLE_AT.into(),
                    FAILED_AT.into(),
                    FINISHED_AT.into(),
                ]),
            },
        ],
        ttl: Some(TTL),
        // Its stream (`KEYS_ONLY` in the template) only signals the worker: the tests invoke it.
        stream: None,
    }
}

pub use crate::shard::{fnv1a, shard_of};

/// The ready-index partition value of shard `k`.
pub fn shard_key(k: u32) -> String {
    format!("queue#{k}")
}
