//! Schedules' fires: at a tick where the state item says a schedule is due (`sched_next`), every
//! due record of every due shard ([`tickwork::schedules::store`]) is read page by page. A record
//! is a group's (tenants sharing a zone, spec, policy, name and spread offset): it is planned once
//! ([`tickwork::schedules::plan`]), and its members are read a page at a time and fired as their
//! tenants stand now. Beside the calendar's runs, not woven into them: the sweep calls this after
//! its groups.
//!
//! The due shards fire at once, each under a lease of its own ([`due_lease`]) taken only when it
//! has a record due: the shards' transactions share no item, so they do not cancel each other,
//! and a burst's writes go to every due partition at once. A shard whose lease another invocation
//! holds is left to the wake a minute on, as one the budget stopped.
//!
//! ## A shard, in order
//! 1. Its cursor (GetItem), then the due records after it (strongly consistent Query from the
//!    cursor, key condition `sk < <now + 1>`), a page at a time (the first before its lease: a
//!    shard with nothing due costs no lease); each record planned, and its
//!    successor decided ([`tickwork::schedules::successor`]: put before the transaction when it
//!    depends on the record alone; in a backlog, in it, unless an attempt before put the record's
//!    own, read first).
//! 2. Each record's first page of members (Query, strongly consistent, concurrently), and their
//!    tenants (BatchGetItem, strongly consistent, 100 a request).
//! 3. Per chunk of records, in order: the successors that depend on their records alone put
//!    (BatchWriteItem), then one transaction fenced by the shard's lease of the fires as batch items of kind
//!    [`SCHED_KIND`] (each unit keyed `sched#<tenant>#<name>#<occurrence>`; the members of one
//!    occurrence share one set, so a fire costs its tenant id's bytes), each record's end
//!    ([`RecordEnd`]), and the shard cursor moved past the chunk's last record, conditional on the
//!    cursor read. All or nothing: a fire is queued exactly when the cursor moves past its record,
//!    so a crash anywhere repeats nothing and loses nothing; a successor put before a crash is put
//!    again, the same, by the next attempt.
//! 4. A group larger than a page goes on alone before the records after it, a page and a
//!    transaction at a time, its member cursor in its record (a crash resumes after the last page
//!    written); its last page's transaction moves the shard cursor past it.
//!
//! A group that cannot be planned (a zone the tz database does not know) is set an hour ahead in
//! the same transaction and counted as a failed unit; a member whose item or tenant does not read
//! is counted and logged, and the rest of the group fired; a record that does not read at all is
//! set aside whole ([`tickwork::schedules::quarantine`]) in the transaction that passes it, counted
//! and logged with its group, for `tickctl schedules doctor` to show and repair. A chunk whose
//! cursor move a writer's count refused goes again at once when the cursor, read again, has not
//! moved and the range the move passes holds only the chunk's records (the writer's record is due
//! later: [`tickwork::schedules::Schedules::recount`]); else the shard is read again, and a chunk
//! that keeps being changed under the sweep stops its shard until the next tick (the cursor cannot
//! pass it). When every due record is done, `sched_next` becomes
//! the earliest record after the cursors, unless a batch of writers' records was counted since
//! the state item was read (`tickwork::schedules::lowering`).

use std::collections::HashMap;

use futures::stream::{self, StreamExt};
use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::lease::{Acquire, Fence};
use tickwork::schedules::{
    plan, plan_own, successor, DueRecord, Quarantined, RecordEnd, ShardCursor, Successor, DUE_SHARDS,
};

use crate::deps::Deps;
use crate::fire_plan::{page_end, Action, Planned, Segment, TenantRead};
use crate::fire_reads::{read_page, read_tenants};
use crate::fire_write::{sk_of, write_chunk, Wrote};
use crate::report::{PulseError, Report};

pub use crate::fire_write::fire_items;
pub use tickwork::schedules::SCHED_KIND;

/// Due records read a page.
pub const FIRE_PAGE: i32 = 200;

/// Records whose pages are gathered for one transaction: a page of due records. A daily group's
/// record writes nothing in it (its successor is put before it), so a page of distinct timers is
/// one transaction; records that do (a one-off retired, its members and definitions deleted with
/// it) are split into as many transactions as DynamoDB's 100 items a transaction need
/// ([`crate::fire_write::split_at`]).
pub const FIRE_CHUNK: usize = FIRE_PAGE as usize;

/// How firing ended.
pub(crate) enum FireEnd {
    /// Every due record done; `sched_next` set to this (the earliest record left).
    Done(Option<i64>),
    /// The budget stopped it, or a shard's lease was held (`sched_next` is left as it was: a wake
    /// a minute on goes on).
    Stopped,
    /// The lease moved on.
    LeaseLost,
}

/// The order a tick at `now_ms` starts the due shards in (they fire at once, but the first started
/// is the first served when the budget runs short), ticks every `interval_ms`: from the shard
/// after the one the previous regular tick started at, moved on a shard more for each whole
/// minute a wake runs past its tick. So [`DUE_SHARDS`] consecutive ticks start at each shard once,
/// whatever the interval, and a chain of wakes a minute (or five) apart rotates too. A tick its
/// budget stops keeps each shard's cursor, but from a fixed shard 0 the next tick would spend its
/// budget on the first shards again and never reach the last ones under a steady load. Pure.
pub(crate) fn shard_order(now_ms: i64, interval_ms: i64) -> impl Iterator<Item = u32> {
    let interval = interval_ms.max(60_000);
    let ticks = now_ms.div_euclid(interval);
    let minutes = now_ms.rem_euclid(interval) / 60_000;
    let first = (ticks + minutes).rem_euclid(i64::from(DUE_SHARDS)) as u32;
    (0..DUE_SHARDS).map(move |i| (first + i) % DUE_SHARDS)
}

/// Times a shard is read again in one tick when writers keep adding records to it.
const REREADS: u32 = 3;

/// How one due shard's firing ended.
enum ShardEnd {
    /// Every record due in it done, its cursor as left.
    Done(ShardCursor),
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

/// Fires every record due at `now_ms`, the due shards at once, each under its own lease taken by
/// `owner` (the holder of the sweep's lease) when it has a record due: no shard waits behind
/// another, and a burst's writes go to every due partition at once.
pub(crate) async fn fire_due(
    deps: &Deps,
    owner: &str,
    now_ms: i64,
    adds_seen: i64,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<FireEnd, PulseError> {
    let s = &deps.schedules;
    let shards = shard_order(now_ms, deps.cfg.policy.interval_ms).map(|k| async move {
        let mut r = Report::default();
        let end = Box::pin(fire_shard(deps, owner, now_ms, k, budget, &mut r)).await;
        (k, end, r)
    });
    let mut cursors: Vec<ShardCursor> = vec![ShardCursor::default(); DUE_SHARDS as usize];
    let (mut stopped, mut lost, mut failed) = (false, false, None);
    for (k, end, r) in futures::future::join_all(shards).await {
        report.absorb_fires(&r);
        match end {
            Ok(ShardEnd::Done(c)) => cursors[k as usize] = c,
            Ok(ShardEnd::Stopped) => stopped = true,
            Ok(ShardEnd::LeaseLost) => lost = true,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if lost {
        return Ok(FireEnd::LeaseLost);
    }
    if stopped {
        return Ok(FireEnd::Stopped);
    }
    // Records isolated as failed are set an hour ahead: the earliest may be one of them, and the
    // tick an hour on reads them again (and reports them again).
    let mut adds = adds_seen;
    let mut earliest = s.earliest(&cursors).await?;
    for attempt in 1..=SET_ATTEMPTS {
        if s.set_next(earliest, adds).await? || attempt == SET_ATTEMPTS {
            break;
        }
        // A batch of writers' records was counted since `adds` was read: read the count again
        // (strongly), then the shards, and set again. Left refused, `sched_next` stays where it
        // was, in the past, and every tick reads the shards until one sets it: under steady
        // writes that was every tick.
        adds = deps.marks.read_strong(&deps.cfg.job).await?.sched_adds;
        earliest = s.earliest(&cursors).await?;
    }
    Ok(FireEnd::Done(earliest))
}

/// Due shard `k`: its cursor and first page read; nothing due, done without its lease; else its
/// lease taken, the shard fired page by page under it within the lease's safe end, and the lease
/// let go (a wake or the next tick takes it again).
async fn fire_shard(
    deps: &Deps,
    owner: &str,
    now_ms: i64,
    k: u32,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<ShardEnd, PulseError> {
    let s = &deps.schedules;
    let read_at = deps.clock.now_ms();
    let mut cursor = s.shard_cursor(k).await?;
    let mut first = Some(due_page_from(deps, k, &cursor, now_ms).await?);
    if first.as_ref().is_some_and(|(page, _)| page.is_empty()) {
        return Ok(ShardEnd::Done(cursor));
    }
    let lease = match deps.leases.acquire(&due_lease(deps, k), owner).await? {
        Acquire::Acquired(l) => l,
        Acquire::Held { owner: holder, until_ms, .. } => {
            tracing::warn!(shard = k, holder = %holder, until_ms, "a due shard's lease is held: the shard waits for a wake");
            return Ok(ShardEnd::Stopped);
        }
    };
    // Read under the lease: a holder before it may have moved the cursor since.
    if lease.held_since(read_at, deps.cfg.lease.clock_skew) {
        cursor = s.shard_cursor(k).await?;
        first = None;
    }
    let fence = lease.fence(&deps.tables.control);
    let lease_end = Deadline::new(
        deps.clock.clone(),
        lease.safe_until_ms(deps.cfg.lease.clock_skew),
        deps.cfg.margin.as_millis() as i64,
    );
    let within = AnyOf(vec![budget, &lease_end]);
    let end = Box::pin(page_shard(deps, &fence, now_ms, k, &mut cursor, first, &within, report)).await;
    if !matches!(end, Ok(ShardEnd::LeaseLost)) {
        if let Err(e) = deps.leases.release(&lease).await {
            tracing::warn!(shard = k, error = %e, "a due shard's lease not let go: it waits for its expiry");
        }
    }
    Ok(match end? {
        ShardEnd::Done(_) => ShardEnd::Done(cursor),
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

/// Shard `k`'s due records from `cursor`, a page at a time (`first`, when read already), each
/// page's writes fenced by the shard's lease.
#[allow(clippy::too_many_arguments)]
async fn page_shard(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    mut first: Option<(DuePage, Option<tickwork::pager::Cursor>)>,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<ShardEnd, PulseError> {
    let s = &deps.schedules;
    let mut rereads = 0;
    loop {
        if budget.exhausted() {
            return Ok(ShardEnd::Stopped);
        }
        let (page, next) = match first.take() {
            Some(p) => p,
            None => due_page_from(deps, k, cursor, now_ms).await?,
        };
        // Boxed, as the pages' own futures below: a page's reads and writes held inline made
        // the sweep's future outgrow a test thread's stack.
        let last_try = rereads >= REREADS;
        match Box::pin(fire_page(deps, fence, now_ms, k, cursor, page, last_try, budget, report)).await? {
            Wrote::On | Wrote::SetAside if next.is_some() => {}
            Wrote::On | Wrote::SetAside | Wrote::Halted => return Ok(ShardEnd::Done(cursor.clone())),
            // A writer put a record after the cursor since it was read, or a record or its
            // group changed under the sweep: read the shard again from the cursor (a few
            // times; at the last, a record still refused is set an hour aside).
            Wrote::Reread if rereads < REREADS => {
                rereads += 1;
                *cursor = s.shard_cursor(k).await?;
            }
            Wrote::Reread => {
                tracing::warn!(shard = k, "a due shard kept changing under the sweep: left to the next tick");
                return Ok(ShardEnd::Done(cursor.clone()));
            }
            Wrote::Stopped => return Ok(ShardEnd::Stopped),
            Wrote::LeaseLost => return Ok(ShardEnd::LeaseLost),
        }
    }
}

/// Times `sched_next` is set again in a tick when batches of writers' records keep being counted.
const SET_ATTEMPTS: u32 = 3;

/// One due record read, or one that does not read, to be set aside as the cursor passes it.
enum Step {
    Seg(Box<Segment>),
    Bad(Box<Quarantined>),
}

/// One page of shard `k`'s due records, in order, the shard's `cursor` moved as they are done.
#[allow(clippy::too_many_arguments)]
async fn fire_page(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    page: Vec<Result<DueRecord, (tickwork::item::Item, String)>>,
    last_try: bool,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let steps: Vec<Result<Step, PulseError>> = stream::iter(page.into_iter().map(|r| async move {
        let rec = match r {
            Ok(r) => r,
            Err((item, problem)) => return Ok(Step::Bad(Box::new(Quarantined::of(item, problem, now_ms)))),
        };
        let planned = match Box::pin(plan_record(deps, &rec, now_ms)).await? {
            Ok(p) => p,
            Err(why) => return Ok(Step::Seg(Box::new(Segment { rec, action: Action::Isolate(why) }))),
        };
        let read = Box::pin(read_page(deps, &rec, &planned)).await?;
        Ok(Step::Seg(Box::new(Segment { rec, action: Action::Page(Box::new(planned), read) })))
    }))
    .buffered(deps.cfg.fire_concurrency)
    .collect()
    .await;
    let steps: Vec<Step> = steps.into_iter().collect::<Result<_, _>>()?;
    let segs: Vec<&Segment> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Seg(s) => Some(&**s),
            Step::Bad(_) => None,
        })
        .collect();
    let tenants = Box::pin(read_tenants(deps, &segs)).await?;
    // In order: complete records gathered into chunks; a group larger than a page goes on alone
    // (the records before it written first), so the cursor only ever passes records done.
    let mut pending: Vec<Segment> = Vec::new();
    let mut bad: Vec<Quarantined> = Vec::new();
    let mut to: Option<String> = None;
    for step in steps {
        // What goes first: the chunk so far, when a page of copies is full (a copy is an item of
        // the transaction: a page of them would pass its 100), a chunk is full, or a group goes
        // on alone.
        let (seg, flush_first) = match step {
            Step::Bad(q) => {
                to = Some(q.from.1.clone());
                bad.push(*q);
                (None, bad.len() == FIRE_CHUNK)
            }
            Step::Seg(seg) => {
                let first = advances(&seg) || pending.len() == FIRE_CHUNK;
                (Some(*seg), first)
            }
        };
        if flush_first {
            let flushed = flush(
                deps,
                fence,
                now_ms,
                k,
                cursor,
                (&mut pending, &mut bad),
                &mut to,
                &tenants,
                last_try,
                budget,
                report,
            );
            match Box::pin(flushed).await? {
                Wrote::On | Wrote::SetAside => {}
                other => return Ok(other),
            }
        }
        let Some(seg) = seg else { continue };
        let sk = sk_of(deps, &seg.rec);
        let alone = advances(&seg);
        if alone {
            match Box::pin(run_alone(deps, fence, now_ms, k, cursor, seg, &tenants, last_try, budget, report)).await? {
                Wrote::On | Wrote::SetAside => continue,
                other => return Ok(other),
            }
        }
        pending.push(seg);
        to = Some(sk);
    }
    let last =
        flush(deps, fence, now_ms, k, cursor, (&mut pending, &mut bad), &mut to, &tenants, last_try, budget, report);
    Box::pin(last).await
}

/// A record's plan and successor: `Err` naming why it cannot be planned. A group whose first page
/// was written keeps the instant it was planned at. In a backlog, the record's own successor is
/// read first: put by an attempt before, it goes on, and the record fires its own occurrence only.
async fn plan_record(deps: &Deps, rec: &DueRecord, now_ms: i64) -> Result<Result<Planned, String>, PulseError> {
    let policy = &deps.cfg.policy;
    let at = rec.plan_at.unwrap_or(now_ms);
    let why = |e: tickwork::schedules::SpecError| format!("cannot be planned: {e}");
    let p = match plan(rec, at, policy) {
        Ok(p) => p,
        Err(e) => return Ok(Err(why(e))),
    };
    let succ = match successor(rec, &p, now_ms) {
        Ok(s) => s,
        Err(e) => return Ok(Err(why(e))),
    };
    if let Successor::Within { check, .. } = &succ {
        if deps.schedules.record_exists(check.key(deps.schedules.job())).await? {
            return Ok(plan_own(rec, at, policy).map(|plan| Planned { plan, successor: Successor::None }).map_err(why));
        }
    }
    Ok(Ok(Planned { plan: p, successor: succ }))
}

/// `seg`'s page is not its group's last.
fn advances(seg: &Segment) -> bool {
    match &seg.action {
        Action::Page(p, read) => matches!(page_end(&seg.rec, p, read), RecordEnd::Advance(_)),
        Action::Isolate(_) => false,
    }
}

/// Writes the `pending` records (the cursor moved to `to`), in chunks that fit a transaction, and
/// sets aside the records passed that did not read.
#[allow(clippy::too_many_arguments)]
async fn flush(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    (pending, bad): (&mut Vec<Segment>, &mut Vec<Quarantined>),
    to: &mut Option<String>,
    tenants: &HashMap<String, TenantRead>,
    last_try: bool,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let Some(target) = to.take() else { return Ok(Wrote::On) };
    let (chunk, bad) = (std::mem::take(pending), std::mem::take(bad));
    let w = write_chunk(deps, fence, now_ms, k, cursor, (chunk, bad), &target, tenants, last_try, budget, report);
    Box::pin(w).await
}

/// A group larger than a page, from `seg` (its first page, read) to its last page, each page its
/// own transaction; the last moves the shard cursor past it.
#[allow(clippy::too_many_arguments)]
async fn run_alone(
    deps: &Deps,
    fence: &Fence,
    now_ms: i64,
    k: u32,
    cursor: &mut ShardCursor,
    mut seg: Segment,
    tenants: &HashMap<String, TenantRead>,
    last_try: bool,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<Wrote, PulseError> {
    let sk = sk_of(deps, &seg.rec);
    let mut own_tenants = None;
    loop {
        let t = own_tenants.as_ref().unwrap_or(tenants);
        let Action::Page(planned, read) = &seg.action else { unreachable!("a set-aside record has one page") };
        let end = page_end(&seg.rec, planned, read);
        let to = if matches!(end, RecordEnd::Advance(_)) { "" } else { sk.as_str() };
        let (rec, planned) = (seg.rec.clone(), (**planned).clone());
        let w = write_chunk(deps, fence, now_ms, k, cursor, (vec![seg], Vec::new()), to, t, last_try, budget, report);
        match Box::pin(w).await? {
            Wrote::On => {}
            Wrote::SetAside => return Ok(Wrote::On),
            other => return Ok(other),
        }
        let RecordEnd::Advance(last) = end else { return Ok(Wrote::On) };
        if budget.exhausted() {
            return Ok(Wrote::Stopped);
        }
        let rec = DueRecord { cursor: Some(last), plan_at: Some(rec.plan_at.unwrap_or(now_ms)), ..rec };
        let read = Box::pin(read_page(deps, &rec, &planned)).await?;
        seg = Segment { rec, action: Action::Page(Box::new(planned), read) };
        own_tenants = Some(Box::pin(read_tenants(deps, &[&seg])).await?);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_consecutive_ticks_start_at_each_shard_whatever_the_interval_and_wakes_rotate_too() {
        let start = 1_764_576_000_000; // 2025-12-01T08:00Z
        for every_min in [1, 4, 15, 20, 60] {
            let interval = i64::from(every_min) * 60_000;
            let n = i64::from(DUE_SHARDS);
            for from in 0..3 {
                let firsts: std::collections::BTreeSet<u32> =
                    (from..from + n).map(|i| shard_order(start + i * interval, interval).next().unwrap()).collect();
                assert_eq!(firsts.len(), DUE_SHARDS as usize, "every {every_min} min: {firsts:?}");
            }
            let mut all: Vec<u32> = shard_order(start, interval).collect();
            all.sort_unstable();
            assert_eq!(all, (0..DUE_SHARDS).collect::<Vec<_>>(), "each tick fires every shard");
        }
        // Wakes a minute apart within a quarter-hour, and five minutes apart: each starts at the
        // next shard.
        let q = 900_000;
        for step in [60_000, 300_000] {
            let firsts: Vec<u32> = (1..4).map(|i| shard_order(start + i * step, q).next().unwrap()).collect();
            assert!(firsts.windows(2).all(|w| w[0] != w[1]), "{step}: {firsts:?}");
        }
    }
}
