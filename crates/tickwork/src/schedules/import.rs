//! Many schedules at once (`tickctl schedules import`, an application's migration): each new
//! schedule's definition and first due record written together, 49 schedules a transaction with
//! the state item's `sched_next` lowered to the earliest of them ([`super::commit`]). A million
//! schedules are about 41,000 requests (a read of the state item and a transaction a chunk), not
//! the three a schedule [`Schedules::put`] makes.
//!
//! A schedule that already exists is not overwritten here: its chunk's transaction is cancelled
//! by it, and that chunk is written one schedule at a time through [`Schedules::put`] (same
//! definition: unchanged; another: changed, owed from now). A crash between chunks loses
//! nothing: the written chunks are whole, and running the import again finds them unchanged.

use super::commit::{commit, Committed};
use super::error::{ScheduleError, SpecError};
use super::fire::first_record;
use super::record::Schedule;
use super::spec::ScheduleDef;
use super::store::{next_ver, record_put, Changed, Schedules};
use crate::calendar::Policy;
use crate::schema::put_new_item;

/// Schedules a transaction: two writes each, beside the state item's.
const CHUNK: usize = 49;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Imported {
    /// New schedules.
    pub added: u64,
    /// Existing ones whose definition changed.
    pub changed: u64,
    /// Existing ones already so.
    pub unchanged: u64,
}

impl Schedules {
    /// Adds `(tenant, zone, definition)` rows, each owed from now. Every row is checked first
    /// (spec, zone, keys, a one-off's instant, a (tenant, name) named twice): one bad row
    /// refuses the import before anything is written, naming the row.
    pub async fn put_many(
        &self,
        rows: Vec<(String, String, ScheduleDef)>,
        policy: &Policy,
    ) -> Result<Imported, ScheduleError> {
        let now = self.clock_now();
        let mut firsts = Vec::with_capacity(rows.len());
        let mut seen = std::collections::HashSet::new();
        for (i, (tenant, zone, def)) in rows.iter().enumerate() {
            let row = |e: SpecError| SpecError(format!("row {} (`{tenant}` `{}`): {}", i + 1, def.name, e.0));
            self.check(tenant, zone, def, policy).map_err(row)?;
            if !seen.insert((tenant.as_str(), def.name.as_str())) {
                return Err(row(SpecError("named twice".into())).into());
            }
            let s = Schedule {
                tenant: tenant.clone(),
                def: def.clone(),
                paused: false,
                ver: next_ver(None, now),
                since_ms: now,
            };
            let record = first_record(&s, zone).map_err(row)?;
            firsts.push((s, record));
        }
        let mut out = Imported::default();
        for (chunk, rows) in firsts.chunks(CHUNK).zip(rows.chunks(CHUNK)) {
            let mut writes = Vec::with_capacity(chunk.len() * 2);
            for (s, r) in chunk {
                writes.push(put_new_item(&self.table, s.to_item(&self.job)));
                writes.extend(r.as_ref().map(|r| record_put(&self.table, &self.job, r)));
            }
            let due = chunk.iter().filter_map(|(_, r)| r.as_ref().map(|r| r.due_ms)).min();
            match commit(&self.db, &self.table, &self.job, writes, due).await? {
                Committed::Written => out.added += chunk.len() as u64,
                // A schedule of the chunk exists: the chunk one schedule at a time.
                Committed::ConditionFailed(_) => {
                    for (tenant, zone, def) in rows {
                        match self.put(tenant, zone, def.clone(), policy).await? {
                            Changed::Added => out.added += 1,
                            Changed::Changed => out.changed += 1,
                            Changed::Unchanged => out.unchanged += 1,
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}
