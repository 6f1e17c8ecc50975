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
//! the wake set, in one flush.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::budget::{AnyOf, Deadline};
use tickwork::calendar;
use tickwork::checkpoint::{Checkpoints, ShardState};
use tickwork::lease::{fenced_write, Acquire, Fence, Fenced, LeaseConfig};
use tickwork::queue::enqueue_item;
use tickwork::tenants::{Position, Tenant};
use tickwork_lambda::{Outcome, Tick};

use crate::pulse::{owed, Owed, Target, Visit, PULSE_KIND};
use crate::{Deps, Due, DueGroup, PulseError, Report, WakeGroup};

/// Live (fenced by the lease) or dry (nothing written).
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    Live(&'a Fence),
    Dry,
}

/// When a run flushes, decided from counts alone, so that `tickctl cost` replays the sweep's own
/// decisions ([`FlushCounts::full`]).
///
/// A transaction holds at most 100 items and 4 MB ("TransactWriteItems", DynamoDB API reference):
/// position writes, checkpoints and failure records are each bounded here, and the batch by its
/// units and its bytes, so it splits into a few items of at most 128 KB and 2,000 units each
/// whatever the tenant ids' length (up to 900 bytes). A flush can come
/// in the middle of a page: its checkpoint is then the cursor just after the last tenant taken
/// (the index key of that tenant), so a page read again after a crash starts after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushCounts {
    /// Position writes.
    pub repositions: usize,
    /// Shards with a new checkpoint.
    pub checkpoints: usize,
    /// Failure records.
    pub failures: usize,
    /// Units waiting.
    pub units: usize,
    /// Bytes the waiting units take in batch payloads, over-estimated ([`FlushCounts::unit_bytes`]).
    pub bytes: usize,
}

impl FlushCounts {
    /// Position writes in one transaction at most.
    pub const MAX_REPOSITIONS: usize = 40;
    /// Checkpoints in one transaction at most.
    pub const MAX_CHECKPOINTS: usize = 20;
    /// Failure records in one transaction at most.
    pub const MAX_FAILURES: usize = 10;
    /// Units pending at most (a few batch items).
    pub const MAX_UNITS: usize = 4 * tickwork::batch::MAX_BATCH_UNITS;
    /// Batch bytes pending at most (a few batch items, far under the 4 MB of a transaction).
    pub const MAX_BYTES: usize = 4 * tickwork::batch::MAX_BATCH_BYTES;

    /// What one tenant's pulses add to a batch payload, at most: its id, quoted, and its entries
    /// as if it were the only tenant of its set.
    pub fn unit_bytes(tenant: &str, entries: &[serde_json::Map<String, serde_json::Value>]) -> usize {
        tenant.len() + 3 + serde_json::to_string(entries).map(|e| e.len()).unwrap_or(0)
    }

    /// Flush now?
    pub fn full(&self) -> bool {
        self.repositions >= Self::MAX_REPOSITIONS
            || self.checkpoints >= Self::MAX_CHECKPOINTS
            || self.failures >= Self::MAX_FAILURES
            || self.units >= Self::MAX_UNITS
            || self.bytes >= Self::MAX_BYTES
    }
}

/// What a run has read and not yet written.
struct Pending {
    /// Queue item ids start with this (`pulse#<zone>@<date>`).
    prefix: String,
    batch: Batch,
    repositions: Vec<(Tenant, Position)>,
    checkpoints: BTreeMap<u32, ShardState>,
    failures: Vec<(String, String)>,
    /// The zone group.
    group: String,
    /// Leave the group's wake set with the next flush, whatever it is (the woken tenants a new
    /// run covers, or a wake visit's tenants).
    unwake: Vec<String>,
    /// [`FlushCounts::bytes`] of the batch.
    bytes: usize,
}

impl Pending {
    fn new(prefix: String, zone: &str) -> Self {
        let common = serde_json::Map::from_iter([("zone".to_string(), serde_json::Value::String(zone.to_string()))]);
        Pending {
            prefix,
            batch: Batch::new(common),
            repositions: Vec::new(),
            checkpoints: BTreeMap::new(),
            failures: Vec::new(),
            group: zone.to_string(),
            unwake: Vec::new(),
            bytes: 0,
        }
    }

    fn counts(&self) -> FlushCounts {
        FlushCounts {
            repositions: self.repositions.len(),
            checkpoints: self.checkpoints.len(),
            failures: self.failures.len(),
            units: self.batch.len(),
            bytes: self.bytes,
        }
    }

    fn add(&mut self, t: &Tenant, o: &Owed, report: &mut Report) {
        if !o.pulses.is_empty() {
            let entries = o.entries();
            self.bytes += FlushCounts::unit_bytes(&t.id, &entries);
            self.batch.add(entries, [t.id.clone()]);
        }
        for (g, _) in &o.pulses {
            *report.pulses.entry(g.to_string()).or_default() += 1;
        }
        for (g, n) in &o.skipped {
            *report.skipped.entry(g.to_string()).or_default() += u64::from(*n);
        }
        if let Some(to) = o.reposition {
            self.repositions.push((t.clone(), to));
        }
    }

    fn clear_written(&mut self) {
        self.bytes = 0;
        self.batch.sets.clear();
        self.repositions.clear();
        self.checkpoints.clear();
        self.failures.clear();
        self.unwake.clear();
    }
}

/// How a flush ended.
enum Flushed {
    Written,
    LeaseLost,
}

/// Writes what is pending in one fenced transaction (step 4): the batch, the position writes,
/// the checkpoints, the failure records; with `last` (the watermark advance, or the wake set's
/// update) when given, which replaces the checkpoints.
async fn flush(
    deps: &Deps,
    fence: &Fence,
    run: &str,
    p: &mut Pending,
    advance: Option<&str>,
) -> Result<Flushed, PulseError> {
    for _ in 0..FlushCounts::MAX_REPOSITIONS + 2 {
        let now = deps.clock.now_ms();
        let mut writes = Vec::new();
        for b in p.batch.clone().split() {
            let item = crate::pulse::batch_item(&p.prefix, &b, now);
            writes.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now)?);
        }
        let batches = writes.len();
        for (t, to) in &p.repositions {
            writes.push(deps.tenants.reposition_item(t, *to));
        }
        let moves = p.repositions.len();
        if advance.is_none() {
            for (k, st) in &p.checkpoints {
                writes.push(deps.checkpoints.save_item(&deps.cfg.job, run, &k.to_string(), st));
            }
        }
        for (t, e) in &p.failures {
            writes.push(tickwork::failures::record(&deps.tables.control, &deps.cfg.job, run, t, e, now));
        }
        writes.extend(deps.marks.mark_item(&deps.cfg.job, &p.group, advance, &p.unwake));
        if writes.is_empty() {
            return Ok(Flushed::Written);
        }
        match fenced_write(&deps.db, fence, writes).await? {
            Fenced::Written => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            Fenced::Stale => return Ok(Flushed::LeaseLost),
            // A batch item exists: this flush landed before and its answer was lost (an id is the
            // digest of its units: the same id, the same units, written by this very transaction).
            Fenced::ConditionFailed { index, .. } if index < batches => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            // A tenant changed since its page was read (an operator's change, or a visit the
            // page's index read did not see yet): its pulses leave this flush, and it is woken, so
            // the next tick plans it again from what it is now (a visit to a tenant that left the
            // group, or already stands where it should, does nothing). It stays in the wake set:
            // this flush no longer removes it.
            Fenced::ConditionFailed { index, .. } if index < batches + moves => {
                let id = p.repositions[index - batches].0.id.clone();
                tracing::info!(tenant = %id, "tenant changed since it was read; woken to be planned again");
                deps.marks.wake(&deps.cfg.job, &p.group, &id).await?;
                p.unwake.retain(|u| *u != id);
                p.repositions.retain(|r| r.0.id != id);
                let own = format!("{PULSE_KIND}#{id}#");
                p.batch = p.batch.subset(PULSE_KIND, |k| !k.starts_with(&own));
            }
            // The watermark is at or past this run already: another leader finished it.
            Fenced::ConditionFailed { .. } if advance.is_some() => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            Fenced::ConditionFailed { index, .. } => {
                return Err(PulseError::Db(tickwork::DbError::Invalid(format!(
                    "flush of {run}: unexpected condition failure at write {index}"
                ))))
            }
        }
    }
    Err(PulseError::Db(tickwork::DbError::Invalid(format!("flush of {run}: tenants kept changing under us"))))
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
    if let (Mode::Live(fence), true) = (mode, deps.cfg.shard_workers > 1) {
        return lead_shared(deps, tick, fence, due, budget, report).await;
    }
    let mut partial = false;
    // A group whose run starts now covers its woken tenants (they are active in its index).
    let starts_now = |group: &str| due.groups.iter().any(|g| g.group == group && g.started_ms.is_none());
    for w in &due.wake {
        if starts_now(&w.group) {
            continue;
        }
        if !wake(deps, tick, mode, w, &mut report).await? {
            report.outcome = Outcome::LostLease;
            return Ok(report);
        }
    }
    for g in &due.groups {
        let covered = due.wake.iter().find(|w| w.group == g.group && starts_now(&w.group)).map(|w| w.ids.as_slice());
        match run_group(deps, tick, mode, g, covered, budget, &mut report).await? {
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

/// Most shards a shared run may have: its watermark advances in one transaction holding a check
/// of every shard's checkpoint and the advance (at most 100 items, "TransactWriteItems",
/// DynamoDB API reference), with room to spare.
pub const MAX_SHARED_SHARDS: u32 = 96;

/// The leader of a tick in shared mode ([`crate::PulseConfig::shard_workers`] above 1): woken
/// tenants first (under the job's lease), each due group's run started, helpers started for the
/// shards, then the leader pages shards too, as one worker among them.
async fn lead_shared(
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
    for w in due.wake.iter().filter(|w| !due.groups.iter().any(|g| g.group == w.group && g.started_ms.is_none())) {
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
        shards += deps.tenants.shards().max(g.recorded_shards);
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
    let fresh = crate::due_groups(&state, tick.time_ms);
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
        if deps.tenants.shards().max(g.recorded_shards) > MAX_SHARED_SHARDS {
            tracing::warn!(group = %g.group, "more tenant shards than a shared run takes: paged by the leader alone");
            let end = match leader {
                Some(fence) => run_group(deps, tick, Mode::Live(fence), g, None, budget, &mut report).await?,
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
    let n = deps.tenants.shards().max(g.recorded_shards);
    if n > MAX_SHARED_SHARDS {
        return Err(PulseError::Db(tickwork::DbError::Invalid(format!(
            "{n} tenant shards: a run shared by shard workers has at most {MAX_SHARED_SHARDS}"
        ))));
    }
    let target = Target {
        tz: &tz,
        today: date(&g.local)?,
        late_at: g.started_ms.unwrap_or(tick.time_ms),
        mark: g.mark.as_deref().map(date).transpose()?,
        policy: &deps.cfg.policy,
    };
    // Worker w of W begins at shard w·n/W: workers starting together take different shards.
    let first = (u64::from(tick.worker) * u64::from(n) / u64::from(deps.cfg.shard_workers.max(1))) as u32 % n;
    let order: Vec<u32> = (0..n).map(|i| (first + i) % n).collect();
    let mut states = deps.checkpoints.read(&deps.cfg.job, &run).await?;
    let mut tried = std::collections::BTreeSet::new();
    let mut paged_one = false;
    let mut follower: Option<Owed> = None;
    while !budget.exhausted() {
        // Shards nobody started first. A shard with a position is being paged by another worker
        // (or was, by one that died): tried only before this worker has paged one of its own,
        // so a worker that finished its shards stops instead of knocking at every busy one.
        let state_of = |k: &u32| Checkpoints::state_of(&states, &k.to_string()).clone();
        let open = |k: &&u32| !tried.contains(*k) && state_of(k) != ShardState::Done;
        let next = order.iter().filter(open).find(|k| state_of(k) == ShardState::Start).or_else(|| {
            if paged_one {
                None
            } else {
                order.iter().find(open)
            }
        });
        let Some(&k) = next else { break };
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
    if (0..n).any(|k| *Checkpoints::state_of(&states, &k.to_string()) != ShardState::Done) {
        return Ok(false);
    }
    let mut writes: Vec<_> = (0..n).map(|k| deps.checkpoints.done_check(job, run, &k.to_string())).collect();
    writes.push(deps.marks.advance_item(job, &g.group, &g.local));
    match deps.db.transact_write(writes).await {
        Ok(_) => Ok(true),
        // Only the advance's own condition (forward only) failed: another worker wrote it.
        Err(tickwork::DbError::TransactionCanceled { reasons }) => Ok(reasons.len() == n as usize + 1
            && reasons[n as usize].condition_failed()
            && reasons[..n as usize].iter().all(|r| !r.condition_failed())),
        Err(e) => Err(e.into()),
    }
}

enum GroupEnd {
    Done,
    Partial,
    LeaseLost,
}

fn date(s: &str) -> Result<jiff::civil::Date, PulseError> {
    s.parse().map_err(|_| PulseError::Calendar(calendar::CalendarError(format!("`{s}` is not a date"))))
}

async fn run_group(
    deps: &Deps,
    tick: &Tick,
    mode: Mode<'_>,
    g: &DueGroup,
    covered: Option<&[String]>,
    budget: &dyn Budget,
    report: &mut Report,
) -> Result<GroupEnd, PulseError> {
    let tz = calendar::zone(&g.group)?;
    let run = g.run_id();
    if let (Mode::Live(_), None) = (mode, g.started_ms) {
        deps.marks.start_run(&deps.cfg.job, &g.group, &g.local, tick.time_ms).await?;
    }
    let target = Target {
        tz: &tz,
        today: date(&g.local)?,
        late_at: g.started_ms.unwrap_or(tick.time_ms),
        mark: g.mark.as_deref().map(date).transpose()?,
        policy: &deps.cfg.policy,
    };
    // Every tenant that follows the group is owed the same: planned once.
    let mut follower: Option<Owed> = None;
    let states = match mode {
        Mode::Live(_) => deps.checkpoints.read(&deps.cfg.job, &run).await?,
        Mode::Dry => BTreeMap::new(),
    };
    let mut pending = Pending::new(format!("{PULSE_KIND}#{run}"), &g.group);
    // A run that starts now covers the tenants woken before it: they leave the wake set with the
    // run's first write.
    if let (Mode::Live(_), Some(ids)) = (mode, covered) {
        pending.unwake = ids.to_vec();
    }
    // A run resumed from an earlier tick (its budget ended, or it crashed) writes after every page,
    // so that an invocation that keeps dying at the same point still moves the run on.
    let eager = g.started_ms.is_some();
    let mut done = true;
    // Every shard any writer used: this process's count, or a larger one recorded since it started.
    for k in 0..deps.tenants.shards().max(g.recorded_shards) {
        let state = Checkpoints::state_of(&states, &k.to_string()).clone();
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
            Ok(GroupEnd::Done)
        }
        Flushed::Written => Ok(GroupEnd::Partial),
    }
}

/// One shard of a run being paged: where its writes gather, and how eagerly they are flushed.
struct Shard<'p> {
    k: u32,
    pending: &'p mut Pending,
    /// What a tenant that follows the group is owed, planned once per worker.
    follower: &'p mut Option<Owed>,
    /// Flush after every page (a resumed run, or a shard under its own lease).
    eager: bool,
}

/// How paging one shard ended.
enum ShardEnd {
    Done,
    Stopped,
    LeaseLost,
}

/// Steps 2 to 5 for one shard, from `state` until it is drained, the budget stops it, or the
/// fence is lost. The one enumeration loop: the single leader, the shard workers and the dry run
/// all page through here.
#[allow(clippy::too_many_arguments)]
async fn page_shard(
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
        let (page, next) =
            deps.tenants.zone_page(&g.group, sh.k, state.cursor(), deps.cfg.page_size).await.map_err(|e| match e {
                tickwork::pager::PageError::Db(d) => PulseError::Db(d),
                tickwork::pager::PageError::Cursor(c) => PulseError::Cursor(c),
                tickwork::pager::PageError::Handler(never) => match never {},
            })?;
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

/// Brings the woken tenants of one group to its watermark and clears them from its wake set;
/// `false` when the lease was lost.
async fn wake(
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
    };
    let visit = Visit::Wake { run_in_progress: w.run_in_progress };
    // In chunks, so that one transaction holds every position write of its chunk.
    for ids in w.ids.chunks(FlushCounts::MAX_REPOSITIONS) {
        if !wake_chunk(deps, mode, w, ids, &target, visit, report).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn wake_chunk(
    deps: &Deps,
    mode: Mode<'_>,
    w: &WakeGroup,
    ids: &[String],
    target: &Target<'_>,
    visit: Visit,
    report: &mut Report,
) -> Result<bool, PulseError> {
    // Boxed: an unboxed closure over borrowed ids is not accepted where the job's future must be
    // `Send` for every lifetime.
    let gets: Vec<BoxFuture<'_, Result<Option<Tenant>, tickwork::DbError>>> =
        ids.iter().map(|id| Box::pin(deps.tenants.get(id)) as BoxFuture<'_, _>).collect();
    let read: Vec<Result<Option<Tenant>, tickwork::DbError>> =
        stream::iter(gets).buffered(deps.cfg.tenant_concurrency).collect().await;
    let run = format!("{}@wake", w.group);
    let mut pending = Pending::new(format!("{PULSE_KIND}#{}@wake{}", w.group, deps.clock.now_ms()), &w.group);
    for (id, r) in ids.iter().zip(read) {
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
    pending.unwake = ids.to_vec();
    Ok(matches!(flush(deps, fence, &run, &mut pending, None).await?, Flushed::Written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::{Grain, Period};

    /// Tenants with the longest ids allowed (900 bytes) fill a flush by bytes long before its
    /// units: the batch it writes stays a few items, far under a transaction's 100 items and 4 MB.
    #[test]
    fn a_flush_of_long_ids_stays_within_a_transaction() {
        let day = Period::containing(Grain::Day, "2026-11-28".parse().unwrap()).unwrap();
        let entries = vec![crate::pulse::entry(Grain::Day, &day)];
        let mut batch = Batch::new(serde_json::Map::new());
        let mut counts = FlushCounts::default();
        let mut n = 0;
        while !counts.full() {
            let id = format!("{n:0900}");
            counts.units += entries.len();
            counts.bytes += FlushCounts::unit_bytes(&id, &entries);
            batch.add(entries.clone(), [id]);
            n += 1;
        }
        assert!(counts.units < FlushCounts::MAX_UNITS, "the bytes stopped it: {n} tenants");
        let items = batch.split();
        let bytes: usize = items.iter().map(|b| b.to_payload().len()).sum();
        assert!(items.len() <= 5 && bytes < 1 << 20, "{} items, {bytes} bytes", items.len());
    }
}
