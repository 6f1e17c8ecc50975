//! One due shard fired under its own lease: its first record read (nothing due, done there), its
//! lease taken, its due records paged from its cursor ([`crate::fire_page`]), its lease let go.

use std::time::Duration;

use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::lease::{Acquire, Fence};
use tickwork::schedules::ShardCursor;

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

/// How long a due shard's lease is taken for when the job's lease has `left_ms` to run: no longer
/// than the job's; none once too little is left to work under it (twice the clock skew, as a
/// lease's own shortest TTL, [`tickwork::lease::LeaseConfig::new`]). Pure.
pub(crate) fn shard_lease_ttl(ttl: Duration, left_ms: i64, skew: Duration) -> Option<Duration> {
    (left_ms > 2 * skew.as_millis() as i64).then(|| ttl.min(Duration::from_millis(left_ms as u64)))
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
    let Some(ttl) = shard_lease_ttl(deps.cfg.lease.ttl, job_until_ms - deps.clock.now_ms(), skew) else {
        return Ok(ShardEnd::Stopped);
    };
    let cfg = tickwork::lease::LeaseConfig { ttl, ..due_lease(deps, k) };
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
        let (page, next) = s.due_page_after(k, cursor, now_ms, FIRE_PAGE).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_lease_lasts_no_longer_than_the_jobs_and_none_is_taken_at_its_end() {
        let (ttl, skew) = (Duration::from_secs(840), Duration::from_secs(2));
        assert_eq!(shard_lease_ttl(ttl, 900_000, skew), Some(ttl), "the job's lease has longer: the usual TTL");
        assert_eq!(shard_lease_ttl(ttl, 60_000, skew), Some(Duration::from_secs(60)), "what is left of the job's");
        assert_eq!(shard_lease_ttl(ttl, 4_001, skew), Some(Duration::from_millis(4_001)));
        assert_eq!(shard_lease_ttl(ttl, 4_000, skew), None, "twice the skew: too little to work under");
        assert_eq!(shard_lease_ttl(ttl, -5, skew), None, "the job's lease has lapsed");
    }
}
