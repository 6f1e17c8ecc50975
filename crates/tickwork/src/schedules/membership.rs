//! How a schedule joins and leaves its group: the membership writes a change puts in its
//! transaction, the group's head (counted on a join, or put with the group's first record), and
//! the record's position after its shard's cursor with the cursor's count of writes moved on.

use super::error::ScheduleError;
use super::fire::first_record;
use super::record::{head_key, pos_of, DueRecord, Group, Member, FIRING, JOINS};
use super::store::Schedules;
use super::writes::{cursor_bump_item, Cursors};
use crate::error::DbError;
use crate::schema::{av_n, put_new_item, PK};
use aws_sdk_dynamodb::types::TransactWriteItem;

/// How far past a writer's clock a sweep's cursor may be: its clock's skew, with room.
pub(super) const CURSOR_REACH_MS: crate::clock::Millis = 3_600_000;

/// The generation a join tries after generation `gen`, found firing, of a one-off due at `due_ms`
/// (its first record's), at `now_ms`: past the first, the generation of the minute it comes in after
/// the instant (1 in its first minute, and never before it: a writer's clock behind the sweep's),
/// else the next. Pure.
pub(super) fn next_generation(gen: u32, due_ms: Option<crate::clock::Millis>, now_ms: crate::clock::Millis) -> u32 {
    let minute = match (gen, due_ms) {
        (0, Some(due)) => u32::try_from((now_ms - due).max(0) / 60_000 + 1).unwrap_or(u32::MAX),
        _ => 0,
    };
    minute.max(gen.saturating_add(1))
}

/// Heads a join reads looking for a generation of its group that is not firing: the first, then
/// the generation of its minute, which is firing only when more than a first page joined it in
/// that minute and it was fired (then the next, and so on).
const MAX_GENERATIONS: u32 = 16;

impl Schedules {
    /// How `n` members join group `g` (the first of them `m`), and the generation of it they join:
    /// the first whose head is not firing ([`Group::gen`]). Its head counted (it must still be
    /// there, and not firing: a one-off's fire that fixed its members passes over no one who
    /// joined after), or, when it has none, the head put (it must still be absent) and the
    /// group's first record, owed after `m`'s instant, positioned after its shard's cursor (read
    /// into `cursors` once a shard: the caller checks each in its transaction).
    pub(super) async fn join_items(
        &self,
        g: &Group,
        m: &Member,
        n: u64,
        cursors: &mut Cursors,
    ) -> Result<(Group, TransactWriteItem, Option<DueRecord>), ScheduleError> {
        let mut g = g.clone();
        for _ in 0..MAX_GENERATIONS {
            let gid = g.id();
            let head = self.db.get_strong(&self.table, head_key(&self.job, &gid)).await?;
            match head {
                Some(h) if h.contains_key(FIRING) => {
                    // Past the first, a join goes to the generation of the minute it comes in
                    // after the one-off's instant (a fixed generation's head stays until no one
                    // can join, so a join counting up from 1 would walk past one a minute).
                    let due = first_record(&g, m.owed_ms)?.map(|r| r.due_ms);
                    g = g.with_gen(next_generation(g.gen, due, self.clock_now()));
                    continue;
                }
                Some(_) => {
                    let u = aws_sdk_dynamodb::types::Update::builder()
                        .table_name(&self.table)
                        .set_key(Some(head_key(&self.job, &gid)))
                        .update_expression("ADD #j :n")
                        .condition_expression("attribute_exists(#pk) AND attribute_not_exists(#f)")
                        .expression_attribute_names("#j", JOINS)
                        .expression_attribute_names("#pk", PK)
                        .expression_attribute_names("#f", FIRING)
                        .expression_attribute_values(":n", av_n(n))
                        .build()
                        .expect("update has table, key and expression");
                    return Ok((g, TransactWriteItem::builder().update(u).build(), None));
                }
                None => {
                    let mut item = g.head_item(&self.job);
                    item.insert(JOINS.to_string(), av_n(n));
                    let record = match first_record(&g, m.owed_ms)? {
                        Some(r) => Some(self.positioned(r, cursors).await?),
                        None => None,
                    };
                    return Ok((g, put_new_item(&self.table, item), record));
                }
            }
        }
        Err(DbError::Contended {
            what: format!("the generations of schedule `{}`'s group, each firing", g.name),
            attempts: MAX_GENERATIONS,
        }
        .into())
    }

    /// `r` positioned after its shard's cursor (read into `cursors` once a shard: the caller
    /// checks each in its transaction, [`Schedules::cursor_bumps`]).
    pub(super) async fn positioned(&self, r: DueRecord, cursors: &mut Cursors) -> Result<DueRecord, ScheduleError> {
        // Due well after now: no sweep's cursor can reach it before it is read (a cursor is at
        // most its sweep's instant), so it neither reads nor counts on the cursor, and a sweep
        // firing meanwhile is not made to read its shard again.
        if r.pos_ms > self.clock_now() + CURSOR_REACH_MS {
            return Ok(r);
        }
        let k = r.shard();
        if let std::collections::btree_map::Entry::Vacant(e) = cursors.entry(k) {
            e.insert(self.shard_cursor(k).await?);
        }
        let after = match cursors[&k].cur.as_deref() {
            None => r.pos_ms,
            Some(c) => {
                pos_of(c)
                    .ok_or_else(|| DbError::Invalid(format!("shard {k}'s cursor `{c}` does not name a position")))?
                    + 1
            }
        };
        Ok(DueRecord { pos_ms: r.pos_ms.max(after), ..r })
    }

    /// For each shard cursor in `cursors`, its count of writes moved on, only if the cursor is
    /// still where it was read: no sweep has passed a record this transaction positions after it,
    /// and a sweep that read its page before this commit cannot move past it either (its move is
    /// conditional on the count it read).
    pub(super) fn cursor_bumps(&self, cursors: &Cursors) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem> {
        cursors.iter().map(|(k, seen)| cursor_bump_item(&self.table, &self.job, *k, seen)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_join_after_a_fix_goes_to_the_generation_of_its_minute_and_past_a_firing_one_to_the_next() {
        let due = 1_766_563_200_000;
        assert_eq!(next_generation(0, Some(due), due), 1, "its first minute");
        assert_eq!(next_generation(0, Some(due), due + 30 * 60_000 + 5), 31);
        assert_eq!(next_generation(0, Some(due), due - 5_000), 1, "a writer's clock behind: never 0");
        assert_eq!(next_generation(31, Some(due), due + 30 * 60_000), 32, "that one firing too: the next");
        assert_eq!(next_generation(0, None, due), 1);
        assert_eq!(next_generation(u32::MAX, None, due), u32::MAX, "no overflow");
    }
}
