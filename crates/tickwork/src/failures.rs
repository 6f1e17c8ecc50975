//! Units of work isolated as bad: recorded, skipped, counted, listed.
//!
//! Why: one tenant whose writes always fail (an id at DynamoDB's key limits, a corrupt cursor
//! item) once failed its page, the sweep did not checkpoint past it, and every later page of that
//! zone and shard was never visited again, day after day. A bad unit must not block the others:
//! it is recorded here, in the same fenced transaction that moves the checkpoint past its page,
//! and the run goes on. Nothing is lost by skipping it: its own progress (a tenant's cursors) did
//! not move, so its next visit still owes every period since; the record is how an operator
//! (`tickctl status`, the `FailedUnits` metric and alarm) learns of it.
//!
//! Items (control table): `pk = fail#<job>`, `sk = <run>#<unit>`; `unit`, `run`, `error` (at most
//! 1,000 characters), `at` (ms), `ttl` (kept 14 days). Listed by one key-condition Query per job.

use std::time::Duration;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_i64, get_s, key, PK, TTL};

/// Failures on one page at which the page is not a few bad units but a bad run (a schema change,
/// a code defect): stop rather than record them all. Below it every bad unit is isolated, so a
/// short page with two bad tenants of three never stops a zone's run on every tick.
pub const SYSTEMIC_MIN: usize = 10;

/// Whether `failed` bad units of a page of `of` mean a bad run ([`SYSTEMIC_MIN`] or more, and more
/// than half the page). Pure; the sweep and the fan-out decide by it.
pub fn systemic(failed: usize, of: usize) -> bool {
    failed >= SYSTEMIC_MIN && failed * 2 > of
}

/// How long a failure record is kept.
pub const RETENTION: Duration = Duration::from_secs(14 * 86_400);

/// The failure partition of a job.
pub fn failures_pk(job: &str) -> String {
    format!("fail#{job}")
}

/// A recorded failure.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failure {
    /// The run (window) it failed in.
    pub run: String,
    /// The unit (tenant id, zone name).
    pub unit: String,
    /// Why.
    pub error: String,
    /// When (ms).
    pub at_ms: i64,
}

/// The put that records `unit` as failed in `run`, for the caller's transaction.
pub fn record(table: &str, job: &str, run: &str, unit: &str, error: &str, now_ms: i64) -> TransactWriteItem {
    let mut item = key(failures_pk(job), format!("{run}#{unit}"));
    item.insert("unit".into(), av_s(unit));
    item.insert("run".into(), av_s(run));
    item.insert("error".into(), av_s(error.chars().take(1000).collect::<String>()));
    item.insert("at".into(), av_n(now_ms));
    item.insert(TTL.into(), av_n(now_ms / 1000 + RETENTION.as_secs() as i64));
    TransactWriteItem::builder()
        .put(Put::builder().table_name(table).set_item(Some(item)).build().expect("put has table and item"))
        .build()
}

fn from_item(i: &Item) -> Option<Failure> {
    Some(Failure {
        run: get_s(i, "run")?.to_string(),
        unit: get_s(i, "unit")?.to_string(),
        error: get_s(i, "error").unwrap_or_default().to_string(),
        at_ms: get_i64(i, "at").unwrap_or(0),
    })
}

/// Every recorded failure of `job`, following the cursor to the end.
pub async fn list(db: &Db, table: &str, job: &str) -> Result<Vec<Failure>, DbError> {
    let q = db
        .client()
        .query()
        .table_name(table)
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", PK)
        .expression_attribute_values(":pk", av_s(failures_pk(job)));
    let mut out = Vec::new();
    crate::pager::for_each_page(db, q, None, 500, &crate::budget::Unlimited, "failures", |p| {
        out.extend(p.items.iter().filter_map(from_item));
        std::future::ready(Ok::<(), DbError>(()))
    })
    .await
    .map_err(DbError::from)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_bad_units_are_isolated_and_a_bad_page_stops_the_run() {
        assert!(!systemic(2, 3), "a short page with two bad tenants: isolated, the run goes on");
        assert!(!systemic(9, 10));
        assert!(!systemic(400, 1000));
        assert!(systemic(10, 10));
        assert!(systemic(501, 1000));
    }
    use crate::schema::SK;

    #[test]
    fn a_record_round_trips_and_caps_its_error() {
        let w = record("control", "pulse-sweep", "UTC@2026-11-29", "t1", &"x".repeat(5000), 1_000_000);
        let item = w.put().unwrap().item().clone();
        assert_eq!(get_s(&item, PK), Some("fail#pulse-sweep"));
        assert_eq!(get_s(&item, SK), Some("UTC@2026-11-29#t1"));
        let f = from_item(&item).unwrap();
        assert_eq!((f.unit.as_str(), f.error.len(), f.at_ms), ("t1", 1000, 1_000_000));
    }
}
