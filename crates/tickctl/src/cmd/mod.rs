//! One module per command that is more than a call and a print.

pub mod audit;
pub mod control_failures;
pub mod cost;
pub mod dead_letters;
pub mod migrate;
pub mod schedules;
pub mod tenants;
