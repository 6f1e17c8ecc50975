//! Schedules in the control table ([`super::record`] says which items): add, change, pause,
//! resume, remove, retarget to a tenant's new zone. Every change writes the definition, its
//! membership (out of its old group, into its new) and, for a group that has no head yet, the head
//! and the group's first due record, in one transaction of those items alone ([`super::commit`]);
//! the record's insert lowers `sched_next` through the table's stream ([`super::lowering`]),
//! whatever crashes after the commit. A join to a group that has a head counts itself on the head (`joins`): a sweep
//! that read the head before the join and found the group empty cannot delete it under the join.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};

use super::commit::{commit, Committed};
use super::error::{ScheduleError, SpecError};
use super::fire::{member_of, member_resumed, never_fires};
use super::record::{def_pk, member_pk, Schedule};
use super::spec::ScheduleDef;
use super::writes::{member_delete, member_put, written_record_put, Cursors};
use crate::calendar::Policy;
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
        let q = self.partition_query(pk);
        match below {
            Some(b) => q
                .key_condition_expression("#pk = :pk AND #sk < :to")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":to", av_s(b)),
            None => q.key_condition_expression("#pk = :pk"),
        }
    }

    /// A strongly consistent Query of partition `pk`, its key condition's sort key part to add.
    pub(super) fn partition_query(&self, pk: String) -> QueryFluentBuilder {
        self.db
            .client()
            .query()
            .table_name(&self.table)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":pk", av_s(pk))
            .consistent_read(true)
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
        let s = Schedule {
            tenant: tenant.to_string(),
            def,
            paused,
            ver: next_ver(old.as_ref(), now),
            since_ms: now,
            group: None,
        };
        self.write(&s, old.as_ref(), (!paused).then_some(zone), false).await?;
        Ok(if old.is_some() { Changed::Changed } else { Changed::Added })
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
        // A one-off its group's fire has fired is done, as it is once its cleaning deletes it.
        if self.has_fired(&old).await? {
            return Err(ScheduleError::NotFound { tenant: tenant.into(), name: name.into() });
        }
        let now = self.clock.now_ms();
        let s = Schedule { paused, ver: next_ver(Some(&old), now), since_ms: now, ..old.clone() };
        self.write(&s, Some(&old), (!paused).then_some(zone), true).await?;
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
            // Fired by its group's fire, its definition not yet cleaned: done, as the cleaning
            // would have it (moved, it would be owed again in the new zone).
            if self.has_fired(&old).await? {
                if self.remove(tenant, &old.def.name).await? {
                    n += 1;
                }
                continue;
            }
            let now = self.clock.now_ms();
            let s = Schedule { ver: next_ver(Some(&old), now), since_ms: now, ..old.clone() };
            let (g, m) = member_resumed(&s, zone)?;
            if never_fires(&g, &m)? {
                // A one-off whose instant has passed in the new zone, or that a skipped gap there
                // removes: what the sweep does with a one-off it passes over (the move happened;
                // refusing here would hold the tenant's other schedules in the old zone).
                tracing::warn!(tenant, schedule = %old.def.name, zone, "a one-off that can never fire in the tenant's new zone: removed");
                if self.remove(tenant, &old.def.name).await? {
                    n += 1;
                }
                continue;
            }
            match self.write(&s, Some(&old), Some(zone), true).await {
                Ok(()) => n += 1,
                Err(ScheduleError::Raced { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// Removes a schedule and its membership in one transaction (the group's record fires
    /// nothing for it); `false` when there was none.
    pub async fn remove(&self, tenant: &str, name: &str) -> Result<bool, ScheduleError> {
        for _ in 0..ATTEMPTS {
            let Some(old) = self.get(tenant, name).await? else { return Ok(false) };
            let del = aws_sdk_dynamodb::types::Delete::builder()
                .table_name(&self.table)
                .set_key(Some(key(def_pk(&self.job, tenant), name)))
                .condition_expression("#ver = :ver")
                .expression_attribute_names("#ver", "ver")
                .expression_attribute_values(":ver", av_n(old.ver))
                .build()
                .expect("delete has table and key");
            let mut items = vec![aws_sdk_dynamodb::types::TransactWriteItem::builder().delete(del).build()];
            items.extend(old.group.as_deref().map(|g| member_delete(&self.table, &self.job, g, tenant)));
            // Leaving a fixed fire that has not reached it (fired meanwhile: read again, and done).
            items.extend(self.leave_item(&old).await?);
            match self.db.transact_write(items).await {
                Ok(_) => return Ok(true),
                Err(DbError::TransactionCanceled { reasons }) if reasons.iter().any(|r| r.condition_failed()) => {
                    continue
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ScheduleError::Raced { tenant: tenant.into(), name: name.into() })
    }

    /// Removes every schedule of `tenant` (the tenant was removed); how many. Memberships first,
    /// then definitions: a removal stopped between leaves definitions that a second run finds,
    /// never a member that fires for a schedule no longer there.
    pub async fn remove_all(&self, tenant: &str) -> Result<u32, ScheduleError> {
        let all = self.list(tenant).await?;
        let members: Vec<WriteRequest> = all
            .iter()
            .filter_map(|s| s.group.as_deref())
            .map(|g| delete(key(member_pk(&self.job, g), tenant)))
            .collect();
        self.db.batch_write_all(&self.table, members, BATCH_ROUNDS).await?;
        let deletes: Vec<WriteRequest> =
            all.iter().map(|s| delete(key(def_pk(&self.job, tenant), &s.def.name))).collect();
        self.db.batch_write_all(&self.table, deletes, BATCH_ROUNDS).await?;
        Ok(all.len() as u32)
    }

    /// The definition (conditional on the version read), its membership, and the group's head
    /// and first record when it has no head, committed together ([`super::commit`]).
    /// A head that appeared or went between its read and the commit: read again and retried.
    /// `resumed`: a resume or a retarget (owed strictly after now, [`member_resumed`]). A one-off
    /// that its group could never fire is refused: written, it would be an active definition whose
    /// group has a head and no record, for ever.
    async fn write(
        &self,
        s: &Schedule,
        old: Option<&Schedule>,
        zone: Option<&str>,
        resumed: bool,
    ) -> Result<(), ScheduleError> {
        let joined = zone.map(|z| if resumed { member_resumed(s, z) } else { member_of(s, z) }).transpose()?;
        if let Some((g, m)) = &joined {
            if never_fires(g, m)? {
                return Err(SpecError(format!(
                    "`{}` can never fire in {} (its instant is past, or a skipped DST gap removes it): nothing written; remove it",
                    g.spec, g.zone
                ))
                .into());
            }
        }
        let raced = || ScheduleError::Raced { tenant: s.tenant.clone(), name: s.def.name.clone() };
        for _ in 0..ATTEMPTS {
            // The generation joined first: the definition names it.
            let mut cursors = Cursors::new();
            let join = match &joined {
                Some((g, m)) => Some((self.join_items(g, m, 1, &mut cursors).await?, m)),
                None => None,
            };
            let s = Schedule { group: join.as_ref().map(|((g, _, _), _)| g.id()), ..s.clone() };
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
            if let Some(og) = old.and_then(|o| o.group.as_deref()).filter(|og| Some(*og) != s.group.as_deref()) {
                items.push(member_delete(&self.table, &self.job, og, &s.tenant));
                // Leaving a fixed fire that has not reached it: its page, if read, is refused (a
                // page fired it meanwhile: this is refused, raced, and the caller reads again).
                if let Some(o) = old {
                    items.extend(self.leave_item(o).await?);
                }
            }
            let mut head_at = usize::MAX;
            if let Some(((g, joins, record), m)) = join {
                head_at = items.len() + 1;
                items.push(member_put(&self.table, &self.job, &g.id(), m));
                items.push(joins);
                if let Some(r) = record {
                    items.push(written_record_put(&self.table, &self.job, &r));
                }
                items.extend(self.cursor_bumps(&cursors));
            }
            match commit(&self.db, items).await? {
                Committed::Written => return Ok(()),
                // The head, or a shard's cursor, moved since it was read.
                Committed::ConditionFailed(i) if i >= head_at => continue,
                Committed::ConditionFailed(_) => return Err(raced()),
            }
        }
        Err(DbError::Contended { what: format!("the head of schedule `{}`'s group", s.def.name), attempts: ATTEMPTS }
            .into())
    }
}

/// Attempts when a group's head, or a shard's cursor, changes between its read and the
/// transaction.
const ATTEMPTS: u32 = 8;

/// A changed definition's `ver`: above the old one and at least the change's instant, so that a
/// schedule removed and added again never matches a record of its former self.
pub(super) fn next_ver(old: Option<&Schedule>, now_ms: Millis) -> u64 {
    let now = now_ms.max(0) as u64;
    old.map_or(now, |o| (o.ver + 1).max(now))
}

fn delete(k: Item) -> WriteRequest {
    WriteRequest::builder().delete_request(DeleteRequest::builder().set_key(Some(k)).build().expect("key")).build()
}
