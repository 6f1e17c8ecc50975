//! What a team's code asks the control function: one JSON object, its operation in `op`.
//!
//! Why typed and closed: the request is the contract a Python or TypeScript service codes against
//! (through the schema generated from these types, `docs/control/request.schema.json`), so a field of
//! the wrong type, an unknown field or an unknown operation is a refusal that names it
//! ([`parse`]), never a default taken silently. Every field name is the one the clients send.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::answer::{Refusal, RefusalType};

/// Entries one batch operation takes at most (`tenants.add`, `schedules.put`). Bounded so one
/// request stays well inside an invocation's time (a tenant is a put, a schedule about four
/// requests) and Lambda's 6 MB synchronous payload; a larger import is several requests, each
/// harmless to repeat.
pub const MAX_BATCH: usize = 100;

/// Tenants one `tenants.list` page holds at most (and by default).
pub const MAX_PAGE: u32 = 1000;

/// Coming fires `schedules.next` lists per schedule at most.
pub const MAX_NEXT: u32 = 100;

/// One request. The schema is generated from this type; [`parse`] reads it in two steps (the
/// `op`, then that operation's own fields) so that a field at fault is named by its path.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(tag = "op")]
pub enum Request {
    /// Adds tenants (idempotent: one that exists with the same zone is `unchanged`; with another
    /// zone it is refused as a `Conflict`, since a change of zone is a `tenants.move`).
    #[serde(rename = "tenants.add")]
    TenantsAdd(TenantsAdd),
    /// One tenant as stored.
    #[serde(rename = "tenants.get")]
    TenantsGet(TenantId),
    /// Stops pulsing and firing for a tenant (its schedules are kept).
    #[serde(rename = "tenants.suspend")]
    TenantsSuspend(TenantId),
    /// Resumes a suspended tenant: owed from now, its schedules too.
    #[serde(rename = "tenants.resume")]
    TenantsResume(TenantId),
    /// Moves a tenant to another zone without losing or repeating a period; its schedules are
    /// owed from now in the new zone.
    #[serde(rename = "tenants.move")]
    TenantsMove(TenantsMove),
    /// Removes a tenant and its schedules.
    #[serde(rename = "tenants.remove")]
    TenantsRemove(TenantId),
    /// One page of every tenant and the cursor after it (follow it to the end: absent when the
    /// table is exhausted).
    #[serde(rename = "tenants.list")]
    TenantsList(TenantsList),
    /// What a support engineer asks first when a tenant's summary or nudge did not arrive.
    #[serde(rename = "tenants.explain")]
    TenantsExplain(TenantId),
    /// Adds or changes schedules (idempotent: the same definition again is `unchanged`).
    #[serde(rename = "schedules.put")]
    SchedulesPut(SchedulesPut),
    /// Pauses a schedule: what comes due while paused is not fired.
    #[serde(rename = "schedules.pause")]
    SchedulesPause(ScheduleRef),
    /// Resumes a paused schedule, owed from now.
    #[serde(rename = "schedules.resume")]
    SchedulesResume(ScheduleRef),
    /// Removes a schedule.
    #[serde(rename = "schedules.remove")]
    SchedulesRemove(ScheduleRef),
    /// Every schedule of a tenant.
    #[serde(rename = "schedules.list")]
    SchedulesList(SchedulesList),
    /// The coming fires of one schedule or of all of a tenant's, as the sweep will fire them.
    #[serde(rename = "schedules.next")]
    SchedulesNext(SchedulesNext),
    /// A one-off timer: "remind this tenant at T", a one-off schedule under the hood.
    #[serde(rename = "timers.at")]
    TimersAt(TimersAt),
    /// Cancels a timer that has not fired (a fired timer is gone already).
    #[serde(rename = "timers.cancel")]
    TimersCancel(ScheduleRef),
}

/// `tenants.add`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantsAdd {
    /// 1 to [`MAX_BATCH`] tenants.
    pub tenants: Vec<NewTenant>,
}

/// An operation on one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantId {
    /// The tenant's id.
    pub id: String,
}

/// `tenants.move`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantsMove {
    /// The tenant's id.
    pub id: String,
    /// The new IANA zone.
    pub zone: String,
}

/// `tenants.list`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantsList {
    /// The cursor a previous page answered; absent for the first page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Tenants a page at most (1 to [`MAX_PAGE`], default [`MAX_PAGE`]). A page can hold fewer,
    /// even none, and still have a cursor after it.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// `schedules.put`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulesPut {
    /// 1 to [`MAX_BATCH`] schedules.
    pub schedules: Vec<NewSchedule>,
}

/// An operation on one schedule or timer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRef {
    /// The tenant's id.
    pub tenant: String,
    /// The schedule's or timer's name.
    pub name: String,
}

/// `schedules.list`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulesList {
    /// The tenant's id.
    pub tenant: String,
}

/// `schedules.next`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SchedulesNext {
    /// The tenant's id.
    pub tenant: String,
    /// One schedule; absent for all of the tenant's.
    #[serde(default)]
    pub name: Option<String>,
    /// Fires per schedule (1 to [`MAX_NEXT`], default 5).
    #[serde(default)]
    pub count: Option<u32>,
    /// From this instant (RFC 3339); absent for now.
    #[serde(default)]
    pub from: Option<String>,
}

/// `timers.at`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimersAt {
    /// The tenant's id.
    pub tenant: String,
    /// The timer's name (unique among the tenant's schedules and timers).
    pub name: String,
    /// An instant (`2026-12-24T08:00:00Z`, or with an offset) or a local time in the tenant's zone
    /// (`2026-12-24T09:00`).
    pub at: String,
    /// The team's own JSON document delivered with the fire, as a schedule's `payload`.
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
}

/// A tenant to add.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// Its id: 1 to 900 bytes, no control characters and no `#`.
    pub id: String,
    /// Its IANA time zone (`Europe/Berlin`).
    pub zone: String,
    /// A local date (`YYYY-MM-DD`) it is owed from, for a migration that owes periods its old
    /// system may have missed; absent: owed from now.
    #[serde(default)]
    pub owed_from: Option<String>,
}

/// A schedule to add or change.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// The tenant's id (the tenant exists: add it first).
    pub tenant: String,
    /// Its name: 1 to 64 characters, no `#` or spaces.
    pub name: String,
    /// When: `daily 08:00`, `weekly mon-fri 09:30`, `monthly last 18:00`, `cron */15 9-17 * * 1-5`,
    /// `at 2026-12-24T09:00` (see docs/schedules.md).
    pub spec: String,
    /// Minutes across which tenants sharing the spec are spread (0: none).
    #[serde(default)]
    pub spread_min: u32,
    /// A local time in a DST gap: `shift` (fires at the first instant after it, the default) or
    /// `skip`.
    #[serde(default)]
    pub gap: Option<String>,
    /// A local time repeated by a fold: `first`, `last` or `both` (each of its instants); by
    /// default `both` for a cron whose minute or hour field begins with `*` (as cronie runs it),
    /// else `first`.
    #[serde(default)]
    pub fold: Option<String>,
    /// The team's own JSON document (at most 4,096 bytes as compact JSON), stored with the
    /// definition and delivered in every fire's unit as `payload`, as a Scheduler schedule carries
    /// its input. Tenants sharing a schedule and a payload fire as one group; a distinct payload
    /// is a group of its own.
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
}

/// What a refusal does: answered (the caller reads it), or the invocation failed with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnRefusal {
    /// `{"ok": false, "error": …}`, a success for Lambda: a synchronous caller reads it, and
    /// nothing retries a request that would be refused again.
    #[default]
    Answer,
    /// A function error carrying the refusal: for an event delivered asynchronously (the
    /// template's EventBridge rule sets it), so that what is refused for good reaches the
    /// on-failure destination with its reason rather than vanishing as a success.
    Fail,
}

/// The request's `on_refusal` (`"answer"`, the default, or `"fail"`), taken out of it so the
/// operation's own fields are read as they are; a value other than those is a refusal.
pub fn on_refusal(request: &mut serde_json::Value) -> Result<OnRefusal, Refusal> {
    let Some(v) = request.as_object_mut().and_then(|o| o.remove("on_refusal")) else {
        return Ok(OnRefusal::Answer);
    };
    match v.as_str() {
        Some("answer") => Ok(OnRefusal::Answer),
        Some("fail") => Ok(OnRefusal::Fail),
        _ => Err(Refusal::new(RefusalType::InvalidField, format!("on_refusal is `answer` or `fail`, not {v}"))
            .field("on_refusal")),
    }
}

/// The operations, as `op` names them (the schema and the clients list them from here).
pub const OPS: [&str; 16] = [
    "tenants.add",
    "tenants.get",
    "tenants.suspend",
    "tenants.resume",
    "tenants.move",
    "tenants.remove",
    "tenants.list",
    "tenants.explain",
    "schedules.put",
    "schedules.pause",
    "schedules.resume",
    "schedules.remove",
    "schedules.list",
    "schedules.next",
    "timers.at",
    "timers.cancel",
];

/// Reads a request, or the refusal that names what is wrong with it: not an object, no `op`,
/// an unknown operation, or a field missing, unknown or of the wrong type (its path, such as
/// `tenants[3].zone`, and the batch index it is in). Pure.
pub fn parse(v: serde_json::Value) -> Result<Request, Refusal> {
    let Some(obj) = v.as_object() else {
        return Err(Refusal::new(RefusalType::Malformed, format!("a request is a JSON object; this is {}", kind(&v))));
    };
    match obj.get("op") {
        None => return Err(Refusal::new(RefusalType::Malformed, "no `op`: name an operation").field("op")),
        Some(serde_json::Value::String(op)) if !OPS.contains(&op.as_str()) => {
            return Err(Refusal::new(
                RefusalType::UnknownOperation,
                format!("`{op}` is not an operation; the operations are {}", OPS.join(", ")),
            )
            .field("op"))
        }
        Some(serde_json::Value::String(_)) => {}
        Some(other) => {
            return Err(
                Refusal::new(RefusalType::Malformed, format!("`op` is a string; this is {}", kind(other))).field("op")
            )
        }
    }
    let op = obj["op"].as_str().unwrap_or_default().to_string();
    let mut fields = obj.clone();
    fields.remove("op");
    let fields = serde_json::Value::Object(fields);
    let req = match op.as_str() {
        "tenants.add" => Request::TenantsAdd(fields_of(fields)?),
        "tenants.get" => Request::TenantsGet(fields_of(fields)?),
        "tenants.suspend" => Request::TenantsSuspend(fields_of(fields)?),
        "tenants.resume" => Request::TenantsResume(fields_of(fields)?),
        "tenants.move" => Request::TenantsMove(fields_of(fields)?),
        "tenants.remove" => Request::TenantsRemove(fields_of(fields)?),
        "tenants.list" => Request::TenantsList(fields_of(fields)?),
        "tenants.explain" => Request::TenantsExplain(fields_of(fields)?),
        "schedules.put" => Request::SchedulesPut(fields_of(fields)?),
        "schedules.pause" => Request::SchedulesPause(fields_of(fields)?),
        "schedules.resume" => Request::SchedulesResume(fields_of(fields)?),
        "schedules.remove" => Request::SchedulesRemove(fields_of(fields)?),
        "schedules.list" => Request::SchedulesList(fields_of(fields)?),
        "schedules.next" => Request::SchedulesNext(fields_of(fields)?),
        "timers.at" => Request::TimersAt(fields_of(fields)?),
        "timers.cancel" => Request::TimersCancel(fields_of(fields)?),
        other => unreachable!("`{other}` was checked against OPS"),
    };
    check_sizes(&req)?;
    Ok(req)
}

/// An operation's fields, or the refusal naming the one at fault by its path (`tenants[3].zone`)
/// and, in a batch, its entry.
fn fields_of<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        // The path names an unknown field too (`tenants[0].colour`).
        let (path, message) = (e.path().to_string(), e.inner().to_string());
        let mut r = Refusal::new(RefusalType::InvalidField, message);
        if path != "." {
            r = r.field(&path);
            if let Some(i) = batch_index(&path) {
                r = r.index(i);
            }
        }
        r
    })
}

/// A batch empty or over its limit, a page or count out of range: refused before anything runs.
fn check_sizes(req: &Request) -> Result<(), Refusal> {
    let batch = |field: &str, n: usize| -> Result<(), Refusal> {
        if n == 0 {
            return Err(Refusal::new(RefusalType::InvalidField, format!("`{field}` is empty: give 1 to {MAX_BATCH}"))
                .field(field));
        }
        if n > MAX_BATCH {
            return Err(Refusal::new(
                RefusalType::TooLarge,
                format!("{n} entries; a request takes at most {MAX_BATCH} (send several: each is harmless to repeat)"),
            )
            .field(field));
        }
        Ok(())
    };
    let range = |field: &str, v: Option<u32>, max: u32| -> Result<(), Refusal> {
        match v {
            Some(n) if n == 0 || n > max => Err(Refusal::new(
                if n > max { RefusalType::TooLarge } else { RefusalType::InvalidField },
                format!("{n}: `{field}` is 1 to {max}"),
            )
            .field(field)),
            _ => Ok(()),
        }
    };
    match req {
        Request::TenantsAdd(r) => batch("tenants", r.tenants.len()),
        Request::SchedulesPut(r) => batch("schedules", r.schedules.len()),
        Request::TenantsList(r) => range("limit", r.limit, MAX_PAGE),
        Request::SchedulesNext(r) => range("count", r.count, MAX_NEXT),
        _ => Ok(()),
    }
}

/// The entry of a batch a field path is in: `tenants[3].zone` is entry 3.
fn batch_index(path: &str) -> Option<usize> {
    let rest = path.strip_prefix("tenants[").or_else(|| path.strip_prefix("schedules["))?;
    rest.split(']').next()?.parse().ok()
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(v: serde_json::Value) -> Refusal {
        parse(v).expect_err("refused")
    }

    #[test]
    fn every_operation_reads_and_every_op_is_listed() {
        for (v, want) in [
            (json!({"op": "tenants.get", "id": "t1"}), Request::TenantsGet(TenantId { id: "t1".into() })),
            (
                json!({"op": "tenants.add", "tenants": [{"id": "t1", "zone": "UTC", "owed_from": "2026-11-01"}]}),
                Request::TenantsAdd(TenantsAdd {
                    tenants: vec![NewTenant {
                        id: "t1".into(),
                        zone: "UTC".into(),
                        owed_from: Some("2026-11-01".into()),
                    }],
                }),
            ),
            (json!({"op": "tenants.list"}), Request::TenantsList(TenantsList::default())),
            (
                json!({"op": "timers.at", "tenant": "t", "name": "n", "at": "2026-12-24T09:00"}),
                Request::TimersAt(TimersAt {
                    tenant: "t".into(),
                    name: "n".into(),
                    at: "2026-12-24T09:00".into(),
                    payload: None,
                }),
            ),
        ] {
            assert_eq!(parse(v).unwrap(), want);
        }
        // Each listed op names a variant (a missing field is refused, not an unknown op).
        for op in OPS {
            let r = parse(json!({"op": op})).err().map(|r| r.r#type);
            assert_ne!(r, Some(RefusalType::UnknownOperation), "{op}");
        }
    }

    #[test]
    fn a_bad_request_is_refused_naming_its_field() {
        let r = refused(json!([1, 2]));
        assert_eq!(r.r#type, RefusalType::Malformed);
        let r = refused(json!({"id": "t"}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::Malformed, Some("op")));
        let r = refused(json!({"op": "tenants.frobnicate"}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::UnknownOperation, Some("op")));
        assert!(r.message.contains("tenants.add"), "{}", r.message);
        let r = refused(json!({"op": 7}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::Malformed, Some("op")));
        let r = refused(json!({"op": "tenants.get", "id": 5}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("id")));
        let r = refused(json!({"op": "tenants.get"}));
        assert_eq!(r.r#type, RefusalType::InvalidField);
        assert!(r.message.contains("`id`"), "{}", r.message);
        let r = refused(json!({"op": "tenants.get", "id": "t", "zone": "UTC"}));
        assert_eq!(r.r#type, RefusalType::InvalidField);
        assert_eq!(r.field.as_deref(), Some("zone"), "an unknown field is named: {}", r.message);
        let r = refused(json!({"op": "tenants.add", "tenants": [{"id": "a", "zone": "UTC"}, {"id": "b", "zone": 3}]}));
        assert_eq!((r.field.as_deref(), r.index), (Some("tenants[1].zone"), Some(1)));
        let r = refused(json!({"op": "tenants.add", "tenants": [{"id": "a", "zone": "UTC", "colour": "red"}]}));
        assert_eq!((r.r#type, r.index), (RefusalType::InvalidField, Some(0)));
        assert_eq!(r.field.as_deref(), Some("tenants[0].colour"));
    }

    #[test]
    fn batches_pages_and_counts_are_bounded() {
        let many: Vec<_> = (0..=MAX_BATCH).map(|i| json!({"id": format!("t{i}"), "zone": "UTC"})).collect();
        let r = refused(json!({"op": "tenants.add", "tenants": many}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::TooLarge, Some("tenants")));
        let r = refused(json!({"op": "schedules.put", "schedules": []}));
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("schedules")));
        assert_eq!(refused(json!({"op": "tenants.list", "limit": 0})).r#type, RefusalType::InvalidField);
        assert_eq!(refused(json!({"op": "tenants.list", "limit": 1001})).r#type, RefusalType::TooLarge);
        assert_eq!(refused(json!({"op": "schedules.next", "tenant": "t", "count": 101})).r#type, RefusalType::TooLarge);
        assert!(parse(json!({"op": "tenants.list", "limit": 1000})).is_ok());
    }

    #[test]
    fn on_refusal_is_taken_out_before_the_fields_are_read_and_anything_else_is_refused() {
        let mut v = json!({"op": "tenants.get", "id": "t", "on_refusal": "fail"});
        assert_eq!(on_refusal(&mut v).unwrap(), OnRefusal::Fail);
        assert!(parse(v).is_ok(), "the operation's own fields parse without it");
        let mut v = json!({"op": "tenants.get", "id": "t"});
        assert_eq!(on_refusal(&mut v).unwrap(), OnRefusal::Answer);
        let mut v = json!({"op": "tenants.get", "id": "t", "on_refusal": "ignore"});
        let r = on_refusal(&mut v).unwrap_err();
        assert_eq!((r.r#type, r.field.as_deref()), (RefusalType::InvalidField, Some("on_refusal")));
    }
}
