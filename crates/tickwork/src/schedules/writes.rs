//! The writes of a schedule's items as a transaction takes them, and a shard cursor as read:
//! pure builders the store, the joins and the sweep share.

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::record::{cursor_key, member_pk, DueRecord, Member, CUR, WRITES};
use crate::schema::{av_n, av_s, key};

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

/// A due record a writer inserts (an add, a change, an import, a repair), for a transaction:
/// marked, so the stream hands its insert to the lowering of `sched_next` (`schedules::lowering`).
pub(super) fn written_record_put(table: &str, job: &str, r: &DueRecord) -> TransactWriteItem {
    let mut item = r.to_item(job);
    item.insert(super::record::BY.to_string(), av_s(super::record::BY_WRITER));
    let put = aws_sdk_dynamodb::types::Put::builder().table_name(table).set_item(Some(item)).build();
    TransactWriteItem::builder().put(put.expect("put has table and item")).build()
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

/// A sweep's move of shard `k`'s cursor from `seen` to `to`: only if no other sweep moved it and
/// no writer counted a record on it since it was read.
pub(super) fn cursor_move_item(table: &str, job: &str, k: u32, seen: &ShardCursor, to: &str) -> TransactWriteItem {
    let u = Update::builder()
        .table_name(table)
        .set_key(Some(cursor_key(job, k)))
        .update_expression("SET #cur = :to")
        .expression_attribute_names("#cur", CUR)
        .expression_attribute_names("#w", WRITES)
        .expression_attribute_values(":to", av_s(to))
        .expression_attribute_values(":w", av_n(seen.writes));
    let w = if seen.writes == 0 { "(attribute_not_exists(#w) OR #w = :w)" } else { "#w = :w" };
    let u = match &seen.cur {
        Some(c) => {
            u.condition_expression(format!("#cur = :seen AND {w}")).expression_attribute_values(":seen", av_s(c))
        }
        None => u.condition_expression(format!("attribute_not_exists(#cur) AND {w}")),
    };
    TransactWriteItem::builder().update(u.build().expect("update is whole")).build()
}

/// A writer's count of a record it positions after shard `k`'s cursor: only if the cursor is still
/// where it read it.
pub(super) fn cursor_bump_item(table: &str, job: &str, k: u32, seen: &ShardCursor) -> TransactWriteItem {
    let u = Update::builder()
        .table_name(table)
        .set_key(Some(cursor_key(job, k)))
        .update_expression("ADD #w :one")
        .expression_attribute_names("#cur", CUR)
        .expression_attribute_names("#w", WRITES)
        .expression_attribute_values(":one", av_n(1));
    let u = match &seen.cur {
        Some(v) => u.condition_expression("#cur = :seen").expression_attribute_values(":seen", av_s(v)),
        None => u.condition_expression("attribute_not_exists(#cur)"),
    };
    TransactWriteItem::builder().update(u.build().expect("update is whole")).build()
}

/// Whether a sweep's move of a shard's cursor, refused, may be tried again at once from the cursor
/// read again (`fresh`): no other sweep moved it, and every record from the cursor to the move's
/// end (`in_range`, read after `fresh`) is one the sweep's transaction handles (`known`). A
/// writer's count, then, is of a record after the move's end (a near-term add, due after the
/// tick), which the move does not pass: reading the whole shard again for it would let a steady
/// trickle of adds refuse every move of a large fire. Pure.
pub fn move_clear(
    seen: &ShardCursor,
    fresh: &ShardCursor,
    in_range: &[String],
    known: &std::collections::BTreeSet<String>,
) -> bool {
    fresh.cur == seen.cur && in_range.iter().all(|sk| seen.cur.as_ref() == Some(sk) || known.contains(sk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_move_goes_again_only_when_writers_counted_records_past_it() {
        let seen = ShardCursor { cur: Some("000000000000100#a".into()), writes: 2 };
        let counted = ShardCursor { writes: 3, ..seen.clone() };
        let known: std::collections::BTreeSet<String> =
            ["000000000000200#b", "000000000000300#c"].map(String::from).into();
        let range = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(move_clear(&seen, &counted, &range(&["000000000000200#b", "000000000000300#c"]), &known));
        assert!(
            move_clear(&seen, &counted, &range(&["000000000000100#a", "000000000000300#c"]), &known),
            "the cursor's own record, not yet deleted"
        );
        assert!(
            !move_clear(&seen, &counted, &range(&["000000000000200#b", "000000000000250#w"]), &known),
            "a writer's record before the move's end"
        );
        let moved = ShardCursor { cur: Some("000000000000200#b".into()), writes: 2 };
        assert!(!move_clear(&seen, &moved, &range(&[]), &known), "another sweep moved it");
    }

    fn cond(t: &TransactWriteItem) -> (String, String, Vec<(String, String)>) {
        let u = t.update().unwrap();
        let mut v: Vec<(String, String)> = u
            .expression_attribute_values()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_s().or(v.as_n()).unwrap().clone()))
            .collect();
        v.sort();
        (u.update_expression().to_string(), u.condition_expression().unwrap().to_string(), v)
    }

    #[test]
    fn a_sweep_moves_a_cursor_only_as_it_read_it_and_a_writer_counts_its_record_on_it() {
        let seen = ShardCursor { cur: Some("000000000000100#g".into()), writes: 3 };
        let (set, c, v) = cond(&cursor_move_item("t", "j", 1, &seen, "000000000000200#h"));
        assert_eq!(set, "SET #cur = :to");
        // The writes counted since: a writer's record written while the sweep read its page
        // refuses the move.
        assert_eq!(c, "#cur = :seen AND #w = :w");
        assert!(v.contains(&(":w".into(), "3".into())) && v.contains(&(":seen".into(), "000000000000100#g".into())));
        let fresh = ShardCursor::default();
        let (_, c, _) = cond(&cursor_move_item("t", "j", 1, &fresh, "x"));
        assert_eq!(c, "attribute_not_exists(#cur) AND (attribute_not_exists(#w) OR #w = :w)");
        let (add, c, v) = cond(&cursor_bump_item("t", "j", 1, &seen));
        assert_eq!((add.as_str(), c.as_str()), ("ADD #w :one", "#cur = :seen"));
        assert!(v.contains(&(":one".into(), "1".into())));
        assert_eq!(cond(&cursor_bump_item("t", "j", 1, &fresh)).1, "attribute_not_exists(#cur)");
    }
}
