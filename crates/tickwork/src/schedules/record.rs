//! How schedules are stored: a definition per (tenant, name); tenants whose schedules share a
//! (zone, spec, DST policy, name, spread offset) are members of one **group**, and the due index
//! holds one record per group, not per schedule. Keys and item codecs, pure.
//!
//! ## Items (control table)
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | definition | `sched#<job>#<tenant>` | `<name>` |
//! | member | `smem#<job>#<group>` | `<tenant>` |
//! | group head | `shead#<job>#<group>` | `-` |
//! | due record | `sdue#<job>#<k>` | `<position ms, 15 digits>#<group>` |
//! | shard cursor | `sdue#<job>#<k>` | `~` (after every record) |
//!
//! Why groups: a million tenants' `daily 08:00` in one zone are one due record and one fire a
//! day, whose members are read a page (a thousand) at a time and handed to the queue as batch
//! items of shared units, like the calendar's zone groups. A fire then costs its unit's bytes in a
//! batch item, not a record replaced per tenant (about 4 write units before groups).
//!
//! Why the control table: the sweep that fires them already reads it strongly consistently (a due
//! record just written is seen, where an index would lag and a schedule could fire a day late),
//! and its key prefixes are what the template's IAM conditions name. The due index is the sort key
//! itself, so "what is due by now" is one key condition on each of [`DUE_SHARDS`] partitions.
//!
//! Why a cursor: the due index is a log read forward. A fired record is not deleted in the
//! transaction that queues its fires — the shard's cursor moves past it there, and it is deleted
//! by a plain batch delete after — and its successor, which depends on the record alone, is put
//! before that transaction, outside it. A transactional delete and put were 4 of the 4.3 write
//! units a fire of a group of one cost; a plain put and a plain delete are 2.
//!
//! Why no `ttl` on a record: a record not fired yet is its group's only link to the sweep, and a
//! sweep stopped longer than any expiry (a forgotten pause, `DryRun` left on) would come back to
//! heads with no records, groups that never fire again and that no join repairs. A record is
//! removed only once the cursor has passed it; one whose delete was lost (a crash just after its
//! transaction) lies behind the cursor, read by nothing. Every record is written at a position after the shard's cursor (a writer
//! reads the cursor and checks it in its transaction), so the cursor never passes one unread.
//!
//! ## Invariants
//! - A definition that is active names its group (`grp`), and the group holds it as a member;
//!   both are written in one transaction (a change moves the member from its old group to its new).
//! - A group has a head exactly while it has a due record: a writer that finds no head writes the
//!   head and the group's first record together; the sweep deletes both together, when a group is
//!   found empty or a one-off group is done. Two records of one group would fire its members twice.
//! - A member carries the instant its schedule is owed from: a group's fire hands over an
//!   occurrence only to the members owed it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::occurrence::spread_ms;
use super::spec::{Dst, ScheduleDef, Spec, SpecError};
use crate::clock::Millis;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_bool, get_i64, get_s, PK, SK};

/// Queue item kind of schedules' fires, and the first part of a fire's unit key
/// (`sched#<tenant>#<name>#<occurrence>`): the worker's handler for it is registered under this.
pub const SCHED_KIND: &str = "sched";

/// Partitions the due records spread over: groups due at one minute are written across them, and
/// the sweep fires them at once, each a partition of its own (at most 1,000 write units a second
/// each: a burst of a million distinct timers spends 2 million, 251 s over 8). A firing tick
/// reads each shard's first record, so more shards cost every firing tick a read more each. A
/// record carries the shard it was written in ([`DueRecord::shard`], read from its key), so a
/// count raised later strands nothing: records written under the old count (4, before 2026-12)
/// stay in shards below it, which are still read, and their successors go where the new count
/// puts them. Never lowered: records in the shards above it would not be read.
pub const DUE_SHARDS: u32 = 8;

/// A stored schedule: its definition, whose it is, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The tenant.
    pub tenant: String,
    /// What it says.
    pub def: ScheduleDef,
    /// Paused: in no group, nothing fires.
    pub paused: bool,
    /// Moves on every change.
    pub ver: u64,
    /// Occurrences at or before this instant are not owed (when it was added or last changed).
    pub since_ms: Millis,
    /// The group it is a member of ([`Group::id`]); none while paused.
    pub group: Option<String>,
}

/// What the members of a group share: everything that decides a fire's instant and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The zone its occurrences are computed in (the members' tenants', when they joined).
    pub zone: String,
    /// The spec.
    pub spec: Spec,
    /// The DST policy.
    pub dst: Dst,
    /// The schedules' name (a unit's key holds it).
    pub name: String,
    /// The members' spread offset ([`spread_ms`]: whole minutes, so a 30-minute spread makes at
    /// most 30 groups of a (zone, spec, name)).
    pub offset_ms: Millis,
    /// The payload every fire of it delivers (canonical JSON text): members share it, so tenants
    /// with distinct payloads are distinct groups.
    pub payload: Option<String>,
    /// Its generation: 0, or the next after a generation whose one-off fire has fixed its members
    /// (its head `firing`): a join that finds a head firing joins the next generation, a group of
    /// its own with its own head and record, so a firing group's members can be paged behind a
    /// cursor and none who joined after its first page is passed over.
    pub gen: u32,
}

/// A member of a group: one tenant's schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The tenant.
    pub tenant: String,
    /// The definition's `ver` (a finished one-off's definition is deleted at it).
    pub ver: u64,
    /// When the schedule was added or last changed (a fire is not expected before it).
    pub since_ms: Millis,
    /// Occurrences after this instant are owed to it.
    pub owed_ms: Millis,
}

/// A group's next fire, waiting in the due index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueRecord {
    /// When it is due: its occurrence's instant plus the group's spread offset.
    pub due_ms: Millis,
    /// Where it sorts (at or after `due_ms`): after the shard's cursor when it was written, so
    /// that a record due before the sweep's last position is still read (then at once).
    pub pos_ms: Millis,
    /// The group.
    pub group: Group,
    /// Occurrences at or before this instant were handled (fired or passed over).
    pub after_ms: Millis,
    /// The last member this record's fire handed over, while a large group is fired a page at a
    /// time (a crash resumes after it).
    pub cursor: Option<String>,
    /// The instant its fire was planned at, once its first page was written: a later tick resumes
    /// the same plan (planned again at its own `now`, the members before the cursor would miss
    /// what came due since).
    pub plan_at: Option<Millis>,
    /// The due shard it is in, read from its key; `None` for a record not yet written, which goes
    /// where its group's id puts it ([`due_shard`]). A record read keeps its own, so it is
    /// written, moved and deleted where it is even after [`DUE_SHARDS`] changed.
    pub shard: Option<u32>,
    /// Where a one-off group's fire is ([`Stage`]).
    pub stage: Stage,
    /// Members that left its fixed group (the head's `leaves`), as the sweep read them before
    /// this page: the page's transaction is conditional on it, so a member moved, paused or
    /// removed while its page was read is not fired there (and again where it went). Not stored.
    pub leaves_seen: Option<i64>,
}

/// Where a one-off group's fire is. A recurring group's record is always [`Stage::Open`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stage {
    /// Members may join: a one-off's page reads its group from the start, a few members
    /// ([`ONE_OFF_FIRST_PAGE`]): fewer, all of them, and the group is retired with its members and
    /// definitions in that page's transaction; else the group is fixed, in a transaction of its own.
    #[default]
    Open,
    /// Its fix marked the head `firing` at the joins read just before it: no member joins it any
    /// more, so its members are paged from its start behind the record's cursor a thousand a
    /// transaction, as a recurring group's, and none is deleted as it fires.
    Fixed,
    /// Every member fired: the record, moved after the fire, leads the cleaning of its members
    /// and their definitions (plain deletes, outside any transaction, after the lease is let go);
    /// a visit that finds no member left closes the group: the record deleted, the head left
    /// firing to expire once no one can join its one-off.
    Cleaning,
}

/// Members a one-off group's first page reads: a group of fewer is fired and retired in one
/// transaction, its members' memberships and definitions deleted in it (two writes each, within
/// DynamoDB's 100 a transaction); a larger one is fixed by that page ([`Stage::Fixed`]).
pub const ONE_OFF_FIRST_PAGE: usize = 40;

/// The definition item's `pk` for `tenant`'s schedules.
pub fn def_pk(job: &str, tenant: &str) -> String {
    format!("sched#{job}#{tenant}")
}

/// The members' partition of group `gid`.
pub fn member_pk(job: &str, gid: &str) -> String {
    format!("smem#{job}#{gid}")
}

/// Group `gid`'s head item's key.
pub fn head_key(job: &str, gid: &str) -> Item {
    crate::schema::key(format!("shead#{job}#{gid}"), "-")
}

/// The due partition of shard `k`.
pub fn due_pk(job: &str, k: u32) -> String {
    format!("sdue#{job}#{k}")
}

/// The shard of group `gid`'s due records: stable, from its id (itself a digest).
pub fn due_shard(gid: &str) -> u32 {
    let n = u32::from_str_radix(gid.get(..8).unwrap_or("0"), 16).unwrap_or(0);
    n % DUE_SHARDS
}

/// The shard a due partition's key names (`sdue#<job>#<k>`). Pure.
pub fn shard_of_pk(pk: &str) -> Option<u32> {
    pk.strip_prefix("sdue#")?.rsplit_once('#')?.1.parse().ok()
}

/// A due record's sort key: due instant first, so "due by now" is a key condition. Fifteen digits:
/// every instant up to the year 9999 (the latest a one-off can name) sorts by its value.
pub fn due_sk(due_ms: Millis, gid: &str) -> String {
    format!("{:015}#{gid}", due_ms.max(0))
}

/// The shard cursor's sort key: after every record's.
pub const CURSOR_SK: &str = "~";

/// Shard `k`'s cursor item's key.
pub fn cursor_key(job: &str, k: u32) -> Item {
    crate::schema::key(due_pk(job, k), CURSOR_SK)
}

/// The position a sort key names (its first 15 digits).
pub fn pos_of(sk: &str) -> Option<Millis> {
    sk.get(..15).and_then(|d| d.parse().ok())
}

/// The exclusive upper bound of the sort keys due at or before `now_ms`.
pub fn due_bound(now_ms: Millis) -> String {
    format!("{:015}", now_ms.max(0) + 1)
}

const SPEC: &str = "spec";
const SPREAD: &str = "spread";
const GAP: &str = "gap";
const FOLD: &str = "fold";
const PAUSED: &str = "paused";
const VER: &str = "ver";
const SINCE: &str = "since";
const TENANT: &str = "tenant";
const NAME: &str = "name";
const ZONE: &str = "zone";
const AFTER: &str = "after";
const DUE: &str = "due";
/// The definition's group attribute (a fired one-off's cleaning deletes a definition only while it names the group).
pub const GRP: &str = "grp";
const OFFSET: &str = "offset";
const OWED: &str = "owed";
const PAYLOAD: &str = "payload";
const GEN: &str = "gen";
/// The record's stage attribute ([`Stage`]; the sweep's update of a record names it).
pub const STAGE: &str = "stage";
/// The head's mark that its one-off group's fire has fixed its members ([`Stage::Fixed`]): a join
/// is conditional on its absence. A fixed group's head stays after the group is retired, to
/// expire (`ttl`) once no one can join its one-off any more: that generation is never made again,
/// so nothing its cleaning reads can be a later member.
pub const FIRING: &str = "firing";
/// A firing head's last member fired (members are fired in their order): a schedule of the group
/// at or before it has fired.
pub const FIRED: &str = "fired";
/// A firing head's mark that every member was fired.
pub const FIRED_ALL: &str = "fired_all";
/// A firing head's count of members that left it before they were fired (a writer's move,
/// pause or removal).
pub const LEAVES: &str = "leaves";
/// What separates a group's id from its generation's number.
const GEN_MARK: &str = "-g";
/// The record's member cursor attribute (the sweep's conditions name it).
pub const CURSOR: &str = "cursor";
/// The shard cursor item's attribute: the sort key of the last record handled.
pub const CUR: &str = "cur";
/// The shard cursor item's count of records written after it by writers (a sweep's move is
/// conditional on it: a record written while the sweep read its page is read before the cursor
/// passes it).
pub const WRITES: &str = "w";
/// The attribute that marks a due record a writer (not the sweep) inserted: the stream's filter
/// passes only records that carry it ([`super::lowering`]).
pub const BY: &str = "by";
/// [`BY`]'s value on a writer's record.
pub const BY_WRITER: &str = "writer";
/// The record's planned-at attribute.
pub const PLAN_AT: &str = "at";
const POS: &str = "pos";
/// The head's count of members that joined (a writer's join moves it, so the sweep's deletion of
/// a head it read before the join is refused).
pub const JOINS: &str = "joins";

impl Schedule {
    /// The definition item.
    pub fn to_item(&self, job: &str) -> Item {
        let mut item = HashMap::from([
            (PK.to_string(), av_s(def_pk(job, &self.tenant))),
            (SK.to_string(), av_s(&self.def.name)),
            (TENANT.to_string(), av_s(&self.tenant)),
            (SPEC.to_string(), av_s(self.def.spec.to_string())),
            (SPREAD.to_string(), av_n(self.def.spread_min)),
            (GAP.to_string(), av_s(self.def.dst.gap.to_string())),
            (FOLD.to_string(), av_s(self.def.dst.fold.to_string())),
            (PAUSED.to_string(), AttributeValue::Bool(self.paused)),
            (VER.to_string(), av_n(self.ver)),
            (SINCE.to_string(), av_n(self.since_ms)),
        ]);
        if let Some(g) = &self.group {
            item.insert(GRP.to_string(), av_s(g));
        }
        if let Some(p) = &self.def.payload {
            item.insert(PAYLOAD.to_string(), av_s(p));
        }
        item
    }

    /// A definition item read back; an error names what is wrong with it.
    pub fn from_item(item: &Item) -> Result<Self, SpecError> {
        let s = |n: &str| get_s(item, n).ok_or_else(|| SpecError(format!("schedule item without `{n}`")));
        let name = get_s(item, SK).ok_or_else(|| SpecError("schedule item without its name".into()))?;
        let spec: Spec = s(SPEC)?.parse()?;
        let dst = Dst { gap: s(GAP)?.parse()?, fold: s(FOLD)?.parse()? };
        let spread = get_i64(item, SPREAD).unwrap_or(0).clamp(0, u32::MAX as i64) as u32;
        Ok(Schedule {
            tenant: s(TENANT)?.to_string(),
            def: ScheduleDef {
                name: name.to_string(),
                spec,
                spread_min: spread,
                dst,
                payload: get_s(item, PAYLOAD).map(str::to_string),
            },
            paused: get_bool(item, PAUSED).unwrap_or(false),
            ver: get_i64(item, VER).unwrap_or(0).max(0) as u64,
            since_ms: get_i64(item, SINCE).unwrap_or(0),
            group: get_s(item, GRP).map(str::to_string),
        })
    }

    /// The definition is the same as `other` asks for (an add that changes nothing writes nothing).
    pub fn same_def(&self, other: &ScheduleDef) -> bool {
        self.def.spec.to_string() == other.spec.to_string()
            && self.def.spread_min == other.spread_min
            && self.def.dst == other.dst
            && self.def.payload == other.payload
    }
}

impl Group {
    /// The group of `tenant`'s schedule `def` in `zone`.
    pub fn of(tenant: &str, def: &ScheduleDef, zone: &str) -> Group {
        Group {
            zone: zone.to_string(),
            spec: def.spec.clone(),
            dst: def.dst,
            name: def.name.clone(),
            offset_ms: spread_ms(tenant, &def.name, def.spread_min),
            payload: def.payload.clone(),
            gen: 0,
        }
    }

    /// Its id: a digest of what its members share (SHA-256, the first 16 bytes in hex), so that
    /// every writer finds one group for one (zone, spec, policy, name, offset).
    pub fn id(&self) -> String {
        use sha2::Digest;
        let mut text = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.zone, self.spec, self.dst.gap, self.dst.fold, self.name, self.offset_ms
        );
        // Only when there is one: a group without a payload keeps the id it had before payloads.
        if let Some(p) = &self.payload {
            text.push('\n');
            text.push_str(p);
        }
        let d = sha2::Sha256::digest(text.as_bytes());
        let id: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
        // Only past the first: generation 0 keeps the id it had before generations, and a later
        // one is the same digest, so its records go to the same due shard.
        if self.gen > 0 {
            format!("{id}{GEN_MARK}{}", self.gen)
        } else {
            id
        }
    }

    /// The id of generation 0 of the group whose (any generation's) id is `gid`.
    pub fn base_id(gid: &str) -> &str {
        gid.split_once(GEN_MARK).map_or(gid, |(base, _)| base)
    }

    fn write_to(&self, item: &mut Item) {
        item.extend([
            (ZONE.to_string(), av_s(&self.zone)),
            (SPEC.to_string(), av_s(self.spec.to_string())),
            (GAP.to_string(), av_s(self.dst.gap.to_string())),
            (FOLD.to_string(), av_s(self.dst.fold.to_string())),
            (NAME.to_string(), av_s(&self.name)),
            (OFFSET.to_string(), av_n(self.offset_ms)),
        ]);
        if let Some(p) = &self.payload {
            item.insert(PAYLOAD.to_string(), av_s(p));
        }
        if self.gen > 0 {
            item.insert(GEN.to_string(), av_n(self.gen));
        }
    }

    /// The same group's next generation (where a join goes when this one's head is firing).
    pub fn next_gen(&self) -> Group {
        self.with_gen(self.gen + 1)
    }

    /// The same group's generation `gen`.
    pub fn with_gen(&self, gen: u32) -> Group {
        Group { gen, ..self.clone() }
    }

    /// What every unit of its fires carries beside its key: the payload, parsed (a record whose
    /// text does not parse delivers it as a string rather than lose it).
    pub fn unit_fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Some(p) = &self.payload {
            let v = serde_json::from_str(p).unwrap_or_else(|_| serde_json::Value::String(p.clone()));
            m.insert("payload".into(), v);
        }
        m
    }

    pub(super) fn read_from(item: &Item) -> Result<Group, SpecError> {
        let s = |n: &str| get_s(item, n).ok_or_else(|| SpecError(format!("group item without `{n}`")));
        Ok(Group {
            zone: s(ZONE)?.to_string(),
            spec: s(SPEC)?.parse()?,
            dst: Dst { gap: s(GAP)?.parse()?, fold: s(FOLD)?.parse()? },
            name: s(NAME)?.to_string(),
            offset_ms: get_i64(item, OFFSET).ok_or_else(|| SpecError("group item without `offset`".into()))?,
            payload: get_s(item, PAYLOAD).map(str::to_string),
            gen: get_i64(item, GEN).unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32,
        })
    }

    /// The head item of a group with one member joined (what its first writer puts).
    pub fn head_item(&self, job: &str) -> Item {
        let mut item = head_key(job, &self.id());
        self.write_to(&mut item);
        item.insert(JOINS.to_string(), av_n(1));
        item
    }
}

impl Member {
    /// The member item in group `gid`.
    pub fn to_item(&self, job: &str, gid: &str) -> Item {
        HashMap::from([
            (PK.to_string(), av_s(member_pk(job, gid))),
            (SK.to_string(), av_s(&self.tenant)),
            (VER.to_string(), av_n(self.ver)),
            (SINCE.to_string(), av_n(self.since_ms)),
            (OWED.to_string(), av_n(self.owed_ms)),
        ])
    }

    /// A member read back.
    pub fn from_item(item: &Item) -> Result<Self, SpecError> {
        let n = |n: &str| get_i64(item, n).ok_or_else(|| SpecError(format!("member without `{n}`")));
        Ok(Member {
            tenant: get_s(item, SK).ok_or_else(|| SpecError("member without its tenant".into()))?.to_string(),
            ver: n(VER)?.max(0) as u64,
            since_ms: n(SINCE)?,
            owed_ms: n(OWED)?,
        })
    }
}

impl DueRecord {
    /// The due shard it is (or goes) in.
    pub fn shard(&self) -> u32 {
        self.shard.unwrap_or_else(|| due_shard(&self.group.id()))
    }

    /// Where an attempt of a release before this one would have put `next`, this record's
    /// successor: beside this record, when this one was written under another shard count (its
    /// shard is not its group's now); `None` when it was not, or `next` goes there anyway. Pure.
    pub fn successor_beside(&self, next: &DueRecord) -> Option<DueRecord> {
        let here = self.shard();
        (here != due_shard(&self.group.id()) && next.shard() != here)
            .then(|| DueRecord { shard: Some(here), ..next.clone() })
    }

    /// The record's key.
    pub fn key(&self, job: &str) -> Item {
        let gid = self.group.id();
        HashMap::from([
            (PK.to_string(), av_s(due_pk(job, self.shard()))),
            (SK.to_string(), av_s(due_sk(self.pos_ms, &gid))),
        ])
    }

    /// The record item.
    pub fn to_item(&self, job: &str) -> Item {
        let mut item = self.key(job);
        self.group.write_to(&mut item);
        item.extend([
            (AFTER.to_string(), av_n(self.after_ms)),
            (DUE.to_string(), av_n(self.due_ms)),
            (POS.to_string(), av_n(self.pos_ms)),
        ]);
        if let Some(c) = &self.cursor {
            item.insert(CURSOR.to_string(), av_s(c));
        }
        if let Some(at) = self.plan_at {
            item.insert(PLAN_AT.to_string(), av_n(at));
        }
        if let Some(st) = self.stage.as_attr() {
            item.insert(STAGE.to_string(), av_s(st));
        }
        item
    }

    /// A record read back.
    pub fn from_item(item: &Item) -> Result<Self, SpecError> {
        let n = |n: &str| get_i64(item, n).ok_or_else(|| SpecError(format!("due record without `{n}`")));
        let due_ms = n(DUE)?;
        Ok(DueRecord {
            due_ms,
            pos_ms: get_i64(item, POS).unwrap_or(due_ms),
            group: Group::read_from(item)?,
            after_ms: n(AFTER)?,
            cursor: get_s(item, CURSOR).map(str::to_string),
            plan_at: get_i64(item, PLAN_AT),
            shard: get_s(item, PK).and_then(shard_of_pk),
            stage: Stage::from_attr(get_s(item, STAGE))?,
            leaves_seen: None,
        })
    }
}

impl Stage {
    /// The record's `stage` attribute (none while open).
    pub fn as_attr(self) -> Option<&'static str> {
        match self {
            Stage::Open => None,
            Stage::Fixed => Some(STAGE_FIXED),
            Stage::Cleaning => Some(STAGE_CLEANING),
        }
    }

    /// Read back: a stage this version does not know does not read (the record is set aside, not
    /// fired as if open).
    pub(super) fn from_attr(v: Option<&str>) -> Result<Stage, SpecError> {
        match v {
            None => Ok(Stage::Open),
            Some(STAGE_FIXED) => Ok(Stage::Fixed),
            Some(STAGE_CLEANING) => Ok(Stage::Cleaning),
            Some(other) => Err(SpecError(format!("due record of an unknown stage `{other}`"))),
        }
    }
}

/// [`Stage::Fixed`]'s attribute value (the sweep's update of a record names it).
pub const STAGE_FIXED: &str = "fixed";
const STAGE_CLEANING: &str = "cleaning";

#[cfg(test)]
mod tests {
    use super::*;

    fn group(zone: &str, tenant: &str, spread: u32) -> Group {
        let def = ScheduleDef::new("nudge", "weekly mon-fri 08:00".parse().unwrap(), spread, Dst::default()).unwrap();
        Group::of(tenant, &def, zone)
    }

    #[test]
    fn items_read_back_and_due_keys_sort_by_instant() {
        let def = ScheduleDef::new("nudge", "weekly mon-fri 08:00".parse().unwrap(), 30, Dst::default()).unwrap();
        let s =
            Schedule { tenant: "acme".into(), def, paused: false, ver: 3, since_ms: 1_000, group: Some("ab".into()) };
        assert_eq!(Schedule::from_item(&s.to_item("pulse-sweep")).unwrap(), s);
        // A payload is kept with the definition and makes its own group; none keeps the old id.
        let with = s.def.clone().with_payload(Some(&serde_json::json!({"b": 1, "a": "x"}))).unwrap();
        assert_eq!(with.payload.as_deref(), Some(r#"{"a":"x","b":1}"#), "canonical text");
        let s2 = Schedule { def: with.clone(), ..s.clone() };
        assert_eq!(Schedule::from_item(&s2.to_item("pulse-sweep")).unwrap(), s2);
        assert!(!s.same_def(&with) && s2.same_def(&with));
        let (plain, paid) = (Group::of("acme", &s.def, "UTC"), Group::of("acme", &with, "UTC"));
        assert_eq!(plain.id(), "054872e1c66482749ce3e4300e171f5b", "the id it had before payloads");
        assert_ne!(plain.id(), paid.id());
        assert_eq!(paid.unit_fields()["payload"], serde_json::json!({"a": "x", "b": 1}));
        assert!(plain.unit_fields().is_empty());
        let too_big = serde_json::Value::String("x".repeat(crate::schedules::MAX_PAYLOAD_BYTES));
        assert!(s.def.clone().with_payload(Some(&too_big)).is_err());
        // Nested past what the queue item could carry and read back: refused, not stored.
        let nest = |n: usize| {
            serde_json::from_str::<serde_json::Value>(&format!("{}{}", "[".repeat(n), "]".repeat(n))).unwrap()
        };
        assert!(s.def.clone().with_payload(Some(&nest(32))).is_ok());
        assert!(s.def.clone().with_payload(Some(&nest(33))).is_err());
        assert_eq!(s.def.clone().with_payload(Some(&serde_json::Value::Null)).unwrap().payload, None);
        let r = DueRecord {
            due_ms: 1_796_000_000_000,
            pos_ms: 1_796_000_000_500,
            group: group("Europe/Berlin", "acme", 30),
            after_ms: 5,
            cursor: Some("t9".into()),
            plan_at: Some(7),
            shard: None,
            stage: Stage::Fixed,
            leaves_seen: None,
        };
        let item = r.to_item("pulse-sweep");
        // Read back with the shard its key names: the one its group's id gives.
        let read = DueRecord::from_item(&item).unwrap();
        assert_eq!(read, DueRecord { shard: Some(due_shard(&r.group.id())), ..r.clone() });
        assert_eq!((read.key("pulse-sweep"), read.shard()), (r.key("pulse-sweep"), r.shard()));
        assert!(get_s(&item, PK).unwrap().starts_with("sdue#pulse-sweep#"));
        assert_eq!(pos_of(get_s(&item, SK).unwrap()), Some(r.pos_ms), "sorted by its position");
        // A later generation is a group of its own, read back with its generation; a stage this
        // version does not know does not read.
        let next = DueRecord { group: r.group.next_gen(), stage: Stage::Cleaning, ..r.clone() };
        assert_ne!(next.group.id(), r.group.id());
        assert_eq!(next.group.next_gen().gen, 2);
        assert_eq!(DueRecord::from_item(&next.to_item("j")).unwrap(), DueRecord { shard: Some(next.shard()), ..next });
        assert_eq!(Group::read_from(&r.group.head_item("j")).unwrap().gen, 0);
        let mut odd = item.clone();
        odd.insert(STAGE.into(), av_s("later"));
        assert!(DueRecord::from_item(&odd).unwrap_err().0.contains("unknown stage `later`"));
        assert!(get_s(&item, SK).unwrap() < CURSOR_SK, "the cursor sorts after every record");
        let m = Member { tenant: "acme".into(), ver: 3, since_ms: 7, owed_ms: 6 };
        assert_eq!(Member::from_item(&m.to_item("pulse-sweep", "g")).unwrap(), m);
        // Due at or before `now` sorts below the bound; a millisecond later does not.
        let sk = due_sk(r.due_ms, "g");
        assert!(sk.as_str() < due_bound(r.due_ms).as_str());
        assert!(sk.as_str() >= due_bound(r.due_ms - 1).as_str());
        assert!(due_sk(999, "ff") < due_sk(1_000, "00"), "zero-padded: the instant decides");
        // A one-off in 2300 (14 digits of milliseconds) sorts after today's records.
        let y2300 = "2300-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        assert!(due_sk(y2300, "00") > due_sk(r.due_ms, "ff"));
    }

    #[test]
    fn tenants_sharing_zone_spec_name_and_offset_share_a_group_and_others_do_not() {
        let a = group("Europe/Berlin", "acme", 0);
        assert_eq!(a.id(), group("Europe/Berlin", "beta", 0).id(), "no spread: one group for the zone's 08:00");
        assert_ne!(a.id(), group("Europe/London", "acme", 0).id());
        let def = ScheduleDef::new("other", "weekly mon-fri 08:00".parse().unwrap(), 0, Dst::default()).unwrap();
        assert_ne!(a.id(), Group::of("acme", &def, "Europe/Berlin").id(), "another name");
        // A 30-minute spread: at most 30 groups, many tenants each.
        let ids: std::collections::BTreeSet<String> =
            (0..1000).map(|i| group("Europe/Berlin", &format!("t{i}"), 30).id()).collect();
        assert!(ids.len() <= 30 && ids.len() > 20, "{}", ids.len());
        // Spread over every shard.
        let shards: std::collections::BTreeSet<u32> =
            (0..100).map(|i| due_shard(&group(&format!("Etc/GMT+{}", i % 12), "t", i).id())).collect();
        assert_eq!(shards.len() as u32, DUE_SHARDS);
    }

    #[test]
    fn a_record_written_under_another_shard_count_keeps_its_key_and_its_successor_goes_by_the_new_one() {
        // The id's shard under the count before (4) differs from the one under today's.
        let g = (0..1000)
            .map(|i| group("Europe/Berlin", &format!("t{i}"), 0))
            .map(|g| Group { name: format!("n{}", g.offset_ms), ..g })
            .chain((0..1000).map(|i| group(&format!("Etc/GMT+{}", i % 12), "t", i)))
            .find(|g| due_shard(&g.id()) >= 4)
            .unwrap();
        let old = u32::from_str_radix(&g.id()[..8], 16).unwrap() % 4;
        let r = DueRecord {
            due_ms: 1_796_000_000_000,
            pos_ms: 1_796_000_000_000,
            group: g.clone(),
            after_ms: 5,
            cursor: None,
            plan_at: None,
            shard: Some(old),
            stage: Stage::Open,
            leaves_seen: None,
        };
        let item = r.to_item("j");
        assert_eq!(get_s(&item, PK), Some(format!("sdue#j#{old}").as_str()));
        let read = DueRecord::from_item(&item).unwrap();
        assert_eq!(read.key("j"), r.key("j"), "deleted and moved where it is");
        let next = DueRecord { shard: None, ..read.clone() };
        assert_eq!(get_s(&next.key("j"), PK), Some(format!("sdue#j#{}", due_shard(&g.id())).as_str()));
        // Its successor as the release before would have put it: beside it.
        let beside = read.successor_beside(&next).unwrap();
        assert_eq!((beside.key("j")[PK].clone(), beside.due_ms), (item[PK].clone(), next.due_ms));
        assert_eq!(next.successor_beside(&next), None, "a record in its group's shard has no such successor");
        assert_eq!(shard_of_pk("sdue#a#b#12"), Some(12), "a job name with `#` in it");
        assert_eq!((shard_of_pk("sdue#j#x"), shard_of_pk("shead#j#3")), (None, None));
    }
}
