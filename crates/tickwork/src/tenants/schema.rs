//! The tenants table: its attributes, its two sparse enumeration indexes and its definition.

use crate::capacity::Projection;
use crate::schema::{s, GsiDef, TableDef, PK};

/// Attribute: IANA time zone.
pub const ZONE: &str = "zone";
/// Attribute: lifecycle status.
pub const STATUS: &str = "status";
/// Attribute: when the tenant was added (ms); calendar work owed starts there.
pub const SINCE: &str = "since";
/// Attribute: where the tenant stands in its zone group's calendar ([`Position`](crate::tenants::Position)); absent while it
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

/// The `by_shard` index's partition value of shard `k`.
pub fn tshard_key(k: u32) -> String {
    format!("tenants#{k}")
}

/// The `by_zone` index's partition value of `zone`'s shard `k`.
pub fn zshard_key(zone: &str, k: u32) -> String {
    format!("{zone}#{k}")
}

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
        stream: None,
    }
}
