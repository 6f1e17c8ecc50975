//! The writes of a schedule's items as a transaction takes them, and a shard cursor as read:
//! pure builders the store, the joins and the sweep share.

use super::record::{member_pk, DueRecord, Member};
use crate::schema::key;

/// A shard's cursor as read: the sort key of the last record handled, and the count of records
/// writers wrote after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardCursor {
    /// The last record handled.
    pub cur: Option<String>,
    /// Records writers wrote after it.
    pub writes: i64,
}

/// Shard cursors as a writer read them.
pub(super) type Cursors = std::collections::BTreeMap<u32, ShardCursor>;

/// A due record's put, for a transaction.
pub(super) fn record_put(table: &str, job: &str, r: &DueRecord) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let put = aws_sdk_dynamodb::types::Put::builder()
        .table_name(table)
        .set_item(Some(r.to_item(job)))
        .build()
        .expect("put has table and item");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build()
}

/// A member's put, for a transaction.
pub(super) fn member_put(table: &str, job: &str, gid: &str, m: &Member) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let put = aws_sdk_dynamodb::types::Put::builder().table_name(table).set_item(Some(m.to_item(job, gid))).build();
    aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put.expect("put has table and item")).build()
}

/// A member's delete, for a transaction (unconditional: gone already is the same).
pub fn member_delete(table: &str, job: &str, gid: &str, tenant: &str) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let del = aws_sdk_dynamodb::types::Delete::builder()
        .table_name(table)
        .set_key(Some(key(member_pk(job, gid), tenant)))
        .build()
        .expect("delete has table and key");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().delete(del).build()
}
