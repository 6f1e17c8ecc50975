//! The work of a boundary tick: every due zone group, every shard, every page of tenants, from
//! the checkpoint. The dry run walks the same loop and writes nothing.
//!
//! ## One group's run (for its local date `D`)
//! 1. Read the run's checkpoint (one strongly consistent Query: a state per shard).
//! 2. Per shard not done, page the group's tenants (`by_zone` index, key condition
//!    `zshard = <zone>#<k>`) from the checkpoint, until the shard ends or the budget stops it.
//! 3. Per tenant, [`crate::pulse::owed`]: a tenant that follows the group is owed the group's
//!    periods (computed once); one with a position of its own is planned from it and gets a
//!    conditional write bringing it back to the group. Its pulses join the run's batch.
//! 4. **Flush**, in one fenced transaction: the batch (one or a few queue items, ids derived from
//!    a digest of their units, so a retried flush finds its own items), the position writes, the shards'
//!    checkpoints, the failure records — when the batch is large, before the budget ends, and at
//!    the end of the run, when the watermark advance replaces the checkpoints. A crash before a
//!    flush loses nothing but reads: the pages are read again from the last checkpoint.
//! 5. A tenant whose item is unreadable is **isolated**: recorded ([`tickwork::failures`]) in the
//!    next flush, counted, passed over. A position write whose condition fails (an operator moved
//!    or suspended the tenant since the page was read) takes that tenant out of the flush: the
//!    operator's change decided where it stands. More than half a page failing stops the tick.
//!
//! Before the groups, the woken tenants (added, resumed or moved since their group's run): each
//! read by id, brought to its group's watermark ([`crate::pulse::Visit::Wake`]) and taken out of
//! the wake set, in one flush. A group whose run starts at this tick is visited at the next one.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::budget::Budget;
use tickwork::calendar;
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::tenants::{Position, Tenant};
use tickwork::wake::Waiting;
use tickwork_lambda::{Outcome, Tick};

use crate::deps::Deps;
use crate::due::{Due, DueGroup, WakeGroup};
pub(crate) use crate::flush::Mode;
use crate::flush::{flush, Flushed, Pending};
use crate::pulse::{owed, Owed, Target, Visit, PULSE_KIND};
use crate::report::{PulseError, Report};

/// Steps 1 to 5 for every due group; the report's outcome says how it ended.
pub(crate) async fn sweep(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    due: &Due,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    let mut partial = false;
    // A group whose run starts now is not wake-visited first: its run pages its woken tenants,
    // and they stay woken, visited at the next tick at the new mark (a tenant the run's page
    // showed follows the group by then, and the visit owes it nothing). One rule for the single
    // leader and the shard workers: an index lags its table, so a page may not show a tenant
    // added a moment ago, and taking it out of the wake set then would pulse it a day late.
    for w in &due.wake {
        if due.starts_now(&w.group) {
            continue;
        }
        if !wake(deps, tick, mode, w, &mut report).await? {
            report.outcome = Outcome::LostLease;
            return Ok(report);
        }
    }
    for g in &due.groups {
        match run_group(deps, tick, mode, g, budget, &mut report).await? {
            GroupEnd::Done => {}
            GroupEnd::Partial => partial = true,
            GroupEnd::LeaseLost => {
                report.outcome = Outcome::LostLease;
                return Ok(report);
            }
        }
    }
    report.outcome = match mode {
        Mode::Dry => Outcome::DryRun,
        Mode::Live(_) if partial => Outcome::Partial,
        Mode::Live(_) => Outcome::Completed,
    };
    Ok(report)
}

/// A zone found empty stays registered while any zone was registered within this long: an add
/// registers its zones before it writes its tenants.
pub const REGISTRATION_QUIET_MS: i64 = 3_600_000;

pub(crate) enum GroupEnd {
    Done,
    Partial,
    LeaseLost,
}

pub(crate) fn date(s: &str) -> Result<jiff::civil::Date, PulseError> {
    s.parse().map_err(|_| PulseError::Calendar(calendar::CalendarError(format!("`{s}` is not a date"))))
}

/// What a run of group `g` owes its tenants: periods complete by its local date, lateness
/// measured from the run's start (this tick's time when the run starts now). Pure; the single
/// leader and every shard worker plan from it, so they agree.
pub(crate) fn run_target<'a>(
    g: &DueGroup,
    tz: &'a jiff::tz::TimeZone,
    tick_ms: tickwork::clock::Millis,
    cfg: &'a crate::config::PulseConfig,
) -> Result<Target<'a>, PulseError> {
    Ok(Target {
        tz,
        today: date(&g.local)?,
        late_at: g.started_ms.unwrap_or(tick_ms),
        mark: g.mark.as_deref().map(date).transpose()?,
        policy: &cfg.policy,
        grains: cfg.grains,
    })
}

pub(crate) async fn run_group(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    g: &DueGroup,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<GroupEnd, PulseError> {
    let tz = calendar::zone(&g.group)?;
    let run = g.run_id();
    let seen_before = report.tenants;
    if let (Mode::Live(_), None) = (mode, g.started_ms) {
        deps.marks.start_run(&deps.cfg.job, &g.group, &g.local, tick.time_ms).await?;
    }
    let target = run_target(g, &tz, tick.time_ms, &deps.cfg)?;
    // Every tenant that follows the group is owed the same: planned once.
    let mut follower: Option<Owed> = None;
    let states = match mode {
        Mode::Live(_) => deps.checkpoints.read(&deps.cfg.job, &run).await?,
        Mode::Dry => BTreeMap::new(),
    };
    let mut pending = Pending::new(format!("{PULSE_KIND}#{run}"), &g.group);
    // A run resumed from an earlier tick (its budget ended, or it crashed) writes after every page,
    // so that an invocation that keeps dying at the same point still moves the run on.
    let eager = g.started_ms.is_some();
    let mut done = true;
    // Every shard paged from its start by this invocation: only then can "found nobody" be told.
    let mut paged_whole = true;
    // Every shard any writer used: this process's count, or a larger one recorded since it started.
    for k in 0..g.shards(deps.tenants.shards()) {
        let state = Checkpoints::state_of(&states, &k.to_string()).clone();
        paged_whole &= state == ShardState::Start;
        let mut shard = Shard { k, pending: &mut pending, follower: &mut follower, eager };
        match page_shard(deps, mode, g, &run, &target, &mut shard, state, budget, report).await? {
            ShardEnd::Done => {}
            ShardEnd::Stopped => {
                done = false;
                break;
            }
            ShardEnd::LeaseLost => return Ok(GroupEnd::LeaseLost),
        }
    }
    let Mode::Live(fence) = mode else {
        tracing::info!(group = %g.group, local_date = %g.local, "dry run: group planned");
        return Ok(if done { GroupEnd::Done } else { GroupEnd::Partial });
    };
    // Every tenant of the group visited (the isolated ones recorded): the watermark, last,
    // fenced, in the same transaction as the run's last pulses.
    let advance = done.then_some(g.local.as_str());
    match flush(deps, fence, &run, &mut pending, advance).await? {
        Flushed::LeaseLost => Ok(GroupEnd::LeaseLost),
        Flushed::Written if done => {
            report.groups_completed += 1;
            // A run begun and finished at this tick that found nobody: the zone leaves the
            // registry, and stops costing its daily run (a dozen requests a day). Unless a zone
            // was registered within the hour: an add may still be writing its tenant.
            if found_empty(g.started_ms.is_none(), paged_whole, report.tenants - seen_before) {
                let cutoff = deps.clock.now_ms() - REGISTRATION_QUIET_MS;
                if deps.marks.deregister(&deps.cfg.job, &g.group, &g.local, cutoff).await? {
                    tracing::info!(group = %g.group, "no tenant: the zone leaves the registry");
                    report.groups_removed += 1;
                }
            }
            Ok(GroupEnd::Done)
        }
        Flushed::Written => Ok(GroupEnd::Partial),
    }
}

/// Whether a finished run found its zone empty, so that the zone may leave the registry: only a
/// run this invocation began, that paged every shard from its start and met no tenant. A run that
/// found shards already done (another invocation ran them after this one read its due groups, a
/// duplicate delivery or a leader's takeover) met none of the tenants it did not page; taking the
/// zone out then would stop its tenants' pulses for good, with no error (chaos seed 47: three Los
/// Angeles tenants never pulsed again after a duplicate tick finished a run another had done).
pub(crate) fn found_empty(begun_here: bool, paged_whole: bool, tenants_met: u64) -> bool {
    begun_here && paged_whole && tenants_met == 0
}

/// One shard of a run being paged: where its writes gather, and how eagerly they are flushed.
pub(crate) struct Shard<'p> {
    pub(crate) k: u32,
    pub(crate) pending: &'p mut Pending,
    /// What a tenant that follows the group is owed, planned once per worker.
    pub(crate) follower: &'p mut Option<Owed>,
    /// Flush after every page (a resumed run, or a shard under its own lease).
    pub(crate) eager: bool,
}

/// How paging one shard ended.
pub(crate) enum ShardEnd {
    Done,
    Stopped,
    LeaseLost,
}

/// Steps 2 to 5 for one shard, from `state` until it is drained, the budget stops it, or the
/// fence is lost. The one enumeration loop: the single leader, the shard workers and the dry run
/// all page through here.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn page_shard(
    deps: &Deps,
    mode: Mode<'_>,
    g: &DueGroup,
    run: &str,
    target: &Target<'_>,
    sh: &mut Shard<'_>,
    mut state: ShardState,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<ShardEnd, PulseError> {
    while state != ShardState::Done {
        if budget.exhausted() {
            return Ok(ShardEnd::Stopped);
        }
        let (page, next) = deps.tenants.zone_page(&g.group, sh.k, state.cursor(), deps.cfg.page_size).await?;
        report.tenants += page.len() as u64;
        let failed = page.iter().filter(|r| r.is_err()).count();
        if tickwork::failures::systemic(failed, page.len()) {
            let first = page.iter().find_map(|r| r.as_ref().err()).map(|e| e.to_string()).unwrap_or_default();
            return Err(PulseError::PageFailed { failed, of: page.len(), first });
        }
        for r in &page {
            let id = match r {
                Ok(t) => t.id.clone(),
                Err(bad) => bad.id.clone(),
            };
            let planned = match r {
                Err(bad) => Err(bad.to_string()),
                Ok(t) if t.pos == Position::Follows && g.mark.is_some() => match &*sh.follower {
                    Some(o) => Ok((t, o.clone())),
                    None => owed(t, target, Visit::Run)
                        .map(|o| {
                            *sh.follower = Some(o.clone());
                            (t, o)
                        })
                        .map_err(|e| e.to_string()),
                },
                Ok(t) => owed(t, target, Visit::Run).map(|o| (t, o)).map_err(|e| e.to_string()),
            };
            match planned {
                Ok((t, o)) => sh.pending.add(t, &o, report),
                Err(e) => {
                    tracing::warn!(tenant = %id, error = %e, "tenant isolated: recorded and passed over");
                    report.failed_tenants += 1;
                    sh.pending.failures.push((id.clone(), e));
                }
            }
            if let (Mode::Live(fence), true) = (mode, sh.pending.counts().full()) {
                // Mid-page: the checkpoint is the cursor just after this tenant.
                sh.pending
                    .checkpoints
                    .insert(sh.k, ShardState::Resume(deps.tenants.zone_cursor_at(&g.group, sh.k, &id)?));
                if let Flushed::LeaseLost = flush(deps, fence, run, sh.pending, None).await? {
                    return Ok(ShardEnd::LeaseLost);
                }
            }
        }
        state = next.map(ShardState::Resume).unwrap_or(ShardState::Done);
        sh.pending.checkpoints.insert(sh.k, state.clone());
        if let (Mode::Live(fence), true) = (mode, sh.eager || sh.pending.counts().full()) {
            if let Flushed::LeaseLost = flush(deps, fence, run, sh.pending, None).await? {
                return Ok(ShardEnd::LeaseLost);
            }
        }
    }
    Ok(ShardEnd::Done)
}

/// Brings the woken tenants of one group to its watermark and takes them out of the wake items
/// ([`tickwork::wake`]); `false` when the lease was lost.
pub(crate) async fn wake(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    w: &WakeGroup,
    report: &mut Report,
) -> Result<bool, PulseError> {
    // Before the group's first run there is no watermark to bring anyone to: the run does it.
    let Some(mark) = w.mark.as_deref() else { return Ok(true) };
    let tz = calendar::zone(&w.group)?;
    let target = Target {
        tz: &tz,
        today: date(mark)?,
        late_at: tick.time_ms,
        mark: Some(date(mark)?),
        policy: &deps.cfg.policy,
        grains: deps.cfg.grains,
    };
    let visit = Visit::Wake { run_in_progress: w.run_in_progress };
    let (mut ids, all) = match w.woken.generation {
        Some(_) => deps.marks.waiting(&deps.cfg.job, &w.group).await?,
        None => (Vec::new(), true),
    };
    let listed: Vec<Waiting> = w
        .woken
        .listed
        .iter()
        .filter(|l| !ids.iter().any(|i| &i.unit == *l))
        .map(|l| Waiting { unit: l.clone(), nonce: String::new() })
        .collect();
    ids.extend(listed);
    // In chunks, so that one transaction holds every position write and wake item of its chunk.
    for ids in ids.chunks(WAKE_CHUNK) {
        if !wake_chunk(deps, mode, w, ids, &target, visit, report).await? {
            return Ok(false);
        }
    }
    if let (Mode::Live(_), true) = (mode, all) {
        // Read to the end and visited: the group's mark goes, unless a wake came since.
        deps.marks.settle_wake(&deps.cfg.job, &w.group, &w.woken).await?;
    }
    Ok(true)
}

/// Woken tenants visited in one flush: their reads, position writes and wake items' deletes stay
/// well inside a transaction's 100 items beside a few batch items and failure records.
const WAKE_CHUNK: usize = 30;

async fn wake_chunk(
    deps: &Deps,
    mode: Mode<'_>,
    w: &WakeGroup,
    woken: &[Waiting],
    target: &Target<'_>,
    visit: Visit,
    report: &mut Report,
) -> Result<bool, PulseError> {
    // Boxed: an unboxed closure over borrowed ids is not accepted where the job's future must be
    // `Send` for every lifetime.
    let gets: Vec<BoxFuture<'_, Result<Option<Tenant>, tickwork::DbError>>> =
        woken.iter().map(|w| Box::pin(deps.tenants.get(&w.unit)) as BoxFuture<'_, _>).collect();
    let read: Vec<Result<Option<Tenant>, tickwork::DbError>> =
        stream::iter(gets).buffered(deps.cfg.tenant_concurrency).collect().await;
    let run = format!("{}@wake", w.group);
    let mut pending = Pending::new(format!("{PULSE_KIND}#{}@wake{}", w.group, deps.clock.now_ms()), &w.group);
    for (id, r) in woken.iter().map(|w| &w.unit).zip(read) {
        match r {
            // Gone, suspended again, or moved on since it was woken: nothing to do here.
            Ok(Some(t)) if t.active && t.zone == w.group => match owed(&t, target, visit) {
                Ok(o) => {
                    report.tenants += 1;
                    pending.add(&t, &o, report);
                }
                Err(e) => pending.failures.push((id.clone(), e.to_string())),
            },
            Ok(_) => {}
            Err(e) if e.is_unit_specific() => pending.failures.push((id.clone(), e.to_string())),
            Err(e) => return Err(e.into()),
        }
    }
    report.failed_tenants += pending.failures.len() as u64;
    let Mode::Live(fence) = mode else { return Ok(true) };
    pending.woken = woken.to_vec();
    Ok(matches!(flush(deps, fence, &run, &mut pending, None).await?, Flushed::Written))
}

#[cfg(test)]
mod tests {
    use super::found_empty;

    /// Only a run begun here, read whole and empty, finds its zone empty: a run that found its
    /// shards done by another invocation met nobody, and its zone still has tenants.
    #[test]
    fn a_zone_is_found_empty_only_by_a_run_that_read_it_whole() {
        assert!(found_empty(true, true, 0));
        assert!(!found_empty(true, true, 1), "a tenant met");
        assert!(!found_empty(true, false, 0), "shards found done or resumed: their tenants unseen");
        assert!(!found_empty(false, true, 0), "a run begun at an earlier tick");
    }
}
