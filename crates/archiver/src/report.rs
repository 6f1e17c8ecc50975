//! What a sweep did, and why one failed: the job's outcome, metrics and Lambda error type.

use serde::Serialize;
use tickwork::checkpoint::CheckpointError;
use tickwork::clock::Millis;
use tickwork::DbError;
use tickwork_lambda::{BadEvent, JobReport};

pub use tickwork_lambda::Outcome;

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// The cutoff (ms).
    pub cutoff_ms: Millis,
    /// Shards probed this tick (0 when the state item said nothing could be due).
    pub probed: u32,
    /// Rows archived and deleted.
    pub archived: u64,
    /// Objects written.
    pub objects: u64,
    /// Rows archived but not deleted: rewritten since they were read (their new version is
    /// archived when due).
    pub kept: u64,
    /// Batches an earlier, interrupted sweep left, finished by this one.
    pub recovered: u64,
    /// Shards with rows left (resumed next sweep).
    pub shards_left: u32,
    /// Dry run: due rows per shard.
    pub due_by_shard: Vec<u64>,
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        // ShardsLeft staying above 0 sweep after sweep is the backlog alarm.
        vec![("ShardsLeft", f64::from(self.shards_left))]
    }
}

/// Why a sweep failed; rows are deleted only after their object is stored, so nothing is lost.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// An intent record that cannot be read: nothing of that shard is touched.
    #[error("archive intent of shard {shard} is unreadable ({problem}); nothing was deleted. Inspect it with `tickctl status`")]
    Intent {
        /// Shard.
        shard: u32,
        /// What is wrong.
        problem: String,
    },
    /// S3.
    #[error("S3 call on `s3://{bucket}/{key}` failed ({reason}); its rows were not deleted")]
    S3 {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// Why.
        reason: String,
    },
}

impl From<ArchiveError> for lambda_runtime::Diagnostic {
    fn from(e: ArchiveError) -> Self {
        let error_type = match &e {
            ArchiveError::BadEvent(_) => "BadEvent",
            ArchiveError::Db(_) => "DynamoDb",
            ArchiveError::Checkpoint(_) | ArchiveError::Intent { .. } => "Checkpoint",
            ArchiveError::Cursor(_) => "Cursor",
            ArchiveError::S3 { .. } => "S3",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}
