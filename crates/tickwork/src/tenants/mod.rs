//! The tenants table and its sharded enumeration index.
//!
//! Why (`000_*`): the tenant list behind a sweep queried an index with a page limit and no cursor,
//! and every tenant past the first page silently never got its pulse. Here the only way to list
//! tenants is [`Tenants::for_each_page`], which pages one shard by cursor to exhaustion or stops
//! with a resumable [`Cursor`](crate::pager::Cursor). Enumeration is sharded (shard = FNV-1a(id) mod N) so that no single
//! index partition carries the whole list (`001_*`: a low-cardinality GSI key is a hot partition).
//!
//! ## Table (`<prefix>-tenants`)
//! Key `pk` = tenant id. Attributes: `zone` (IANA name), `status` (`active` | `suspended`),
//! `tshard` (`tenants#<k>`, **present only while active**), `zshard` (`<zone>#<k>`, likewise).
//! - GSI `by_shard` (`tshard`, `pk`): every active tenant, per shard. Suspended tenants are not in
//!   it, so "active" is a key condition (a sparse index), never a filter.
//! - GSI `by_zone` (`zshard`, `pk`): active tenants of one time zone, per shard; the pulse sweep
//!   reads only the zones whose local date advanced.
//!
//! ## Layout
//! `schema` attributes and indexes; `tenant` one tenant and its item; `store` the table: add, get,
//! write, reposition; `lifecycle` suspend, resume, move, remove; `pages` listing by cursor;
//! `sample` the sample tenants. Every public item is re-exported here.

mod lifecycle;
mod pages;
mod sample;
mod schema;
mod store;
mod tenant;

pub use sample::{sample_tenant, SAMPLE_ZONES};
pub use schema::{tenants_table, BY_SHARD, BY_ZONE, POS, SINCE, STATUS, TSHARD, ZONE, ZSHARD};
pub use store::{AddError, AddReport, Tenants};
pub use tenant::{
    canonical_zone, shard_of, unchanged, InvalidTenant, Position, Tenant, MAX_TENANT_ID_BYTES, WAKE_BULK_LIMIT,
};
