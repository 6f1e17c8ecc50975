//! What survives Lambda's log-level filter: each function's real binary, run behind the Runtime
//! API stand-in, its stdout filtered as Lambda documents, at every level the template allows.
//!
//! Lambda's rules for a function with `LogFormat: JSON` (Lambda Developer Guide, "Log-level
//! filtering"): a line's level is its `"level"` value; "if the `level` value field is invalid or
//! missing, Lambda will assign the log output the level INFO"; "if you don't supply a valid
//! timestamp [RFC 3339], Lambda will assign the log the level INFO"; a line is kept when its level
//! is at or above the configured `ApplicationLogLevel` (TRACE < DEBUG < INFO < WARN < ERROR <
//! FATAL). What Lambda does with a line that is not JSON is not documented; it is taken as INFO
//! here (the most a JSON line without a level gets).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;
use tickwork::schema;

/// Lambda's levels, least severe first.
pub const LEVELS: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];

fn rank(level: &str) -> usize {
    LEVELS.iter().position(|l| l.eq_ignore_ascii_case(level)).expect("a Lambda level")
}

/// The level Lambda files `line` under (see the module docs).
pub fn lambda_level(line: &str) -> &'static str {
    let Ok(v) = serde_json::from_str::<Value>(line) else { return "INFO" };
    let valid_time = v["timestamp"].as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok());
    if !valid_time {
        return "INFO";
    }
    v["level"].as_str().and_then(|l| LEVELS.iter().find(|x| x.eq_ignore_ascii_case(l))).copied().unwrap_or("INFO")
}

/// Does Lambda keep `line` at `threshold`?
pub fn kept(line: &str, threshold: &str) -> bool {
    rank(lambda_level(line)) >= rank(threshold)
}

/// The rules, on lines of the shapes that mattered: before this stop every tracing line lacked a
/// timestamp (`without_time()`) and every EMF line lacked a level, so at WARN both were filed as
/// INFO and dropped, and at ERROR the error lines were dropped too.
#[test]
fn the_filter_files_lines_without_a_level_or_a_timestamp_as_info() {
    let old_error = r#"{"level":"ERROR","fields":{"message":"pulse sweep failed"}}"#;
    let old_emf = r#"{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"Job":"pulse-sweep","GroupsDue":1}"#;
    for level in ["WARN", "ERROR"] {
        assert!(!kept(old_error, level), "an untimed ERROR line is INFO: dropped at {level}");
        assert!(!kept(old_emf, level), "an EMF line without a level is INFO: dropped at {level}");
    }
    let new_error = r#"{"timestamp":"2026-11-30T09:00:00.123456Z","level":"ERROR","fields":{"message":"tick failed"}}"#;
    assert!(kept(new_error, "ERROR") && !kept(new_error, "FATAL"));
    assert_eq!(lambda_level(r#"{"timestamp":"yesterday","level":"ERROR"}"#), "INFO");
    assert_eq!(lambda_level("plain text"), "INFO");
    assert_eq!(lambda_level(r#"{"timestamp":"2026-11-30T09:00:00Z","level":"debug"}"#), "DEBUG");
}

/// A unique prefix with every table created, as `tickctl provision` would.
pub async fn provisioned(local: &tickwork_tests::Local) -> String {
    let prefix = tickwork_tests::unique("bin");
    for def in tickctl::all_tables() {
        schema::create_table(local.db.client(), &def, &format!("{prefix}-{}", def.logical)).await.unwrap();
    }
    prefix
}

/// What every function is started with against the local servers.
pub fn base_env(local: &tickwork_tests::Local, prefix: &str, level: &str, bucket: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL_DYNAMODB", local.endpoint.clone()),
        ("AWS_ENDPOINT_URL_S3", local.endpoint.clone()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON".into()),
        ("AWS_LAMBDA_LOG_LEVEL", level.into()),
        ("TICKWORK_TABLE_PREFIX", prefix.into()),
        ("TICKWORK_CAPACITY_SOURCE", "estimate".into()),
        ("TICKWORK_METRICS_NAMESPACE", "tickwork/test".into()),
        ("TICKWORK_ARCHIVE_BUCKET", bucket.into()),
        ("TICKWORK_RETRY_MAX_ATTEMPTS", "2".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The four binaries and the metrics each one's alarms read.
pub fn functions() -> [(&'static str, &'static str, &'static [&'static str]); 4] {
    [
        ("pulse-sweep", env!("CARGO_BIN_EXE_lambda-pulse-sweep"), &["Paused", "GroupsDue", "FailedUnits"]),
        ("tenant-fanout", env!("CARGO_BIN_EXE_lambda-tenant-fanout"), &["Paused", "ShardsLeft", "FailedUnits"]),
        ("queue-worker", env!("CARGO_BIN_EXE_lambda-queue-worker"), &["Paused", "FailedUnits", "QueueLag"]),
        ("archiver", env!("CARGO_BIN_EXE_lambda-archiver"), &["Paused", "ShardsLeft"]),
    ]
}

fn metrics_of(line: &Value) -> Vec<String> {
    line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .map(|m| m.iter().filter_map(|x| x["Name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Every allowed level, every function: one healthy tick and one refused event. What survives the
/// filter holds, for every invocation, its metrics line (with every metric the function's alarms
/// read, when the tick ran), and for the failed one an ERROR line (at every level up to ERROR).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_errors_survive_every_allowed_log_level() {
    let local = tickwork_tests::Local::new().await;
    let prefix = provisioned(&local).await;
    let bucket = tickwork_tests::unique("logs").to_lowercase();
    archiver::s3_client(&local.sdk).create_bucket().bucket(&bucket).send().await.unwrap();
    let t: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap(),
    )
    .unwrap();
    let allowed: Vec<String> = t["Parameters"]["LogLevel"]["AllowedValues"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(allowed.len(), 6, "every Lambda level is allowed: {allowed:?}");
    let now = jiff::Timestamp::now().as_millisecond();
    let events = [
        tickwork_lambda::Tick::envelope(now, false).to_string(),
        tickwork_lambda::Tick::envelope(now + 400 * 86_400_000, false).to_string(),
    ];
    let mut runs = 0;
    for level in &allowed {
        for (name, bin, alarm_metrics) in functions() {
            let env = base_env(&local, &prefix, level, &bucket);
            let run = lambda_standin::run(bin.as_ref(), &env, &events, Duration::from_secs(30)).await.unwrap();
            runs += 1;
            assert_eq!(run.invocations.len(), 2);
            // The start-up line (before the first event) names the release and the time zone
            // database, and survives the level filter like the metrics line.
            let start: Vec<Value> = run
                .init_stdout
                .iter()
                .filter(|l| kept(l, level))
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v["message"] == "tickwork function starting")
                .collect();
            assert_eq!(start.len(), 1, "{name} at {level}: the start line arrives\n{:#?}", run.init_stdout);
            assert_eq!(start[0]["version"], tickwork::release::VERSION, "{name}");
            assert_eq!(start[0]["tzdb"], tickwork::release::tzdb(), "{name}");
            let (good, bad) = (&run.invocations[0], &run.invocations[1]);
            assert!(good.ok, "{name} at {level}: {}", good.body);
            assert!(!bad.ok && bad.body.contains("field `time`"), "{name} at {level}: {}", bad.body);
            for (i, inv) in run.invocations.iter().enumerate() {
                let surviving: Vec<&String> = inv.stdout.iter().filter(|l| kept(l, level)).collect();
                let metric_lines: Vec<Value> = surviving
                    .iter()
                    .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                    .filter(|v| v["message"] == tickwork::meter::INVOCATION_MESSAGE)
                    .collect();
                assert_eq!(
                    metric_lines.len(),
                    1,
                    "{name} at {level}, invocation {i}: the metrics line arrives\n{:#?}",
                    inv.stdout
                );
                let m = &metric_lines[0];
                assert_eq!(m["_aws"]["CloudWatchMetrics"][0]["Namespace"], "tickwork/test");
                if i == 0 {
                    let declared = metrics_of(m);
                    for want in alarm_metrics {
                        assert!(
                            declared.iter().any(|d| d == want),
                            "{name} at {level}: `{want}` missing from {declared:?}"
                        );
                    }
                } else {
                    assert_eq!(m["outcome"], "failed");
                    if rank(level) <= rank("ERROR") {
                        let error_line = surviving.iter().any(|l| lambda_level(l) == "ERROR");
                        assert!(error_line, "{name} at {level}: no ERROR line arrives\n{:#?}", inv.stdout);
                    }
                }
                // Below the threshold nothing of ours gets through; everything we print is JSON
                // with a valid timestamp and level.
                for l in &inv.stdout {
                    let v: Value =
                        serde_json::from_str(l).unwrap_or_else(|_| panic!("{name}: a line that is not JSON: {l}"));
                    assert!(
                        v["timestamp"].as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
                        "{name}: {l}"
                    );
                    assert!(v["level"].as_str().is_some(), "{name}: {l}");
                }
            }
        }
    }
    assert_eq!(runs, 24);
}

/// What the bill counts is what the functions print: the distinct custom metrics across all four
/// functions (namespace, name and dimensions, as CloudWatch bills them) are the model's, at most
/// six, and the bytes an idle invocation logs at the default level are the model's within a fifth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bill_counts_the_metrics_and_log_bytes_the_functions_print() {
    let local = tickwork_tests::Local::new().await;
    let prefix = provisioned(&local).await;
    let bucket = tickwork_tests::unique("bill").to_lowercase();
    archiver::s3_client(&local.sdk).create_bucket().bucket(&bucket).send().await.unwrap();
    let now = jiff::Timestamp::now().as_millisecond();
    // Two idle ticks a minute apart: the first puts state in place, the second is counted.
    let events = [
        tickwork_lambda::Tick::envelope(now - 60_000, false).to_string(),
        tickwork_lambda::Tick::envelope(now, false).to_string(),
    ];
    let mut metrics = BTreeSet::new();
    for (name, bin, _) in functions() {
        let env = base_env(&local, &prefix, "INFO", &bucket);
        // The deadline of a 60 s function, the shortest the template gives any of them.
        let run = lambda_standin::run(bin.as_ref(), &env, &events, Duration::from_secs(60)).await.unwrap();
        for inv in &run.invocations {
            assert!(inv.ok, "{name}: {}", inv.body);
            for l in inv.stdout.iter().filter(|l| kept(l, "INFO")) {
                let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
                let cw = &v["_aws"]["CloudWatchMetrics"][0];
                for m in metrics_of(&v) {
                    metrics.insert((cw["Namespace"].to_string(), m, cw["Dimensions"].to_string()));
                }
            }
        }
        let idle = &run.invocations[1];
        // Each line as CloudWatch Logs stores it, with its newline.
        let bytes: u64 = idle.stdout.iter().filter(|l| kept(l, "INFO")).map(|l| l.len() as u64 + 1).sum();
        let model = tickctl::bill::log_bytes_per_invocation(name);
        println!("{name}: an idle invocation logs {bytes} B (model {model} B)");
        assert!(
            (bytes as f64 - model as f64).abs() <= 0.2 * model as f64,
            "{name}: an idle invocation logs {bytes} B, the bill counts {model} B"
        );
    }
    println!("custom metrics: {metrics:?}");
    assert_eq!(metrics.len(), tickctl::bill::custom_metrics(), "{metrics:?}");
    assert!(metrics.len() <= 6);
}
