//! The one place DynamoDB data-plane calls go through.
//!
//! Why: so that every call is metered (requests, items, capacity units per table, index and
//! operation) and DynamoDB's own limits are enforced here rather than trusted to the server, since
//! the local server accepts requests DynamoDB refuses (batches over 25, filters on key attributes).
//!
//! Callers build requests with the SDK's fluent builders (`db.client().get_item()...`) and pass the
//! builder in, so the SDK's API stays fully available. Each method:
//! 1. asks for `ReturnConsumedCapacity = INDEXES`;
//! 2. when estimating ([`CapacitySource::Estimate`]), asks for the old or new item
//!    (`ReturnValues`, `ReturnValuesOnConditionCheckFailure`) where the caller did not, so the size
//!    rules have their inputs;
//! 3. sends, records, and maps errors to [`DbError`].
//!
//! Estimation limits (documented rather than hidden): an UpdateItem's old item is unknown, so its
//! cost is the new item's (exact unless the update shrank it) and an index write counts as a key
//! change when the update expression names an index key attribute; a delete or condition check
//! inside a batch or transaction, whose item is not returned, counts the one-unit minimum.

use futures::StreamExt;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use aws_sdk_dynamodb::operation::delete_item::{builders::DeleteItemFluentBuilder, DeleteItemError, DeleteItemOutput};
use aws_sdk_dynamodb::operation::get_item::{builders::GetItemFluentBuilder, GetItemOutput};
use aws_sdk_dynamodb::operation::put_item::{builders::PutItemFluentBuilder, PutItemError, PutItemOutput};
use aws_sdk_dynamodb::operation::query::{builders::QueryFluentBuilder, QueryOutput};
use aws_sdk_dynamodb::operation::transact_write_items::{TransactWriteItemsError, TransactWriteItemsOutput};
use aws_sdk_dynamodb::operation::update_item::{builders::UpdateItemFluentBuilder, UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::{
    ConsumedCapacity, ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    WriteRequest,
};
use aws_sdk_dynamodb::Client;

use crate::capacity::{self, Consistency, GsiShape};
use crate::error::{CancelReason, DbError};
use crate::item::Item;
use crate::limits;
use crate::meter::{CapacitySource, Meter, Tally};

/// DynamoDB's limit on items in one BatchWriteItem.
pub const MAX_BATCH_WRITE: usize = crate::limits::MAX_BATCH_WRITE;

/// BatchWriteItem requests of one [`Db::batch_write_all`] round in flight at once: the 200
/// successors of a page of distinct timers are 8 requests, one round trip rather than 8.
pub const BATCH_WRITES_AT_ONCE: usize = 8;
/// DynamoDB's limit on items in one TransactWriteItems.
pub const MAX_TRANSACT_ITEMS: usize = crate::limits::MAX_TRANSACTION_ITEMS;

/// A metered DynamoDB client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Db {
    client: Client,
    meter: Meter,
    gsis: Arc<RwLock<HashMap<String, Vec<GsiShape>>>>,
}

impl Db {
    /// Wraps a client; `meter` receives every call's figures.
    pub fn new(client: Client, meter: Meter) -> Self {
        Self { client, meter, gsis: Default::default() }
    }

    /// The SDK client, for building requests and for control-plane calls (which are not metered).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The meter this client records into.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// Declares a table's GSIs so estimated write costs include index writes.
    pub fn register_gsis(&self, table: &str, shapes: Vec<GsiShape>) {
        self.gsis.write().expect("gsi lock").insert(table.to_string(), shapes);
    }

    fn shapes(&self, table: &str) -> Vec<GsiShape> {
        self.gsis.read().expect("gsi lock").get(table).cloned().unwrap_or_default()
    }

    fn estimating(&self) -> bool {
        self.meter.source() == CapacitySource::Estimate
    }

    /// Records server figures: table units under the table, each index's under the index.
    fn record_server(&self, op: &str, cc: Option<&ConsumedCapacity>, read: bool, mut base: Tally) {
        let Some(cc) = cc else {
            self.meter.record("?", None, op, base);
            return;
        };
        let table = cc.table_name().unwrap_or("?");
        let total = cc.capacity_units().unwrap_or(0.0);
        let table_units = cc.table().and_then(|c| c.capacity_units()).unwrap_or(total);
        let set = |t: &mut Tally, u: f64| if read { t.rcu = u } else { t.wcu = u };
        set(&mut base, table_units);
        self.meter.record(table, None, op, base);
        for (name, c) in cc.global_secondary_indexes().into_iter().flatten() {
            let mut t = Tally::default();
            set(&mut t, c.capacity_units().unwrap_or(0.0));
            self.meter.record(table, Some(name), op, t);
        }
    }

    fn record_error(&self, table: &str, index: Option<&str>, op: &str, err: &DbError) {
        let mut t = Tally { requests: 1, ..Default::default() };
        match err {
            // A failed condition is billed as a write of the existing item (at least one unit).
            DbError::ConditionFailed { item, .. } => {
                t.wcu = capacity::write_units(item.as_deref().map(capacity::item_size), None);
            }
            DbError::TransactionCanceled { .. } => {}
            _ => t.errors = 1,
        }
        self.meter.record(table, index, op, t);
    }

    /// GetItem, metered.
    pub async fn get(&self, req: GetItemFluentBuilder) -> Result<GetItemOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        if let Some(k) = req.get_key() {
            limits::key("GetItem", &table, k)?;
        }
        let c = Consistency::from_flag(*req.get_consistent_read());
        let res = req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await;
        match res {
            Ok(out) => {
                let base = Tally { requests: 1, items_read: u64::from(out.item().is_some()), ..Default::default() };
                if self.estimating() {
                    let rcu = capacity::read_units(out.item().map(capacity::item_size), c);
                    self.meter.record(&table, None, "GetItem", Tally { rcu, ..base });
                } else {
                    self.record_server("GetItem", out.consumed_capacity(), true, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = DbError::from_sdk("GetItem", &table, e);
                self.record_error(&table, None, "GetItem", &err);
                Err(err)
            }
        }
    }

    /// A strongly consistent GetItem of one key: the read that follows a lease acquisition (slot,
    /// checkpoint, intent), where a stale "not yet" would repeat work.
    pub async fn get_strong(&self, table: &str, key: Item) -> Result<Option<Item>, DbError> {
        let out = self.get(self.client.get_item().table_name(table).set_key(Some(key)).consistent_read(true)).await?;
        Ok(out.item)
    }

    /// Query, metered. Refuses a `FilterExpression`: DynamoDB bills what the key condition matches,
    /// so a filter hides cost; the discriminator belongs in the key condition.
    pub async fn query(&self, req: QueryFluentBuilder) -> Result<QueryOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        let index = req.get_index_name().clone();
        if let Some(f) = req.get_filter_expression() {
            return Err(DbError::Invalid(format!(
                "Query on `{table}` with FilterExpression `{f}`: filtered items are billed as if returned; \
                 put the discriminator in the key condition"
            )));
        }
        limits::expression("Query", &table, "key condition", req.get_key_condition_expression().as_deref())?;
        let c = Consistency::from_flag(*req.get_consistent_read());
        let res = req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await;
        match res {
            Ok(out) => {
                let base = Tally { requests: 1, items_read: out.scanned_count().max(0) as u64, ..Default::default() };
                if self.estimating() {
                    let rcu = capacity::query_units(out.items().iter().map(capacity::item_size), c);
                    self.meter.record(&table, index.as_deref(), "Query", Tally { rcu, ..base });
                } else if let Some(idx) = index.as_deref() {
                    // The index carries a Query's cost; record it there.
                    let u = out.consumed_capacity().and_then(|c| c.capacity_units()).unwrap_or(0.0);
                    self.meter.record(&table, Some(idx), "Query", Tally { rcu: u, ..base });
                } else {
                    self.record_server("Query", out.consumed_capacity(), true, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = DbError::from_sdk("Query", &table, e);
                self.record_error(&table, index.as_deref(), "Query", &err);
                Err(err)
            }
        }
    }

    /// BatchGetItem, metered (one table per request; unprocessed keys are the caller's to retry).
    pub async fn batch_get(
        &self,
        req: aws_sdk_dynamodb::operation::batch_get_item::builders::BatchGetItemFluentBuilder,
    ) -> Result<aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemOutput, DbError> {
        let (table, consistent) = req
            .get_request_items()
            .as_ref()
            .and_then(|m| m.iter().next().map(|(t, k)| (t.clone(), k.consistent_read())))
            .unwrap_or_default();
        let c = Consistency::from_flag(consistent);
        let asked = req.get_request_items().as_ref().and_then(|m| m.get(&table)).map_or(0, |k| k.keys().len());
        match req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await {
            Ok(out) => {
                let items: Vec<Item> = out.responses().and_then(|r| r.get(&table)).cloned().unwrap_or_default();
                let base = Tally { requests: 1, items_read: items.len() as u64, ..Default::default() };
                if self.estimating() {
                    // Each item is its own read, rounded up (DynamoDB bills BatchGetItem per item),
                    // and a key that names no item is a read of the minimum, as a GetItem of it is
                    // ("Read consumption", DynamoDB Developer Guide). Unprocessed keys are not read.
                    let unprocessed = out.unprocessed_keys().and_then(|u| u.get(&table)).map_or(0, |k| k.keys().len());
                    let missing = asked.saturating_sub(unprocessed).saturating_sub(items.len());
                    let rcu: f64 =
                        items.iter().map(|i| capacity::read_units(Some(capacity::item_size(i)), c)).sum::<f64>()
                            + missing as f64 * capacity::read_units(None, c);
                    self.meter.record(&table, None, "BatchGetItem", Tally { rcu, ..base });
                } else {
                    self.record_server("BatchGetItem", out.consumed_capacity().first(), true, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = DbError::from_sdk("BatchGetItem", &table, e);
                self.record_error(&table, None, "BatchGetItem", &err);
                Err(err)
            }
        }
    }

    /// One Scan page, metered. No tick ever scans (rule 2): this exists for an operator's listing
    /// of every tenant, suspended ones included ([`crate::tenants::Tenants::list_page`], behind
    /// `tickctl tenants list`), and for the benchmark's reproduction of the `000_*` "before"
    /// design, whose tenant list was one page.
    pub async fn scan_page(
        &self,
        req: aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder,
    ) -> Result<aws_sdk_dynamodb::operation::scan::ScanOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        let c = Consistency::from_flag(*req.get_consistent_read());
        match req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await {
            Ok(out) => {
                let base = Tally { requests: 1, items_read: out.scanned_count().max(0) as u64, ..Default::default() };
                if self.estimating() {
                    let rcu = capacity::query_units(out.items().iter().map(capacity::item_size), c);
                    self.meter.record(&table, None, "Scan", Tally { rcu, ..base });
                } else {
                    self.record_server("Scan", out.consumed_capacity(), true, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = DbError::from_sdk("Scan", &table, e);
                self.record_error(&table, None, "Scan", &err);
                Err(err)
            }
        }
    }

    fn record_write(
        &self,
        op: &str,
        table: &str,
        old: Option<&Item>,
        new: Option<&Item>,
        gsi_key_touched: Option<(&HashSet<String>, &HashSet<String>)>,
    ) {
        let size = |i: Option<&Item>| i.map(capacity::item_size);
        let wcu = capacity::write_units(size(old), size(new));
        self.meter.record(table, None, op, Tally { requests: 1, items_written: 1, wcu, ..Default::default() });
        for shape in self.shapes(table) {
            let units = match gsi_key_touched {
                // Update, one image known. With the new image: a key change is a delete and a put,
                // else one write of the new entry. With the old image (the update shrinks the
                // item): a removed key is one delete, a changed key a delete and a put.
                Some((names, removed)) => {
                    let touches_key = names.iter().any(|n| shape.is_key(n));
                    let removes_key = removed.iter().any(|n| shape.is_key(n));
                    match (new.and_then(|n| shape.entry(n)), old.and_then(|o| shape.entry(o))) {
                        (Some(e), _) => {
                            let u = capacity::write_units(None, Some(capacity::item_size(&e)));
                            if touches_key {
                                2.0 * u
                            } else {
                                u
                            }
                        }
                        (None, Some(e)) => {
                            let u = capacity::write_units(None, Some(capacity::item_size(&e)));
                            match (touches_key, removes_key) {
                                (_, true) => u,
                                (true, false) => 2.0 * u,
                                (false, false) => u,
                            }
                        }
                        (None, None) if touches_key && new.is_some() => 1.0,
                        (None, None) if touches_key && !removes_key => 1.0,
                        (None, None) => 0.0,
                    }
                }
                None => shape.write_units(old, new),
            };
            if units > 0.0 {
                self.meter.record(table, Some(&shape.name), op, Tally { wcu: units, ..Default::default() });
            }
        }
    }

    /// PutItem, metered. A failed condition is [`DbError::ConditionFailed`] with the existing item
    /// when it was asked for.
    pub async fn put(&self, mut req: PutItemFluentBuilder) -> Result<PutItemOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        limits::item("PutItem", &table, req.get_item().as_ref().unwrap_or(&Item::new()))?;
        limits::expression("PutItem", &table, "condition", req.get_condition_expression().as_deref())?;
        let est = self.estimating();
        let new = if est { req.get_item().clone() } else { None };
        if est && req.get_return_values().is_none() {
            req = req.return_values(ReturnValue::AllOld);
        }
        if est && req.get_return_values_on_condition_check_failure().is_none() {
            req = req.return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        }
        match req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await {
            Ok(out) => {
                if est {
                    self.record_write("PutItem", &table, out.attributes(), new.as_ref(), None);
                } else {
                    let base = Tally { requests: 1, items_written: 1, ..Default::default() };
                    self.record_server("PutItem", out.consumed_capacity(), false, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = match e.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => {
                        DbError::ConditionFailed { table: table.clone(), item: c.item().cloned().map(Box::new) }
                    }
                    _ => DbError::from_sdk("PutItem", &table, e),
                };
                self.record_error(&table, None, "PutItem", &err);
                Err(err)
            }
        }
    }

    /// PutItem of `item` only if its key is new ([`crate::schema::NEW_ITEM`]): `true` when
    /// written, `false` when the key existed (nothing changed). The one "insert once" of the
    /// project: an enqueue, a tenant added, a handler's effect row.
    pub async fn put_new(&self, table: &str, item: Item) -> Result<bool, DbError> {
        let req = self
            .client
            .put_item()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression(crate::schema::NEW_ITEM)
            .expression_attribute_names("#pk", crate::schema::PK);
        crate::error::condition_held(self.put(req).await)
    }

    /// UpdateItem, metered.
    pub async fn update(&self, mut req: UpdateItemFluentBuilder) -> Result<UpdateItemOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        limits::key("UpdateItem", &table, req.get_key().as_ref().unwrap_or(&Item::new()))?;
        limits::expression("UpdateItem", &table, "update", req.get_update_expression().as_deref())?;
        limits::expression("UpdateItem", &table, "condition", req.get_condition_expression().as_deref())?;
        let est = self.estimating();
        let names: HashSet<String> = referenced_names(
            req.get_update_expression().as_deref().unwrap_or(""),
            req.get_expression_attribute_names().as_ref(),
        );
        let asked_new = matches!(req.get_return_values(), Some(ReturnValue::AllNew));
        // DynamoDB bills an update on the larger of the item before and after. An update that
        // removes attributes (a finished queue item dropping its payload) shrinks the item: size
        // it by the old image; any other grows it or keeps it: the new one.
        let expr = req.get_update_expression().clone().unwrap_or_default();
        let shrinks = expr.contains("REMOVE");
        let removed: HashSet<String> = match expr.split_once("REMOVE") {
            Some((_, tail)) => referenced_names(
                tail.split(" SET ").next().unwrap_or(tail),
                req.get_expression_attribute_names().as_ref(),
            ),
            None => HashSet::new(),
        };
        if est && req.get_return_values().is_none() {
            req = req.return_values(if shrinks { ReturnValue::AllOld } else { ReturnValue::AllNew });
        }
        if est && req.get_return_values_on_condition_check_failure().is_none() {
            req = req.return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        }
        let est_new = est && (asked_new || matches!(req.get_return_values(), Some(ReturnValue::AllNew)));
        let req_return_old = matches!(req.get_return_values(), Some(ReturnValue::AllOld));
        match req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await {
            Ok(out) => {
                if est {
                    let new = if est_new { out.attributes().cloned() } else { None };
                    let old = if req_return_old { out.attributes().cloned() } else { None };
                    self.record_write("UpdateItem", &table, old.as_ref(), new.as_ref(), Some((&names, &removed)));
                } else {
                    let base = Tally { requests: 1, items_written: 1, ..Default::default() };
                    self.record_server("UpdateItem", out.consumed_capacity(), false, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = match e.as_service_error() {
                    Some(UpdateItemError::ConditionalCheckFailedException(c)) => {
                        DbError::ConditionFailed { table: table.clone(), item: c.item().cloned().map(Box::new) }
                    }
                    _ => DbError::from_sdk("UpdateItem", &table, e),
                };
                self.record_error(&table, None, "UpdateItem", &err);
                Err(err)
            }
        }
    }

    /// DeleteItem, metered.
    pub async fn delete(&self, mut req: DeleteItemFluentBuilder) -> Result<DeleteItemOutput, DbError> {
        let table = req.get_table_name().clone().unwrap_or_default();
        limits::key("DeleteItem", &table, req.get_key().as_ref().unwrap_or(&Item::new()))?;
        limits::expression("DeleteItem", &table, "condition", req.get_condition_expression().as_deref())?;
        let est = self.estimating();
        if est && req.get_return_values().is_none() {
            req = req.return_values(ReturnValue::AllOld);
        }
        if est && req.get_return_values_on_condition_check_failure().is_none() {
            req = req.return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        }
        match req.return_consumed_capacity(ReturnConsumedCapacity::Indexes).send().await {
            Ok(out) => {
                if est {
                    self.record_write("DeleteItem", &table, out.attributes(), None, None);
                } else {
                    let base = Tally { requests: 1, items_written: 1, ..Default::default() };
                    self.record_server("DeleteItem", out.consumed_capacity(), false, base);
                }
                Ok(out)
            }
            Err(e) => {
                let err = match e.as_service_error() {
                    Some(DeleteItemError::ConditionalCheckFailedException(c)) => {
                        DbError::ConditionFailed { table: table.clone(), item: c.item().cloned().map(Box::new) }
                    }
                    _ => DbError::from_sdk("DeleteItem", &table, e),
                };
                self.record_error(&table, None, "DeleteItem", &err);
                Err(err)
            }
        }
    }

    /// One BatchWriteItem of at most 25 requests on one table; returns the unprocessed requests.
    pub async fn batch_write_once(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
    ) -> Result<Vec<WriteRequest>, DbError> {
        limits::batch_write(table, &requests)?;
        if requests.is_empty() {
            return Ok(vec![]);
        }
        let sent = requests.len();
        let est_units: f64 = requests
            .iter()
            .map(|r| match r.put_request() {
                Some(p) => capacity::write_units(None, Some(capacity::item_size(p.item()))),
                None => 1.0,
            })
            .sum();
        let res = self
            .client
            .batch_write_item()
            .request_items(table, requests)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match res {
            Ok(out) => {
                let unprocessed: Vec<WriteRequest> =
                    out.unprocessed_items().and_then(|m| m.get(table)).cloned().unwrap_or_default();
                let written = (sent - unprocessed.len()) as u64;
                let base = Tally { requests: 1, items_written: written, ..Default::default() };
                if self.estimating() {
                    let share = est_units * written as f64 / sent as f64;
                    self.meter.record(table, None, "BatchWriteItem", Tally { wcu: share, ..base });
                } else {
                    self.record_server("BatchWriteItem", out.consumed_capacity().first(), false, base);
                }
                Ok(unprocessed)
            }
            Err(e) => {
                let err = DbError::from_sdk("BatchWriteItem", table, e);
                self.record_error(table, None, "BatchWriteItem", &err);
                Err(err)
            }
        }
    }

    /// Reads every key of `table` (at most once each), 100 keys a BatchGetItem, retrying
    /// `UnprocessedKeys` with jittered exponential backoff until none remain or `max_rounds`
    /// passes leave some. The items come back in no particular order.
    pub async fn batch_get_all(
        &self,
        table: &str,
        keys: Vec<Item>,
        consistent: bool,
        max_rounds: u32,
    ) -> Result<Vec<Item>, DbError> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut pending = chunk.to_vec();
            let mut rounds = 0u32;
            while !pending.is_empty() {
                let ka = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
                    .set_keys(Some(std::mem::take(&mut pending)))
                    .consistent_read(consistent)
                    .build()
                    .expect("keys are set");
                let res = self.batch_get(self.client.batch_get_item().request_items(table, ka)).await?;
                out.extend(res.responses().and_then(|r| r.get(table)).cloned().unwrap_or_default());
                pending =
                    res.unprocessed_keys().and_then(|u| u.get(table)).map(|k| k.keys().to_vec()).unwrap_or_default();
                if pending.is_empty() {
                    break;
                }
                rounds += 1;
                unprocessed_round("BatchGetItem", table, pending.len(), rounds, max_rounds).await?;
            }
        }
        Ok(out)
    }

    /// Writes every request, in batches of 25, retrying `UnprocessedItems` with jittered
    /// exponential backoff until none remain or `max_rounds` passes fail to make progress.
    pub async fn batch_write_all(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
        max_rounds: u32,
    ) -> Result<(), DbError> {
        let mut pending: Vec<WriteRequest> = requests;
        let mut stalled = 0u32;
        while !pending.is_empty() {
            let mut next = Vec::new();
            // The requests of a round at once: each is its own items', and unprocessed ones are
            // gathered for the next round whichever request returned them.
            let chunks: Vec<Vec<WriteRequest>> = pending.chunks(MAX_BATCH_WRITE).map(<[_]>::to_vec).collect();
            let mut sends = Vec::with_capacity(chunks.len());
            for chunk in chunks {
                sends.push(self.batch_write_once(table, chunk));
            }
            let rounds: Vec<_> = futures::stream::iter(sends).buffered(BATCH_WRITES_AT_ONCE).collect().await;
            for r in rounds {
                next.extend(r?);
            }
            if next.is_empty() {
                break;
            }
            stalled += 1;
            unprocessed_round("BatchWriteItem", table, next.len(), stalled, max_rounds).await?;
            pending = next;
        }
        Ok(())
    }

    /// TransactWriteItems, metered; a cancellation carries one reason per item.
    pub async fn transact_write(&self, items: Vec<TransactWriteItem>) -> Result<TransactWriteItemsOutput, DbError> {
        limits::transaction(&items)?;
        // Estimated cost per table: 2 x each item's write units (puts are sized, the rest minimum);
        // a put's index entries at the standard rate (index upkeep is not part of the two-phase
        // commit).
        let mut per_table: Vec<(String, f64, u64)> = Vec::new();
        let mut per_index: Vec<(String, String, f64)> = Vec::new();
        for it in &items {
            if let Some(p) = it.put() {
                for shape in self.shapes(p.table_name()) {
                    let u = shape.write_units(None, Some(p.item()));
                    if u > 0.0 {
                        per_index.push((p.table_name().to_string(), shape.name.clone(), u));
                    }
                }
            }
            let (table, units, writes) = if let Some(p) = it.put() {
                (p.table_name(), capacity::write_units(None, Some(capacity::item_size(p.item()))), 1)
            } else if let Some(u) = it.update() {
                (u.table_name(), 1.0, 1)
            } else if let Some(d) = it.delete() {
                (d.table_name(), 1.0, 1)
            } else if let Some(c) = it.condition_check() {
                (c.table_name(), 1.0, 0)
            } else {
                continue;
            };
            match per_table.iter_mut().find(|(t, _, _)| t == table) {
                Some(e) => {
                    e.1 += capacity::transactional(units);
                    e.2 += writes;
                }
                None => per_table.push((table.to_string(), capacity::transactional(units), writes)),
            }
        }
        let first = per_table.first().map(|t| t.0.clone()).unwrap_or_default();
        let res = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        match res {
            Ok(out) => {
                if self.estimating() {
                    for (i, (table, wcu, writes)) in per_table.iter().enumerate() {
                        let t = Tally {
                            requests: u64::from(i == 0),
                            items_written: *writes,
                            wcu: *wcu,
                            ..Default::default()
                        };
                        self.meter.record(table, None, "TransactWriteItems", t);
                    }
                    for (table, index, wcu) in &per_index {
                        let t = Tally { wcu: *wcu, ..Default::default() };
                        self.meter.record(table, Some(index), "TransactWriteItems", t);
                    }
                } else {
                    for (i, cc) in out.consumed_capacity().iter().enumerate() {
                        let base = Tally { requests: u64::from(i == 0), ..Default::default() };
                        self.record_server("TransactWriteItems", Some(cc), false, base);
                    }
                }
                Ok(out)
            }
            Err(e) => {
                let err = match e.as_service_error() {
                    Some(TransactWriteItemsError::TransactionCanceledException(c)) => DbError::TransactionCanceled {
                        reasons: c
                            .cancellation_reasons()
                            .iter()
                            .map(|r| CancelReason { code: r.code().map(str::to_string), item: r.item().cloned() })
                            .collect(),
                    },
                    _ => DbError::from_sdk("TransactWriteItems", &first, e),
                };
                self.record_error(&first, None, "TransactWriteItems", &err);
                Err(err)
            }
        }
    }
}

/// Attribute names an expression refers to, through `#placeholders` or directly.
fn referenced_names(expr: &str, names: Option<&HashMap<String, String>>) -> HashSet<String> {
    let mut out: HashSet<String> = HashSet::new();
    for tok in expr.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '#')) {
        if tok.is_empty() {
            continue;
        }
        if tok.starts_with('#') {
            if let Some(real) = names.and_then(|n| n.get(tok)) {
                out.insert(real.clone());
            }
        } else {
            out.insert(tok.to_string());
        }
    }
    out
}

/// After `round` passes of a batch operation left `left` items unprocessed: an error once past
/// `max_rounds`, else a jittered exponential wait (50 ms doubling, capped at 64 times) before the
/// next pass. The one rule of both batch loops.
async fn unprocessed_round(
    op: &'static str,
    table: &str,
    left: usize,
    round: u32,
    max_rounds: u32,
) -> Result<(), DbError> {
    if round > max_rounds {
        return Err(DbError::Unprocessed { op, table: table.to_string(), left, rounds: max_rounds });
    }
    let cap = 50u64.saturating_mul(1 << round.min(6));
    tokio::time::sleep(Duration::from_millis(fastrand::u64(0..=cap))).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_names_resolve_placeholders() {
        let names = HashMap::from([("#v".to_string(), "visible_at".to_string())]);
        let got = referenced_names("SET #v = :now, owner = :o REMOVE shard", Some(&names));
        assert!(got.contains("visible_at") && got.contains("owner") && got.contains("shard"));
        assert!(!got.contains("#v"));
    }
}
