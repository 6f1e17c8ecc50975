//! Checkpoints: where a stopped enumeration resumes, per shard, for one run.
//!
//! Why (`002_*`, rule 1): work that cannot finish inside one invocation stops at its deadline and
//! persists a cursor, so the next invocation resumes instead of starting over or skipping. The
//! checkpoint is written after each page's effects, so a crash repeats at most one page (whose
//! effects are idempotent per unit), and it is fenced by the lease, so a stale leader cannot move
//! a newer one's position back.
//!
//! Items: one per shard, `pk = ckpt#<job>`, `sk = <run>|<shard>` (the run is the window, e.g.
//! `Europe/Berlin@2026-11-29`, or `current`); `state` holds a cursor or `done`; `ttl`. One item per
//! shard, not one per run: shards saved concurrently would otherwise contend for one item and
//! cancel each other's transactions. A run's states are read with one Query whose key condition is
//! `pk = ckpt#<job> AND begins_with(sk, "<run>|")`.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};

use crate::clock::SharedClock;
use crate::db::Db;
use crate::error::DbError;
use crate::lease::{fenced_write, Fence, Fenced};
use crate::pager::{Cursor, CursorError};
use crate::schema::{av_n, av_s, get_s, key, PK, SK, TTL};

/// Attribute: the shard's state (a cursor, or `done`).
pub const STATE: &str = "state";
const DONE: &str = "done";
/// Separates the run from the shard in the sort key (never in a zone name or a date).
pub const RUN_SEPARATOR: char = '|';

/// The checkpoint partition of a job.
pub fn checkpoint_pk(job: &str) -> String {
    format!("ckpt#{job}")
}

/// The checkpoint item's key for one shard of one run.
pub fn checkpoint_key(job: &str, run: &str, shard: &str) -> crate::item::Item {
    key(checkpoint_pk(job), format!("{run}{RUN_SEPARATOR}{shard}"))
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
    /// The state a checkpoint item's `state` attribute holds: none is a shard not started,
    /// `done` a drained one, anything else a cursor (which must decode). Pure; the one reading
    /// of a stored state, for a run's states and for one shard's.
    pub fn stored(text: Option<&str>) -> Result<Self, CursorError> {
        match text {
            None => Ok(ShardState::Start),
            Some(DONE) => Ok(ShardState::Done),
            Some(t) => Ok(ShardState::Resume(t.parse()?)),
        }
    }

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

    /// Every shard's state for `job/run`: one strongly consistent Query (it follows a lease
    /// acquisition, where a stale "not started" would repeat work), paged to the end.
    pub async fn read(&self, job: &str, run: &str) -> Result<BTreeMap<String, ShardState>, CheckpointError> {
        let prefix = format!("{run}{RUN_SEPARATOR}");
        let q = self
            .db
            .client()
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :run)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", av_s(checkpoint_pk(job)))
            .expression_attribute_values(":run", av_s(&prefix))
            .consistent_read(true);
        let mut items = Vec::new();
        crate::pager::for_each_page(&self.db, q, None, 1000, &crate::budget::Unlimited, "checkpoints", |p| {
            items.extend(p.items);
            std::future::ready(Ok::<(), DbError>(()))
        })
        .await
        .map_err(|e| match e {
            crate::pager::PageError::Db(d) | crate::pager::PageError::Handler(d) => CheckpointError::Db(d),
            crate::pager::PageError::Cursor(c) => {
                CheckpointError::Unreadable { job: job.into(), run: run.into(), shard: "?".into(), source: c }
            }
        })?;
        let mut m = BTreeMap::new();
        for item in &items {
            let Some(shard) = get_s(item, SK).and_then(|sk| sk.strip_prefix(&prefix)) else { continue };
            let unreadable = |source: CursorError| CheckpointError::Unreadable {
                job: job.into(),
                run: run.into(),
                shard: shard.into(),
                source,
            };
            // No state: a position forgotten (a rolling run back at its start).
            if get_s(item, STATE).is_none() {
                continue;
            }
            m.insert(shard.to_string(), ShardState::stored(get_s(item, STATE)).map_err(unreadable)?);
        }
        Ok(m)
    }

    /// One shard's state, strongly consistent: read by a worker right after it takes the shard's
    /// lease, so that a shard another worker finished or moved on since the run's states were
    /// read is not paged again from an older position.
    pub async fn read_shard(&self, job: &str, run: &str, shard: &str) -> Result<ShardState, CheckpointError> {
        let item = self.db.get_strong(&self.table, checkpoint_key(job, run, shard)).await?;
        ShardState::stored(item.as_ref().and_then(|i| get_s(i, STATE))).map_err(|source| CheckpointError::Unreadable {
            job: job.into(),
            run: run.into(),
            shard: shard.into(),
            source,
        })
    }

    /// "This shard is done", as a transaction item: the watermark of a run paged by several
    /// workers advances only in a transaction holding one of these for every shard.
    pub fn done_check(&self, job: &str, run: &str, shard: &str) -> TransactWriteItem {
        let cc = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(checkpoint_key(job, run, shard)))
            .condition_expression("#s = :done")
            .expression_attribute_names("#s", STATE)
            .expression_attribute_values(":done", av_s(DONE))
            .build()
            .expect("condition check has table, key and condition");
        TransactWriteItem::builder().condition_check(cc).build()
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
        let mut writes = vec![self.save_item(&fence.job, run, shard, state)];
        writes.extend(extra);
        fenced_write(&self.db, fence, writes).await
    }

    /// One shard's state as a transaction item, for a caller's fenced transaction.
    pub fn save_item(&self, job: &str, run: &str, shard: &str, state: &ShardState) -> TransactWriteItem {
        let now = self.clock.now_ms();
        let mut update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(checkpoint_key(job, run, shard)))
            .expression_attribute_names("#s", STATE)
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
        TransactWriteItem::builder().update(update.build().expect("update has table, key and expression")).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_state_is_start_done_or_a_cursor_that_decodes() {
        assert_eq!(ShardState::stored(None).unwrap(), ShardState::Start);
        assert_eq!(ShardState::stored(Some(DONE)).unwrap(), ShardState::Done);
        let c = Cursor::encode(&crate::item::Item::from([("pk".to_string(), av_s("t1"))])).unwrap();
        assert_eq!(ShardState::stored(Some(c.as_str())).unwrap(), ShardState::Resume(c.clone()));
        assert!(ShardState::stored(Some("not a cursor!")).is_err());
    }
}
