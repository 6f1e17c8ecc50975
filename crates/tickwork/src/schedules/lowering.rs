//! `sched_next` lowered from the control table's stream, not by each writer.
//!
//! Why: the state item is one item. Lowered in every writer's transaction (as it was), it took
//! every schedule write: at most 1,000 write units a second on one item (500 writes a second at
//! 2 units, 100 with a hundred zones' marks on it), and overlapping transactions on it cancelled
//! each other (`TransactionConflict`), so adds failed under a few hundred a second. Now a writer's
//! transaction holds only its own schedule's items, and the record it writes is marked
//! ([`BY`] = [`BY_WRITER`]). The stream's event source mapping hands those inserts to the sweep's
//! function in batches (its filter passes them alone), and one batch is one update of the state
//! item: `sched_next` lowered to the batch's earliest record, and `sched_adds` counted.
//!
//! Why the count, in every batch: the sweep sets `sched_next` to the earliest record it read only
//! if `sched_adds` is as it was before that read ([`Schedules::set_next`]). A record inserted
//! after the sweep read its shard is counted when its batch is handled: before the sweep's set
//! (which is then refused, and made again from the count and the shards read after it) or after
//! it (when `sched_next` is as the sweep set it, and lowered if the record is earlier). A record
//! counted before the sweep's read of the state item was in the table before the sweep read its
//! shards, and was seen there.
//!
//! Why nothing is lost on a crash: a record's insert is in the stream whatever happens to its
//! writer after the commit, and the mapping hands a batch again until the function returns
//! without error (the records are kept 24 hours). The update is idempotent: lowered again to the
//! same instant, counted again (a count only refuses a sweep's set). The sweep's own records (a
//! fired record's successor) carry no mark: the sweep reads the shards after putting them.

use crate::clock::Millis;
use crate::error::DbError;
use crate::schema::{av_n, get_i64};
use crate::watermark::{SCHED_ADDS, SCHED_NEXT, SCHED_WAKE};

use super::record::{pos_of, CURSOR_SK};
pub use super::record::{BY, BY_WRITER};
use super::store::Schedules;

/// The state item after a batch was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lowered {
    /// `sched_next` now (at or before the batch's earliest record).
    pub next: Millis,
    /// The sweep's wake, as recorded.
    pub wake: Option<Millis>,
    /// The job's pause switch (a paused job sets no wake).
    pub paused: bool,
}

/// The position of the due record at `(pk, sk)` when it is one of `job`'s due shards' records
/// (not a shard cursor, not a record set aside, not another job's); `None` otherwise.
pub fn inserted_position(job: &str, pk: &str, sk: &str) -> Option<Millis> {
    let shard = pk.strip_prefix("sdue#")?.strip_prefix(job)?.strip_prefix('#')?;
    if shard.is_empty() || !shard.bytes().all(|b| b.is_ascii_digit()) || sk == CURSOR_SK {
        return None;
    }
    pos_of(sk)
}

impl Schedules {
    /// Counts a batch of inserted records whose earliest is at `pos`, and lowers `sched_next` to
    /// it: one update (the count, `sched_next` set if absent, the item returned), and a second,
    /// conditional, when `sched_next` was later than `pos`.
    pub async fn lower_next(&self, pos: Millis) -> Result<Lowered, DbError> {
        let req = self
            .state_update()
            .update_expression("SET #n = if_not_exists(#n, :p) ADD #a :one")
            .expression_attribute_names("#n", SCHED_NEXT)
            .expression_attribute_names("#a", SCHED_ADDS)
            .expression_attribute_values(":p", av_n(pos))
            .expression_attribute_values(":one", av_n(1))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew);
        let out = self.db.update(req).await?;
        let item = out.attributes().cloned().unwrap_or_default();
        let next = get_i64(&item, SCHED_NEXT).unwrap_or(pos);
        let wake = get_i64(&item, SCHED_WAKE);
        let paused = crate::schema::get_bool(&item, crate::watermark::PAUSED).unwrap_or(false);
        if next <= pos {
            return Ok(Lowered { next, wake, paused });
        }
        let req = self
            .state_update()
            .update_expression("SET #n = :p")
            .condition_expression("#n > :p")
            .expression_attribute_names("#n", SCHED_NEXT)
            .expression_attribute_values(":p", av_n(pos));
        // Refused: another batch (or a sweep that read this record) set it at or before `pos`.
        crate::error::condition_held(self.db.update(req).await)?;
        Ok(Lowered { next: pos, wake, paused })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::record::{due_pk, due_sk};

    #[test]
    fn only_a_jobs_due_records_have_a_position() {
        let sk = due_sk(1_795_000_000_000, "ab12");
        assert_eq!(inserted_position("pulse-sweep", &due_pk("pulse-sweep", 3), &sk), Some(1_795_000_000_000));
        assert_eq!(inserted_position("pulse-sweep", &due_pk("pulse-sweep", 3), CURSOR_SK), None, "a cursor");
        assert_eq!(inserted_position("pulse-sweep", "sdue#pulse-sweep#bad", &sk), None, "set aside");
        assert_eq!(inserted_position("pulse-sweep", &due_pk("other", 3), &sk), None, "another job's");
        assert_eq!(inserted_position("pulse", &due_pk("pulse-sweep", 3), &sk), None, "a job whose name it starts");
        assert_eq!(inserted_position("pulse-sweep", "sdue#pulse-sweep#", &sk), None);
        assert_eq!(inserted_position("pulse-sweep", "smem#pulse-sweep#ab12", "acme"), None, "a member");
        assert_eq!(inserted_position("pulse-sweep", &due_pk("pulse-sweep", 0), "not a position"), None);
    }
}
