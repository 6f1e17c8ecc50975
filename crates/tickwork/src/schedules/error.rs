//! What can go wrong with a schedule: a definition that cannot be right, or the store.

use crate::error::DbError;

/// A spec, spread, name or instant that cannot be right; the message names the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("schedule: {0}")]
pub struct SpecError(pub String);

/// A schedule operation that did not happen; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The definition, refused by name.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A schedule that is not there.
    #[error("tenant `{tenant}` has no schedule `{name}`")]
    NotFound {
        /// The tenant.
        tenant: String,
        /// The name.
        name: String,
    },
    /// Someone changed it between our read and our write: read again and retry.
    #[error("schedule `{name}` of `{tenant}` changed while this change was written; nothing was written, try again")]
    Raced {
        /// The tenant.
        tenant: String,
        /// The name.
        name: String,
    },
    /// No due record of this group is quarantined (repaired already, or never set aside).
    #[error("no quarantined due record of group `{0}` (see tickctl schedules doctor)")]
    NotQuarantined(String),
    /// A quarantined record that neither reads nor can be rebuilt from its group's head.
    #[error("the quarantined due record of group `{group}` cannot be repaired: {why}")]
    Unrepairable {
        /// The group.
        group: String,
        /// Why.
        why: String,
    },
}
