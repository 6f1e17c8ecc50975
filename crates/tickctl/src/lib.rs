//! `tickctl`: what an operator runs when something looks wrong, and what a developer runs to get
//! a local stack going. Reads the same environment variables as the Lambdas.

pub mod audit;
// The cost model is a crate of its own (`tickwork-cost`); its modules keep their paths here.
pub use tickwork_cost::{bill, boundary, burst, cost, delivery, schedules, targets};
pub mod control;
pub mod deployed;
pub mod function;
pub mod migrate;
pub mod parts;
pub mod plan;
pub mod schedule_rows;
pub mod status;
pub mod tenants;

pub use control::{all_tables, invoke, jobs, provision, queue, set_paused, Function};
pub use parts::Parts;
pub use plan::{grains_starting, next_boundary, plan, Boundary, GroupPlan, Plan, TickPlan};
pub use status::{status, JobStatus, Status, READY_CAP};

/// The role `tickctl`'s calls run under ([`tickwork::iam::acting_as`]): an operator's own
/// credentials, not one of the template's functions, so the IAM check of the functions leaves
/// them out, and a test reads what a command asked of AWS.
pub const ROLE: &str = "tickctl";
