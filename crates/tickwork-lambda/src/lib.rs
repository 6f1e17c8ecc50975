//! What every tickwork Lambda shares, kept out of the `tickwork` library so that it has no
//! Lambda types: parsing the EventBridge scheduled-event envelope, turning the invocation deadline
//! into a [`Budget`](tickwork::budget::Budget), building clients from the environment, telemetry.

use std::sync::Arc;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_lambda_events::eventbridge::EventBridgeEvent;
use serde_json::Value;
use tickwork::budget::Deadline;
use tickwork::clock::{Millis, SharedClock, SystemClock};
use tickwork::config::{ConfigError, CoreConfig, Env};
use tickwork::meter::Meter;
use tickwork::Db;

/// A scheduled tick, parsed and validated from the EventBridge envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    /// The event's `time`: the logical "now" that names windows and periods, so a duplicate or
    /// late delivery of the same event maps to the same slot.
    pub time_ms: Millis,
    /// Event id (for logs).
    pub id: String,
    /// `detail.dry_run`: compute and report, write nothing.
    pub dry_run: bool,
    /// The rule that fired, when present.
    pub rule: Option<String>,
}

/// An event that is not a usable scheduled event; says what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed scheduled event: {0}")]
pub struct BadEvent(pub String);

impl Tick {
    /// Parses the standard envelope (`detail-type: "Scheduled Event"`, an RFC 3339 `time`);
    /// `detail` may be `{}` or `{"dry_run": true}`.
    pub fn parse(event: &Value) -> Result<Self, BadEvent> {
        if !event.is_object() {
            return Err(BadEvent(format!("expected a JSON object, got {}", kind_of(event))));
        }
        if event.get("time").is_none() {
            return Err(BadEvent("field `time` is missing: the tick's logical time comes from it".into()));
        }
        let ev: EventBridgeEvent<Value> = serde_json::from_value(event.clone())
            .map_err(|e| BadEvent(format!("{e} (expected an EventBridge envelope)")))?;
        if ev.detail_type != "Scheduled Event" {
            return Err(BadEvent(format!("`detail-type` is `{}`, expected `Scheduled Event`", ev.detail_type)));
        }
        let time = ev.time.ok_or_else(|| BadEvent("field `time` is null".into()))?;
        let dry_run = match ev.detail.get("dry_run") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(BadEvent(format!("`detail.dry_run` must be true or false, got {other}"))),
        };
        Ok(Tick {
            time_ms: time.timestamp_millis(),
            id: ev.id.unwrap_or_default(),
            dry_run,
            rule: ev.resources.and_then(|r| r.into_iter().next()),
        })
    }

    /// A scheduled-event envelope for `time_ms` (local drivers, tests, `tickctl invoke`).
    pub fn envelope(time_ms: Millis, dry_run: bool) -> Value {
        let time = jiff::Timestamp::from_millisecond(time_ms).map(|t| t.to_string()).unwrap_or_default();
        serde_json::json!({
            "version": "0",
            "id": format!("local-{time_ms}"),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "000000000000",
            "time": time,
            "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:000000000000:rule/local"],
            "detail": if dry_run { serde_json::json!({"dry_run": true}) } else { serde_json::json!({}) }
        })
    }
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

/// An error and every cause under it, `outer: cause: root`, so the one line Lambda reports names
/// the root (an SDK error's code, a missing table) and not just the wrapper.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// What a handler's error becomes when Lambda reports it: the caller-chosen type and the chain.
pub fn diagnostic(error_type: &str, e: &dyn std::error::Error) -> lambda_runtime::Diagnostic {
    lambda_runtime::Diagnostic { error_type: error_type.to_string(), error_message: error_chain(e) }
}

/// The budget for an invocation: stop starting steps `margin_ms` before the Lambda deadline.
pub fn budget(clock: SharedClock, deadline_ms: Millis, margin_ms: Millis) -> Deadline {
    Deadline::new(clock, deadline_ms, margin_ms)
}

/// `TICKWORK_DRY_RUN=true` turns every tick of a function into a dry run (compute and report, write
/// nothing), whatever the event says: a first deployment can run on its real schedule and show in
/// its logs what it would do before it does it. The event's `detail.dry_run` still works alone.
pub fn forced_dry_run(env: &tickwork::config::Env) -> Result<bool, tickwork::config::ConfigError> {
    env.parse_or("TICKWORK_DRY_RUN", false)
}

/// [`invocation_deadline`] at the system clock's now: what each function's `main` passes on.
pub fn deadline_ms(runtime_deadline_ms: u64) -> i64 {
    invocation_deadline(runtime_deadline_ms, tickwork::clock::Clock::now_ms(&tickwork::clock::SystemClock))
}

/// How long an invocation may run when the runtime gave no deadline.
pub const LOCAL_DEADLINE_MS: i64 = 60_000;

/// The invocation's deadline (epoch ms). Lambda always sends one in the future; local emulators
/// (`cargo lambda watch`, others) may send none, which the runtime reports as 0 — taken literally,
/// every budget would be spent before the first page and the tick would do nothing. Such a deadline
/// becomes `now + 60 s`, with a warning.
pub fn invocation_deadline(deadline_ms: u64, now_ms: i64) -> i64 {
    let d = i64::try_from(deadline_ms).unwrap_or(i64::MAX);
    if d > now_ms {
        d
    } else {
        tracing::warn!(deadline_ms, "no invocation deadline from the runtime (a local emulator?); allowing 60 s");
        now_ms + LOCAL_DEADLINE_MS
    }
}

/// A per-invocation owner id: never reused, so a restarted worker is a new owner (`003_*`).
pub fn owner_id(function: &str) -> String {
    format!("{function}-{:016x}", fastrand::u64(..))
}

/// JSON logs through `tracing`; level from `AWS_LAMBDA_LOG_LEVEL`, then `RUST_LOG`, else `info`.
pub fn init_tracing() {
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".into())
        .to_lowercase();
    let filter =
        tracing_subscriber::EnvFilter::try_new(&level).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Clients and shared settings, built once per process.
#[derive(Debug, Clone)]
pub struct Base {
    /// Shared settings.
    pub core: CoreConfig,
    /// The loaded SDK config (endpoints honour `AWS_ENDPOINT_URL_*`).
    pub sdk: SdkConfig,
    /// Metered DynamoDB client.
    pub db: Db,
    /// Wall clock.
    pub clock: SharedClock,
}

impl Base {
    /// Reads settings (failing with the variable's name) and builds the clients.
    pub async fn from_env(env: &Env, function: &str) -> Result<Self, ConfigError> {
        let core = CoreConfig::from_env(env)?;
        let sdk = aws_config::defaults(BehaviorVersion::latest()).load().await;
        if sdk.region().is_none() {
            return Err(ConfigError::invalid("AWS_REGION", "is not set and no region is configured"));
        }
        let client = tickwork::retry::work_client(&sdk, &core.retry, function);
        let db = Db::new(client, Meter::new(core.capacity_source));
        Ok(Self { core, sdk, db, clock: Arc::new(SystemClock) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_deadline_becomes_sixty_seconds() {
        assert_eq!(invocation_deadline(0, 1_000), 61_000);
        assert_eq!(invocation_deadline(900, 1_000), 61_000, "a deadline already past at the start");
        assert_eq!(invocation_deadline(5_000, 1_000), 5_000);
    }

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
    fn malformed_events_say_what_is_wrong() {
        let cases = [
            (serde_json::json!([1]), "expected a JSON object"),
            (
                serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}),
                "`time` is missing",
            ),
            (
                serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "time": "yesterday", "detail": {}}),
                "EventBridge envelope",
            ),
            (
                serde_json::json!({"detail-type": "Object Created", "source": "aws.s3", "time": "2026-11-29T00:00:00Z", "detail": {}}),
                "expected `Scheduled Event`",
            ),
            (
                serde_json::json!({"detail-type": "Scheduled Event", "source": "aws.events", "time": "2026-11-29T00:00:00Z", "detail": {"dry_run": "yes"}}),
                "dry_run",
            ),
        ];
        for (ev, want) in cases {
            let e = Tick::parse(&ev).unwrap_err().to_string();
            assert!(e.contains(want), "{ev}: {e}");
        }
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

    #[test]
    fn error_chains_name_the_root_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("sweep failed")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("table `t` does not exist"));
        assert_eq!(error_chain(&e), "sweep failed: table `t` does not exist");
        let d = diagnostic("DynamoDb", &e);
        assert_eq!(
            (d.error_type.as_str(), d.error_message.as_str()),
            ("DynamoDb", "sweep failed: table `t` does not exist")
        );
    }

    #[test]
    fn owner_ids_are_unique() {
        assert_ne!(owner_id("w"), owner_id("w"));
    }
}
