//! A work queue in DynamoDB (`003_*`, done so that an empty poll is nearly free, a dead worker's
//! item comes back, and a poison item stops being retried).
//!
//! ## Table (`<prefix>-queue`)
//! Key `pk` = the item id, which is the producer's idempotency key (`daily-summary#2026-11-29#t42`).
//! Attributes: `kind`, `payload` (JSON text), `tenant`, `attempts`, `owner`, `state`
//! (`pending`|`claimed`|`done`|`dead`), `visible_at` (ms: due time while pending, claim expiry while
//! claimed), `created_at`, `last_error`, `ttl`.
//!
//! - GSI `ready`: key `shard` (`queue#<k>`, k = FNV-1a(id) mod shards) + `visible_at`, keys only.
//!   `shard` exists only while the item is live (pending or claimed), so finished and dead items
//!   leave the index (sparse). Finding work is a Query with the **key condition**
//!   `shard = :s AND visible_at <= :now`: a pending item and one whose claim expired come back
//!   the same way, and a claimed, unexpired item is never read (it is not in the key range).
//! - GSI `dead`: key `dlq` + `failed_at`, present only on dead letters, so they are listable.
//!
//! ## Protocol
//! 1. **Enqueue**: PutItem `attribute_not_exists(pk)`; an existing id changes nothing
//!    ([`Enqueue::Exists`]). [`enqueue_item`] gives the same put for a caller's transaction.
//! 2. **Poll**: the Query above on one shard, oldest first (keys only: cheap).
//! 3. **Claim**: UpdateItem on the base table, conditional on `visible_at <= :now`, the item being
//!    live (the index lags the table) and `attempts < max_attempts`, setting `owner`,
//!    `state = claimed`, `visible_at = now + visibility` and `attempts + 1`. Losing the race is
//!    [`Claim::Taken`]. `attempts` after the claim is the claim's generation: later writes are
//!    conditional on `owner` *and* `attempts`, so a worker whose claim expired and was re-taken
//!    cannot touch it. An item whose every claim so far died with its worker (a handler that
//!    panics the process, hangs past the timeout, runs out of memory) reaches `max_attempts`
//!    without ever failing cleanly: the next claim finds it exhausted and dead-letters it
//!    ([`Claim::DeadLettered`]) instead of re-running it forever. A failed condition on an item
//!    this owner already claimed is our own claim whose answer was lost and which the SDK sent
//!    again: it is recognised as claimed.
//! 4. **Finish**: the item becomes a `done` tombstone (out of the ready index, deleted by TTL after
//!    the retention), conditional on owner and generation. The design's "conditional delete"
//!    would forget the id, so a repeated enqueue of a finished id would run it again; the tombstone
//!    keeps the id as its own idempotency key for the retention, and TTL deletion is free.
//! 5. **Fail**: back to pending with `visible_at = now + backoff(attempts)` (exponential), or, when
//!    `attempts` reached the maximum, a dead letter (out of the ready index, into `dead`).
//! 6. **Extend**: pushes `visible_at` out while still owner (heartbeat for long items).
//! 7. **Pause**: a marker item in each ready shard (`pause#queue#<k>`, `visible_at = 0`) sorts
//!    before every real item, so the poll that looks for work finds it first: pausing the worker
//!    costs no read of its own ([`Queue::set_paused`]).
//!
//! ## Clock assumptions
//! Claim expiry uses the claimer's clock; a visibility timeout well above the clock-skew bound and
//! above the handler's run time keeps two owners from running one item at the same time. Even then
//! the conditional finish means at most one of them completes it.

use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, TransactWriteItem};
use futures::stream::{self, StreamExt};

use crate::capacity::Projection;
use crate::clock::{Millis, SharedClock};
use crate::config::{ConfigError, Env};
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_i64, get_s, get_u64, n, s, GsiDef, TableDef, PK, TTL};

/// Attribute: item kind (selects the handler).
pub const KIND: &str = "kind";
/// Attribute: JSON payload.
pub const PAYLOAD: &str = "payload";
/// Attribute: the tenant the item belongs to.
pub const TENANT: &str = "tenant";
/// Attribute: claims so far.
pub const ATTEMPTS: &str = "attempts";
/// Attribute: current claimer.
pub const OWNER: &str = "owner";
/// Attribute: lifecycle state.
pub const STATE: &str = "state";
/// Attribute: when the item may be taken next (ms).
pub const VISIBLE_AT: &str = "visible_at";
/// Attribute: ready-index partition, present only while live.
pub const SHARD: &str = "shard";
/// Attribute: dead-letter index partition, present only on dead letters.
pub const DLQ: &str = "dlq";
/// Attribute: when it was dead-lettered (ms).
pub const FAILED_AT: &str = "failed_at";
/// Attribute: last failure message.
pub const LAST_ERROR: &str = "last_error";
/// Attribute: creation time (ms).
pub const CREATED_AT: &str = "created_at";
/// Ready index name.
pub const READY_INDEX: &str = "ready";
/// Dead-letter index name.
pub const DEAD_INDEX: &str = "dead";

const PENDING: &str = "pending";
const CLAIMED: &str = "claimed";
const DONE: &str = "done";
const DEAD: &str = "dead";
const PAUSE: &str = "pause";
const DLQ_PARTITION: &str = "dlq";

/// Id prefix of the pause markers (never a producer's id: ids are validated against it).
pub const PAUSE_PREFIX: &str = "pause#queue#";

/// The pause marker of ready shard `k`.
pub fn pause_marker(k: u32) -> String {
    format!("{PAUSE_PREFIX}{k}")
}

/// Longest accepted item id (DynamoDB's partition key limit is 2048 bytes).
pub const MAX_ID_BYTES: usize = 1024;
/// Largest accepted payload (items are limited to 400 KB).
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;

/// The queue table's definition.
pub fn queue_table() -> TableDef {
    TableDef {
        logical: "queue",
        pk: s(PK),
        sk: None,
        gsis: vec![
            GsiDef { name: READY_INDEX, pk: s(SHARD), sk: Some(n(VISIBLE_AT)), projection: Projection::KeysOnly },
            GsiDef {
                name: DEAD_INDEX,
                pk: s(DLQ),
                sk: Some(n(FAILED_AT)),
                projection: Projection::Include(vec![KIND.into(), TENANT.into(), ATTEMPTS.into(), LAST_ERROR.into()]),
            },
        ],
        ttl: Some(TTL),
    }
}

pub use crate::shard::{fnv1a, shard_of};

/// The ready-index partition value of shard `k`.
pub fn shard_key(k: u32) -> String {
    format!("queue#{k}")
}

/// Queue settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Ready-index shards (`TICKWORK_QUEUE_SHARDS`, default 8).
    pub shards: u32,
    /// Claim duration (`TICKWORK_QUEUE_VISIBILITY_SECS`, default 120).
    pub visibility: Duration,
    /// Claims before an item is dead-lettered (`TICKWORK_QUEUE_MAX_ATTEMPTS`, default 5).
    pub max_attempts: u32,
    /// First retry delay (`TICKWORK_QUEUE_BACKOFF_SECS`, default 10); doubles per attempt.
    pub backoff_base: Duration,
    /// Longest retry delay (`TICKWORK_QUEUE_BACKOFF_MAX_SECS`, default 3600).
    pub backoff_max: Duration,
    /// How long finished ids are remembered (`TICKWORK_QUEUE_RETENTION_SECS`, default 14 days).
    pub retention: Duration,
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            shards: 8,
            visibility: Duration::from_secs(120),
            max_attempts: 5,
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(3600),
            retention: Duration::from_secs(14 * 86_400),
        }
    }
}

impl QueueConfig {
    /// Reads and validates the settings.
    pub fn from_env(env: &Env) -> Result<Self, ConfigError> {
        use crate::env as vars;
        let d = Self::default();
        let s = Duration::from_secs;
        let c = Self {
            shards: env.int_in(vars::QUEUE_SHARDS, d.shards, 1..=1000)?,
            visibility: env.secs_in(vars::QUEUE_VISIBILITY_SECS, d.visibility, s(1), s(12 * 3600))?,
            max_attempts: env.int_in(vars::QUEUE_MAX_ATTEMPTS, d.max_attempts, 1..=100)?,
            backoff_base: env.secs_in(vars::QUEUE_BACKOFF_SECS, d.backoff_base, Duration::ZERO, s(86_400))?,
            backoff_max: env.secs_in(vars::QUEUE_BACKOFF_MAX_SECS, d.backoff_max, Duration::ZERO, s(7 * 86_400))?,
            retention: env.secs_in(vars::QUEUE_RETENTION_SECS, d.retention, s(3600), s(365 * 86_400))?,
        };
        c.validate()?;
        Ok(c)
    }

    /// Refuses settings that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1000).contains(&self.shards) {
            return Err(ConfigError::invalid("TICKWORK_QUEUE_SHARDS", format!("{} is not in 1..=1000", self.shards)));
        }
        if self.max_attempts == 0 {
            return Err(ConfigError::invalid("TICKWORK_QUEUE_MAX_ATTEMPTS", "must be at least 1"));
        }
        if self.visibility.is_zero() {
            return Err(ConfigError::invalid("TICKWORK_QUEUE_VISIBILITY_SECS", "must be above 0"));
        }
        Ok(())
    }

    /// Delay before the next attempt after `attempts` claims: base × 2^(attempts−1), capped.
    pub fn backoff(&self, attempts: u32) -> Duration {
        let exp = attempts.saturating_sub(1).min(30);
        self.backoff_base.saturating_mul(1u32 << exp).min(self.backoff_max)
    }
}

/// An item to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// Idempotency key; the same id enqueued twice is one item.
    pub id: String,
    /// Handler kind.
    pub kind: String,
    /// JSON payload.
    pub payload: String,
    /// Owning tenant, when the work is per tenant.
    pub tenant: Option<String>,
    /// Not before (ms).
    pub due_ms: Millis,
}

/// Why an item was refused before any write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("queue item `{id}`: {problem}")]
pub struct InvalidItem {
    /// The id (possibly truncated).
    pub id: String,
    /// What is wrong.
    pub problem: String,
}

impl NewItem {
    /// Checks id, kind and payload before anything is written.
    pub fn validate(&self) -> Result<(), InvalidItem> {
        let bad = |p: &str| InvalidItem { id: self.id.chars().take(80).collect(), problem: p.to_string() };
        if self.id.is_empty() || self.id.len() > MAX_ID_BYTES {
            return Err(bad(&format!("id must be 1..={MAX_ID_BYTES} bytes")));
        }
        if self.id.starts_with(PAUSE_PREFIX) {
            return Err(bad(&format!("ids starting `{PAUSE_PREFIX}` are the worker's pause markers")));
        }
        if self.kind.is_empty() || self.kind.len() > 128 {
            return Err(bad("kind must be 1..=128 bytes"));
        }
        if self.payload.len() > MAX_PAYLOAD_BYTES {
            return Err(bad(&format!("payload is {} bytes; the limit is {MAX_PAYLOAD_BYTES}", self.payload.len())));
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&self.payload) {
            return Err(bad(&format!("payload is not JSON: {e}")));
        }
        Ok(())
    }

    fn item(&self, shards: u32, now: Millis) -> Item {
        let mut item = Item::from([
            (PK.to_string(), av_s(&self.id)),
            (KIND.to_string(), av_s(&self.kind)),
            (PAYLOAD.to_string(), av_s(&self.payload)),
            (ATTEMPTS.to_string(), av_n(0)),
            (STATE.to_string(), av_s(PENDING)),
            (VISIBLE_AT.to_string(), av_n(self.due_ms)),
            (SHARD.to_string(), av_s(shard_key(shard_of(&self.id, shards)))),
            (CREATED_AT.to_string(), av_n(now)),
        ]);
        if let Some(t) = &self.tenant {
            item.insert(TENANT.to_string(), av_s(t));
        }
        item
    }
}

/// A put that inserts `item` only if its id is new, for a caller's own transaction (the pulse sweep
/// and the fan-out enqueue a page's batch with their checkpoint in one).
pub fn enqueue_item(
    table: &str,
    cfg: &QueueConfig,
    item: &NewItem,
    now: Millis,
) -> Result<TransactWriteItem, InvalidItem> {
    item.validate()?;
    Ok(crate::schema::put_new_item(table, item.item(cfg.shards, now)))
}

/// Outcome of an enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueue {
    /// New item written.
    Enqueued,
    /// The id exists (pending, running, done or dead): nothing changed.
    Exists,
}

/// Counts from a batch enqueue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnqueueCounts {
    /// Newly written.
    pub enqueued: u64,
    /// Already there.
    pub existed: u64,
}

/// A claimed item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Id.
    pub id: String,
    /// Handler kind.
    pub kind: String,
    /// JSON payload (decoded by the handler).
    pub payload: String,
    /// Owning tenant.
    pub tenant: Option<String>,
    /// Claims so far, this one included; the claim's generation.
    pub attempts: u32,
    /// Our owner id.
    pub owner: String,
    /// Our claim's end (ms).
    pub claim_until_ms: Millis,
}

/// A ready item found by a poll (keys only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Id.
    pub id: String,
    /// Its `visible_at` as the index saw it.
    pub visible_at: Millis,
}

/// Outcome of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Ours.
    Claimed(Job),
    /// Another worker got it first, or it is no longer ready.
    Taken,
    /// Every attempt was claimed and none settled (its workers died): moved to the dead letters.
    DeadLettered,
}

/// Outcome of finish, extend or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Done as asked.
    Settled,
    /// Retried later at the given instant.
    Retrying {
        /// When it becomes visible again (ms).
        at_ms: Millis,
    },
    /// Moved to the dead letters.
    DeadLettered,
    /// The claim expired and someone else owns the item now: nothing changed.
    NotOwner,
}

/// A dead letter, for operators.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeadLetter {
    /// Id.
    pub id: String,
    /// Kind.
    pub kind: String,
    /// Tenant.
    pub tenant: Option<String>,
    /// Claims made.
    pub attempts: u32,
    /// Last error.
    pub last_error: String,
    /// When (ms).
    pub failed_at_ms: Millis,
}

/// The queue on one table.
#[derive(Debug, Clone)]
pub struct Queue {
    db: Db,
    table: String,
    cfg: QueueConfig,
    clock: SharedClock,
    poll_shards: u32,
}

const MINE: &str = "#owner = :owner AND #attempts = :gen AND #state = :claimed";

/// "Still our claim": the item is claimed, by this owner, at this attempt. Pure; the one
/// condition of every settle, single ([`Queue::mine`]) or in a transaction.
fn mine_condition(job: &Job) -> crate::schema::ExprParts {
    (
        MINE.to_string(),
        vec![("#owner", OWNER), ("#attempts", ATTEMPTS), ("#state", STATE)],
        vec![(":owner", av_s(&job.owner)), (":gen", av_n(job.attempts)), (":claimed", av_s(CLAIMED))],
    )
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

    /// Claims `id` for `owner` if it is still ready (see step 3 of the protocol).
    pub async fn claim(&self, id: &str, owner: &str) -> Result<Claim, QueueError> {
        let now = self.clock.now_ms();
        let until = now + self.cfg.visibility.as_millis() as i64;
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #owner = :owner, #state = :claimed, #vis = :until ADD #attempts :one")
            .condition_expression(
                "attribute_exists(#shard) AND #vis <= :now AND #state <> :pause AND (attribute_not_exists(#attempts) OR #attempts < :max)",
            )
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_values(":owner", av_s(owner))
            .expression_attribute_values(":claimed", av_s(CLAIMED))
            .expression_attribute_values(":pause", av_s(PAUSE))
            .expression_attribute_values(":until", av_n(until))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":one", av_n(1))
            .expression_attribute_values(":max", av_n(self.cfg.max_attempts))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld);
        match self.db.update(req).await {
            Ok(out) => Ok(Claim::Claimed(job_of(id, owner, until, &out.attributes().cloned().unwrap_or_default()))),
            Err(DbError::ConditionFailed { item, .. }) => {
                let item = item.map(|b| *b).unwrap_or_default();
                let attempts = get_u64(&item, ATTEMPTS).unwrap_or(0) as u32;
                let ready = item.contains_key(SHARD) && get_i64(&item, VISIBLE_AT).is_some_and(|v| v <= now);
                if get_s(&item, STATE) == Some(CLAIMED) && get_s(&item, OWNER) == Some(owner) {
                    // Ours: the first attempt applied and its answer was lost.
                    let until = get_i64(&item, VISIBLE_AT).unwrap_or(until);
                    return Ok(Claim::Claimed(job_of(id, owner, until, &item)));
                }
                if ready && get_s(&item, STATE) != Some(PAUSE) && attempts >= self.cfg.max_attempts {
                    return self.bury(id, attempts).await;
                }
                Ok(Claim::Taken)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Dead-letters an item whose claims are exhausted, if it still is (another worker may have
    /// buried it first).
    async fn bury(&self, id: &str, attempts: u32) -> Result<Claim, QueueError> {
        let now = self.clock.now_ms();
        let msg = format!("claimed {attempts} times and never settled: its handler died with its worker each time (a panic, a timeout or out of memory)");
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #state = :dead, #dlq = :dlq, #failed = :now, #err = :err REMOVE #shard, #owner")
            .condition_expression("attribute_exists(#shard) AND #vis <= :now AND #attempts >= :max")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_names("#failed", FAILED_AT)
            .expression_attribute_names("#err", LAST_ERROR)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#owner", OWNER)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_values(":dead", av_s(DEAD))
            .expression_attribute_values(":dlq", av_s(DLQ_PARTITION))
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":err", av_s(msg))
            .expression_attribute_values(":max", av_n(self.cfg.max_attempts));
        match self.db.update(req).await {
            Ok(_) => Ok(Claim::DeadLettered),
            Err(DbError::ConditionFailed { .. }) => Ok(Claim::Taken),
            Err(e) => Err(e.into()),
        }
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

    fn mine(&self, job: &Job) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        let (cond, names, values) = mine_condition(job);
        let mut req =
            self.db.client().update_item().table_name(&self.table).key(PK, av_s(&job.id)).condition_expression(cond);
        for (k, v) in names {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        req
    }

    /// Marks the job done (a tombstone out of the ready index), if still ours.
    pub async fn finish(&self, job: &Job) -> Result<Settle, QueueError> {
        self.apply(job, &Transition::Done { ttl_s: self.done_ttl_s() }).await
    }

    /// Applies a settle transition to our claimed item (one conditional UpdateItem).
    async fn apply(&self, job: &Job, t: &Transition) -> Result<Settle, QueueError> {
        let (expr, names, values) = t.update();
        let mut req = self.mine(job).update_expression(expr);
        for (k, v) in names {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        settle(self.db.update(req).await, t.outcome())
    }

    fn done_ttl_s(&self) -> i64 {
        self.clock.now_ms() / 1000 + self.cfg.retention.as_secs() as i64
    }

    /// Pushes the claim out by the visibility timeout, if still ours.
    pub async fn extend(&self, job: &Job) -> Result<(Settle, Job), QueueError> {
        let until = self.clock.now_ms() + self.cfg.visibility.as_millis() as i64;
        let req = self
            .mine(job)
            .update_expression("SET #vis = :until")
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_values(":until", av_n(until));
        let s = settle(self.db.update(req).await, Settle::Settled)?;
        Ok((s, Job { claim_until_ms: until, ..job.clone() }))
    }

    /// Records a failure: retry after the backoff, or dead-letter after the last attempt.
    pub async fn fail(&self, job: &Job, error: &str) -> Result<Settle, QueueError> {
        if job.attempts >= self.cfg.max_attempts {
            return self.dead_letter(job, error).await;
        }
        let at = self.clock.now_ms() + self.cfg.backoff(job.attempts).as_millis() as i64;
        self.apply(job, &Transition::Retry { at_ms: at, error: error.to_string(), payload: None, refund: false }).await
    }

    /// Moves the job to the dead letters now (a permanent failure, or the last attempt).
    pub async fn dead_letter(&self, job: &Job, error: &str) -> Result<Settle, QueueError> {
        self.apply(job, &Transition::Dead { now_ms: self.clock.now_ms(), error: error.to_string(), payload: None })
            .await
    }

    /// Settles a batch ([`crate::batch`]) of which only some units completed, in one transaction
    /// conditional on our claim: `remaining` (the units still to run, as a smaller batch payload)
    /// goes back to pending — after the backoff when some failed (`error`), at once when only the
    /// deadline stopped them (that claim then does not count as an attempt); `dead` units (a
    /// payload and why) become a dead letter of their own, `<id>#dead#<attempt>#<owner>`. Out of
    /// attempts with failures left, the remaining units are dead-lettered in the item itself.
    pub async fn settle_batch(
        &self,
        job: &Job,
        remaining: Option<&str>,
        error: Option<&str>,
        dead: Option<(&str, &str)>,
    ) -> Result<Settle, QueueError> {
        let now = self.clock.now_ms();
        let t = batch_transition(
            remaining,
            error,
            job.attempts >= self.cfg.max_attempts,
            now,
            now + self.cfg.backoff(job.attempts).as_millis() as i64,
            self.done_ttl_s(),
        );
        let outcome = t.outcome();
        let (expr, names, values) = t.update();
        let mut items = vec![self.mine_update(job, &expr, &names, values)];
        if let Some((payload, why)) = dead {
            // Unique to this claim (the attempt is refunded when only the deadline stopped a
            // batch, so it alone repeats; the owner id is new each invocation), and inserted only
            // if new: a dead letter is never overwritten, and a settle retried after its answer was
            // lost writes the same id, which the claim's condition then refuses as a whole.
            let id = format!("{}#dead#{}#{}", job.id, job.attempts, job.owner);
            let mut item = Item::from([
                (PK.to_string(), av_s(&id)),
                (KIND.to_string(), av_s(&job.kind)),
                (PAYLOAD.to_string(), av_s(payload)),
                (ATTEMPTS.to_string(), av_n(job.attempts)),
                (STATE.to_string(), av_s(DEAD)),
                (DLQ.to_string(), av_s(DLQ_PARTITION)),
                (FAILED_AT.to_string(), av_n(now)),
                (LAST_ERROR.to_string(), av_s(why.chars().take(MAX_ERROR_CHARS).collect::<String>())),
                (CREATED_AT.to_string(), av_n(now)),
            ]);
            if let Some(t) = &job.tenant {
                item.insert(TENANT.to_string(), av_s(t));
            }
            items.push(crate::schema::put_new_item(&self.table, item));
        }
        match self.db.transact_write(items).await {
            Ok(_) => Ok(outcome),
            Err(DbError::TransactionCanceled { reasons }) if reasons.first().is_some_and(|r| r.condition_failed()) => {
                Ok(Settle::NotOwner)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// An update of our claimed item for a transaction, conditional as [`Queue::mine`] is.
    fn mine_update(
        &self,
        job: &Job,
        expr: &str,
        names: &[(&str, &str)],
        values: Vec<(&str, AttributeValue)>,
    ) -> TransactWriteItem {
        let (cond, mine_names, mine_values) = mine_condition(job);
        let mut u = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key(PK, av_s(&job.id))
            .update_expression(expr)
            .condition_expression(cond);
        for (k, v) in mine_names {
            u = u.expression_attribute_names(k, v);
        }
        for (k, v) in mine_values {
            u = u.expression_attribute_values(k, v);
        }
        for (k, v) in names {
            u = u.expression_attribute_names(*k, *v);
        }
        for (k, v) in values {
            u = u.expression_attribute_values(k, v);
        }
        TransactWriteItem::builder().update(u.build().expect("update has table, key and expression")).build()
    }

    /// Every dead letter, following the index cursor to exhaustion.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        let mut out = Vec::new();
        let q = self
            .db
            .client()
            .query()
            .table_name(&self.table)
            .index_name(DEAD_INDEX)
            .key_condition_expression("#dlq = :dlq")
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_values(":dlq", av_s(DLQ_PARTITION));
        crate::pager::for_each_page(&self.db, q, None, 500, &crate::budget::Unlimited, "dead-letters", |page| {
            out.extend(page.items.iter().map(|i| DeadLetter {
                id: get_s(i, PK).unwrap_or_default().to_string(),
                kind: get_s(i, KIND).unwrap_or_default().to_string(),
                tenant: get_s(i, TENANT).map(str::to_string),
                attempts: get_u64(i, ATTEMPTS).unwrap_or(0) as u32,
                last_error: get_s(i, LAST_ERROR).unwrap_or_default().to_string(),
                failed_at_ms: get_i64(i, FAILED_AT).unwrap_or(0),
            }));
            std::future::ready(Ok::<(), DbError>(()))
        })
        .await
        .map_err(|e| match e {
            crate::pager::PageError::Db(d) | crate::pager::PageError::Handler(d) => QueueError::Db(d),
            crate::pager::PageError::Cursor(c) => QueueError::Db(DbError::Cursor(c)),
        })?;
        Ok(out)
    }

    /// Puts a dead letter back in the queue with its attempts reset (operator action).
    pub async fn retry_dead(&self, id: &str) -> Result<bool, QueueError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression(
                "SET #state = :pending, #vis = :now, #attempts = :zero, #shard = :shard REMOVE #dlq, #failed",
            )
            .condition_expression("#state = :dead")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_names("#vis", VISIBLE_AT)
            .expression_attribute_names("#attempts", ATTEMPTS)
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#dlq", DLQ)
            .expression_attribute_names("#failed", FAILED_AT)
            .expression_attribute_values(":pending", av_s(PENDING))
            .expression_attribute_values(":dead", av_s(DEAD))
            .expression_attribute_values(":now", av_n(self.clock.now_ms()))
            .expression_attribute_values(":zero", av_n(0))
            .expression_attribute_values(":shard", av_s(shard_key(shard_of(id, self.cfg.shards))));
        match self.db.update(req).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a dead letter for good (operator action). Live items are never deleted here.
    pub async fn purge_dead(&self, id: &str) -> Result<bool, QueueError> {
        let req = self
            .db
            .client()
            .delete_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .condition_expression("#state = :dead")
            .expression_attribute_names("#state", STATE)
            .expression_attribute_values(":dead", av_s(DEAD));
        match self.db.delete(req).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one item as stored (strongly consistent), for operators and tests.
    pub async fn get(&self, id: &str) -> Result<Option<Item>, QueueError> {
        Ok(self.db.get_strong(&self.table, Item::from([(PK.to_string(), AttributeValue::S(id.into()))])).await?)
    }
}

/// Where a settle moves a claimed item. Pure: the update each makes is [`Transition::update`],
/// written once for the single-item settles and the batch settle's transaction alike.
#[derive(Debug, Clone, PartialEq)]
enum Transition {
    /// Done: a tombstone out of the ready index, its payload dropped, expiring at `ttl_s`.
    Done { ttl_s: i64 },
    /// Back to pending, visible at `at_ms`, with why; `payload` replaces the item's (a batch's
    /// remaining units); `refund` takes back the claim's attempt (only the deadline stopped it).
    Retry { at_ms: Millis, error: String, payload: Option<String>, refund: bool },
    /// To the dead letters, with why; `payload` replaces the item's (a batch's remaining units).
    Dead { now_ms: Millis, error: String, payload: Option<String> },
}

/// Errors kept on an item are cut to this many characters (an item is at most 400 KB).
const MAX_ERROR_CHARS: usize = 2000;

impl Transition {
    fn outcome(&self) -> Settle {
        match self {
            Transition::Done { .. } => Settle::Settled,
            Transition::Retry { at_ms, .. } => Settle::Retrying { at_ms: *at_ms },
            Transition::Dead { .. } => Settle::DeadLettered,
        }
    }

    /// The update expression, its names and its values (beside [`MINE`]'s, which the caller adds).
    fn update(&self) -> crate::schema::ExprParts {
        let cut = |e: &str| av_s(e.chars().take(MAX_ERROR_CHARS).collect::<String>());
        match self {
            Transition::Done { ttl_s } => (
                "SET #state = :done, #ttl = :ttl REMOVE #shard, #vis, #payload".into(),
                vec![("#ttl", TTL), ("#shard", SHARD), ("#vis", VISIBLE_AT), ("#payload", PAYLOAD)],
                vec![(":done", av_s(DONE)), (":ttl", av_n(ttl_s))],
            ),
            Transition::Retry { at_ms, error, payload, refund } => {
                let mut set = vec!["#state = :pending", "#vis = :at", "#err = :err"];
                let mut names = vec![("#vis", VISIBLE_AT), ("#err", LAST_ERROR)];
                let mut values = vec![(":pending", av_s(PENDING)), (":at", av_n(at_ms)), (":err", cut(error))];
                if let Some(p) = payload {
                    set.push("#payload = :p");
                    names.push(("#payload", PAYLOAD));
                    values.push((":p", av_s(p)));
                }
                if *refund {
                    set.push("#attempts = #attempts - :one");
                    values.push((":one", av_n(1)));
                }
                (format!("SET {} REMOVE #owner", set.join(", ")), names, values)
            }
            Transition::Dead { now_ms, error, payload } => {
                let mut set = vec!["#state = :dead", "#dlq = :dlq", "#failed = :now", "#err = :err"];
                let mut names = vec![("#dlq", DLQ), ("#failed", FAILED_AT), ("#err", LAST_ERROR), ("#shard", SHARD)];
                let mut values = vec![
                    (":dead", av_s(DEAD)),
                    (":dlq", av_s(DLQ_PARTITION)),
                    (":now", av_n(now_ms)),
                    (":err", cut(error)),
                ];
                if let Some(p) = payload {
                    set.push("#payload = :p");
                    names.push(("#payload", PAYLOAD));
                    values.push((":p", av_s(p)));
                }
                (format!("SET {} REMOVE #shard, #owner", set.join(", ")), names, values)
            }
        }
    }
}

/// What a batch settle does ([`Queue::settle_batch`]): every unit done → done; units left after
/// failures on the last attempt → the item is dead-lettered with them; failures with attempts
/// left → retry the rest after the backoff (`backoff_at`); only the deadline stopped it → retry
/// the rest now, the attempt refunded.
fn batch_transition(
    remaining: Option<&str>,
    error: Option<&str>,
    last_attempt: bool,
    now: Millis,
    backoff_at: Millis,
    ttl_s: i64,
) -> Transition {
    match (remaining, error) {
        (None, _) => Transition::Done { ttl_s },
        (Some(rest), Some(e)) if last_attempt => {
            Transition::Dead { now_ms: now, error: e.to_string(), payload: Some(rest.to_string()) }
        }
        (Some(rest), Some(e)) => Transition::Retry {
            at_ms: backoff_at,
            error: e.to_string(),
            payload: Some(rest.to_string()),
            refund: false,
        },
        (Some(rest), None) => Transition::Retry {
            at_ms: now,
            error: "stopped by the deadline; the rest continues".into(),
            payload: Some(rest.to_string()),
            refund: true,
        },
    }
}

fn job_of(id: &str, owner: &str, until: Millis, a: &Item) -> Job {
    Job {
        id: id.to_string(),
        kind: get_s(a, KIND).unwrap_or_default().to_string(),
        payload: get_s(a, PAYLOAD).unwrap_or("null").to_string(),
        tenant: get_s(a, TENANT).map(str::to_string),
        attempts: get_u64(a, ATTEMPTS).unwrap_or(1) as u32,
        owner: owner.to_string(),
        claim_until_ms: until,
    }
}

fn settle(
    r: Result<aws_sdk_dynamodb::operation::update_item::UpdateItemOutput, DbError>,
    ok: Settle,
) -> Result<Settle, QueueError> {
    match r {
        Ok(_) => Ok(ok),
        Err(DbError::ConditionFailed { .. }) => Ok(Settle::NotOwner),
        Err(e) => Err(e.into()),
    }
}

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// An item refused before writing.
    #[error(transparent)]
    Invalid(#[from] InvalidItem),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_settles_done_retried_refunded_or_dead() {
        let t = |rest: Option<&str>, err: Option<&str>, last: bool| batch_transition(rest, err, last, 100, 900, 7);
        assert_eq!(t(None, Some("x"), true), Transition::Done { ttl_s: 7 }, "every unit ran: done");
        assert_eq!(
            t(Some("r"), Some("boom"), false),
            Transition::Retry { at_ms: 900, error: "boom".into(), payload: Some("r".into()), refund: false }
        );
        assert_eq!(
            t(Some("r"), None, true),
            Transition::Retry {
                at_ms: 100,
                error: "stopped by the deadline; the rest continues".into(),
                payload: Some("r".into()),
                refund: true
            },
            "the deadline alone is no attempt, even the last"
        );
        assert_eq!(
            t(Some("r"), Some("boom"), true),
            Transition::Dead { now_ms: 100, error: "boom".into(), payload: Some("r".into()) }
        );
    }

    fn job() -> Job {
        Job {
            id: "j".into(),
            kind: "k".into(),
            payload: "{}".into(),
            tenant: None,
            attempts: 2,
            owner: "o".into(),
            claim_until_ms: 0,
        }
    }

    #[test]
    fn the_claim_condition_names_and_values_what_it_uses() {
        let (cond, names, values) = mine_condition(&job());
        for (k, _) in &names {
            assert!(cond.contains(k), "{k} named, not used");
        }
        for (k, _) in &values {
            assert!(cond.contains(k), "{k} given, not used");
        }
        assert_eq!((names.len(), values.len()), (3, 3));
    }

    #[test]
    fn every_transition_names_and_values_what_its_expression_uses() {
        let long = "e".repeat(5000);
        for t in [
            Transition::Done { ttl_s: 1 },
            Transition::Retry { at_ms: 1, error: long.clone(), payload: None, refund: false },
            Transition::Retry { at_ms: 1, error: "e".into(), payload: Some("p".into()), refund: true },
            Transition::Dead { now_ms: 1, error: long.clone(), payload: None },
            Transition::Dead { now_ms: 1, error: "e".into(), payload: Some("p".into()) },
        ] {
            let (expr, names, values) = t.update();
            // DynamoDB refuses a name or value given and unused, and one used and not given; the
            // caller adds the claim condition's own (`mine_condition`: #owner, #attempts, #state).
            let (_, mine_names, _) = mine_condition(&job());
            let given_n: Vec<&str> = names.iter().map(|(k, _)| *k).chain(mine_names.iter().map(|(k, _)| *k)).collect();
            let given_v: Vec<&str> = values.iter().map(|(k, _)| *k).collect();
            let used = |sigil: char| -> Vec<String> {
                expr.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == sigil))
                    .filter(|w| w.starts_with(sigil))
                    .map(str::to_string)
                    .collect()
            };
            for n in used('#') {
                assert!(given_n.contains(&n.as_str()), "{t:?}: {n} used, not named");
            }
            for n in &names {
                assert!(expr.contains(n.0), "{t:?}: {} named, not used", n.0);
            }
            for v in used(':') {
                assert!(given_v.contains(&v.as_str()), "{t:?}: {v} used, not given");
            }
            for v in &given_v {
                assert!(expr.contains(v), "{t:?}: {v} given, not used");
            }
            for (k, v) in &values {
                if *k == ":err" {
                    assert!(v.as_s().unwrap().chars().count() <= MAX_ERROR_CHARS);
                }
            }
        }
    }

    #[test]
    fn backoff_grows_and_caps() {
        let c = QueueConfig {
            backoff_base: Duration::from_secs(10),
            backoff_max: Duration::from_secs(60),
            ..Default::default()
        };
        let got: Vec<u64> = (1..=5).map(|a| c.backoff(a).as_secs()).collect();
        assert_eq!(got, vec![10, 20, 40, 60, 60]);
    }

    #[test]
    fn bad_items_are_refused_with_the_reason() {
        let ok = NewItem { id: "a".into(), kind: "k".into(), payload: "{}".into(), tenant: None, due_ms: 0 };
        assert!(ok.validate().is_ok());
        let e = NewItem { payload: "{oops".into(), ..ok.clone() }.validate().unwrap_err();
        assert!(e.problem.contains("not JSON"), "{e}");
        assert!(NewItem { id: String::new(), ..ok.clone() }.validate().is_err());
        assert!(NewItem { kind: String::new(), ..ok.clone() }.validate().is_err());
        assert!(NewItem { id: "x".repeat(MAX_ID_BYTES + 1), ..ok }.validate().is_err());
    }

    #[test]
    fn config_is_validated() {
        let e = QueueConfig::from_env(&Env::from_pairs([("TICKWORK_QUEUE_SHARDS", "0")])).unwrap_err();
        assert_eq!(e.var, "TICKWORK_QUEUE_SHARDS");
        assert!(QueueConfig::from_env(&Env::from_pairs([("TICKWORK_QUEUE_MAX_ATTEMPTS", "0")])).is_err());
    }
}
