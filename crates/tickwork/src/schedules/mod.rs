//! Schedules: the nudge at a sensible local hour. A tenant's schedule (`daily 08:00`,
//! `weekly mon-fri 09:30`, `monthly last 18:00`, a cron in its zone, a one-off `at`) fires units
//! through the same queue as pulses, each keyed by its occurrence.
//!
//! - [`spec`]: what a schedule says, read from text and refused by name when it cannot be right;
//! - [`cron`]: the 5-field expression, matched against nominal local times;
//! - [`occurrence`]: the instants those times name under the DST policy, each fire's key, the
//!   stable spread, and the catch-up policy applied to fires;
//! - [`record`]: how a schedule, its group (tenants sharing zone, spec, policy, name and spread
//!   offset), the group's members and its next fire are stored (the due index);
//! - [`fire`]: what the sweep does with a group's due record and each member (pure);
//! - [`quarantine`]: due records that do not read, set aside by the sweep, listed and repaired;
//! - [`store`]: the reads and writes of schedules; `due`: the sweep's reads and writes of the due
//!   index and the groups.

mod check;
mod clean;
mod commit;
pub mod cron;
mod due;
mod ends;
pub mod error;
pub mod fire;
mod fired;
pub mod import;
pub mod lowering;
mod membership;
pub mod occurrence;
pub mod quarantine;
pub mod record;
pub mod spec;
pub mod store;
mod writes;

#[cfg(test)]
mod oracle_tests;

pub use check::ONE_OFF_MARGIN_MS;
pub use clean::{clean_read, CleanRead};
pub use due::DuePage;
pub use ends::RecordEnd;
pub use error::{ScheduleError, SpecError};
pub use fire::{
    first_record, member_fires, member_of, member_resumed, never_fires, own_successor, plan, plan_own, successor,
    upcoming, FirePlan, MemberFires, Successor, TenantNow,
};
pub use import::Imported;
pub use lowering::{inserted_position, Lowered};
pub use occurrence::{between, catch_up, next_after, occurrence_key, resolve, spread_ms, Occurrence};
pub use quarantine::{quarantine_pk, Quarantined, Repair};
pub use record::{due_shard, DueRecord, Group, Member, Schedule, Stage, DUE_SHARDS, ONE_OFF_FIRST_PAGE, SCHED_KIND};
pub use spec::{Dst, Fold, Gap, MonthDay, ScheduleDef, Spec, MAX_PAYLOAD_BYTES};
pub use store::{Changed, Schedules};
pub use writes::ShardCursor;
