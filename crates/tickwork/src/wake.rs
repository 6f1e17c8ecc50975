//! Woken units: units (tenants) added, resumed or moved into a group after its run for the day,
//! to be visited at the job's next tick rather than at the group's next boundary.
//!
//! Why items of their own: the woken ids once lived in the job's state item (a string set per
//! group, capped per group but not in all). A burst of adds across many zones, with ids of up to
//! 900 bytes, grew it to DynamoDB's 400 KB item limit, after which every `tenants add`, `resume`
//! and `move` failed after writing the tenant, and every idle tick read ~50 RCU instead of 0.5.
//! Now the state item holds one small number per group with units waiting, and the ids are items
//! of their own, read only when that number says so.
//!
//! ## Items (control table)
//! - `pk = wake#<job>`, `sk = <group>#<unit>`: one per woken unit (an idempotent put; a TTL of
//!   [`RETENTION`], since a unit never visited is still visited by its group's next run).
//! - On the job's state item, `woken:<group>` (N): the group's wake generation, `ADD 1` on every
//!   wake. The idle tick's one read sees it; a group without it has no unit waiting. (An older
//!   release kept the ids themselves in `wake:<group>` (SS); they are read and visited once, and
//!   the attribute removed.)
//!
//! ## Protocol
//! 1. **Wake**: put the unit's item, **then** `ADD wake:<group> 1`. The number is raised after the
//!    item exists, so whoever reads the number finds the item.
//! 2. **Visit** (the sweep): read the number `g`; Query the group's items (a key condition:
//!    `pk = wake#<job> AND begins_with(sk, "<group>#")`, strongly consistent); visit them, each
//!    item deleted in the transaction that records its visit ([`done`]), conditional on the nonce
//!    it was read with: a wake since (an operator's resume or move while the visit ran) wrote a
//!    new one, the delete fails, and the unit stays woken for the next tick.
//! 3. **Settle**: when a visit read the group's items to the end, `REMOVE wake:<group>` if it is
//!    still `g` ([`settle`]). A wake since (step 1 again) raised it, so the removal fails and the
//!    next tick visits the new unit; one whose item the Query did not see raised it after the read.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem};

use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_s, key, PK, SK, TTL};

/// State-item attribute name prefix: a group's wake generation (N).
pub const WOKEN_PREFIX: &str = "woken:";
/// State-item attribute name prefix of an older release's inline list of woken ids (SS): read,
/// visited and removed, never written.
pub const WAKE_PREFIX: &str = "wake:";

/// Attribute of a wake item: a value new at every wake, so that a visit deletes only the wake it
/// read.
pub const NONCE: &str = "nonce";

/// A woken unit as read: its id and the nonce of its wake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// The unit.
    pub unit: String,
    /// Its wake's nonce (empty for an older release's inline list).
    pub nonce: String,
}

/// How long a wake item is kept if never visited.
pub const RETENTION: Duration = Duration::from_secs(14 * 86_400);

/// Ids read by one visit at most: more wait for the next tick.
pub const MAX_VISIT: usize = 1000;

/// A group's units waiting, as the state item tells.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Woken {
    /// The wake generation (items of their own to read), if any.
    pub generation: Option<u64>,
    /// Ids held in the state item itself by an older release, if any.
    pub listed: std::collections::BTreeSet<String>,
}

impl Woken {
    /// Every group's units waiting, from the job's state item.
    pub fn all_of(item: &Item) -> std::collections::BTreeMap<String, Woken> {
        let mut out: std::collections::BTreeMap<String, Woken> = Default::default();
        for (k, v) in item {
            if let (Some(g), AttributeValue::N(n)) = (k.strip_prefix(WOKEN_PREFIX), v) {
                out.entry(g.to_string()).or_default().generation = n.parse().ok();
            } else if let (Some(g), AttributeValue::Ss(ids)) = (k.strip_prefix(WAKE_PREFIX), v) {
                out.entry(g.to_string()).or_default().listed = ids.iter().cloned().collect();
            }
        }
        out.retain(|_, w| !w.is_empty());
        out
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.generation.is_none() && self.listed.is_empty()
    }
}

/// The partition of a job's wake items.
pub fn wake_pk(job: &str) -> String {
    format!("wake#{job}")
}

fn wake_sk(group: &str, unit: &str) -> String {
    format!("{group}#{unit}")
}

/// Step 1: wakes `unit` of `group` (idempotent), raising the group's number on `state` (the job's
/// state item key) after its item is written.
pub async fn wake(
    db: &Db,
    table: &str,
    state: Item,
    job: &str,
    group: &str,
    unit: &str,
    now_ms: i64,
) -> Result<(), DbError> {
    let mut item = key(wake_pk(job), wake_sk(group, unit));
    item.insert("unit".into(), av_s(unit));
    item.insert(NONCE.into(), av_s(format!("{:016x}", fastrand::u64(..))));
    item.insert(TTL.into(), av_n(now_ms / 1000 + RETENTION.as_secs() as i64));
    db.put(db.client().put_item().table_name(table).set_item(Some(item))).await?;
    let req = db
        .client()
        .update_item()
        .table_name(table)
        .set_key(Some(state))
        .update_expression("ADD #w :one")
        .expression_attribute_names("#w", format!("{WOKEN_PREFIX}{group}"))
        .expression_attribute_values(":one", av_n(1));
    db.update(req).await.map(|_| ())
}

/// Step 2: the units of `group` waiting, up to [`MAX_VISIT`]; `true` when that is all of them.
pub async fn waiting(db: &Db, table: &str, job: &str, group: &str) -> Result<(Vec<Waiting>, bool), DbError> {
    let mut ids = Vec::new();
    let mut start: Option<Item> = None;
    loop {
        let q = db
            .client()
            .query()
            .table_name(table)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :g)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", av_s(wake_pk(job)))
            .expression_attribute_values(":g", av_s(format!("{group}#")))
            .consistent_read(true)
            .limit((MAX_VISIT - ids.len()).min(500) as i32)
            .set_exclusive_start_key(start.take());
        let out = db.query(q).await?;
        ids.extend(out.items().iter().filter_map(|i| {
            Some(Waiting {
                unit: get_s(i, "unit")?.to_string(),
                nonce: get_s(i, NONCE).unwrap_or_default().to_string(),
            })
        }));
        match out.last_evaluated_key() {
            None => return Ok((ids, true)),
            Some(k) if ids.len() < MAX_VISIT => start = Some(k.clone()),
            Some(_) => return Ok((ids, false)),
        }
    }
}

/// Step 2: the delete of a visited unit's item, for the transaction that records its visit,
/// conditional on the wake read (`nonce`; an older release's inline id, with none, deletes
/// nothing that could be there).
pub fn done(table: &str, job: &str, group: &str, w: &Waiting) -> TransactWriteItem {
    let d = Delete::builder()
        .table_name(table)
        .set_key(Some(key(wake_pk(job), wake_sk(group, &w.unit))))
        .condition_expression("attribute_not_exists(#n) OR #n = :n")
        .expression_attribute_names("#n", NONCE)
        .expression_attribute_values(":n", av_s(&w.nonce))
        .build()
        .expect("delete has table and key");
    TransactWriteItem::builder().delete(d).build()
}

/// Step 3: the group's number removed from `state` if still `generation`, and an older release's
/// list with it (visited now, never written again); `false` when a wake came since.
pub async fn settle(db: &Db, table: &str, state: Item, group: &str, w: &Woken) -> Result<bool, DbError> {
    let mut req = db
        .client()
        .update_item()
        .table_name(table)
        .set_key(Some(state))
        .expression_attribute_names("#l", format!("{WAKE_PREFIX}{group}"));
    req = match w.generation {
        Some(g) => req
            .update_expression("REMOVE #w, #l")
            .condition_expression("#w = :g")
            .expression_attribute_names("#w", format!("{WOKEN_PREFIX}{group}"))
            .expression_attribute_values(":g", av_n(g)),
        None => req.update_expression("REMOVE #l"),
    };
    crate::error::condition_held(db.update(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_number_or_an_older_list_is_read_as_waiting() {
        let item = Item::from([
            ("woken:Europe/Berlin".to_string(), AttributeValue::N("3".into())),
            ("wake:Europe/Berlin".to_string(), AttributeValue::Ss(vec!["t0".into()])),
            ("wake:Asia/Tokyo".to_string(), AttributeValue::Ss(vec!["t1".into()])),
            ("woken:UTC".to_string(), AttributeValue::S("not a number".into())),
            ("mark:UTC".to_string(), AttributeValue::S("2026-11-29".into())),
        ]);
        let all = Woken::all_of(&item);
        assert_eq!(all.keys().collect::<Vec<_>>(), ["Asia/Tokyo", "Europe/Berlin"]);
        let b = &all["Europe/Berlin"];
        assert_eq!((b.generation, b.listed.len(), b.is_empty()), (Some(3), 1, false));
        assert_eq!((all["Asia/Tokyo"].generation, all["Asia/Tokyo"].listed.len()), (None, 1));
        assert_eq!(wake_sk("Europe/Berlin", "t#1"), "Europe/Berlin#t#1", "a zone has no `#`: the first one splits");
    }
}
