//! A one-off group larger than its first page fixed before it fires: its head marked `firing` in
//! a fenced transaction of its own ([`RecordEnd::Fix`]), then its members fired from its start, a
//! thousand a page, behind the record's cursor. No join is lost or passed over: one committed
//! before the fix is read by the pages read after it, and one after it is refused (a join is
//! conditional on the head not firing) and goes to another generation of the group.

use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::schedules::{DueRecord, RecordEnd, Stage};

use crate::deps::Deps;
use crate::report::PulseError;

/// Times a fix refused by its head (put, or lost, since it was read) is tried again at once.
const FIX_ATTEMPTS: u32 = 5;

/// How fixing a group went.
pub(crate) enum Fixing {
    /// Fixed: the record as it is now (boxed: one a group, and the other answers are small).
    Fixed(Box<DueRecord>),
    /// The record changed under the sweep, or joins kept landing: the shard is read again.
    Refused,
    /// The shard's lease moved on.
    LeaseLost,
}

/// Fixes `rec`'s group at `now_ms` (the plan's instant kept on the record).
pub(crate) async fn fix(deps: &Deps, fence: &Fence, rec: &DueRecord, now_ms: i64) -> Result<Fixing, PulseError> {
    let s = &deps.schedules;
    let plan_at = rec.plan_at.unwrap_or(now_ms);
    for _ in 0..FIX_ATTEMPTS {
        let head = s.head_joins(&rec.group.id()).await?.is_some();
        let items = s.record_items(rec, &RecordEnd::Fix { head }, &[], plan_at);
        match fenced_write(&deps.db, fence, items).await? {
            Fenced::Written => {
                let fixed = DueRecord { stage: Stage::Fixed, cursor: None, plan_at: Some(plan_at), ..rec.clone() };
                return Ok(Fixing::Fixed(Box::new(fixed)));
            }
            Fenced::Stale => return Ok(Fixing::LeaseLost),
            // The head (put or lost since the read): read again, at once.
            Fenced::ConditionFailed { index: 1, .. } => continue,
            Fenced::ConditionFailed { .. } => return Ok(Fixing::Refused),
        }
    }
    tracing::warn!(group = %rec.group.id(), "a one-off group's head kept changing while it was being fixed: its shard is read again");
    Ok(Fixing::Refused)
}
