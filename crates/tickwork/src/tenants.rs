//! The tenants table and its sharded enumeration index.
//!
//! Why (`000_*`): the tenant list behind a sweep queried an index with a page limit and no cursor,
//! and every tenant past the first page silently never got its pulse. Here the only way to list
//! tenants is [`Tenants::for_each_page`], which pages one shard by cursor to exhaustion or stops
//! with a resumable [`Cursor`]. Enumeration is sharded (shard = FNV-1a(id) mod N) so that no single
//! index partition carries the whole list (`001_*`: a low-cardinality GSI key is a hot partition).
//!
//! ## Table (`<prefix>-tenants`)
//! Key `pk` = tenant id. Attributes: `zone` (IANA name), `status` (`active` | `suspended`),
//! `tshard` (`tenants#<k>`, **present only while active**), `zshard` (`<zone>#<k>`, likewise).
//! - GSI `by_shard` (`tshard`, `pk`): every active tenant, per shard. Suspended tenants are not in
//!   it, so "active" is a key condition (a sparse index), never a filter.
//! - GSI `by_zone` (`zshard`, `pk`): active tenants of one time zone, per shard; the pulse sweep
//!   reads only the zones whose local date advanced.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use futures::{StreamExt, TryStreamExt};
use std::future::Future;

use crate::budget::Budget;
use crate::capacity::Projection;
use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::pager::{for_each_page, Cursor, Page, PageError, PageRun};
use crate::schema::{av_s, get_s, s, GsiDef, TableDef, PK};
use crate::watermark::Watermarks;

/// Attribute: IANA time zone.
pub const ZONE: &str = "zone";
/// Attribute: lifecycle status.
pub const STATUS: &str = "status";
/// Attribute: when the tenant was added (ms); calendar work owed starts there.
pub const SINCE: &str = "since";
/// Attribute: where the tenant stands in its zone group's calendar ([`Position`]); absent while it
/// follows the group.
pub const POS: &str = "pos";
/// Attribute: enumeration shard, only while active.
pub const TSHARD: &str = "tshard";
/// Attribute: zone enumeration shard, only while active.
pub const ZSHARD: &str = "zshard";
/// Index over every active tenant.
pub const BY_SHARD: &str = "by_shard";
/// Index over active tenants per zone.
pub const BY_ZONE: &str = "by_zone";

/// The tenants table definition.
pub fn tenants_table() -> TableDef {
    let include = Projection::Include(vec![ZONE.into(), STATUS.into(), SINCE.into(), POS.into()]);
    TableDef {
        logical: "tenants",
        pk: s(PK),
        sk: None,
        gsis: vec![
            GsiDef { name: BY_SHARD, pk: s(TSHARD), sk: Some(s(PK)), projection: include.clone() },
            GsiDef { name: BY_ZONE, pk: s(ZSHARD), sk: Some(s(PK)), projection: include },
        ],
        ttl: None,
    }
}

/// Zones a sample deployment spans: both DST directions (Berlin, New York, Los Angeles in the
/// north; Auckland, Sydney in the south), a half-hour offset (Kolkata), no DST (Tokyo, UTC). The
/// simulator, the benchmark and `tickctl cost` use the same list so that their figures agree.
pub const SAMPLE_ZONES: [&str; 8] = [
    "Europe/Berlin",
    "America/New_York",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Pacific/Auckland",
    "America/Los_Angeles",
    "UTC",
    "Australia/Sydney",
];

/// The `i`-th sample tenant: id `tenant-00042`, zone round-robin over `zones`, active, added at
/// `since_ms`. The cost model places the same ids on the same shards as the simulator seeds.
pub fn sample_tenant(i: usize, zones: &[&str], since_ms: Option<i64>) -> Tenant {
    Tenant {
        id: format!("tenant-{i:05}"),
        zone: zones[i % zones.len().max(1)].to_string(),
        active: true,
        since_ms,
        pos: Position::Follows,
    }
}

/// Where a tenant stands in its zone group's calendar: which periods it has been pulsed through.
///
/// Why: a per-tenant cursor costs a write per tenant per day, more than the work it guards. Nearly
/// every tenant is where its zone group is — pulsed through the group's watermark, or through the
/// run's date once its page is done — so only tenants that are not ([`Position::Fresh`] after an
/// add, [`Position::Through`] after a suspension, a move or an isolated failure) carry a position,
/// and the sweep writes them once to bring them back to the group ([`Position::Follows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// Where its zone group is (attribute absent).
    #[default]
    Follows,
    /// Never visited: owed from the period before the one it was added in (`-`).
    Fresh,
    /// Pulsed through local date `d`: every period that ended by the start of `d` (`YYYY-MM-DD`).
    Through(jiff::civil::Date),
}

impl Position {
    /// The stored attribute value; `None` for [`Position::Follows`] (no attribute).
    pub fn to_attr(self) -> Option<String> {
        match self {
            Position::Follows => None,
            Position::Fresh => Some("-".into()),
            Position::Through(d) => Some(d.to_string()),
        }
    }

    /// Reads the stored attribute; an unreadable one is an error naming it (the tenant is
    /// isolated, never guessed at).
    pub fn from_attr(v: Option<&str>) -> Result<Self, String> {
        match v {
            None => Ok(Position::Follows),
            Some("-") => Ok(Position::Fresh),
            Some(d) => match d.parse::<jiff::civil::Date>() {
                Ok(x) if x.to_string() == d => Ok(Position::Through(x)),
                _ => Err(format!("position `{d}` is neither `-` nor a date (YYYY-MM-DD)")),
            },
        }
    }
}

pub use crate::shard::shard_of;

/// Longest tenant id, in bytes. Every key derived from an id must stay inside DynamoDB's limits
/// and ours: a unit key `pulse#<id>#<grain>#<period>` or `<job>#<id>#<yyyy-mm-dd>` (a handler's
/// idempotency key, which a handler may use as an item key: within 1,024 bytes, a job name being at
/// most 64), a dead letter of one unit, a failure record's sort key `<zone>@<date>#<id>` within the
/// 1,024-byte sort key limit. Batch item ids are digests and do not grow with it. 900 leaves room
/// for all of them; a test builds each key at this length.
pub const MAX_TENANT_ID_BYTES: usize = 900;

/// Adding at most this many tenants at once wakes each (visited at the sweep's next tick).
pub const WAKE_BULK_LIMIT: usize = 25;

/// A tenant refused before anything was written, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant `{id}`: {problem}")]
pub struct InvalidTenant {
    /// The id (shortened when long).
    pub id: String,
    /// What is wrong.
    pub problem: String,
}

/// A tenant as the sweeps need it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tenant {
    /// Id.
    pub id: String,
    /// IANA time zone name.
    pub zone: String,
    /// Active tenants are enumerated; others are not.
    pub active: bool,
    /// When the tenant was added (ms); `None` when unknown.
    pub since_ms: Option<i64>,
    /// Where it stands in its zone group's calendar.
    #[serde(default)]
    pub pos: Position,
}

impl Tenant {
    /// Checks the id and the zone before anything is written: an id whose derived keys would
    /// break a limit fails every write for that tenant, tick after tick, so it is refused here.
    pub fn validate(&self) -> Result<(), InvalidTenant> {
        let shown: String = if self.id.len() > 60 {
            format!("{}… ({} bytes)", self.id.chars().take(40).collect::<String>(), self.id.len())
        } else {
            self.id.clone()
        };
        let bad = |p: String| InvalidTenant { id: shown.clone(), problem: p };
        if self.id.is_empty() {
            return Err(bad("the id is empty".into()));
        }
        if self.id.len() > MAX_TENANT_ID_BYTES {
            return Err(bad(format!(
                "the id is {} bytes; the limit is {MAX_TENANT_ID_BYTES} (the keys derived from it must fit DynamoDB's)",
                self.id.len()
            )));
        }
        if let Some(c) = self.id.chars().find(|c| c.is_control() || *c == '#') {
            return Err(bad(format!(
                "the id holds {c:?}; control characters and `#` (the separator of the keys derived from ids) are refused"
            )));
        }
        crate::calendar::zone(&self.zone).map_err(|e| bad(e.0))?;
        Ok(())
    }

    /// The tenants-table item, index keys included (the cost model sizes it).
    pub fn to_item(&self, shards: u32) -> Item {
        let k = shard_of(&self.id, shards);
        let mut item = Item::from([
            (PK.to_string(), av_s(&self.id)),
            (ZONE.to_string(), av_s(&self.zone)),
            (STATUS.to_string(), av_s(if self.active { "active" } else { "suspended" })),
        ]);
        if let Some(s) = self.since_ms {
            item.insert(SINCE.into(), crate::schema::av_n(s));
        }
        if let Some(p) = self.pos.to_attr() {
            item.insert(POS.into(), av_s(p));
        }
        if self.active {
            item.insert(TSHARD.into(), av_s(format!("tenants#{k}")));
            item.insert(ZSHARD.into(), av_s(format!("{}#{k}", self.zone)));
        }
        item
    }

    /// The tenant an item holds; `Err` names what is unreadable (a corrupt position).
    pub fn from_item(i: &Item) -> Result<Self, InvalidTenant> {
        let id = get_s(i, PK).unwrap_or_default().to_string();
        let bad = |problem: String| InvalidTenant { id: id.clone(), problem };
        Ok(Tenant {
            zone: get_s(i, ZONE).ok_or_else(|| bad("no zone".into()))?.to_string(),
            active: get_s(i, STATUS) == Some("active"),
            since_ms: crate::schema::get_i64(i, SINCE),
            pos: Position::from_attr(get_s(i, POS)).map_err(bad)?,
            id: id.clone(),
        })
    }

    /// A new active tenant of `zone`, never visited.
    pub fn new(id: impl Into<String>, zone: impl Into<String>) -> Self {
        Tenant { id: id.into(), zone: zone.into(), active: true, since_ms: None, pos: Position::Fresh }
    }
}

/// The condition "this tenant is as it was read": the same zone, the same position and the same
/// status. Pure. Every write that acts on a tenant read earlier carries it: the sweep's move of a
/// position (a tenant suspended since its page was read keeps the position it was suspended with,
/// so resuming still owes every period since) and an operator's change (the sweep's move in
/// between is not overwritten).
pub fn unchanged(t: &Tenant) -> crate::schema::ExprParts {
    let names = vec![("#zone", ZONE), ("#pos", POS), ("#st", STATUS)];
    let mut values = vec![(":oldzone", av_s(&t.zone)), (":active", av_s("active"))];
    let mut cond = "#zone = :oldzone".to_string();
    match t.pos.to_attr() {
        None => cond.push_str(" AND attribute_not_exists(#pos)"),
        Some(p) => {
            cond.push_str(" AND #pos = :oldpos");
            values.push((":oldpos", av_s(p)));
        }
    }
    cond.push_str(if t.active { " AND #st = :active" } else { " AND (attribute_not_exists(#st) OR #st <> :active)" });
    (cond, names, values)
}

/// The tenants table.
#[derive(Debug, Clone)]
pub struct Tenants {
    db: Db,
    table: String,
    write_count: u32,
    read_count: u32,
    registry: Option<(Watermarks, String)>,
}

/// What [`Tenants::add`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct AddReport {
    /// Tenants written.
    pub added: u64,
    /// Ids that existed and were left as they are.
    pub existing: u64,
    /// Those ids: an importer compares their stored zone with the one it was given (a row that
    /// names another zone is a move, which `add` never makes silently).
    pub existing_ids: Vec<String>,
}

/// Why tenants could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AddError {
    /// A tenant was refused; nothing was written.
    #[error(transparent)]
    Invalid(#[from] InvalidTenant),
    /// DynamoDB.
    #[error(transparent)]
    Db(#[from] DbError),
    /// No zone registry was given ([`Tenants::with_registry`]).
    #[error("tenants can only be added with the pulse sweep's zone registry (Tenants::with_registry)")]
    NoRegistry,
}

impl Tenants {
    /// `table` with `shards` enumeration shards ([`crate::config::tenant_shards`]).
    ///
    /// # Panics
    /// When `shards` is 0: no shard would hold a tenant. Every reading of the setting refuses 0 at
    /// start-up, so only a program's own constant can get here, and it should fail loudly rather
    /// than be taken for 1.
    pub fn new(db: Db, table: impl Into<String>, shards: u32) -> Self {
        assert!(shards >= 1, "a tenants table needs at least one enumeration shard (TICKWORK_TENANT_SHARDS)");
        Self { db, table: table.into(), write_count: shards, read_count: shards, registry: None }
    }

    /// Enumerates `n` shards (at least the write count): the largest count ever written with,
    /// from the [`crate::shard::ShardRegistry`], so a lowered setting strands nobody.
    pub fn with_read_shards(mut self, n: u32) -> Self {
        self.read_count = n.max(self.write_count);
        self
    }

    /// Shards tenants are written with.
    pub fn write_shards(&self) -> u32 {
        self.write_count
    }

    /// The zone registry tenants are added through: the pulse sweep's state item (`job`), whose
    /// registered zones are the only ones the sweep visits.
    pub fn with_registry(mut self, marks: Watermarks, job: impl Into<String>) -> Self {
        self.registry = Some((marks, job.into()));
        self
    }

    /// Adds tenants, the supported way: every tenant validated first (one bad one refuses the
    /// call and nothing is written), their zones registered before they are written (a
    /// registered zone with no tenants costs nothing; the reverse is a tenant never visited),
    /// `since` stamped with `now_ms` where unset (calendar work is owed from the day a tenant is
    /// added, even if its first visit comes late), and the position [`Position::Fresh`].
    /// Idempotent: an id that exists is left as it is (its position and history kept) and
    /// counted as existing.
    pub async fn add(&self, tenants: &[Tenant], now_ms: i64) -> Result<AddReport, AddError> {
        for t in tenants {
            t.validate()?;
        }
        let (marks, job) = self.registry.as_ref().ok_or(AddError::NoRegistry)?;
        crate::shard::ShardRegistry::new(marks.db().clone(), marks.table()).record("tenants", self.write_count).await?;
        let mut zones: Vec<String> = tenants.iter().map(|t| t.zone.clone()).collect();
        zones.sort();
        zones.dedup();
        marks.register_groups(job, &zones, self.write_count).await?;
        let stamped: Vec<Tenant> = tenants
            .iter()
            .map(|t| Tenant { since_ms: t.since_ms.or(Some(now_ms)), pos: Position::Fresh, ..t.clone() })
            .collect();
        let puts = stamped.iter().map(|t| self.db.put_new(&self.table, t.to_item(self.write_count)));
        let added: Vec<bool> = futures::stream::iter(puts).buffered(8).try_collect().await?;
        let existing_ids: Vec<String> =
            stamped.iter().zip(&added).filter(|(_, a)| !**a).map(|(t, _)| t.id.clone()).collect();
        let report = AddReport {
            added: added.iter().filter(|a| **a).count() as u64,
            existing: existing_ids.len() as u64,
            existing_ids,
        };
        // A few tenants are visited at the sweep's next tick; a bulk import waits for each zone's
        // next midnight (a wake set is bounded; see `Watermarks::wake`). Existing ids are woken
        // too: a retried `add` whose first call died between its put and its wake still wakes
        // the tenant (a visit to a tenant already with its group, or in another zone, does
        // nothing).
        if stamped.len() <= WAKE_BULK_LIMIT {
            for t in stamped.iter().filter(|t| t.active) {
                marks.wake(job, &t.zone, &t.id).await?;
            }
        }
        Ok(report)
    }

    /// Shards to enumerate (every shard any tenant was written to).
    pub fn shards(&self) -> u32 {
        self.read_count
    }

    /// The stored tenant (strongly consistent), for operators and the lifecycle operations below.
    pub async fn get(&self, id: &str) -> Result<Option<Tenant>, DbError> {
        let item = self.db.get_strong(&self.table, Item::from([(PK.to_string(), av_s(id))])).await?;
        item.as_ref()
            .map(Tenant::from_item)
            .transpose()
            .map_err(|e| DbError::Unreadable { table: self.table.clone(), problem: e.to_string() })
    }

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
        match self.db.update(req.update_expression(expr.trim()).condition_expression(cond)).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
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
                        (TSHARD, Some(format!("tenants#{k}"))),
                        (ZSHARD, Some(format!("{}#{k}", t.zone))),
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
                        set.push((ZSHARD, Some(format!("{zone}#{k}"))));
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
        match self.db.delete(req).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The sweep's write that brings a visited tenant to `to`, as a transaction item: applied only
    /// if the tenant's zone and position are still the ones the sweep read.
    pub fn reposition_item(&self, t: &Tenant, to: Position) -> aws_sdk_dynamodb::types::TransactWriteItem {
        let (cond, names, values) = unchanged(t);
        let mut u = aws_sdk_dynamodb::types::Update::builder().table_name(&self.table).key(PK, av_s(&t.id));
        for (k, v) in names {
            u = u.expression_attribute_names(k, v);
        }
        for (k, v) in values {
            u = u.expression_attribute_values(k, v);
        }
        u = match to.to_attr() {
            None => u.update_expression("REMOVE #pos"),
            Some(p) => u.update_expression("SET #pos = :new").expression_attribute_values(":new", av_s(p)),
        };
        let u = u.condition_expression(cond).build().expect("update has table, key and expression");
        aws_sdk_dynamodb::types::TransactWriteItem::builder().update(u).build()
    }

    /// Writes tenants as they are, 25 per batch, unprocessed items retried. Registers no zone:
    /// tooling and tests that set up a table; applications use [`Tenants::add`].
    pub async fn put_all(&self, tenants: &[Tenant]) -> Result<(), DbError> {
        let writes: Vec<WriteRequest> = tenants
            .iter()
            .map(|t| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder().set_item(Some(t.to_item(self.write_count))).build().expect("item"),
                    )
                    .build()
            })
            .collect();
        self.db.batch_write_all(&self.table, writes, 8).await
    }

    /// One page of the tenants table (active and suspended alike) from `start`, and the cursor
    /// after it (`None`: the table is exhausted). A Scan: an operator's listing (`tickctl tenants
    /// list`), never a tick's; a caller follows the cursor to the end or hands it back to resume.
    pub async fn list_page(
        &self,
        start: Option<&Cursor>,
        page_size: i32,
    ) -> Result<(Vec<Result<Tenant, InvalidTenant>>, Option<Cursor>), PageError<std::convert::Infallible>> {
        let start = start.map(Cursor::decode).transpose()?;
        let out = self
            .db
            .scan_page(
                self.db.client().scan().table_name(&self.table).limit(page_size.max(1)).set_exclusive_start_key(start),
            )
            .await?;
        let next = match out.last_evaluated_key() {
            Some(k) if !k.is_empty() => Some(Cursor::encode(k)?),
            _ => None,
        };
        Ok((out.items().iter().map(Tenant::from_item).collect(), next))
    }

    fn shard_query(&self, k: u32) -> QueryFluentBuilder {
        self.db
            .client()
            .query()
            .table_name(&self.table)
            .index_name(BY_SHARD)
            .key_condition_expression("#s = :s")
            .expression_attribute_names("#s", TSHARD)
            .expression_attribute_values(":s", av_s(format!("tenants#{k}")))
    }

    /// Active tenants of `zone` in shard `k`, counted with `Select=COUNT` and paged to the end.
    /// A count is billed like reading the items (on the keys-only index, small): an operator's
    /// question (`tickctl plan`), never a tick's.
    pub async fn count_zone_shard(&self, zone: &str, k: u32) -> Result<u64, DbError> {
        let mut n = 0u64;
        let mut start = None;
        loop {
            let out = self
                .db
                .query(
                    self.zone_query(zone, k)
                        .select(aws_sdk_dynamodb::types::Select::Count)
                        .set_exclusive_start_key(start),
                )
                .await?;
            n += out.count().max(0) as u64;
            match out.last_evaluated_key() {
                Some(key) if !key.is_empty() => start = Some(key.clone()),
                _ => return Ok(n),
            }
        }
    }

    fn zone_query(&self, zone: &str, k: u32) -> QueryFluentBuilder {
        self.db
            .client()
            .query()
            .table_name(&self.table)
            .index_name(BY_ZONE)
            .key_condition_expression("#s = :s")
            .expression_attribute_names("#s", ZSHARD)
            .expression_attribute_values(":s", av_s(format!("{zone}#{k}")))
    }

    /// Pages every active tenant of shard `k` from `start`, calling `on_page` with each page and the
    /// cursor after it, until the shard is exhausted or `budget` stops it (then the returned cursor
    /// resumes it).
    pub async fn for_each_page<E, F, Fut>(
        &self,
        k: u32,
        start: Option<&Cursor>,
        page_size: i32,
        budget: &dyn Budget,
        on_page: F,
    ) -> Result<PageRun, PageError<E>>
    where
        F: FnMut(Vec<Result<Tenant, InvalidTenant>>, Option<Cursor>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let label = format!("tenants shard {k}");
        self.page(self.shard_query(k), &label, start, page_size, budget, on_page).await
    }

    /// One page of the active tenants of `zone` in shard `k` from `start`, and the cursor after
    /// it (`None`: the shard is exhausted). For callers that persist the cursor themselves.
    pub async fn zone_page(
        &self,
        zone: &str,
        k: u32,
        start: Option<&Cursor>,
        page_size: i32,
    ) -> Result<(Vec<Result<Tenant, InvalidTenant>>, Option<Cursor>), PageError<std::convert::Infallible>> {
        let page = crate::pager::fetch_page(&self.db, &self.zone_query(zone, k), start, page_size).await?;
        Ok((page.items.iter().map(Tenant::from_item).collect(), page.next))
    }

    /// The zone index's cursor just after tenant `id` of `zone`'s shard `k` (the key DynamoDB
    /// returns as `LastEvaluatedKey` for a page ending there): lets a caller checkpoint in the
    /// middle of a page.
    pub fn zone_cursor_at(&self, zone: &str, k: u32, id: &str) -> Result<Cursor, crate::pager::CursorError> {
        Cursor::encode(&Item::from([(ZSHARD.to_string(), av_s(format!("{zone}#{k}"))), (PK.to_string(), av_s(id))]))
    }

    /// Like [`Tenants::for_each_page`] for the active tenants of one zone.
    pub async fn for_each_zone_page<E, F, Fut>(
        &self,
        zone: &str,
        k: u32,
        start: Option<&Cursor>,
        page_size: i32,
        budget: &dyn Budget,
        on_page: F,
    ) -> Result<PageRun, PageError<E>>
    where
        F: FnMut(Vec<Result<Tenant, InvalidTenant>>, Option<Cursor>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let label = format!("tenants zone {zone} shard {k}");
        self.page(self.zone_query(zone, k), &label, start, page_size, budget, on_page).await
    }

    async fn page<E, F, Fut>(
        &self,
        query: QueryFluentBuilder,
        label: &str,
        start: Option<&Cursor>,
        page_size: i32,
        budget: &dyn Budget,
        mut on_page: F,
    ) -> Result<PageRun, PageError<E>>
    where
        F: FnMut(Vec<Result<Tenant, InvalidTenant>>, Option<Cursor>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        for_each_page(&self.db, query, start, page_size, budget, label, |page: Page| {
            on_page(page.items.iter().map(Tenant::from_item).collect(), page.next)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_names_zone_position_and_status() {
        let mut t = Tenant::new("t1", "Europe/Berlin");
        t.pos = Position::Follows;
        let (c, names, values) = unchanged(&t);
        assert_eq!(c, "#zone = :oldzone AND attribute_not_exists(#pos) AND #st = :active");
        assert_eq!((names.len(), values.len()), (3, 2));
        t.pos = Position::Through("2026-11-28".parse().unwrap());
        t.active = false;
        let (c, _, values) = unchanged(&t);
        assert_eq!(c, "#zone = :oldzone AND #pos = :oldpos AND (attribute_not_exists(#st) OR #st <> :active)");
        assert!(values.iter().any(|(k, v)| *k == ":oldpos" && v.as_s().unwrap() == "2026-11-28"));
    }
}
