//! A schedule's writes committed in one transaction of its own items: the definition, its
//! membership, a group's head and first due record, the shard cursors it counts on. No item all
//! writers share is in it: `sched_next` is lowered from the table's stream ([`super::lowering`]),
//! so writers neither take one item's write units nor cancel each other's transactions on it.

use aws_sdk_dynamodb::types::TransactWriteItem;

use crate::db::Db;
use crate::error::DbError;

/// How a commit ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Committed {
    /// Written.
    Written,
    /// Write `index` (of the caller's) had its condition fail: nothing was written.
    ConditionFailed(usize),
}

/// Commits `writes` in one transaction; a failed condition names the write.
pub(super) async fn commit(db: &Db, writes: Vec<TransactWriteItem>) -> Result<Committed, DbError> {
    match db.transact_write(writes).await {
        Ok(_) => Ok(Committed::Written),
        Err(DbError::TransactionCanceled { reasons }) => match reasons.iter().position(|r| r.condition_failed()) {
            Some(i) => Ok(Committed::ConditionFailed(i)),
            None => Err(DbError::TransactionCanceled { reasons }),
        },
        Err(e) => Err(e),
    }
}
