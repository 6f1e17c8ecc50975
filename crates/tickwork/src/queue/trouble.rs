//! A tenant's units in the queue, for `tenants.explain`, read by key condition only.
//!
//! Why this shape: a pulse or a fire travels in a batch item of many tenants, keyed by a digest of
//! its units, so "where is tenant T's unit" has no key on the happy path, and giving it one (a
//! write per tenant per unit) would multiply the delivery bill by the batch size. What a support
//! engineer needs is narrower and cheap to keep:
//! - **units that went wrong**: an item whose units are one tenant's carries [`TROUBLE`] (the
//!   tenant) from its first failure, throttle or death on, and keeps it on its dead letter or its
//!   done tombstone, so the sparse [`TROUBLE_INDEX`] answers "retrying, dead, or handled after
//!   all, and when" per tenant (the worker splits a failed remainder by tenant when few tenants
//!   failed, so one bad tenant of a batch is found);
//! - **everything else**: the queue's oldest ready item ([`Queue::oldest_ready`], one read a
//!   shard): every unit made ready before it has been taken from the queue (handled, or running
//!   now), so "fired at T and T is before the oldest ready" means "delivered", and an old oldest
//!   means delivery is behind for every tenant.
//!
//! The writes happen only off the happy path: an item settled done on its first claim never
//! touches the index.

use crate::clock::Millis;
use crate::error::DbError;
use crate::queue::error::QueueError;
use crate::queue::schema::*;
use crate::queue::store::Queue;
use crate::schema::{av_s, get_i64, get_s, get_u64, PK};

/// An item of one tenant's units that went wrong, as the index holds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TroubleUnit {
    /// The item's id (`tickctl dead-letters retry ID` takes it).
    pub id: String,
    /// Kind.
    pub kind: String,
    /// `pending` (waiting for its retry), `claimed` (running), `dead`, or `done` (handled after
    /// all; the tombstone expires after the queue's retention).
    pub state: String,
    /// Claims spent.
    pub attempts: u32,
    /// Why it went wrong.
    pub last_error: String,
    /// When it was made (ms).
    pub created_at_ms: Millis,
    /// While pending or claimed: when it may be taken next (ms).
    pub visible_at_ms: Option<Millis>,
    /// When it was dead-lettered (ms).
    pub failed_at_ms: Option<Millis>,
    /// When it was handled (ms).
    pub finished_at_ms: Option<Millis>,
}

/// What the trouble index names an item under ([`TROUBLE`]): the one tenant whose units its
/// payload holds, [`SEVERAL`] for units of several tenants, `None` when it names no tenant (a
/// single item without one). Pure. A batch names its units' tenants; a single item names its own
/// (`tenant`); a batch that does not read is [`SEVERAL`] (whose units it holds is unknown).
pub fn trouble_of(payload: &str, tenant: Option<&str>) -> Option<String> {
    match crate::batch::Batch::of_payload("", payload) {
        Some(Ok(b)) => {
            let mut tenants = b.sets.iter().flat_map(|s| s.tenants.iter()).filter(|t| !t.is_empty());
            let first = tenants.next()?;
            Some(if tenants.all(|t| t == first) { first.clone() } else { SEVERAL.to_string() })
        }
        Some(Err(_)) => Some(SEVERAL.to_string()),
        None => tenant.filter(|t| !t.is_empty()).map(str::to_string),
    }
}

/// Items of a partition of the trouble index read at most ([`Queue::troubles`]): a tenant whose
/// endpoint has been broken for weeks has one dead letter a fire, and explain stays one page.
pub const TROUBLES_READ: usize = 200;

/// A partition of the trouble index as read: newest first, at most [`TROUBLES_READ`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Troubles {
    /// The items read.
    pub units: Vec<TroubleUnit>,
    /// More items are older than the ones read (the counts are then at least).
    pub more: bool,
}

impl Queue {
    /// The newest [`TROUBLES_READ`] items of partition `who` (a tenant, or [`SEVERAL`]), newest
    /// first, and whether older ones are left unread (said to the caller, never dropped silently).
    pub async fn troubles(&self, who: &str) -> Result<Troubles, QueueError> {
        let mut out = Troubles::default();
        let mut start: Option<crate::pager::Cursor> = None;
        loop {
            let q = self
                .db
                .client()
                .query()
                .table_name(&self.table)
                .index_name(TROUBLE_INDEX)
                .key_condition_expression("#t = :t")
                .expression_attribute_names("#t", TROUBLE)
                .expression_attribute_values(":t", av_s(who))
                .scan_index_forward(false);
            let room = (TROUBLES_READ - out.units.len()) as i32;
            let page = crate::pager::fetch_page(&self.db, &q, start.as_ref(), room)
                .await
                .map_err(|e| DbError::from(crate::pager::PageError::<DbError>::widen(e)))?;
            out.units.extend(page.items.iter().map(|i| TroubleUnit {
                id: get_s(i, PK).unwrap_or_default().to_string(),
                kind: get_s(i, KIND).unwrap_or_default().to_string(),
                state: get_s(i, STATE).unwrap_or_default().to_string(),
                attempts: get_u64(i, ATTEMPTS).unwrap_or(0) as u32,
                last_error: get_s(i, LAST_ERROR).unwrap_or_default().to_string(),
                created_at_ms: get_i64(i, CREATED_AT).unwrap_or(0),
                visible_at_ms: get_i64(i, VISIBLE_AT),
                failed_at_ms: get_i64(i, FAILED_AT),
                finished_at_ms: get_i64(i, FINISHED_AT),
            }));
            match page.next {
                Some(c) if out.units.len() < TROUBLES_READ => start = Some(c),
                Some(_) => {
                    out.more = true;
                    return Ok(out);
                }
                None => return Ok(out),
            }
        }
    }

    /// When the queue's oldest ready item became ready (its `visible_at`), over every ready shard
    /// (one keys-only Query of at most two items a shard: a pause marker sorts first), or `None`
    /// when nothing is ready. Every unit made ready before it has been taken from the queue.
    pub async fn oldest_ready(&self) -> Result<Option<Millis>, QueueError> {
        let mut oldest: Option<Millis> = None;
        for k in 0..self.poll_shards {
            let first = self.poll(k, 2).await?.into_iter().find(|c| !c.id.starts_with(PAUSE_PREFIX));
            if let Some(c) = first {
                oldest = Some(oldest.map_or(c.visible_at, |o| o.min(c.visible_at)));
            }
        }
        Ok(oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Batch;
    use serde_json::{json, Map, Value};

    fn each(period: &str) -> Vec<Map<String, Value>> {
        vec![json!({"grain": "day", "period": period}).as_object().unwrap().clone()]
    }

    #[test]
    fn a_batch_of_one_tenants_units_names_it_and_of_several_the_shared_partition() {
        let mut one = Batch::default();
        one.add(each("2026-12-01"), ["acme".to_string()]);
        one.add(each("2026-12-02"), ["acme".to_string()]);
        assert_eq!(trouble_of(&one.to_payload(), None).as_deref(), Some("acme"));
        let mut two = one.clone();
        two.add(each("2026-12-03"), ["globex".to_string()]);
        assert_eq!(trouble_of(&two.to_payload(), None).as_deref(), Some(SEVERAL));
        assert_eq!(trouble_of(&Batch::default().to_payload(), Some("x")), None, "a batch of no units");
        let mut blank = Batch::default();
        blank.add(each("2026-12-01"), [String::new()]);
        assert_eq!(trouble_of(&blank.to_payload(), None), None, "DynamoDB refuses an empty key");
    }

    #[test]
    fn a_single_item_names_its_own_tenant_and_a_broken_batch_the_shared_partition() {
        assert_eq!(trouble_of(r#"{"day":"2026-12-01"}"#, Some("acme")).as_deref(), Some("acme"));
        assert_eq!(trouble_of(r#"{"day":"2026-12-01"}"#, None), None);
        assert_eq!(trouble_of(r#"{"day":"2026-12-01"}"#, Some("")), None);
        assert_eq!(trouble_of(r#"{"batch":{"sets":7}}"#, Some("acme")).as_deref(), Some(SEVERAL));
    }
}
