//! A boundary shared by shard workers (`TICKWORK_PULSE_SHARD_WORKERS` above 1): the leader
//! starts the runs and its helpers ([`crate::helpers`]), every worker pages shards under a lease
//! per shard, and the watermark advances last, when every shard is done.

use std::collections::{BTreeMap, BTreeSet};

use tickwork::budget::{AnyOf, Budget, Deadline};
use tickwork::calendar;
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::lease::{Acquire, Fence, LeaseConfig};
use tickwork_lambda::{Outcome, Tick};

use crate::config::MAX_SHARED_SHARDS;
use crate::deps::Deps;
use crate::due::{due_groups, Due, DueGroup};
use crate::flush::{Mode, Pending};
use crate::pulse::{Owed, PULSE_KIND};
use crate::report::{PulseError, Report};
use crate::sweep::{page_shard, run_group, run_target, wake, GroupEnd, Shard, ShardEnd};

/// The leader of a tick in shared mode ([`crate::PulseConfig::shard_workers`] above 1): woken
/// tenants first (under the job's lease), each due group's run started, helpers started for the
/// shards, then the leader pages shards too, as one worker among them.
pub(crate) async fn lead_shared(
    deps: &Deps,
    tick: &Tick,
    fence: &Fence,
    due: &Due,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    // A group whose run starts now is not visited for its woken tenants first: the run pages
    // them (as the single leader's run covers them). They stay woken, and the next tick, after
    // the run, visits them at the new watermark (nothing to do for one the run reached; the one
    // an index read did not show yet gets its periods then).
    for w in due.wake.iter().filter(|w| !due.starts_now(&w.group)) {
        if !wake(deps, tick, Mode::Live(fence), w, &mut report).await? {
            report.outcome = Outcome::LostLease;
            return Ok(report);
        }
    }
    let mut shards = 0u32;
    for g in &due.groups {
        if g.started_ms.is_none() {
            deps.marks.start_run(&deps.cfg.job, &g.group, &g.local, tick.time_ms).await?;
        }
        shards += g.shards(deps.tenants.shards());
    }
    // One worker a shard at most: the leader is one of them.
    let wanted = (deps.cfg.shard_workers - 1).min(shards.saturating_sub(1));
    if let (Some(h), true) = (&deps.helpers, wanted > 0) {
        report.helpers = h.start(tick, &fence.owner, wanted).await;
    }
    share(deps, tick, due, &fence.owner, Some(fence), budget, report).await
}

/// A helper invocation's work ([`tickwork_lambda::job::LeasedJob::help`]): the shards of the runs
/// its leader started. A helper event older than a lease is stale (an asynchronous invocation
/// retried late) and does nothing; a run its state read does not show as started is left to the
/// leader (whose start may not be visible yet).
pub(crate) async fn help(
    deps: &Deps,
    tick: &Tick,
    due: &Due,
    owner: &str,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    if tick.time_ms < deps.clock.now_ms() - deps.cfg.lease.ttl.as_millis() as i64 {
        tracing::info!(tick = tick.time_ms, "stale helper event: nothing to do");
        report.outcome = Outcome::Idle;
        return Ok(report);
    }
    // The leader started the runs just before it invoked this helper: read strongly, so that the
    // start is seen (an eventually consistent read, the tick's one read, may miss it).
    let _ = due;
    let state = deps.marks.read_strong(&deps.cfg.job).await?;
    let fresh = due_groups(&state, tick.time_ms);
    let started =
        Due { groups: fresh.groups.into_iter().filter(|g| g.started_ms.is_some()).collect(), ..Due::default() };
    share(deps, tick, &started, owner, None, budget, report).await
}

/// Every due group's shards, as one worker of several.
async fn share(
    deps: &Deps,
    tick: &Tick,
    due: &Due,
    owner: &str,
    leader: Option<&Fence>,
    budget: &dyn Budget,
    mut report: Report,
) -> Result<Report, PulseError> {
    let mut partial = false;
    for g in &due.groups {
        // More shards than a shared run's watermark transaction can check (a writer recorded a
        // larger count since): the leader pages that group alone, under the job's lease, as the
        // single leader does; a helper leaves it to the leader.
        if g.shards(deps.tenants.shards()) > MAX_SHARED_SHARDS {
            tracing::warn!(group = %g.group, "more tenant shards than a shared run takes: paged by the leader alone");
            let end = match leader {
                Some(fence) => run_group(deps, tick, Mode::Live(fence), g, budget, &mut report).await?,
                None => GroupEnd::Partial,
            };
            partial |= !matches!(end, GroupEnd::Done);
            continue;
        }
        match run_group_shared(deps, tick, g, owner, budget, &mut report).await? {
            GroupEnd::Done => {}
            GroupEnd::Partial | GroupEnd::LeaseLost => partial = true,
        }
    }
    report.outcome = if partial { Outcome::Partial } else { Outcome::Completed };
    Ok(report)
}

/// The lease of shard `k` of `run`: one lease item per shard and run (`lease#<job>#<run>#<k>`).
fn shard_lease(deps: &Deps, run: &str, k: u32) -> LeaseConfig {
    LeaseConfig { job: format!("{}#{run}#{k}", deps.cfg.job), ..deps.cfg.lease.clone() }
        .expire_after(crate::deps::RUN_RETENTION)
}

/// One group's run shared by several workers.
///
/// 1. Read the run's checkpoints (one Query); start at a shard chosen by this worker's id, so
///    that workers starting together spread over the shards.
/// 2. Take a shard not done, unstarted ones first: its lease (held by another worker: pass on),
///    its checkpoint again (strongly; it may have moved since step 1), then page it
///    ([`page_shard`]) with every flush fenced by the shard's lease, within the lease's safe end.
///    Stopped by the budget: give the lease up, so that another worker resumes the shard from its
///    checkpoint at once. Then the checkpoints again (one Query) and the next shard; a shard
///    another worker has started is tried only before this worker paged one (an abandoned one is
///    taken over at the next tick, when its lease has expired), and after its first shard a
///    worker stops at the first held one. Worker `w` of `W` begins at shard `w·n/W`.
/// 3. **The watermark, last**: when every shard's checkpoint is done, the advance goes in one
///    transaction with a check of each; whoever sees it first writes it, the others find it done.
async fn run_group_shared(
    deps: &Deps,
    tick: &Tick,
    g: &DueGroup,
    owner: &str,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<GroupEnd, PulseError> {
    let tz = calendar::zone(&g.group)?;
    let run = g.run_id();
    let n = g.shards(deps.tenants.shards());
    if n > MAX_SHARED_SHARDS {
        return Err(PulseError::SharedShards { shards: n, max: MAX_SHARED_SHARDS });
    }
    let target = run_target(g, &tz, tick.time_ms, &deps.cfg)?;
    let order = shard_order(tick.worker, deps.cfg.shard_workers, n);
    let mut states = deps.checkpoints.read(&deps.cfg.job, &run).await?;
    let mut tried = BTreeSet::new();
    let mut paged_one = false;
    let mut follower: Option<Owed> = None;
    while !budget.exhausted() {
        let Some(k) = next_shard(&order, &states, &tried, paged_one) else { break };
        tried.insert(k);
        let lease = match deps.leases.acquire(&shard_lease(deps, &run, k), owner).await? {
            Acquire::Acquired(l) => l,
            // Workers begin spread over the shards, each with a stretch of its own: once this
            // one has paged its stretch, a held shard means the next stretch's worker is on it,
            // and the rest of the run is taken.
            _ if paged_one => break,
            _ => continue,
        };
        let state = deps.checkpoints.read_shard(&deps.cfg.job, &run, &k.to_string()).await?;
        if state != ShardState::Done {
            let fence = lease.fence(&deps.tables.control);
            let lease_end = Deadline::new(
                deps.clock.clone(),
                lease.safe_until_ms(deps.cfg.lease.clock_skew),
                deps.cfg.margin.as_millis() as i64,
            );
            let within = AnyOf(vec![budget, &lease_end]);
            let mut pending = Pending::new(format!("{PULSE_KIND}#{run}"), &g.group);
            let mut shard = Shard { k, pending: &mut pending, follower: &mut follower, eager: true };
            let end =
                page_shard(deps, Mode::Live(&fence), g, &run, &target, &mut shard, state, &within, report).await?;
            if let ShardEnd::Stopped = end {
                if let Err(e) = deps.leases.release(&lease).await {
                    tracing::warn!(shard = k, error = %e, "could not give a shard up; it waits for its lease to expire");
                }
            }
        }
        paged_one = true;
        // What the others did meanwhile (one Query).
        states = deps.checkpoints.read(&deps.cfg.job, &run).await?;
    }
    if advance_when_done(deps, g, &run, n).await? {
        report.groups_completed += 1;
        Ok(GroupEnd::Done)
    } else {
        Ok(GroupEnd::Partial)
    }
}

/// Step 3 of a shared run: `true` when the watermark is at the run's date (written now, or by
/// another worker before).
async fn advance_when_done(deps: &Deps, g: &DueGroup, run: &str, n: u32) -> Result<bool, PulseError> {
    let job = &deps.cfg.job;
    let states = deps.checkpoints.read(job, run).await?;
    if !all_done(&states, n) {
        return Ok(false);
    }
    let mut writes: Vec<_> = (0..n).map(|k| deps.checkpoints.done_check(job, run, &k.to_string())).collect();
    writes.push(deps.marks.advance_item(job, &g.group, &g.local));
    match deps.db.transact_write(writes).await {
        Ok(_) => Ok(true),
        Err(tickwork::DbError::TransactionCanceled { reasons }) => Ok(advanced_by_another(&reasons, n)),
        Err(e) => Err(e.into()),
    }
}

/// The order worker `worker` of `workers` tries the `n` shards in: from shard `worker·n/workers`
/// on, round, so that workers starting together take different shards. Pure.
pub(crate) fn shard_order(worker: u32, workers: u32, n: u32) -> Vec<u32> {
    let n = n.max(1);
    let first = (u64::from(worker) * u64::from(n) / u64::from(workers.max(1))) as u32 % n;
    (0..n).map(|i| (first + i) % n).collect()
}

/// The next shard to try, or `None` when this worker is done. Pure.
///
/// Shards nobody started first. A shard with a position is being paged by another worker (or
/// was, by one that died): tried only before this worker has paged one of its own, so a worker
/// that finished its shards stops instead of knocking at every busy one.
pub(crate) fn next_shard(
    order: &[u32],
    states: &BTreeMap<String, ShardState>,
    tried: &BTreeSet<u32>,
    paged_one: bool,
) -> Option<u32> {
    let state_of = |k: u32| Checkpoints::state_of(states, &k.to_string());
    let mut open = order.iter().copied().filter(|k| !tried.contains(k) && *state_of(*k) != ShardState::Done);
    let unstarted = order.iter().copied().find(|k| !tried.contains(k) && *state_of(*k) == ShardState::Start);
    unstarted.or_else(|| if paged_one { None } else { open.next() })
}

/// Every one of the run's `n` shards is done. Pure.
pub(crate) fn all_done(states: &BTreeMap<String, ShardState>, n: u32) -> bool {
    (0..n).all(|k| *Checkpoints::state_of(states, &k.to_string()) == ShardState::Done)
}

/// How a cancelled advance (`n` shard checks, then the advance) reads: `true` when only the
/// advance's own condition (forward only) failed, so another worker wrote it; `false` when a
/// shard was not done after all. Reasons come one per item, in the request's order
/// ("TransactWriteItems", DynamoDB API reference: CancellationReasons). Pure.
pub(crate) fn advanced_by_another(reasons: &[tickwork::error::CancelReason], n: u32) -> bool {
    let n = n as usize;
    reasons.len() == n + 1 && reasons[n].condition_failed() && reasons[..n].iter().all(|r| !r.condition_failed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor() -> ShardState {
        ShardState::Resume(
            tickwork::pager::Cursor::encode(&tickwork::capacity::Item::from([(
                "pk".to_string(),
                tickwork::schema::av_s("x"),
            )]))
            .unwrap(),
        )
    }

    #[test]
    fn workers_begin_spread_over_the_shards() {
        assert_eq!(shard_order(0, 4, 8), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(shard_order(1, 4, 8), [2, 3, 4, 5, 6, 7, 0, 1]);
        assert_eq!(shard_order(3, 4, 8)[0], 6);
        // More workers than shards: each begins somewhere in range.
        assert!(shard_order(15, 16, 4).iter().all(|k| *k < 4));
        assert_eq!(shard_order(15, 16, 4), [3, 0, 1, 2], "the last worker begins at the last shard, each once");
        assert_eq!(shard_order(0, 0, 0), [0]);
    }

    #[test]
    fn unstarted_shards_come_first_and_busy_ones_only_before_a_workers_first_shard() {
        let order = shard_order(0, 1, 4);
        let states = BTreeMap::from([("0".to_string(), ShardState::Done), ("1".to_string(), cursor())]);
        let none = BTreeSet::new();
        // Shard 1 has a position (another worker's), 2 and 3 nobody started: 2 first.
        assert_eq!(next_shard(&order, &states, &none, false), Some(2));
        assert_eq!(next_shard(&order, &states, &BTreeSet::from([2, 3]), false), Some(1), "an abandoned one");
        assert_eq!(next_shard(&order, &states, &BTreeSet::from([2, 3]), true), None, "after a shard of its own");
        let done: BTreeMap<String, ShardState> = (0..4).map(|k| (k.to_string(), ShardState::Done)).collect();
        assert_eq!(next_shard(&order, &done, &none, false), None);
        assert!(all_done(&done, 4));
        assert!(!all_done(&states, 4));
        assert!(!all_done(&done, 5), "a shard a larger count adds is not done");
    }

    #[test]
    fn a_cancelled_advance_is_another_workers_only_when_the_advance_alone_failed() {
        let ok = tickwork::error::CancelReason { code: None, item: None };
        let failed = tickwork::error::CancelReason { code: Some("ConditionalCheckFailed".into()), item: None };
        assert!(advanced_by_another(&[ok.clone(), ok.clone(), failed.clone()], 2));
        assert!(!advanced_by_another(&[failed.clone(), ok.clone(), failed.clone()], 2), "a shard not done");
        assert!(!advanced_by_another(&[ok.clone(), ok.clone(), ok.clone()], 2), "cancelled for another cause");
        assert!(!advanced_by_another(&[ok, failed], 2), "reasons not one per item");
    }
}
