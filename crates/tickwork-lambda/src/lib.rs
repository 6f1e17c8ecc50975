//! What every tickwork Lambda shares, kept out of the `tickwork` library so that it has no
//! Lambda types.
//!
//! ## Layout
//! - [`event`]: the scheduled event, parsed and guarded (a malformed or future event is refused).
//! - [`job`]: the one skeleton the leased jobs run in (pause, lease, budget, metrics on every path).
//! - [`settings`]: job names, leases and the forced dry run, validated the same way for every job.
//! - [`telemetry`]: logs and metrics that survive Lambda's log-level filter.
//! - [`base`]: clients and shared settings from the environment.
//! - [`invocation`]: the invocation's deadline and owner id.
//! - [`errors`]: what a handler's error becomes in Lambda's report.
//! - [`lambda`]: the client a function invokes itself with, and its calls as IAM sees them.
//! - [`stream`]: a DynamoDB Streams event, checked to come from the table's stream.
//!
//! This file only names the modules and re-exports what the functions use most.

pub mod base;
pub mod errors;
pub mod event;
pub mod invocation;
pub mod job;
pub mod lambda;
pub mod settings;
pub mod stream;
pub mod telemetry;

pub use base::Base;
pub use errors::{diagnostic, error_chain};
pub use event::{BadEvent, Tick};
pub use invocation::{deadline_ms, invocation_deadline, owner_id, LOCAL_DEADLINE_MS};
pub use job::{JobCore, JobReport, LeasedJob, Outcome};
pub use lambda::lambda_client;
pub use settings::forced_dry_run;
pub use telemetry::{announce, init_tracing};
