//! Archiver: move change-feed rows older than a cutoff to S3 — billed only for what is due,
//! nothing lost, nothing doubled, nothing newer than what was archived ever deleted.
//!
//! ## The change feed
//! One row per entity (`pk = <entity>#<id>`): a rewrite replaces the row, with a new sort key
//! `tsid = <13-digit ms>#<pk>` in the `by_shard` index (`shard = changes#<k>`). The feed keeps the
//! **last write per entity**; the archiver archives each version that was due when it was read and
//! deletes a row only while it is still that version.
//!
//! ## One tick (the skeleton of [`tickwork_lambda::job`], with this job's steps)
//! 1. Parse and guard the event; the cutoff is its `time` minus the configured age.
//! 2. Read the state item (1 GetItem): pause switch, and `oldest` — the oldest row not yet due at
//!    the last probe — with the probe's time. While the cutoff has not passed `oldest` and the
//!    probe is younger than [`ArchiverConfig::probe_every`], nothing can be due: return. That is
//!    the whole cost of an idle tick: **1 read**.
//! 3. Otherwise probe every shard ([`probe`]: one `Limit 1` key-condition Query each).
//!    Nothing due: record the new `oldest` and return.
//! 4. Take the lease; archive each due shard batch by batch ([`sweep`]), crash-safe by an intent
//!    recorded before each object ([`intent`]).
//! 5. Drained: probe again and record `oldest`.
//!
//! ## Layout
//! - [`config`] settings; [`deps`] the clients and tables; [`report`] what a sweep did or why it
//!   failed; `job` the leased job's steps and the idle tick's marks;
//! - [`object`] keys, bytes, S3; [`intent`] the crash-safety record; [`probe`] which shards are
//!   due; [`sweep`] the batches;
//! - [`mod@restore`] the operator's way back;
//! - this file: the entry points.

pub mod config;
pub mod deps;
pub mod intent;
mod job;
pub mod object;
pub mod probe;
pub mod report;
pub mod restore;
pub mod sweep;

use serde_json::Value;
use tickwork::budget::Budget;
use tickwork::clock::Millis;
use tickwork_lambda::Tick;

pub use config::ArchiverConfig;
pub use config::ROLE;
pub use deps::Deps;
pub use job::{Plan, OLDEST, PROBED};
pub use object::{decode_batch, encode_batch, object_key, s3_client};
pub use report::{ArchiveError, Outcome, Report};
pub use restore::restore;

/// The Lambda entry ([`tickwork_lambda::job::handle`]).
pub async fn handle(deps: &Deps, event: Value, deadline_ms: Millis) -> Result<Report, ArchiveError> {
    tickwork::iam::acting_as(ROLE, tickwork_lambda::job::handle(deps, event, deadline_ms)).await
}

/// One sweep for `tick`, within `budget` ([`tickwork_lambda::job::run`]).
pub async fn run(deps: &Deps, tick: &Tick, budget: &dyn Budget, owner: &str) -> Result<Report, ArchiveError> {
    tickwork::iam::acting_as(ROLE, tickwork_lambda::job::run(deps, tick, budget, owner)).await
}
