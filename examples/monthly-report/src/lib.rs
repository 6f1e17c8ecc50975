//! A job of your own, complete: at the end of each tenant's local month (the pulse sweep's month
//! pulse), one report row per tenant and month. It is built the way an application builds its
//! jobs on tickwork:
//!
//! 1. **A handler** ([`MonthlyReport`]) implements [`queue_worker::Handler`] for one kind of unit
//!    (`pulse`). It must be idempotent per unit: a unit runs again after a crash between its
//!    effect and its settle, or after its claim expired. The unit's id is its idempotency key
//!    (`pulse#<tenant>#month#<YYYY-MM>`), and the effect here is a conditional put
//!    (`attribute_not_exists`), so a second run writes nothing.
//! 2. **Errors say what to do next**: [`HandlerError::Retry`] for what may pass (throttling, a
//!    timeout: the unit comes back after a backoff), [`HandlerError::Permanent`] for what never
//!    will (a payload that does not decode: the unit is dead-lettered at once, `tickctl
//!    dead-letters list` shows it). A failed unit never holds up the others of its batch.
//! 3. **Registration** ([`registry`]): the shipped handlers plus this one, composed, so the
//!    tenant's daily summaries keep being written (registering a kind replaces its handler; this
//!    one passes every other grain to the shipped daily summary).
//! 4. **A Lambda of your own** (`src/main.rs`): `queue_worker::Deps::from_env_with` with this
//!    registry, `queue_worker::handle` per event. Nothing of the worker is forked.

use std::sync::Arc;

use futures::future::BoxFuture;
use queue_worker::{Handler, HandlerError, Registry};
use serde::Deserialize;
use tickwork::clock::SharedClock;
use tickwork::queue::Job;
use tickwork::schema::{av_n, av_s, key, s, TableDef, PK, SK};
use tickwork::Db;

/// The variable naming the reports table (default `<prefix>-reports`).
pub const REPORTS_TABLE_VAR: &str = "MONTHLY_REPORT_TABLE";

/// The reports table: `pk` = tenant, `sk` = `report#<YYYY-MM>`.
pub fn reports_table() -> TableDef {
    TableDef { logical: "reports", pk: s(PK), sk: Some(s(SK)), gsis: vec![], ttl: None, stream: None }
}

/// A pulse unit's payload, as the pulse sweep writes it.
#[derive(Debug, Deserialize)]
struct Pulse {
    tenant: String,
    grain: String,
    period: String,
    zone: Option<String>,
}

/// The month a month pulse names, checked by the calendar's own parser (`YYYY-MM`, canonical),
/// and its first and last local dates.
fn month_of(period: &str) -> Result<(jiff::civil::Date, jiff::civil::Date), HandlerError> {
    let p = tickwork::calendar::Period::parse(tickwork::calendar::Grain::Month, period)
        .map_err(|e| HandlerError::Permanent(e.to_string()))?;
    Ok((p.start, p.start.last_of_month()))
}

/// The report for a tenant's month, written once when the month ends in the tenant's zone.
pub struct MonthlyReport {
    db: Db,
    table: String,
    clock: SharedClock,
    /// What handled `pulse` units before (the shipped daily summary): every other grain goes there.
    others: Option<Arc<dyn Handler>>,
}

impl MonthlyReport {
    /// A report writer into `table`, passing the other grains to `others`.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock, others: Option<Arc<dyn Handler>>) -> Self {
        Self { db, table: table.into(), clock, others }
    }

    async fn report(&self, job: &Job, p: Pulse) -> Result<(), HandlerError> {
        let (first, last) = month_of(&p.period)?;
        let mut item = key(&p.tenant, format!("report#{}", p.period));
        item.insert("first_day".into(), av_s(first.to_string()));
        item.insert("last_day".into(), av_s(last.to_string()));
        item.insert("days".into(), av_n(i64::from(last.day())));
        item.insert("zone".into(), av_s(p.zone.unwrap_or_default()));
        item.insert("written_at".into(), av_n(self.clock.now_ms()));
        // The idempotency key travels with the effect: which unit wrote this row.
        item.insert("unit".into(), av_s(&job.id));
        // Inserted only if new: a unit run again finds its row and is done.
        self.db.put_new(&self.table, item).await.map(|_| ()).map_err(|e| HandlerError::Retry(e.to_string()))
    }
}

impl Handler for MonthlyReport {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let p: Pulse = serde_json::from_str(&job.payload)
                .map_err(|e| HandlerError::Permanent(format!("`{}` is not a pulse: {e}", job.id)))?;
            // Only the tenant the unit names: a unit never touches another tenant's rows.
            if job.tenant.as_deref() != Some(p.tenant.as_str()) {
                return Err(HandlerError::Permanent(format!("`{}` names another tenant", job.id)));
            }
            if p.grain == tickwork::calendar::Grain::Month.name() {
                return self.report(job, p).await;
            }
            match &self.others {
                Some(h) => h.handle(job).await,
                None => Ok(()),
            }
        })
    }
}

/// The worker's handlers: the shipped ones (daily summaries, the fan-out's rollup under
/// `fanout_kind`, `TICKWORK_FANOUT_JOB`), with `pulse` units going through [`MonthlyReport`]
/// first.
pub fn registry(db: Db, summaries: &str, reports: &str, clock: SharedClock, fanout_kind: &str) -> Registry {
    let shipped = queue_worker::summary::registry_with_fanout_kind(db.clone(), summaries, clock.clone(), fanout_kind);
    let daily = shipped.get("pulse").cloned();
    shipped.with("pulse", Arc::new(MonthlyReport::new(db, reports, clock, daily)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_is_named_canonically() {
        let (first, last) = month_of("2026-02").unwrap();
        assert_eq!((first.to_string(), last.to_string()), ("2026-02-01".into(), "2026-02-28".into()));
        for bad in ["2026-2", "2026-13", "26-01", "2026-01-01", "soon"] {
            assert!(matches!(month_of(bad), Err(HandlerError::Permanent(_))), "{bad}");
        }
    }
}
