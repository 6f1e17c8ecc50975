//! A schedule's writes committed together with the state item: one transaction holds the
//! definition, its first due record, and the state item's `sched_next` lowered to that record's
//! due time (compare-and-set on the value read) with `sched_adds` counted.
//!
//! Why in one transaction: the sweep sets `sched_next` to the earliest record it finds unless an
//! add was counted since it read the state item. Lowered or counted apart from the record (before
//! it, or after it), a sweep between the two can raise `sched_next` past a record it did not see
//! yet, and a crash between them leaves it there: the record fires late, or never.

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use crate::clock::Millis;
use crate::db::Db;
use crate::error::DbError;
use crate::schema::{av_n, get_i64};
use crate::watermark::{watermark_key, SCHED_ADDS, SCHED_NEXT};

/// How a commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Committed {
    /// Written.
    Written,
    /// Write `index` (of the caller's) had its condition fail: nothing was written.
    ConditionFailed(usize),
}

/// Attempts when the state item changes between its read and the transaction (a sweep setting
/// `sched_next`, another add).
const ATTEMPTS: u32 = 8;

/// Commits `writes` in `job`'s control `table` with its state item: `sched_next` lowered to
/// `due_ms` when given (a record is among the writes), and the add counted.
pub(super) async fn commit(
    db: &Db,
    table: &str,
    job: &str,
    writes: Vec<TransactWriteItem>,
    due_ms: Option<Millis>,
) -> Result<Committed, DbError> {
    let n = writes.len();
    for _ in 0..ATTEMPTS {
        let state = db.get_strong(table, watermark_key(job)).await?;
        let seen = state.as_ref().and_then(|i| get_i64(i, SCHED_NEXT));
        let mut items = writes.clone();
        items.push(state_update(table, job, seen, due_ms));
        match db.transact_write(items).await {
            Ok(_) => return Ok(Committed::Written),
            Err(DbError::TransactionCanceled { reasons }) => {
                if let Some(i) = reasons.iter().take(n).position(|r| r.condition_failed()) {
                    return Ok(Committed::ConditionFailed(i));
                }
                if reasons.get(n).is_some_and(|r| r.condition_failed()) {
                    continue;
                }
                return Err(DbError::TransactionCanceled { reasons });
            }
            Err(e) => return Err(e),
        }
    }
    Err(DbError::Contended { what: format!("the state item of `{job}`"), attempts: ATTEMPTS })
}

/// The state item's part: `sched_next` set to the lower of `seen` and `due_ms` only if it is
/// still `seen`, and `sched_adds` counted.
fn state_update(table: &str, job: &str, seen: Option<Millis>, due_ms: Option<Millis>) -> TransactWriteItem {
    let next = match (seen, due_ms) {
        (Some(s), Some(d)) => Some(s.min(d)),
        (s, d) => s.or(d),
    };
    let mut u = Update::builder()
        .table_name(table)
        .set_key(Some(watermark_key(job)))
        .expression_attribute_names("#n", SCHED_NEXT)
        .expression_attribute_names("#a", SCHED_ADDS)
        .expression_attribute_values(":one", av_n(1));
    u = match next {
        Some(v) => u.update_expression("SET #n = :next ADD #a :one").expression_attribute_values(":next", av_n(v)),
        None => u.update_expression("ADD #a :one"),
    };
    u = match seen {
        Some(s) => u.condition_expression("#n = :seen").expression_attribute_values(":seen", av_n(s)),
        None => u.condition_expression("attribute_not_exists(#n)"),
    };
    TransactWriteItem::builder().update(u.build().expect("update has table, key and expression")).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_lowered_never_raised_and_only_from_the_value_read() {
        let expr = |seen, due| {
            let u = state_update("t", "j", seen, due);
            let u = u.update().unwrap();
            let v = |k: &str| u.expression_attribute_values().and_then(|m| m.get(k)).map(|v| v.as_n().unwrap().clone());
            (u.update_expression().to_string(), u.condition_expression().map(str::to_string), v(":next"), v(":seen"))
        };
        assert_eq!(expr(Some(500), Some(300)).2.as_deref(), Some("300"), "lowered");
        assert_eq!(expr(Some(500), Some(900)).2.as_deref(), Some("500"), "never raised");
        let (set, cond, next, _) = expr(None, Some(900));
        assert_eq!(
            (set.as_str(), cond.as_deref(), next.as_deref()),
            ("SET #n = :next ADD #a :one", Some("attribute_not_exists(#n)"), Some("900"))
        );
        let (set, cond, _, seen) = expr(Some(500), None);
        assert_eq!(
            (set.as_str(), cond.as_deref(), seen.as_deref()),
            ("SET #n = :next ADD #a :one", Some("#n = :seen"), Some("500"))
        );
        assert_eq!(expr(None, None).0, "ADD #a :one");
    }
}
