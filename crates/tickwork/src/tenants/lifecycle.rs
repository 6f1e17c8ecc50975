//! An operator's changes to one tenant: suspend, resume, move, remove. Each reads the tenant,
//! decides, and writes only if the tenant is still as read ([`crate::tenants::unchanged`]), again
//! when it changed in between, so a sweep's concurrent move is never overwritten.

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
        Ok(match state.marks.get(&t.zone).and_then(|m| m.parse::<jiff::civil::Date>().ok()) {
            Some(d) => Position::Through(d),
            None => Position::Fresh,
        })
    }

    /// A conditional update of one tenant, applied only if it is still as read ([`unchanged`]):
    /// an operator's change and the sweep's never overwrite each other.
    async fn update_if_unchanged(&self, t: &Tenant, set: &[(&str, Option<String>)]) -> Result<bool, DbError> {
        let (cond, names, values) = unchanged(t);
        let mut req = self.db.client().update_item().table_name(&self.table).key(PK, av_s(&t.id));
        for (k, v) in names {
            req = req.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            req = req.expression_attribute_values(k, v);
        }
        let (mut sets, mut removes) = (Vec::new(), Vec::new());
        for (i, (attr, value)) in set.iter().enumerate() {
            let name = match *attr {
                ZONE => "#zone".to_string(),
                POS => "#pos".to_string(),
                STATUS => "#st".to_string(),
                other => {
                    let n = format!("#a{i}");
                    req = req.expression_attribute_names(&n, other);
                    n
                }
            };
            match value {
                Some(v) => {
                    req = req.expression_attribute_values(format!(":v{i}"), av_s(v));
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
        condition_held(self.db.update(req.update_expression(expr.trim()).condition_expression(cond)).await)
    }

    /// Reads, decides and conditionally writes, again if the tenant changed in between (the sweep
    /// brought it back to its group, another operator moved it): at most a few rounds.
    async fn change<F>(&self, id: &str, decide: F) -> Result<Option<Tenant>, DbError>
    where
        F: Fn(&Tenant, Position) -> Option<Vec<(&'static str, Option<String>)>>,
    {
        const ATTEMPTS: u32 = 5;
        for _ in 0..ATTEMPTS {
            let Some(t) = self.get(id).await? else { return Ok(None) };
            let leaving = self.position_leaving(&t).await?;
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
        let done = self
            .change(id, |t, leaving| {
                t.active.then(|| {
                    vec![
                        (STATUS, Some("suspended".to_string())),
                        (POS, leaving.to_attr()),
                        (TSHARD, None),
                        (ZSHARD, None),
                    ]
                })
            })
            .await?;
        Ok(done.is_some())
    }

    /// Resumes a suspended tenant in its zone: back in both indexes with the position it left
    /// with, and visited at the sweep's next tick; that visit owes every period since (the
    /// catch-up policy decides what a long suspension pulses).
    pub async fn resume(&self, id: &str) -> Result<bool, DbError> {
        let k = shard_of(id, self.write_count);
        let done = self
            .change(id, |t, _| {
                (!t.active).then(|| {
                    vec![
                        (STATUS, Some("active".to_string())),
                        (TSHARD, Some(tshard_key(k))),
                        (ZSHARD, Some(zshard_key(&t.zone, k))),
                    ]
                })
            })
            .await?;
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
        let done = self
            .change(id, |t, leaving| {
                (t.zone != zone).then(|| {
                    let mut set = vec![(ZONE, Some(zone.to_string())), (POS, leaving.to_attr())];
                    if t.active {
                        set.push((ZSHARD, Some(zshard_key(zone, k))));
                    }
                    set
                })
            })
            .await?;
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
