//! What `tenants.explain` answers: a tenant, the sweep's state as it bears on it, its calendar,
//! its schedules with their coming fires, its units in the queue, and plain findings. Types only; [`crate::explain`]
//! decides them.

use schemars::JsonSchema;
use serde::Serialize;

use crate::views::{Fire, ScheduleView, TenantView};

/// Coming fires shown per schedule.
pub const NEXT_FIRES: usize = 3;

/// A tenant's units that went wrong shown, newest first (all are counted).
pub const TROUBLES_SHOWN: usize = 20;

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
    /// Its units in the queue.
    pub queue: QueueView,
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

/// A tenant's units in the queue, as the queue's keys can tell them (`tickwork::queue`'s
/// `trouble` module says why it is this and not a record a unit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct QueueView {
    /// Its units waiting for a retry after a failure or a throttle.
    pub retrying: usize,
    /// Its units dead-lettered (`tickctl dead-letters retry ID` runs one again).
    pub dead: usize,
    /// Its units that went wrong and were handled after all, while their record lasts (the
    /// queue's retention).
    pub recovered: usize,
    /// Those units, newest first, at most [`TROUBLES_SHOWN`].
    pub troubles: Vec<TroubleView>,
    /// The last time a unit of it that went wrong was handled after all (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_recovered: Option<String>,
    /// Every unit of any tenant made ready before this instant (RFC 3339) has been taken from the
    /// queue (handled, or running now), but for the ones above: the queue's oldest ready item,
    /// or now when nothing waits. A fire or pulse due before it was delivered.
    pub delivered_before: String,
    /// How long the queue's oldest ready item has waited (seconds; 0 when nothing waits).
    pub oldest_ready_age_s: i64,
    /// Items of several tenants' units waiting for a retry: the tenant's units may be among them
    /// (a target failing for many tenants at once keeps its remainder whole; such an item's dead
    /// letter, `tickctl dead-letters` lists whose units it holds).
    pub shared_retrying: usize,
    /// More items were in the index than one explanation reads: the counts are at least.
    pub more: bool,
}

/// One of a tenant's units that went wrong (an item of its units alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TroubleView {
    /// The queue item's id.
    pub id: String,
    /// `pulse`, `sched`, …
    pub kind: String,
    /// `retrying`, `running`, `dead` or `recovered`.
    pub state: String,
    /// Claims spent.
    pub attempts: u32,
    /// Why it went wrong.
    pub last_error: String,
    /// When its next try may start (RFC 3339), while retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    /// When it was dead-lettered or handled (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}
