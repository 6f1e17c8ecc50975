//! The tenant fan-out and the worker's handling of what it enqueues.

use anyhow::Result;
use tickwork::capacity::{self, Consistency};
use tickwork::{queue, tenants};

use crate::cost::calls::{index_item_bytes, table, CLAIM_BYTES, READ_EC, READ_STRONG, TXN_SMALL, WRITE};
use crate::cost::report::JobCost;

/// The tenant fan-out on its hourly schedule over `days` (whole UTC days), and the worker's
/// handling of what it enqueues, from the items it really writes ([`tenant_fanout::window::batches_for`]
/// sized by [`capacity`]): an idle tick is one read; a window's tick reads the state item, takes the
/// lease, reads the window's slot and checkpoints, pages every shard to the end (full pages, then
/// a short or empty one), writes per page one fenced transaction (the batch item, the shard's
/// checkpoint, the lease check), and closes the window with the slot and the watermark in one. The
/// worker claims and finishes each batch item and its handler writes one summary row a tenant
/// (the user's effect, counted on the `summaries` table). Checked against a live run in
/// `tests/it/cost.rs`.
pub fn model_fanout(per_shard: &mut [Vec<tenants::Tenant>], page_size: usize, days: f64) -> Result<JobCost> {
    let mut c = JobCost::new("tenant-fanout");
    let windows = days.floor().max(0.0) as u64;
    let page_size = page_size.max(1);
    let shards = per_shard.len() as u32;
    for ids in per_shard.iter_mut() {
        ids.sort_by(|a, b| a.id.cmp(&b.id));
    }
    // The hourly ticks: 24 a day, one of them the window's.
    c.invocations = (days * 24.0).round() as u64;
    c.add_on(table::CONTROL, "GetItem", c.invocations, READ_EC);
    for _ in 0..windows {
        c.add_on(table::CONTROL, "UpdateItem", 1, WRITE); // the lease
        c.add_on(table::CONTROL, "GetItem", 1, READ_STRONG); // the slot (absent)
        c.add_on(table::CONTROL, "Query", 1, READ_STRONG); // the checkpoints (none)
        let window = "2026-03-29";
        for (k, ts) in per_shard.iter().enumerate() {
            let mut pages: Vec<&[tenants::Tenant]> = ts.chunks(page_size).collect();
            if ts.len() % page_size == 0 {
                pages.push(&[]);
            }
            for page in pages {
                let bytes = page.iter().map(|t| index_item_bytes(t, shards)).collect::<Vec<_>>();
                c.add_on(table::TENANTS_BY_SHARD, "Query", 1, capacity::query_units(bytes, Consistency::Eventual));
                let mut wcu = 2.0 * TXN_SMALL; // the lease check and the checkpoint
                for item in tenant_fanout::window::batches_for("utc-daily", window, k as u32, page, 0) {
                    let put = queue::enqueue_item("q", &queue::QueueConfig::default(), &item, 0)
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let size = put.put().map(|p| capacity::item_size(p.item())).unwrap_or(0);
                    wcu += capacity::transactional(capacity::write_units(None, Some(size)));
                    c.add_index_units(table::QUEUE_READY, WRITE);
                    // The worker: claim (the item grows by its owner; its ready key moves), finish
                    // (billed on the item before; its ready key goes), one summary row a tenant.
                    let claimed = size + CLAIM_BYTES;
                    c.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(None, Some(claimed)));
                    c.add_index_units(table::QUEUE_READY, 2.0 * WRITE);
                    c.add_on(table::QUEUE, "UpdateItem", 1, capacity::write_units(Some(claimed), None));
                    c.add_index_units(table::QUEUE_READY, WRITE);
                    c.add_on(table::SUMMARIES, "PutItem", page.len() as u64, WRITE);
                }
                c.add_on(table::CONTROL, "TransactWriteItems", 1, wcu);
            }
        }
        // The slot and the watermark, fenced.
        c.add_on(table::CONTROL, "TransactWriteItems", 1, 3.0 * TXN_SMALL);
    }
    Ok(c)
}
