//! The `000_*` design under the same load, for the comparison every report carries.

use anyhow::Result;
use tickwork::calendar::{self, Grain};
use tickwork::capacity::{self, Consistency};
use tickwork::tenants;

use crate::cost::calls::{table, READ_EC, WRITE};
use crate::cost::input::CostInput;
use crate::cost::report::JobCost;
use crate::cost::seed::Zone;

/// The `000_*` sweep (reproduced in `crates/bench`): every worker tick takes the lock (released
/// after the tick, so every tick takes it), Scans one page of 100 tenants with no cursor, reads
/// 7 cursors per visited tenant with GetItem, and writes a pulse + cursor transaction for every
/// grain whose period changed — the quarter-hour and hour grains included.
pub(crate) fn model_before(input: &CostInput, zones: &mut [Zone]) -> Result<JobCost> {
    const PAGE: usize = 100;
    let mut c = JobCost::new("before");
    let visited = input.tenants.min(PAGE);
    // Visited tenants per zone: the first page of a Scan, taken as round-robin like the seed.
    let mut per_zone = vec![0u64; zones.len()];
    for i in 0..visited {
        per_zone[i % zones.len()] += 1;
    }
    let phase = input.tick_ms / i64::from(input.workers);
    // The Scan reads whole tenant items; the first page of `visited`.
    let names: Vec<&str> = input.zones.iter().map(String::as_str).collect();
    let scan_units = capacity::query_units(
        (0..visited).map(|i| {
            let t = tenants::sample_tenant(i, &names, Some(input.start_ms));
            capacity::item_size(&t.to_item(input.tenant_shards))
        }),
        Consistency::Eventual,
    );
    for i in 0..input.ticks {
        for w in 0..input.workers {
            let t = input.start_ms + i as i64 * input.tick_ms + i64::from(w) * phase;
            c.invocations += 1;
            c.add_on(table::CONTROL, "PutItem", 1, WRITE);
            c.add_on(table::TENANTS, "Scan", 1, scan_units);
            c.add_on(table::CONTROL, "GetItem", 7 * visited as u64, READ_EC);
            for (zi, z) in zones.iter_mut().enumerate() {
                if per_zone[zi] == 0 {
                    continue;
                }
                for grain in Grain::ALL {
                    let id = before_period_id(grain, t, &z.tz)?;
                    if z.before_cursors.get(&grain) != Some(&id) {
                        // A pulse put and a cursor update, both at the transactional 2x.
                        c.add_on(
                            table::CONTROL,
                            "TransactWriteItems",
                            per_zone[zi],
                            2.0 * capacity::transactional(WRITE),
                        );
                        z.before_cursors.insert(grain, id);
                    }
                }
            }
            c.add_on(table::CONTROL, "DeleteItem", 1, WRITE);
        }
    }
    Ok(c)
}

/// The `000_*` design's period id of `grain` at `now_ms` — the quarter-hour and hour included,
/// which it pulsed although nothing subscribed. Shared by this model and the bench's reproduction.
pub fn before_period_id(grain: Grain, now_ms: i64, tz: &jiff::tz::TimeZone) -> Result<String> {
    let z = jiff::Timestamp::from_millisecond(now_ms)?.to_zoned(tz.clone());
    Ok(match grain {
        Grain::QuarterHour => format!("{}T{:02}:{:02}", z.date(), z.hour(), z.minute() / 15 * 15),
        Grain::Hour => format!("{}T{:02}", z.date(), z.hour()),
        g => calendar::Period::containing(g, z.date()).map_err(|e| anyhow::anyhow!("{e}"))?.id(),
    })
}
