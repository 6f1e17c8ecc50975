//! How a record's page of fires ends, and that end's writes in the sweep's transaction: the
//! member cursor moved (a one-off's group fixed with it), the record replaced or passed, or its
//! group retired.

use super::record::{def_pk, head_key, DueRecord, Stage, CURSOR, FIRING, JOINS, PLAN_AT, STAGE};
use super::store::Schedules;
use super::writes::{member_delete, record_put};
use crate::clock::Millis;
use crate::schema::{av_n, av_s, key, PK};
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};

/// How a record's fire of one page of members ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordEnd {
    /// More members follow: the record's member cursor moves to this member.
    Advance(String),
    /// A one-off group's first page, more members following: the record's member cursor moves to
    /// this member and its stage to [`Stage::Fixed`], and the head is marked `firing` (when it
    /// has one) at the joins read before the page: a member that joined after that read refuses
    /// the transaction, and every later join goes to the group's next generation.
    Fix {
        /// The last member of the page.
        last: String,
        /// The head's joins, as read before the page; `None`: no head.
        joins: Option<u64>,
    },
    /// Every member done: the shard's cursor moves past the record (in the same transaction), and
    /// this successor is put with it (one written before the transaction is not here).
    Done(Option<DueRecord>),
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
        let (cond, seen) = record_condition(rec);
        let mut out = Vec::new();
        match end {
            RecordEnd::Fix { last, joins } => {
                out.push(self.advance(rec, last, plan_at, true));
                if let Some(j) = joins {
                    let u = Update::builder()
                        .table_name(&self.table)
                        .set_key(Some(head_key(&self.job, &gid)))
                        .update_expression("SET #f = :due")
                        .condition_expression("#j = :j")
                        .expression_attribute_names("#f", FIRING)
                        .expression_attribute_names("#j", JOINS)
                        .expression_attribute_values(":due", av_n(rec.due_ms))
                        .expression_attribute_values(":j", av_n(*j))
                        .build()
                        .expect("update is whole");
                    out.push(TransactWriteItem::builder().update(u).build());
                }
            }
            RecordEnd::Advance(to) => out.push(self.advance(rec, to, plan_at, false)),
            RecordEnd::Done(next) => out.extend(next.iter().map(|n| record_put(&self.table, &self.job, n))),
            RecordEnd::Pass => {}
            RecordEnd::Retire { joins, successor } => {
                let d = Delete::builder()
                    .table_name(&self.table)
                    .set_key(Some(rec.key(&self.job)))
                    .condition_expression(cond)
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_names("#c", CURSOR)
                    .set_expression_attribute_values(seen.map(|v| [(":seen".to_string(), v)].into_iter().collect()))
                    .build()
                    .expect("delete is whole");
                out.push(TransactWriteItem::builder().delete(d).build());
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
    /// kept at the first page (a later tick resumes the same plan); `fix`: its stage set to
    /// [`Stage::Fixed`] with it.
    fn advance(&self, rec: &DueRecord, to: &str, plan_at: Millis, fix: bool) -> TransactWriteItem {
        let (cond, seen) = record_condition(rec);
        let mut values: std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue> =
            [(":to".to_string(), av_s(to)), (":at".to_string(), av_n(plan_at))].into_iter().collect();
        values.extend(seen.map(|v| (":seen".to_string(), v)));
        let mut set = "SET #c = :to, #at = if_not_exists(#at, :at)".to_string();
        let mut u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(rec.key(&self.job)))
            .condition_expression(cond)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#c", CURSOR)
            .expression_attribute_names("#at", PLAN_AT);
        if fix {
            set.push_str(", #st = :st");
            u = u.expression_attribute_names("#st", STAGE);
            values.insert(":st".to_string(), av_s(Stage::Fixed.as_attr().expect("fixed has an attribute")));
        }
        let u =
            u.update_expression(set).set_expression_attribute_values(Some(values)).build().expect("update is whole");
        TransactWriteItem::builder().update(u).build()
    }
}

/// The condition on a record the sweep writes: still there, at the member cursor it read.
fn record_condition(rec: &DueRecord) -> (&'static str, Option<aws_sdk_dynamodb::types::AttributeValue>) {
    match &rec.cursor {
        Some(c) => ("attribute_exists(#pk) AND #c = :seen", Some(av_s(c))),
        None => ("attribute_exists(#pk) AND attribute_not_exists(#c)", None),
    }
}
