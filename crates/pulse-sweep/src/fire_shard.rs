//! One due shard fired under its own lease: its first record read (nothing due, done there), its
//! lease taken, its due records paged from its cursor ([`crate::fire_page`]), its lease let go.

use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::lease::{Acquire, Fence};
use tickwork::schedules::{DueRecord, ShardCursor};

use crate::deps::Deps;
use crate::fire_page::{fire_page, FIRE_PAGE};
use crate::fire_write::Wrote;
use crate::report::{PulseError, Report};

/// Times a shard is read again in one tick when writers keep adding records to it.
const REREADS: u32 = 3;
/// How one due shard's firing ended.
pub(crate) enum ShardEnd {
    /// Every record due in it done, its cursor as left, and its earliest record after it when
    /// already known (a shard with nothing due: `Some`, found by its first read).
    Done(ShardCursor, Option<Option<i64>>),
    /// Its lease held by another invocation (one still firing it, or one that died holding it
    /// until the lease expires), or the budget stopped it: left to the wake a minute on.
    Stopped,
    /// Its lease moved on under it: the job's did too.
    LeaseLost,
}
/// The lease of due shard `k` (`lease#<job>#due#<k>`): each shard's transactions are fenced by
/// their own lease, so the shards fire at once. One lease for them all would be an item in every
/// shard's transactions, and DynamoDB cancels a transaction holding an item another ongoing
/// transaction holds ("Transaction conflict handling in DynamoDB", Developer Guide: "An item
/// within a TransactWriteItems request is part of another ongoing TransactWriteItems request"),
/// a ConditionCheck included.
pub fn due_lease(deps: &Deps, k: u32) -> tickwork::lease::LeaseConfig {
    tickwork::lease::LeaseConfig { job: format!("{}#due#{k}", deps.cfg.job), ..deps.cfg.lease.clone() }
}
/// Due shard `k`: its cursor and first page read; nothing due, done without its lease; else its
/// lease taken, the shard fired page by page under it within the lease's safe end, and the lease
/// let go (a wake or the next tick takes it again).
pub(crate) async fn fire_shard(
    deps: &Deps,
    (owner, job_until_ms): (&str, i64),
    now_ms: i64,
    k: u32,
    (mut cursor, read_at): (ShardCursor, i64),
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<ShardEnd, PulseError> {
    let s = &deps.schedules;
    match s.first_after(k, &cursor).await? {
        Some(at) if at <= now_ms => {}
        first => return Ok(ShardEnd::Done(cursor, Some(first))),
    }
    // Held no longer than the job's lease: a shard lease left by an invocation that died late in
    // its run would otherwise hold the next tick's shard off (each a wake a minute, until it
    // lapsed), and none is taken once the job's lease is too near its end to work under.
    let skew = deps.cfg.lease.clock_skew;
    let left = job_until_ms - deps.clock.now_ms();
    if left <= 2 * skew.as_millis() as i64 {
        return Ok(ShardEnd::Stopped);
    }
    let cfg = tickwork::lease::LeaseConfig {
        ttl: deps.cfg.lease.ttl.min(std::time::Duration::from_millis(left as u64)),
        ..due_lease(deps, k)
    };
    let lease = match deps.leases.acquire(&cfg, owner).await? {
        Acquire::Acquired(l) => l,
        Acquire::Held { owner: holder, until_ms, .. } => {
            tracing::warn!(shard = k, holder = %holder, until_ms, "a due shard's lease is held: the shard waits for a wake");
            return Ok(ShardEnd::Stopped);
        }
    };
    let fence = lease.fence(&deps.tables.control);
    let lease_end = Deadline::new(deps.clock.clone(), lease.safe_until_ms(skew), deps.cfg.margin.as_millis() as i64);
    let within = AnyOf(vec![budget, &lease_end]);
    let end = async {
        // Read under the lease: a holder before it may have moved the cursor since.
        if lease.held_since(read_at, skew) {
            cursor = s.shard_cursor(k).await?;
        }
        Box::pin(page_shard(deps, &fence, now_ms, k, &mut cursor, &within, report)).await
    }
    .await;
    if !matches!(end, Ok(ShardEnd::LeaseLost)) {
        if let Err(e) = deps.leases.release(&lease).await {
            tracing::warn!(shard = k, error = %e, "a due shard's lease not let go: it waits for its expiry");
        }
    }
    Ok(match end? {
        ShardEnd::Done(..) => ShardEnd::Done(cursor, None),
        other => other,
    })
}

/// A page of due records after `cursor` in shard `k`, and the key to go on from.
async fn due_page_from(
    deps: &Deps,
    k: u32,
    cursor: &ShardCursor,
    now_ms: i64,
) -> Result<(DuePage, Option<tickwork::pager::Cursor>), PulseError> {
    let s = &deps.schedules;
    let start = cursor
        .cur
        .as_deref()
        .map(|c| tickwork::pager::Cursor::encode(&s.due_key(k, c)))
        .transpose()
        .map_err(|e| PulseError::Db(tickwork::DbError::Invalid(e.to_string())))?;
    Ok(s.due_page(k, now_ms, FIRE_PAGE, start.as_ref()).await?)
}

/// Records of a due page, or what did not read of one.
type DuePage = Vec<Result<DueRecord, (tickwork::item::Item, String)>>;

/// Shard `k`'s due records from `cursor`, a page at a time, each page's writes fenced by the
/// shard's lease.
async fn page_shard(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<ShardEnd, PulseError> {
    let s = &deps.schedules;
    let mut rereads = 0;
    loop {
        if budget.exhausted() {
            return Ok(ShardEnd::Stopped);
        }
        let (page, next) = due_page_from(deps, k, cursor, now_ms).await?;
        // Boxed, as the pages' own futures below: a page's reads and writes held inline made
        // the sweep's future outgrow a test thread's stack.
        let last_try = rereads >= REREADS;
        match Box::pin(fire_page(deps, fence, now_ms, k, cursor, page, last_try, budget, report)).await? {
            Wrote::On | Wrote::SetAside if next.is_some() => {}
            Wrote::On | Wrote::SetAside | Wrote::Halted => return Ok(ShardEnd::Done(cursor.clone(), None)),
            // A writer put a record after the cursor since it was read, or a record or its
            // group changed under the sweep: read the shard again from the cursor (a few
            // times; at the last, a record still refused is set an hour aside).
            Wrote::Reread if rereads < REREADS => {
                rereads += 1;
                *cursor = s.shard_cursor(k).await?;
            }
            Wrote::Reread => {
                tracing::warn!(shard = k, "a due shard kept changing under the sweep: left to the next tick");
                return Ok(ShardEnd::Done(cursor.clone(), None));
            }
            Wrote::Stopped => return Ok(ShardEnd::Stopped),
            Wrote::LeaseLost => return Ok(ShardEnd::LeaseLost),
        }
    }
}
