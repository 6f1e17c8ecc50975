//! Schedules in the control table ([`super::record`] says which items): add, change, pause,
//! resume, remove, retarget to a tenant's new zone. Every change writes the definition and its
//! first due record in one transaction with the state item's `sched_next` ([`super::commit`]), so
//! no sweep can move `sched_next` past a record it has not seen, whatever crashes between.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};

use super::commit::{commit, Committed};
use super::error::{ScheduleError, SpecError};
use super::fire::first_record;
use super::record::{def_pk, DueRecord, Schedule};
use super::spec::ScheduleDef;
use crate::calendar::{CatchUp, Policy};
use crate::clock::{Millis, SharedClock};
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_n, av_s, key, put_new_item, PK, SK};

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// A new schedule.
    Added,
    /// Its definition or state changed (it is owed from now).
    Changed,
    /// It already was so: nothing written.
    Unchanged,
}

/// The schedules of one job (the sweep that fires them).
#[derive(Debug, Clone)]
pub struct Schedules {
    pub(super) db: Db,
    pub(super) table: String,
    pub(super) job: String,
    clock: SharedClock,
}

/// Rounds of unprocessed batch writes retried before giving up.
pub(super) const BATCH_ROUNDS: u32 = 8;

impl Schedules {
    /// The schedules `job` fires, in the control `table`.
    pub fn new(db: Db, table: impl Into<String>, job: impl Into<String>, clock: SharedClock) -> Self {
        Self { db, table: table.into(), job: job.into(), clock }
    }

    /// The job.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// A strongly consistent Query of partition `pk` (sort keys below `below` when given): the
    /// one read of the control table's schedule partitions, paged by [`crate::pager`].
    pub(super) fn partition(&self, pk: String, below: Option<String>) -> QueryFluentBuilder {
        let q = self
            .db
            .client()
            .query()
            .table_name(&self.table)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", av_s(pk))
            .consistent_read(true);
        match below {
            Some(b) => q
                .key_condition_expression("#pk = :pk AND #sk < :to")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":to", av_s(b)),
            None => q.key_condition_expression("#pk = :pk"),
        }
    }

    /// One schedule, read strongly consistently.
    pub async fn get(&self, tenant: &str, name: &str) -> Result<Option<Schedule>, ScheduleError> {
        let item = self.db.get_strong(&self.table, key(def_pk(&self.job, tenant), name)).await?;
        Ok(item.as_ref().map(Schedule::from_item).transpose()?)
    }

    /// Every schedule of `tenant`, paged to the end ([`crate::pager::for_each_page`]).
    pub async fn list(&self, tenant: &str) -> Result<Vec<Schedule>, ScheduleError> {
        let mut out = Vec::new();
        let query = self.partition(def_pk(&self.job, tenant), None);
        crate::pager::for_each_page(&self.db, query, None, 1000, &crate::budget::Unlimited, "schedules", |page| {
            let read: Result<Vec<Schedule>, SpecError> = page.items.iter().map(Schedule::from_item).collect();
            let ok = read.map(|v| out.extend(v));
            std::future::ready(ok)
        })
        .await
        .map_err(|e| match e {
            crate::pager::PageError::Db(d) => ScheduleError::Db(d),
            crate::pager::PageError::Cursor(c) => ScheduleError::Db(DbError::Invalid(c.to_string())),
            crate::pager::PageError::Handler(s) => ScheduleError::Spec(s),
        })?;
        Ok(out)
    }

    /// Adds or changes `tenant`'s schedule `def`, owed from now, computed in `zone` (the
    /// tenant's: the caller reads it, and adds the tenant first). The same definition again
    /// writes nothing (a paused one stays paused; a changed one keeps its pause). A one-off that
    /// `policy` would pass over is refused (it could never fire).
    pub async fn put(
        &self,
        tenant: &str,
        zone: &str,
        def: ScheduleDef,
        policy: &Policy,
    ) -> Result<Changed, ScheduleError> {
        self.check(tenant, zone, &def, policy)?;
        let now = self.clock.now_ms();
        let old = self.get(tenant, &def.name).await?;
        if old.as_ref().is_some_and(|o| o.same_def(&def)) {
            return Ok(Changed::Unchanged);
        }
        let paused = old.as_ref().is_some_and(|o| o.paused);
        let s = Schedule { tenant: tenant.to_string(), def, paused, ver: next_ver(old.as_ref(), now), since_ms: now };
        self.write(&s, old.as_ref(), (!paused).then_some(zone)).await?;
        Ok(if old.is_some() { Changed::Changed } else { Changed::Added })
    }

    /// What every add checks before writing: the zone, the keys' lengths, and that a one-off
    /// can fire (its local time exists under its gap policy; the sweep's catch-up would not pass
    /// it over, with [`ONE_OFF_MARGIN_MS`] to spare for the tick that reaches it).
    pub(super) fn check(&self, tenant: &str, zone: &str, def: &ScheduleDef, policy: &Policy) -> Result<(), SpecError> {
        let now = self.clock.now_ms();
        crate::calendar::zone(zone).map_err(|e| SpecError(e.0))?;
        check_keys(&self.job, tenant, &def.name)?;
        if def.spec.one_off() {
            let tz = crate::calendar::zone(zone).map_err(|e| SpecError(e.0))?;
            if let super::spec::Spec::AtLocal(dt) = &def.spec {
                if super::occurrence::resolve(&tz, *dt, def.dst)?.is_none() {
                    return Err(SpecError(format!(
                        "`{}`: that local time does not exist in {zone} (a DST change skips it) and the gap policy is skip: it would never fire",
                        def.spec
                    ))
                    );
                }
            }
            // Passed over beyond the lateness bound, and under `skip` beyond one tick.
            let bound = match policy.catch_up {
                CatchUp::Skip => policy.interval_ms.min(policy.max_lateness_ms),
                _ => policy.max_lateness_ms,
            };
            let far_back = now - bound + ONE_OFF_MARGIN_MS;
            if super::occurrence::next_after(&def.spec, &tz, def.dst, far_back)?.is_none() {
                return Err(SpecError(format!(
                    "`{}` is too far in the past for the sweep's catch-up ({:?}, {} min less a margin of {} min): it would never fire",
                    def.spec,
                    policy.catch_up,
                    bound / 60_000,
                    ONE_OFF_MARGIN_MS / 60_000
                )));
            }
        }
        Ok(())
    }

    /// [`Schedules::check`] for a caller that sorts rows before a [`Schedules::put_many`].
    pub fn check_row(&self, tenant: &str, zone: &str, def: &ScheduleDef, policy: &Policy) -> Result<(), SpecError> {
        self.check(tenant, zone, def, policy)
    }

    /// Now, by the store's clock.
    pub(super) fn clock_now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Pauses (`true`) or resumes a schedule; a resumed one is owed from now, in `zone`.
    pub async fn set_paused(
        &self,
        tenant: &str,
        name: &str,
        paused: bool,
        zone: &str,
    ) -> Result<Changed, ScheduleError> {
        let old = self
            .get(tenant, name)
            .await?
            .ok_or_else(|| ScheduleError::NotFound { tenant: tenant.into(), name: name.into() })?;
        if old.paused == paused {
            return Ok(Changed::Unchanged);
        }
        let now = self.clock.now_ms();
        let s = Schedule { paused, ver: next_ver(Some(&old), now), since_ms: now, ..old.clone() };
        self.write(&s, Some(&old), (!paused).then_some(zone)).await?;
        Ok(Changed::Changed)
    }

    /// Every active schedule of `tenant` owed from now in `zone`: after a tenant is moved or
    /// resumed (its records written before are stale from here on and fire nothing). A schedule
    /// changed or removed meanwhile (the sweep finishing a one-off) is passed over: its own
    /// change wrote what it needs.
    pub async fn retarget(&self, tenant: &str, zone: &str) -> Result<u32, ScheduleError> {
        let mut n = 0;
        for old in self.list(tenant).await? {
            if old.paused {
                continue;
            }
            let now = self.clock.now_ms();
            let s = Schedule { ver: next_ver(Some(&old), now), since_ms: now, ..old.clone() };
            match self.write(&s, Some(&old), Some(zone)).await {
                Ok(()) => n += 1,
                Err(ScheduleError::Raced { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Removes a schedule (its due record fires nothing: the sweep drops it when it comes due);
    /// `false` when there was none.
    pub async fn remove(&self, tenant: &str, name: &str) -> Result<bool, ScheduleError> {
        let req = self
            .db
            .client()
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(def_pk(&self.job, tenant), name)))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld);
        Ok(self.db.delete(req).await?.attributes().is_some())
    }

    /// Removes every schedule of `tenant` (the tenant was removed); how many.
    pub async fn remove_all(&self, tenant: &str) -> Result<u32, ScheduleError> {
        let all = self.list(tenant).await?;
        let deletes: Vec<WriteRequest> =
            all.iter().map(|s| delete(key(def_pk(&self.job, tenant), &s.def.name))).collect();
        self.db.batch_write_all(&self.table, deletes, BATCH_ROUNDS).await?;
        Ok(all.len() as u32)
    }

    /// The definition (conditional on the version read) and its first record, committed with the
    /// state item ([`super::commit`]).
    async fn write(&self, s: &Schedule, old: Option<&Schedule>, zone: Option<&str>) -> Result<(), ScheduleError> {
        let record = match zone {
            Some(z) => first_record(s, z)?,
            None => None,
        };
        let def_put = match old {
            None => put_new_item(&self.table, s.to_item(&self.job)),
            Some(o) => {
                let put = aws_sdk_dynamodb::types::Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(s.to_item(&self.job)))
                    .condition_expression("#ver = :ver")
                    .expression_attribute_names("#ver", "ver")
                    .expression_attribute_values(":ver", av_n(o.ver))
                    .build()
                    .expect("put has table and item");
                aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build()
            }
        };
        let mut items = vec![def_put];
        if let Some(r) = &record {
            items.push(record_put(&self.table, &self.job, r));
        }
        match commit(&self.db, &self.table, &self.job, items, record.as_ref().map(|r| r.due_ms)).await? {
            Committed::Written => Ok(()),
            Committed::ConditionFailed(_) => {
                Err(ScheduleError::Raced { tenant: s.tenant.clone(), name: s.def.name.clone() })
            }
        }
    }
}

/// A due record's put, for a transaction.
pub(super) fn record_put(table: &str, job: &str, r: &DueRecord) -> aws_sdk_dynamodb::types::TransactWriteItem {
    let put = aws_sdk_dynamodb::types::Put::builder()
        .table_name(table)
        .set_item(Some(r.to_item(job)))
        .build()
        .expect("put has table and item");
    aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build()
}

/// A changed definition's `ver`: above the old one and at least the change's instant, so that a
/// schedule removed and added again never matches a record of its former self.
pub(super) fn next_ver(old: Option<&Schedule>, now_ms: Millis) -> u64 {
    let now = now_ms.max(0) as u64;
    old.map_or(now, |o| (o.ver + 1).max(now))
}

/// A one-off accepted this far inside the catch-up bound still reaches a tick before it passes.
pub const ONE_OFF_MARGIN_MS: Millis = 30 * 60_000;

fn delete(k: Item) -> WriteRequest {
    WriteRequest::builder().delete_request(DeleteRequest::builder().set_key(Some(k)).build().expect("key")).build()
}

pub(super) fn key_pair(k: &Item) -> (String, String) {
    let s = |a: &str| k.get(a).and_then(|v: &AttributeValue| v.as_s().ok()).cloned().unwrap_or_default();
    (s(PK), s(SK))
}

/// The keys a schedule's items will have (its definition's, and a due record's at the latest
/// instant a record can name), held to DynamoDB's key limits by [`crate::limits::key`] before
/// anything is written: a tenant id near its limit plus a name can exceed a sort key's 1,024
/// bytes.
fn check_keys(job: &str, tenant: &str, name: &str) -> Result<(), SpecError> {
    let latest = super::record::due_sk(jiff::Timestamp::MAX.as_millisecond(), tenant, name);
    for k in [key(def_pk(job, tenant), name), key(super::record::due_pk(job, 0), latest)] {
        crate::limits::key("PutItem", "control", &k).map_err(|e| {
            SpecError(format!(
                "tenant id ({} bytes) and name ({} bytes) make a key longer than DynamoDB allows: {}",
                tenant.len(),
                name.len(),
                e.rule
            ))
        })?;
    }
    Ok(())
}
