//! Logs and metrics that survive Lambda's log-level filter.
//!
//! Lambda's rules for a function whose log format is JSON ("Log-level filtering", Lambda
//! Developer Guide): application lines must be JSON objects with a `"level"` key; "if the
//! `level` value field is invalid or missing, Lambda will assign the log output the level INFO";
//! "for Lambda to use the timestamp field, you must specify the time in valid RFC 3339 timestamp
//! format. If you don't supply a valid timestamp, Lambda will assign the log the level INFO";
//! and only lines at or above the configured `ApplicationLogLevel` are kept (TRACE < DEBUG < INFO
//! < WARN < ERROR < FATAL). Lambda passes the level to the function as `AWS_LAMBDA_LOG_LEVEL`
//! and the format as `AWS_LAMBDA_LOG_FORMAT`.
//!
//! So:
//! - every tracing line carries `level` and an RFC 3339 `timestamp` (a line without one would be
//!   filed as INFO and dropped at WARN, and an ERROR line would vanish at ERROR);
//! - the one metrics line per invocation (EMF, read by the alarms) is written at the configured
//!   level itself, never below INFO, so that no allowed level drops the metrics an alarm needs.
//!   It is a record of the invocation, not a message of a severity; Logs Insights queries by
//!   severity should exclude lines with `_aws`;
//! - outside Lambda's JSON format (a local run), tracing lines are plain text for people.

use std::sync::OnceLock;

/// Lambda's application log levels, least severe first.
pub const LEVELS: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];

fn configured_level() -> String {
    std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "INFO".into())
        .to_uppercase()
}

/// The level the invocation's metrics line is written at: the configured level, at least INFO.
pub fn metrics_level_for(configured: &str) -> &'static str {
    let rank = |l: &str| LEVELS.iter().position(|x| x.eq_ignore_ascii_case(l));
    match rank(configured) {
        Some(r) if r > 2 => LEVELS[r],
        _ => "INFO",
    }
}

/// [`metrics_level_for`] the process's configured level (read once).
pub fn metrics_level() -> &'static str {
    static LEVEL: OnceLock<&'static str> = OnceLock::new();
    LEVEL.get_or_init(|| metrics_level_for(&configured_level()))
}

/// Logs through `tracing`: JSON with `level` and an RFC 3339 `timestamp` when Lambda's format is
/// JSON, plain text otherwise; the level from `AWS_LAMBDA_LOG_LEVEL`, then `RUST_LOG`, else INFO.
pub fn init_tracing() {
    let level = match configured_level().as_str() {
        "FATAL" => "error".to_string(),
        other => other.to_lowercase(),
    };
    let filter =
        tracing_subscriber::EnvFilter::try_new(&level).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_target(false);
    let _ = if json {
        // The default timer writes RFC 3339 UTC (`2026-11-30T09:00:00.123456Z`).
        builder.json().with_current_span(false).try_init()
    } else {
        builder.try_init()
    };
}

/// Writes [`start_line`] for `function` to stdout: called by each function's `main` (not by
/// [`crate::Base`], which `tickctl` builds too and whose `--json` output must stay one document).
pub fn announce(function: &str) {
    print_line(&start_line(function, metrics_level(), jiff::Timestamp::now()));
}

/// Prints the invocation's metrics line to stdout as one whole line (EMF must not be wrapped in
/// another record). `println!` writes the line under one lock, and the test harness captures it.
pub fn print_line(line: &str) {
    println!("{line}");
}

/// The line a function writes once at start-up: its release and the time zone database it
/// decides with ([`tickwork::release`]), so a log search says which rules a stack applied when.
/// Written at the metrics line's level, so no allowed `ApplicationLogLevel` drops it. Pure.
pub fn start_line(function: &str, level: &str, now: jiff::Timestamp) -> String {
    serde_json::json!({
        "level": level,
        "timestamp": now.to_string(),
        "message": "tickwork function starting",
        "function": function,
        "version": tickwork::release::VERSION,
        "tzdb": tickwork::release::tzdb(),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_line_names_the_release_and_the_database_at_a_kept_level() {
        let now: jiff::Timestamp = "2026-12-02T09:00:00Z".parse().unwrap();
        let line: serde_json::Value = serde_json::from_str(&start_line("pulse-sweep", "WARN", now)).unwrap();
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["timestamp"], "2026-12-02T09:00:00Z");
        assert_eq!(line["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(line["tzdb"], tickwork::release::tzdb());
        assert_eq!(line["function"], "pulse-sweep");
    }

    #[test]
    fn metrics_are_written_at_the_threshold_never_below_info() {
        for (configured, want) in [
            ("TRACE", "INFO"),
            ("debug", "INFO"),
            ("INFO", "INFO"),
            ("WARN", "WARN"),
            ("ERROR", "ERROR"),
            ("FATAL", "FATAL"),
            ("nonsense", "INFO"),
        ] {
            assert_eq!(metrics_level_for(configured), want, "{configured}");
        }
    }
}
