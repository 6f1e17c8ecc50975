//! Pulse sweep: per-tenant calendar boundary pulses (day, week, month, quarter, year in each
//! tenant's time zone), cheap between boundaries, each `(tenant, grain, period)` delivered with
//! one idempotency key.
//!
//! Every failure of `000_*` is made impossible here:
//! - *lease released too early*: the lease is kept after success; a second worker in the same
//!   window finds the watermark (or the lease) and returns;
//! - *7 GetItem per tenant per tick*: an idle tick is **one** eventually consistent GetItem of the
//!   watermark item; a boundary reads the group's tenants page by page and nothing per tenant —
//!   a tenant that follows its group stands where the group's watermark says ([`pulse`]);
//! - *the unconsumed finest grain*: quarter-hour and hour are declared and never written;
//! - *one page of tenants and no cursor*: tenants are paged per zone and shard to exhaustion, with
//!   a checkpoint that the next tick resumes from (`sweep`);
//! - *the watermark trusted alone*: the watermark moves in the same transaction as the run's last
//!   pulses, and each pulse carries its idempotency key to the handler that acts on it.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; its `time` is the logical now.
//! 2. Read the watermark item: pause switch, registered zone groups, per group the last local date
//!    completed, woken tenants ([`due_groups`]). Nothing due and nobody woken: return — **1 read,
//!    0 writes**, no lease. A registered zone the tz database does not know is reported as a
//!    failed unit every tick and never blocks the others.
//! 3. Take the lease (kept on success, released on failure).
//! 4. `sweep`: woken tenants first, then each due group page by page from its checkpoint; the
//!    pulses go out in batches (one queue item per flush, not per tenant), in fenced transactions
//!    with the checkpoints.
//! 5. When every shard of a group is done, its watermark advances in the run's last transaction.
//!
//! ## Layout
//! - [`config`] settings; [`deps`] the clients and tables; [`report`] what a tick did or why it
//!   failed;
//! - [`due`] what the state item says is due (pure); `job` the leased job's steps;
//! - [`pulse`] a pulse's identity and the pure step from a tenant's position to what it is owed;
//! - `sweep` the enumeration (one loop for the leader, the shard workers and the dry run); `flush`
//!   what a run writes and when;
//! - `fires` schedules' fires, beside the groups' runs (`fire_plan` their decisions, pure; `fire_reads` a group's page read; `fire_write` a chunk's transaction) ([`tickwork::schedules`]); [`wake`] the
//!   one-time schedule that wakes the sweep at a schedule's instant;
//! - `shared` a boundary shared by shard workers (the lease per shard, the watermark last);
//!   [`helpers`] how the leader starts them;
//! - `clean` fired one-off groups' members and definitions, deleted after the tick's fires;
//! - [`lowering`] the control table's stream: writers' records lower `sched_next`;
//! - this file: the entry points.

mod clean;
pub mod config;
pub mod deps;
pub mod due;
mod fire_fix;
mod fire_page;
mod fire_plan;
mod fire_reads;
mod fire_shard;
mod fire_write;
mod fires;
mod flush;
pub mod helpers;
mod job;
pub mod lowering;
pub mod pulse;
pub mod report;
mod shared;
mod sweep;
pub mod wake;

use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::clock::Millis;
use tickwork_lambda::Tick;

pub use clean::CLEAN_FOR_MS;
pub use config::ROLE;
pub use config::{PulseConfig, MAX_LATENESS_LIMIT, MAX_SHARED_SHARDS};
pub use deps::{add_tenants, Deps, Tables};
pub use due::{due_groups, group_due, Due, DueGroup, WakeGroup};
pub use fire_plan::{entry as fire_entry, member_page, ISOLATED_RETRY_MS, MEMBER_PAGE, ONE_OFF_PAGE, PAGE_UNITS};
pub use fires::{due_lease, fire_items, FIRE_CHUNK, FIRE_PAGE, SCHED_KIND};
pub use flush::FlushCounts;
pub use pulse::{pulse_id, PULSE_KIND};
pub use report::{Outcome, PulseError, Report};

/// The Lambda entry: parse, guard, run inside the deadline, emit the bill ([`tickwork_lambda::job::handle`]).
/// A batch from the control table's stream lowers `sched_next` ([`lowering`]) instead.
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, PulseError> {
    match lowering::inserted_of(&event, &deps.tables.control, &deps.cfg.job) {
        // Boxed, each path: the tick's future held inline with the batch's outgrew a test thread's
        // stack.
        Some(batch) => Box::pin(stream_batch(deps, batch)).await,
        None => Box::pin(tickwork::iam::acting_as(ROLE, tickwork_lambda::job::handle(deps, event, deadline_ms))).await,
    }
}

async fn stream_batch(
    deps: &Deps,
    batch: Result<lowering::Inserted, tickwork_lambda::BadEvent>,
) -> Result<Report, PulseError> {
    let r = match batch {
        Ok(b) => tickwork::iam::acting_as(ROLE, lowering::lower(deps, b)).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = &r {
        tracing::error!(error = %tickwork_lambda::error_chain(e), "stream batch failed: handed over again");
    }
    r
}

/// One tick at `tick.time_ms`, within `budget` ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, PulseError> {
    tickwork::iam::acting_as(ROLE, tickwork_lambda::job::run(deps, tick, budget, owner)).await
}
