//! The input's tenants as the sweep (per zone and shard) and the fan-out (per shard) see them.

use std::collections::BTreeMap;

use anyhow::Result;
use tickwork::calendar::{self, Grain};
use tickwork::tenants;

use crate::cost::calls::index_item_bytes;
use crate::cost::input::CostInput;

/// One zone's state in the replay: every tenant of a zone was added together, so they share
/// their position and are owed the same periods.
pub(crate) struct Zone {
    pub(crate) name: String,
    pub(crate) tz: jiff::tz::TimeZone,
    pub(crate) mark: Option<String>,
    /// Tenant ids per enumeration shard, in the index's order.
    pub(crate) per_shard: Vec<Vec<String>>,
    /// Size of one tenant's zone-index item (the largest).
    pub(crate) item_bytes: usize,
    pub(crate) tenants: usize,
    /// The before design's cursor per grain (one per zone: its visited tenants share a zone's clock).
    pub(crate) before_cursors: BTreeMap<Grain, String>,
}

/// The input's tenants, round-robin over its zones, as the sweep sees them (per zone and shard)
/// and as the fan-out does (per shard).
pub(crate) fn seed(input: &CostInput) -> Result<(Vec<Zone>, Vec<Vec<tenants::Tenant>>)> {
    let names: Vec<&str> = input.zones.iter().map(String::as_str).collect();
    let mut zones = Vec::new();
    for z in &input.zones {
        let tz = calendar::zone(z).map_err(|e| anyhow::anyhow!("{e}"))?;
        zones.push(Zone {
            name: z.clone(),
            tz,
            mark: None,
            per_shard: vec![Vec::new(); input.tenant_shards.max(1) as usize],
            item_bytes: 0,
            tenants: 0,
            before_cursors: BTreeMap::new(),
        });
    }
    let mut fanout_shards: Vec<Vec<tenants::Tenant>> = vec![Vec::new(); input.tenant_shards.max(1) as usize];
    for i in 0..input.tenants {
        let mut t = tenants::sample_tenant(i, &names, Some(input.start_ms));
        t.pos = tenants::Position::Fresh;
        fanout_shards[tenants::shard_of(&t.id, input.tenant_shards) as usize].push(t.clone());
        let z = zones.iter_mut().find(|z| z.name == t.zone).expect("zone of a sample tenant");
        z.item_bytes = z.item_bytes.max(index_item_bytes(&t, input.tenant_shards));
        z.per_shard[tenants::shard_of(&t.id, input.tenant_shards) as usize].push(t.id);
        z.tenants += 1;
    }
    for z in &mut zones {
        for ids in &mut z.per_shard {
            ids.sort();
        }
    }

    Ok((zones, fanout_shards))
}
