//! How a record's page of fires ends, and that end's writes in the sweep's transaction: the
//! member cursor moved, a one-off's group fixed, the record replaced or passed, or its group
//! retired (or, a campaign cleaned, closed).

use std::collections::HashMap;

use super::record::{
    def_pk, head_key, DueRecord, Stage, CURSOR, FIRED, FIRED_ALL, FIRING, JOINS, LEAVES, PLAN_AT, STAGE,
};
use super::store::Schedules;
use super::writes::{member_delete, record_put};
use crate::clock::Millis;
use crate::schema::{av_n, av_s, key, put_new_item, PK, TTL};
use aws_sdk_dynamodb::types::{AttributeValue, Delete, TransactWriteItem, Update};

/// How a record's fire of one page of members ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordEnd {
    /// More members follow: the record's member cursor moves to this member.
    Advance(String),
    /// A one-off group's first page, more members following: nothing fired; the record's
    /// stage set to [`Stage::Fixed`] (its member cursor cleared: fixed, it is read from its
    /// group's start after this commits, so every member that joined before is read), and the
    /// head marked `firing` (or put so, when the group has none): a join is conditional on its
    /// absence, so every later one goes to another generation of the group.
    Fix {
        /// The group has a head (as read).
        head: bool,
    },
    /// Every member done: the shard's cursor moves past the record (in the same transaction), and
    /// this successor is put with it (one written before the transaction is not here).
    Done(Option<DueRecord>),
    /// A one-off group's record replaced in the transaction by this one, after the shard's
    /// cursor: a fixed group's last page by its cleaning record (its head marked every member
    /// fired), or a cleaning record moved on at a visit. Deleted in the transaction, not after it
    /// (a crash between would leave it behind the cursor for good).
    Replaced(DueRecord),
    /// A record whose group has no head and no member (a successor an attempt before put for a
    /// group retired since): the cursor passes it, and nothing follows it.
    Pass,
    /// The group is done (a one-off fired) or found empty: its record and head (at the `joins`
    /// read before its members) are deleted, and the record's own successor if an attempt before
    /// put one.
    Retire {
        /// The head's joins, as read.
        joins: u64,
        /// The record's own successor.
        successor: Option<DueRecord>,
    },
    /// A fixed one-off group cleaned: its cleaning record is deleted, and its head, still firing,
    /// is set to expire at `expires_s` (epoch seconds), once no one can join its one-off: until
    /// then every join goes to another generation, so this one is never made again.
    Close {
        /// When the head expires.
        expires_s: i64,
    },
}

impl Schedules {
    /// The writes of one page of `rec`'s fire, for the sweep's transaction with the page's queue
    /// items (all or nothing: the members' fires are queued exactly when the record moves past
    /// them). An advance is conditional on the member cursor the sweep read, and the shard
    /// cursor's move ([`Schedules::cursor_move`]) on the shard cursor it read, so a page written
    /// twice (a retry after a lost answer, another sweep) cancels instead of firing again.
    /// `finished` are members of a one-off group that is done (tenant, the definition's `ver`):
    /// their memberships and definitions go too (a definition only if still the version fired).
    pub fn record_items(
        &self,
        rec: &DueRecord,
        end: &RecordEnd,
        finished: &[(String, Option<u64>)],
        plan_at: Millis,
    ) -> Vec<TransactWriteItem> {
        let gid = rec.group.id();
        let mut out = Vec::new();
        match end {
            RecordEnd::Fix { head } => out.extend(self.fix_items(rec, *head, plan_at)),
            RecordEnd::Advance(to) => {
                out.push(self.advance(rec, to, plan_at));
                // A fixed group's progress on its head: a schedule at or before it has fired.
                if rec.stage == Stage::Fixed {
                    out.push(self.head_progress(rec, FIRED, av_s(to)));
                }
            }
            RecordEnd::Done(next) => out.extend(next.iter().map(|n| record_put(&self.table, &self.job, n))),
            RecordEnd::Replaced(next) => {
                out.push(self.record_delete(rec));
                out.push(record_put(&self.table, &self.job, next));
                // A fixed group's last page: every member fired.
                if rec.stage == Stage::Fixed {
                    out.push(self.head_progress(rec, FIRED_ALL, AttributeValue::Bool(true)));
                }
            }
            RecordEnd::Close { expires_s } => {
                out.push(self.record_delete(rec));
                out.push(self.head_mark(&gid, TTL, av_n(*expires_s), None));
            }
            RecordEnd::Pass => {}
            RecordEnd::Retire { joins, successor } => {
                out.push(self.record_delete(rec));
                let d = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(head_key(&self.job, &gid)))
                    .condition_expression("#j = :j")
                    .expression_attribute_names("#j", JOINS)
                    .expression_attribute_values(":j", av_n(*joins))
                    .build()
                    .expect("delete is whole");
                out.push(TransactWriteItem::builder().delete(d).build());
                if let Some(k) = successor.as_ref().map(|n| n.key(&self.job)).filter(|k| *k != rec.key(&self.job)) {
                    let d = Delete::builder().table_name(&self.table).set_key(Some(k)).build();
                    out.push(TransactWriteItem::builder().delete(d.expect("delete is whole")).build());
                }
            }
        }
        for (tenant, ver) in finished {
            out.push(member_delete(&self.table, &self.job, &gid, tenant));
            // A member whose item does not read leaves its group; its definition stays, for an
            // operator to see.
            let Some(ver) = ver else { continue };
            let del = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(def_pk(&self.job, tenant), &rec.group.name)))
                .condition_expression("attribute_not_exists(#ver) OR #ver = :ver")
                .expression_attribute_names("#ver", "ver")
                .expression_attribute_values(":ver", av_n(*ver))
                .build()
                .expect("delete has table and key");
            out.push(TransactWriteItem::builder().delete(del).build());
        }
        out
    }

    /// The move of `rec`'s member cursor from the one the sweep read to `to`, the plan's instant
    /// kept at the first page (a later tick resumes the same plan).
    fn advance(&self, rec: &DueRecord, to: &str, plan_at: Millis) -> TransactWriteItem {
        let (cond, seen) = record_condition(rec);
        let mut values: HashMap<String, AttributeValue> =
            [(":to".to_string(), av_s(to)), (":at".to_string(), av_n(plan_at))].into_iter().collect();
        values.extend(seen.map(|v| (":seen".to_string(), v)));
        let u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(rec.key(&self.job)))
            .update_expression("SET #c = :to, #at = if_not_exists(#at, :at)")
            .condition_expression(cond)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#c", CURSOR)
            .expression_attribute_names("#at", PLAN_AT)
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("update is whole");
        TransactWriteItem::builder().update(u).build()
    }

    /// `rec`'s group fixed ([`RecordEnd::Fix`]), `head` whether it has a head (as read: none, it is
    /// put, firing): the sweep's transaction, fenced, with nothing else.
    pub fn fix_items(&self, rec: &DueRecord, head: bool, plan_at: Millis) -> Vec<TransactWriteItem> {
        let (cond, seen) = record_condition(rec);
        let mut values: HashMap<String, AttributeValue> = [
            (":st".to_string(), av_s(Stage::Fixed.as_attr().expect("fixed has an attribute"))),
            (":at".to_string(), av_n(plan_at)),
        ]
        .into_iter()
        .collect();
        values.extend(seen.map(|v| (":seen".to_string(), v)));
        let u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(rec.key(&self.job)))
            .update_expression("SET #st = :st, #at = if_not_exists(#at, :at) REMOVE #c")
            .condition_expression(cond)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#c", CURSOR)
            .expression_attribute_names("#at", PLAN_AT)
            .expression_attribute_names("#st", STAGE)
            .set_expression_attribute_values(Some(values))
            .build()
            .expect("update is whole");
        let head = match head {
            true => {
                let u = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(head_key(&self.job, &rec.group.id())))
                    .update_expression("SET #f = :due")
                    .condition_expression("attribute_exists(#pk)")
                    .expression_attribute_names("#f", FIRING)
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_values(":due", av_n(rec.due_ms))
                    .build()
                    .expect("update is whole");
                TransactWriteItem::builder().update(u).build()
            }
            false => {
                let mut item = rec.group.head_item(&self.job);
                item.insert(JOINS.to_string(), av_n(0));
                item.insert(FIRING.to_string(), av_n(rec.due_ms));
                put_new_item(&self.table, item)
            }
        };
        vec![TransactWriteItem::builder().update(u).build(), head]
    }

    /// A fixed group's progress on its head (`attr` set to `v`), conditional on the members that
    /// left it being those the sweep read before the page ([`DueRecord::leaves_seen`]): a member
    /// moved, paused or removed since (its page read it) refuses the page, which is read again.
    fn head_progress(&self, rec: &DueRecord, attr: &str, v: AttributeValue) -> TransactWriteItem {
        self.head_mark(&rec.group.id(), attr, v, Some(rec.leaves_seen.unwrap_or(0)))
    }

    /// `attr` set to `v` on group `gid`'s head, only while it is firing (and, with `leaves`,
    /// while its count of members that left is that).
    fn head_mark(&self, gid: &str, attr: &str, v: AttributeValue, leaves: Option<i64>) -> TransactWriteItem {
        let u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(head_key(&self.job, gid)))
            .update_expression("SET #m = :v")
            .expression_attribute_names("#f", FIRING)
            .expression_attribute_names("#m", attr)
            .expression_attribute_values(":v", v);
        let u = match leaves {
            None => u.condition_expression("attribute_exists(#f)"),
            Some(0) => u
                .condition_expression("attribute_exists(#f) AND attribute_not_exists(#lv)")
                .expression_attribute_names("#lv", LEAVES),
            Some(n) => u
                .condition_expression("attribute_exists(#f) AND #lv = :lv")
                .expression_attribute_names("#lv", LEAVES)
                .expression_attribute_values(":lv", av_n(n)),
        };
        TransactWriteItem::builder().update(u.build().expect("update is whole")).build()
    }

    /// `rec`'s delete, at the member cursor the sweep read.
    fn record_delete(&self, rec: &DueRecord) -> TransactWriteItem {
        let (cond, seen) = record_condition(rec);
        let d = Delete::builder()
            .table_name(&self.table)
            .set_key(Some(rec.key(&self.job)))
            .condition_expression(cond)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#c", CURSOR)
            .set_expression_attribute_values(seen.map(|v| [(":seen".to_string(), v)].into_iter().collect()))
            .build()
            .expect("delete is whole");
        TransactWriteItem::builder().delete(d).build()
    }
}

/// The condition on a record the sweep writes: still there, at the member cursor it read.
fn record_condition(rec: &DueRecord) -> (&'static str, Option<aws_sdk_dynamodb::types::AttributeValue>) {
    match &rec.cursor {
        Some(c) => ("attribute_exists(#pk) AND #c = :seen", Some(av_s(c))),
        None => ("attribute_exists(#pk) AND attribute_not_exists(#c)", None),
    }
}
