//! Why a queue call failed.

use crate::error::DbError;
use crate::queue::item::InvalidItem;

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// An item refused before writing.
    #[error(transparent)]
    Invalid(#[from] InvalidItem),
}
