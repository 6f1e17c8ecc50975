//! Throttling is not failure: when a target refuses a call for its rate or concurrency, the units
//! it carried did nothing wrong.
//!
//! Why: a new account's Lambda concurrency is 10, a team's function may have a reserved
//! concurrency, SQS and EventBridge limit their request rates ("Lambda quotas", "Amazon SQS
//! quotas", "Amazon EventBridge quotas"). Counted as failures, five throttles spend a unit's
//! attempts in about 150 s and a healthy unit is dead-lettered, and the last-attempt rule (one
//! unit a call) multiplies the calls by ten exactly when the target is saturated. So a throttled
//! unit goes back with its claim's attempt refunded, after the target's own hint (`Retry-After`,
//! Lambda's `retryAfterSeconds`) or a backoff doubling from [`FIRST_BACKOFF_MS`] to
//! [`MAX_BACKOFF_MS`]; the drain that saw it claims nothing more until then and halves the calls
//! it runs at once ([`CallLimit`]), growing back as calls pass ([`crate::drain`]). Counted on the item ([`tickwork::queue::THROTTLES`]), a throttle is free
//! [`FREE_THROTTLES`] times; after that it counts as a failure, so a target that never recovers
//! still ends in the dead letters (and `FailedUnits` pages, the dead letter's error naming the
//! throttle) rather than circling for ever. At the defaults an item is throttled for free for about
//! five minutes ([`free_span_ms`]).
//!
//! Which errors are throttles: the error codes the AWS SDK itself classifies as throttling
//! (`aws_runtime::retries::classifiers::THROTTLING_ERRORS`: `TooManyRequestsException`,
//! `ThrottlingException`, `RequestThrottled`, …), so a code is judged the same way the SDK's own
//! retries judge it.

use crate::registry::HandlerError;

/// Claims of one item a throttle refunds before it counts as a failure.
pub const FREE_THROTTLES: u32 = 10;
/// The first throttle's backoff without a hint, ms.
pub const FIRST_BACKOFF_MS: u64 = 1_000;
/// The longest throttle backoff, ms: a hint above it is capped, so a unit is never held past a
/// minute by one answer.
pub const MAX_BACKOFF_MS: u64 = 60_000;

/// How many handler calls a drain runs at once while a target throttles: halved at each
/// throttled call, one added back for each `allowed` calls that pass, up to the configured
/// concurrency (additive increase, multiplicative decrease, as TCP and the SDK's own adaptive
/// retry mode shape a sender to what the other end takes). So a target whose concurrency is below
/// the fleet's (a new account's 10 against 4 drains of 16 calls) settles at what it takes, with a
/// throttle now and then as a probe, instead of refusing most calls for as long as the backlog
/// lasts and spending every item's free throttles. Pure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallLimit {
    max: usize,
    allowed: usize,
    passed: usize,
}

impl CallLimit {
    /// At most `max` calls at once (the drain's concurrency).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self { max, allowed: max, passed: 0 }
    }

    /// Calls that may run at once now.
    pub fn allowed(&self) -> usize {
        self.allowed
    }

    /// A call was throttled.
    pub fn throttled(&mut self) {
        self.allowed = (self.allowed / 2).max(1);
        self.passed = 0;
    }

    /// A call ended without a throttle.
    pub fn passed(&mut self) {
        if self.allowed < self.max {
            self.passed += 1;
            if self.passed >= self.allowed {
                self.allowed += 1;
                self.passed = 0;
            }
        }
    }
}

/// Whether an AWS error code is a throttle, as the SDK's retry classifier reads it. Pure.
pub fn is_throttle_code(code: Option<&str>) -> bool {
    code.is_some_and(|c| aws_runtime::retries::classifiers::THROTTLING_ERRORS.contains(&c))
}

/// How long a unit of item `id`, throttled `throttles` times before, waits: at least the target's
/// `hint_ms` (capped at [`MAX_BACKOFF_MS`]), else a backoff doubling with each throttle; spread
/// over the upper half of that span by the id, so the items one throttle sent back do not all
/// come back at the same instant and throttle again. Pure.
pub fn delay_ms(throttles: u32, hint_ms: Option<u64>, id: &str) -> u64 {
    let spread = |span: u64| -> u64 {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same id spreads the same way in every process.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        id.hash(&mut h);
        h.finish() % (span / 2 + 1)
    };
    match hint_ms {
        Some(hint) => {
            let hint = hint.clamp(FIRST_BACKOFF_MS, MAX_BACKOFF_MS);
            (hint + spread(hint / 2)).min(MAX_BACKOFF_MS)
        }
        None => {
            let base = FIRST_BACKOFF_MS.saturating_mul(1u64 << throttles.min(16)).min(MAX_BACKOFF_MS);
            base / 2 + spread(base)
        }
    }
}

/// The longest an item is throttled for free: the sum of its backoffs without hints. Pure.
pub fn free_span_ms() -> u64 {
    (0..FREE_THROTTLES).map(|n| FIRST_BACKOFF_MS.saturating_mul(1u64 << n.min(16)).min(MAX_BACKOFF_MS)).sum()
}

/// A unit's result as it counts on an item throttled `throttles` times before: a throttle past
/// [`FREE_THROTTLES`] is a failure that spends an attempt, saying so. Pure.
pub fn counted(e: HandlerError, throttles: u32) -> HandlerError {
    match e {
        HandlerError::Throttled { why, .. } if throttles >= FREE_THROTTLES => HandlerError::Retry(format!(
            "throttled on {} claims of this item ({FREE_THROTTLES} are free), now counted as a failure: {why}",
            throttles + 1
        )),
        other => other,
    }
}

/// The target's hint in seconds (`Retry-After`, Lambda's `retryAfterSeconds`: a number of seconds,
/// RFC 9110 §10.2.3) as ms; a date or garbage is no hint. Pure.
pub fn hint_of_seconds(s: Option<&str>) -> Option<u64> {
    let secs: f64 = s?.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some((secs * 1000.0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_at_once_halve_at_a_throttle_and_grow_back_one_a_round() {
        let mut l = CallLimit::new(16);
        l.throttled();
        assert_eq!(l.allowed(), 8);
        l.throttled();
        l.throttled();
        l.throttled();
        l.throttled();
        assert_eq!(l.allowed(), 1, "never below one");
        l.passed();
        assert_eq!(l.allowed(), 2, "one call passed at one at once: one more");
        for _ in 0..2 {
            l.passed();
        }
        assert_eq!(l.allowed(), 3);
        for _ in 0..1_000 {
            l.passed();
        }
        assert_eq!(l.allowed(), 16, "back to the concurrency, not past it");
        assert_eq!(CallLimit::new(0).allowed(), 1);
    }

    #[test]
    fn the_sdks_throttling_codes_are_throttles_and_others_are_not() {
        for c in ["TooManyRequestsException", "ThrottlingException", "RequestThrottled"] {
            assert!(is_throttle_code(Some(c)), "{c}");
        }
        for c in [None, Some("ResourceNotFoundException"), Some("InternalFailure"), Some("AccessDeniedException")] {
            assert!(!is_throttle_code(c), "{c:?}");
        }
    }

    #[test]
    fn a_throttle_waits_at_least_the_hint_and_doubles_without_one_within_a_minute() {
        for id in ["a", "b", "item#0042"] {
            let d = delay_ms(0, Some(5_000), id);
            assert!((5_000..=7_500).contains(&d), "{d}");
            assert_eq!(delay_ms(0, Some(600_000), id), MAX_BACKOFF_MS, "a hint is capped");
            assert!(delay_ms(0, Some(0), id) >= FIRST_BACKOFF_MS);
            let first = delay_ms(0, None, id);
            assert!((500..=1_000).contains(&first), "{first}");
            let third = delay_ms(2, None, id);
            assert!((2_000..=4_000).contains(&third), "{third}");
            assert!(delay_ms(30, None, id) <= MAX_BACKOFF_MS);
        }
        let spread: std::collections::BTreeSet<u64> = (0..50).map(|i| delay_ms(3, None, &format!("i{i}"))).collect();
        assert!(spread.len() > 10, "items throttled together come back apart: {spread:?}");
    }

    #[test]
    fn a_throttle_is_free_until_the_ceiling_then_a_failure_that_says_so() {
        let t = || HandlerError::throttled("429");
        assert_eq!(counted(t(), FREE_THROTTLES - 1), t());
        let HandlerError::Retry(why) = counted(t(), FREE_THROTTLES) else { panic!("counted") };
        assert!(why.contains("counted as a failure") && why.contains("429"), "{why}");
        assert_eq!(counted(HandlerError::Retry("x".into()), 99), HandlerError::Retry("x".into()));
        // About five minutes of throttling before attempts count.
        assert_eq!(free_span_ms(), 1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 32_000 + 4 * 60_000);
    }

    #[test]
    fn a_hint_in_seconds_reads_as_ms_and_anything_else_is_none() {
        assert_eq!(hint_of_seconds(Some("2")), Some(2_000));
        assert_eq!(hint_of_seconds(Some(" 0.5 ")), Some(500));
        for s in [None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), Some("-1"), Some("NaN")] {
            assert_eq!(hint_of_seconds(s), None, "{s:?}");
        }
    }
}
