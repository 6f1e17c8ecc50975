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
}

/// The work for one kind of item.
pub trait Handler: Send + Sync {
    /// Runs the job; must be idempotent per job id.
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>>;
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
