//! What a fixed one-off group's fire tells its schedules' writers, and they it. Its definitions
//! stay until the fire's cleaning deletes them, so a writer asks whether a one-off has fired
//! before moving it (a tenant's move would otherwise owe it again in the new zone); a writer that
//! takes a member out of the fire before it is reached counts itself on the head (`leaves`), which
//! refuses a page that read the member; and a member the fire passed over because its tenant moved,
//! or does not read, has its definition unlinked from the group (its `grp` removed), so the
//! cleaning keeps it and a retarget owes it in the new zone.

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use super::error::ScheduleError;
use super::record::{def_pk, head_key, Schedule, FIRED, FIRED_ALL, FIRING, GRP, LEAVES};
use super::store::Schedules;
use crate::error::{condition_held, DbError};
use crate::item::Item;
use crate::schema::{av_n, av_s, get_bool, get_i64, get_s, key};

/// Whether a firing `head` says `tenant`'s member has been fired: every member, or the last fired
/// at or after it (members are fired in the order DynamoDB sorts their keys, by bytes, as `str`
/// compares). Pure.
fn fired(head: &Item, tenant: &str) -> bool {
    get_bool(head, FIRED_ALL).unwrap_or(false) || get_s(head, FIRED).is_some_and(|f| tenant <= f)
}

impl Schedules {
    /// Whether `s`, a one-off, has been fired by its group's fixed fire: its head firing, and
    /// every member fired or `s`'s tenant at or before the last fired.
    pub async fn has_fired(&self, s: &Schedule) -> Result<bool, ScheduleError> {
        let Some(gid) = s.group.as_deref().filter(|_| s.def.spec.one_off()) else { return Ok(false) };
        let Some(head) = self.db.get_strong(&self.table, head_key(&self.job, gid)).await? else { return Ok(false) };
        Ok(head.contains_key(FIRING) && fired(&head, &s.tenant))
    }

    /// Unlinks `tenant`'s definition `name` from group `gid` (removes its `grp`), only while it
    /// still names that group (and is version `ver`, when its member read): `false` when it is not.
    pub async fn unlink(&self, tenant: &str, name: &str, ver: Option<u64>, gid: &str) -> Result<bool, DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(def_pk(&self.job, tenant), name)))
            .update_expression("REMOVE #grp")
            .expression_attribute_names("#grp", GRP)
            .expression_attribute_values(":gid", av_s(gid));
        let req = match ver {
            Some(v) => req
                .condition_expression("#ver = :ver AND #grp = :gid")
                .expression_attribute_names("#ver", "ver")
                .expression_attribute_values(":ver", av_n(v)),
            None => req.condition_expression("#grp = :gid"),
        };
        condition_held(self.db.update(req).await)
    }

    /// How `s`, leaving its group (moved, paused, changed or removed), tells a fixed fire of it
    /// that has not reached it: the head's count of members that left moved on, for the writer's
    /// transaction, conditional on the head still firing and `s` not fired (a page of the fire
    /// that read `s` is refused, and read again without it). `None` when its group is not fixed,
    /// or `s` has fired (it is done: nothing to tell).
    pub(super) async fn leave_item(&self, s: &Schedule) -> Result<Option<TransactWriteItem>, ScheduleError> {
        let Some(gid) = s.group.as_deref().filter(|_| s.def.spec.one_off()) else { return Ok(None) };
        let Some(head) = self.db.get_strong(&self.table, head_key(&self.job, gid)).await? else { return Ok(None) };
        if !head.contains_key(FIRING) || fired(&head, &s.tenant) {
            return Ok(None);
        }
        let u = Update::builder()
            .table_name(&self.table)
            .set_key(Some(head_key(&self.job, gid)))
            .update_expression("ADD #lv :one")
            .condition_expression(
                "attribute_exists(#f) AND attribute_not_exists(#fa) AND (attribute_not_exists(#fd) OR #fd < :t)",
            )
            .expression_attribute_names("#lv", LEAVES)
            .expression_attribute_names("#f", FIRING)
            .expression_attribute_names("#fa", FIRED_ALL)
            .expression_attribute_names("#fd", FIRED)
            .expression_attribute_values(":one", av_n(1))
            .expression_attribute_values(":t", av_s(&s.tenant))
            .build()
            .expect("update is whole");
        Ok(Some(TransactWriteItem::builder().update(u).build()))
    }

    /// Group `gid`'s count of members that left it while fixed (strongly consistent; 0 when it has
    /// none, or no head): read before a fixed page, whose transaction is conditional on it.
    pub async fn head_leaves(&self, gid: &str) -> Result<i64, DbError> {
        let item = self.db.get_strong(&self.table, head_key(&self.job, gid)).await?;
        Ok(item.as_ref().and_then(|i| get_i64(i, LEAVES)).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_has_fired_when_every_member_has_or_the_last_fired_sorts_at_or_after_it() {
        let head = |fired: Option<&str>, all: bool| -> Item {
            let mut h = Item::new();
            h.extend(fired.map(|f| (FIRED.to_string(), av_s(f))));
            if all {
                h.insert(FIRED_ALL.to_string(), aws_sdk_dynamodb::types::AttributeValue::Bool(true));
            }
            h
        };
        assert!(fired(&head(Some("m0500"), false), "m0500") && fired(&head(Some("m0500"), false), "a"));
        assert!(!fired(&head(Some("m0500"), false), "m0501") && !fired(&head(None, false), "a"));
        assert!(fired(&head(Some("m0500"), true), "z"), "every member");
        // By bytes, as DynamoDB sorts sort keys: an upper-case id sorts before a lower-case one.
        assert!(fired(&head(Some("a"), false), "Z"));
    }
}
