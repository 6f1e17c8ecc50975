//! The archive intent: what a batch is about to become, recorded before its object is written.
//!
//! Why: the object key comes from the batch's first and last rows, and the deletes come after the
//! put. Recorded only *between* the put and the deletes, a failure before the intent made the next
//! sweep re-read a grown batch under a new key (its rows in two objects), and recovery deleted
//! every row in the batch's *range* — including a row written later with an old timestamp that no
//! object held. So the intent is written first, and it names the object key and the exact rows
//! (their sort keys, which carry each row's version): recovery re-does exactly this batch, and
//! deletes exactly these versions, whatever else the range holds now.
//!
//! Item (control table): `pk = intent#archiver`, `sk = <shard>`; `key` (the object key), `rows`
//! (list of the batch's `tsid`s, in order), `next` (the page cursor after the batch; absent when
//! the batch drained the shard). Written and deleted in fenced transactions.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use tickwork::capacity::Item;
use tickwork::pager::Cursor;
use tickwork::schema::{av_s, get_s, key};
use tickwork::Db;

use crate::report::ArchiveError;

/// The intent partition.
pub const INTENT_PK: &str = "intent#archiver";

/// A batch whose object is about to be written (or was), and whose rows are to be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// The object key.
    pub key: String,
    /// The rows' sort keys (`<ts>#<pk>`), in order: each names one version of one row.
    pub rows: Vec<String>,
    /// Where the shard resumes after this batch (`None`: the batch drained it).
    pub next: Option<Cursor>,
}

/// The intent item's key for shard `k`.
pub fn intent_key(k: u32) -> Item {
    key(INTENT_PK, k.to_string())
}

/// The put that records `intent` for shard `k`, for a fenced transaction.
pub fn put(table: &str, k: u32, intent: &Intent) -> TransactWriteItem {
    let mut item = intent_key(k);
    item.insert("key".into(), av_s(&intent.key));
    item.insert("rows".into(), AttributeValue::L(intent.rows.iter().map(av_s).collect()));
    if let Some(n) = &intent.next {
        item.insert("next".into(), av_s(n.as_str()));
    }
    let put = Put::builder().table_name(table).set_item(Some(item)).build().expect("put has table and item");
    TransactWriteItem::builder().put(put).build()
}

/// The delete that clears shard `k`'s intent, for a fenced transaction.
pub fn delete(table: &str, k: u32) -> TransactWriteItem {
    let del = Delete::builder().table_name(table).set_key(Some(intent_key(k))).build().expect("delete has a key");
    TransactWriteItem::builder().delete(del).build()
}

/// Shard `k`'s intent, if an earlier sweep left one (strongly consistent: it follows the lease).
pub async fn read(db: &Db, table: &str, k: u32) -> Result<Option<Intent>, ArchiveError> {
    let Some(i) = db.get_strong(table, intent_key(k)).await? else { return Ok(None) };
    let unreadable = |what: &str| ArchiveError::Intent { shard: k, problem: what.to_string() };
    let rows = i
        .get("rows")
        .and_then(|v| v.as_l().ok())
        .ok_or_else(|| unreadable("no `rows` list"))?
        .iter()
        .map(|v| v.as_s().cloned().map_err(|_| unreadable("a row is not a string")))
        .collect::<Result<Vec<String>, _>>()?;
    let next = match get_s(&i, "next") {
        None => None,
        Some(n) => Some(n.parse().map_err(|_| unreadable("`next` is not a cursor"))?),
    };
    Ok(Some(Intent { key: get_s(&i, "key").ok_or_else(|| unreadable("no `key`"))?.to_string(), rows, next }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_put_holds_the_key_the_rows_and_the_cursor() {
        let i = Intent { key: "archive/x.ndjson.gz".into(), rows: vec!["1#a".into(), "2#b".into()], next: None };
        let w = put("control", 3, &i);
        let item = w.put().unwrap().item();
        assert_eq!(get_s(item, "pk"), Some(INTENT_PK));
        assert_eq!(get_s(item, "sk"), Some("3"));
        assert_eq!(item["rows"].as_l().unwrap().len(), 2);
        assert!(!item.contains_key("next"));
    }
}
