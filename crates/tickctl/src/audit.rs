//! `tickctl audit`: the bill, read back from the jobs' own logs.
//!
//! Why: `000_*` found its problems "from the bill, not from a slow endpoint", weeks late. Every
//! invocation logs one line (`"message": "tickwork invocation"`, an Embedded Metric Format record
//! whose `calls` property holds the requests, items and units per table/index/operation, and whose
//! `read_requests`/`write_requests` sum them); this reads any log export of them
//! (CloudWatch `aws logs tail`/`filter-log-events` output, a Lambda's stdout, `make run`'s output),
//! adds them up per job, table and operation, and flags the two tells of `000_*`:
//!
//! - **bookkeeping outweighing the data**: more read capacity on the bookkeeping table (control:
//!   leases, watermarks, cursors, checkpoints) than on the data tables (tenants, queue, summaries,
//!   change feed), over every job in the log together — audit all the functions' logs at once, a
//!   single job's log may book no data at all;
//! - **an idle tick that reads more than expected**: an invocation that wrote nothing but read more
//!   than the job's idle cost (pulse sweep: 1 GetItem; fan-out: 1; queue worker and archiver: one
//!   Query per shard).
//!
//! Lines that are not ours are skipped; a line that looks like ours but does not parse is counted
//! and reported, never silently dropped.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde::Serialize;

/// Totals for one job/table/index/operation.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Line {
    /// Requests.
    pub requests: f64,
    /// Items read.
    pub items_read: f64,
    /// Items written.
    pub items_written: f64,
    /// Read capacity units.
    pub rcu: f64,
    /// Write capacity units.
    pub wcu: f64,
}

impl Line {
    fn add(&mut self, o: &Line) {
        self.requests += o.requests;
        self.items_read += o.items_read;
        self.items_written += o.items_written;
        self.rcu += o.rcu;
        self.wcu += o.wcu;
    }
}

/// One job's invocations as the summary lines tell them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Invocations {
    /// Invocations seen.
    pub count: u64,
    /// Invocations that wrote nothing.
    pub idle: u64,
    /// The most reads an idle invocation made.
    pub idle_reads_max: u64,
    /// Idle invocations that read more than the job's idle cost.
    pub idle_over: u64,
    /// The idle cost used.
    pub idle_expected: u64,
}

/// A flagged finding.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// Job.
    pub job: String,
    /// What is wrong, in words.
    pub message: String,
}

/// What `audit` reports.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Audit {
    /// Per job → "table[/index] operation" → totals.
    pub capacity: BTreeMap<String, BTreeMap<String, Line>>,
    /// Per job.
    pub invocations: BTreeMap<String, Invocations>,
    /// Job-level counts summed (pulses, dead letters, …) per job.
    pub counts: BTreeMap<String, BTreeMap<String, f64>>,
    /// The tells.
    pub findings: Vec<Finding>,
    /// Lines read.
    pub lines: u64,
    /// Lines that looked like ours and did not parse.
    pub unreadable: u64,
}

/// How to judge.
#[derive(Debug, Clone)]
pub struct Rules {
    /// Tables that are bookkeeping (by name): a name ending in one of these.
    pub bookkeeping_suffixes: Vec<String>,
    /// Idle reads expected per job (a job not listed: 1).
    pub idle_reads: BTreeMap<String, u64>,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            bookkeeping_suffixes: vec!["control".into()],
            idle_reads: BTreeMap::from([("queue-worker".into(), 8), ("archiver".into(), 8)]),
        }
    }
}

/// Reads every line of `input`; `progress` is called with the bytes read so far.
pub fn audit(input: impl BufRead, rules: &Rules, mut progress: impl FnMut(u64)) -> std::io::Result<Audit> {
    let mut a = Audit::default();
    let mut bytes = 0u64;
    for line in input.lines() {
        let line = line?;
        bytes += line.len() as u64 + 1;
        a.lines += 1;
        if a.lines % 4096 == 0 {
            progress(bytes);
        }
        if !line.contains(tickwork::meter::INVOCATION_MESSAGE) {
            continue;
        }
        let Some(start) = line.find('{') else {
            a.unreadable += 1;
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line[start..]) else {
            a.unreadable += 1;
            continue;
        };
        let (Some(job), Some(reads), Some(writes)) =
            (v["job"].as_str(), v["read_requests"].as_u64(), v["write_requests"].as_u64())
        else {
            a.unreadable += 1;
            continue;
        };
        let inv = a.invocations.entry(job.to_string()).or_default();
        inv.idle_expected = rules.idle_reads.get(job).copied().unwrap_or(1);
        inv.count += 1;
        if writes == 0 {
            inv.idle += 1;
            inv.idle_reads_max = inv.idle_reads_max.max(reads);
            if reads > inv.idle_expected {
                inv.idle_over += 1;
            }
        }
        for c in v["calls"].as_array().into_iter().flatten() {
            let (Some(table), Some(op)) = (c["table"].as_str(), c["op"].as_str()) else { continue };
            let key = match c["index"].as_str() {
                Some(i) => format!("{table}/{i} {op}"),
                None => format!("{table} {op}"),
            };
            let num = |k: &str| c[k].as_f64().unwrap_or(0.0);
            let l = Line {
                requests: num("requests"),
                items_read: num("items_read"),
                items_written: num("items_written"),
                rcu: num("rcu"),
                wcu: num("wcu"),
            };
            a.capacity.entry(job.to_string()).or_default().entry(key).or_default().add(&l);
        }
        // The metrics the line declares, summed per job.
        let names: Vec<String> = v["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .map(|m| m.iter().filter_map(|x| x["Name"].as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        let counts = a.counts.entry(job.to_string()).or_default();
        for n in names {
            *counts.entry(n.clone()).or_default() += v[&n].as_f64().unwrap_or(0.0);
        }
    }
    progress(bytes);
    a.findings = findings(&a, rules);
    Ok(a)
}

fn is_bookkeeping(key: &str, rules: &Rules) -> bool {
    let table = key.split([' ', '/']).next().unwrap_or("");
    rules.bookkeeping_suffixes.iter().any(|s| table.ends_with(s.as_str()))
}

fn findings(a: &Audit, rules: &Rules) -> Vec<Finding> {
    let mut out = Vec::new();
    // The 000_* inversion is about read capacity across the account: the scheduler's table
    // carried more than the app's data. Compared over every job in the log together.
    let (mut book, mut data) = (0.0, 0.0);
    let mut heaviest: Option<(&str, f64)> = None;
    for (job, lines) in &a.capacity {
        let mut job_book = 0.0;
        for (k, l) in lines {
            if is_bookkeeping(k, rules) {
                book += l.rcu;
                job_book += l.rcu;
            } else {
                data += l.rcu;
            }
        }
        if heaviest.is_none_or(|(_, r)| job_book > r) {
            heaviest = Some((job, job_book));
        }
    }
    if book > data {
        let (job, r) = heaviest.unwrap_or(("?", 0.0));
        out.push(Finding {
            job: job.to_string(),
            message: format!(
                "bookkeeping outweighs the data it books: {book:.1} RCU on bookkeeping tables vs {data:.1} on data tables \
                 ({job} spent {r:.1} of it)"
            ),
        });
    }
    for (job, inv) in &a.invocations {
        if inv.idle_over > 0 {
            out.push(Finding {
                job: job.clone(),
                message: format!(
                    "{} of {} idle invocations read more than the expected {} (up to {} reads)",
                    inv.idle_over, inv.idle, inv.idle_expected, inv.idle_reads_max
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::meter::{CapacitySource, Meter, Tally};

    fn log_of(meter: &Meter, job: &str) -> String {
        let line = tickwork::meter::InvocationLine { job: job.into(), outcome: "idle".into(), ..Default::default() };
        // As `aws logs tail` prints it: a timestamp and the stream before the JSON.
        format!("2026-11-30T01:00:00 stream {}\n", meter.invocation_line("tickwork", 1, "INFO", &line))
    }

    #[test]
    fn sums_lines_and_flags_the_two_tells() {
        let m = Meter::new(CapacitySource::Estimate);
        let mut log = String::new();
        // A healthy idle tick: one read.
        m.record("x-control", None, "GetItem", Tally { requests: 1, items_read: 1, rcu: 0.5, ..Default::default() });
        log += &log_of(&m, "pulse-sweep");
        // The 000_* tick: 700 reads of bookkeeping items, nothing written.
        m.reset();
        m.record(
            "x-control",
            None,
            "GetItem",
            Tally { requests: 700, items_read: 700, rcu: 350.0, ..Default::default() },
        );
        log += &log_of(&m, "pulse-sweep");
        log += "some other line\n{\"message\": \"tickwork invocation\", broken\n";
        let a = audit(log.as_bytes(), &Rules::default(), |_| {}).unwrap();
        let l = &a.capacity["pulse-sweep"]["x-control GetItem"];
        assert_eq!((l.requests, l.rcu), (701.0, 350.5));
        let inv = &a.invocations["pulse-sweep"];
        assert_eq!((inv.count, inv.idle, inv.idle_over, inv.idle_reads_max), (2, 2, 1, 700));
        assert_eq!(a.unreadable, 1);
        assert_eq!(a.findings.len(), 2, "{:?}", a.findings);
        assert!(a.findings[0].message.contains("bookkeeping outweighs"));
        assert!(a.findings[1].message.contains("1 of 2 idle invocations"));
    }

    #[test]
    fn data_heavier_than_bookkeeping_is_not_flagged() {
        let m = Meter::new(CapacitySource::Estimate);
        m.record("x-control", None, "GetItem", Tally { requests: 1, rcu: 0.5, ..Default::default() });
        m.record("x-queue", Some("ready"), "Query", Tally { requests: 8, rcu: 4.0, ..Default::default() });
        m.record("x-queue", None, "UpdateItem", Tally { requests: 2, wcu: 2.0, ..Default::default() });
        let a = audit(log_of(&m, "queue-worker").as_bytes(), &Rules::default(), |_| {}).unwrap();
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert!(a.capacity["queue-worker"].contains_key("x-queue/ready Query"));
    }
}
