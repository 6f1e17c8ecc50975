//! The work of a boundary tick: every due zone group, every shard, every page of tenants, from
//! the checkpoint. The dry run walks the same loop and writes nothing.
//!
//! ## One group
//! 1. Read the run's checkpoint (one strongly consistent Query: a state per shard).
//! 2. Per shard not done, page the group's tenants (`by_zone` index, key condition
//!    `zshard = <zone>#<k>`) from the checkpoint to the end, or until the budget stops it.
//! 3. Per page, visit the tenants (bounded concurrency): read all cursors with one Query, plan
//!    with [`tickwork::calendar::plan_tenant_as_of`], send [`crate::pulse::writes_for`]'s pulses and
//!    cursor moves in one transaction.
//! 4. A tenant whose failure is its own (a key over a limit, a corrupt cursor, a condition that
//!    keeps failing) is **isolated**: recorded as a failure ([`tickwork::failures`]) in the same
//!    fenced transaction that saves the page's checkpoint, counted, and passed over; its cursors
//!    did not move, so its next visit still owes every period. A failure that is not the tenant's
//!    (throttling after retries, an unreachable or missing table), or more than half a page
//!    failing, stops the tick: every tenant after it would fail the same way.
//! 5. When every shard is done, advance the group's watermark: last, fenced, forward only.
//!
//! Before the groups, the woken tenants (added, resumed or moved since their group's run): each
//! read by id, visited as above if it is active in that group, and taken out of the wake set in a
//! fenced write (with its failure record, if it was isolated).

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::budget::Budget;
use tickwork::calendar::{self, Policy};
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::clock::Millis;
use tickwork::db::MAX_TRANSACT_ITEMS;
use tickwork::lease::{Fence, Fenced};
use tickwork::pager::{PageError, PageRun};
use tickwork::tenants::Tenant;
use tickwork::watermark::Advance;
use tickwork::DbError;
use tickwork_lambda::{Outcome, Tick};

use crate::cursors::read_cursors;
use crate::pulse::writes_for;
use crate::{Deps, Due, PulseError, Report};

/// Live (fenced by the lease) or dry (nothing written).
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    Live(&'a Fence),
    Dry,
}

#[derive(Default)]
struct Tally {
    tenants: u64,
    failed: u64,
    pulses: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
}

/// What visiting one tenant found.
#[derive(Debug, Default)]
struct Visit {
    pulses: BTreeMap<String, u64>,
    skipped: BTreeMap<String, u64>,
}

#[derive(Debug, thiserror::Error)]
enum PageStop {
    #[error(transparent)]
    Failed(#[from] PulseError),
    #[error("lease lost")]
    Lost,
}

impl From<DbError> for PageStop {
    fn from(e: DbError) -> Self {
        PageStop::Failed(e.into())
    }
}

/// Steps 1 to 5 for every due group; the report's outcome says how it ended.
pub(crate) async fn sweep(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    due: &Due,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    let tally = Mutex::new(Tally::default());
    let mut partial = false;
    for (group, ids) in &due.wake {
        // A dry run counts a woken tenant once: its group's run, due too, will visit it.
        if matches!(mode, Mode::Dry) && due.groups.iter().any(|g| &g.group == group) {
            continue;
        }
        if !wake(deps, tick, mode, group, ids, &tally).await? {
            report.outcome = Outcome::LostLease;
            fill(&mut report, tally.into_inner().expect("tally"));
            return Ok(report);
        }
    }
    for g in &due.groups {
        let tz = calendar::zone(&g.group)?;
        let run = g.run_id();
        if let Mode::Live(_) = mode {
            if g.started_ms.is_none() {
                deps.marks.start_run(&deps.cfg.job, &g.group, &g.local, tick.time_ms).await?;
            }
        }
        let run_ms = g.started_ms.unwrap_or(tick.time_ms);
        let states = match mode {
            Mode::Live(_) => deps.checkpoints.read(&deps.cfg.job, &run).await?,
            Mode::Dry => BTreeMap::new(),
        };
        let mut group_done = true;
        for k in 0..deps.tenants.shards() {
            let state = Checkpoints::state_of(&states, &k.to_string()).clone();
            if state == ShardState::Done {
                continue;
            }
            if budget.exhausted() {
                group_done = false;
                break;
            }
            let (tz, run, tally_ref) = (&tz, &run, &tally);
            let outcome = deps
                .tenants
                .for_each_zone_page(
                    &g.group,
                    k,
                    state.cursor(),
                    deps.cfg.page_size,
                    budget,
                    |tenants, next| async move {
                        let failures = visit_page(deps, &tenants, tz, tick.time_ms, run_ms, mode, tally_ref).await?;
                        let Mode::Live(fence) = mode else { return Ok(()) };
                        let now = deps.clock.now_ms();
                        let records = failures
                            .iter()
                            .map(|(t, e)| {
                                tickwork::failures::record(&deps.tables.control, &deps.cfg.job, run, t, e, now)
                            })
                            .collect();
                        let st = next.map(ShardState::Resume).unwrap_or(ShardState::Done);
                        match deps.checkpoints.save_with(fence, run, &k.to_string(), &st, records).await? {
                            Fenced::Written => Ok(()),
                            _ => Err(PageStop::Lost),
                        }
                    },
                )
                .await;
            match outcome {
                Ok(PageRun::Exhausted { .. }) => {}
                Ok(PageRun::Stopped { .. }) => group_done = false,
                Err(PageError::Handler(PageStop::Lost)) => {
                    report.outcome = Outcome::LostLease;
                    fill(&mut report, tally.into_inner().expect("tally"));
                    return Ok(report);
                }
                Err(PageError::Handler(PageStop::Failed(e))) => return Err(e),
                Err(PageError::Db(e)) => return Err(e.into()),
                Err(PageError::Cursor(c)) => return Err(c.into()),
            }
        }
        if !group_done {
            partial = true;
            continue;
        }
        match mode {
            Mode::Dry => tracing::info!(group = %g.group, local_date = %g.local, "dry run: group planned"),
            // Every tenant of the group visited (the isolated ones recorded): the watermark,
            // last and fenced.
            Mode::Live(fence) => match deps.marks.advance(fence, &g.group, &g.local).await? {
                Advance::Advanced | Advance::NotForward { .. } => report.groups_completed += 1,
                Advance::Stale => {
                    report.outcome = Outcome::LostLease;
                    fill(&mut report, tally.into_inner().expect("tally"));
                    return Ok(report);
                }
            },
        }
    }
    report.outcome = match mode {
        Mode::Dry => Outcome::DryRun,
        Mode::Live(_) if partial => Outcome::Partial,
        Mode::Live(_) => Outcome::Completed,
    };
    fill(&mut report, tally.into_inner().expect("tally"));
    Ok(report)
}

fn fill(report: &mut Report, t: Tally) {
    report.tenants = t.tenants;
    report.failed_tenants = t.failed;
    report.pulses = t.pulses;
    report.skipped = t.skipped;
}

/// Visits the woken tenants of `group` and clears them from its wake set; `false` when the lease
/// was lost.
async fn wake(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    group: &str,
    ids: &[String],
    tally: &Mutex<Tally>,
) -> Result<bool, PulseError> {
    let tz = calendar::zone(group)?;
    let mut here = Vec::new();
    for id in ids {
        // Gone, suspended again, or moved on since it was woken: nothing to do here.
        if let Some(t) = deps.tenants.get(id).await? {
            if t.active && t.zone == group {
                here.push(t);
            }
        }
    }
    let failures = match visit_page(deps, &here, &tz, tick.time_ms, tick.time_ms, mode, tally).await {
        Ok(f) => f,
        Err(PageStop::Failed(e)) => return Err(e),
        Err(PageStop::Lost) => return Ok(false),
    };
    let Mode::Live(fence) = mode else { return Ok(true) };
    let now = deps.clock.now_ms();
    let run = format!("{group}@wake");
    let mut writes = vec![deps.marks.unwake_item(&deps.cfg.job, group, ids)];
    writes.extend(
        failures.iter().map(|(t, e)| tickwork::failures::record(&deps.tables.control, &deps.cfg.job, &run, t, e, now)),
    );
    Ok(tickwork::lease::fenced_write(&deps.db, fence, writes).await? == Fenced::Written)
}

/// Visits a page's tenants; returns the isolated ones with their errors, or stops the tick.
async fn visit_page(
    deps: &Deps,
    tenants: &[Tenant],
    tz: &jiff::tz::TimeZone,
    now_ms: Millis,
    run_ms: Millis,
    mode: Mode<'_>,
    tally: &Mutex<Tally>,
) -> Result<Vec<(String, String)>, PageStop> {
    // Boxed: the futures borrow the page, and an unboxed closure over borrowed tenants is not
    // accepted where the job's future must be `Send` for every lifetime.
    let visits: Vec<BoxFuture<'_, (&Tenant, Result<Visit, PulseError>)>> = tenants
        .iter()
        .map(|t| Box::pin(async move { (t, visit(deps, t, tz, now_ms, run_ms, mode).await) }) as BoxFuture<'_, _>)
        .collect();
    let results: Vec<(&Tenant, Result<Visit, PulseError>)> =
        stream::iter(visits).buffer_unordered(deps.cfg.tenant_concurrency).collect().await;
    let mut failures = Vec::new();
    let mut stop = None;
    let mut g = tally.lock().expect("tally");
    g.tenants += tenants.len() as u64;
    for (t, r) in results {
        match r {
            Ok(v) => {
                for (grain, n) in v.pulses {
                    *g.pulses.entry(grain).or_default() += n;
                }
                for (grain, n) in v.skipped {
                    *g.skipped.entry(grain).or_default() += n;
                }
            }
            Err(e) if e.is_unit_specific() => {
                tracing::warn!(tenant = %t.id, error = %tickwork_lambda::error_chain(&e), "tenant isolated: recorded and passed over");
                failures.push((t.id.clone(), tickwork_lambda::error_chain(&e)));
            }
            Err(e) => stop = stop.or(Some(e)),
        }
    }
    g.failed += failures.len() as u64;
    drop(g);
    if let Some(e) = stop {
        return Err(PageStop::Failed(e));
    }
    if failures.len() > 1 && failures.len() * 2 > tenants.len() {
        return Err(PageStop::Failed(PulseError::PageFailed {
            failed: failures.len(),
            of: tenants.len(),
            first: failures[0].1.clone(),
        }));
    }
    Ok(failures)
}

/// One tenant: read its cursors, plan, and (live) write its pulses and cursor moves in one
/// transaction.
async fn visit(
    deps: &Deps,
    t: &Tenant,
    tz: &jiff::tz::TimeZone,
    now_ms: Millis,
    run_ms: Millis,
    mode: Mode<'_>,
) -> Result<Visit, PulseError> {
    let policy: &Policy = &deps.cfg.policy;
    for attempt in 0..2 {
        let cursors = read_cursors(&deps.db, &deps.tables.control, &t.id).await?;
        let plans = calendar::plan_tenant_as_of(tz, now_ms, run_ms, t.since_ms, &cursors, policy)?;
        let w = writes_for(t, &plans, &deps.tables.queue, &deps.tables.control, &deps.queue_cfg, deps.clock.now_ms())?;
        let visit = Visit { pulses: w.pulses, skipped: w.skipped };
        if w.items.is_empty() || matches!(mode, Mode::Dry) {
            return Ok(visit);
        }
        if w.items.len() > MAX_TRANSACT_ITEMS {
            return Err(PulseError::TooManyPeriods { tenant: t.id.clone(), writes: w.items.len() });
        }
        match deps.db.transact_write(w.items).await {
            Ok(_) => return Ok(visit),
            // Someone advanced these cursors since our read (another worker after a lease
            // lapse, or our own retried request whose answer was lost): re-read and re-plan once;
            // the cancelled transaction wrote nothing.
            Err(DbError::TransactionCanceled { reasons })
                if attempt == 0 && reasons.iter().any(|r| r.condition_failed()) =>
            {
                continue;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(PulseError::CursorsMoving(t.id.clone()))
}
