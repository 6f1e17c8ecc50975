//! The sweep's side of the schedules' store: the due index read by key condition, a group's
//! members a page at a time, its head's count of joins, the writes that move a record on as its
//! fire goes out, and the state item's `sched_next`.

use super::record::{
    cursor_key, due_bound, due_pk, head_key, member_pk, pos_of, DueRecord, Member, CUR, CURSOR_SK, DUE_SHARDS, JOINS,
    WRITES,
};
use super::store::Schedules;
use super::writes::{cursor_move_item, ShardCursor};
use crate::clock::Millis;
use crate::error::DbError;
use crate::item::Item;
use crate::pager::{fetch_page, Cursor, PageError};
use crate::schema::{av_n, av_s, get_i64, key, PK, SK};
use crate::watermark::{watermark_key, SCHED_ADDS, SCHED_NEXT, SCHED_WAKE};
use aws_sdk_dynamodb::types::TransactWriteItem;
use std::convert::Infallible;

/// A page of due records (each, or its item and what is wrong with it), and where the next
/// starts.
pub type DuePage = (Vec<Result<DueRecord, (Item, String)>>, Option<Cursor>);

impl Schedules {
    /// One page of shard `k`'s records due by `now_ms` (strongly consistent), from `start`; each
    /// record, or its item and what is wrong with it; and the cursor to the next page.
    pub async fn due_page(
        &self,
        k: u32,
        now_ms: Millis,
        limit: i32,
        start: Option<&Cursor>,
    ) -> Result<DuePage, PageError<Infallible>> {
        let query = self.partition(due_pk(&self.job, k), Some(due_bound(now_ms)));
        let page = fetch_page(&self.db, &query, start, limit).await?;
        let records =
            page.items.iter().map(|i| DueRecord::from_item(i).map_err(|e| (i.clone(), e.to_string()))).collect();
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

    /// The key of the item at sort key `sk` in shard `k`'s due partition (where a Query resumes).
    pub fn due_key(&self, k: u32, sk: &str) -> Item {
        key(due_pk(&self.job, k), sk)
    }

    /// Shard `k`'s cursor (strongly consistent).
    pub async fn shard_cursor(&self, k: u32) -> Result<ShardCursor, DbError> {
        let item = self.db.get_strong(&self.table, cursor_key(&self.job, k)).await?;
        Ok(ShardCursor {
            cur: item.as_ref().and_then(|i| crate::schema::get_s(i, CUR).map(str::to_string)),
            writes: item.as_ref().and_then(|i| get_i64(i, WRITES)).unwrap_or(0),
        })
    }

    /// The move of shard `k`'s cursor from `seen` (as read) to `to`, for the sweep's transaction:
    /// refused if another sweep moved it, or a writer wrote a record after it since it was read
    /// (that record may sort before `to`: the sweep reads the shard again from `seen`).
    pub fn cursor_move(&self, k: u32, seen: &ShardCursor, to: &str) -> TransactWriteItem {
        cursor_move_item(&self.table, &self.job, k, seen, to)
    }

    /// Shard `k`'s cursor read again after the sweep's move of it from `seen` to `to` was refused,
    /// when the move may go again at once ([`super::writes::move_clear`]: no other sweep moved
    /// it, and writers counted only records past `to`; `known` are the records the move's
    /// transaction handles); `None` when the shard must be read again. The cursor is read before
    /// the range (strongly consistent, paged to its end): a writer that commits after the
    /// cursor's read counts on it, and the next move is refused again.
    pub async fn recount(
        &self,
        k: u32,
        seen: &ShardCursor,
        to: &str,
        known: &std::collections::BTreeSet<String>,
    ) -> Result<Option<ShardCursor>, DbError> {
        let fresh = self.shard_cursor(k).await?;
        if fresh.cur != seen.cur {
            return Ok(None);
        }
        let q = self
            .partition_query(due_pk(&self.job, k))
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":to", av_s(to))
            .projection_expression("#sk");
        let q = match &seen.cur {
            Some(c) => q
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
                .expression_attribute_values(":from", av_s(c)),
            None => q.key_condition_expression("#pk = :pk AND #sk <= :to"),
        };
        let mut in_range = Vec::new();
        let read = crate::pager::for_each_page(&self.db, q, None, 1000, &crate::budget::Unlimited, "recount", |page| {
            in_range.extend(page.items.iter().filter_map(|i| crate::schema::get_s(i, SK)).map(str::to_string));
            // More than the transaction handles, and the cursor's own: a writer's, whatever they are.
            std::future::ready(if in_range.len() > known.len() + 1 { Err(()) } else { Ok(()) })
        })
        .await;
        match read {
            Ok(_) => {}
            Err(PageError::Handler(())) => return Ok(None),
            Err(PageError::Db(d)) => return Err(d),
            Err(PageError::Cursor(c)) => return Err(DbError::Cursor(c)),
        }
        Ok(super::writes::move_clear(seen, &fresh, &in_range, known).then_some(fresh))
    }

    /// Whether the record at `key` is there (strongly consistent).
    pub async fn record_exists(&self, key: Item) -> Result<bool, DbError> {
        Ok(self.db.get_strong(&self.table, key).await?.is_some())
    }

    /// Puts `records` (BatchWriteItem, 25 a request, unprocessed items retried): successors that
    /// depend on their records alone, written before the transaction that moves past those.
    pub async fn put_records(&self, records: &[DueRecord]) -> Result<(), DbError> {
        let puts = records
            .iter()
            .map(|r| {
                let put = aws_sdk_dynamodb::types::PutRequest::builder().set_item(Some(r.to_item(&self.job))).build();
                aws_sdk_dynamodb::types::WriteRequest::builder().put_request(put.expect("put has its item")).build()
            })
            .collect();
        self.db.batch_write_all(&self.table, puts, super::store::BATCH_ROUNDS).await
    }

    /// Deletes the records at `keys`, which the shard cursor has passed (BatchWriteItem, 25 a
    /// request, unprocessed items retried): after the transaction that moved past them, never in
    /// it. A delete lost leaves a record behind the cursor, which nothing reads again.
    pub async fn delete_records(&self, keys: Vec<Item>) -> Result<(), DbError> {
        let deletes = keys
            .into_iter()
            .map(|k| {
                let d = aws_sdk_dynamodb::types::DeleteRequest::builder().set_key(Some(k)).build();
                aws_sdk_dynamodb::types::WriteRequest::builder().delete_request(d.expect("delete has its key")).build()
            })
            .collect();
        self.db.batch_write_all(&self.table, deletes, super::store::BATCH_ROUNDS).await
    }

    /// Where a read of shard `k` after `cursor` starts (`None`: its first record).
    fn start_after(&self, k: u32, cursor: &ShardCursor) -> Result<Option<Cursor>, DbError> {
        cursor
            .cur
            .as_deref()
            .map(|c| Cursor::encode(&key(due_pk(&self.job, k), c)))
            .transpose()
            .map_err(|e| DbError::Invalid(e.to_string()))
    }

    /// The first page of up to `limit` records of shard `k` due by `now_ms` after its `cursor`
    /// ([`Schedules::due_page`] from where the cursor points).
    pub async fn due_page_after(
        &self,
        k: u32,
        cursor: &ShardCursor,
        now_ms: Millis,
        limit: i32,
    ) -> Result<DuePage, DbError> {
        let start = self.start_after(k, cursor)?;
        self.due_page(k, now_ms, limit, start.as_ref()).await.map_err(|e| DbError::from(PageError::<DbError>::widen(e)))
    }

    /// The position of the first record after shard `k`'s `cursor`, due or not: one strongly
    /// consistent Query of one item. A firing tick's first read of a shard: a shard with nothing
    /// due by now is done with it, its earliest record known.
    pub async fn first_after(&self, k: u32, cursor: &ShardCursor) -> Result<Option<Millis>, DbError> {
        let start = self.start_after(k, cursor)?;
        let page =
            fetch_page(&self.db, &self.partition(due_pk(&self.job, k), Some(CURSOR_SK.into())), start.as_ref(), 1)
                .await
                .map_err(|e| DbError::from(PageError::<DbError>::widen(e)))?;
        Ok(page.items.first().and_then(|i| crate::schema::get_s(i, SK)).and_then(pos_of))
    }

    /// Every shard's cursor, in shard order: one strongly consistent BatchGetItem (a cursor not
    /// yet written reads as none).
    pub async fn shard_cursors(&self) -> Result<Vec<ShardCursor>, DbError> {
        let keys = (0..DUE_SHARDS).map(|k| cursor_key(&self.job, k)).collect();
        let items = self.db.batch_get_all(&self.table, keys, true, super::store::BATCH_ROUNDS).await?;
        let mut out = vec![ShardCursor::default(); DUE_SHARDS as usize];
        for i in items {
            let Some(k) = crate::schema::get_s(&i, PK).and_then(super::record::shard_of_pk) else { continue };
            if let Some(c) = out.get_mut(k as usize) {
                *c = ShardCursor {
                    cur: crate::schema::get_s(&i, CUR).map(str::to_string),
                    writes: get_i64(&i, WRITES).unwrap_or(0),
                };
            }
        }
        Ok(out)
    }

    /// The earliest position of any record after its shard's cursor (`cursors`, as the sweep
    /// left them), each shard's first record already `known` where it is (`Some`: read since its
    /// cursor last moved), read for the rest: one strongly consistent Query a shard read, the
    /// shards at once.
    pub async fn earliest_from(
        &self,
        cursors: &[ShardCursor],
        known: &[Option<Option<Millis>>],
    ) -> Result<Option<Millis>, DbError> {
        let none = ShardCursor::default();
        let firsts = (0..DUE_SHARDS).map(|k| {
            let (cursor, first) = (cursors.get(k as usize).unwrap_or(&none), known.get(k as usize).copied().flatten());
            async move {
                match first {
                    Some(f) => Ok(f),
                    None => self.first_after(k, cursor).await,
                }
            }
        });
        let mut best: Option<Millis> = None;
        for f in futures::future::join_all(firsts).await {
            best = best.into_iter().chain(f?).min();
        }
        Ok(best)
    }

    /// The earliest position of any record after its shard's cursor (`cursors`, as the sweep
    /// left them): one strongly consistent Query a shard, one item each, the shards at once.
    pub async fn earliest(&self, cursors: &[ShardCursor]) -> Result<Option<Millis>, DbError> {
        self.earliest_from(cursors, &[]).await
    }

    /// An UpdateItem of the job's state item, to complete.
    pub(super) fn state_update(&self) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.db.client().update_item().table_name(&self.table).set_key(Some(watermark_key(&self.job)))
    }

    /// Claims the wake for `at_ms` before it is armed: refused (`false`) when a wake at or before
    /// it is pending (after `now_ms`), so of two arming at once (a tick and a stream batch, two
    /// batches) the earlier wins, whichever arms last ([`Schedules::wake_claimed`] says which).
    pub async fn claim_wake(&self, at_ms: Millis, now_ms: Millis) -> Result<bool, DbError> {
        let req = self
            .state_update()
            .update_expression("SET #w = :w")
            .condition_expression("attribute_not_exists(#w) OR #w > :w OR #w <= :now")
            .expression_attribute_names("#w", SCHED_WAKE)
            .expression_attribute_values(":w", av_n(at_ms))
            .expression_attribute_values(":now", av_n(now_ms));
        crate::error::condition_held(self.db.update(req).await)
    }

    /// Gives a claim back when its wake could not be armed (only if it is still this claim).
    pub async fn unclaim_wake(&self, at_ms: Millis) -> Result<(), DbError> {
        let req = self
            .state_update()
            .update_expression("REMOVE #w")
            .condition_expression("#w = :w")
            .expression_attribute_names("#w", SCHED_WAKE)
            .expression_attribute_values(":w", av_n(at_ms));
        crate::error::condition_held(self.db.update(req).await).map(|_| ())
    }

    /// The wake claimed now (strongly consistent): read after arming, so that the last to arm
    /// arms the earliest claim again if it was not its own.
    pub async fn wake_claimed(&self) -> Result<Option<Millis>, DbError> {
        let item = self.db.get_strong(&self.table, watermark_key(&self.job)).await?;
        Ok(item.as_ref().and_then(|i| get_i64(i, SCHED_WAKE)))
    }

    /// Sets `sched_next` to `next` (removes it when no record is left), unless a batch of writers'
    /// records was counted since the state item was read (`adds_seen`, [`super::lowering`]): one of
    /// them may be in a shard after this sweep read it, so its lowering stands, and the next tick
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
