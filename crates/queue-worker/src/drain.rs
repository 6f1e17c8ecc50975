//! The drain: claim an item when a handler slot is free to run it, run its units, settle it, until
//! the queue is empty or the budget says stop.
//!
//! 1. **Feed** ([`Feed`]): poll a ready shard for up to `batch` keys (a key-condition Query that
//!    never reads a claimed, unexpired item), starting at a random shard and trying a page's keys
//!    from a random place in it, so concurrent drains spread over the candidates instead of racing
//!    for the oldest. A shard whose page came back full is polled again when its keys are used up;
//!    a round of every shard that finds nothing ends the feed. A pause marker among the keys stops
//!    claiming (pausing costs no read of its own). A full page is a backlog: the fleet is asked to
//!    grow ([`crate::fleet`]), once per drain.
//! 2. **Claim what can run**: while fewer than `concurrency` handler calls are running, start the
//!    next unit of a held item (or the next units, as many as its kind's handler takes in one
//!    call: a target's batch, [`crate::targets`]); only when no held item has a unit left to
//!    start is another item
//!    claimed (conditional update; losing the race is normal). An item is never claimed to sit:
//!    a claim is billed at the item's size, and so is the settle that gives it back.
//! 3. **Run** each unit time-boxed and with panics caught ([`crate::units`]); settle an item once
//!    its started units have ended and none is left to start (or the budget stopped starting
//!    them): finished, retried, dead-lettered unit by unit, the deadline's leftovers given back
//!    with the attempt refunded.
//! 4. **A worker that died**: an item whose last claim expired unsettled ([`Job::died`]) is split
//!    into parts that each run alone ([`Job::suspect`]); an item that runs alone is claimed only
//!    when nothing else is held, and nothing is claimed beside it. So a unit that kills its
//!    process harms its batch-mates once, and is narrowed down until it dies alone and is
//!    dead-lettered after its attempts.
//! 5. **Stop**: when the budget is spent, nothing more starts; what runs finishes; everything held
//!    is settled before returning.
//! 6. **Retries run at their backoff**: a retry is a MODIFY, which the stream filter passes over,
//!    so no new drain would start for it before the hourly safety poll. The drain that scheduled
//!    it therefore stays for it (its earliest retry, again and again while each falls due within
//!    its budget: attempts are bounded, so is the stay), and one whose budget ends first reports
//!    the instant ([`Report::retry_at_ms`]), which its successor is started with and waits for
//!    ([`crate::fleet`]). Why a stay and not a wake: waiting costs Lambda duration only while
//!    a unit is failing (80 s at 256 MB is $0.0003), nothing while the queue is idle, and no new
//!    call or grant; a one-shot Scheduler wake per retry would be a shared schedule that
//!    concurrent drains overwrite.
//! 7. **A throttle backs the drain off** ([`crate::throttle`]): a call its target refused for
//!    rate or concurrency sends its units back with the attempt refunded (after the backoff); the
//!    drain halves the calls it runs at once, adding one back each time as many calls pass
//!    ([`crate::throttle::CallLimit`]), and claims nothing until the backoff has passed, waiting
//!    for the units as for a retry (step 6), or handing them on when its budget ends first.
//! 8. **A settle that fails is tried again** ([`SETTLE_RETRY_MS`]): its units have run, and
//!    an item left claimed would come back at its visibility timeout as though its worker had
//!    died (split into parts that each run alone, every unit run again). The settle is
//!    conditional on the claim, so a try whose first answer was lost is refused as a whole.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tickwork::batch::Batch;
use tickwork::budget::Budget;
use tickwork::clock::Millis;
use tickwork::queue::{Claim, Job, Queue, QueueError, Settle};

use crate::config::WorkerConfig;
use crate::feed::{take, Feed, TakeRun};
use crate::growing::{Grow, NoFleet};
use crate::handon::{in_hand_retries, InHand};
use crate::registry::{HandlerError, Registry};
use crate::report::tally;
pub use crate::report::Report;
use crate::units::{call, settle_held, units_per_call, Held, Settled, UnitEnd};

/// How long a drain waits before each further try of a settle that failed through the SDK's own
/// retries (step 8): past a brown-out of a few seconds, well within the claim's visibility.
pub const SETTLE_RETRY_MS: [u64; 2] = [2_000, 8_000];

/// Parts an item is split into when its worker died ([`Job::died`]): each death beside it divides
/// the suspects by this, so a unit among 2,000 is alone after four deaths.
pub const ISOLATION_PARTS: usize = 8;

/// Claims and runs ready items until the queue is empty or `budget` says stop.
pub async fn drain(
    queue: &Queue,
    handlers: &Registry,
    owner: &str,
    budget: &dyn Budget,
    cfg: &WorkerConfig,
) -> Result<Report, QueueError> {
    drain_with(queue, handlers, owner, budget, cfg, &NoFleet).await
}

type UnitRun<'a> = BoxFuture<'a, (u64, Vec<(String, UnitEnd)>)>;
type SettleRun<'a> = BoxFuture<'a, Result<Settled, QueueError>>;
type Tracked<'a> = BoxFuture<'a, (u64, Result<Settled, QueueError>)>;

/// A settle named by `n`, so that it is known to be in flight until it ends.
fn tracked(n: u64, run: SettleRun<'_>) -> Tracked<'_> {
    Box::pin(async move { (n, run.await) })
}

/// What a held item may yet send back when the budget ends (its running units may fail; its
/// unstarted ones go back). Pure.
fn in_hand(h: &Held) -> InHand {
    InHand {
        attempts: h.job.attempts,
        throttles: h.job.throttles,
        may_fail: h.running > 0 || h.ends.iter().any(|(_, e)| !matches!(e, UnitEnd::Done)),
        refunds: h.unstarted() > 0,
    }
}

/// [`drain`], asking `fleet` to grow when a poll shows a backlog.
pub async fn drain_with(
    queue: &Queue,
    handlers: &Registry,
    owner: &str,
    budget: &dyn Budget,
    cfg: &WorkerConfig,
    fleet: &dyn Grow,
) -> Result<Report, QueueError> {
    match drain_until(queue, handlers, owner, budget, cfg, fleet, &[]).await {
        (_, Some(e)) => Err(e),
        (r, None) => Ok(r),
    }
}

/// [`drain_with`], also waiting for a retry due at `retry_at` (a predecessor's, step 6) as for
/// one of its own. A drain that failed still reports what it did (its retries among it, which
/// its successor must wait for: [`crate::handon`]) beside the request that failed.
pub async fn drain_until(
    queue: &Queue,
    handlers: &Registry,
    owner: &str,
    budget: &dyn Budget,
    cfg: &WorkerConfig,
    fleet: &dyn Grow,
    retry_at: &[Millis],
) -> (Report, Option<QueueError>) {
    tickwork::iam::acting_as(crate::config::ROLE, drain_as(queue, handlers, owner, budget, cfg, fleet, retry_at)).await
}

/// Whether a drain stays for a retry due at `at`: it falls due before the budget's end (`left`
/// from `now`). Pure.
pub fn stays_for(at: Millis, now: Millis, left: Option<Millis>) -> bool {
    left.is_some_and(|left| at - now < left)
}

async fn drain_as(
    queue: &Queue,
    handlers: &Registry,
    owner: &str,
    budget: &dyn Budget,
    cfg: &WorkerConfig,
    fleet: &dyn Grow,
    retry_at: &[Millis],
) -> (Report, Option<QueueError>) {
    let mut r = Report::default();
    // The feed lives in the one take in flight, and comes back with its answer.
    let mut feed = Some(Feed::new(queue.poll_shards(), cfg.poll_keys()));
    let mut taking: Option<TakeRun<'_>> = None;
    let mut held: BTreeMap<u64, Held> = BTreeMap::new();
    let mut next_id = 0u64;
    let mut running: FuturesUnordered<UnitRun<'_>> = FuturesUnordered::new();
    let mut settling: FuturesUnordered<Tracked<'_>> = FuturesUnordered::new();
    // What each settle in flight may send back ([`InHand`]), for a hand-on at the budget's end.
    let mut in_settle: BTreeMap<u64, InHand> = BTreeMap::new();
    let mut next_settle = 0u64;
    let mut growing: FuturesUnordered<BoxFuture<'_, ()>> = FuturesUnordered::new();
    let mut stopping = false;
    // Every retry instant this drain scheduled (or was started for) not yet waited for.
    let mut retry_due: std::collections::BTreeSet<Millis> = retry_at.iter().copied().collect();
    // A failed request stops the drain, but only after what runs has ended and what is held is
    // settled: nothing claimed is left to wait for its visibility timeout.
    let mut failed: Option<QueueError> = None;
    // An item of ours went back ready while the feed was out: reopen it.
    let mut reopen = false;
    // Step 7: a target throttled; nothing is claimed before this instant.
    let mut hold_until: Option<Millis> = None;
    // Step 7: the handler calls at once, halved by a throttle and grown back as calls pass.
    let mut limit = crate::throttle::CallLimit::new(cfg.concurrency);
    loop {
        if !stopping && budget.exhausted() {
            stopping = true;
            r.stopped_by_deadline = true;
            // The successor starts now, beside what still runs ([`crate::growing`]).
            let now = queue.clock().now_ms();
            let work_left =
                taking.is_some() || feed.as_ref().is_some_and(Feed::more) || held.values().any(|h| h.unstarted() > 0);
            let deadline = now + cfg.stop_before().as_millis() as Millis;
            // A claim in flight comes back at once, its units unstarted.
            let claiming =
                taking.as_ref().map(|_| InHand { attempts: 0, throttles: 0, may_fail: false, refunds: true });
            let hands: Vec<InHand> =
                held.values().map(in_hand).chain(in_settle.values().copied()).chain(claiming).collect();
            let mut retries: Vec<Millis> = retry_due.iter().copied().collect();
            retries.extend(in_hand_retries(&hands, deadline, queue.config()));
            growing.push(fleet.hand_on_at_stop(work_left, retries, now));
        }
        // Step 2: fill the handler slots.
        while !stopping && running.len() < limit.allowed() {
            let Some(id) = startable(&held) else { break };
            let h = held.get_mut(&id).expect("held");
            // One call: one unit, or as many as the kind's target takes in a request (one on the
            // last attempt of a target whose calls fail as a whole, and for an item run alone).
            let last = h.job.attempts >= queue.config().max_attempts;
            let per_call = units_per_call(handlers, &h.job.kind, last, h.alone);
            let n = per_call.min(h.unstarted());
            let jobs: Vec<_> = (h.next..h.next + n).map(|i| h.unit_job(i)).collect();
            let keys: Vec<String> = h.units[h.next..h.next + n].iter().map(|u| u.key.clone()).collect();
            h.next += n;
            h.running += n;
            running.push(Box::pin(async move {
                let results = call(handlers, &jobs, cfg).await;
                let ends = keys
                    .into_iter()
                    .zip(jobs.iter().zip(results))
                    .map(|(key, (job, r))| match r {
                        Ok(()) => (key, UnitEnd::Done),
                        Err(e) => {
                            tracing::warn!(id = %job.id, error = %e, "unit failed");
                            (key, UnitEnd::Failed(e))
                        }
                    })
                    .collect();
                (id, ends)
            }));
        }
        if let (true, Some(f)) = (reopen, feed.as_mut()) {
            f.reopen();
            reopen = false;
        }
        // The next item is taken (polled for, claimed) once every unit held has started: it is
        // in hand as the running ones free their slots. Nothing is claimed beside an item that
        // runs alone.
        let held_off = hold_until.is_some_and(|u| u > queue.clock().now_ms());
        if let Some(f) =
            feed.take_if(|f| !stopping && !held_off && !f.done && held.values().all(|h| h.unstarted() == 0 && !h.alone))
        {
            let mine: HashSet<String> = held.values().map(|h| h.job.id.clone()).collect();
            taking = Some(Box::pin(take(queue, owner, f, fleet, budget, mine)));
        }
        if feed.as_ref().is_some_and(|f| f.paused) {
            stopping = true;
        }
        // Step 3: settle what is through.
        let through: Vec<u64> = held
            .iter()
            .filter(|(_, h)| h.running == 0 && (h.unstarted() == 0 || stopping))
            .map(|(id, _)| *id)
            .collect();
        for id in through {
            let h = held.remove(&id).expect("held");
            in_settle.insert(next_settle, in_hand(&h));
            settling.push(tracked(next_settle, settle_tried(queue, h, budget)));
            next_settle += 1;
        }
        if running.is_empty() && settling.is_empty() && taking.is_none() && growing.is_empty() {
            let f = feed.as_mut().expect("the feed is home");
            if !held.is_empty() || (!stopping && !f.done && !held_off) {
                continue;
            }
            // Step 6: the earliest retry of ours due within the budget is waited for; a retry
            // scheduled since sets the next.
            if let (false, Some(&at)) = (stopping, retry_due.first()) {
                let now = queue.clock().now_ms();
                if stays_for(at, now, budget.remaining_ms()) {
                    retry_due.retain(|d| *d > at);
                    tokio::time::sleep(Duration::from_millis((at - now).max(0) as u64)).await;
                    f.reopen();
                    continue;
                }
            }
            r.retry_at_ms = retry_due.iter().copied().collect();
            break;
        }
        // The budget's end is noticed when it comes, not when a slow unit next ends: the hand-on
        // it starts needs the time after it.
        let stop_in = if stopping { None } else { budget.remaining_ms() };
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(stop_in.unwrap_or(0).max(1) as u64)), if stop_in.is_some() => {}
            Some((id, ends)) = running.next(), if !running.is_empty() => {
                let h = held.get_mut(&id).expect("a running unit's item is held");
                h.running -= ends.len();
                let hint = ends.iter().find_map(|(_, e)| match e {
                    UnitEnd::Failed(HandlerError::Throttled { after_ms, .. }) => Some(*after_ms),
                    _ => None,
                });
                r.throttled += ends.iter().filter(|(_, e)| matches!(e, UnitEnd::Failed(HandlerError::Throttled { .. }))).count() as u64;
                h.ends.extend(ends);
                match hint {
                    // Step 7: back off, and run fewer calls at once.
                    Some(hint) => {
                        let now = queue.clock().now_ms();
                        let until = now + crate::throttle::delay_ms(h.job.throttles, hint, &h.job.id) as Millis;
                        // One wake a hold: a throttle within it extends it, no new round of polls.
                        if hold_until.is_none_or(|u| u <= now) {
                            retry_due.insert(until);
                        }
                        hold_until = Some(hold_until.map_or(until, |u| u.max(until)));
                        limit.throttled();
                    }
                    None => limit.passed(),
                }
            }
            Some((done, s)) = settling.next(), if !settling.is_empty() => {
                in_settle.remove(&done);
                let s = match s {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "a settle failed: the drain stops; the item comes back after its visibility timeout");
                        stopping = true;
                        failed.get_or_insert(e);
                        continue;
                    }
                };
                tally(&mut r, &s, &mut retry_due);
                // An item of ours back to pending and ready already (no backoff) is work again.
                if let (Settle::Retrying { at_ms }, false) = (s.settle, s.refunded) {
                    if at_ms <= queue.clock().now_ms() && !stopping {
                        // The feed may be out with a take that has polled past it: reopened when
                        // it is back.
                        reopen = true;
                    }
                }
            }
            (f, taken) = async { taking.as_mut().expect("a take").await }, if taking.is_some() => {
                taking = None;
                let mut f = f;
                if std::mem::take(&mut reopen) {
                    f.reopen();
                }
                if let Some(seen) = f.grow.take() {
                    growing.push(fleet.grow(seen));
                }
                feed = Some(f);
                let taken = match taken {
                    Ok(t) => t,
                    Err(e) => {
                        tracing::error!(error = %e, "a poll or a claim failed: the drain stops");
                        stopping = true;
                        failed.get_or_insert(e);
                        None
                    }
                };
                match taken {
                    None => {}
                    Some(Claim::Claimed(job)) => {
                        r.claimed += 1;
                        if held.values().any(|h| h.unstarted() > 0) {
                            r.claims_ahead += 1;
                        }
                        if let Some(s) = admit(queue, job, &mut held, &mut next_id) {
                            // Dead-lettered or split: whatever comes back is ready at once.
                            in_settle.insert(next_settle, InHand { attempts: 0, throttles: 0, may_fail: false, refunds: true });
                            settling.push(tracked(next_settle, s));
                            next_settle += 1;
                        }
                    }
                    Some(Claim::Taken) => unreachable!("a take tries candidates until one is claimed"),
                    Some(Claim::DeadLettered(job)) => {
                        r.dead_lettered += 1;
                        r.dead_units += crate::units::units_of(&job);
                    }
                }
            }
            Some(()) = growing.next(), if !growing.is_empty() => {}
        }
    }
    let f = feed.expect("the feed is home");
    r.polls = f.polls;
    r.candidates = f.candidates;
    r.taken = f.taken;
    r.oldest_ready_ms = f.oldest_ready_ms;
    r.work_left = r.stopped_by_deadline && (r.refunded > 0 || f.more());
    r.outcome = match (f.paused, r.stopped_by_deadline, r.claimed + r.dead_lettered) {
        (true, _, _) => tickwork_lambda::Outcome::Paused,
        (false, true, _) => tickwork_lambda::Outcome::Partial,
        (false, false, 0) => tickwork_lambda::Outcome::Idle,
        (false, false, _) => tickwork_lambda::Outcome::Completed,
    };
    (r, failed)
}

/// Settles `h`, trying again after each of [`SETTLE_RETRY_MS`] when a DynamoDB request failed and
/// the budget leaves the time (step 8).
fn settle_tried<'a>(queue: &'a Queue, h: Held, budget: &'a dyn Budget) -> SettleRun<'a> {
    Box::pin(async move {
        let mut waits = SETTLE_RETRY_MS.iter();
        loop {
            match settle_held(queue, h.clone()).await {
                // A failure of the request itself (a key past a limit, a condition that will fail
                // again) is not tried again: only the table's, the network's or the service's.
                Err(QueueError::Db(e)) if !e.is_unit_specific() => match waits.next() {
                    Some(&wait) if budget.remaining_ms().is_none_or(|left| left > wait as Millis) => {
                        tracing::warn!(id = %h.job.id, error = %e, wait_ms = wait, "a settle failed; trying it again");
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                    _ => return Err(QueueError::Db(e)),
                },
                other => return other,
            }
        }
    })
}

/// The held item whose next unit starts: the oldest with a unit left, an item that runs alone
/// only once it is the only one held. Pure.
fn startable(held: &BTreeMap<u64, Held>) -> Option<u64> {
    held.iter().find(|(_, h)| h.unstarted() > 0 && (!h.alone || held.len() == 1)).map(|(id, _)| *id)
}

/// Takes a claimed job in: held to run, or settled at once (a batch that cannot be read is
/// dead-lettered; a batch whose worker died is split, [`ISOLATION_PARTS`]).
fn admit<'a>(queue: &'a Queue, job: Job, held: &mut BTreeMap<u64, Held>, next_id: &mut u64) -> Option<SettleRun<'a>> {
    let batch = match Batch::of_job(&job) {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            tracing::error!(id = %job.id, error = %e, "batch cannot be read; dead-lettering");
            return Some(Box::pin(async move {
                let settle = queue.dead_letter(&job, &e).await?;
                Ok(Settled {
                    settle,
                    counts: crate::units::UnitCounts { dead: 1, ..Default::default() },
                    refunded: false,
                    throttled: false,
                })
            }));
        }
    };
    if let (true, Some(b)) = (job.died, &batch) {
        // Split while it has two distinct units at least (a tenant listed twice is one unit):
        // each part is then strictly smaller, and one unit is run alone until its attempts end.
        if b.distinct_units(&job.kind) > 1 {
            let parts: Vec<String> = b.divide(&job.kind, ISOLATION_PARTS).iter().map(Batch::to_payload).collect();
            tracing::warn!(id = %job.id, attempts = job.attempts, units = b.len(), parts = parts.len(), "its last worker died: split, each part to run alone");
            return Some(Box::pin(async move {
                let settle = queue.split(&job, &parts).await?;
                Ok(Settled { settle, counts: Default::default(), refunded: false, throttled: false })
            }));
        }
    }
    if job.died || job.suspect {
        tracing::warn!(id = %job.id, died = job.died, attempts = job.attempts, "running alone: a worker died with it");
    }
    held.insert(*next_id, Held::new(job, batch));
    *next_id += 1;
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_is_stayed_for_within_the_budget() {
        assert!(stays_for(10_000, 0, Some(20_000)));
        assert!(!stays_for(30_000, 0, Some(20_000)));
        assert!(!stays_for(1, 0, None), "an unlimited budget is a tool's drain, which stays for nothing");
    }

    fn job(died: bool, suspect: bool) -> Job {
        Job {
            id: "j".into(),
            kind: "k".into(),
            payload: "{}".into(),
            tenant: None,
            attempts: 1,
            owner: "o".into(),
            claim_until_ms: 0,
            died,
            suspect,
            throttles: 0,
            trouble: None,
        }
    }

    #[test]
    fn an_item_that_runs_alone_starts_only_when_nothing_else_is_held() {
        let mut held = BTreeMap::new();
        held.insert(0, Held::new(job(false, false), None));
        held.insert(1, Held::new(job(false, true), None));
        assert_eq!(startable(&held), Some(0), "the one held before it goes on");
        held.get_mut(&0).unwrap().next = 1;
        assert_eq!(startable(&held), None, "the suspect waits for it to settle");
        held.remove(&0);
        assert_eq!(startable(&held), Some(1));
        held.get_mut(&1).unwrap().next = 1;
        assert_eq!(startable(&held), None, "nothing left to start");
    }

    #[test]
    fn a_held_item_may_fail_while_a_unit_runs_or_after_one_failed_and_refunds_what_has_not_started() {
        let mut h = Held::new(job(false, false), None);
        let n = h.units.len();
        assert_eq!(in_hand(&h), InHand { attempts: 1, throttles: 0, may_fail: false, refunds: n > 0 });
        h.next = n;
        h.running = 1;
        assert!(in_hand(&h).may_fail && !in_hand(&h).refunds, "running: may fail; nothing unstarted");
        h.running = 0;
        assert!(!in_hand(&h).may_fail, "every unit done");
        h.ends.push(("k".into(), UnitEnd::Failed(HandlerError::Retry("down".into()))));
        assert!(in_hand(&h).may_fail, "a unit failed: its item comes back after its backoff");
    }
}
