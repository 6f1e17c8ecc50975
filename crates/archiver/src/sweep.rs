//! The archive sweep: per due shard ([`crate::probe`] finds them), batch by batch, the crash-safe
//! move to S3.
//!
//! ## One batch (a page of `shard = :s AND tsid < :cutoff`, from the shard's checkpoint)
//! 1. **Intent**, fenced: the object key and the exact rows (their `tsid`s) and the cursor after
//!    the page ([`crate::intent`]).
//! 2. **Object**: gzip NDJSON at the intent's key, checksum verified by S3.
//! 3. **Deletes**: each row with DeleteItem conditional on `tsid = :archived`. A row rewritten
//!    since it was read has a new `tsid` (the feed keeps the last write per entity: a rewrite
//!    replaces the row): its delete fails, it stays, and its new version is archived when due.
//!    Nothing newer than what an object holds is ever deleted.
//! 4. **Position**, fenced: the checkpoint moves past the page and the intent is deleted, in one
//!    transaction.
//!
//! ## A crash, at each step
//! - before 1: nothing happened; the page is read again.
//! - between 1 and 2: the next sweep finds the intent, sees no object at its key (S3 reads after
//!   writes are strongly consistent), re-reads the listed rows by key, keeps those still at the
//!   listed version, and writes them at the intent's key: never a second key for one batch.
//! - between 2 and 4: the next sweep finds the intent and the object, and deletes the listed
//!   versions (those already deleted, or rewritten, fail their condition and are left alone).
//! - after 4: done.

use std::collections::HashMap;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::budget::Budget;
use tickwork::capacity::Item;
use tickwork::changes::TSID;
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::pager::{for_each_page, Cursor, Page, PageError, PageRun};
use tickwork::schema::{av_s, get_s, PK};
use tickwork::DbError;

use crate::deps::Deps;
use crate::intent::{self, Intent};
use crate::object;
use crate::probe::due_query;
use crate::report::ArchiveError;

/// Checkpoint run name: one rolling position per shard.
pub const RUN: &str = "current";

/// Rows deleted at once per batch.
const DELETE_CONCURRENCY: usize = 16;

/// What archiving one shard did.
#[derive(Debug, Default)]
pub(crate) struct ShardResult {
    pub rows: u64,
    pub objects: u64,
    pub kept: u64,
    pub recovered: u64,
    pub drained: bool,
    pub lost: bool,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum BatchFail {
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("lease lost")]
    Lost,
}

impl From<DbError> for BatchFail {
    fn from(e: DbError) -> Self {
        BatchFail::Archive(e.into())
    }
}

/// Archives every due shard (bounded concurrency); every shard's result is collected before an
/// error is returned.
pub(crate) async fn archive(
    deps: &Deps,
    fence: &Fence,
    shards: &[u32],
    cutoff: &str,
    budget: &dyn Budget,
) -> Result<Vec<ShardResult>, ArchiveError> {
    let states = deps.checkpoints.read(crate::config::JOB, RUN).await?;
    let runs: Vec<BoxFuture<'_, Result<ShardResult, ArchiveError>>> = shards
        .iter()
        .map(|&k| {
            let state = Checkpoints::state_of(&states, &k.to_string()).clone();
            Box::pin(archive_shard(deps, fence, k, cutoff, state, budget)) as BoxFuture<'_, _>
        })
        .collect();
    let results: Vec<Result<ShardResult, ArchiveError>> =
        stream::iter(runs).buffer_unordered(deps.cfg.shard_concurrency).collect().await;
    let mut out = Vec::new();
    let mut first_error = None;
    for r in results {
        match r {
            Ok(r) => out.push(r),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

async fn archive_shard(
    deps: &Deps,
    fence: &Fence,
    k: u32,
    cutoff: &str,
    state: ShardState,
    budget: &dyn Budget,
) -> Result<ShardResult, ArchiveError> {
    let mut res = ShardResult::default();
    let mut state = state;
    if let Some(intent) = intent::read(&deps.db, deps.leases.table(), k).await? {
        tracing::warn!(shard = k, key = %intent.key, rows = intent.rows.len(), "finishing a batch an earlier sweep left");
        match finish(deps, fence, k, &intent, None).await {
            Ok(n) => {
                res.recovered += 1;
                res.kept += intent.rows.len() as u64 - n;
                state = intent.next.clone().map(ShardState::Resume).unwrap_or(ShardState::Start);
            }
            Err(BatchFail::Lost) => {
                res.lost = true;
                return Ok(res);
            }
            Err(BatchFail::Archive(e)) => return Err(e),
        }
    }
    let label = format!("archive shard {k}");
    let res_cell = std::sync::Mutex::new(res);
    let run = for_each_page(
        &deps.db,
        due_query(deps, k, cutoff),
        state.cursor(),
        deps.cfg.page_size,
        budget,
        &label,
        |page: Page| {
            let res = &res_cell;
            async move {
                if page.items.is_empty() {
                    return position(deps, fence, k, page.next, vec![]).await;
                }
                let deleted = batch(deps, fence, k, page.items.clone(), page.next).await?;
                let mut r = res.lock().expect("res");
                r.rows += deleted;
                r.kept += page.items.len() as u64 - deleted;
                r.objects += 1;
                Ok(())
            }
        },
    )
    .await;
    let mut res = res_cell.into_inner().expect("res");
    match run {
        Ok(PageRun::Exhausted { .. }) => res.drained = true,
        Ok(PageRun::Stopped { .. }) => {}
        Err(PageError::Handler(BatchFail::Lost)) => res.lost = true,
        Err(PageError::Handler(BatchFail::Archive(e))) => return Err(e),
        Err(PageError::Db(e)) => return Err(e.into()),
        Err(PageError::Cursor(c)) => return Err(c.into()),
    }
    Ok(res)
}

/// Steps 1 to 4 for one page; returns the rows deleted.
async fn batch(deps: &Deps, fence: &Fence, k: u32, items: Vec<Item>, next: Option<Cursor>) -> Result<u64, BatchFail> {
    let rows: Vec<String> = items.iter().filter_map(|i| get_s(i, TSID)).map(str::to_string).collect();
    let (first, last) = (rows.first().cloned().unwrap_or_default(), rows.last().cloned().unwrap_or_default());
    let intent = Intent { key: object::object_key(&deps.cfg.prefix, &deps.table, k, &first, &last), rows, next };
    // 1. What this batch is about to become, before it becomes it.
    match fenced_write(&deps.db, fence, vec![intent::put(deps.leases.table(), k, &intent)]).await? {
        Fenced::Written => {}
        _ => return Err(BatchFail::Lost),
    }
    finish(deps, fence, k, &intent, Some(items)).await
}

/// Steps 2 to 4 for an intent: the object (written now when `items` is given; when recovering,
/// written only if it is missing, from the listed rows still at their listed version), the
/// conditional deletes, the position. Returns the rows deleted.
async fn finish(
    deps: &Deps,
    fence: &Fence,
    k: u32,
    intent: &Intent,
    items: Option<Vec<Item>>,
) -> Result<u64, BatchFail> {
    let bucket = &deps.cfg.bucket;
    match items {
        Some(items) => object::put_batch(&deps.s3, bucket, &intent.key, &items).await?,
        None if object::exists(&deps.s3, bucket, &intent.key).await? => {}
        None => {
            // The put never happened, so no delete did either: the rows still at their listed
            // version are the batch.
            let rows = reload(deps, &intent.rows).await?;
            if !rows.is_empty() {
                object::put_batch(&deps.s3, bucket, &intent.key, &rows).await?;
            }
        }
    }
    let deleted = delete_versions(deps, &intent.rows).await?;
    position(deps, fence, k, intent.next.clone(), vec![intent::delete(deps.leases.table(), k)]).await?;
    Ok(deleted)
}

/// Step 4: the shard's position after a batch (the start again once drained), with `extra`.
async fn position(
    deps: &Deps,
    fence: &Fence,
    k: u32,
    next: Option<Cursor>,
    extra: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
) -> Result<(), BatchFail> {
    let st = next.map(ShardState::Resume).unwrap_or(ShardState::Start);
    match deps.checkpoints.save_with(fence, RUN, &k.to_string(), &st, extra).await? {
        Fenced::Written => Ok(()),
        _ => Err(BatchFail::Lost),
    }
}

/// The row's key from its sort key (`<13-digit ms>#<pk>`).
fn pk_of(tsid: &str) -> &str {
    tsid.split_once('#').map(|(_, pk)| pk).unwrap_or(tsid)
}

/// Deletes each listed version, conditional on the row still being that version.
async fn delete_versions(deps: &Deps, rows: &[String]) -> Result<u64, ArchiveError> {
    let deletes: Vec<BoxFuture<'_, Result<bool, DbError>>> = rows
        .iter()
        .map(|tsid| {
            Box::pin(async move {
                let req = deps
                    .db
                    .client()
                    .delete_item()
                    .table_name(&deps.table)
                    .key(PK, av_s(pk_of(tsid)))
                    .condition_expression("#tsid = :tsid")
                    .expression_attribute_names("#tsid", TSID)
                    .expression_attribute_values(":tsid", av_s(tsid));
                // `false`: rewritten since it was read (or already deleted), not this version any more.
                tickwork::error::condition_held(deps.db.delete(req).await)
            }) as BoxFuture<'_, _>
        })
        .collect();
    let results: Vec<Result<bool, DbError>> =
        stream::iter(deletes).buffer_unordered(DELETE_CONCURRENCY).collect().await;
    let mut n = 0;
    for r in results {
        n += u64::from(r?);
    }
    Ok(n)
}

/// The listed rows still at their listed version, in the listed order (strongly consistent
/// BatchGetItem, 100 keys a request, unprocessed keys retried).
async fn reload(deps: &Deps, rows: &[String]) -> Result<Vec<Item>, ArchiveError> {
    let keys: Vec<Item> = rows.iter().map(|t| Item::from([(PK.to_string(), av_s(pk_of(t)))])).collect();
    let mut found: HashMap<String, Item> = HashMap::new();
    for item in deps.db.batch_get_all(&deps.table, keys, true, 10).await? {
        if let Some(t) = get_s(&item, TSID) {
            found.insert(t.to_string(), item);
        }
    }
    Ok(rows.iter().filter_map(|t| found.remove(t)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_key_comes_from_its_sort_key() {
        assert_eq!(pk_of("1764374400000#order#1"), "order#1");
        assert_eq!(pk_of("1764374400000#a#b#c"), "a#b#c");
    }
}
