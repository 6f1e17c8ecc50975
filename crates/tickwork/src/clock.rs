//! Time as an input.
//!
//! Why: lease expiry, claim expiry and deadlines must be testable without sleeping, and the
//! logical "now" of a scheduled tick (the event's `time`) is distinct from the wall clock used for
//! expiry. Everything that compares against "now" takes a [`Clock`].

use std::fmt::Debug;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, the unit stored in every expiry attribute.
pub type Millis = i64;

/// A source of wall-clock time.
pub trait Clock: Send + Sync + Debug {
    /// Now, in milliseconds since the epoch.
    fn now_ms(&self) -> Millis;
}

/// The machine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    }
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock at `ms`.
    pub fn at(ms: Millis) -> Self {
        Self(Arc::new(AtomicI64::new(ms)))
    }
    /// Sets the time.
    pub fn set(&self, ms: Millis) {
        self.0.store(ms, Ordering::SeqCst);
    }
    /// Moves time forward by `ms`.
    pub fn advance(&self, ms: Millis) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// A shared clock handle.
pub type SharedClock = Arc<dyn Clock>;
