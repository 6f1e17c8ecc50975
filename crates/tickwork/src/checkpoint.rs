//! Checkpoints: where a stopped enumeration resumes, per shard, for one run.
//!
//! Why (`002_*`, rule 1): work that cannot finish inside one invocation stops at its deadline and
//! persists a cursor, so the next invocation resumes instead of starting over or skipping. The
//! checkpoint is written after each page's effects, so a crash repeats at most one page (whose
//! effects are idempotent per unit), and it is fenced by the lease, so a stale leader cannot move
//! a newer one's position back.
//!
//! Item: `pk = ckpt#<job>`, `sk = <run>` (the window, e.g. `2026-11-29`, or `current`); one
//! attribute `s:<shard>` per shard holding a cursor or `done`; `ttl`.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use crate::clock::SharedClock;
use crate::db::Db;
use crate::error::DbError;
use crate::lease::{fenced_write, Fence, Fenced};
use crate::pager::{Cursor, CursorError};
use crate::schema::{av_n, av_s, key, TTL};

const SHARD_PREFIX: &str = "s:";
const DONE: &str = "done";

/// The checkpoint item's key.
pub fn checkpoint_key(job: &str, run: &str) -> crate::capacity::Item {
    key(format!("ckpt#{job}"), run)
}

/// Where one shard stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardState {
    /// Not started.
    Start,
    /// Resume from this cursor.
    Resume(Cursor),
    /// Drained.
    Done,
}

impl ShardState {
    /// The cursor to start from (`None` for start; meaningless for done).
    pub fn cursor(&self) -> Option<&Cursor> {
        match self {
            ShardState::Resume(c) => Some(c),
            _ => None,
        }
    }
}

/// A checkpoint that cannot be used: resuming from it could skip or repeat work, so nothing is
/// done until an operator looks.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A stored cursor does not decode.
    #[error("checkpoint `{job}/{run}` shard `{shard}` is unreadable ({source}); nothing was changed. Inspect it with `tickctl status` and delete it to restart the run")]
    Unreadable {
        /// Job.
        job: String,
        /// Run.
        run: String,
        /// Shard.
        shard: String,
        /// Why.
        #[source]
        source: CursorError,
    },
}

/// Checkpoints in the control table.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    db: Db,
    table: String,
    clock: SharedClock,
    retention: Duration,
}

impl Checkpoints {
    /// Checkpoints in `table`, kept `retention` after their last write.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock, retention: Duration) -> Self {
        Self { db, table: table.into(), clock, retention }
    }

    /// Every shard's state for `job/run` (strongly consistent: it follows a lease acquisition).
    pub async fn read(&self, job: &str, run: &str) -> Result<BTreeMap<String, ShardState>, CheckpointError> {
        let item = self.db.get_strong(&self.table, checkpoint_key(job, run)).await?;
        let mut m = BTreeMap::new();
        for (k, v) in item.iter().flatten() {
            let Some(shard) = k.strip_prefix(SHARD_PREFIX) else { continue };
            let text = v.as_s().map_err(|_| CheckpointError::Unreadable {
                job: job.into(),
                run: run.into(),
                shard: shard.into(),
                source: CursorError::new("not a string"),
            })?;
            let st = if text == DONE {
                ShardState::Done
            } else {
                ShardState::Resume(text.parse().map_err(|e| CheckpointError::Unreadable {
                    job: job.into(),
                    run: run.into(),
                    shard: shard.into(),
                    source: e,
                })?)
            };
            m.insert(shard.to_string(), st);
        }
        Ok(m)
    }

    /// The state of one shard, defaulting to [`ShardState::Start`].
    pub fn state_of<'a>(states: &'a BTreeMap<String, ShardState>, shard: &str) -> &'a ShardState {
        states.get(shard).unwrap_or(&ShardState::Start)
    }

    /// Saves one shard's state, fenced by the lease that did the work.
    pub async fn save(&self, fence: &Fence, run: &str, shard: &str, state: &ShardState) -> Result<Fenced, DbError> {
        self.save_with(fence, run, shard, state, vec![]).await
    }

    /// Saves one shard's state together with `extra` writes, in one fenced transaction.
    pub async fn save_with(
        &self,
        fence: &Fence,
        run: &str,
        shard: &str,
        state: &ShardState,
        extra: Vec<TransactWriteItem>,
    ) -> Result<Fenced, DbError> {
        let now = self.clock.now_ms();
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(checkpoint_key(&fence.job, run)))
            .expression_attribute_names("#s", format!("{SHARD_PREFIX}{shard}"))
            .expression_attribute_names("#at", "updated_at")
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_values(":now", av_n(now))
            .expression_attribute_values(":ttl", av_n(now / 1000 + self.retention.as_secs() as i64));
        update = match state {
            // Back to the start (a drained shard of a rolling run): forget the position.
            ShardState::Start => update.update_expression("SET #at = :now, #ttl = :ttl REMOVE #s"),
            ShardState::Resume(c) => update
                .update_expression("SET #s = :v, #at = :now, #ttl = :ttl")
                .expression_attribute_values(":v", av_s(c.as_str())),
            ShardState::Done => update
                .update_expression("SET #s = :v, #at = :now, #ttl = :ttl")
                .expression_attribute_values(":v", av_s(DONE)),
        };
        let update = update.build().expect("update has table, key and expression");
        let mut writes = vec![TransactWriteItem::builder().update(update).build()];
        writes.extend(extra);
        fenced_write(&self.db, fence, writes).await
    }
}
