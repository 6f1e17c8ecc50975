//! Many schedules at once (`tickctl schedules import`, an application's migration): each new
//! schedule's definition and first due record written together, 50 schedules a transaction,
//! after one lowering of `sched_next` to the earliest of them. A million schedules are 20,000
//! requests, not the four a schedule [`Schedules::put`] makes.
//!
//! A schedule that already exists is not overwritten here: its chunk's transaction is cancelled
//! by it, and that chunk is written one schedule at a time through [`Schedules::put`] (same
//! definition: unchanged; another: changed, owed from now). A crash between chunks loses
//! nothing: the written chunks are whole, and running the import again finds them unchanged.

use super::error::{ScheduleError, SpecError};
use super::fire::first_record;
use super::record::Schedule;
use super::spec::ScheduleDef;
use super::store::{Changed, Schedules};
use crate::error::DbError;
use crate::schema::put_new_item;

/// Schedules a transaction: two writes each.
const CHUNK: usize = 50;

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
    /// (spec, zone, keys, a one-off's instant): one bad row refuses the import before anything
    /// is written, naming the row.
    pub async fn put_many(
        &self,
        rows: Vec<(String, String, ScheduleDef)>,
        max_lateness_ms: i64,
    ) -> Result<Imported, ScheduleError> {
        let now = self.clock_now();
        let mut firsts = Vec::with_capacity(rows.len());
        for (i, (tenant, zone, def)) in rows.iter().enumerate() {
            let row = |e: SpecError| SpecError(format!("row {} (`{tenant}` `{}`): {}", i + 1, def.name, e.0));
            self.check(tenant, zone, def, max_lateness_ms).map_err(row)?;
            let s = Schedule { tenant: tenant.clone(), def: def.clone(), paused: false, ver: 1, since_ms: now };
            let record = first_record(&s, zone).map_err(row)?;
            firsts.push((s, record));
        }
        if let Some(earliest) = firsts.iter().filter_map(|(_, r)| r.as_ref().map(|r| r.due_ms)).min() {
            self.note_next(earliest).await?;
        }
        let mut out = Imported::default();
        for (chunk, rows) in firsts.chunks(CHUNK).zip(rows.chunks(CHUNK)) {
            let mut writes = Vec::with_capacity(chunk.len() * 2);
            for (s, r) in chunk {
                writes.push(put_new_item(&self.table, s.to_item(&self.job)));
                if let Some(r) = r {
                    let put = aws_sdk_dynamodb::types::Put::builder()
                        .table_name(&self.table)
                        .set_item(Some(r.to_item(&self.job)))
                        .build()
                        .expect("put has table and item");
                    writes.push(aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build());
                }
            }
            match self.db.transact_write(writes).await {
                Ok(_) => out.added += chunk.len() as u64,
                Err(DbError::TransactionCanceled { .. }) => {
                    for (tenant, zone, def) in rows {
                        match self.put(tenant, zone, def.clone(), max_lateness_ms).await? {
                            Changed::Added => out.added += 1,
                            Changed::Changed => out.changed += 1,
                            Changed::Unchanged => out.unchanged += 1,
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(out)
    }
}
