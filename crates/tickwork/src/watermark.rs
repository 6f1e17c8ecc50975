//! Watermark: the last completed window per group, and the job's pause switch, in one item.
//!
//! Why (`000_*`): between boundaries a tick must cost one read. The watermark records the last
//! completed window (e.g. local date per time-zone group); the idle tick reads it with one
//! eventually consistent GetItem and returns. The same item carries the pause switch an operator
//! flips (`tickctl pause`), so pausing costs no extra read.
//!
//! Item: `pk = wm#<job>`, `sk = wm`; one attribute `mark:<group>` (S) per group, compared as
//! strings, so values must sort in time order (ISO dates do); `paused` (BOOL), `paused_reason`.
//!
//! ## Protocol
//! - The watermark is written **last**, after every unit it covers succeeded, and only forward:
//!   `attribute_not_exists(mark) OR mark < :new`.
//! - It is fenced: written in a transaction with the lease's ConditionCheck, so a stale leader
//!   that wakes late cannot move it ([`Advance::Stale`]).
//! - A crash before the write makes the next tick redo the window; that is safe only because each
//!   unit's effect has its own idempotency key. The watermark skips work; it never proves it.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use crate::clock::SharedClock;
use crate::db::Db;
use crate::error::DbError;
use crate::lease::{fenced_write, Fence, Fenced};
use crate::schema::{av_n, av_s, get_bool, get_i64, get_s, key};

/// Attribute name prefix for a group's mark.
pub const MARK_PREFIX: &str = "mark:";
/// Attribute: the pause switch.
pub const PAUSED: &str = "paused";
/// Attribute: why it was paused.
pub const PAUSED_REASON: &str = "paused_reason";
/// Attribute: the registered groups (string set), so the idle tick learns them from the same read.
pub const GROUPS: &str = "groups";
/// State-item attribute: every shard count the job's units were written with (a number set), so
/// that a warm reader, whose start-up registry read is stale, still enumerates them all: it reads
/// the state item on every tick anyway.
pub const UNIT_SHARDS: &str = "unit_shards";
/// Attribute: when a group was last registered (ms): a zone found empty is not taken out of the
/// registry while a registration is recent ([`Watermarks::deregister`]).
pub const REGISTERED_AT: &str = "registered_at";
/// Attribute name prefix for when a group's current run started: `<window>@<ms>`. Lateness
/// ("was this period pulsed on time?") is measured from the run's first tick, not from whichever
/// later tick of a long run reaches a tenant.
pub const RUN_PREFIX: &str = "run:";
/// State item attribute: [`WatermarkState::sched_next`].
pub const SCHED_NEXT: &str = "sched_next";
/// State item attribute: [`WatermarkState::sched_adds`].
pub const SCHED_ADDS: &str = "sched_adds";
/// State item attribute: [`WatermarkState::sched_wake`].
pub const SCHED_WAKE: &str = "sched_wake";
pub use crate::wake::{Waiting, Woken, WAKE_PREFIX, WOKEN_PREFIX};

/// The watermark item's key.
pub fn watermark_key(job: &str) -> crate::item::Item {
    key(format!("wm#{job}"), "wm")
}

/// What one read of the watermark item tells.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WatermarkState {
    /// Last completed window per group.
    pub marks: BTreeMap<String, String>,
    /// Operator's pause switch.
    pub paused: bool,
    /// Why, when paused.
    pub paused_reason: Option<String>,
    /// Registered groups (e.g. the time zones that have tenants).
    pub groups: std::collections::BTreeSet<String>,
    /// When each group's current run started: group → (window, ms).
    pub runs: BTreeMap<String, (String, i64)>,
    /// Units to visit at the next tick, per group ([`crate::wake`]).
    pub wake: BTreeMap<String, Woken>,
    /// The largest shard count the job's units were written with (0: none recorded).
    pub unit_shards: u32,
    /// No schedule's due record is due before this instant ([`crate::schedules`]); `None`: no
    /// schedule was ever added. An idle tick reads it here instead of querying the due index.
    pub sched_next: Option<i64>,
    /// Batches of writers' due records counted as the stream hands them over
    /// ([`crate::schedules::lowering`]): the sweep sets [`WatermarkState::sched_next`] only if no
    /// batch was counted between its read and its write.
    pub sched_adds: i64,
    /// The instant the sweep last set its wake for (`pulse_sweep::wake`).
    pub sched_wake: Option<i64>,
}

impl WatermarkState {
    /// When `group`'s run for `window` started, if it has.
    pub fn run_started(&self, group: &str, window: &str) -> Option<i64> {
        self.runs.get(group).filter(|(w, _)| w == window).map(|(_, ms)| *ms)
    }
}

/// Outcome of an advance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// Moved forward.
    Advanced,
    /// Our lease moved on: nothing written.
    Stale,
    /// Already at or past `value` (another leader finished first): nothing written.
    NotForward {
        /// The current mark.
        current: Option<String>,
    },
}

/// Watermarks in the control table.
#[derive(Debug, Clone)]
pub struct Watermarks {
    db: Db,
    table: String,
    clock: SharedClock,
}

impl Watermarks {
    /// An UpdateItem of the job's state item, to complete.
    fn update_of(&self, job: &str) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.db.client().update_item().table_name(&self.table).set_key(Some(watermark_key(job)))
    }

    /// Watermarks in `table`.
    pub fn new(db: Db, table: impl Into<String>, clock: SharedClock) -> Self {
        Self { db, table: table.into(), clock }
    }

    /// The control table.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The metered client.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// One eventually consistent GetItem: marks and pause switch.
    pub async fn read(&self, job: &str) -> Result<WatermarkState, DbError> {
        self.read_with(job, false).await
    }

    /// [`Watermarks::read`], strongly consistent: for operators' changes that must not act on a
    /// state a moment old (a tenant's position taken from its group's mark).
    pub async fn read_strong(&self, job: &str) -> Result<WatermarkState, DbError> {
        self.read_with(job, true).await
    }

    async fn read_with(&self, job: &str, consistent: bool) -> Result<WatermarkState, DbError> {
        let out = self
            .db
            .get(
                self.db
                    .client()
                    .get_item()
                    .table_name(&self.table)
                    .set_key(Some(watermark_key(job)))
                    .consistent_read(consistent),
            )
            .await?;
        let Some(item) = out.item() else {
            return Ok(WatermarkState::default());
        };
        let marks = item
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(MARK_PREFIX)?.to_string(), v.as_s().ok()?.clone())))
            .collect();
        Ok(WatermarkState {
            marks,
            paused: get_bool(item, PAUSED).unwrap_or(false),
            paused_reason: get_s(item, PAUSED_REASON).map(str::to_string),
            runs: item
                .iter()
                .filter_map(|(k, v)| {
                    let g = k.strip_prefix(RUN_PREFIX)?;
                    let (w, ms) = v.as_s().ok()?.rsplit_once('@')?;
                    Some((g.to_string(), (w.to_string(), ms.parse().ok()?)))
                })
                .collect(),
            wake: Woken::all_of(item),
            groups: item
                .get(GROUPS)
                .and_then(|v| v.as_ss().ok())
                .map(|v| v.iter().cloned().collect())
                .unwrap_or_default(),
            unit_shards: item
                .get(UNIT_SHARDS)
                .and_then(|v| v.as_ns().ok())
                .and_then(|v| v.iter().filter_map(|n| n.parse::<u32>().ok()).max())
                .unwrap_or(0),
            sched_next: get_i64(item, SCHED_NEXT),
            sched_adds: get_i64(item, SCHED_ADDS).unwrap_or(0),
            sched_wake: get_i64(item, SCHED_WAKE),
        })
    }

    /// Moves `group`'s mark forward to `value`, fenced.
    pub async fn advance(&self, fence: &Fence, group: &str, value: &str) -> Result<Advance, DbError> {
        match fenced_write(&self.db, fence, vec![self.advance_item(&fence.job, group, value)]).await? {
            Fenced::Written => Ok(Advance::Advanced),
            Fenced::Stale => Ok(Advance::Stale),
            Fenced::ConditionFailed { item, .. } => Ok(Advance::NotForward {
                current: item.as_ref().and_then(|i| get_s(i, &format!("{MARK_PREFIX}{group}"))).map(str::to_string),
            }),
        }
    }

    /// The forward-only mark move as a transaction item, for a caller's fenced transaction. The
    /// group's run start goes with it: needed only while a run is in progress, it would otherwise
    /// stay in the item every idle tick reads, some 40 bytes a zone.
    pub fn advance_item(&self, job: &str, group: &str, value: &str) -> TransactWriteItem {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(watermark_key(job)))
            .update_expression("SET #m = :v, #at = :now REMOVE #r")
            .condition_expression("attribute_not_exists(#m) OR #m < :v")
            .expression_attribute_names("#m", format!("{MARK_PREFIX}{group}"))
            .expression_attribute_names("#at", "updated_at")
            .expression_attribute_names("#r", format!("{RUN_PREFIX}{group}"))
            .expression_attribute_values(":v", av_s(value))
            .expression_attribute_values(":now", av_n(self.clock.now_ms()))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .build()
            .expect("update has table, key and expression");
        TransactWriteItem::builder().update(update).build()
    }

    /// Asks the job to visit `unit` of `group` at its next tick ([`crate::wake`], idempotent).
    pub async fn wake(&self, job: &str, group: &str, unit: &str) -> Result<(), DbError> {
        crate::wake::wake(&self.db, &self.table, watermark_key(job), job, group, unit, self.clock.now_ms()).await
    }

    /// The units of `group` waiting, up to [`crate::wake::MAX_VISIT`]; `true` when that is all.
    pub async fn waiting(&self, job: &str, group: &str) -> Result<(Vec<Waiting>, bool), DbError> {
        crate::wake::waiting(&self.db, &self.table, job, group).await
    }

    /// The delete of a visited unit's wake item, for the transaction that records its visit.
    pub fn woken_item(&self, job: &str, group: &str, w: &Waiting) -> TransactWriteItem {
        crate::wake::done(&self.table, job, group, w)
    }

    /// Clears `group`'s wake mark after a visit read all its units, unless a wake came since.
    pub async fn settle_wake(&self, job: &str, group: &str, seen: &Woken) -> Result<bool, DbError> {
        crate::wake::settle(&self.db, &self.table, watermark_key(job), group, seen).await
    }

    /// Sets marks unconditionally and unfenced: for hints a job keeps about itself (the
    /// archiver's oldest not-yet-due row), where a stale value only makes the next tick look
    /// again, never skips work.
    pub async fn set_marks(&self, job: &str, marks: &[(&str, &str)]) -> Result<(), DbError> {
        if marks.is_empty() {
            return Ok(());
        }
        let mut req = self.update_of(job);
        let mut sets = Vec::new();
        for (i, (name, value)) in marks.iter().enumerate() {
            req = req
                .expression_attribute_names(format!("#m{i}"), format!("{MARK_PREFIX}{name}"))
                .expression_attribute_values(format!(":v{i}"), av_s(*value));
            sets.push(format!("#m{i} = :v{i}"));
        }
        self.db.update(req.update_expression(format!("SET {}", sets.join(", ")))).await.map(|_| ())
    }

    /// Records that `group`'s run for `window` started at `at_ms`, unless it already has (the
    /// first tick of a run wins; a repeat changes nothing), or the group's mark is at `window`
    /// already (the run is done: a plan read before it finished starts nothing again). Not
    /// fenced: whoever writes it first saw the run start.
    pub async fn start_run(&self, job: &str, group: &str, window: &str, at_ms: i64) -> Result<(), DbError> {
        let req = self
            .update_of(job)
            .update_expression("SET #r = :v")
            .condition_expression(
                "(attribute_not_exists(#r) OR NOT begins_with(#r, :w)) AND (attribute_not_exists(#m) OR #m < :d)",
            )
            .expression_attribute_names("#m", format!("{MARK_PREFIX}{group}"))
            .expression_attribute_values(":d", av_s(window))
            .expression_attribute_names("#r", format!("{RUN_PREFIX}{group}"))
            .expression_attribute_values(":v", av_s(format!("{window}@{at_ms}")))
            .expression_attribute_values(":w", av_s(format!("{window}@")));
        match self.db.update(req).await {
            Ok(_) | Err(DbError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Adds groups to the job's registry, and the shard count their units are written with
    /// ([`UNIT_SHARDS`]), in one write (idempotent: set `ADD`s), stamping when a group was last
    /// registered ([`REGISTERED_AT`]).
    pub async fn register_groups(&self, job: &str, groups: &[String], shards: u32) -> Result<(), DbError> {
        if groups.is_empty() {
            return Ok(());
        }
        let req = self
            .update_of(job)
            .update_expression("ADD #g :g, #n :n SET #r = :now")
            .expression_attribute_names("#g", GROUPS)
            .expression_attribute_names("#n", UNIT_SHARDS)
            .expression_attribute_names("#r", REGISTERED_AT)
            .expression_attribute_values(":g", aws_sdk_dynamodb::types::AttributeValue::Ss(groups.to_vec()))
            .expression_attribute_values(":n", aws_sdk_dynamodb::types::AttributeValue::Ns(vec![shards.to_string()]))
            .expression_attribute_values(":now", av_n(self.clock.now_ms()));
        self.db.update(req).await.map(|_| ())
    }

    /// Takes `group` out of the registry (its mark, its run and its wake number with it) after a
    /// run for `window` found it empty, unless any group was registered since `cutoff_ms`: an
    /// operator's add registers a zone *before* it writes the tenant, and the run's index page may
    /// not show a tenant written a moment ago, so a recent registration leaves the zone for the
    /// next day's run to judge. `false` when it stays. A zone registered again (an add, a resume,
    /// a move into it) is swept again.
    pub async fn deregister(&self, job: &str, group: &str, window: &str, cutoff_ms: i64) -> Result<bool, DbError> {
        let req = self
            .update_of(job)
            .update_expression("DELETE #g :g REMOVE #m, #run, #w")
            .condition_expression("#m = :window AND (attribute_not_exists(#r) OR #r < :cutoff)")
            .expression_attribute_names("#g", GROUPS)
            .expression_attribute_names("#m", format!("{MARK_PREFIX}{group}"))
            .expression_attribute_names("#run", format!("{RUN_PREFIX}{group}"))
            .expression_attribute_names("#w", format!("{WOKEN_PREFIX}{group}"))
            .expression_attribute_names("#r", REGISTERED_AT)
            .expression_attribute_values(":g", aws_sdk_dynamodb::types::AttributeValue::Ss(vec![group.to_string()]))
            .expression_attribute_values(":window", av_s(window))
            .expression_attribute_values(":cutoff", av_n(cutoff_ms));
        crate::error::condition_held(self.db.update(req).await)
    }

    /// Flips the pause switch (operator action; not fenced, any time).
    pub async fn set_paused(&self, job: &str, paused: bool, reason: Option<&str>) -> Result<(), DbError> {
        let mut req = self
            .update_of(job)
            .expression_attribute_names("#p", PAUSED)
            .expression_attribute_names("#r", PAUSED_REASON)
            .expression_attribute_values(":p", aws_sdk_dynamodb::types::AttributeValue::Bool(paused));
        req = match reason {
            Some(r) => req.update_expression("SET #p = :p, #r = :r").expression_attribute_values(":r", av_s(r)),
            None => req.update_expression("SET #p = :p REMOVE #r"),
        };
        self.db.update(req).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state item's bytes a zone, behind `docs/schedules.md`'s writers' ceilings: every
    /// schedule write updates this item in a transaction, 2 write units a KB of it (DynamoDB
    /// Developer Guide, "DynamoDB read and write operations"), and one item takes 1,000 write
    /// units a second. With 100 of the tz database's zones (their names as they are) marked and
    /// registered, the item is about 5 KB: 10 units a write, 100 writes a second; up to about 20
    /// zones it stays within 1 KB: 500 a second.
    #[test]
    fn the_state_items_size_a_zone_bounds_the_schedule_writes_a_second() {
        let zones: Vec<String> =
            jiff::tz::db().available().map(|n| n.to_string()).filter(|n| n.contains('/')).take(100).collect();
        let item_of = |n: usize| -> crate::item::Item {
            let mut item = crate::schema::key("wm#pulse-sweep", "wm");
            for z in &zones[..n] {
                item.insert(format!("{MARK_PREFIX}{z}"), av_s("2026-12-06"));
            }
            item.insert(GROUPS.into(), aws_sdk_dynamodb::types::AttributeValue::Ss(zones[..n].to_vec()));
            for a in [SCHED_NEXT, SCHED_ADDS, REGISTERED_AT, "updated_at"] {
                item.insert(a.into(), av_n(1_796_000_000_000i64));
            }
            item
        };
        let size = |n| crate::capacity::item_size(&item_of(n));
        let per_zone = (size(100) - size(0)) as f64 / 100.0;
        let writes_a_second = |n| 1_000 / (2 * size(n).div_ceil(1024));
        println!("{per_zone:.1} bytes a zone; 20 zones {} B, 100 zones {} B", size(20), size(100));
        assert!((40.0..=50.0).contains(&per_zone), "about 45 bytes a zone: {per_zone}");
        assert_eq!((writes_a_second(20), writes_a_second(100)), (500, 100), "{} B, {} B", size(20), size(100));
    }
}
