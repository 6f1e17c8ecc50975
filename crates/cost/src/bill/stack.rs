//! The deployed stack as the bill sees it: what `template.yaml` declares, the metrics and log
//! bytes the functions emit, and the run time modelled per invocation.

use serde::Serialize;

/// What the deployed stack is, as `template.yaml` has it (`tests/it/template.rs` reads the
/// template and checks every field).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stack {
    /// `MemorySize` of every function (MB).
    pub memory_mb: u32,
    /// Alarms reading one metric.
    pub single_metric_alarms: u32,
    /// Metric-math alarms and the metrics each reads (the throttle alarms: read + write events of
    /// 10 tables and indexes, off unless `ThrottleAlarms=true`).
    pub math_alarms: (u32, u32),
    /// The dashboard (`CreateDashboard`, off by default).
    pub dashboard: bool,
    /// Log retention (`LogRetentionDays`).
    pub log_retention_days: u32,
}

impl Default for Stack {
    fn default() -> Self {
        Stack {
            memory_mb: 256,
            single_metric_alarms: 15,
            math_alarms: (0, 2),
            dashboard: false,
            log_retention_days: 30,
        }
    }
}

/// Custom metrics the stack publishes: [`tickwork::meter::METRICS`], no dimensions, one namespace
/// per stack (a test counts them in the functions' real output).
pub fn custom_metrics() -> usize {
    tickwork::meter::METRICS.len()
}

/// Bytes of log a function prints per invocation at the default `INFO` level: the metrics line
/// (EMF with its per-table detail) and the report line, as counted from the release-shaped
/// binaries' output (a test runs them and checks these within a fifth), plus the platform's
/// START/END/REPORT lines Lambda writes at `SystemLogLevel: WARN` (none).
pub fn log_bytes_per_invocation(function: &str) -> u64 {
    match function {
        "pulse-sweep" => 1_200,
        "tenant-fanout" => 1_250,
        "archiver" => 1_200,
        "queue-worker" => 1_000,
        _ => 1_200,
    }
}

/// Lambda run time per invocation, modelled: a fixed part (the runtime's loop, the metrics line)
/// and a part per DynamoDB request (a round trip in the same region). An assumption, named here,
/// not a measurement: Lambda bills duration in 1 ms steps.
pub const BASE_MS: f64 = 20.0;
/// See [`BASE_MS`].
pub const PER_REQUEST_MS: f64 = 6.0;
