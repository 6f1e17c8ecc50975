//! The handlers this worker ships, as examples of idempotent per-tenant work.
//!
//! - `pulse` → [`DailySummary`]: at the end of each tenant's *local* day (a day pulse from the
//!   pulse sweep), one summary row `day#<local date>`. The only producer of daily summaries: a
//!   tenant west of UTC ends its day hours after the UTC date turns, so a UTC-day job must not
//!   write them.
//! - `utc-daily` (the fan-out's default job) → [`UtcRollup`]: one row `utc#<UTC date>` per tenant
//!   per UTC day (a rollup over a fixed, zone-free calendar, as billing and usage reports need).
//! - `sched` (a schedule's fire, [`tickwork::schedules`]) → [`Nudge`]: one row
//!   `sched#<name>#<occurrence>` per fire, its `written_at` the end of boundary-to-done.
//!
//! Both write with `attribute_not_exists`, so a job that runs twice (a crash after the write and
//! before the finish) writes once.
//!
//! Table `<prefix>-summaries`: `pk` = tenant, `sk` = `day#<date>` or `utc#<date>`.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use tickwork::clock::SharedClock;
use tickwork::queue::Job;
use tickwork::schema::{av_n, av_s, key, s, TableDef, PK, SK};
use tickwork::Db;

use crate::registry::{Handler, HandlerError, Registry};

/// The summaries table.
pub fn summaries_table() -> TableDef {
    TableDef { logical: "summaries", pk: s(PK), sk: Some(s(SK)), gsis: vec![], ttl: None, stream: None }
}

/// The fan-out's default job kind.
pub const UTC_DAILY: &str = "utc-daily";

/// The handlers this worker ships: `pulse` → [`DailySummary`], `utc-daily` → [`UtcRollup`].
pub fn registry(db: Db, table: &str, clock: SharedClock) -> Registry {
    registry_with_fanout_kind(db, table, clock, UTC_DAILY)
}

/// [`registry`] with the fan-out's job under another kind (`TICKWORK_FANOUT_JOB`).
pub fn registry_with_fanout_kind(db: Db, table: &str, clock: SharedClock, fanout_kind: &str) -> Registry {
    let w = Writer { db, table: table.to_string(), clock };
    Registry::new()
        .with("pulse", Arc::new(DailySummary(w.clone())))
        .with(tickwork::schedules::SCHED_KIND, Arc::new(Nudge(w.clone())))
        .with(fanout_kind, Arc::new(UtcRollup(w)))
}

/// A fire's unit payload: the batch's `each` entry and the tenant.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fire {
    tenant: String,
    name: String,
    occurrence: String,
}

/// Records a schedule's fire (the nudge a real handler would send): one row per occurrence.
#[derive(Debug)]
pub struct Nudge(Writer);

impl Nudge {
    fn fire_of(job: &Job) -> Result<Fire, HandlerError> {
        let f: Fire = serde_json::from_str(&job.payload)
            .map_err(|e| HandlerError::Permanent(format!("payload of `{}` is not a fire: {e}", job.id)))?;
        if job.tenant.as_deref() != Some(f.tenant.as_str()) {
            return Err(HandlerError::Permanent(format!(
                "payload tenant `{}` differs from the item's tenant {:?}: refusing to touch another tenant's rows",
                f.tenant, job.tenant
            )));
        }
        if f.occurrence.parse::<jiff::Timestamp>().is_err() {
            return Err(HandlerError::Permanent(format!(
                "`{}` is not an occurrence (a local instant with its offset)",
                f.occurrence
            )));
        }
        Ok(f)
    }
}

impl Handler for Nudge {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let f = Self::fire_of(job)?;
            self.0.write_once(&f.tenant, format!("sched#{}#{}", f.name, f.occurrence), job).await
        })
    }
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

fn payload(job: &Job) -> Result<Payload, HandlerError> {
    let p: Payload = serde_json::from_str(&job.payload)
        .map_err(|e| HandlerError::Permanent(format!("payload of `{}` does not decode: {e}", job.id)))?;
    if job.tenant.as_deref() != Some(p.tenant.as_str()) {
        return Err(HandlerError::Permanent(format!(
            "payload tenant `{}` differs from the item's tenant {:?}: refusing to touch another tenant's rows",
            p.tenant, job.tenant
        )));
    }
    Ok(p)
}

fn date(d: String) -> Result<String, HandlerError> {
    match d.parse::<jiff::civil::Date>() {
        Ok(x) if x.to_string() == d => Ok(d),
        _ => Err(HandlerError::Permanent(format!("`{d}` is not a date (YYYY-MM-DD)"))),
    }
}

#[derive(Debug, Clone)]
struct Writer {
    db: Db,
    table: String,
    clock: SharedClock,
}

impl Writer {
    /// One row per (tenant, sort key), written once.
    async fn write_once(&self, tenant: &str, sk: String, job: &Job) -> Result<(), HandlerError> {
        let mut item = key(tenant, sk);
        item.insert("written_at".into(), av_n(self.clock.now_ms()));
        item.insert("job".into(), av_s(&job.id));
        // Written, or written before (a retried unit, a duplicate delivery): done either way.
        match self.db.put_new(&self.table, item).await {
            Ok(_) => Ok(()),
            Err(e) => Err(HandlerError::of_db(&e)),
        }
    }
}

/// Writes a tenant's summary at the end of its local day (day pulses; other grains pass).
#[derive(Debug)]
pub struct DailySummary(Writer);

impl DailySummary {
    fn day_of(job: &Job) -> Result<Option<(String, String)>, HandlerError> {
        let p = payload(job)?;
        match (p.window, p.grain.as_deref(), p.period) {
            (None, Some("day"), Some(period)) => Ok(Some((p.tenant, date(period)?))),
            (None, Some(_), Some(_)) => Ok(None), // other grains: nothing to summarise
            _ => Err(HandlerError::Permanent(format!("payload of `{}` is not a pulse", job.id))),
        }
    }
}

impl Handler for DailySummary {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let Some((tenant, day)) = Self::day_of(job)? else { return Ok(()) };
            self.0.write_once(&tenant, format!("day#{day}"), job).await
        })
    }
}

/// Writes a tenant's UTC-day rollup (fan-out items).
#[derive(Debug)]
pub struct UtcRollup(Writer);

impl UtcRollup {
    fn window_of(job: &Job) -> Result<(String, String), HandlerError> {
        let p = payload(job)?;
        match (p.window, p.grain) {
            (Some(w), None) => Ok((p.tenant, date(w)?)),
            _ => Err(HandlerError::Permanent(format!("payload of `{}` names no window", job.id))),
        }
    }
}

impl Handler for UtcRollup {
    fn handle<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), HandlerError>> {
        Box::pin(async move {
            let (tenant, day) = Self::window_of(job)?;
            self.0.write_once(&tenant, format!("utc#{day}"), job).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(payload: &str, tenant: Option<&str>) -> Job {
        Job {
            id: "x".into(),
            kind: "pulse".into(),
            payload: payload.into(),
            tenant: tenant.map(str::to_string),
            attempts: 1,
            owner: "o".into(),
            claim_until_ms: 0,
            died: false,
            suspect: false,
            throttles: 0,
            trouble: None,
        }
    }

    #[test]
    fn day_pulses_summarise_and_windows_roll_up() {
        let j = job(r#"{"tenant":"t1","grain":"day","period":"2026-11-29"}"#, Some("t1"));
        assert_eq!(DailySummary::day_of(&j).unwrap(), Some(("t1".into(), "2026-11-29".into())));
        let j = job(r#"{"tenant":"t1","grain":"week","period":"2026-W48"}"#, Some("t1"));
        assert_eq!(DailySummary::day_of(&j).unwrap(), None);
        let j = job(r#"{"tenant":"t1","window":"2026-11-29","zone":"UTC"}"#, Some("t1"));
        assert!(DailySummary::day_of(&j).is_err(), "a UTC window is not a daily summary");
        assert_eq!(UtcRollup::window_of(&j).unwrap(), ("t1".into(), "2026-11-29".into()));
    }

    #[test]
    fn a_fire_is_one_row_per_occurrence_and_a_bad_one_is_permanent() {
        let j = job(r#"{"tenant":"t1","name":"nudge","occurrence":"2026-12-02T08:00:00+01:00"}"#, Some("t1"));
        assert_eq!(Nudge::fire_of(&j).unwrap().occurrence, "2026-12-02T08:00:00+01:00");
        for (p, t) in [
            (r#"{"tenant":"t1","name":"nudge","occurrence":"tomorrow"}"#, Some("t1")),
            (r#"{"tenant":"t2","name":"nudge","occurrence":"2026-12-02T08:00:00+01:00"}"#, Some("t1")),
            (r#"{"tenant":"t1","grain":"day","period":"2026-11-29"}"#, Some("t1")),
        ] {
            assert!(matches!(Nudge::fire_of(&job(p, t)), Err(HandlerError::Permanent(_))), "{p}");
        }
    }

    #[test]
    fn bad_payloads_are_permanent_errors() {
        for (p, t) in [
            ("not json", Some("t1")),
            (r#"{"tenant":"t2","grain":"day","period":"2026-11-29"}"#, Some("t1")),
            (r#"{"tenant":"t1"}"#, Some("t1")),
            (r#"{"tenant":"t1","grain":"day","period":"yesterday"}"#, Some("t1")),
            (r#"{"tenant":"t1","grain":"day","period":"2026-11-29","extra":1}"#, Some("t1")),
        ] {
            assert!(matches!(DailySummary::day_of(&job(p, t)), Err(HandlerError::Permanent(_))), "{p}");
        }
    }
}
