//! What `tenants.explain` answers: a tenant, the sweep's state as it bears on it, its calendar,
//! its schedules with their coming fires, and plain findings. Types only; [`crate::explain`]
//! decides them.

use schemars::JsonSchema;
use serde::Serialize;

use crate::views::{Fire, ScheduleView, TenantView};

/// Coming fires shown per schedule.
pub const NEXT_FIRES: usize = 3;

/// Everything about one tenant, and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Explanation {
    /// The tenant as stored.
    pub tenant: TenantView,
    /// The sweep that pulses and fires it.
    pub sweep: SweepView,
    /// Its calendar: what it has been pulsed through and what comes next.
    pub calendar: CalendarView,
    /// Its schedules and timers, each with its coming fires.
    pub schedules: Vec<ScheduleNext>,
    /// Plain findings, most important first: why nothing would arrive, when something says so.
    pub findings: Vec<String>,
}

/// The sweep's state as it bears on the tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct SweepView {
    /// The sweep is paused by an operator (nothing is pulsed or fired).
    pub paused: bool,
    /// Why, when paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused_reason: Option<String>,
    /// The tenant's zone is registered with the sweep (a zone that is not is never visited).
    pub zone_registered: bool,
    /// The local date the tenant's zone group has been pulsed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_through: Option<String>,
    /// Tenants of its zone wait to be visited at the sweep's next tick (those just added,
    /// resumed or moved).
    pub zone_waiting: bool,
}

/// A tenant's calendar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct CalendarView {
    /// The local date it has been pulsed through (every period that ended by its start); absent
    /// while it has never been visited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub through: Option<String>,
    /// Per grain, the last period pulsed (owed and ended by `through`).
    pub last: Vec<GrainPeriod>,
    /// Per grain, the next period to be pulsed, and when it ends.
    pub next: Vec<GrainPeriod>,
}

/// A period of a grain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct GrainPeriod {
    /// `day`, `week`, `month`, `quarter`, `year`.
    pub grain: String,
    /// The period, as its unit key names it (`2026-12-01`, `2026-W49`, …).
    pub period: String,
    /// When it ends (RFC 3339): its pulse is due then.
    pub ends_at: String,
}

/// A schedule and its coming fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ScheduleNext {
    /// The schedule.
    pub schedule: ScheduleView,
    /// Its next fires (none while paused, or a fired timer's).
    pub next: Vec<Fire>,
}
