//! The `daily-summary` example handler: one summary row per tenant per day, idempotently.
//!
//! It runs for fan-out items (`{"tenant", "window"}`) and for day pulses from the pulse sweep
//! (`{"tenant", "grain": "day", "period"}`). The row is written with `attribute_not_exists`, so a
//! job that runs twice (a crash after the write and before the finish) writes once.
//!
//! Table `<prefix>-summaries`: `pk` = tenant, `sk` = `day#<date>`.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use tickwork::clock::SharedClock;
use tickwork::schema::{av_n, av_s, key, s, TableDef, PK, SK};
use tickwork::{Db, DbError};

use crate::{Handler, HandlerError, Registry};
use tickwork::queue::Job;

/// The summaries table.
pub fn summaries_table() -> TableDef {
    TableDef { logical: "summaries", pk: s(PK), sk: Some(s(SK)), gsis: vec![], ttl: None }
}

/// The handlers this worker ships: `daily-summary` and `pulse` (which acts on day pulses).
pub fn registry(db: Db, table: &str, clock: SharedClock) -> Registry {
    let h: Arc<dyn Handler> = Arc::new(DailySummary { db, table: table.to_string(), clock });
    Registry::new().with("daily-summary", h.clone()).with("pulse", h)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Payload {
    tenant: String,
    window: Option<String>,
    grain: Option<String>,
    period: Option<String>,
    #[allow(dead_code)]
    zone: Option<String>,
}

/// Writes the day's summary row for the job's tenant.
#[derive(Debug)]
pub struct DailySummary {
    db: Db,
    table: String,
    clock: SharedClock,
}

impl DailySummary {
    fn day_of(job: &Job) -> Result<Option<(String, String)>, HandlerError> {
        let p: Payload = serde_json::from_str(&job.payload)
            .map_err(|e| HandlerError::Permanent(format!("payload of `{}` does not decode: {e}", job.id)))?;
        if job.tenant.as_deref() != Some(p.tenant.as_str()) {
            return Err(HandlerError::Permanent(format!(
                "payload tenant `{}` differs from the item's tenant {:?}: refusing to touch another tenant's rows",
                p.tenant, job.tenant
            )));
        }
        let day = match (p.window, p.grain.as_deref(), p.period) {
            (Some(w), None, None) => w,
            (None, Some("day"), Some(period)) => period,
            (None, Some(_), Some(_)) => return Ok(None), // other grains: nothing to summarise
            _ => {
                return Err(HandlerError::Permanent(format!(
                    "payload of `{}` names neither a window nor a pulse",
                    job.id
                )))
            }
        };
        if day.len() != 10 || day.as_bytes()[4] != b'-' || day.as_bytes()[7] != b'-' {
            return Err(HandlerError::Permanent(format!("`{day}` is not a date (YYYY-MM-DD)")));
        }
        Ok(Some((p.tenant, day)))
    }
}

impl Handler for DailySummary {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let Some((tenant, day)) = Self::day_of(job)? else { return Ok(()) };
            let mut item = key(&tenant, format!("day#{day}"));
            item.insert("written_at".into(), av_n(self.clock.now_ms()));
            item.insert("job".into(), av_s(&job.id));
            let req = self
                .db
                .client()
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", PK);
            match self.db.put(req).await {
                Ok(_) | Err(DbError::ConditionFailed { .. }) => Ok(()),
                Err(e @ (DbError::Throttled { .. } | DbError::Unreachable { .. })) => {
                    Err(HandlerError::Retry(e.to_string()))
                }
                Err(e) => Err(HandlerError::Retry(e.to_string())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(payload: &str, tenant: Option<&str>) -> Job {
        Job {
            id: "x".into(),
            kind: "daily-summary".into(),
            payload: payload.into(),
            tenant: tenant.map(str::to_string),
            attempts: 1,
            owner: "o".into(),
            claim_until_ms: 0,
        }
    }

    #[test]
    fn decodes_fanout_and_pulse_payloads() {
        let j = job(r#"{"tenant":"t1","window":"2026-11-29","zone":"UTC"}"#, Some("t1"));
        assert_eq!(DailySummary::day_of(&j).unwrap(), Some(("t1".into(), "2026-11-29".into())));
        let j = job(r#"{"tenant":"t1","grain":"day","period":"2026-11-29"}"#, Some("t1"));
        assert_eq!(DailySummary::day_of(&j).unwrap(), Some(("t1".into(), "2026-11-29".into())));
        let j = job(r#"{"tenant":"t1","grain":"week","period":"2026-W48"}"#, Some("t1"));
        assert_eq!(DailySummary::day_of(&j).unwrap(), None);
    }

    #[test]
    fn bad_payloads_are_permanent_errors() {
        for (p, t) in [
            ("not json", Some("t1")),
            (r#"{"tenant":"t2","window":"2026-11-29"}"#, Some("t1")),
            (r#"{"tenant":"t1"}"#, Some("t1")),
            (r#"{"tenant":"t1","window":"yesterday"}"#, Some("t1")),
            (r#"{"tenant":"t1","window":"2026-11-29","extra":1}"#, Some("t1")),
        ] {
            assert!(matches!(DailySummary::day_of(&job(p, t)), Err(HandlerError::Permanent(_))), "{p}");
        }
    }
}
