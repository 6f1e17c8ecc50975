//! What one drain did: the counts its invocation reports (the worker's log line, the metrics, the
//! fleet's hand-on) and how a settle adds to them.

use serde::Serialize;
use tickwork::clock::Millis;
use tickwork::queue::Settle;

use crate::units::Settled;

/// Counts from one invocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// How it ended.
    pub outcome: tickwork_lambda::Outcome,
    /// Poll queries made.
    #[serde(skip_serializing_if = "is_zero")]
    pub polls: u64,
    /// Candidates seen.
    #[serde(skip_serializing_if = "is_zero")]
    pub candidates: u64,
    /// Items claimed.
    #[serde(skip_serializing_if = "is_zero")]
    pub claimed: u64,
    /// Claims lost to another worker.
    #[serde(skip_serializing_if = "is_zero")]
    pub taken: u64,
    /// Finished.
    #[serde(skip_serializing_if = "is_zero")]
    pub finished: u64,
    /// Failed and scheduled for retry.
    #[serde(skip_serializing_if = "is_zero")]
    pub retried: u64,
    /// Items dead-lettered (failed permanently, out of attempts, or exhausted by dead workers).
    #[serde(skip_serializing_if = "is_zero")]
    pub dead_lettered: u64,
    /// Units dead-lettered, from whole items and from batches alike: the `FailedUnits` metric.
    #[serde(skip_serializing_if = "is_zero")]
    pub dead_units: u64,
    /// Our claim expired before we settled it (someone else owns it now).
    #[serde(skip_serializing_if = "is_zero")]
    pub lost: u64,
    /// Items split because their last worker died.
    #[serde(skip_serializing_if = "is_zero")]
    pub split: u64,
    /// Items given back with units never started (the deadline stopped them; attempt refunded).
    #[serde(skip_serializing_if = "is_zero")]
    pub refunded: u64,
    /// Handler calls (units) run.
    #[serde(skip_serializing_if = "is_zero")]
    pub units: u64,
    /// Units that failed (retried later or dead-lettered).
    #[serde(skip_serializing_if = "is_zero")]
    pub units_failed: u64,
    /// Units a target throttled: given back with the attempt refunded, to run after the
    /// throttle's backoff (drain step 7).
    #[serde(skip_serializing_if = "is_zero")]
    pub throttled: u64,
    /// Claims made while a held item still had a unit to start: 0, by step 2.
    #[serde(skip_serializing_if = "is_zero")]
    pub claims_ahead: u64,
    /// The longest any candidate had been ready when a poll saw it (ms): the queue's lag.
    #[serde(skip_serializing_if = "is_zero")]
    pub oldest_ready_ms: u64,
    /// Stopped claiming because of the deadline.
    #[serde(skip_serializing_if = "is_false")]
    pub stopped_by_deadline: bool,
    /// Stopped with ready work it did not take (the feed not exhausted, or units given back):
    /// the next drain must start at once ([`crate::fleet`]).
    #[serde(skip_serializing_if = "is_false")]
    pub work_left: bool,
    /// A successor drain was started as this one ended ([`crate::fleet`], step 2).
    #[serde(skip_serializing_if = "is_false")]
    pub handed_on: bool,
    /// The retries this drain scheduled (or was started to wait for) that its budget did not
    /// reach, each instant once: its successor waits for them (step 6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retry_at_ms: Vec<Millis>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Adds a settle to the report; a retry it scheduled, or a throttled item's return, is one the
/// drain waits for (`retry_due`, drain steps 6 and 7).
pub(crate) fn tally(r: &mut Report, s: &Settled, retry_due: &mut std::collections::BTreeSet<Millis>) {
    r.units += s.counts.run;
    r.units_failed += s.counts.failed;
    r.dead_units += s.counts.dead;
    r.refunded += u64::from(s.refunded && s.settle != Settle::NotOwner);
    match s.settle {
        Settle::Settled => r.finished += 1,
        Settle::Split { .. } => r.split += 1,
        Settle::Retrying { at_ms } => {
            if !s.refunded {
                r.retried += 1;
            }
            // A throttled item is waited for as a retry is (step 7).
            if !s.refunded || s.throttled {
                retry_due.insert(at_ms);
            }
        }
        Settle::DeadLettered => r.dead_lettered += 1,
        Settle::NotOwner => r.lost += 1,
    }
}
