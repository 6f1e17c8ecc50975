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

/// Failed drains in a row after which no successor is started (the safety poll takes over).
pub const MAX_FAILED_LINKS: u32 = 3;

/// How long the successor of the `n`-th failed drain in a row waits before its first request.
pub const FAILED_BACKOFF_MS: [Millis; MAX_FAILED_LINKS as usize] = [5_000, 20_000, 60_000];

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
/// it did not take; `retry_at`: the retries it hands on ([`crate::drain::handed_retries`]);
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
}
