//! Handlers: the work for each kind of item, registered by the application that builds the
//! worker.
//!
//! A handler must be idempotent per job id: an item can run again after a crash, after its claim
//! expired, or after its finish was lost. A handler only touches the rows of `job.tenant`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use tickwork::queue::Job;

/// Why a handler did not complete a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlerError {
    /// Try again after the backoff.
    #[error("retryable: {0}")]
    Retry(String),
    /// Will never succeed (bad payload, unknown kind): dead-letter now.
    #[error("permanent: {0}")]
    Permanent(String),
    /// The handler's target refused the call for its rate or concurrency (a function's 429, a
    /// queue's or a bus's throttle): the unit did nothing wrong, so the claim's attempt is
    /// refunded and the unit runs again after `after_ms` (the target's `Retry-After`, when it
    /// gave one) or the worker's throttle backoff ([`crate::throttle`]).
    #[error("throttled: {why}")]
    Throttled {
        /// What the target said.
        why: String,
        /// The target's own hint of when to try again, ms.
        after_ms: Option<u64>,
    },
}

impl HandlerError {
    /// A throttle with no hint.
    pub fn throttled(why: impl Into<String>) -> Self {
        HandlerError::Throttled { why: why.into(), after_ms: None }
    }

    /// A handler's DynamoDB request that failed: a throttle still there after the SDK's retries
    /// (the handler's table past its capacity: a new on-demand table starts at 4,000 writes a
    /// second) is [`HandlerError::Throttled`], anything else a retry.
    pub fn of_db(e: &tickwork::DbError) -> Self {
        match e {
            tickwork::DbError::Throttled { .. } => HandlerError::throttled(e.to_string()),
            other => HandlerError::Retry(other.to_string()),
        }
    }
}

/// The work for one kind of item.
pub trait Handler: Send + Sync {
    /// Runs the job; must be idempotent per job id.
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>>;

    /// Units one call takes at most. A handler in this process runs one at a time (1); a target
    /// that delivers a batch in one request ([`crate::targets`]) takes more, and the drain hands
    /// it that many of an item's units at once, as one handler slot.
    fn batch_limit(&self) -> usize {
        1
    }

    /// Whether one unit can fail a whole call (a function that raised fails every unit it
    /// carried): then, on an item's last attempt, the drain hands it one unit a call, so a poison
    /// unit is dead-lettered without its call-mates. A target that reports each entry on its own
    /// (a queue, a bus) keeps its batches.
    fn whole_call_failures(&self) -> bool {
        false
    }

    /// Runs several units in one call: one result per job, in order. Must be idempotent per job
    /// id, as [`Handler::handle`].
    fn handle_batch<'a>(&'a self, jobs: &'a [Job]) -> BoxFuture<'a, Vec<Result<(), HandlerError>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(jobs.len());
            for j in jobs {
                out.push(self.handle(j).await);
            }
            out
        })
    }
}

/// Handlers by kind.
#[derive(Clone, Default)]
pub struct Registry {
    map: HashMap<String, Arc<dyn Handler>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.map.keys()).finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Registers `handler` for `kind` (a later registration of the same kind replaces it).
    pub fn with(mut self, kind: &str, handler: Arc<dyn Handler>) -> Self {
        self.map.insert(kind.to_string(), handler);
        self
    }
    /// The handler for `kind`.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Handler>> {
        self.map.get(kind)
    }
    /// The registered kinds.
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.map.keys().cloned().collect();
        k.sort();
        k
    }
}

/// Job ids each handler completed, and how often (a unit run again after a crash counts twice).
pub type Deliveries = Arc<std::sync::Mutex<std::collections::BTreeMap<String, u64>>>;

/// A handler that counts what its inner handler completes.
struct Counted {
    inner: Arc<dyn Handler>,
    seen: Deliveries,
}

impl Handler for Counted {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let r = self.inner.handle(job).await;
            if r.is_ok() {
                *self.seen.lock().expect("deliveries").entry(job.id.clone()).or_default() += 1;
            }
            r
        })
    }

    fn batch_limit(&self) -> usize {
        self.inner.batch_limit()
    }

    fn whole_call_failures(&self) -> bool {
        self.inner.whole_call_failures()
    }

    fn handle_batch<'a>(&'a self, jobs: &'a [Job]) -> BoxFuture<'a, Vec<Result<(), HandlerError>>> {
        Box::pin(async move {
            let out = self.inner.handle_batch(jobs).await;
            let mut seen = self.seen.lock().expect("deliveries");
            for (j, r) in jobs.iter().zip(&out) {
                if r.is_ok() {
                    *seen.entry(j.id.clone()).or_default() += 1;
                }
            }
            out
        })
    }
}

impl Registry {
    /// Every handler wrapped to count the job ids it completes: what the simulator and the tests
    /// read to see which units ran (a finished batch keeps no payload).
    pub fn counted(self) -> (Registry, Deliveries) {
        let seen = Deliveries::default();
        (self.counted_into(&seen), seen)
    }

    /// [`Registry::counted`] into a map the caller keeps (across registries).
    pub fn counted_into(self, seen: &Deliveries) -> Registry {
        let map = self
            .map
            .into_iter()
            .map(|(k, h)| (k, Arc::new(Counted { inner: h, seen: seen.clone() }) as Arc<dyn Handler>))
            .collect();
        Registry { map }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_table_still_throttled_after_the_sdk_retries_is_a_throttle() {
        let throttled =
            tickwork::DbError::Throttled { op: "PutItem", table: "summaries".into(), source: "slow down".into() };
        assert!(matches!(HandlerError::of_db(&throttled), HandlerError::Throttled { after_ms: None, .. }));
        let missing = tickwork::DbError::TableNotFound { table: "summaries".into() };
        assert!(matches!(HandlerError::of_db(&missing), HandlerError::Retry(_)));
    }
}
