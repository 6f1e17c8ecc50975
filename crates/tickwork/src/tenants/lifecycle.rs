//! An operator's changes to one tenant: suspend, resume, move, remove. Each reads the tenant,
//! decides, and writes only if the tenant is still as read ([`crate::tenants::unchanged`]), again
//! when it changed in between, so a sweep's concurrent move is never overwritten.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::error::{condition_held, DbError};
use crate::schema::{av_s, PK};
use crate::tenants::schema::*;
use crate::tenants::store::{AddError, Tenants};
use crate::tenants::tenant::*;

impl Tenants {
    /// Where a tenant that follows its group stands, for an operator's change that takes it out
    /// of the group: the group's completed watermark, or [`Position::Fresh`] when the group never
    /// completed a run. Conservative: during a run, a tenant whose page is already done stands a
    /// day further, and that day is delivered again later (handlers are idempotent per pulse);
    /// never the other way round, which would lose it.
    async fn position_leaving(&self, t: &Tenant) -> Result<Position, DbError> {
        if t.pos != Position::Follows {
            return Ok(t.pos);
        }
        let Some((marks, job)) = &self.registry else { return Ok(Position::Follows) };
        let state = marks.read_strong(job).await?;
        let unreadable = |problem: String| DbError::Unreadable { table: marks.table().to_string(), problem };
        let added = match t.since_ms {
            Some(s) => {
                let tz = crate::calendar::zone(&t.zone).map_err(|e| unreadable(e.0))?;
                Some(crate::calendar::local_date(s, &tz).map_err(|e| unreadable(e.0))?)
            }
            None => None,
        };
        leaving(t.pos, state.marks.get(&t.zone).map(String::as_str), added).map_err(unreadable)
    }

    /// A conditional update of one tenant, applied only if it is still as read ([`unchanged`]):
    /// an operator's change and the sweep's never overwrite each other.
    async fn update_if_unchanged(&self, t: &Tenant, set: &[(&str, Option<String>)]) -> Result<bool, DbError> {
        let (cond, cond_names, cond_values) = unchanged(t);
        let (expr, names, values) = update_parts(set);
        let mut req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(&t.id))
            .update_expression(expr)
            .condition_expression(cond);
        for (k, v) in cond_names.into_iter().chain(names.iter().map(|(k, v)| (k.as_str(), *v))) {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in cond_values.into_iter().map(|(k, v)| (k.to_string(), v)).chain(values) {
            req = req.expression_attribute_values(k, v);
        }
        condition_held(self.db.update(req).await)
    }

    /// Reads, decides and conditionally writes, again if the tenant changed in between (the sweep
    /// brought it back to its group, another operator moved it): at most a few rounds.
    /// `leaves` says whether the change takes the tenant out of its group (its position must be
    /// recorded, which may cost a strong read of the state item); a resume does not.
    async fn change<F>(&self, id: &str, leaves: bool, decide: F) -> Result<Option<Tenant>, DbError>
    where
        F: Fn(&Tenant, Position) -> Option<Vec<(&'static str, Option<String>)>>,
    {
        const ATTEMPTS: u32 = 5;
        for _ in 0..ATTEMPTS {
            let Some(t) = self.get(id).await? else { return Ok(None) };
            let leaving = if leaves { self.position_leaving(&t).await? } else { t.pos };
            let Some(set) = decide(&t, leaving) else { return Ok(Some(t)) };
            if self.update_if_unchanged(&t, &set).await? {
                return Ok(Some(t));
            }
        }
        Err(DbError::Contended { what: format!("tenant `{id}`"), attempts: ATTEMPTS })
    }

    /// Suspends a tenant: out of both enumeration indexes (never visited), its zone and `since`
    /// kept, its position recorded (`Tenants::position_leaving`) so that resuming owes every
    /// period since. Returns `false` when there is no such tenant.
    pub async fn suspend(&self, id: &str) -> Result<bool, DbError> {
        let done = self.change(id, true, |t, leaving| t.active.then(|| suspend_set(leaving))).await?;
        Ok(done.is_some())
    }

    /// Resumes a suspended tenant in its zone: back in both indexes with the position it left
    /// with, and visited at the sweep's next tick; that visit owes every period since (the
    /// catch-up policy decides what a long suspension pulses).
    pub async fn resume(&self, id: &str) -> Result<bool, DbError> {
        let k = shard_of(id, self.write_count);
        let done = self.change(id, false, |t, _| (!t.active).then(|| resume_set(&t.zone, k))).await?;
        match (done, &self.registry) {
            (Some(t), Some((marks, job))) => {
                // Its zone registered again (idempotent): a tenant written by other means than
                // `add`, or kept through a reset of the registry, is still visited.
                marks.register_groups(job, std::slice::from_ref(&t.zone), self.write_count).await?;
                marks.wake(job, &t.zone, &t.id).await?;
                Ok(true)
            }
            (done, _) => Ok(done.is_some()),
        }
    }

    /// Moves a tenant to another zone, carrying its position: periods are named by local dates,
    /// so each is pulsed once whatever the move (a day already pulsed in the old zone is not
    /// pulsed again; one not yet pulsed is owed in the new). The new zone is registered first.
    pub async fn move_zone(&self, id: &str, zone: &str) -> Result<bool, AddError> {
        Tenant::new(id, zone).validate()?;
        let (marks, job) = self.registry.as_ref().ok_or(AddError::NoRegistry)?;
        marks.register_groups(job, &[zone.to_string()], self.write_count).await?;
        let k = shard_of(id, self.write_count);
        let done =
            self.change(id, true, |t, leaving| (t.zone != zone).then(|| move_set(t.active, zone, leaving, k))).await?;
        if let Some(t) = &done {
            if t.active {
                marks.wake(job, zone, id).await?;
            }
        }
        Ok(done.is_some())
    }

    /// Removes a tenant; `false` when there was none. Its queued work still runs (handlers find
    /// no tenant and decide); its archived history stays.
    pub async fn remove(&self, id: &str) -> Result<bool, DbError> {
        let req = self
            .db
            .client()
            .delete_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK);
        condition_held(self.db.delete(req).await)
    }
}

/// An attribute's new value, `None` to remove it.
type Set = Vec<(&'static str, Option<String>)>;

/// An update expression with the names and values it introduces.
type UpdateParts = (String, Vec<(String, &'static str)>, Vec<(String, AttributeValue)>);

/// Where a tenant at `pos` stands when it leaves its group, its group's watermark being `mark`
/// and the tenant added on local date `added`: a tenant with a position of its own keeps it; one
/// that follows stands through the group's last completed date, or through its day of adding
/// when that is later (added while the group's run for that day was in progress: the periods
/// before it ended before the tenant existed, and a position at the mark would owe them), or is
/// `Fresh` when the group never completed a run. An unreadable mark is an error, not `Fresh`:
/// that would owe the tenant every period since it was added. Pure.
fn leaving(pos: Position, mark: Option<&str>, added: Option<jiff::civil::Date>) -> Result<Position, String> {
    if pos != Position::Follows {
        return Ok(pos);
    }
    match mark {
        None => Ok(Position::Fresh),
        Some(m) => {
            let m: jiff::civil::Date = m.parse().map_err(|_| format!("watermark `{m}` is not a date"))?;
            Ok(Position::Through(added.map_or(m, |a| a.max(m))))
        }
    }
}

/// A suspension: out of both indexes, its position recorded. Pure.
fn suspend_set(leaving: Position) -> Set {
    vec![(STATUS, Some("suspended".into())), (POS, leaving.to_attr()), (TSHARD, None), (ZSHARD, None)]
}

/// A resume in `zone`: back in both indexes at shard `k`. Pure.
fn resume_set(zone: &str, k: u32) -> Set {
    vec![(STATUS, Some("active".into())), (TSHARD, Some(tshard_key(k))), (ZSHARD, Some(zshard_key(zone, k)))]
}

/// A move to `zone`, its position recorded; an active tenant moves in the zone index too. Pure.
fn move_set(active: bool, zone: &str, leaving: Position, k: u32) -> Set {
    let mut set = vec![(ZONE, Some(zone.to_string())), (POS, leaving.to_attr())];
    if active {
        set.push((ZSHARD, Some(zshard_key(zone, k))));
    }
    set
}

/// The update expression of `set`, with its names and values (beside [`unchanged`]'s, whose
/// names `#zone`, `#pos` and `#st` it reuses). Pure.
fn update_parts(set: &[(&str, Option<String>)]) -> UpdateParts {
    let (mut sets, mut removes, mut names, mut values) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, (attr, value)) in set.iter().enumerate() {
        let name = match *attr {
            ZONE => "#zone".to_string(),
            POS => "#pos".to_string(),
            STATUS => "#st".to_string(),
            other => {
                let n = format!("#a{i}");
                names.push((n.clone(), attr_name(other)));
                n
            }
        };
        match value {
            Some(v) => {
                values.push((format!(":v{i}"), av_s(v)));
                sets.push(format!("{name} = :v{i}"));
            }
            None => removes.push(name),
        }
    }
    let mut expr = String::new();
    if !sets.is_empty() {
        expr.push_str(&format!("SET {}", sets.join(", ")));
    }
    if !removes.is_empty() {
        expr.push_str(&format!(" REMOVE {}", removes.join(", ")));
    }
    (expr.trim().to_string(), names, values)
}

/// The static name of a tenant attribute (the sets only name the table's own attributes).
fn attr_name(a: &str) -> &'static str {
    [ZONE, STATUS, SINCE, POS, TSHARD, ZSHARD].into_iter().find(|n| *n == a).expect("a tenants attribute")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_leaving_its_group_stands_through_the_groups_watermark() {
        let d = |s: &str| s.parse::<jiff::civil::Date>().unwrap();
        let long_ago = Some(d("2026-01-01"));
        assert_eq!(leaving(Position::Follows, Some("2026-11-28"), long_ago), Ok(Position::Through(d("2026-11-28"))));
        assert_eq!(leaving(Position::Follows, None, long_ago), Ok(Position::Fresh), "the group never completed a run");
        let own = Position::Through(d("2026-11-20"));
        assert_eq!(leaving(own, Some("2026-11-28"), long_ago), Ok(own), "a position of its own is kept");
        assert!(
            leaving(Position::Follows, Some("garbage"), long_ago).is_err(),
            "not Fresh: that would owe every period"
        );
        // Added on the 29th while its group's run for the 29th was in progress (the mark still the
        // 28th): the 28th ended before it existed, so it stands through the 29th.
        let added = Some(d("2026-11-29"));
        assert_eq!(leaving(Position::Follows, Some("2026-11-28"), added), Ok(Position::Through(d("2026-11-29"))));
    }

    #[test]
    fn suspend_resume_and_move_write_their_attributes_and_index_keys() {
        let through = Position::Through("2026-11-28".parse().unwrap());
        let (expr, names, values) = update_parts(&suspend_set(through));
        assert_eq!(expr, "SET #st = :v0, #pos = :v1 REMOVE #a2, #a3");
        assert_eq!(names, [("#a2".to_string(), TSHARD), ("#a3".to_string(), ZSHARD)]);
        assert_eq!(
            values.iter().map(|(k, v)| (k.as_str(), v.as_s().unwrap().as_str())).collect::<Vec<_>>(),
            [(":v0", "suspended"), (":v1", "2026-11-28")]
        );
        let (expr, _, values) = update_parts(&resume_set("Asia/Tokyo", 3));
        assert_eq!(expr, "SET #st = :v0, #a1 = :v1, #a2 = :v2");
        assert_eq!(values[1].1.as_s().unwrap(), &tshard_key(3));
        assert_eq!(values[2].1.as_s().unwrap(), &zshard_key("Asia/Tokyo", 3));
        // A suspended tenant moves zone without entering the zone index; an active one moves in it.
        assert_eq!(move_set(false, "UTC", Position::Fresh, 1).len(), 2);
        assert_eq!(move_set(true, "UTC", Position::Fresh, 1)[2], (ZSHARD, Some(zshard_key("UTC", 1))));
        assert_eq!(move_set(true, "UTC", Position::Fresh, 1)[1], (POS, Position::Fresh.to_attr()));
    }
}
