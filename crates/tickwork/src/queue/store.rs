//! The queue on one table: enqueue (insert-once), poll (a key condition on the ready index, so an
//! empty poll is one cheap read), pause, and reading an item as stored.

use aws_sdk_dynamodb::types::AttributeValue;
use futures::stream::{self, StreamExt};

use crate::clock::{Millis, SharedClock};
use crate::db::Db;
use crate::item::Item;
use crate::queue::config::QueueConfig;
use crate::queue::error::QueueError;
use crate::queue::item::{Enqueue, EnqueueCounts, NewItem};
use crate::queue::schema::*;
use crate::schema::{av_n, av_s, get_i64, get_s, PK};

/// A ready item found by a poll (keys only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Id.
    pub id: String,
    /// Its `visible_at` as the index saw it.
    pub visible_at: Millis,
}

/// The queue on one table.
#[derive(Debug, Clone)]
pub struct Queue {
    pub(super) db: Db,
    pub(super) table: String,
    pub(super) cfg: QueueConfig,
    pub(super) clock: SharedClock,
    pub(super) poll_shards: u32,
}

impl Queue {
    /// The queue in `table`.
    pub fn new(db: Db, table: impl Into<String>, cfg: QueueConfig, clock: SharedClock) -> Self {
        let poll_shards = cfg.shards;
        Self { db, table: table.into(), cfg, clock, poll_shards }
    }

    /// Polls `n` ready shards (at least the configured count): the largest count any producer
    /// ever wrote with, from the [`crate::shard::ShardRegistry`], so a lowered setting strands no
    /// item.
    pub fn with_poll_shards(mut self, n: u32) -> Self {
        self.poll_shards = n.max(self.cfg.shards);
        self
    }

    /// Ready shards to poll.
    pub fn poll_shards(&self) -> u32 {
        self.poll_shards
    }

    /// Settings.
    pub fn config(&self) -> &QueueConfig {
        &self.cfg
    }

    /// Table name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The metered client.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The clock claims and settles are timed by.
    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Enqueues one item unless its id exists.
    pub async fn enqueue(&self, item: &NewItem) -> Result<Enqueue, QueueError> {
        item.validate()?;
        Ok(match self.db.put_new(&self.table, item.item(self.cfg.shards, self.clock.now_ms())).await? {
            true => Enqueue::Enqueued,
            false => Enqueue::Exists,
        })
    }

    /// Enqueues many items with `concurrency` requests in flight. Conditional puts (1 WCU each)
    /// rather than BatchWriteItem, which cannot carry the "only if new" condition, or a
    /// transaction, which would bill twice.
    pub async fn enqueue_many(&self, items: &[NewItem], concurrency: usize) -> Result<EnqueueCounts, QueueError> {
        for it in items {
            it.validate()?;
        }
        let results: Vec<Result<Enqueue, QueueError>> =
            stream::iter(items.iter().map(|it| self.enqueue(it))).buffer_unordered(concurrency.max(1)).collect().await;
        let mut c = EnqueueCounts::default();
        for r in results {
            match r? {
                Enqueue::Enqueued => c.enqueued += 1,
                Enqueue::Exists => c.existed += 1,
            }
        }
        Ok(c)
    }

    /// Up to `limit` ready items of shard `k`, oldest first. A key condition, never a filter: a
    /// claimed, unexpired item is outside `visible_at <= now` and is not read (or billed).
    pub async fn poll(&self, k: u32, limit: i32) -> Result<Vec<Candidate>, QueueError> {
        let now = self.clock.now_ms();
        let req = self
            .db
            .client()
            .query()
            .table_name(&self.table)
            .index_name(READY_INDEX)
            .key_condition_expression("#shard = :s AND #vis <= :now")
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_values(":s", av_s(shard_key(k)))
            .expression_attribute_values(":now", av_n(now))
            .limit(limit.max(1));
        let out = self.db.query(req).await?;
        Ok(out
            .items()
            .iter()
            .filter_map(|i| Some(Candidate { id: get_s(i, PK)?.to_string(), visible_at: get_i64(i, VISIBLE_AT)? }))
            .collect())
    }

    /// Pauses (writes a marker in every ready shard) or resumes (deletes them) the workers of this
    /// queue. Idempotent.
    pub async fn set_paused(&self, paused: bool) -> Result<(), QueueError> {
        for k in 0..self.poll_shards {
            let id = pause_marker(k);
            if paused {
                let item = Item::from([
                    (PK.to_string(), av_s(&id)),
                    (KIND.to_string(), av_s(PAUSE)),
                    (STATE.to_string(), av_s(PAUSE)),
                    (SHARD.to_string(), av_s(shard_key(k))),
                    (VISIBLE_AT.to_string(), av_n(0)),
                    (CREATED_AT.to_string(), av_n(self.clock.now_ms())),
                ]);
                self.db.put(self.db.client().put_item().table_name(&self.table).set_item(Some(item))).await?;
            } else {
                self.db.delete(self.db.client().delete_item().table_name(&self.table).key(PK, av_s(&id))).await?;
            }
        }
        Ok(())
    }

    /// Reads one item as stored (strongly consistent), for operators and tests.
    pub async fn get(&self, id: &str) -> Result<Option<Item>, QueueError> {
        Ok(self.db.get_strong(&self.table, Item::from([(PK.to_string(), AttributeValue::S(id.into()))])).await?)
    }
}
