//! What a tick did, and why one failed: the job's outcome, metrics and Lambda error type.

use std::collections::BTreeMap;

use serde::Serialize;
use tickwork::calendar::CalendarError;
use tickwork::checkpoint::CheckpointError;
use tickwork::queue::InvalidItem;
use tickwork::tenants::AddError;
use tickwork::DbError;
use tickwork_lambda::{BadEvent, JobReport};

pub use tickwork_lambda::Outcome;

/// What a tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: Outcome,
    /// Zone groups whose local date moved on.
    pub groups_due: u32,
    /// Groups completed (watermark advanced) by this tick.
    pub groups_completed: u32,
    /// Tenants visited.
    pub tenants: u64,
    /// Pulses written, by grain.
    pub pulses: BTreeMap<String, u64>,
    /// Periods skipped by the catch-up policy, by grain.
    pub skipped: BTreeMap<String, u64>,
    /// Tenants isolated as failed (recorded and passed over; their items need a look).
    pub failed_tenants: u64,
    /// Registered zones the tz database does not know (never visited; fix the registry).
    pub unknown_zones: Vec<String>,
    /// Helper invocations this leader started (shared mode).
    pub helpers: u32,
    /// Zones a run found without a tenant, taken out of the registry (they cost nothing more).
    pub groups_removed: u32,
    /// Schedules' occurrences handed to the queue ([`crate::fires`]).
    pub fires: u64,
    /// Schedules' occurrences the catch-up policy (or a suspended tenant) passed over.
    pub fires_skipped: u64,
    /// Due records dropped unfired: their schedule changed, paused or went, or their tenant did.
    pub schedules_dropped: u64,
    /// Fired one-off groups' members cleaned (their memberships deleted, and their definitions
    /// when still the version fired) after the fire ([`crate::clean`]).
    pub schedules_cleaned: u64,
    /// Fired one-off groups to clean once the shards' fires are done.
    #[serde(skip)]
    pub(crate) cleaning: Vec<tickwork::schedules::Group>,
    /// Due shards a shard's firing put successors in other than its own (a record written under
    /// the shard count before): read again for `sched_next`, their first read being older.
    #[serde(skip)]
    pub(crate) shards_written: std::collections::BTreeSet<u32>,
}

impl Report {
    /// Adds what `other` (one due shard's firing, beside the others) counted of schedules.
    pub(crate) fn absorb_fires(&mut self, other: &Report) {
        self.fires += other.fires;
        self.fires_skipped += other.fires_skipped;
        self.schedules_dropped += other.schedules_dropped;
        self.failed_tenants += other.failed_tenants;
        self.shards_written.extend(&other.shards_written);
        self.cleaning.extend(other.cleaning.iter().cloned());
    }
}

impl JobReport for Report {
    fn outcome(&self) -> Outcome {
        self.outcome
    }
    fn set_outcome(&mut self, o: Outcome) {
        self.outcome = o;
    }
    fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            // GroupsDue staying above 0 tick after tick is the watermark-lag alarm.
            ("GroupsDue", f64::from(self.groups_due.saturating_sub(self.groups_completed))),
            ("FailedUnits", (self.failed_tenants + self.unknown_zones.len() as u64) as f64),
        ]
    }
}

/// Why a tick failed. Nothing is lost: no watermark moved past unfinished tenants.
#[derive(Debug, thiserror::Error)]
pub enum PulseError {
    /// The event.
    #[error(transparent)]
    BadEvent(#[from] BadEvent),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The calendar (an unreadable period).
    #[error(transparent)]
    Calendar(#[from] CalendarError),
    /// A checkpoint.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A page cursor.
    #[error(transparent)]
    Cursor(#[from] tickwork::pager::CursorError),
    /// A pulse item refused before writing.
    #[error(transparent)]
    Item(#[from] InvalidItem),
    /// A tenant refused before writing.
    #[error(transparent)]
    Tenant(#[from] AddError),
    /// A schedule's store.
    #[error(transparent)]
    Schedule(#[from] tickwork::schedules::ScheduleError),
    /// A shared run asked to page more tenant shards than its last transaction can check. Its
    /// callers page such a group with the single leader instead, so this reports a bug: the
    /// invocation fails and the run's watermark does not move.
    #[error("{shards} tenant shards: a run shared by shard workers has at most {max}")]
    SharedShards {
        /// Shards the run must page.
        shards: u32,
        /// [`crate::config::MAX_SHARED_SHARDS`].
        max: u32,
    },
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

impl From<PulseError> for lambda_runtime::Diagnostic {
    fn from(e: PulseError) -> Self {
        let error_type = match &e {
            PulseError::BadEvent(_) => "BadEvent",
            PulseError::Db(_) => "DynamoDb",
            PulseError::Calendar(_) => "Calendar",
            PulseError::Checkpoint(_) => "Checkpoint",
            PulseError::Cursor(_) => "Cursor",
            PulseError::Item(_) | PulseError::Tenant(_) => "Invalid",
            PulseError::Schedule(_) => "Schedule",
            PulseError::PageFailed { .. } => "Tenants",
            PulseError::SharedShards { .. } => "Shards",
        };
        tickwork_lambda::diagnostic(error_type, &e)
    }
}

/// A page read that has no handler of its own (`Infallible`): its database or cursor error.
impl From<tickwork::pager::PageError<std::convert::Infallible>> for PulseError {
    fn from(e: tickwork::pager::PageError<std::convert::Infallible>) -> Self {
        match e {
            tickwork::pager::PageError::Db(d) => PulseError::Db(d),
            tickwork::pager::PageError::Cursor(c) => PulseError::Cursor(c),
            tickwork::pager::PageError::Handler(never) => match never {},
        }
    }
}
