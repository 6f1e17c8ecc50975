//! One page of a due shard's records fired, in order: each record planned and its first page of
//! members read, then written in chunks that fit a transaction, a group larger than a page alone.

use std::collections::HashMap;

use futures::stream::{self, StreamExt};
use tickwork::budget::Budget;
use tickwork::lease::Fence;
use tickwork::schedules::{
    plan, plan_own, successor, DueRecord, Quarantined, RecordEnd, ShardCursor, Stage, Successor,
};

use crate::deps::Deps;
use crate::fire_fix::{fix, Fixing};
use crate::fire_plan::{page_end, Action, Planned, Segment, TenantRead};
use crate::fire_reads::{read_clean, read_page, read_tenants};
use crate::fire_write::{sk_of, write_chunk, Wrote};
use crate::report::{PulseError, Report};

/// Due records read a page.
pub const FIRE_PAGE: i32 = 200;

/// Times a fixed group's page refused by a member leaving it is read again at once.
const PAGE_RETRIES: u32 = 5;

/// Records whose pages are gathered for one transaction: a page of due records. A daily group's
/// record writes nothing in it (its successor is put before it), so a page of distinct timers is
/// one transaction; records that do (a one-off retired, its members and definitions deleted with
/// it) are split into as many transactions as DynamoDB's 100 items a transaction need
/// ([`crate::fire_write::split_at`]).
pub const FIRE_CHUNK: usize = FIRE_PAGE as usize;
/// Records that do not read, set aside a transaction at most: each is a copy in the transaction,
/// beside a page of one-off members' deletes (2 each, [`crate::fire_plan::ONE_OFF_PAGE`] of them)
/// and the fence, batch item and cursor, within DynamoDB's 100 items (a chunk of one record
/// cannot be split further).
const SET_ASIDE_CHUNK: usize = 12;
/// One due record read, or one that does not read, to be set aside as the cursor passes it.
enum Step {
    Seg(Box<Segment>),
    Bad(Box<Quarantined>),
}

/// One page of shard `k`'s due records, in order, the shard's `cursor` moved as they are done.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fire_page(
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
        // A fired one-off's cleaning record: nothing to plan or fire.
        if rec.stage == Stage::Cleaning {
            let action = Box::pin(read_clean(deps, &rec)).await?;
            return Ok(Step::Seg(Box::new(Segment { rec, action })));
        }
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
    // Successors put in another shard than this one (a record written under the shard count
    // before goes where today's count puts its group).
    for step in &steps {
        if let Step::Seg(seg) = step {
            if let Action::Page(p, _) = &seg.action {
                let next = match &p.successor {
                    Successor::Before(n) | Successor::Within { next: n, .. } => Some(n.shard()),
                    Successor::None => None,
                };
                report.shards_written.extend(next.filter(|s| *s != k));
            }
        }
    }
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
                (None, bad.len() == SET_ASIDE_CHUNK)
            }
            Step::Seg(seg) => {
                let first = advances(&seg, now_ms) || pending.len() == FIRE_CHUNK;
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
        let alone = advances(&seg, now_ms);
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
    // A record written under the shard count before (its shard is not its group's now): its
    // successor goes where today's count puts it, unless an attempt by a release before this one
    // put it beside the record and died before its transaction; that one is put again instead,
    // or the group would have two records and its next occurrence fire twice.
    if let Some(beside) = match &succ {
        Successor::Before(n) => rec.successor_beside(n),
        _ => None,
    } {
        if deps.schedules.record_exists(beside.key(deps.schedules.job())).await? {
            return Ok(Ok(Planned { plan: p, successor: Successor::Before(beside) }));
        }
    }
    Ok(Ok(Planned { plan: p, successor: succ }))
}

/// `seg`'s page is not its group's last.
fn advances(seg: &Segment, now_ms: i64) -> bool {
    match &seg.action {
        Action::Page(p, read) => moves_on(&page_end(&seg.rec, p, read, now_ms)),
        Action::Isolate(_) | Action::Clean { .. } => false,
    }
}

/// A page that ends so moves its record's member cursor, not the shard's: `Some(the last member)`.
fn moves_on(end: &RecordEnd) -> bool {
    matches!(end, RecordEnd::Advance(_) | RecordEnd::Fix { .. })
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
    let mut refused = 0;
    loop {
        let t = own_tenants.as_ref().unwrap_or(tenants);
        let Action::Page(planned, read) = &seg.action else { unreachable!("a set-aside record has one page") };
        let end = page_end(&seg.rec, planned, read, now_ms);
        // A one-off group larger than its first page: fixed first, then fired from its start.
        if matches!(end, RecordEnd::Fix { .. }) {
            let rec = match Box::pin(fix(deps, fence, &seg.rec, now_ms)).await? {
                Fixing::Fixed(rec) => *rec,
                Fixing::Refused => return Ok(Wrote::Reread),
                Fixing::LeaseLost => return Ok(Wrote::LeaseLost),
            };
            let planned = (**planned).clone();
            let read = Box::pin(read_page(deps, &rec, &planned)).await?;
            seg = Segment { rec, action: Action::Page(Box::new(planned), read) };
            own_tenants = Some(Box::pin(read_tenants(deps, &[&seg])).await?);
            continue;
        }
        let to = if moves_on(&end) { "" } else { sk.as_str() };
        let (rec, planned) = (seg.rec.clone(), (**planned).clone());
        let last = last_try && refused >= PAGE_RETRIES;
        let w = write_chunk(deps, fence, now_ms, k, cursor, (vec![seg], Vec::new()), to, t, last, budget, report);
        match Box::pin(w).await? {
            Wrote::On => refused = 0,
            Wrote::SetAside => return Ok(Wrote::On),
            // A fixed group's page refused (a member left the group after the page read it):
            // read again at once, here, not the whole shard.
            Wrote::Reread if rec.stage == Stage::Fixed && refused < PAGE_RETRIES => {
                refused += 1;
                let read = Box::pin(read_page(deps, &rec, &planned)).await?;
                seg = Segment { rec, action: Action::Page(Box::new(planned), read) };
                own_tenants = Some(Box::pin(read_tenants(deps, &[&seg])).await?);
                continue;
            }
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
