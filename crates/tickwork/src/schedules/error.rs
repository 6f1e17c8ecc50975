//! A schedule that cannot be right.

/// A spec, spread, name or instant that cannot be right; the message names the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schedule: {0}")]
pub struct SpecError(pub String);
