//! Errors a caller can act on, mapped once from the SDK's.
//!
//! Why: "the lease is held by someone else" and "DynamoDB is unreachable" need different reactions,
//! so SDK errors are never stringified: they become variants. A failed condition is not an error for
//! the modules above this one; they turn [`DbError::ConditionFailed`] into typed outcomes.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

use crate::item::Item;

/// Why one transaction item was cancelled.
#[derive(Debug, Clone, PartialEq)]
pub struct CancelReason {
    /// `None` (or `"None"`) when this item was not the cause.
    pub code: Option<String>,
    /// The item as it was, when the request asked for it.
    pub item: Option<Item>,
}

impl CancelReason {
    /// Did this item's condition fail?
    pub fn condition_failed(&self) -> bool {
        self.code.as_deref() == Some("ConditionalCheckFailed")
    }
}

/// A cursor that cannot be decoded (a persisted one edited by hand, or from another table's keys).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable cursor: {0}")]
pub struct CursorError(String);

impl CursorError {
    /// A cursor error with this explanation.
    pub fn new(why: impl Into<String>) -> Self {
        Self(why.into())
    }
}

/// A DynamoDB call that did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The condition expression was false. Billed, and usually an outcome, not a failure.
    #[error("condition failed on `{table}`")]
    ConditionFailed {
        /// Table of the write.
        table: String,
        /// The existing item, when the request asked for it on failure.
        item: Option<Box<Item>>,
    },
    /// A transaction was cancelled; `reasons` is index-aligned with the request's items.
    #[error("transaction cancelled: {}", summarize(.reasons))]
    TransactionCanceled {
        /// One reason per transaction item.
        reasons: Vec<CancelReason>,
    },
    /// A request DynamoDB would refuse (an item, key, expression or transaction past its limit),
    /// refused before it was sent ([`crate::limits`]).
    #[error(transparent)]
    Refused(#[from] crate::limits::LimitError),
    /// The table does not exist on this endpoint.
    #[error("DynamoDB table `{table}` does not exist on this endpoint (create it with `tickctl provision`)")]
    TableNotFound {
        /// The missing table.
        table: String,
    },
    /// Still throttled after the retry policy's attempts.
    #[error("throttled by DynamoDB on `{table}` ({op}) after retries")]
    Throttled {
        /// Operation.
        op: &'static str,
        /// Table.
        table: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
    /// No answer: connection refused, DNS, timeout. Says nothing about the item's state.
    #[error("DynamoDB unreachable during {op} on `{table}`")]
    Unreachable {
        /// Operation.
        op: &'static str,
        /// Table.
        table: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
    /// A request DynamoDB would reject (batch too large, filter expression): refused before sending,
    /// because the local server accepts some of these and we must not rely on it.
    #[error("refused before sending: {0}")]
    Invalid(String),
    /// A stored item this code cannot read (an attribute missing or of the wrong type): that
    /// item's problem, isolated like any failure of one unit; nothing was written on its account.
    #[error("an item of `{table}` is unreadable: {problem}")]
    Unreadable {
        /// Table.
        table: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A read-modify-write that lost to other writers on every attempt: nothing was changed.
    #[error("{what} kept changing under {attempts} attempts; try again")]
    Contended {
        /// What kept changing.
        what: String,
        /// Attempts made.
        attempts: u32,
    },
    /// A resume cursor that does not decode.
    #[error(transparent)]
    Cursor(#[from] CursorError),
    /// DynamoDB answered outside what the request asked for (a value it was asked to return is
    /// missing, a condition fails that only another writer could fail and none can).
    #[error("unexpected answer from DynamoDB: {0}")]
    Unexpected(String),
    /// Keys a batch call still left unprocessed after every round (sustained throttling).
    #[error("{op} on `{table}`: {left} keys still unprocessed after {rounds} rounds")]
    Unprocessed {
        /// Operation.
        op: &'static str,
        /// Table.
        table: String,
        /// Keys left.
        left: usize,
        /// Rounds made.
        rounds: u32,
    },
    /// The SDK could not build or start the request (nothing reached DynamoDB).
    #[error("DynamoDB {op} on `{table}` was not sent")]
    NotSent {
        /// Operation.
        op: &'static str,
        /// Table.
        table: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
    /// Any other service error.
    #[error("DynamoDB {op} on `{table}` failed: {code}: {message}")]
    Service {
        /// Operation.
        op: &'static str,
        /// Table.
        table: String,
        /// Error code.
        code: String,
        /// Error message.
        message: String,
        /// The SDK error.
        #[source]
        source: BoxError,
    },
}

/// Whether a conditional write was applied: `false` when its condition was false (billed, and an
/// outcome, not a failure), any other error passed on. The one reading of "insert once", "delete
/// if still this version", "update if unchanged".
pub fn condition_held<T>(r: Result<T, DbError>) -> Result<bool, DbError> {
    match r {
        Ok(_) => Ok(true),
        Err(DbError::ConditionFailed { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A boxed source error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

fn summarize(reasons: &[CancelReason]) -> String {
    reasons
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r.code.as_deref() {
            None | Some("None") => None,
            Some(c) => Some(format!("item {i}: {c}")),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Error codes DynamoDB uses for throttling.
pub const THROTTLING_CODES: &[&str] =
    &["ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded", "Throttling"];

impl DbError {
    /// Does this failure belong to the one unit of work whose request it was (a key over a limit,
    /// a condition that keeps failing, a request refused before sending), rather than to the
    /// table, the network or the service? A unit-specific failure is isolated and the run goes
    /// on; any other stops the run, since every unit after it would fail the same way.
    pub fn is_unit_specific(&self) -> bool {
        match self {
            DbError::ConditionFailed { .. }
            | DbError::Refused(_)
            | DbError::Invalid(_)
            | DbError::Unreadable { .. }
            | DbError::Contended { .. }
            | DbError::Cursor(_)
            | DbError::Unexpected(_) => true,
            DbError::TransactionCanceled { reasons } => {
                !crate::retry::cancellation_is_retryable(reasons.iter().map(|r| r.code.as_deref()))
            }
            DbError::Service { code, .. } => code == "ValidationException",
            DbError::TableNotFound { .. }
            | DbError::Throttled { .. }
            | DbError::Unreachable { .. }
            | DbError::NotSent { .. }
            | DbError::Unprocessed { .. } => false,
        }
    }

    /// Is this a throttle (after retries)?
    pub fn is_throttle(&self) -> bool {
        matches!(self, DbError::Throttled { .. })
    }

    /// Maps an SDK error for `op` on `table`. Condition failures with their item are mapped by
    /// the caller, which knows the operation's error type.
    pub fn from_sdk<E, R>(op: &'static str, table: &str, err: SdkError<E, R>) -> DbError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        let table = table.to_string();
        match &err {
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
                return DbError::Unreachable { op, table, source: Box::new(err) }
            }
            SdkError::ConstructionFailure(_) => return DbError::NotSent { op, table, source: Box::new(err) },
            _ => {}
        }
        let code = err.code().unwrap_or("Unknown").to_string();
        let message = err.message().unwrap_or("").to_string();
        if code == "ResourceNotFoundException" {
            return DbError::TableNotFound { table };
        }
        if code == "ConditionalCheckFailedException" {
            return DbError::ConditionFailed { table, item: None };
        }
        if THROTTLING_CODES.contains(&code.as_str()) {
            return DbError::Throttled { op, table, source: Box::new(err) };
        }
        DbError::Service { op, table, code, message, source: Box::new(err) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_false_condition_is_an_outcome_and_every_other_error_passes_on() {
        assert!(condition_held(Ok::<(), DbError>(())).unwrap());
        assert!(!condition_held(Err::<(), _>(DbError::ConditionFailed { table: "t".into(), item: None })).unwrap());
        let other = condition_held(Err::<(), _>(DbError::Invalid("too big".into())));
        assert!(matches!(other, Err(DbError::Invalid(_))), "{other:?}");
    }
}
