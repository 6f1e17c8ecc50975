//! Sample tenants, shared by the simulator, the benchmark, `tickctl cost` and the tests.

use crate::tenants::tenant::{Position, Tenant};

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
