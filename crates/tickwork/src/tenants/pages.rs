//! Listing tenants: every page of a shard to exhaustion, or a page at a time with a resumable
//! cursor; by shard (the fan-out), by zone (the sweep) and the whole table (an operator).

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use std::future::Future;

use crate::budget::Budget;
use crate::error::DbError;
use crate::item::Item;
use crate::pager::{for_each_page, Cursor, Page, PageError, PageRun};
use crate::schema::{av_s, PK};
use crate::tenants::schema::*;
use crate::tenants::store::Tenants;
use crate::tenants::tenant::*;

impl Tenants {
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
        let next = Cursor::after(out.last_evaluated_key())?;
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
            .expression_attribute_values(":s", av_s(tshard_key(k)))
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
            .expression_attribute_values(":s", av_s(zshard_key(zone, k)))
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
        Cursor::encode(&Item::from([(ZSHARD.to_string(), av_s(zshard_key(zone, k))), (PK.to_string(), av_s(id))]))
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
