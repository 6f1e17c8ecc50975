//! Per-unit idempotency records: the only thing that makes a repeat harmless.
//!
//! Why (`000_*`, rule 3): a lease stops collisions and a watermark skips redundant work, but when
//! both fail (a crash between the effect and the watermark, two workers after a lease lapse), the
//! unit's own key is what turns the second attempt into a no-op.
//!
//! Two forms:
//! - **In a transaction** ([`insert_once`]): a `Put` with `attribute_not_exists` that joins the
//!   transaction performing the effect. The effect and its key commit together or not at all.
//!   (The shipped jobs need neither form: their queue units' ids are their keys, and a batch
//!   item's id is a digest of its units, inserted once in the flush that writes them.)
//! - **Claim / complete** ([`Idempotency`]) for effects outside DynamoDB: claim the key
//!   `in_progress` with an expiry taken from the caller's deadline; complete it when done; an expired
//!   in-progress claim (a dead worker) can be claimed again. A worker never deletes or completes a
//!   record it does not own.
//!
//! Item: `pk = idem#<scope>`, `sk = <key>`, `state` (`in_progress`|`done`), `owner`, `expires_at`
//! (ms, the claim's end), `ttl` (seconds, retention).

use std::time::Duration;

use aws_sdk_dynamodb::types::{ReturnValuesOnConditionCheckFailure, TransactWriteItem};

use crate::clock::{Millis, SharedClock};
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_i64, get_s, key, PK, TTL};

/// Attribute: claim state.
pub const STATE: &str = "state";
/// State value while claimed.
pub const IN_PROGRESS: &str = "in_progress";
/// State value once done.
pub const DONE: &str = "done";

/// The record's key.
pub fn idem_key(scope: &str, k: &str) -> Item {
    key(format!("idem#{scope}"), k)
}

/// A transaction item that inserts the key once: the transaction fails (cancellation reason
/// `ConditionalCheckFailed` at this item's index) if the key exists.
pub fn insert_once(table: &str, scope: &str, k: &str, extra: Item) -> TransactWriteItem {
    let mut item = idem_key(scope, k);
    item.insert(STATE.into(), av_s(DONE));
    item.extend(extra);
    crate::schema::put_new_item(table, item)
}

/// Outcome of claiming an idempotency key (named apart from the queue's [`crate::queue::Claim`],
/// which claims a work item).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// Ours until the given instant.
    Claimed,
    /// Already done: skip the effect.
    Done,
    /// Someone else holds a live claim.
    InProgress {
        /// Holder.
        owner: String,
        /// Their claim's end.
        until_ms: Millis,
    },
}

/// Outcome of completing or abandoning a key's claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySettle {
    /// Done as asked.
    Settled,
    /// Not ours (expired and re-claimed, or already done): nothing changed.
    NotOwner,
}

/// Claim/complete records in the control table.
#[derive(Debug, Clone)]
pub struct Idempotency {
    db: Db,
    table: String,
    clock: SharedClock,
    retention: Duration,
}

impl Idempotency {
    /// Records in `table`, kept `retention` after completion.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock, retention: Duration) -> Self {
        Self { db, table: table.into(), clock, retention }
    }

    /// Claims `scope/key` for `owner` until `until_ms` (derive it from the caller's deadline).
    pub async fn claim(&self, scope: &str, k: &str, owner: &str, until_ms: Millis) -> Result<KeyClaim, DbError> {
        let now = self.clock.now_ms();
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(idem_key(scope, k)))
            .update_expression("SET #state = :ip, #owner = :owner, #exp = :until, #ttl = :ttl")
            .condition_expression("attribute_not_exists(#pk) OR (#state = :ip AND #exp < :now)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_names("#exp", "expires_at")
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_values(":ip", av_s(IN_PROGRESS))
            .expression_attribute_values(":owner", av_s(owner))
            .expression_attribute_values(":until", av_n(until_ms))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":ttl", av_n(now / 1000 + self.retention.as_secs() as i64))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        match self.db.update(req).await {
            Ok(_) => Ok(KeyClaim::Claimed),
            Err(DbError::ConditionFailed { item, .. }) => {
                let item = item.map(|b| *b).unwrap_or_default();
                if get_s(&item, STATE) == Some(DONE) {
                    Ok(KeyClaim::Done)
                } else {
                    Ok(KeyClaim::InProgress {
                        owner: get_s(&item, "owner").unwrap_or("?").to_string(),
                        until_ms: get_i64(&item, "expires_at").unwrap_or(0),
                    })
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Marks the claim done, if still ours.
    pub async fn complete(&self, scope: &str, k: &str, owner: &str) -> Result<KeySettle, DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(idem_key(scope, k)))
            .update_expression("SET #state = :done")
            .condition_expression("#owner = :owner AND #state = :ip")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":done", av_s(DONE))
            .expression_attribute_values(":ip", av_s(IN_PROGRESS))
            .expression_attribute_values(":owner", av_s(owner));
        settle(self.db.update(req).await.map(|_| ()))
    }

    /// Gives an unfinished claim back (the effect failed and may be retried), if still ours.
    pub async fn abandon(&self, scope: &str, k: &str, owner: &str) -> Result<KeySettle, DbError> {
        let req = self
            .db
            .client()
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(idem_key(scope, k)))
            .condition_expression("#owner = :owner AND #state = :ip")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#owner", "owner")
            .expression_attribute_values(":ip", av_s(IN_PROGRESS))
            .expression_attribute_values(":owner", av_s(owner));
        settle(self.db.delete(req).await.map(|_| ()))
    }
}

fn settle(r: Result<(), DbError>) -> Result<KeySettle, DbError> {
    Ok(if crate::error::condition_held(r)? { KeySettle::Settled } else { KeySettle::NotOwner })
}
