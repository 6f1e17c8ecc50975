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
use std::future::Future;

use crate::budget::Budget;
use crate::capacity::{Item, Projection};
use crate::db::Db;
use crate::error::DbError;
use crate::pager::{for_each_page, Cursor, Page, PageError, PageRun};
use crate::schema::{av_s, get_s, s, GsiDef, TableDef, PK};
use crate::watermark::Watermarks;

/// Attribute: IANA time zone.
pub const ZONE: &str = "zone";
/// Attribute: lifecycle status.
pub const STATUS: &str = "status";
/// Attribute: when the tenant was added (ms); calendar work owed starts there.
pub const SINCE: &str = "since";
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
    let include = Projection::Include(vec![ZONE.into(), STATUS.into(), SINCE.into()]);
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
    Tenant { id: format!("tenant-{i:05}"), zone: zones[i % zones.len().max(1)].to_string(), active: true, since_ms }
}

pub use crate::shard::shard_of;

/// Longest tenant id, in bytes. Every key derived from an id must stay inside DynamoDB's limits
/// and ours: a pulse id `pulse#<id>#<grain>#<period>` and a fan-out item id
/// `<job>#<yyyy-mm-dd>#<id>` within the queue's 1,024-byte id limit (a job name is at most 64
/// bytes), a cursor partition `cursor#<id>` within the 2,048-byte partition key limit, a failure
/// record's sort key `<zone>@<date>#<id>` within the 1,024-byte sort key limit. 900 leaves room
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
        if self.active {
            item.insert(TSHARD.into(), av_s(format!("tenants#{k}")));
            item.insert(ZSHARD.into(), av_s(format!("{}#{k}", self.zone)));
        }
        item
    }

    fn from_item(i: &Item) -> Option<Self> {
        Some(Tenant {
            id: get_s(i, PK)?.to_string(),
            zone: get_s(i, ZONE)?.to_string(),
            active: get_s(i, STATUS) == Some("active"),
            since_ms: crate::schema::get_i64(i, SINCE),
        })
    }
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
    /// `table` with `shards` enumeration shards (`TICKWORK_TENANT_SHARDS`).
    pub fn new(db: Db, table: impl Into<String>, shards: u32) -> Self {
        Self { db, table: table.into(), write_count: shards.max(1), read_count: shards.max(1), registry: None }
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
    /// and `since` stamped with `now_ms` where unset, so calendar work is owed from the day a
    /// tenant is added even if its first visit comes late. Idempotent: adding again rewrites the
    /// same items.
    pub async fn add(&self, tenants: &[Tenant], now_ms: i64) -> Result<(), AddError> {
        for t in tenants {
            t.validate()?;
        }
        let (marks, job) = self.registry.as_ref().ok_or(AddError::NoRegistry)?;
        crate::shard::ShardRegistry::new(marks.db().clone(), marks.table()).record("tenants", self.write_count).await?;
        let mut zones: Vec<String> = tenants.iter().map(|t| t.zone.clone()).collect();
        zones.sort();
        zones.dedup();
        marks.register_groups(job, &zones).await?;
        let stamped: Vec<Tenant> =
            tenants.iter().map(|t| Tenant { since_ms: t.since_ms.or(Some(now_ms)), ..t.clone() }).collect();
        self.put_all(&stamped).await?;
        // A few tenants are visited at the sweep's next tick; a bulk import waits for each zone's
        // next midnight (a wake set is bounded; see `Watermarks::wake`).
        if stamped.len() <= WAKE_BULK_LIMIT {
            for t in stamped.iter().filter(|t| t.active) {
                marks.wake(job, &t.zone, &t.id).await?;
            }
        }
        Ok(())
    }

    /// Shards to enumerate (every shard any tenant was written to).
    pub fn shards(&self) -> u32 {
        self.read_count
    }

    /// The stored tenant (strongly consistent), for operators and the lifecycle operations below.
    pub async fn get(&self, id: &str) -> Result<Option<Tenant>, DbError> {
        let item = self.db.get_strong(&self.table, Item::from([(PK.to_string(), av_s(id))])).await?;
        Ok(item.as_ref().and_then(Tenant::from_item))
    }

    /// Suspends a tenant: out of both enumeration indexes (never visited), everything else kept
    /// (its zone, its `since`, its cursors). Returns `false` when there is no such tenant.
    pub async fn suspend(&self, id: &str) -> Result<bool, DbError> {
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #st = :s REMOVE #t, #z")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#t", TSHARD)
            .expression_attribute_names("#z", ZSHARD)
            .expression_attribute_values(":s", av_s("suspended"));
        match self.db.update(req).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Resumes a suspended tenant in its zone: back in both indexes, and visited at the sweep's
    /// next tick; that visit owes every period since its cursors (the catch-up policy decides
    /// what a long suspension pulses).
    pub async fn resume(&self, id: &str) -> Result<bool, DbError> {
        let Some(t) = self.get(id).await? else { return Ok(false) };
        let placed = self.place(&t.id, &t.zone).await?;
        if let (true, Some((marks, job))) = (placed, &self.registry) {
            marks.wake(job, &t.zone, &t.id).await?;
        }
        Ok(placed)
    }

    /// Moves a tenant to another zone, keeping `since` and its cursors: periods are local dates,
    /// so each is pulsed once whatever the move (a day already pulsed in the old zone is not
    /// pulsed again; one not yet pulsed is owed in the new). The new zone is registered first.
    pub async fn move_zone(&self, id: &str, zone: &str) -> Result<bool, AddError> {
        let probe = Tenant { id: id.to_string(), zone: zone.to_string(), active: true, since_ms: None };
        probe.validate()?;
        let (marks, job) = self.registry.as_ref().ok_or(AddError::NoRegistry)?;
        marks.register_groups(job, &[zone.to_string()]).await?;
        let placed = self.place(id, zone).await?;
        if placed {
            marks.wake(job, zone, id).await?;
        }
        Ok(placed)
    }

    /// Sets `zone` and, active again, both index keys; only if the tenant exists.
    async fn place(&self, id: &str, zone: &str) -> Result<bool, DbError> {
        let k = shard_of(id, self.write_count);
        let req = self
            .db
            .client()
            .update_item()
            .table_name(&self.table)
            .key(PK, av_s(id))
            .update_expression("SET #zone = :zone, #st = :a, #t = :t, #z = :z")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#zone", ZONE)
            .expression_attribute_names("#st", STATUS)
            .expression_attribute_names("#t", TSHARD)
            .expression_attribute_names("#z", ZSHARD)
            .expression_attribute_values(":zone", av_s(zone))
            .expression_attribute_values(":a", av_s("active"))
            .expression_attribute_values(":t", av_s(format!("tenants#{k}")))
            .expression_attribute_values(":z", av_s(format!("{zone}#{k}")));
        match self.db.update(req).await {
            Ok(_) => Ok(true),
            Err(DbError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e),
        }
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
        F: FnMut(Vec<Tenant>, Option<Cursor>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let label = format!("tenants shard {k}");
        self.page(self.shard_query(k), &label, start, page_size, budget, on_page).await
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
        F: FnMut(Vec<Tenant>, Option<Cursor>) -> Fut,
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
        F: FnMut(Vec<Tenant>, Option<Cursor>) -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        for_each_page(&self.db, query, start, page_size, budget, label, |page: Page| {
            on_page(page.items.iter().filter_map(Tenant::from_item).collect(), page.next)
        })
        .await
    }
}
