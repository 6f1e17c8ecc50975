//! The control plane: what an operation through the control function costs (`tickctl cost
//! --control`). One Lambda request and its duration, and the DynamoDB requests the operation
//! makes, each priced from [`crate::bill::Prices`].
//!
//! The requests and units of each operation are the ones its code path makes in the steady state
//! a team runs in (the tenant's zone already registered, a schedule joining a group that exists),
//! counted under DynamoDB's capacity rules by the suite's meter and held equal to these figures by
//! a test (`tests/it/control_cost.rs`): a change of the code path that changes a figure fails
//! there until the model says it. The duration is the stack's own model of a function's time
//! ([`crate::bill::stack::BASE_MS`] plus [`crate::bill::stack::PER_REQUEST_MS`] a request), an
//! assumption, not a measurement (`make bench BENCH=control` sets it beside a measured run).

use serde::Serialize;

use crate::bill::stack::{BASE_MS, PER_REQUEST_MS};
use crate::bill::Prices;

/// The control function's memory (`template.yaml`'s `Globals.Function.MemorySize`; a test holds
/// the bill's stack to it).
pub const MEMORY_MB: f64 = 256.0;

/// One operation's DynamoDB work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Op {
    /// The operation, as `op` names it.
    pub name: &'static str,
    /// DynamoDB requests.
    pub requests: f64,
    /// Read request units.
    pub read_units: f64,
    /// Write request units.
    pub write_units: f64,
}

/// The operations a team's service makes most, in their steady state.
pub const OPS: [Op; 5] = [
    // One tenant in a batch of one, its zone registered already.
    Op { name: "tenants.add", requests: 6.0, read_units: 1.0, write_units: 7.0 },
    // A daily schedule joining the group its zone's tenants share (no state item: writers leave
    // `sched_next` to the stream, `tickwork::schedules::lowering`).
    Op { name: "schedules.put", requests: 4.0, read_units: 3.0, write_units: 6.0 },
    // A timer with a payload of its own: a group of its own (its head and due record written; the
    // record's insert is a share of one state-item update a stream batch, the sweep's).
    Op { name: "timers.at", requests: 6.0, read_units: 5.0, write_units: 8.0 },
    Op { name: "tenants.get", requests: 1.0, read_units: 1.0, write_units: 0.0 },
    // The tenant, the sweep's state item, the tenant's schedules (strong reads, a unit each); its
    // partition of the queue's trouble index, the shared one, and the head of the template's one
    // ready shard (eventually consistent Queries, half a unit each).
    Op { name: "tenants.explain", requests: 6.0, read_units: 4.5, write_units: 0.0 },
];

/// What 1,000 of an operation cost, by part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerThousand {
    /// The operation.
    pub name: &'static str,
    /// Lambda's request charge.
    pub lambda_requests: f64,
    /// Lambda's duration charge (modelled time at [`MEMORY_MB`], arm64).
    pub lambda_duration: f64,
    /// DynamoDB on demand.
    pub dynamodb: f64,
    /// All of it.
    pub total: f64,
}

/// The modelled time of one operation, in milliseconds.
pub fn op_ms(op: &Op) -> f64 {
    BASE_MS + PER_REQUEST_MS * op.requests
}

/// 1,000 operations `op` at `prices`. Pure.
pub fn per_thousand(op: &Op, prices: &Prices) -> PerThousand {
    let n = 1_000.0;
    let lambda_requests = n * prices.lambda_requests_million / 1e6;
    let lambda_duration = n * op_ms(op) / 1_000.0 * (MEMORY_MB / 1_024.0) * prices.lambda_arm_gb_second;
    let dynamodb = n * (op.read_units * prices.ddb_read_million + op.write_units * prices.ddb_write_million) / 1e6;
    PerThousand {
        name: op.name,
        lambda_requests,
        lambda_duration,
        dynamodb,
        total: lambda_requests + lambda_duration + dynamodb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thousand_operations_are_priced_part_by_part() {
        let op = Op { name: "x", requests: 4.0, read_units: 2.0, write_units: 6.0 };
        let p = per_thousand(&op, &Prices::default());
        // 1,000 × $0.20 / 1e6; 1,000 × 44 ms × 0.25 GB × $0.0000133334; 1,000 × (2 × 0.125 + 6 × 0.625) / 1e6.
        assert!((p.lambda_requests - 0.000_2).abs() < 1e-12);
        assert!((p.lambda_duration - 1_000.0 * 0.044 * 0.25 * 0.000_013_333_4).abs() < 1e-12);
        assert!((p.dynamodb - 0.004).abs() < 1e-12);
        assert!((p.total - (p.lambda_requests + p.lambda_duration + p.dynamodb)).abs() < 1e-15);
    }
}
