//! Work for many tenants in one queue item.
//!
//! Why: a queue item per tenant per day costs a put, a claim and a finish (with their index
//! moves) per tenant — about 7 write units a tenant-day, more than the work it carries. A batch
//! carries the units of a page or a whole zone group in one item, claimed and finished once; what
//! stays per tenant is the unit's **key**, which the handler's effect is idempotent on (a batch
//! that runs again after a crash repeats units whose effect already happened, and they change
//! nothing).
//!
//! ## Shape (the item's `payload`, JSON)
//! `{"batch": {"common": {...}, "sets": [{"each": [{...}, ...], "tenants": ["t1", ...]}, ...]}}`:
//! every tenant of a set gets one unit per entry of `each`. A unit's payload is `common`, its
//! `each` entry and `"tenant"` merged; its key is `<kind>#<tenant>#<the each entry's values in key
//! order>`, so whatever identifies a unit must be in `each` (a pulse: `{"grain", "period"}` gives
//! `pulse#<tenant>#<grain>#<period>`, the same key whichever zone or batch carries it).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Payloads above this are split into several batches (the queue's payload limit is 256 KB; a
/// claim and a finish are billed on the item's size, so a smaller item retries cheaper too).
pub const MAX_BATCH_BYTES: usize = 128 * 1024;

/// Units in one batch at most: a worker runs a batch within one invocation's time.
pub const MAX_BATCH_UNITS: usize = 2000;

/// Tenants that share their units.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UnitSet {
    /// One unit per entry, for every tenant of the set.
    pub each: Vec<Map<String, Value>>,
    /// Fields every unit of the set has, not part of its key (a schedule's payload: the members
    /// of one group share it, so it is carried once for all of them).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub with: Map<String, Value>,
    /// Tenant ids.
    pub tenants: Vec<String>,
}

/// What carries a batch: a claimed job, read by [`Batch::of_job`] (a trait, so that the batch
/// does not depend on the queue that carries it).
pub trait Carrier {
    /// The item's id.
    fn id(&self) -> &str;
    /// The item's payload.
    fn payload(&self) -> &str;
}

/// A batch of units.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Batch {
    /// Fields every unit has (not part of a unit's key).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub common: Map<String, Value>,
    /// The units, by set.
    pub sets: Vec<UnitSet>,
}

/// One unit of a batch: what a handler runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Idempotency key.
    pub key: String,
    /// Tenant.
    pub tenant: String,
    /// Payload (JSON object text).
    pub payload: String,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    batch: Batch,
}

impl Batch {
    /// A batch with `common` fields.
    pub fn new(common: Map<String, Value>) -> Self {
        Batch { common, sets: Vec::new() }
    }

    /// Adds `tenants`, each getting one unit per entry of `each`; merges into an existing set with
    /// the same entries.
    pub fn add(&mut self, each: Vec<Map<String, Value>>, tenants: impl IntoIterator<Item = String>) {
        self.add_with(each, Map::new(), tenants)
    }

    /// Like [`Batch::add`], every unit also carrying `with` (merged only into a set with the same
    /// entries and the same `with`).
    pub fn add_with(
        &mut self,
        each: Vec<Map<String, Value>>,
        with: Map<String, Value>,
        tenants: impl IntoIterator<Item = String>,
    ) {
        match self.sets.iter_mut().find(|s| s.each == each && s.with == with) {
            Some(s) => s.tenants.extend(tenants),
            None => self.sets.push(UnitSet { each, with, tenants: tenants.into_iter().collect() }),
        }
    }

    /// Units in the batch.
    pub fn len(&self) -> usize {
        self.sets.iter().map(|s| s.each.len() * s.tenants.len()).sum()
    }

    /// No units.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tenants in the batch (a tenant in two sets counts twice).
    pub fn tenants(&self) -> usize {
        self.sets.iter().map(|s| s.tenants.len()).sum()
    }

    /// The item payload.
    pub fn to_payload(&self) -> String {
        serde_json::to_string(&Envelope { batch: self.clone() }).expect("a batch serialises")
    }

    /// The batch a job carries: `None` for a job of one unit, `Some(Err)` naming what is wrong with
    /// a payload that says it is a batch and is not.
    ///
    /// A batch payload is a JSON object whose one key is `batch` (whatever the spacing or key
    /// order of the text); a single job's payload with other keys beside a `batch` is not one.
    pub fn of_job(job: &impl Carrier) -> Option<Result<Batch, String>> {
        Self::of_payload(job.id(), job.payload())
    }

    /// [`Batch::of_job`] from an item's id and payload as stored.
    pub fn of_payload(id: &str, payload: &str) -> Option<Result<Batch, String>> {
        let Ok(Value::Object(mut top)) = serde_json::from_str::<Value>(payload) else {
            return None;
        };
        if top.len() != 1 || !top.contains_key("batch") {
            return None;
        }
        let inner = top.remove("batch").unwrap_or_default();
        Some(
            serde_json::from_value::<Batch>(inner).map_err(|e| format!("batch payload of `{id}` does not decode: {e}")),
        )
    }

    /// A digest of every unit key, in order (SHA-256, hex): two batches with one fingerprint carry
    /// the same units. Item ids built on it make "this id exists" mean "these units were
    /// enqueued", which a writer whose answer was lost relies on, so the digest must resist a
    /// crafted collision: unit keys hold tenant ids a user chooses, and a 64-bit non-cryptographic
    /// hash (FNV-1a, used here before) can be collided on purpose, after which the second batch's
    /// units would be taken as landed and lost.
    pub fn fingerprint(&self, kind: &str) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for u in self.units(kind) {
            h.update(u.key.as_bytes());
            h.update(b"\n");
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Every unit, in order.
    pub fn units(&self, kind: &str) -> Vec<Unit> {
        let mut out = Vec::with_capacity(self.len());
        for set in &self.sets {
            for t in &set.tenants {
                for e in &set.each {
                    out.push(self.unit(kind, t, e, &set.with));
                }
            }
        }
        out
    }

    fn unit(&self, kind: &str, tenant: &str, each: &Map<String, Value>, with: &Map<String, Value>) -> Unit {
        let mut key = format!("{kind}#{tenant}");
        // serde_json's map keeps keys sorted: the key's parts are in key order.
        for v in each.values() {
            key.push('#');
            match v {
                Value::String(s) => key.push_str(s),
                other => key.push_str(&other.to_string()),
            }
        }
        let mut payload = self.common.clone();
        payload.extend(with.clone());
        payload.extend(each.clone());
        payload.insert("tenant".into(), Value::String(tenant.to_string()));
        Unit { key, tenant: tenant.to_string(), payload: Value::Object(payload).to_string() }
    }

    /// The units whose keys `keep` accepts, as a batch of their own (what is left to do, or what
    /// goes to the dead letters).
    pub fn subset(&self, kind: &str, keep: impl Fn(&str) -> bool) -> Batch {
        let mut out = Batch::new(self.common.clone());
        for set in &self.sets {
            // Per entry, the tenants whose unit is kept; entries kept by the same tenants regroup.
            let mut by_tenants: BTreeMap<Vec<String>, Vec<Map<String, Value>>> = BTreeMap::new();
            for e in &set.each {
                let ts: Vec<String> =
                    set.tenants.iter().filter(|t| keep(&self.unit(kind, t, e, &set.with).key)).cloned().collect();
                if !ts.is_empty() {
                    by_tenants.entry(ts).or_default().push(e.clone());
                }
            }
            for (ts, each) in by_tenants {
                out.add_with(each, set.with.clone(), ts);
            }
        }
        out
    }

    /// Divides the units into at most `parts` batches of about equal unit counts, in unit order,
    /// cutting anywhere (between two units of one tenant too): how the worker narrows down a unit
    /// that kills its process, until the part that dies again holds that unit alone.
    pub fn divide(&self, kind: &str, parts: usize) -> Vec<Batch> {
        // Distinct keys: a key listed twice goes whole into one part, so every part has fewer
        // distinct units than the batch once it has two.
        let mut seen = std::collections::HashSet::new();
        let keys: Vec<String> =
            self.units(kind).into_iter().map(|u| u.key).filter(|k| seen.insert(k.clone())).collect();
        if keys.is_empty() {
            return Vec::new();
        }
        let per = keys.len().div_ceil(parts.max(1));
        keys.chunks(per)
            .map(|chunk| {
                let chunk: std::collections::HashSet<&str> = chunk.iter().map(String::as_str).collect();
                self.subset(kind, |k| chunk.contains(k))
            })
            .collect()
    }

    /// One batch per tenant, in the order tenants first appear, when the batch holds at most `max`
    /// tenants; `None` past that. Why: a failed remainder or dead units split this way are items
    /// of one tenant each, which the queue's trouble index finds by tenant
    /// ([`crate::queue::trouble_of`]); a batch most of whose tenants failed (a target down) stays
    /// whole, as one item is cheaper to retry than many.
    pub fn per_tenant(&self, max: usize) -> Option<Vec<Batch>> {
        let mut tenants: Vec<&String> = Vec::new();
        for t in self.sets.iter().flat_map(|s| s.tenants.iter()) {
            if !tenants.contains(&t) {
                if tenants.len() == max {
                    return None;
                }
                tenants.push(t);
            }
        }
        Some(
            tenants
                .into_iter()
                .map(|t| {
                    let mut b = Batch::new(self.common.clone());
                    for set in self.sets.iter().filter(|s| s.tenants.contains(t)) {
                        b.add_with(set.each.clone(), set.with.clone(), [t.clone()]);
                    }
                    b
                })
                .collect(),
        )
    }

    /// Units with distinct keys (a tenant listed twice in one set is one unit, run twice).
    pub fn distinct_units(&self, kind: &str) -> usize {
        self.units(kind).into_iter().map(|u| u.key).collect::<std::collections::HashSet<_>>().len()
    }

    /// Splits into batches whose payloads stay under [`MAX_BATCH_BYTES`] and [`MAX_BATCH_UNITS`],
    /// cutting between tenants.
    pub fn split(self) -> Vec<Batch> {
        // No unit, no item: an empty batch would be written under the same id by every flush.
        if self.is_empty() {
            return Vec::new();
        }
        if self.to_payload().len() <= MAX_BATCH_BYTES && self.len() <= MAX_BATCH_UNITS {
            return vec![self];
        }
        let mut out = Vec::new();
        let base = Batch::new(self.common.clone()).to_payload().len();
        let mut cur = Batch::new(self.common.clone());
        let (mut bytes, mut units) = (base, 0usize);
        for set in self.sets {
            let each_bytes = serde_json::to_string(&set.each).map(|s| s.len()).unwrap_or(0)
                + serde_json::to_string(&set.with).map(|s| s.len()).unwrap_or(0)
                + 32;
            let mut set_in_cur = false;
            for t in set.tenants {
                let mut add = t.len() + 3 + if set_in_cur { 0 } else { each_bytes };
                if units > 0 && (bytes + add > MAX_BATCH_BYTES || units + set.each.len() > MAX_BATCH_UNITS) {
                    out.push(std::mem::replace(&mut cur, Batch::new(self.common.clone())));
                    (bytes, units) = (base, 0);
                    add = t.len() + 3 + each_bytes;
                }
                bytes += add;
                units += set.each.len();
                set_in_cur = true;
                cur.add_with(set.each.clone(), set.with.clone(), [t]);
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Job;

    fn entry(pairs: &[(&str, &str)]) -> Map<String, Value> {
        pairs.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect()
    }

    #[test]
    fn a_batch_is_an_object_whose_one_key_is_batch() {
        let job = |payload: &str| Job {
            id: "j".into(),
            kind: "pulse".into(),
            payload: payload.into(),
            tenant: None,
            attempts: 1,
            owner: "o".into(),
            claim_until_ms: 0,
            died: false,
            suspect: false,
            throttles: 0,
            trouble: None,
        };
        let b = pulses();
        let spaced = format!("{{ \"batch\" : {} }}", serde_json::to_string(&b).unwrap());
        assert_eq!(Batch::of_job(&job(&b.to_payload())), Some(Ok(b.clone())));
        assert_eq!(Batch::of_job(&job(&spaced)), Some(Ok(b)), "spacing does not matter");
        assert_eq!(Batch::of_job(&job(r#"{"batch": 3, "tenant": "t1"}"#)), None, "a single job with a `batch` field");
        assert_eq!(Batch::of_job(&job(r#"{"tenant": "t1"}"#)), None);
        assert_eq!(Batch::of_job(&job("not json")), None);
        assert!(Batch::of_job(&job(r#"{"batch": {"sets": 7}}"#)).unwrap().is_err(), "says it is a batch, is not");
    }

    #[test]
    fn a_batch_of_few_tenants_splits_one_a_tenant_with_every_unit_and_of_many_stays_whole() {
        let mut b = Batch::new(entry(&[("zone", "UTC")]));
        b.add(vec![entry(&[("grain", "day"), ("period", "2026-12-01")])], ["a".into(), "b".into()]);
        b.add(vec![entry(&[("grain", "month"), ("period", "2026-11")])], ["b".into(), "c".into()]);
        let parts = b.per_tenant(3).expect("three tenants");
        let keys = |b: &Batch| b.units("pulse").into_iter().map(|u| u.key).collect::<Vec<_>>();
        assert_eq!(parts.iter().map(|p| p.tenants()).collect::<Vec<_>>(), [1, 2, 1], "b has two sets");
        assert_eq!(keys(&parts[1]), ["pulse#b#day#2026-12-01", "pulse#b#month#2026-11"]);
        let mut all: Vec<String> = parts.iter().flat_map(keys).collect();
        all.sort();
        let mut whole = keys(&b);
        whole.sort();
        assert_eq!(all, whole, "every unit once");
        assert!(parts.iter().all(|p| p.common == b.common));
        assert_eq!(b.per_tenant(2), None, "more tenants than asked: stays whole");
    }

    #[test]
    fn the_fingerprint_is_the_sha256_of_the_unit_keys() {
        let mut b = Batch::new(entry(&[("zone", "UTC")]));
        b.add(vec![entry(&[("grain", "day"), ("period", "2026-03-30")])], ["t1".to_string(), "t2".to_string()]);
        // hashlib.sha256(b"pulse#t1#day#2026-03-30\npulse#t2#day#2026-03-30\n").hexdigest()
        assert_eq!(b.fingerprint("pulse"), "9930da2970a53a2b7ba976cbd0bd3b11b67070caf2b4b2a1471ced5938cd1297");
        let mut other = b.clone();
        other.sets[0].tenants[1] = "t3".into();
        assert_ne!(other.fingerprint("pulse"), b.fingerprint("pulse"));
    }

    #[test]
    fn an_empty_batch_splits_into_no_item() {
        assert!(Batch::new(entry(&[("zone", "UTC")])).split().is_empty());
    }

    fn pulses() -> Batch {
        let mut b = Batch::new(entry(&[("zone", "Europe/Berlin")]));
        b.add(
            vec![
                entry(&[("grain", "day"), ("period", "2026-03-30")]),
                entry(&[("period", "2026-W14"), ("grain", "week")]),
            ],
            ["t1".to_string(), "t2".to_string()],
        );
        b.add(vec![entry(&[("grain", "day"), ("period", "2026-03-29")])], ["t3".to_string()]);
        b
    }

    #[test]
    fn units_are_the_cross_product_with_stable_keys() {
        let b = pulses();
        let keys: Vec<String> = b.units("pulse").into_iter().map(|u| u.key).collect();
        assert_eq!(
            keys,
            [
                "pulse#t1#day#2026-03-30",
                "pulse#t1#week#2026-W14",
                "pulse#t2#day#2026-03-30",
                "pulse#t2#week#2026-W14",
                "pulse#t3#day#2026-03-29"
            ],
            "keys in the entry's key order whatever order it was built in"
        );
        let u = &b.units("pulse")[0];
        let v: Value = serde_json::from_str(&u.payload).unwrap();
        assert_eq!(v["tenant"], "t1");
        assert_eq!(v["zone"], "Europe/Berlin");
        assert_eq!((b.len(), b.tenants()), (5, 3));
    }

    #[test]
    fn payload_round_trips_through_a_job_and_a_single_job_is_not_a_batch() {
        let b = pulses();
        let job = Job {
            id: "x".into(),
            kind: "pulse".into(),
            payload: b.to_payload(),
            tenant: None,
            attempts: 1,
            owner: "w".into(),
            claim_until_ms: 0,
            died: false,
            suspect: false,
            throttles: 0,
            trouble: None,
        };
        assert_eq!(Batch::of_job(&job), Some(Ok(b)));
        let single = Job { payload: r#"{"tenant":"t1"}"#.into(), ..job.clone() };
        assert_eq!(Batch::of_job(&single), None);
        let broken = Job { payload: r#"{"batch": 3}"#.into(), ..job };
        assert!(Batch::of_job(&broken).unwrap().unwrap_err().contains("does not decode"));
    }

    #[test]
    fn a_subset_keeps_exactly_the_chosen_units() {
        let b = pulses();
        let keep = ["pulse#t2#week#2026-W14", "pulse#t3#day#2026-03-29", "pulse#t1#week#2026-W14"];
        let s = b.subset("pulse", |k| keep.contains(&k));
        let mut got: Vec<String> = s.units("pulse").into_iter().map(|u| u.key).collect();
        got.sort();
        let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want);
        assert!(b.subset("pulse", |_| false).is_empty());
    }

    #[test]
    fn divide_cuts_between_units_into_about_equal_parts() {
        let b = pulses();
        let parts = b.divide("pulse", 2);
        let counts: Vec<usize> = parts.iter().map(Batch::len).collect();
        assert_eq!(counts, vec![3, 2]);
        let mut keys: Vec<String> = parts.iter().flat_map(|p| p.units("pulse")).map(|u| u.key).collect();
        let mut all: Vec<String> = b.units("pulse").into_iter().map(|u| u.key).collect();
        keys.sort();
        all.sort();
        assert_eq!(keys, all, "every unit once");
        assert_eq!(b.divide("pulse", 99).len(), 5, "at most one part per unit");
        assert!(Batch::default().divide("pulse", 3).is_empty());
        // A tenant listed twice: its one key goes whole into one part, and there is nothing
        // left to divide.
        let mut twice = Batch::new(Default::default());
        twice.add(vec![entry(&[("grain", "day"), ("period", "2026-03-30")])], ["t1".to_string(), "t1".to_string()]);
        assert_eq!((twice.len(), twice.distinct_units("pulse")), (2, 1));
        assert_eq!(twice.divide("pulse", 8).len(), 1, "one part: the batch itself");
        // Cut between t1's day and week units too.
        let ones = b.divide("pulse", 5);
        assert!(ones.iter().all(|p| p.len() == 1));
    }

    #[test]
    fn split_keeps_every_unit_once_and_each_part_under_the_limits() {
        let mut b = Batch::new(entry(&[("zone", "UTC")]));
        let ids: Vec<String> = (0..5000).map(|i| format!("tenant-with-a-longish-id-{i:06}")).collect();
        b.add(vec![entry(&[("grain", "day"), ("period", "2026-03-30")])], ids.clone());
        b.add(vec![entry(&[("grain", "month"), ("period", "2026-03")])], ids[..100].to_vec());
        let all: Vec<String> = b.units("pulse").into_iter().map(|u| u.key).collect();
        let parts = b.split();
        assert!(parts.len() >= 3, "{} parts", parts.len());
        let mut got = Vec::new();
        for p in &parts {
            assert!(p.to_payload().len() <= MAX_BATCH_BYTES, "{} bytes", p.to_payload().len());
            assert!(p.len() <= MAX_BATCH_UNITS);
            got.extend(p.units("pulse").into_iter().map(|u| u.key));
        }
        assert_eq!(got, all);
    }

    #[test]
    fn a_sets_shared_fields_reach_its_units_and_not_their_keys_and_survive_subset_and_split() {
        let with = |n: u64| Map::from_iter([("payload".to_string(), serde_json::json!({"n": n}))]);
        let mut b = Batch::new(Map::new());
        let e = vec![entry(&[("name", "remind"), ("occurrence", "2026-12-24T09:00")])];
        b.add_with(e.clone(), with(1), ["a".to_string()]);
        b.add_with(e.clone(), with(2), ["b".to_string()]);
        b.add_with(e.clone(), with(1), ["c".to_string()]);
        assert_eq!(b.sets.len(), 2, "the same entries with another payload are another set");
        let units = b.units("sched");
        let keys: Vec<&str> = units.iter().map(|u| u.key.as_str()).collect();
        assert_eq!(
            keys,
            ["sched#a#remind#2026-12-24T09:00", "sched#c#remind#2026-12-24T09:00", "sched#b#remind#2026-12-24T09:00"]
        );
        let payload = |u: &Unit| serde_json::from_str::<Value>(&u.payload).unwrap()["payload"]["n"].as_u64();
        assert_eq!(units.iter().map(payload).collect::<Vec<_>>(), [Some(1), Some(1), Some(2)]);
        let kept = b.subset("sched", |k| k.contains("#b#") || k.contains("#c#"));
        assert_eq!(kept.units("sched").iter().map(payload).collect::<Vec<_>>(), [Some(1), Some(2)]);
        let back = Batch::of_job(&Job::unclaimed("j", "sched", b.to_payload())).unwrap().unwrap();
        assert_eq!(back, b, "the shared fields round-trip through the item");
        let mut big = Batch::new(Map::new());
        let fat = Map::from_iter([("payload".to_string(), Value::String("x".repeat(4000)))]);
        for i in 0..100 {
            big.add_with(vec![entry(&[("name", "n"), ("occurrence", &i.to_string())])], fat.clone(), [format!("t{i}")]);
        }
        let parts = big.split();
        assert!(parts.len() > 1 && parts.iter().all(|p| p.to_payload().len() <= MAX_BATCH_BYTES), "split counts them");
        assert_eq!(parts.iter().map(|p| p.units("sched").len()).sum::<usize>(), 100);
    }
}
