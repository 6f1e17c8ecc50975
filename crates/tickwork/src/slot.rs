//! Slot records: "this window is done".
//!
//! Why (`000_*`): a longer lease does not make a window run once; naming the window does. A sweep
//! names its slot (`pulse-sweep/2026-11-29`), records it on completion, and a worker that acquires
//! the lease and finds the slot recorded returns at once. The lease keeps two workers from
//! colliding; the slot record makes a collision harmless when it happens anyway.
//!
//! Item: `pk = slot#<job>`, `sk = <slot>`, `completed_at` (ms), `token`, `ttl` (expires after the
//! retention, so the table does not grow without bound). Recording is fenced: only the current
//! lease holder can mark a window done.

use std::time::Duration;

use aws_sdk_dynamodb::types::TransactWriteItem;

use crate::clock::SharedClock;
use crate::db::Db;
use crate::error::DbError;
use crate::lease::{fenced_write, Fence, Fenced};
use crate::schema::{av_n, av_s, key, TTL};

/// Attribute: when the slot was recorded.
pub const COMPLETED_AT: &str = "completed_at";

/// The slot item's key.
pub fn slot_key(job: &str, slot: &str) -> crate::item::Item {
    key(format!("slot#{job}"), slot)
}

/// Outcome of recording a slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Recorded now.
    Recorded,
    /// It already was (a duplicate run).
    AlreadyRecorded,
    /// Our lease moved on; not recorded.
    Stale,
}

/// Slot records in the control table.
#[derive(Debug, Clone)]
pub struct Slots {
    db: Db,
    table: String,
    clock: SharedClock,
    retention: Duration,
}

impl Slots {
    /// Slots in `table`, kept for `retention` after completion.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock, retention: Duration) -> Self {
        Self { db, table: table.into(), clock, retention }
    }

    /// Is the slot recorded? A strongly consistent read: it follows a lease acquisition, and a
    /// stale "not yet" would repeat the window.
    pub async fn is_recorded(&self, job: &str, slot: &str) -> Result<bool, DbError> {
        Ok(self.db.get_strong(&self.table, slot_key(job, slot)).await?.is_some())
    }

    /// Records the slot, fenced by the lease that did the work.
    pub async fn record(&self, fence: &Fence, slot: &str) -> Result<Record, DbError> {
        match fenced_write(&self.db, fence, vec![self.record_item(fence, slot)]).await? {
            Fenced::Written => Ok(Record::Recorded),
            Fenced::Stale => Ok(Record::Stale),
            Fenced::ConditionFailed { .. } => Ok(Record::AlreadyRecorded),
        }
    }

    /// The slot record as a put (only if new), for a caller's fenced transaction: the fan-out
    /// records its window and advances its watermark in one, so the two never disagree.
    pub fn record_item(&self, fence: &Fence, slot: &str) -> TransactWriteItem {
        let now = self.clock.now_ms();
        let mut item = slot_key(&fence.job, slot);
        item.insert(COMPLETED_AT.into(), av_n(now));
        item.insert("token".into(), av_n(fence.token));
        item.insert(TTL.into(), av_n(now / 1000 + self.retention.as_secs() as i64));
        item.insert("job".into(), av_s(&fence.job));
        crate::schema::put_new_item(&self.table, item)
    }
}
