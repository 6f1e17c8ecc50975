//! An item to enqueue, refused before any write when it could not be stored, and the outcome of
//! enqueueing it.

use aws_sdk_dynamodb::types::TransactWriteItem;

use crate::clock::Millis;
use crate::item::Item;
use crate::queue::config::QueueConfig;
use crate::queue::schema::*;
use crate::schema::{av_n, av_s, PK};

/// An item to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// Idempotency key; the same id enqueued twice is one item.
    pub id: String,
    /// Handler kind.
    pub kind: String,
    /// JSON payload.
    pub payload: String,
    /// Owning tenant, when the work is per tenant.
    pub tenant: Option<String>,
    /// Not before (ms).
    pub due_ms: Millis,
}

/// Why an item was refused before any write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("queue item `{id}`: {problem}")]
pub struct InvalidItem {
    /// The id (possibly truncated).
    pub id: String,
    /// What is wrong.
    pub problem: String,
}

impl NewItem {
    /// Checks id, kind and payload before anything is written.
    pub fn validate(&self) -> Result<(), InvalidItem> {
        let bad = |p: &str| InvalidItem { id: self.id.chars().take(80).collect(), problem: p.to_string() };
        if self.id.is_empty() || self.id.len() > MAX_ID_BYTES {
            return Err(bad(&format!("id must be 1..={MAX_ID_BYTES} bytes")));
        }
        if self.id.starts_with(PAUSE_PREFIX) {
            return Err(bad(&format!("ids starting `{PAUSE_PREFIX}` are the worker's pause markers")));
        }
        if self.kind.is_empty() || self.kind.len() > 128 {
            return Err(bad("kind must be 1..=128 bytes"));
        }
        if self.payload.len() > MAX_PAYLOAD_BYTES {
            return Err(bad(&format!("payload is {} bytes; the limit is {MAX_PAYLOAD_BYTES}", self.payload.len())));
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&self.payload) {
            return Err(bad(&format!("payload is not JSON: {e}")));
        }
        Ok(())
    }

    pub(super) fn item(&self, shards: u32, now: Millis) -> Item {
        let mut item = Item::from([
            (PK.to_string(), av_s(&self.id)),
            (KIND.to_string(), av_s(&self.kind)),
            (PAYLOAD.to_string(), av_s(&self.payload)),
            (ATTEMPTS.to_string(), av_n(0)),
            (STATE.to_string(), av_s(PENDING)),
            (VISIBLE_AT.to_string(), av_n(self.due_ms)),
            (SHARD.to_string(), av_s(shard_key(shard_of(&self.id, shards)))),
            (CREATED_AT.to_string(), av_n(now)),
        ]);
        if let Some(t) = &self.tenant {
            item.insert(TENANT.to_string(), av_s(t));
        }
        item
    }
}

/// A put that inserts `item` only if its id is new, for a caller's own transaction (the pulse sweep
/// and the fan-out enqueue a page's batch with their checkpoint in one).
pub fn enqueue_item(
    table: &str,
    cfg: &QueueConfig,
    item: &NewItem,
    now: Millis,
) -> Result<TransactWriteItem, InvalidItem> {
    item.validate()?;
    Ok(crate::schema::put_new_item(table, item.item(cfg.shards, now)))
}

/// Outcome of an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// New item written.
    Enqueued,
    /// The id exists (pending, running, done or dead): nothing changed.
    Exists,
}

/// Counts from a batch enqueue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueCounts {
    /// Newly written.
    pub enqueued: u64,
    /// Already there.
    pub existed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_items_are_refused_with_the_reason() {
        let ok = NewItem { id: "a".into(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: 0 };
        assert!(ok.validate().is_ok());
        let e = NewItem { payload: "{oops".into(), ..ok.clone() }.validate().unwrap_err();
        assert!(e.problem.contains("not JSON"), "{e}");
        assert!(NewItem { id: String::new(), ..ok.clone() }.validate().is_err());
        assert!(NewItem { kind: String::new(), ..ok.clone() }.validate().is_err());
        assert!(NewItem { id: "x".repeat(MAX_ID_BYTES + 1), ..ok }.validate().is_err());
    }
}
