//! Due records that do not read, set aside where an operator sees them and repairs them.
//!
//! Why: a record the sweep cannot read is its group's only link to the sweep. Passed silently,
//! its group has a head and no record, and never fires again (a join to a group with a head
//! writes none). Left where it is, it would stop its shard (the cursor cannot pass it) or, set
//! an hour ahead, cost every idle tick a Query. So the sweep copies it whole into the quarantine
//! partition in the transaction that moves the shard cursor past it (nothing is lost whatever
//! crashes: the cursor passes it exactly when the copy is written), counts it in `FailedUnits`,
//! and deletes it after. An idle tick reads nothing of it: it is out of the due index.
//!
//! | item | `pk` | `sk` |
//! |---|---|---|
//! | quarantined record | `sdue#<job>#bad` | `<group>` |
//!
//! Under the due records' own prefix: the sweep's grant on `sdue#<job>#*` already covers it, and
//! the partition cannot be a shard's (shards are numbered).
//!
//! Repair ([`Schedules::repair`]) writes the group's record again, after its shard's cursor, and
//! removes the copy, in one transaction (its insert lowers `sched_next` through the stream): the copy itself when
//! it reads now (a newer sweep deployed, an attribute fixed), otherwise one rebuilt from the
//! group's head (what the members share) owed after the copy's `after` (or its due instant), so
//! what came due while it was set aside is fired under the catch-up policy, and nothing twice.

use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};

use super::commit::{commit, Committed};
use super::error::{ScheduleError, SpecError};
use super::fire::first_record;
use super::record::{head_key, pos_of, DueRecord, Group, Stage, CURSOR, FIRING, PLAN_AT, STAGE};
use super::store::Schedules;
use super::writes::{written_record_put, Cursors};
use crate::clock::Millis;
use crate::item::Item;
use crate::pager::{fetch_page, Cursor, PageError};
use crate::schema::{av_n, av_s, get_i64, get_s, key, PK, SK};

/// The quarantine partition's `pk` of `job`.
pub fn quarantine_pk(job: &str) -> String {
    format!("sdue#{job}#bad")
}

const RECORD: &str = "record";
const PROBLEM: &str = "problem";
const AT: &str = "at";
const FROM: &str = "from";

/// A due record set aside: whose group it was, what was wrong, when, and the item as it was.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantined {
    /// The group (from the record's sort key: readable when nothing else is).
    pub group: String,
    /// The record's key as it was (`pk`, `sk`).
    pub from: (String, String),
    /// Why it did not read.
    pub problem: String,
    /// When the sweep set it aside.
    pub at_ms: Millis,
    /// The record item, whole.
    pub record: Item,
}

impl Quarantined {
    /// The quarantine of `record` (an item from a due partition) that did not read because of
    /// `problem`, set aside at `at_ms`. Pure.
    pub fn of(record: Item, problem: impl Into<String>, at_ms: Millis) -> Self {
        let s = |a: &str| get_s(&record, a).unwrap_or_default().to_string();
        let (pk, sk) = (s(PK), s(SK));
        // `<position>#<group>`; a key not of that shape is still set aside, under itself.
        let group = sk.split_once('#').map_or(sk.as_str(), |(_, g)| g).to_string();
        let (record, problem) = trimmed(record, problem.into());
        Quarantined { group, from: (pk, sk), problem, at_ms, record }
    }

    /// Its item in `job`'s quarantine partition.
    pub fn to_item(&self, job: &str) -> Item {
        let mut item = key(quarantine_pk(job), &self.group);
        item.insert(RECORD.into(), AttributeValue::M(self.record.clone()));
        item.insert(PROBLEM.into(), av_s(&self.problem));
        item.insert(AT.into(), av_n(self.at_ms));
        item.insert(FROM.into(), av_s(format!("{}|{}", self.from.0, self.from.1)));
        item
    }

    /// One read back.
    pub fn from_item(item: &Item) -> Result<Self, SpecError> {
        let record = match item.get(RECORD) {
            Some(AttributeValue::M(m)) => m.clone(),
            _ => return Err(SpecError("quarantined record without its item".into())),
        };
        let from = get_s(item, FROM).unwrap_or_default();
        let (pk, sk) = from.split_once('|').unwrap_or((from, ""));
        Ok(Quarantined {
            group: get_s(item, SK).ok_or_else(|| SpecError("quarantined record without its group".into()))?.into(),
            from: (pk.into(), sk.into()),
            problem: get_s(item, PROBLEM).unwrap_or_default().into(),
            at_ms: get_i64(item, AT).unwrap_or(0),
            record,
        })
    }

    /// The record to write again: the copy when it reads now, else one rebuilt from the group's
    /// `head` (read, when there is one) owed after the copy's `after` (or just before its due
    /// instant, or its position): `Err` naming why neither can be. Pure.
    pub fn repaired(&self, head: Option<&Item>) -> Result<(DueRecord, Repair), String> {
        let problem = match DueRecord::from_item(&self.record) {
            Ok(r) => return Ok((r, Repair::AsItWas)),
            Err(e) => e.to_string(),
        };
        let head = head.ok_or_else(|| format!("it still does not read ({problem}) and its group has no head"))?;
        let group =
            Group::read_from(head).map_err(|e| format!("it still does not read ({problem}), nor its head ({e})"))?;
        if group.id() != self.group {
            return Err(format!("its head names another group (`{}`)", group.id()));
        }
        // A one-off whose fire fixed its group resumes in the stage the copy names, or is not
        // rebuilt: open, it would fire again every member its fixed pages fired.
        let kept = Stage::from_attr(get_s(&self.record, STAGE)).ok().filter(|s| *s != Stage::Open);
        let firing = head.contains_key(FIRING);
        if firing && kept.is_none() {
            return Err(format!(
                "it still does not read ({problem}), and its group's fire had fixed its members (its head is firing) while its stage does not read: rebuilt, it would fire them again"
            ));
        }
        let after = get_i64(&self.record, "after")
            .or_else(|| get_i64(&self.record, "due").map(|d| d - 1))
            .or_else(|| pos_of(&self.from.1).map(|p| p - group.offset_ms - 1))
            .unwrap_or(self.at_ms);
        match first_record(&group, after) {
            // A large group's fire in progress resumes after the member it had reached, on its
            // plan, when those still read and it is the same occurrence: its first pages are not
            // fired again.
            Ok(Some(r)) if get_i64(&self.record, "due") == Some(r.due_ms) => Ok((
                DueRecord {
                    cursor: get_s(&self.record, CURSOR).map(str::to_string),
                    plan_at: get_i64(&self.record, PLAN_AT),
                    stage: kept.unwrap_or(r.stage),
                    ..r
                },
                Repair::FromHead,
            )),
            Ok(Some(r)) if firing => Ok((
                DueRecord {
                    cursor: get_s(&self.record, CURSOR).map(str::to_string),
                    stage: kept.unwrap_or(r.stage),
                    ..r
                },
                Repair::FromHead,
            )),
            Ok(Some(r)) => Ok((r, Repair::FromHead)),
            Ok(None) => Err("its group has no occurrence left to fire (remove its schedules)".into()),
            Err(e) => Err(format!("its group cannot be planned: {e}")),
        }
    }
}

/// `record` with room beside it for the copy's own attributes within DynamoDB's 400 KB an item
/// (a copy too large would fail the sweep's transaction every tick): its largest attributes
/// dropped, and named in `problem`, until it fits. A repair then rebuilds it from the head. Pure.
fn trimmed(mut record: Item, mut problem: String) -> (Item, String) {
    let room = crate::limits::MAX_ITEM_BYTES - 4 * 1024 - problem.len();
    let mut dropped = Vec::new();
    while crate::capacity::item_size(&record) > room {
        let size =
            |(k, v): (&String, &AttributeValue)| crate::capacity::item_size(&Item::from([(k.clone(), v.clone())]));
        let Some(name) = record.iter().max_by_key(|a| size(*a)).map(|(k, _)| k.clone()) else { break };
        record.remove(&name);
        dropped.push(name);
    }
    if !dropped.is_empty() {
        problem = format!("{problem} (copy trimmed to fit an item: dropped {})", dropped.join(", "));
    }
    (record, problem)
}

/// What a repair wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// The record as it was (it reads now).
    AsItWas,
    /// A record rebuilt from the group's head.
    FromHead,
}

impl Schedules {
    /// The put of `q` into the quarantine partition, for the sweep's transaction that moves the
    /// shard cursor past the record (unconditional: the same record set aside again is the same).
    pub fn quarantine_put(&self, q: &Quarantined) -> TransactWriteItem {
        let put = Put::builder().table_name(&self.table).set_item(Some(q.to_item(&self.job))).build();
        TransactWriteItem::builder().put(put.expect("put has table and item")).build()
    }

    /// One page of the quarantined records (strongly consistent), from `start`; those that do
    /// not read are named by their group with the problem.
    pub async fn quarantined(
        &self,
        start: Option<&Cursor>,
        limit: i32,
    ) -> Result<(Vec<Result<Quarantined, (String, String)>>, Option<Cursor>), PageError<std::convert::Infallible>> {
        let page = fetch_page(&self.db, &self.partition(quarantine_pk(&self.job), None), start, limit).await?;
        let out = page
            .items
            .iter()
            .map(|i| {
                Quarantined::from_item(i).map_err(|e| (get_s(i, SK).unwrap_or_default().to_string(), e.to_string()))
            })
            .collect();
        Ok((out, page.next))
    }

    /// Every quarantined record, the partition followed to its end.
    pub async fn quarantined_all(&self) -> Result<Vec<Result<Quarantined, (String, String)>>, ScheduleError> {
        let mut out = Vec::new();
        let mut start = None;
        loop {
            let (page, next) = self.quarantined(start.as_ref(), 100).await.map_err(page_error)?;
            out.extend(page);
            match next {
                Some(n) => start = Some(n),
                None => return Ok(out),
            }
        }
    }

    /// Writes group `gid`'s quarantined record again (see the module) and removes its copy, in
    /// one transaction (the record's insert lowers `sched_next` through the stream): the record
    /// after its shard's cursor, the copy's
    /// delete conditional on the copy read (a repair run twice writes one record).
    pub async fn repair(&self, gid: &str) -> Result<(DueRecord, Repair), ScheduleError> {
        // A shard cursor moved between its read and the transaction (a sweep firing): again.
        for _ in 0..REPAIR_ATTEMPTS {
            let qkey = key(quarantine_pk(&self.job), gid);
            let Some(item) = self.db.get_strong(&self.table, qkey.clone()).await? else {
                return Err(ScheduleError::NotQuarantined(gid.to_string()));
            };
            let q = Quarantined::from_item(&item)?;
            let head = self.db.get_strong(&self.table, head_key(&self.job, gid)).await?;
            let (rec, how) =
                q.repaired(head.as_ref()).map_err(|why| ScheduleError::Unrepairable { group: gid.into(), why })?;
            let mut cursors = Cursors::new();
            let rec = self.positioned(rec, &mut cursors).await?;
            let del = Delete::builder()
                .table_name(&self.table)
                .set_key(Some(qkey))
                .condition_expression("#at = :at")
                .expression_attribute_names("#at", AT)
                .expression_attribute_values(":at", av_n(q.at_ms))
                .build()
                .expect("delete has table and key");
            let mut writes = vec![
                TransactWriteItem::builder().delete(del).build(),
                written_record_put(&self.table, &self.job, &rec),
            ];
            writes.extend(self.cursor_bumps(&cursors));
            match commit(&self.db, writes).await? {
                Committed::Written => return Ok((rec, how)),
                Committed::ConditionFailed(0) => return Err(ScheduleError::NotQuarantined(gid.to_string())),
                Committed::ConditionFailed(_) => continue,
            }
        }
        Err(ScheduleError::Db(crate::error::DbError::Contended {
            what: format!("the shard cursor of group `{gid}`"),
            attempts: REPAIR_ATTEMPTS,
        }))
    }
}

/// Attempts of a repair whose shard cursor keeps moving under it.
const REPAIR_ATTEMPTS: u32 = 5;

fn page_error(e: PageError<std::convert::Infallible>) -> ScheduleError {
    ScheduleError::Db(crate::error::DbError::from(PageError::<crate::error::DbError>::widen(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::spec::{Dst, ScheduleDef};

    fn group() -> Group {
        let def = ScheduleDef::new("nudge", "daily 08:00".parse().unwrap(), 0, Dst::default()).unwrap();
        Group::of("acme", &def, "Europe/Berlin")
    }

    #[test]
    fn a_record_set_aside_keeps_its_group_and_item_and_is_repaired_as_it_was_or_from_its_head() {
        let g = group();
        let due = 1_764_658_800_000; // 2025-12-02T07:00Z, 08:00 in Berlin
        let rec = DueRecord {
            due_ms: due,
            pos_ms: due,
            group: g.clone(),
            after_ms: due - 86_400_000,
            cursor: None,
            plan_at: None,
            shard: None,
            stage: Stage::Open,
            leaves_seen: None,
        };
        let mut item = rec.to_item("j");
        let q = Quarantined::of(item.clone(), "x", 5);
        assert_eq!(q.group, g.id());
        assert_eq!(Quarantined::from_item(&q.to_item("j")).unwrap(), q, "read back whole");
        // As it was: in the shard its key names.
        let as_it_was = DueRecord { shard: Some(rec.shard()), ..rec.clone() };
        assert_eq!(q.repaired(None).unwrap(), (as_it_was, Repair::AsItWas), "it reads now");
        // Unreadable: a fold a newer version wrote.
        item.insert("fold".into(), av_s("sideways"));
        let q = Quarantined::of(item.clone(), "fold", 5);
        assert!(q.repaired(None).unwrap_err().contains("no head"));
        let head = g.head_item("j");
        let (r, how) = q.repaired(Some(&head)).unwrap();
        assert_eq!(how, Repair::FromHead);
        assert_eq!(
            (r.due_ms, r.after_ms, r.group),
            (due, due - 86_400_000, g.clone()),
            "owed after the copy's `after`"
        );
        // A large group's fire stopped part-way resumes after the member it had reached.
        let mut midway = item.clone();
        midway.extend([(CURSOR.to_string(), av_s("m-0500")), (PLAN_AT.to_string(), av_n(due + 60_000))]);
        let (r, _) = Quarantined::of(midway, "fold", 5).repaired(Some(&head)).unwrap();
        assert_eq!((r.cursor.as_deref(), r.plan_at), (Some("m-0500"), Some(due + 60_000)));
        // Its `after` unreadable too: owed from just before its due instant, so it still fires.
        item.remove("after");
        let (r, _) = Quarantined::of(item.clone(), "fold", 5).repaired(Some(&head)).unwrap();
        assert_eq!((r.due_ms, r.after_ms), (due, due - 1));
        // Nothing readable but its key: its position.
        item.remove("due");
        let (r, _) = Quarantined::of(item.clone(), "fold", 5).repaired(Some(&head)).unwrap();
        assert_eq!(r.due_ms, due);
        // A record too large to copy whole keeps what fits, and says what it dropped.
        let mut huge = item.clone();
        huge.insert("junk".into(), av_s("x".repeat(crate::limits::MAX_ITEM_BYTES - 100)));
        let q = Quarantined::of(huge, "too large", 5);
        assert!(q.problem.contains("dropped junk"), "{}", q.problem);
        assert!(crate::limits::item("PutItem", "t", &q.to_item("j")).is_ok());
        assert_eq!(q.repaired(Some(&head)).unwrap().0.due_ms, due);
        let mut other = head.clone();
        other.insert("name".into(), av_s("other"));
        assert!(Quarantined::of(item, "fold", 5).repaired(Some(&other)).unwrap_err().contains("another group"));
    }

    #[test]
    fn a_record_of_a_campaign_being_fired_is_repaired_only_in_the_stage_it_names() {
        let def = ScheduleDef::new("call", "at 2025-12-24T09:00".parse().unwrap(), 0, Dst::default()).unwrap();
        let g = Group::of("acme", &def, "Europe/Berlin");
        let due = 1_766_563_200_000; // 2025-12-24T08:00Z, 09:00 in Berlin
        let rec = DueRecord {
            due_ms: due,
            pos_ms: due,
            group: g.clone(),
            after_ms: due - 1,
            cursor: Some("m-0500".into()),
            plan_at: Some(due),
            shard: None,
            stage: Stage::Fixed,
            leaves_seen: None,
        };
        let mut item = rec.to_item("j");
        item.insert("fold".into(), av_s("sideways"));
        let mut firing = g.head_item("j");
        firing.insert(FIRING.into(), av_n(due));
        // Fixed, its cursor kept: it goes on after the member it had reached.
        let (r, _) = Quarantined::of(item.clone(), "fold", 5).repaired(Some(&firing)).unwrap();
        assert_eq!((r.stage, r.cursor.as_deref()), (Stage::Fixed, Some("m-0500")));
        // Its stage unreadable too: rebuilt open, it would fire the fixed pages' members again.
        item.insert(STAGE.into(), av_s("later"));
        let q = Quarantined::of(item.clone(), "stage", 5);
        assert!(q.repaired(Some(&firing)).unwrap_err().contains("fire them again"));
        // A head not firing (a group of fewer members, never fixed): rebuilt open.
        assert_eq!(q.repaired(Some(&g.head_item("j"))).unwrap().0.stage, Stage::Open);
    }
}
