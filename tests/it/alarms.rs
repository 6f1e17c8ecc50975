//! Which alarm fires: the template's alarms, evaluated as CloudWatch does, over the metrics the
//! real pulse-sweep binary emits (its EMF lines, behind the Runtime API stand-in) and the ones
//! Lambda itself reports for it (`Invocations`, and `Errors` for each invocation that failed).
//!
//! CloudWatch's evaluation (User Guide, "Evaluating an alarm"): the last `EvaluationPeriods`
//! periods, each reduced to one datapoint by the statistic; the alarm is in ALARM when at least
//! `DatapointsToAlarm` of them breach; a period with no data counts as breaching or not as
//! `TreatMissingData` says (`missing`/`ignore`: it does not count either way).
//!
//! Each invocation's datapoints are placed at its event's time: on AWS each scheduled invocation
//! runs at (about) its event time, and here two hours of quarter-hour ticks run in a second.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::Value;
use serde_yaml_ng::Value as Yaml;

use crate::logs::{base_env, provisioned};

/// A metric's identity: namespace, name, dimensions (`FunctionName` by the template's logical id).
type MetricId = (String, String, BTreeMap<String, String>);

#[derive(Debug, Default)]
struct Store(BTreeMap<MetricId, Vec<(i64, f64)>>);

impl Store {
    fn put(&mut self, ns: &str, name: &str, dims: &[(&str, &str)], at: i64, v: f64) {
        let d = dims.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.0.entry((ns.to_string(), name.to_string(), d)).or_default().push((at, v));
    }
}

#[derive(Debug)]
struct Alarm {
    name: String,
    ns: String,
    metric: String,
    dims: BTreeMap<String, String>,
    stat: String,
    period_s: i64,
    periods: usize,
    to_alarm: usize,
    op: String,
    threshold: f64,
    missing: String,
}

fn s(v: &Yaml) -> String {
    match v {
        Yaml::Tagged(t) => s(&t.value),
        Yaml::String(x) => x.clone(),
        Yaml::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

fn alarms(t: &Yaml) -> Vec<Alarm> {
    let params = t["Parameters"].as_mapping().unwrap();
    let param = |v: &Yaml| -> String {
        match v {
            Yaml::Tagged(tag) if tag.tag == "!Ref" => s(&params[s(&tag.value).as_str()]["Default"]),
            other => s(other),
        }
    };
    let mut out = Vec::new();
    for (name, r) in t["Resources"].as_mapping().unwrap() {
        let p = &r["Properties"];
        if s(&r["Type"]) != "AWS::CloudWatch::Alarm" || p.get("Metrics").is_some() {
            continue; // the metric-math throttle alarms read AWS/DynamoDB only, not exercised here
        }
        let dims =
            p["Dimensions"].as_sequence().into_iter().flatten().map(|d| (s(&d["Name"]), s(&d["Value"]))).collect();
        let periods: usize = param(&p["EvaluationPeriods"]).parse().unwrap();
        out.push(Alarm {
            name: s(name),
            ns: s(&p["Namespace"]).replace("${AWS::StackName}", "test"),
            metric: s(&p["MetricName"]),
            dims,
            stat: s(&p["Statistic"]),
            period_s: param(&p["Period"]).parse().unwrap(),
            periods,
            to_alarm: p.get("DatapointsToAlarm").map(|v| param(v).parse().unwrap()).unwrap_or(periods),
            op: s(&p["ComparisonOperator"]),
            threshold: param(&p["Threshold"]).parse().unwrap(),
            missing: s(&p["TreatMissingData"]),
        });
    }
    out
}

/// ALARM or not at `now`.
fn in_alarm(a: &Alarm, store: &Store, now: i64) -> bool {
    let id = (a.ns.clone(), a.metric.clone(), a.dims.clone());
    let points = store.0.get(&id).cloned().unwrap_or_default();
    let mut breaching = 0;
    for i in 0..a.periods as i64 {
        let (from, to) = (now - (i + 1) * a.period_s * 1000, now - i * a.period_s * 1000);
        let vals: Vec<f64> = points.iter().filter(|(t, _)| *t >= from && *t < to).map(|(_, v)| *v).collect();
        let datapoint = if vals.is_empty() {
            None
        } else {
            Some(match a.stat.as_str() {
                "Sum" => vals.iter().sum(),
                "Maximum" => vals.iter().copied().fold(f64::MIN, f64::max),
                "Minimum" => vals.iter().copied().fold(f64::MAX, f64::min),
                "Average" => vals.iter().sum::<f64>() / vals.len() as f64,
                other => panic!("statistic {other}"),
            })
        };
        let breach = match datapoint {
            Some(v) => match a.op.as_str() {
                "GreaterThanOrEqualToThreshold" => v >= a.threshold,
                "GreaterThanThreshold" => v > a.threshold,
                "LessThanThreshold" => v < a.threshold,
                "LessThanOrEqualToThreshold" => v <= a.threshold,
                other => panic!("operator {other}"),
            },
            None => a.missing == "breaching",
        };
        breaching += usize::from(breach);
    }
    breaching >= a.to_alarm
}

/// Runs the sweep binary once per quarter-hour tick (its schedule) over the last `ticks` ticks
/// and records what CloudWatch would hold.
async fn sweep_ticks(env: &[(String, String)], now: i64, ticks: i64, store: &mut Store) {
    let times: Vec<i64> = (1..=ticks).rev().map(|m| now - m * 900_000).collect();
    let events: Vec<String> = times.iter().map(|t| tickwork_lambda::Tick::envelope(*t, false).to_string()).collect();
    let bin = env!("CARGO_BIN_EXE_lambda-pulse-sweep");
    let run = lambda_standin::run(bin.as_ref(), env, &events, Duration::from_secs(30)).await.unwrap();
    for (inv, at) in run.invocations.iter().zip(&times) {
        let fname = [("FunctionName", "PulseSweepFunction")];
        store.put("AWS/Lambda", "Invocations", &fname, *at, 1.0);
        store.put("AWS/Lambda", "Errors", &fname, *at, if inv.ok { 0.0 } else { 1.0 });
        for l in &inv.stdout {
            let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
            let Some(metrics) = v["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array() else { continue };
            let ns = v["_aws"]["CloudWatchMetrics"][0]["Namespace"].as_str().unwrap();
            assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"], serde_json::json!([[]]), "no dimensions");
            for m in metrics {
                let name = m["Name"].as_str().unwrap();
                store.put(ns, name, &[], *at, v[name].as_f64().unwrap());
            }
        }
    }
}

fn firing(alarms: &[Alarm], store: &Store, now: i64) -> BTreeSet<String> {
    alarms
        .iter()
        // The other functions did not run in these scenarios: their own alarms are not judged.
        .filter(|a| a.dims.get("FunctionName").is_none_or(|f| f == "PulseSweepFunction"))
        .filter(|a| !a.dims.contains_key("QueueName"))
        .filter(|a| in_alarm(a, store, now))
        .map(|a| a.name.clone())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_a_paused_and_a_stopped_sweep_each_fire_their_alarm() {
    let t: Yaml = serde_yaml_ng::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml")).unwrap(),
    )
    .unwrap();
    let alarms = alarms(&t);
    assert_eq!(alarms.len(), tickctl::bill::Stack::default().single_metric_alarms as usize, "every alarm judged here");
    let local = tickwork_tests::Local::new().await;
    let prefix = provisioned(&local).await;
    let now = jiff::Timestamp::now().as_millisecond();
    let env = |extra: &[(&str, &str)]| {
        let mut e = base_env(&local, &prefix, "INFO", "unused");
        e.push(("TICKWORK_FUNCTION_TIMEOUT_SECS".into(), "45".into()));
        e.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        e
    };
    let mut report = Vec::new();

    // A healthy sweep (idle ticks): nothing fires.
    let mut store = Store::default();
    sweep_ticks(&env(&[]), now, 8, &mut store).await;
    let healthy = firing(&alarms, &store, now);
    report.push(("healthy", healthy.clone()));
    assert_eq!(healthy, set(&[]), "a healthy sweep");

    // A sweep that fails every tick: its control table is missing.
    let mut store = Store::default();
    sweep_ticks(&env(&[("TICKWORK_CONTROL_TABLE", "no-such-table")]), now, 8, &mut store).await;
    let failing = firing(&alarms, &store, now);
    report.push(("failing every tick", failing.clone()));
    assert_eq!(failing, set(&["PulseSweepErrorsAlarm", "WatermarkLagAlarm"]), "a failing sweep");

    // A paused sweep.
    tickwork::watermark::Watermarks::new(local.db.clone(), format!("{prefix}-control"), local.clock())
        .set_paused("pulse-sweep", true, Some("test"))
        .await
        .unwrap();
    let mut store = Store::default();
    sweep_ticks(&env(&[]), now, 8, &mut store).await;
    let paused = firing(&alarms, &store, now);
    report.push(("paused", paused.clone()));
    assert_eq!(paused, set(&["PausedAlarm"]), "a paused sweep");

    // A stopped schedule: no invocation, no line.
    let stopped = firing(&alarms, &Store::default(), now);
    report.push(("stopped schedule", stopped.clone()));
    assert_eq!(stopped, set(&["PulseSweepStoppedAlarm", "WatermarkLagAlarm"]), "a stopped sweep");
    for (scenario, names) in report {
        println!("{scenario:>20}: {names:?}");
    }
}
