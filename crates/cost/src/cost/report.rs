//! The model's answer: requests and units per job, operation and table.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cost::calls::Calls;

/// Requests one job makes, per operation, and the units they cost.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JobCost {
    /// Job.
    pub job: String,
    /// Requests per DynamoDB operation.
    pub ops: BTreeMap<String, u64>,
    /// Read requests.
    pub reads: u64,
    /// Write requests.
    pub writes: u64,
    /// Read capacity units.
    pub rcu: f64,
    /// Write capacity units.
    pub wcu: f64,
    /// Invocations.
    pub invocations: u64,
    /// Units per table (`queue`, `queue/ready` for an index): (RCU, WCU).
    pub tables: BTreeMap<String, (f64, f64)>,
}

impl JobCost {
    pub(crate) fn new(job: &str) -> Self {
        Self { job: job.into(), ..Default::default() }
    }

    /// `n` requests of `op` on `table`, each costing `units` (RCU for a read, WCU for a write).
    pub(crate) fn add_on(&mut self, table: &str, op: &str, n: u64, units: f64) {
        if n == 0 {
            return;
        }
        *self.ops.entry(op.into()).or_default() += n;
        let e = self.tables.entry(table.into()).or_default();
        if tickwork::meter::is_read(op) {
            self.reads += n;
            self.rcu += units * n as f64;
            e.0 += units * n as f64;
        } else {
            self.writes += n;
            self.wcu += units * n as f64;
            e.1 += units * n as f64;
        }
    }

    /// Write units an index bills for writes already counted as requests on its table.
    pub(crate) fn add_index_units(&mut self, index: &str, wcu: f64) {
        self.wcu += wcu;
        self.tables.entry(index.into()).or_default().1 += wcu;
    }

    pub(crate) fn add_calls(&mut self, calls: &[Calls]) {
        for c in calls {
            self.add_on(c.table, c.op, c.n, c.units);
        }
    }

    /// Requests of every kind.
    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }
}

/// The model's answer.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    /// Simulated days the input spans.
    pub days: f64,
    /// tickwork's jobs.
    pub jobs: Vec<JobCost>,
    /// The `000_*` "before" sweep under the same input.
    pub before: JobCost,
    /// Pulses per grain the sweep would write.
    pub pulses: BTreeMap<String, u64>,
}

impl CostReport {
    /// Every tickwork job together.
    pub fn total(&self) -> JobCost {
        let mut t = JobCost::new("total");
        for j in &self.jobs {
            for (op, n) in &j.ops {
                *t.ops.entry(op.clone()).or_default() += n;
            }
            t.reads += j.reads;
            t.writes += j.writes;
            t.rcu += j.rcu;
            t.wcu += j.wcu;
            t.invocations += j.invocations;
            for (k, (r, w)) in &j.tables {
                let e = t.tables.entry(k.clone()).or_default();
                e.0 += r;
                e.1 += w;
            }
        }
        t
    }

    /// The job named `job`.
    pub fn job(&self, job: &str) -> Option<&JobCost> {
        self.jobs.iter().find(|j| j.job == job)
    }
}
