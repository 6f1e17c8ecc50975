//! The capacity meter: what each job costs, per table, index and operation.
//!
//! Why: the failures this project exists to prevent were found "from the bill, not from a slow
//! endpoint". Every DynamoDB call goes through [`crate::db::Db`], which records here the requests,
//! the items read and written and the capacity units. Each invocation ends with
//! [`Meter::invocation_line`]: one CloudWatch Embedded Metric Format line per table/index/operation (CloudWatch
//! turns them into metrics without any API call) and one summary line.
//!
//! Units come from the server's `ConsumedCapacity` when [`CapacitySource::Server`] (AWS), and from
//! [`crate::capacity`]'s rules when [`CapacitySource::Estimate`] (local servers, whose figures are
//! placeholders).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Where capacity figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapacitySource {
    /// The server's `ConsumedCapacity` (real DynamoDB).
    #[default]
    Server,
    /// Estimated from item sizes by DynamoDB's documented rules (local servers).
    Estimate,
}

impl std::str::FromStr for CapacitySource {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "server" => Ok(Self::Server),
            "estimate" => Ok(Self::Estimate),
            other => Err(format!("`{other}` is not a capacity source (expected `server` or `estimate`)")),
        }
    }
}

/// What a figure is grouped by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MeterKey {
    /// Table name.
    pub table: String,
    /// GSI name when the cost is the index's (a Query on it, or an index write).
    pub index: Option<String>,
    /// DynamoDB operation name (`GetItem`, `Query`, ...).
    pub op: String,
}

/// Running totals for one [`MeterKey`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    /// Requests sent (including failed conditional writes, which DynamoDB bills).
    pub requests: u64,
    /// Requests that ended in an error other than a failed condition.
    pub errors: u64,
    /// Items the key condition matched (billed), whatever was returned.
    pub items_read: u64,
    /// Items written or deleted.
    pub items_written: u64,
    /// Read capacity units.
    pub rcu: f64,
    /// Write capacity units.
    pub wcu: f64,
}

impl Tally {
    /// Adds another tally into this one.
    pub fn add(&mut self, o: &Tally) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.items_read += o.items_read;
        self.items_written += o.items_written;
        self.rcu += o.rcu;
        self.wcu += o.wcu;
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "requests={} items_read={} items_written={} rcu={} wcu={}",
            self.requests, self.items_read, self.items_written, self.rcu, self.wcu
        )
    }
}

/// Thread-safe per-key totals. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Meter {
    inner: Arc<Mutex<BTreeMap<MeterKey, Tally>>>,
    source: CapacitySource,
}

impl Meter {
    /// A meter whose units come from `source`.
    pub fn new(source: CapacitySource) -> Self {
        Self { inner: Default::default(), source }
    }

    /// Where this meter's units come from.
    pub fn source(&self) -> CapacitySource {
        self.source
    }

    /// Adds one observation.
    pub fn record(&self, table: &str, index: Option<&str>, op: &str, t: Tally) {
        let key = MeterKey { table: table.to_string(), index: index.map(str::to_string), op: op.to_string() };
        self.inner.lock().expect("meter lock").entry(key).or_default().add(&t);
    }

    /// A copy of every total so far.
    pub fn snapshot(&self) -> BTreeMap<MeterKey, Tally> {
        self.inner.lock().expect("meter lock").clone()
    }

    /// Everything summed.
    pub fn total(&self) -> Tally {
        let mut t = Tally::default();
        for v in self.inner.lock().expect("meter lock").values() {
            t.add(v);
        }
        t
    }

    /// Totals for one operation across tables and indexes.
    pub fn op(&self, op: &str) -> Tally {
        let mut t = Tally::default();
        for (k, v) in self.inner.lock().expect("meter lock").iter() {
            if k.op == op {
                t.add(v);
            }
        }
        t
    }

    /// Read requests (Get, BatchGet, Query, Scan, TransactGet) and write requests, summed.
    pub fn read_write_requests(&self) -> (u64, u64) {
        let mut r = 0;
        let mut w = 0;
        for (k, v) in self.inner.lock().expect("meter lock").iter() {
            if k.index.is_some() && is_write(&k.op) {
                continue; // index writes ride on a base-table request
            }
            if is_read(&k.op) {
                r += v.requests;
            } else if is_write(&k.op) {
                w += v.requests;
            }
        }
        (r, w)
    }

    /// Requests per operation across tables, index writes excluded (they ride on a base-table
    /// request): the counts the cost model predicts.
    pub fn requests_by_op(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for (k, v) in self.inner.lock().expect("meter lock").iter() {
            if k.index.is_some() && is_write(&k.op) {
                continue;
            }
            *m.entry(k.op.clone()).or_default() += v.requests;
        }
        m
    }

    /// Clears all totals (start of an invocation when the meter is reused).
    pub fn reset(&self) {
        self.inner.lock().expect("meter lock").clear();
    }

    /// Every (table, index, operation) total, as the `calls` property of an invocation line.
    pub fn calls_json(&self) -> Vec<serde_json::Value> {
        self.snapshot()
            .into_iter()
            .map(|(k, t)| {
                serde_json::json!({
                    "table": k.table, "index": k.index, "op": k.op,
                    "requests": t.requests, "errors": t.errors, "items_read": t.items_read,
                    "items_written": t.items_written, "rcu": t.rcu, "wcu": t.wcu,
                })
            })
            .collect()
    }

    /// The one line an invocation prints: see [`InvocationLine`].
    pub fn invocation_line(&self, namespace: &str, timestamp_ms: i64, level: &str, line: &InvocationLine) -> String {
        let t = self.total();
        let (r, w) = self.read_write_requests();
        let mut v = serde_json::json!({
            "timestamp": rfc3339(timestamp_ms),
            "level": level,
            "message": INVOCATION_MESSAGE,
            "job": line.job,
            "outcome": line.outcome,
            "_aws": {
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{
                    "Namespace": namespace,
                    // No dimensions: each metric name is one metric per stack (the namespace
                    // carries the stack). A `Job` dimension would multiply the bill by the jobs.
                    "Dimensions": [[]],
                    "Metrics": line.metrics.iter().map(|(n, _)| serde_json::json!({"Name": n, "Unit": "Count"})).collect::<Vec<_>>(),
                }]
            },
            "read_requests": r,
            "write_requests": w,
            "requests": t.requests,
            "errors": t.errors,
            "rcu": t.rcu,
            "wcu": t.wcu,
            "source": self.source,
            "calls": self.calls_json(),
        });
        for (name, value) in &line.metrics {
            v[*name] = serde_json::json!(value);
        }
        if let Some(e) = &line.error {
            v["error"] = serde_json::json!(e);
        }
        for (k, x) in &line.props {
            v[k.as_str()] = x.clone();
        }
        v.to_string()
    }
}

/// The `message` of every invocation line; how `tickctl audit` tells ours from other lines.
pub const INVOCATION_MESSAGE: &str = "tickwork invocation";

/// Every custom metric the stack publishes. CloudWatch bills each distinct metric name and set of
/// dimension values every month ("each unique combination of dimensions \[is\] a separate metric",
/// CloudWatch concepts), so the set is closed and small, each metric is something an alarm
/// watches, and everything else (per-table, per-operation, per-grain detail) travels as
/// properties of the same line, readable by `tickctl audit` and Logs Insights at no metric cost.
pub const METRICS: [&str; 5] = [
    // 1 when a tick found its job paused (every job): the paused alarm.
    "Paused",
    // Zone groups still due after the tick (pulse sweep): the watermark-lag alarm.
    "GroupsDue",
    // Units of work failed for good: isolated as bad and skipped (tenants, zones; sweep and
    // fan-out), or dead-lettered (queue items; worker). One metric and one alarm: both ask an
    // operator to look at `tickctl status`, and each metric is billed every month.
    "FailedUnits",
    // Shards left for the next tick (archiver, fan-out): the backlog alarm.
    "ShardsLeft",
    // Seconds the oldest ready queue item a drain's polls saw had been waiting (worker): how far
    // behind the handlers are, the queue-lag alarm.
    "QueueLag",
];

/// What one invocation reports beside the meter's totals.
#[derive(Debug, Clone, Default)]
pub struct InvocationLine {
    /// Job name.
    pub job: String,
    /// How the invocation ended (`idle`, `completed`, `failed`, ...).
    pub outcome: String,
    /// Metric values; names must be in [`METRICS`].
    pub metrics: Vec<(&'static str, f64)>,
    /// Job details (pulses by grain, tenants, cutoff...): properties, not metrics.
    pub props: serde_json::Map<String, serde_json::Value>,
    /// The error, when the invocation failed.
    pub error: Option<String>,
}

/// An RFC 3339 timestamp (UTC, milliseconds), as Lambda's log filter requires.
pub fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| format!("{t:.3}"))
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".into())
}

/// Operations that read.
pub fn is_read(op: &str) -> bool {
    matches!(op, "GetItem" | "BatchGetItem" | "Query" | "Scan" | "TransactGetItems")
}

/// Operations that write.
pub fn is_write(op: &str) -> bool {
    matches!(op, "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invocation_line_is_emf_with_level_and_timestamp() {
        let m = Meter::new(CapacitySource::Estimate);
        m.record("t", None, "GetItem", Tally { requests: 1, items_read: 1, rcu: 0.5, ..Default::default() });
        m.record("t", Some("g"), "Query", Tally { requests: 2, items_read: 7, rcu: 1.5, ..Default::default() });
        m.record("u", None, "PutItem", Tally { requests: 1, items_written: 1, wcu: 3.0, ..Default::default() });
        let line = InvocationLine {
            job: "queue-worker".into(),
            outcome: "completed".into(),
            metrics: vec![("FailedUnits", 2.0), ("Paused", 0.0)],
            ..Default::default()
        };
        let v: serde_json::Value =
            serde_json::from_str(&m.invocation_line("tickwork/dev", 1_795_910_400_000, "WARN", &line)).unwrap();
        assert_eq!(v["timestamp"], "2026-11-29T00:00:00.000Z");
        assert_eq!(v["level"], "WARN");
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!((cw["Namespace"].as_str(), cw["Dimensions"].to_string()), (Some("tickwork/dev"), "[[]]".into()));
        assert_eq!(cw["Metrics"][0]["Name"], "FailedUnits");
        assert_eq!((v["FailedUnits"].as_f64(), v["Paused"].as_f64()), (Some(2.0), Some(0.0)));
        // The detail adds up to the totals.
        let calls = v["calls"].as_array().unwrap();
        assert_eq!(calls.len(), 3);
        let sum = |k: &str| calls.iter().map(|c| c[k].as_f64().unwrap()).sum::<f64>();
        assert_eq!((sum("requests"), sum("rcu"), sum("wcu")), (4.0, 2.0, 3.0));
        assert_eq!((v["read_requests"].as_u64(), v["write_requests"].as_u64()), (Some(3), Some(1)));
    }

    #[test]
    fn every_declared_metric_is_one_of_the_closed_set() {
        // The alarms and the cost model count on METRICS being all there is.
        assert!(METRICS.len() <= 6);
        let mut m = METRICS.to_vec();
        m.sort();
        m.dedup();
        assert_eq!(m.len(), METRICS.len());
    }
}
