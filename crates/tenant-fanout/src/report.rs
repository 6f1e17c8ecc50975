//! What an invocation did, and why one failed: the job's outcome, metrics and Lambda error type.

use serde::Serialize;
use tickwork::checkpoint::CheckpointError;
use tickwork::queue::QueueError;
use tickwork::DbError;
use tickwork_lambda::{BadEvent, JobReport};

pub use tickwork_lambda::Outcome;

/// What an invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The window worked on last (`2026-11-29`).
    pub window: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Windows due (the oldest unfinished through today).
    pub windows_due: u32,
    /// Windows completed by this invocation.
    pub windows_done: u32,
    /// Tenants visited in this invocation.
    pub tenants: u64,
    /// Units enqueued (one per tenant, in one batch item per page).
    pub enqueued: u64,
    /// Tenants isolated as failed (their item unreadable; recorded).
    pub failed_tenants: u64,
    /// Shards still to do (resumed next invocation).
    pub shards_left: u32,
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![("ShardsLeft", f64::from(self.shards_left)), ("FailedUnits", self.failed_tenants as f64)]
    }
}

/// Why an invocation failed. Nothing is lost: the window is not recorded and the next
/// invocation resumes from the last checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum FanoutError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The queue.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// The checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// Most of a page failed ([`tickwork::failures::systemic`]): not a bad tenant but a bad run.
    #[error("{failed} of {of} tenants of a page failed (first: {first}); stopping rather than isolating them all")]
    PageFailed {
        /// Tenants that failed.
        failed: usize,
        /// Page size.
        of: usize,
        /// The first error.
        first: String,
    },
}

impl From<FanoutError> for lambda_runtime::Diagnostic {
    fn from(e: FanoutError) -> Self {
        let error_type = match &e {
            FanoutError::BadEvent(_) => "BadEvent",
            FanoutError::Db(_) => "DynamoDb",
            FanoutError::Queue(_) => "Queue",
            FanoutError::Checkpoint(_) => "Checkpoint",
            FanoutError::Cursor(_) => "Cursor",
            FanoutError::PageFailed { .. } => "Tenants",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}
