//! The control table's stream, handed over by the event source mapping: the due records writers
//! inserted lower `sched_next`, one update a batch ([`tickwork::schedules::lowering`] says why and
//! why nothing is lost), and a record due before the next tick gets its wake now, not at the next
//! tick (a timer added minutes before its instant is handed over at it).
//!
//! A record that is not one of this job's writers' inserts (the filter let it through, or no
//! filter is deployed) is passed over and counted; only a failed write fails the batch, which the
//! mapping hands over again.

use serde_json::Value;
use tickwork::clock::Millis;
use tickwork::schedules::lowering::{inserted_position, BY, BY_WRITER};
use tickwork_lambda::BadEvent;

use crate::deps::Deps;
use crate::report::{Outcome, PulseError, Report};
use crate::wake;

/// The `ScheduleWrites` mapping's filter (`template.yaml`): writers' inserts alone, so the
/// sweep's own records, every update and every other item of the control table invoke nothing.
pub const FILTER: &str = r#"{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"by": {"S": ["writer"]}}}}"#;

/// What a batch holds for the lowering.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inserted {
    /// The earliest position of this job's writers' records in it.
    pub earliest: Option<Millis>,
    /// Those records.
    pub records: u32,
    /// Records passed over (another kind of item, an update, the sweep's own record).
    pub passed: u32,
}

/// The writers' inserts in a stream event from `control`'s stream, for `job`. `None` when the
/// event is not a stream event; an error naming the field when it is not from that stream.
pub fn inserted_of(event: &Value, control: &str, job: &str) -> Option<Result<Inserted, BadEvent>> {
    let records = match tickwork_lambda::stream::records_of(event, control)? {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    let mut out = Inserted::default();
    for r in records {
        let s = |path: &[&str]| path.iter().try_fold(r, |v, k| v.get(k)).and_then(Value::as_str);
        let pos = (s(&["eventName"]) == Some("INSERT") && s(&["dynamodb", "NewImage", BY, "S"]) == Some(BY_WRITER))
            .then(|| inserted_position(job, s(&["dynamodb", "Keys", "pk", "S"])?, s(&["dynamodb", "Keys", "sk", "S"])?))
            .flatten();
        match pos {
            Some(p) => {
                out.records += 1;
                out.earliest = Some(out.earliest.map_or(p, |e: Millis| e.min(p)));
            }
            None => out.passed += 1,
        }
    }
    Some(Ok(out))
}

/// Lowers `sched_next` to a batch's earliest record, and sets the wake for it when it falls
/// before the next tick ([`wake::stream_wake_at`]: decided from the record, not from `sched_next`,
/// which a fire in progress leaves in the past; after the lease a tick may be holding).
pub(crate) async fn lower(deps: &Deps, batch: Inserted) -> Result<Report, PulseError> {
    let report = Report { outcome: Outcome::Completed, ..Default::default() };
    let Some(pos) = batch.earliest else {
        tracing::info!(passed = batch.passed, "stream batch: no writer's record");
        return Ok(report);
    };
    let lowered = deps.schedules.lower_next(pos).await?;
    let now = deps.clock.now_ms();
    let interval = deps.cfg.policy.interval_ms;
    let mut woke = None;
    if deps.waker.is_some()
        && !lowered.paused
        && wake::stream_wake_at(pos, lowered.wake, None, now, interval, 0).is_some()
    {
        // Only when a wake may be set: the lease's holder, read once.
        let held = deps.leases.read(&deps.cfg.job).await?.map(|l| l.expires_at_ms);
        let skew = deps.core.lease.clock_skew.as_millis() as i64;
        if let Some(at) = wake::stream_wake_at(pos, lowered.wake, held, now, interval, skew) {
            woke = deps.wake(at).await.then_some(at);
        }
    }
    tracing::info!(records = batch.records, passed = batch.passed, earliest = pos, next = lowered.next, wake = ?woke, "stream batch: sched_next lowered");
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tickwork::schedules::record::due_sk;

    fn rec(name: &str, pk: &str, sk: &str, by: Option<&str>) -> Value {
        let mut image = json!({"pk": {"S": pk}, "sk": {"S": sk}});
        if let Some(b) = by {
            image[BY] = json!({"S": b});
        }
        json!({"eventSource": "aws:dynamodb", "eventName": name,
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/c/stream/2026-12-01T00:00:00.000",
            "dynamodb": {"Keys": {"pk": {"S": pk}, "sk": {"S": sk}}, "NewImage": image}})
    }

    #[test]
    fn a_batchs_earliest_is_of_its_writers_inserts_alone() {
        let ev = json!({"Records": [
            rec("INSERT", "sdue#pulse-sweep#2", &due_sk(9_000, "ab"), Some("writer")),
            rec("INSERT", "sdue#pulse-sweep#0", &due_sk(7_000, "cd"), Some("writer")),
            rec("INSERT", "sdue#pulse-sweep#1", &due_sk(1_000, "ef"), None),
            rec("MODIFY", "sdue#pulse-sweep#1", &due_sk(2_000, "ef"), Some("writer")),
            rec("INSERT", "sdue#other#1", &due_sk(3_000, "ef"), Some("writer")),
            rec("INSERT", "sdue#pulse-sweep#bad", &due_sk(4_000, "ef"), Some("writer")),
            json!({"eventSource": "aws:dynamodb", "eventName": "INSERT"}),
        ]});
        let got = inserted_of(&ev, "c", "pulse-sweep").unwrap().unwrap();
        assert_eq!(got, Inserted { earliest: Some(7_000), records: 2, passed: 5 });
        assert!(inserted_of(&ev, "other-control", "pulse-sweep").unwrap().is_err(), "another table's stream");
        assert!(inserted_of(&json!({"time": "2026-12-01T00:00:00Z"}), "c", "pulse-sweep").is_none());
    }
}
