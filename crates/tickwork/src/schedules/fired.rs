//! What a fixed one-off group's fire tells its schedules' writers. Its definitions stay until the
//! fire's cleaning deletes them, so a writer asks whether a one-off has fired before moving it
//! (a tenant's move would otherwise owe it again in the new zone); and a member the fire passed
//! over because its tenant moved, or does not read, has its definition unlinked from the group
//! (its `grp` removed), so the cleaning keeps it and a retarget owes it in the new zone.

use super::error::ScheduleError;
use super::record::{def_pk, head_key, Schedule, FIRED, FIRED_ALL, FIRING, GRP};
use super::store::Schedules;
use crate::error::{condition_held, DbError};
use crate::schema::{av_n, av_s, get_bool, get_s, key};

impl Schedules {
    /// Whether `s`, a one-off, has been fired by its group's fixed fire: its head firing, and
    /// every member fired or `s`'s tenant at or before the last fired (members are fired in order).
    pub async fn has_fired(&self, s: &Schedule) -> Result<bool, ScheduleError> {
        let Some(gid) = s.group.as_deref().filter(|_| s.def.spec.one_off()) else { return Ok(false) };
        let Some(head) = self.db.get_strong(&self.table, head_key(&self.job, gid)).await? else { return Ok(false) };
        Ok(head.contains_key(FIRING)
            && (get_bool(&head, FIRED_ALL).unwrap_or(false)
                || get_s(&head, FIRED).is_some_and(|f| s.tenant.as_str() <= f)))
    }

    /// Unlinks `tenant`'s definition `name` from group `gid` (removes its `grp`), only while it is
    /// still version `ver` of that group: `false` when it is not (changed since, or unlinked).
    pub async fn unlink(&self, tenant: &str, name: &str, ver: u64, gid: &str) -> Result<bool, DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(def_pk(&self.job, tenant), name)))
            .update_expression("REMOVE #grp")
            .condition_expression("#ver = :ver AND #grp = :gid")
            .expression_attribute_names("#ver", "ver")
            .expression_attribute_names("#grp", GRP)
            .expression_attribute_values(":ver", av_n(ver))
            .expression_attribute_values(":gid", av_s(gid));
        condition_held(self.db.update(req).await)
    }
}
