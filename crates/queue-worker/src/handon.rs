//! What a drain hands its successor, and whether it hands on at all: the one decision every end of
//! a drain makes ([`next_link`]), apart from the I/O that starts the successor ([`crate::fleet`]).
//!
//! A drain that ends with work left, or with retries it could not stay for, hands on at once
//! (fleet step 2, drain step 6). A drain that **failed** (a poll, a claim or a settle that kept
//! failing through the SDK's retries) used to start nothing, so its backlog waited for the hourly
//! safety poll: a five-second DynamoDB brown-out became an hour's delay. It now hands on too, but
//! as a bounded chain: the successor waits a backoff before its first request
//! ([`FAILED_BACKOFF_MS`]: 5 s, 20 s, 60 s), and after [`MAX_FAILED_LINKS`] failures in a row the
//! chain stops and leaves the rest to the safety poll. A fault that persists (a denied call, a
//! missing index) therefore costs at most three more invocations that fail at once, each an error
//! on the worker's `Errors` alarm; a transient one is over within the backoff. A link that
//! succeeds resets the count.

use tickwork::clock::Millis;
use tickwork::queue::QueueConfig;

/// Failed drains in a row after which no successor is started (the safety poll takes over).
pub const MAX_FAILED_LINKS: u32 = 3;

/// How long the successor of the `n`-th failed drain in a row waits before its first request.
pub const FAILED_BACKOFF_MS: [Millis; MAX_FAILED_LINKS as usize] = [5_000, 20_000, 60_000];

/// Most retry instants one hand-on carries: a drain event stays small (Lambda's asynchronous
/// payload limit is 256 KB; this is under 1 KB).
pub const HANDED_RETRIES: usize = 60;

/// What a successor drain is started with, beside its slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// Retries its predecessor scheduled and could not stay for (drain step 6).
    pub retry_at_ms: Vec<Millis>,
    /// Failed drains in a row before it (0 after a drain that succeeded).
    pub failures: u32,
    /// Not to make a request before this instant (a failed predecessor's backoff).
    pub not_before_ms: Option<Millis>,
}

/// The link a drain ending at `now` hands on, or `None` to start no successor. `failed`: the
/// drain stopped on a request that failed; `work_left`: it stopped at its deadline with ready work
/// it did not take; `retry_at`: the retries it hands on ([`handed_retries`]);
/// `failures`: the failed drains in a row before it. Pure.
pub fn next_link(failed: bool, work_left: bool, retry_at: &[Millis], failures: u32, now: Millis) -> Option<Link> {
    if !failed {
        return (work_left || !retry_at.is_empty()).then(|| Link { retry_at_ms: retry_at.to_vec(), ..Link::default() });
    }
    let backoff = *FAILED_BACKOFF_MS.get(failures as usize)?;
    Some(Link { retry_at_ms: retry_at.to_vec(), failures: failures + 1, not_before_ms: Some(now + backoff) })
}

/// How long a drain started with `link` waits before its first request, within `budget_ms` of
/// its invocation (a wait past it would leave no time to drain: it then drains at once, early,
/// rather than end with nothing done). Pure.
pub fn wait_ms(link: &Link, now: Millis, budget_ms: Millis) -> Millis {
    match link.not_before_ms {
        Some(at) if at - now < budget_ms / 2 => (at - now).max(0),
        _ => 0,
    }
}

/// The retries a drain hands on from those it could not stay for (`pending`): only those a
/// successor, with a budget as long as this invocation's (`full_budget` ms), can stay for — a
/// later one (a backoff configured past a whole invocation) is left to the safety poll, as
/// handed on it would start successors that each end at once until it fell due — each rounded
/// up to its whole second and once. Past [`HANDED_RETRIES`] seconds, the rest are represented by
/// the last: those between run when it falls due (the feed polls every ready item then). Pure.
pub fn handed_retries(pending: &[Millis], now: Millis, full_budget: Millis) -> Vec<Millis> {
    let mut secs: Vec<Millis> = pending
        .iter()
        .filter(|at| **at - now < full_budget)
        .map(|at| at.div_euclid(1000) * 1000 + if at.rem_euclid(1000) > 0 { 1000 } else { 0 })
        .collect();
    secs.sort_unstable();
    secs.dedup();
    if secs.len() > HANDED_RETRIES {
        let last = *secs.last().expect("non-empty");
        secs.truncate(HANDED_RETRIES - 1);
        secs.push(last);
    }
    secs
}

/// An item still in a drain's hands when its budget ends: what may yet send it back to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InHand {
    /// Its claim's attempts.
    pub attempts: u32,
    /// Its target's throttles so far: under [`crate::throttle::FREE_THROTTLES`], a throttled
    /// unit goes back without spending the attempt, after a throttle's delay.
    pub throttles: u32,
    /// A unit of it failed or is still running: it may come back after its backoff.
    pub may_fail: bool,
    /// Units of it will go back unstarted (the attempt refunded): ready at once when settled.
    pub refunds: bool,
}

/// The instants a drain stopped by its budget names for the items still in its hands (held, or
/// being settled), when it hands on before they are settled: each settle is written by the
/// invocation's deadline (`deadline_ms`) at the latest. Units sent back unstarted are ready from
/// it; a failed unit puts its item back `backoff(attempts)` after it, unless its attempts are
/// spent (dead-lettered); a throttled one, a throttle's delay after it, at most
/// [`crate::throttle::MAX_BACKOFF_MS`]. The successor polls again at each instant and finds what
/// came back. Pure.
pub fn in_hand_retries(items: &[InHand], deadline_ms: Millis, q: &QueueConfig) -> Vec<Millis> {
    let mut at = Vec::new();
    for i in items {
        if i.refunds {
            at.push(deadline_ms);
        }
        if i.may_fail && i.attempts < q.max_attempts {
            at.push(deadline_ms + q.backoff(i.attempts).as_millis() as Millis);
        }
        if i.may_fail && i.throttles < crate::throttle::FREE_THROTTLES {
            at.push(deadline_ms + crate::throttle::MAX_BACKOFF_MS as Millis);
        }
    }
    at
}

/// What a drain hands on at its end beyond the `early` link it handed when its budget ended
/// ([`crate::growing`]): `late` ([`next_link`]) less what the early successor already covers —
/// the work left, and every retry due no later than the last instant it polls again at (the
/// early link names the deadline whenever units go back unstarted). A drain that failed after it
/// handed on early hands on no chain of its own: its successor runs, and fails and backs off in
/// turn if the fault lasts. `None`: nothing more. Pure.
pub fn beyond(late: Option<Link>, early: Option<&Link>) -> Option<Link> {
    let late = late?;
    let Some(early) = early else { return Some(late) };
    let last = early.retry_at_ms.iter().max();
    let rest: Vec<Millis> = late.retry_at_ms.iter().copied().filter(|at| last.is_none_or(|m| at > m)).collect();
    (!rest.is_empty()).then_some(Link { retry_at_ms: rest, ..Link::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_795_910_400_000;

    #[test]
    fn a_drain_that_succeeds_hands_on_only_work_and_resets_the_count() {
        assert_eq!(next_link(false, false, &[], 2, NOW), None, "an empty queue ends the chain");
        let l = next_link(false, true, &[], 2, NOW).unwrap();
        assert_eq!(l, Link::default(), "work left: at once, the failures forgotten");
        let l = next_link(false, false, &[NOW + 2_000], 0, NOW).unwrap();
        assert_eq!(l.retry_at_ms, [NOW + 2_000]);
        assert_eq!(l.not_before_ms, None);
    }

    #[test]
    fn failed_drains_hand_on_after_a_growing_backoff_three_times_at_most() {
        let mut failures = 0;
        let mut waits = Vec::new();
        while let Some(l) = next_link(true, false, &[], failures, NOW) {
            assert_eq!(l.failures, failures + 1);
            waits.push(l.not_before_ms.unwrap() - NOW);
            failures = l.failures;
        }
        assert_eq!(waits, [5_000, 20_000, 60_000]);
        assert_eq!(failures, MAX_FAILED_LINKS);
        let l = next_link(true, true, &[NOW + 9_000], 0, NOW).unwrap();
        assert_eq!(l.retry_at_ms, [NOW + 9_000], "a failed drain's retries are handed on with it");
    }

    #[test]
    fn the_wait_is_bounded_by_the_invocation() {
        let l = Link { not_before_ms: Some(NOW + 20_000), ..Link::default() };
        assert_eq!(wait_ms(&l, NOW, 295_000), 20_000);
        assert_eq!(wait_ms(&l, NOW + 30_000, 295_000), 0, "already past");
        assert_eq!(wait_ms(&l, NOW, 30_000), 0, "a wait over half the budget is not made");
        assert_eq!(wait_ms(&Link::default(), NOW, 295_000), 0);
    }

    #[test]
    fn retries_are_handed_on_within_a_successors_budget() {
        assert_eq!(
            handed_retries(&[80_000, 3_600_000], 0, 285_000),
            [80_000],
            "past a whole invocation: the safety poll"
        );
        assert_eq!(handed_retries(&[1_200, 1_900, 2_000, 500], 0, 285_000), [1_000, 2_000]);
        let many: Vec<Millis> = (0..200).map(|s| s * 1000 + 1).collect();
        let h = handed_retries(&many, 0, 285_000);
        assert_eq!(h.len(), HANDED_RETRIES);
        assert_eq!(h[0], 1000);
        assert_eq!(*h.last().unwrap(), 200_000, "the last stands for those left out");
    }

    #[test]
    fn items_in_hand_at_the_stop_are_polled_for_at_the_deadline_and_a_backoff_after_it() {
        let q = QueueConfig { backoff_base: std::time::Duration::from_secs(10), max_attempts: 3, ..Default::default() };
        let throttled = crate::throttle::FREE_THROTTLES;
        let failing = |attempts| InHand { attempts, throttles: throttled, may_fail: true, refunds: false };
        let at = in_hand_retries(&[failing(1), failing(2), failing(3)], NOW, &q);
        assert_eq!(at, [NOW + q.backoff(1).as_millis() as Millis, NOW + q.backoff(2).as_millis() as Millis]);
        assert!(at[0] > NOW, "after the deadline, when the settle is written at the latest");
        // An item on its last attempt whose unstarted units go back: ready at the deadline (the
        // review's case: it was left out, and its units waited for the hourly poll).
        let last = InHand { attempts: 3, throttles: throttled, may_fail: true, refunds: true };
        assert_eq!(in_hand_retries(&[last], NOW, &q), [NOW]);
        // A unit that may yet be throttled comes back within a throttle's longest delay.
        let fresh = InHand { attempts: 3, throttles: 0, may_fail: true, refunds: false };
        assert_eq!(in_hand_retries(&[fresh], NOW, &q), [NOW + crate::throttle::MAX_BACKOFF_MS as Millis]);
        let done = InHand { attempts: 1, throttles: 0, may_fail: false, refunds: false };
        assert!(in_hand_retries(&[done], NOW, &q).is_empty(), "settled as finished: nothing comes back");
    }

    #[test]
    fn a_drain_that_handed_on_at_its_stop_hands_on_only_what_that_link_did_not_cover() {
        let early = Link { retry_at_ms: vec![NOW + 5_000], ..Link::default() };
        assert_eq!(beyond(None, Some(&early)), None);
        let late = Link { retry_at_ms: vec![NOW + 2_000, NOW + 5_000], ..Link::default() };
        assert_eq!(beyond(Some(late.clone()), Some(&early)), None, "polled again at 5 s: both found");
        assert_eq!(beyond(Some(late.clone()), None), Some(late), "no early successor: all of it");
        let later = Link { retry_at_ms: vec![NOW + 2_000, NOW + 9_000], ..Link::default() };
        assert_eq!(beyond(Some(later), Some(&early)).unwrap().retry_at_ms, [NOW + 9_000]);
        let work = Link::default();
        assert_eq!(beyond(Some(work.clone()), Some(&Link::default())), None, "work left: the successor takes it");
        let failed = Link { failures: 1, not_before_ms: Some(NOW + 5_000), ..Link::default() };
        assert_eq!(beyond(Some(failed.clone()), None), Some(failed.clone()), "no early successor: the failure's chain");
        assert_eq!(beyond(Some(failed), Some(&early)), None, "the early successor runs: no second chain");
    }
}
