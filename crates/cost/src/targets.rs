//! What delivering units to a target costs, and how many units a call carries (the delivery
//! model's `units_per_call`). Pure.
//!
//! A target is billed per call by its own service, beside the worker's DynamoDB and Lambda:
//! - **a function**: one Invoke per batch of up to `TICKWORK_TARGET_BATCH` units
//!   ([`FUNCTION_BATCH`] by default; Lambda requests),
//!   plus the function's own duration, which is the team's code and priced here only as its
//!   invocations (its duration depends on what it does);
//! - **an SQS queue**: one `SendMessageBatch` per 10 units, each 64 KB chunk of its payload a
//!   request (standard or FIFO price);
//! - **an EventBridge bus**: one event per unit (per 64 KB chunk of it), 10 a `PutEvents`.
//!
//! Free tiers are left out: a bill at scale does not lean on them.

use serde::Serialize;

use crate::bill::Prices;
use queue_worker::targets::envelope::MAX_ENTRIES;
pub use queue_worker::targets::function::FUNCTION_BATCH;

/// 64 KB: the chunk SQS bills as one request and EventBridge as one event.
pub const BILLED_CHUNK_BYTES: f64 = 64.0 * 1024.0;

/// A pulse unit's body as a target receives it, bytes (with a 13-character tenant id and a
/// zone; held to [`queue_worker::targets::envelope::unit_body`] by a test), rounded up.
pub const PULSE_UNIT_BYTES: f64 = 256.0;

/// Where units go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// A handler compiled into the worker.
    Rust,
    /// A Lambda function in any runtime.
    Function,
    /// An SQS standard queue.
    Sqs,
    /// An SQS FIFO queue.
    SqsFifo,
    /// An EventBridge bus.
    Events,
}

impl std::str::FromStr for TargetKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "rust" => TargetKind::Rust,
            "lambda" | "function" => TargetKind::Function,
            "sqs" => TargetKind::Sqs,
            "sqs-fifo" => TargetKind::SqsFifo,
            "events" | "eventbridge" => TargetKind::Events,
            other => return Err(format!("`{other}`: one of rust, lambda, sqs, sqs-fifo, events")),
        })
    }
}

impl TargetKind {
    /// Units one call carries (the worker's batch for the target; `function_batch` for a
    /// function, `TICKWORK_TARGET_BATCH`).
    pub fn units_per_call(self, function_batch: u64) -> u64 {
        match self {
            TargetKind::Rust => 1,
            TargetKind::Function => function_batch.max(1),
            TargetKind::Sqs | TargetKind::SqsFifo | TargetKind::Events => MAX_ENTRIES as u64,
        }
    }

    /// One call's time, ms: a handler in the worker takes `handler_ms` a unit; a function the
    /// round trip and `handler_ms` for each unit it carries, one after another; a queue or a bus
    /// only the round trip (the consumer runs later, outside the worker).
    pub fn call_ms(self, handler_ms: f64, round_trip_ms: f64, function_batch: u64) -> f64 {
        match self {
            TargetKind::Rust => handler_ms,
            TargetKind::Function => round_trip_ms + self.units_per_call(function_batch) as f64 * handler_ms,
            TargetKind::Sqs | TargetKind::SqsFifo | TargetKind::Events => round_trip_ms,
        }
    }
}

/// A month of delivery to a target.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TargetMonth {
    /// Where.
    pub kind: TargetKind,
    /// Units delivered.
    pub units: f64,
    /// Calls made (Invokes, `SendMessageBatch`es, `PutEvents`).
    pub calls: f64,
    /// What the target's service bills: Lambda requests, SQS requests, EventBridge events.
    pub billed: f64,
    /// Dollars.
    pub usd: f64,
}

/// `units` a month of `unit_bytes` each, delivered to `kind` (`function_batch` units an Invoke).
/// Pure.
pub fn month(kind: TargetKind, units: f64, unit_bytes: f64, function_batch: u64, p: &Prices) -> TargetMonth {
    let per_call = kind.units_per_call(function_batch) as f64;
    let calls = (units / per_call).ceil();
    let chunks = |bytes: f64| (bytes / BILLED_CHUNK_BYTES).ceil().max(1.0);
    let (billed, usd) = match kind {
        TargetKind::Rust => (0.0, 0.0),
        TargetKind::Function => (calls, calls * p.lambda_requests_million / 1e6),
        TargetKind::Sqs | TargetKind::SqsFifo => {
            let requests = calls * chunks(per_call * unit_bytes);
            let price = if kind == TargetKind::Sqs { p.sqs_standard_million } else { p.sqs_fifo_million };
            (requests, requests * price / 1e6)
        }
        TargetKind::Events => {
            let events = units * chunks(unit_bytes);
            (events, events * p.events_custom_million / 1e6)
        }
    };
    TargetMonth { kind, units, calls, billed, usd }
}

/// What a million fires' work costs where they are delivered, dollars: a handler in the worker
/// writes one row each (the shipped handlers' summary); a function target is billed its Invokes
/// and writes the same row; a queue or a bus is billed its calls and writes nothing of ours.
/// Pure.
pub fn per_million_fires(kind: TargetKind, function_batch: u64, p: &Prices) -> f64 {
    let write = p.units_usd(0.0, 1e6);
    let calls = month(kind, 1e6, PULSE_UNIT_BYTES, function_batch, p).usd;
    match kind {
        TargetKind::Rust | TargetKind::Function => calls + write,
        TargetKind::Sqs | TargetKind::SqsFifo | TargetKind::Events => calls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_is_billed_per_its_own_call() {
        let p = Prices::default();
        // 36 million units a month (a million tenants' pulses), 300 bytes each.
        let f = month(TargetKind::Function, 36e6, 300.0, 100, &p);
        assert_eq!((f.calls, f.billed), (360_000.0, 360_000.0));
        assert!((f.usd - 0.072).abs() < 1e-9);
        assert_eq!(month(TargetKind::Function, 36e6, 300.0, 10, &p).calls, 3.6e6);
        let q = month(TargetKind::Sqs, 36e6, 300.0, 10, &p);
        assert_eq!(q.calls, 3.6e6);
        assert!((q.usd - 1.44).abs() < 1e-9, "{q:?}");
        assert!((month(TargetKind::SqsFifo, 36e6, 300.0, 10, &p).usd - 1.8).abs() < 1e-9);
        let e = month(TargetKind::Events, 36e6, 300.0, 10, &p);
        assert_eq!((e.calls, e.billed), (3.6e6, 36e6));
        assert!((e.usd - 36.0).abs() < 1e-9);
        // Ten units of 7 KB are 70 KB: two billed requests a batch.
        assert_eq!(month(TargetKind::Sqs, 10.0, 7_000.0, 10, &p).billed, 2.0);
        assert_eq!(month(TargetKind::Rust, 36e6, 300.0, 10, &p).usd, 0.0);
    }

    #[test]
    fn a_pulse_unit_is_about_as_large_as_assumed() {
        let payload =
            r#"{"grain":"month","period":"2026-11","tenant":"tenant-000001","zone":"America/Argentina/Buenos_Aires"}"#;
        let job = tickwork::queue::Job {
            tenant: Some("tenant-000001".into()),
            attempts: 1,
            ..tickwork::queue::Job::unclaimed("pulse#tenant-000001#month#2026-11", "pulse", payload)
        };
        let n = queue_worker::targets::envelope::unit_body(&job).len() as f64;
        assert!(n <= PULSE_UNIT_BYTES && n > PULSE_UNIT_BYTES * 0.6, "{n}");
    }

    #[test]
    fn a_call_carries_its_batch() {
        assert_eq!(TargetKind::Function.call_ms(10.0, 30.0, 100), 1_030.0);
        assert_eq!(TargetKind::Function.call_ms(10.0, 30.0, 10), 130.0);
        assert_eq!(TargetKind::Sqs.call_ms(10.0, 30.0, 10), 30.0);
        assert_eq!(TargetKind::Rust.call_ms(10.0, 30.0, 10), 10.0);
        assert_eq!("sqs-fifo".parse::<TargetKind>(), Ok(TargetKind::SqsFifo));
        assert!("kafka".parse::<TargetKind>().unwrap_err().contains("one of"));
    }

    #[test]
    fn a_million_fires_cost_the_handlers_write_or_the_targets_calls() {
        let p = Prices::default();
        assert_eq!(per_million_fires(TargetKind::Rust, 10, &p), p.ddb_write_million);
        // 100,000 Invokes of 10 units, and the function's row each.
        let f = per_million_fires(TargetKind::Function, 10, &p);
        assert!((f - (0.1 * p.lambda_requests_million + p.ddb_write_million)).abs() < 1e-12, "{f}");
        // 100,000 SendMessageBatch requests of 10 units of 256 bytes (one 64 KB chunk each).
        let q = per_million_fires(TargetKind::Sqs, 10, &p);
        assert!((q - 0.1 * p.sqs_standard_million).abs() < 1e-12, "{q}");
    }
}
