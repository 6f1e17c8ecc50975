//! The capacity meter: what each job costs, per table, index and operation.
//!
//! Why: the failures this project exists to prevent were found "from the bill, not from a slow
//! endpoint". Every DynamoDB call goes through [`crate::db::Db`], which records here the requests,
//! the items read and written and the capacity units. Each invocation ends with
//! [`Meter::emit`]: one CloudWatch Embedded Metric Format line per table/index/operation (CloudWatch
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

    /// The Embedded Metric Format lines for everything recorded, one per key.
    ///
    /// `job` becomes a dimension so a dashboard can show the bill per job.
    pub fn emf_lines(&self, namespace: &str, job: &str, timestamp_ms: i64) -> Vec<String> {
        self.snapshot()
            .into_iter()
            .map(|(k, t)| {
                serde_json::json!({
                    "_aws": {
                        "Timestamp": timestamp_ms,
                        "CloudWatchMetrics": [{
                            "Namespace": namespace,
                            "Dimensions": [["Job", "Table", "Index", "Operation"], ["Job"]],
                            "Metrics": [
                                {"Name": "Requests", "Unit": "Count"},
                                {"Name": "Errors", "Unit": "Count"},
                                {"Name": "ItemsRead", "Unit": "Count"},
                                {"Name": "ItemsWritten", "Unit": "Count"},
                                {"Name": "ReadCapacityUnits", "Unit": "Count"},
                                {"Name": "WriteCapacityUnits", "Unit": "Count"}
                            ]
                        }]
                    },
                    "Job": job,
                    "Table": k.table,
                    "Index": k.index.unwrap_or_else(|| "-".into()),
                    "Operation": k.op,
                    "CapacitySource": self.source,
                    "Requests": t.requests,
                    "Errors": t.errors,
                    "ItemsRead": t.items_read,
                    "ItemsWritten": t.items_written,
                    "ReadCapacityUnits": t.rcu,
                    "WriteCapacityUnits": t.wcu,
                })
                .to_string()
            })
            .collect()
    }

    /// Prints the EMF lines and a one-line summary to stdout, where Lambda ships them to
    /// CloudWatch Logs (EMF must be a whole line of its own, not inside a tracing record).
    pub fn emit(&self, namespace: &str, job: &str, timestamp_ms: i64) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for line in self.emf_lines(namespace, job, timestamp_ms) {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "{}", self.summary_line(job));
    }

    /// The one-line summary of an invocation (`tickctl audit` counts invocations by it).
    pub fn summary_line(&self, job: &str) -> String {
        let t = self.total();
        let (r, w) = self.read_write_requests();
        format!("tickwork summary job={job} read_requests={r} write_requests={w} {t} source={:?}", self.source)
    }
}

/// One EMF line of job-level counts (pulses, dead letters, backlog): what the template's alarms
/// and dashboard read, beside the per-table capacity lines of [`Meter::emf_lines`].
pub fn job_metrics_line(namespace: &str, job: &str, timestamp_ms: i64, counts: &[(&str, f64)]) -> String {
    let mut v = serde_json::json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [["Job"]],
                "Metrics": counts.iter().map(|(n, _)| serde_json::json!({"Name": n, "Unit": "Count"})).collect::<Vec<_>>()
            }]
        },
        "Job": job,
    });
    for (name, value) in counts {
        v[*name] = serde_json::json!(value);
    }
    v.to_string()
}

/// Prints [`job_metrics_line`] to stdout (a whole line, as EMF requires).
pub fn emit_job_metrics(namespace: &str, job: &str, timestamp_ms: i64, counts: &[(&str, f64)]) {
    println!("{}", job_metrics_line(namespace, job, timestamp_ms, counts));
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
    fn job_metrics_line_is_emf() {
        let l = job_metrics_line("tickwork", "queue-worker", 7, &[("DeadLettered", 2.0), ("Finished", 5.0)]);
        let v: serde_json::Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], "DeadLettered");
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0][0], "Job");
        assert_eq!(
            (v["Job"].as_str(), v["DeadLettered"].as_f64(), v["Finished"].as_f64()),
            (Some("queue-worker"), Some(2.0), Some(5.0))
        );
    }

    #[test]
    fn emf_lines_add_up_to_totals() {
        let m = Meter::new(CapacitySource::Estimate);
        m.record("t", None, "GetItem", Tally { requests: 1, items_read: 1, rcu: 0.5, ..Default::default() });
        m.record("t", None, "GetItem", Tally { requests: 1, items_read: 0, rcu: 0.5, ..Default::default() });
        m.record("t", Some("g"), "Query", Tally { requests: 2, items_read: 7, rcu: 1.5, ..Default::default() });
        m.record("u", None, "PutItem", Tally { requests: 1, items_written: 1, wcu: 3.0, ..Default::default() });
        let lines = m.emf_lines("tickwork", "job", 1);
        assert_eq!(lines.len(), 3);
        let (mut req, mut rcu, mut wcu, mut items) = (0u64, 0f64, 0f64, 0u64);
        for l in &lines {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "tickwork");
            req += v["Requests"].as_u64().unwrap();
            rcu += v["ReadCapacityUnits"].as_f64().unwrap();
            wcu += v["WriteCapacityUnits"].as_f64().unwrap();
            items += v["ItemsRead"].as_u64().unwrap();
        }
        let t = m.total();
        assert_eq!((req, rcu, wcu, items), (t.requests, t.rcu, t.wcu, t.items_read));
        assert_eq!((req, rcu, wcu), (5, 2.5, 3.0));
        assert_eq!(m.read_write_requests(), (4, 1));
    }
}
