//! How long a unit of work may keep going.
//!
//! Why: a Lambda is killed at its deadline, mid-write, with no notice (the Lambda form of the spot
//! termination notice in `003_*`). Loops check a [`Budget`] between pages, tenants or items and
//! stop with a persisted cursor instead of being cut off.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{Millis, SharedClock};

/// Whether there is time left for one more step.
pub trait Budget: Send + Sync {
    /// `true` once the next step should not start.
    fn exhausted(&self) -> bool;
    /// Milliseconds left before steps stop, when the budget is a time (a worker waits for a retry
    /// due within it); `None` for budgets that are not.
    fn remaining_ms(&self) -> Option<Millis> {
        None
    }
}

/// No limit (tests, tools run by hand).
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl Budget for Unlimited {
    fn exhausted(&self) -> bool {
        false
    }
}

/// Stops `margin_ms` before an absolute deadline, read from a clock.
#[derive(Debug, Clone)]
pub struct Deadline {
    clock: SharedClock,
    stop_at: Millis,
}

impl Deadline {
    /// Work may start steps until `deadline - margin`.
    pub fn new(clock: SharedClock, deadline_ms: Millis, margin_ms: Millis) -> Self {
        Self { clock, stop_at: deadline_ms - margin_ms }
    }
    /// The earlier of two deadlines (e.g. the Lambda's and the lease's safe end).
    pub fn min(self, other_deadline_ms: Millis, margin_ms: Millis) -> Self {
        let stop_at = self.stop_at.min(other_deadline_ms - margin_ms);
        Self { stop_at, ..self }
    }
    /// When steps stop being started.
    pub fn stop_at_ms(&self) -> Millis {
        self.stop_at
    }
    /// Milliseconds left before the stop point (negative when past it).
    pub fn remaining_ms(&self) -> Millis {
        self.stop_at - self.clock.now_ms()
    }
}

impl Budget for Deadline {
    fn exhausted(&self) -> bool {
        self.clock.now_ms() >= self.stop_at
    }
    fn remaining_ms(&self) -> Option<Millis> {
        Some(Deadline::remaining_ms(self))
    }
}

/// Exhausted when any of its budgets is (the Lambda deadline and the lease's safe end, say).
pub struct AnyOf<'a>(pub Vec<&'a dyn Budget>);

impl Budget for AnyOf<'_> {
    fn exhausted(&self) -> bool {
        self.0.iter().any(|b| b.exhausted())
    }
}

/// Allows exactly `n` steps: for tests and for `--max-pages` style limits.
#[derive(Debug, Default)]
pub struct Steps {
    left: AtomicU64,
}

impl Steps {
    /// A budget of `n` steps; each [`Budget::exhausted`] call that answers `false` uses one.
    pub fn new(n: u64) -> Self {
        Self { left: AtomicU64::new(n) }
    }
}

impl Budget for Steps {
    fn exhausted(&self) -> bool {
        self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1)).is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::sync::Arc;

    #[test]
    fn deadline_stops_at_margin() {
        let c = ManualClock::at(1_000);
        let d = Deadline::new(Arc::new(c.clone()), 10_000, 2_000);
        assert!(!d.exhausted());
        c.set(7_999);
        assert!(!d.exhausted());
        c.set(8_000);
        assert!(d.exhausted());
        let d2 = Deadline::new(Arc::new(c.clone()), 10_000, 0).min(9_000, 500);
        assert_eq!(d2.stop_at_ms(), 8_500);
    }

    #[test]
    fn steps_count_down() {
        let s = Steps::new(2);
        assert!(!s.exhausted());
        assert!(!s.exhausted());
        assert!(s.exhausted());
        assert!(s.exhausted());
    }
}
