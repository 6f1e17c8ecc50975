//! The sweep's side of the schedules' store: the due index read by key condition, the records'
//! definitions, the writes that replace fired records, and the state item's `sched_next`.

use std::collections::HashMap;

use super::record::{def_pk, due_bound, due_pk, DueRecord, Schedule, DUE_SHARDS};
use super::store::{key_pair, Schedules, BATCH_ROUNDS};
use crate::clock::Millis;
use crate::error::DbError;
use crate::item::Item;
use crate::pager::{fetch_page, Cursor, PageError};
use crate::schema::{av_n, key, PK, SK};
use crate::watermark::{watermark_key, SCHED_ADDS, SCHED_NEXT, SCHED_WAKE};
use std::convert::Infallible;

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

    /// The definitions of `records`, by (tenant, name) (eventually consistent BatchGetItem, 100
    /// keys a request, unprocessed keys retried).
    pub async fn definitions(
        &self,
        records: &[&DueRecord],
    ) -> Result<HashMap<(String, String), Result<Schedule, String>>, DbError> {
        let mut out = HashMap::new();
        let mut keys: Vec<Item> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for r in records {
            if seen.insert((r.tenant.clone(), r.name.clone())) {
                keys.push(key(def_pk(&self.job, &r.tenant), &r.name));
            }
        }
        // Strongly consistent: a definition read a moment stale (just added, changed or resumed)
        // would drop its new record as another's.
        for item in self.db.batch_get_all(&self.table, keys, true, BATCH_ROUNDS).await? {
            // Named by its key, so that one that does not read is isolated, not taken for a
            // schedule removed.
            let prefix = def_pk(&self.job, "");
            let tenant = crate::schema::get_s(&item, PK).and_then(|p| p.strip_prefix(prefix.as_str()));
            let (Some(tenant), Some(name)) = (tenant, crate::schema::get_s(&item, SK)) else { continue };
            let s = Schedule::from_item(&item).map_err(|e| e.to_string());
            out.insert((tenant.to_string(), name.to_string()), s);
        }
        Ok(out)
    }

    /// The writes that replace fired records, for the sweep's transaction with the fires' queue
    /// items (all or nothing: a fire is enqueued exactly when its record moves on): each
    /// successor put, each fired record deleted (only if still there: another writer that moved
    /// it cancels the transaction), each finished one-off's definition deleted (only if still the
    /// version fired: a one-off added again under its name meanwhile stays).
    pub fn replace_items(
        &self,
        next: &[DueRecord],
        done: &[Item],
        finished: &[(String, String, u64)],
    ) -> Vec<aws_sdk_dynamodb::types::TransactWriteItem> {
        use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
        // A successor can have the key of the record it replaces (a record recomputed to the same
        // instant): it is put, not deleted, and a transaction may not name a key twice (nor two
        // successors one key).
        let mut put_keys = std::collections::HashSet::new();
        let next: Vec<&DueRecord> = next.iter().filter(|r| put_keys.insert(key_pair(&r.key(&self.job)))).collect();
        let mut out: Vec<TransactWriteItem> = next
            .iter()
            .map(|r| {
                let put = Put::builder().table_name(&self.table).set_item(Some(r.to_item(&self.job))).build();
                TransactWriteItem::builder().put(put.expect("put has table and item")).build()
            })
            .collect();
        out.extend(done.iter().filter(|k| !put_keys.contains(&key_pair(k))).map(|k| {
            let del = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(k.clone()))
                .condition_expression("attribute_exists(#pk)")
                .expression_attribute_names("#pk", PK)
                .build()
                .expect("delete has table and key");
            TransactWriteItem::builder().delete(del).build()
        }));
        out.extend(finished.iter().map(|(t, n, ver)| {
            let del = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(def_pk(&self.job, t), n)))
                .condition_expression("attribute_not_exists(#ver) OR #ver = :ver")
                .expression_attribute_names("#ver", "ver")
                .expression_attribute_values(":ver", av_n(*ver))
                .build()
                .expect("delete has table and key");
            TransactWriteItem::builder().delete(del).build()
        }));
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
