//! The sweep's side of the schedules' store: the due index read by key condition, a group's
//! members a page at a time, its head's count of joins, the writes that move a record on as its
//! fire goes out, and the state item's `sched_next`.

use super::record::{def_pk, due_bound, due_pk, head_key, member_pk, DueRecord, Member, CURSOR, DUE_SHARDS, JOINS};
use super::store::{member_delete, record_put, Schedules};
use crate::clock::Millis;
use crate::error::DbError;
use crate::item::Item;
use crate::pager::{fetch_page, Cursor, PageError};
use crate::schema::{av_n, av_s, get_i64, key, PK, SK};
use crate::watermark::{watermark_key, SCHED_ADDS, SCHED_NEXT, SCHED_WAKE};
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};
use std::convert::Infallible;

/// How a record's fire of one page of members ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordEnd {
    /// More members follow: the record's cursor moves to this member.
    Advance(String),
    /// Every member done: the record is replaced by its successor (none: deleted).
    Replace(Option<DueRecord>),
    /// The group is done (a one-off fired) or found empty: its record and head (at the `joins`
    /// read before its members) are deleted.
    Retire(u64),
}

impl Schedules {
    /// One page of shard `k`'s records due by `now_ms` (strongly consistent), from `start`; each
    /// record, or its key and what is wrong with it; and the cursor to the next page.
    pub async fn due_page(
        &self,
        k: u32,
        now_ms: Millis,
        limit: i32,
        start: Option<&Cursor>,
    ) -> Result<(Vec<Result<DueRecord, (Item, String)>>, Option<Cursor>), PageError<Infallible>> {
        let query = self.partition(due_pk(&self.job, k), Some(due_bound(now_ms)));
        let page = fetch_page(&self.db, &query, start, limit).await?;
        let records = page
            .items
            .iter()
            .map(|i| {
                DueRecord::from_item(i).map_err(|e| {
                    let k: Item = [PK, SK].iter().filter_map(|a| Some((a.to_string(), i.get(*a)?.clone()))).collect();
                    (k, e.to_string())
                })
            })
            .collect();
        Ok((records, page.next))
    }

    /// Up to `limit` members of group `gid` after member `after` (strongly consistent: a member
    /// just joined is seen): each member, or its tenant and what is wrong with it; and whether
    /// more follow.
    pub async fn members_page(
        &self,
        gid: &str,
        after: Option<&str>,
        limit: i32,
    ) -> Result<(Vec<Result<Member, (String, String)>>, bool), PageError<Infallible>> {
        let query = self.partition(member_pk(&self.job, gid), None);
        let start = after.map(|t| Cursor::encode(&key(member_pk(&self.job, gid), t))).transpose()?;
        let page = fetch_page(&self.db, &query, start.as_ref(), limit).await?;
        let members = page
            .items
            .iter()
            .map(|i| {
                Member::from_item(i)
                    .map_err(|e| (crate::schema::get_s(i, SK).unwrap_or_default().to_string(), e.to_string()))
            })
            .collect();
        Ok((members, page.next.is_some()))
    }

    /// Group `gid`'s count of joins (strongly consistent); `None` when it has no head.
    pub async fn head_joins(&self, gid: &str) -> Result<Option<u64>, DbError> {
        let item = self.db.get_strong(&self.table, head_key(&self.job, gid)).await?;
        Ok(item.map(|i| get_i64(&i, JOINS).unwrap_or(0).max(0) as u64))
    }

    /// The writes of one page of `rec`'s fire, for the sweep's transaction with the page's queue
    /// items (all or nothing: the members' fires are queued exactly when the record moves past
    /// them). Every write to the record is conditional on the cursor the sweep read, so a page
    /// written twice (a retry after a lost answer, another sweep) cancels instead of firing again.
    /// `finished` are members of a one-off group that is done (tenant, the definition's `ver`):
    /// their memberships and definitions go too (a definition only if still the version fired).
    pub fn record_items(&self, rec: &DueRecord, end: &RecordEnd, finished: &[(String, u64)]) -> Vec<TransactWriteItem> {
        let gid = rec.group.id();
        let (cond, mut names, mut values) = match &rec.cursor {
            Some(c) => {
                ("attribute_exists(#pk) AND #c = :seen", vec![("#pk", PK), ("#c", CURSOR)], vec![(":seen", av_s(c))])
            }
            None => ("attribute_exists(#pk) AND attribute_not_exists(#c)", vec![("#pk", PK), ("#c", CURSOR)], vec![]),
        };
        let mut out = Vec::new();
        match end {
            RecordEnd::Advance(to) => {
                values.push((":to", av_s(to)));
                let mut u = Update::builder()
                    .table_name(&self.table)
                    .set_key(Some(rec.key(&self.job)))
                    .update_expression("SET #c = :to")
                    .condition_expression(cond);
                for (k, v) in names.drain(..) {
                    u = u.expression_attribute_names(k, v);
                }
                for (k, v) in values.drain(..) {
                    u = u.expression_attribute_values(k, v);
                }
                out.push(TransactWriteItem::builder().update(u.build().expect("update is whole")).build());
            }
            RecordEnd::Replace(_) | RecordEnd::Retire(_) => {
                let next = match end {
                    RecordEnd::Replace(n) => n.as_ref(),
                    _ => None,
                };
                // A successor with the record's own key (recomputed to the same instant) replaces
                // it by its put alone: a transaction names a key once.
                if next.is_none_or(|n| n.key(&self.job) != rec.key(&self.job)) {
                    let mut d = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(rec.key(&self.job)))
                        .condition_expression(cond);
                    for (k, v) in names.drain(..) {
                        d = d.expression_attribute_names(k, v);
                    }
                    for (k, v) in values.drain(..) {
                        d = d.expression_attribute_values(k, v);
                    }
                    out.push(TransactWriteItem::builder().delete(d.build().expect("delete is whole")).build());
                }
                out.extend(next.map(|n| record_put(&self.table, &self.job, n)));
                if let RecordEnd::Retire(joins) = end {
                    let d = Delete::builder()
                        .table_name(&self.table)
                        .set_key(Some(head_key(&self.job, &gid)))
                        .condition_expression("#j = :j")
                        .expression_attribute_names("#j", JOINS)
                        .expression_attribute_values(":j", av_n(*joins))
                        .build()
                        .expect("delete is whole");
                    out.push(TransactWriteItem::builder().delete(d).build());
                }
            }
        }
        for (tenant, ver) in finished {
            out.push(member_delete(&self.table, &self.job, &gid, tenant));
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

    /// The earliest due instant of any record (one strongly consistent Query a shard, one item
    /// each).
    pub async fn earliest(&self) -> Result<Option<Millis>, DbError> {
        let mut best: Option<Millis> = None;
        for k in 0..DUE_SHARDS {
            let page = fetch_page(&self.db, &self.partition(due_pk(&self.job, k), None), None, 1)
                .await
                .map_err(|e| DbError::from(PageError::<DbError>::widen(e)))?;
            let first = page
                .items
                .first()
                .and_then(|i| crate::schema::get_s(i, SK))
                .and_then(|sk| sk.split_once('#').and_then(|(ms, _)| ms.parse::<Millis>().ok()));
            if let Some(f) = first {
                best = Some(best.map_or(f, |b| b.min(f)));
            }
        }
        Ok(best)
    }

    /// An UpdateItem of the job's state item, to complete.
    fn state_update(&self) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.db.client().update_item().table_name(&self.table).set_key(Some(watermark_key(&self.job)))
    }

    /// Records the instant the sweep set its wake for (unconditional: the last one set stands).
    pub async fn note_wake(&self, at_ms: Millis) -> Result<(), DbError> {
        let req = self
            .state_update()
            .update_expression("SET #w = :w")
            .expression_attribute_names("#w", SCHED_WAKE)
            .expression_attribute_values(":w", av_n(at_ms));
        self.db.update(req).await.map(|_| ())
    }

    /// Sets `sched_next` to `next` (removes it when no record is left), unless an add came since
    /// the state item was read (`adds_seen`): that add's own lowering stands, and the next tick
    /// looks again.
    pub async fn set_next(&self, next: Option<Millis>, adds_seen: i64) -> Result<bool, DbError> {
        let req = self
            .state_update()
            .expression_attribute_names("#n", SCHED_NEXT)
            .expression_attribute_names("#a", SCHED_ADDS)
            .expression_attribute_values(":seen", av_n(adds_seen));
        let req = match next {
            Some(n) => req.update_expression("SET #n = :n").expression_attribute_values(":n", av_n(n)),
            None => req.update_expression("REMOVE #n"),
        };
        let req = if adds_seen == 0 {
            req.condition_expression("attribute_not_exists(#a) OR #a = :seen")
        } else {
            req.condition_expression("#a = :seen")
        };
        crate::error::condition_held(self.db.update(req).await)
    }
}
