//! Many schedules at once (`tickctl schedules import`, an application's migration): each new
//! schedule's definition and membership written together, up to 49 schedules a transaction with
//! their groups' heads (counted, or put with the group's first record: its insert lowers
//! `sched_next` through the stream, [`super::lowering`]). A million schedules sharing a few
//! groups are about 20,000 requests (a read of the chunk's heads, and a transaction a chunk), not the four a schedule [`Schedules::put`] makes.
//!
//! A schedule that already exists is not overwritten here: its chunk's transaction is cancelled
//! by it, and that chunk is written one schedule at a time through [`Schedules::put`] (same
//! definition: unchanged; another: changed, owed from now). A crash between chunks loses
//! nothing: the written chunks are whole, and running the import again finds them unchanged.

use std::collections::BTreeMap;

use super::commit::{commit, Committed};
use super::error::{ScheduleError, SpecError};
use super::fire::member_of;
use super::record::{Group, Member, Schedule};
use super::spec::ScheduleDef;
use super::store::{next_ver, Changed, Schedules};
use super::writes::{member_put, written_record_put};
use crate::calendar::Policy;
use crate::error::DbError;
use crate::schema::put_new_item;

/// A transaction's writes at most: DynamoDB's 100, less one (the state item's, when writers wrote it:
/// kept so that chunks stay the size they were).
const MAX_WRITES: usize = 99;

/// Attempts of a chunk whose heads change between their read and its transaction.
const ATTEMPTS: u32 = 8;

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
        let mut firsts: Vec<(Schedule, Group, Member)> = Vec::with_capacity(rows.len());
        let mut seen = std::collections::HashSet::new();
        for (i, (tenant, zone, def)) in rows.iter().enumerate() {
            let row = |e: SpecError| SpecError(format!("row {} (`{tenant}` `{}`): {}", i + 1, def.name, e.0));
            self.check(tenant, zone, def, policy).map_err(row)?;
            if !seen.insert((tenant.as_str(), def.name.as_str())) {
                return Err(row(SpecError("named twice".into())).into());
            }
            let mut s = Schedule {
                tenant: tenant.clone(),
                def: def.clone(),
                paused: false,
                ver: next_ver(None, now),
                since_ms: now,
                group: None,
            };
            let (g, m) = member_of(&s, zone).map_err(row)?;
            s.group = Some(g.id());
            firsts.push((s, g, m));
        }
        let mut out = Imported::default();
        let mut at = 0;
        while at < firsts.len() {
            // Rows while their writes (two each, and two for each new group) fit a transaction.
            let (mut end, mut groups) = (at, std::collections::BTreeSet::new());
            while end < firsts.len() {
                let new_group = !groups.contains(&firsts[end].1.id());
                // And a shard cursor's check for each shard (4 at most).
                let writes = 2 * (end - at + 1) + 2 * (groups.len() + usize::from(new_group)) + 4;
                if writes > MAX_WRITES {
                    break;
                }
                groups.insert(firsts[end].1.id());
                end += 1;
            }
            let chunk = &firsts[at..end];
            match self.import_chunk(chunk).await? {
                true => out.added += chunk.len() as u64,
                // A schedule of the chunk exists: the chunk one schedule at a time.
                false => {
                    for (tenant, zone, def) in &rows[at..end] {
                        match self.put(tenant, zone, def.clone(), policy).await? {
                            Changed::Added => out.added += 1,
                            Changed::Changed => out.changed += 1,
                            Changed::Unchanged => out.unchanged += 1,
                        }
                    }
                }
            }
            at = end;
        }
        Ok(out)
    }

    /// One chunk of new schedules: `false` when one of them exists (nothing written).
    async fn import_chunk(&self, chunk: &[(Schedule, Group, Member)]) -> Result<bool, ScheduleError> {
        let mut by_group: BTreeMap<String, (&Group, &Member, u64)> = BTreeMap::new();
        for (_, g, m) in chunk {
            by_group.entry(g.id()).or_insert((g, m, 0)).2 += 1;
        }
        for _ in 0..ATTEMPTS {
            // Each group's generation joined first (one whose head is firing is passed for the
            // next): the definitions and memberships name it.
            let mut cursors = super::writes::Cursors::new();
            let mut joined: BTreeMap<String, String> = BTreeMap::new();
            let mut heads = Vec::new();
            for (base, (g, m, n)) in &by_group {
                // The group's first record owed after the earliest member's instant: every member
                // of an import is owed from the same `now`, or a one-off from its own instant.
                let first = chunk.iter().filter(|(_, cg, _)| cg.id() == *base).map(|(_, _, cm)| cm.owed_ms).min();
                let m = Member { owed_ms: first.unwrap_or(m.owed_ms), ..(*m).clone() };
                let (gen, head, record) = self.join_items(g, &m, *n, &mut cursors).await?;
                joined.insert(base.clone(), gen.id());
                heads.push(head);
                if let Some(r) = record {
                    heads.push(written_record_put(&self.table, &self.job, &r));
                }
            }
            let mut writes = Vec::new();
            for (s, g, m) in chunk {
                let gid = joined.get(&g.id()).cloned().unwrap_or_else(|| g.id());
                let s = Schedule { group: Some(gid.clone()), ..s.clone() };
                writes.push(put_new_item(&self.table, s.to_item(&self.job)));
                writes.push(member_put(&self.table, &self.job, &gid, m));
            }
            let defs = writes.len();
            writes.extend(heads);
            writes.extend(self.cursor_bumps(&cursors));
            match commit(&self.db, writes).await? {
                Committed::Written => return Ok(true),
                Committed::ConditionFailed(i) if i < defs => return Ok(false),
                Committed::ConditionFailed(_) => continue,
            }
        }
        Err(DbError::Contended { what: "the heads of an import's groups".into(), attempts: ATTEMPTS }.into())
    }
}
