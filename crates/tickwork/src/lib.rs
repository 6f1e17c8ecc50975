//! # tickwork
//!
//! Scheduled background work on DynamoDB that is cheap **and** correct. Every module exists because
//! of a production failure (`docs/background.md` tells each), and obeys three rules:
//!
//! 1. A list with a limit and no cursor is a bug: [`pager`] follows cursors to exhaustion or hands
//!    back a resumable [`pager::Cursor`].
//! 2. A filter after a read is billed as if returned: [`db::Db::query`] refuses filter expressions;
//!    the discriminator goes in the key condition.
//! 3. Coordination is not idempotency, and neither is a watermark: [`lease`] (with fencing) and
//!    [`watermark`] keep work cheap, and each unit of work carries its own key so that a repeat is
//!    harmless. The jobs' keys are their queue units' ids (a pulse is
//!    `pulse#<tenant>#<grain>#<period>`, and a batch item's id is a digest of its units), which the
//!    handlers write once under; [`idempotency`] is for an application's effects outside DynamoDB
//!    (claim, complete, expire), and no shipped job needs it.
//!
//! ## Layout
//! - [`db`]: the one place DynamoDB calls go through; meters them ([`meter`], [`capacity`]), holds
//!   them to DynamoDB's request limits before sending ([`limits`]) and maps errors ([`error`]).
//! - [`lease`]: leader lease per job with a fencing token; [`lease::fenced_write`].
//! - [`slot`], [`watermark`]: window records, progress marks; [`wake`]: units to visit before
//!   their group's next boundary; [`batch`]: units packed into queue items; [`idempotency`]: claim/complete records for effects outside DynamoDB.
//! - [`pager`], [`budget`]: enumeration that stops between pages with a cursor.
//! - [`queue`]: the work queue (sharded ready index, claim with visibility timeout, dead letters).
//! - [`schedules`]: a tenant's schedules (daily, weekly, monthly, cron, one-off) in its zone: specs,
//!   DST policies and occurrences, pure (the sweep does not fire them yet).
//! - [`retry`], [`config`], [`clock`], [`schema`]: policy, settings, time, table definitions.
//!
//! No Lambda types appear here: the Lambda crates translate their events and deadlines into these.

pub mod batch;
pub mod budget;
pub mod calendar;
pub mod capacity;
pub mod changes;
pub mod checkpoint;
pub mod clock;
pub mod config;
pub mod db;
pub mod env;
pub mod error;
pub mod failures;
pub mod grains;
pub mod iam;
pub mod idempotency;
pub mod item;
pub mod lease;
pub mod limits;
pub mod meter;
pub mod pager;
pub mod queue;
pub mod release;
pub mod retry;
pub mod schedules;
pub mod schema;
pub mod shard;
pub mod slot;
pub mod tenants;
pub mod wake;
pub mod watermark;

pub use db::Db;
pub use error::DbError;
