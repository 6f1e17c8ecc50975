//! The tenants table as the library uses it: adding tenants the supported way (zones registered
//! with the sweep first, insert-once), reading one, writing as they are, and the sweep's reposition.

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use futures::{StreamExt, TryStreamExt};

use crate::db::Db;
use crate::error::DbError;
use crate::item::Item;
use crate::schema::{av_s, PK};
use crate::tenants::tenant::*;
use crate::watermark::Watermarks;

#[derive(Debug, Clone)]
pub struct Tenants {
    pub(super) db: Db,
    pub(super) table: String,
    pub(super) write_count: u32,
    pub(super) read_count: u32,
    pub(super) registry: Option<(Watermarks, String)>,
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

    /// The stored tenants of `ids` (strongly consistent BatchGetItem, 100 keys a request): each
    /// found one, or why its item does not read; an id that is not there is absent.
    pub async fn get_many(
        &self,
        ids: &[&str],
    ) -> Result<std::collections::HashMap<String, Result<Tenant, String>>, DbError> {
        let keys = ids.iter().map(|id| Item::from([(PK.to_string(), av_s(*id))])).collect();
        let items = self.db.batch_get_all(&self.table, keys, true, 8).await?;
        Ok(items
            .iter()
            .filter_map(|i| {
                let id = crate::schema::get_s(i, PK)?.to_string();
                Some((id, Tenant::from_item(i).map_err(|e| e.to_string())))
            })
            .collect())
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
}
