//! Tenant fan-out: turn "every tenant" into one unit of work per tenant per UTC day, carried one
//! page of tenants per queue item.
//!
//! Why (`000_*`): the tenant list behind a daily job stopped at one page with no cursor, and most
//! tenants silently never got their daily work. Here every shard of the tenants index is paged by
//! cursor to exhaustion; near the deadline the per-shard cursors are persisted and the next
//! invocation resumes; a window is recorded complete only when every shard is drained, and a
//! window not finished during its own day is caught up on the next ticks.
//!
//! The fan-out owns per-UTC-day work (its default job is `utc-daily`). Per-tenant *local* days
//! belong to the pulse sweep's day pulses: a daily summary is the end of a tenant's own day, which
//! for a tenant west of UTC comes hours after the UTC date turns. One producer per meaning.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; its `time` names today's window.
//! 2. Read the watermark item (1 eventually consistent GetItem): paused → stop; no window after
//!    the watermark through today ([`window::due_windows`]) → stop. This is the whole cost of an
//!    idle invocation.
//! 3. Take the job's lease (kept on success, released on failure).
//! 4. `fanout`: each due window, oldest first.
//!
//! ## Layout
//! [`config`] settings; [`window`] windows and items (pure); [`deps`] the clients and tables;
//! [`report`] what a tick did or why it failed; `job` the leased job's steps; `fanout` the work; this
//! file the entry points.

pub mod config;
pub mod deps;
mod fanout;
mod job;
pub mod report;
pub mod window;

use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::clock::Millis;
use tickwork_lambda::Tick;

pub use config::FanoutConfig;
pub use config::ROLE;
pub use deps::{Deps, Tables};
pub use job::Plan;
pub use report::{FanoutError, Outcome, Report};
pub use window::{batches_for, window_of, MARK_GROUP};

/// The Lambda entry ([`tickwork_lambda::job::handle`]).
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, FanoutError> {
    tickwork::iam::acting_as(ROLE, tickwork_lambda::job::handle(deps, event, deadline_ms)).await
}

/// One fan-out invocation for `tick`, stopping when `budget` runs out ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, FanoutError> {
    tickwork::iam::acting_as(ROLE, tickwork_lambda::job::run(deps, tick, budget, owner)).await
}
