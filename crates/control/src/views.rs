//! What the control function shows of a tenant and a schedule: the stored definitions as a
//! program reads them, shared by the operations' answers and `tenants.explain`.

use schemars::JsonSchema;
use serde::Serialize;

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TenantView {
    /// Its id.
    pub id: String,
    /// Its IANA zone.
    pub zone: String,
    /// `active` or `suspended`.
    pub status: String,
    /// The instant it is owed from (RFC 3339): every period that ends after it is pulsed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owed_from: Option<String>,
    /// Where it stands in its zone's calendar: `follows` (its zone group's), `fresh` (not
    /// visited yet) or `through YYYY-MM-DD`.
    pub position: String,
}

/// One page of tenants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TenantPage {
    /// The tenants of the page (an unreadable one is listed with its problem in `position`).
    pub tenants: Vec<TenantView>,
    /// The cursor of the next page; absent: the table is exhausted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// A schedule as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ScheduleView {
    /// The tenant's id.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// Its spec, canonical.
    pub spec: String,
    /// Its spread in minutes.
    pub spread_min: u32,
    /// Its gap policy.
    pub gap: String,
    /// Its fold policy.
    pub fold: String,
    /// Paused.
    pub paused: bool,
    /// A one-off (a timer).
    pub one_off: bool,
    /// The payload its fires deliver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

/// A tenant's schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ScheduleList {
    /// Every one.
    pub schedules: Vec<ScheduleView>,
}

/// One coming fire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Fire {
    /// The schedule's name.
    pub name: String,
    /// The occurrence, as its unit key names it.
    pub occurrence: String,
    /// The instant the occurrence names (RFC 3339).
    pub instant: String,
    /// When it is due, the spread included (RFC 3339).
    pub due: String,
}

/// Coming fires, soonest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct NextFires {
    /// The fires.
    pub fires: Vec<Fire>,
}
