//! How schedules are stored: a definition item per (tenant, name) and one due record per active
//! schedule, both in the control table; keys and item codecs, pure.
//!
//! ## Items (control table)
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | definition | `sched#<job>#<tenant>` | `<name>` |
//! | due record | `sdue#<job>#<k>` | `<due ms, 13 digits>#<tenant>#<name>` |
//!
//! Why the control table: the sweep that fires them already reads it strongly consistently (a due
//! record just written is seen, where an index would lag and a schedule could fire a day late),
//! and its key prefixes are what the template's IAM conditions name. Why a due record apart from
//! the definition: the due index is the sort key itself, so "what is due by now" is one key
//! condition on each of [`DUE_SHARDS`] partitions (never a scan), and firing replaces a small
//! record (a put and a delete) without rewriting the definition.
//!
//! A definition's `ver` moves on every change (spec, pause, resume, zone move); the due record
//! carries the `ver` it was computed from. A record whose definition moved on is stale: the change
//! wrote its successor, and the sweep deletes the stale one unfired when it comes due.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::spec::{Dst, ScheduleDef, Spec, SpecError};
use crate::clock::Millis;
use crate::item::Item;
use crate::schema::{av_n, av_s, get_bool, get_i64, get_s, PK, SK};

/// Queue item kind of schedules' fires, and the first part of a fire's unit key
/// (`sched#<tenant>#<name>#<occurrence>`): the worker's handler for it is registered under this.
pub const SCHED_KIND: &str = "sched";

/// Partitions the due records spread over: a million fires in one minute are a million record
/// writes, more than one partition takes (1,000 WCU/s) within the minute. Changing it would strand
/// records under the old count, so it is a constant.
pub const DUE_SHARDS: u32 = 4;

/// A stored schedule: its definition, whose it is, and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The tenant.
    pub tenant: String,
    /// What it says.
    pub def: ScheduleDef,
    /// Paused: no record, nothing fires.
    pub paused: bool,
    /// Moves on every change.
    pub ver: u64,
    /// Occurrences at or before this instant are not owed (when it was added or last changed).
    pub since_ms: Millis,
}

/// The next fire of one schedule, waiting in the due index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueRecord {
    /// When it is due: its occurrence's instant plus the schedule's spread.
    pub due_ms: Millis,
    /// The tenant.
    pub tenant: String,
    /// The schedule's name.
    pub name: String,
    /// The definition's `ver` it was computed from.
    pub ver: u64,
    /// The zone its occurrence was computed in (the tenant's, then).
    pub zone: String,
    /// Occurrences at or before this instant were handled (fired or passed over) or not owed.
    pub after_ms: Millis,
}

/// The definition item's `pk` for `tenant`'s schedules.
pub fn def_pk(job: &str, tenant: &str) -> String {
    format!("sched#{job}#{tenant}")
}

/// The due partition of shard `k`.
pub fn due_pk(job: &str, k: u32) -> String {
    format!("sdue#{job}#{k}")
}

/// The shard of `(tenant, name)`'s due records: stable, from a digest.
pub fn due_shard(tenant: &str, name: &str) -> u32 {
    use sha2::Digest;
    let d =
        sha2::Sha256::new().chain_update(tenant.as_bytes()).chain_update(b"#").chain_update(name.as_bytes()).finalize();
    u32::from_be_bytes(d[..4].try_into().expect("4 bytes")) % DUE_SHARDS
}

/// A due record's sort key: due instant first, so "due by now" is a key condition. Fifteen digits:
/// every instant up to the year 9999 (the latest a one-off can name) sorts by its value.
pub fn due_sk(due_ms: Millis, tenant: &str, name: &str) -> String {
    format!("{:015}#{tenant}#{name}", due_ms.max(0))
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

impl Schedule {
    /// The definition item.
    pub fn to_item(&self, job: &str) -> Item {
        HashMap::from([
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
        ])
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
            def: ScheduleDef { name: name.to_string(), spec, spread_min: spread, dst },
            paused: get_bool(item, PAUSED).unwrap_or(false),
            ver: get_i64(item, VER).unwrap_or(0).max(0) as u64,
            since_ms: get_i64(item, SINCE).unwrap_or(0),
        })
    }

    /// The definition is the same as `other` asks for (an add that changes nothing writes nothing).
    pub fn same_def(&self, other: &ScheduleDef) -> bool {
        self.def.spec.to_string() == other.spec.to_string()
            && self.def.spread_min == other.spread_min
            && self.def.dst == other.dst
    }
}

impl DueRecord {
    /// The record's key.
    pub fn key(&self, job: &str) -> Item {
        HashMap::from([
            (PK.to_string(), av_s(due_pk(job, due_shard(&self.tenant, &self.name)))),
            (SK.to_string(), av_s(due_sk(self.due_ms, &self.tenant, &self.name))),
        ])
    }

    /// The record item.
    pub fn to_item(&self, job: &str) -> Item {
        let mut item = self.key(job);
        item.extend([
            (TENANT.to_string(), av_s(&self.tenant)),
            (NAME.to_string(), av_s(&self.name)),
            (VER.to_string(), av_n(self.ver)),
            (ZONE.to_string(), av_s(&self.zone)),
            (AFTER.to_string(), av_n(self.after_ms)),
            (DUE.to_string(), av_n(self.due_ms)),
        ]);
        item
    }

    /// A record read back.
    pub fn from_item(item: &Item) -> Result<Self, SpecError> {
        let s = |n: &str| get_s(item, n).ok_or_else(|| SpecError(format!("due record without `{n}`")));
        let n = |n: &str| get_i64(item, n).ok_or_else(|| SpecError(format!("due record without `{n}`")));
        Ok(DueRecord {
            due_ms: n(DUE)?,
            tenant: s(TENANT)?.to_string(),
            name: s(NAME)?.to_string(),
            ver: n(VER)?.max(0) as u64,
            zone: s(ZONE)?.to_string(),
            after_ms: n(AFTER)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_read_back_and_due_keys_sort_by_instant() {
        let def = ScheduleDef::new("nudge", "weekly mon-fri 08:00".parse().unwrap(), 30, Dst::default()).unwrap();
        let s = Schedule { tenant: "acme".into(), def, paused: false, ver: 3, since_ms: 1_000 };
        assert_eq!(Schedule::from_item(&s.to_item("pulse-sweep")).unwrap(), s);
        let r = DueRecord {
            due_ms: 1_796_000_000_000,
            tenant: "acme".into(),
            name: "nudge".into(),
            ver: 3,
            zone: "Europe/Berlin".into(),
            after_ms: 5,
        };
        let item = r.to_item("pulse-sweep");
        assert_eq!(DueRecord::from_item(&item).unwrap(), r);
        assert!(get_s(&item, PK).unwrap().starts_with("sdue#pulse-sweep#"));
        // Due at or before `now` sorts below the bound; a millisecond later does not.
        let sk = due_sk(r.due_ms, "acme", "nudge");
        assert!(sk.as_str() < due_bound(r.due_ms).as_str());
        assert!(sk.as_str() >= due_bound(r.due_ms - 1).as_str());
        assert!(due_sk(999, "z", "z") < due_sk(1_000, "a", "a"), "zero-padded: the instant decides");
        // A one-off in 2300 (14 digits of milliseconds) sorts after today's records.
        let y2300 = "2300-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        assert!(due_sk(y2300, "a", "a") > due_sk(r.due_ms, "z", "z"));
        // Spread over every shard.
        let shards: std::collections::BTreeSet<u32> = (0..100).map(|i| due_shard(&format!("t{i}"), "n")).collect();
        assert_eq!(shards.len() as u32, DUE_SHARDS);
    }
}
