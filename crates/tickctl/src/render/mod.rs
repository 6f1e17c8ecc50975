//! What `tickctl` prints: [`style`] how (tables, JSON, progress bars), [`reports`] the operator's
//! views, [`cost`] the bill.

pub mod control;
pub mod cost;
pub mod explain;
pub mod reports;
pub mod schedules;
pub mod style;

pub use control::print_control;
pub use cost::{print_boundary, print_cost, print_scaled, Boundary, Delivery};
pub use explain::explanation;
pub use reports::{print_audit, print_import, print_plan, print_status};
pub use schedules::{print_schedules, Burst};
pub use style::{bar, bytes_bar, done, json, table, time};
