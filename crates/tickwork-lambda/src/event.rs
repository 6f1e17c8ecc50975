//! The scheduled event: parsed, validated, and refused when it cannot be a real tick.
//!
//! Why: the event's `time` is the logical "now" that names every window, period and cutoff, so a
//! bad one is not a cosmetic problem. `"time": "3000-01-01T00:00:00Z"` would move every sweep
//! watermark to the year 3000 (no pulse until then), mark every fan-out window done, and give the
//! archiver a cutoff above every row (the whole change feed archived and deleted). So an event is
//! refused, before any read or write, when:
//! - it is not a JSON object, or has no `time`, or its `time` is not an RFC 3339 instant (a year
//!   beyond 9999 included);
//! - it names another `detail-type` than `Scheduled Event`;
//! - its `time` is further ahead of the function's wall clock than one schedule interval plus the
//!   declared clock-skew bound ([`Tick::guard`]): a schedule fires at or after its time, never an
//!   interval early.
//!
//! Two shapes are accepted, so moving a schedule from an EventBridge rule to EventBridge Scheduler
//! is a template change only:
//! - the EventBridge envelope (`detail-type`, `time`, `id`, `resources`, `detail`), and
//! - the Scheduler target input the template writes: `{"scheduled-time":
//!   "<aws.scheduler.scheduled-time>", "execution-id": "<aws.scheduler.execution-id>"}` (Scheduler
//!   replaces the placeholders; "the time you specified for the schedule to invoke its target,
//!   for example, 2022-03-22T18:59:43Z", EventBridge Scheduler User Guide, context attributes).
//!
//! A small type of our own instead of `aws_lambda_events`: the envelope is five fields, and the
//! crate brought about 30 dependencies (chrono among them) to parse them.

use serde_json::Value;
use tickwork::clock::Millis;

/// A scheduled tick, parsed and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    /// The event's `time`: the logical "now" that names windows and periods, so a duplicate or
    /// late delivery of the same event maps to the same slot.
    pub time_ms: Millis,
    /// Event id (EventBridge) or execution id (Scheduler), for logs.
    pub id: String,
    /// `detail.dry_run` (or `dry_run` in the Scheduler shape): compute and report, write nothing.
    pub dry_run: bool,
    /// The rule or schedule that fired, when present.
    pub rule: Option<String>,
    /// `detail.helper`: an invocation the job's leader started to share a boundary's work
    /// ([`crate::job::LeasedJob::help`]); it works under fences of its own, not the job's lease.
    pub helper: bool,
    /// `detail.worker`: which helper (1, 2, ...; the leader is 0), so that workers starting
    /// together begin at different places.
    pub worker: u32,
}

/// An event that is not a usable scheduled event; says which field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed scheduled event: {0}")]
pub struct BadEvent(pub String);

/// The detail-type of a scheduled event.
pub const SCHEDULED_EVENT: &str = "Scheduled Event";

impl Tick {
    /// Parses either accepted shape (see the module docs).
    pub fn parse(event: &Value) -> Result<Self, BadEvent> {
        let Some(obj) = event.as_object() else {
            return Err(BadEvent(format!("expected a JSON object, got {}", kind_of(event))));
        };
        if obj.contains_key("scheduled-time") {
            return Self::parse_scheduler(obj);
        }
        let time = match obj.get("time") {
            None => return Err(BadEvent("field `time` is missing: the tick's logical time comes from it".into())),
            Some(Value::Null) => return Err(BadEvent("field `time` is null".into())),
            Some(t) => instant("time", t)?,
        };
        match obj.get("detail-type") {
            Some(Value::String(s)) if s == SCHEDULED_EVENT => {}
            Some(Value::String(s)) => {
                return Err(BadEvent(format!("`detail-type` is `{s}`, expected `{SCHEDULED_EVENT}`")))
            }
            Some(other) => return Err(BadEvent(format!("`detail-type` must be a string, got {}", kind_of(other)))),
            None => return Err(BadEvent("field `detail-type` is missing (expected an EventBridge envelope)".into())),
        }
        let (dry_run, helper, worker) = match obj.get("detail") {
            None | Some(Value::Null) => (false, false, 0),
            Some(Value::Object(d)) => (
                flag(d.get("dry_run"), "detail.dry_run")?,
                flag(d.get("helper"), "detail.helper")?,
                match d.get("worker") {
                    None | Some(Value::Null) => 0,
                    Some(v) => v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| BadEvent(format!("`detail.worker` must be a small whole number, got {v}")))?,
                },
            ),
            Some(other) => return Err(BadEvent(format!("`detail` must be an object, got {}", kind_of(other)))),
        };
        let rule = match obj.get("resources") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => a.first().and_then(Value::as_str).map(str::to_string),
            Some(other) => return Err(BadEvent(format!("`resources` must be an array, got {}", kind_of(other)))),
        };
        Ok(Tick { time_ms: time, id: text(obj.get("id")), dry_run, rule, helper, worker })
    }

    fn parse_scheduler(obj: &serde_json::Map<String, Value>) -> Result<Self, BadEvent> {
        let time = instant("scheduled-time", &obj["scheduled-time"])?;
        Ok(Tick {
            time_ms: time,
            id: text(obj.get("execution-id")),
            dry_run: flag(obj.get("dry_run"), "dry_run")?,
            rule: obj.get("schedule-arn").and_then(Value::as_str).map(str::to_string),
            helper: false,
            worker: 0,
        })
    }

    /// The event a leader sends to start helper `worker` (1, 2, ...) for the tick at `time_ms`
    /// (`id` names the leader and the helper, for logs).
    pub fn helper_envelope(time_ms: Millis, id: &str, worker: u32) -> Value {
        let mut e = Self::envelope(time_ms, false);
        e["id"] = Value::String(id.to_string());
        e["detail"] = serde_json::json!({"helper": true, "worker": worker});
        e
    }

    /// Refuses a tick further ahead of the wall clock `now_ms` than `interval_ms + skew_ms`.
    pub fn guard(&self, now_ms: Millis, interval_ms: Millis, skew_ms: Millis) -> Result<(), BadEvent> {
        let ahead = self.time_ms - now_ms;
        if ahead > interval_ms + skew_ms {
            return Err(BadEvent(format!(
                "field `time` ({}) is {} s ahead of this function's clock; a schedule never fires more than one \
                 interval plus the clock-skew bound ({} s) early, so the event is refused and nothing is written",
                fmt_ms(self.time_ms),
                ahead / 1000,
                (interval_ms + skew_ms) / 1000
            )));
        }
        Ok(())
    }

    /// A scheduled-event envelope for `time_ms` (local drivers, tests, `tickctl invoke`).
    pub fn envelope(time_ms: Millis, dry_run: bool) -> Value {
        serde_json::json!({
            "version": "0",
            "id": format!("local-{time_ms}"),
            "detail-type": SCHEDULED_EVENT,
            "source": "aws.events",
            "account": "000000000000",
            "time": fmt_ms(time_ms),
            "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:000000000000:rule/local"],
            "detail": if dry_run { serde_json::json!({"dry_run": true}) } else { serde_json::json!({}) }
        })
    }
}

fn fmt_ms(ms: Millis) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| format!("{ms} ms"))
}

fn instant(field: &str, v: &Value) -> Result<Millis, BadEvent> {
    let Some(s) = v.as_str() else {
        return Err(BadEvent(format!("field `{field}` must be an RFC 3339 string, got {}", kind_of(v))));
    };
    let t: jiff::Timestamp = s
        .parse()
        .map_err(|e| BadEvent(format!("field `{field}` is `{s}`, not an RFC 3339 instant in years 0001-9999: {e}")))?;
    Ok(t.as_millisecond())
}

fn flag(v: Option<&Value>, field: &str) -> Result<bool, BadEvent> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(BadEvent(format!("`{field}` must be true or false, got {other}"))),
    }
}

fn text(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or_default().to_string()
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_scheduled_envelope() {
        let ev = Tick::envelope(1_764_374_400_000, false);
        let t = Tick::parse(&ev).unwrap();
        assert_eq!(t.time_ms, 1_764_374_400_000);
        assert!(!t.dry_run);
        assert_eq!(t.rule.as_deref(), Some("arn:aws:events:us-east-1:000000000000:rule/local"));
        assert!(Tick::parse(&Tick::envelope(1_764_374_400_000, true)).unwrap().dry_run);
    }

    #[test]
    fn parses_the_scheduler_input() {
        let ev = serde_json::json!({"scheduled-time": "2026-11-29T00:00:00Z", "execution-id": "d32c5kddcf5bb8c3"});
        let t = Tick::parse(&ev).unwrap();
        assert_eq!((t.time_ms, t.id.as_str(), t.dry_run), (1_795_910_400_000, "d32c5kddcf5bb8c3", false));
        let bad = serde_json::json!({"scheduled-time": "<aws.scheduler.scheduled-time>"});
        assert!(Tick::parse(&bad).unwrap_err().to_string().contains("`scheduled-time`"));
    }

    #[test]
    fn malformed_events_say_what_is_wrong() {
        let cases = [
            (serde_json::json!([1]), "expected a JSON object"),
            (serde_json::json!({"detail-type": "Scheduled Event", "detail": {}}), "`time` is missing"),
            (serde_json::json!({"detail-type": "Scheduled Event", "time": "yesterday"}), "field `time` is `yesterday`"),
            (serde_json::json!({"detail-type": "Scheduled Event", "time": 12}), "field `time` must be"),
            (serde_json::json!({"detail-type": "Scheduled Event", "time": "+10000-01-01T00:00:00Z"}), "field `time`"),
            (
                serde_json::json!({"detail-type": "Object Created", "time": "2026-11-29T00:00:00Z"}),
                "expected `Scheduled Event`",
            ),
            (serde_json::json!({"time": "2026-11-29T00:00:00Z"}), "`detail-type` is missing"),
            (
                serde_json::json!({"detail-type": "Scheduled Event", "time": "2026-11-29T00:00:00Z", "detail": {"dry_run": "yes"}}),
                "dry_run",
            ),
        ];
        for (ev, want) in cases {
            let e = Tick::parse(&ev).unwrap_err().to_string();
            assert!(e.contains(want), "{ev}: {e}");
        }
    }

    #[test]
    fn an_event_from_the_future_is_refused() {
        let now = 1_795_910_400_000;
        let t = Tick::parse(&Tick::envelope(now + 400 * 86_400_000, false)).unwrap();
        let e = t.guard(now, 60_000, 1_000).unwrap_err().to_string();
        assert!(e.contains("field `time`") && e.contains("ahead"), "{e}");
        // A tick up to one interval plus the skew early is a real (early-firing) schedule.
        let ok = Tick::parse(&Tick::envelope(now + 61_000, false)).unwrap();
        assert!(ok.guard(now, 60_000, 1_000).is_ok());
        assert!(Tick::parse(&Tick::envelope(now + 61_001, false)).unwrap().guard(now, 60_000, 1_000).is_err());
        // Late events (retries, an outage) are real ticks.
        assert!(Tick::parse(&Tick::envelope(now - 30 * 3_600_000, false)).unwrap().guard(now, 60_000, 1_000).is_ok());
    }

    #[test]
    fn sample_events_parse() {
        for (name, text, dry) in [
            ("pulse-sweep", include_str!("../../../events/pulse-sweep.json"), false),
            ("pulse-sweep-dry-run", include_str!("../../../events/pulse-sweep-dry-run.json"), true),
            ("tenant-fanout", include_str!("../../../events/tenant-fanout.json"), false),
            ("tenant-fanout-dry-run", include_str!("../../../events/tenant-fanout-dry-run.json"), true),
            ("queue-worker", include_str!("../../../events/queue-worker.json"), false),
            ("archiver", include_str!("../../../events/archiver.json"), false),
            ("archiver-dry-run", include_str!("../../../events/archiver-dry-run.json"), true),
        ] {
            let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let t = Tick::parse(&v).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(t.dry_run, dry, "{name}");
        }
    }
}
