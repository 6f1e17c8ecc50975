//! A run's writes: what it has read and not yet written ([`Pending`]), when it writes them
//! ([`FlushCounts`]), and the one fenced transaction that writes them ([`flush`]), step 4 of
//! [`crate::sweep`].

use std::collections::BTreeMap;

use tickwork::batch::Batch;
use tickwork::checkpoint::ShardState;
use tickwork::lease::{fenced_write, Fence, Fenced};
use tickwork::queue::enqueue_item;
use tickwork::tenants::{Position, Tenant};

use crate::deps::Deps;
use crate::pulse::{Owed, PULSE_KIND};
use crate::report::{PulseError, Report};

/// Live (fenced by the lease) or dry (nothing written).
#[derive(Clone, Copy)]
pub(crate) enum Mode<'a> {
    Live(&'a Fence),
    Dry,
}

/// When a run flushes, decided from counts alone, so that `tickctl cost` replays the sweep's own
/// decisions ([`FlushCounts::full`]).
///
/// A transaction holds at most 100 items and 4 MB ("TransactWriteItems", DynamoDB API reference):
/// position writes, checkpoints and failure records are each bounded here, and the batch by its
/// units and its bytes, so it splits into a few items of at most 128 KB and 2,000 units each
/// whatever the tenant ids' length (up to 900 bytes). A flush can come
/// in the middle of a page: its checkpoint is then the cursor just after the last tenant taken
/// (the index key of that tenant), so a page read again after a crash starts after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlushCounts {
    /// Position writes.
    pub repositions: usize,
    /// Shards with a new checkpoint.
    pub checkpoints: usize,
    /// Failure records.
    pub failures: usize,
    /// Units waiting.
    pub units: usize,
    /// Bytes the waiting units take in batch payloads, over-estimated ([`FlushCounts::unit_bytes`]).
    pub bytes: usize,
}

impl FlushCounts {
    /// Position writes in one transaction at most.
    pub const MAX_REPOSITIONS: usize = 40;
    /// Checkpoints in one transaction at most.
    pub const MAX_CHECKPOINTS: usize = 20;
    /// Failure records in one transaction at most.
    pub const MAX_FAILURES: usize = 10;
    /// Units pending at most (a few batch items).
    pub const MAX_UNITS: usize = 4 * tickwork::batch::MAX_BATCH_UNITS;
    /// Batch bytes pending at most (a few batch items, far under the 4 MB of a transaction).
    pub const MAX_BYTES: usize = 4 * tickwork::batch::MAX_BATCH_BYTES;

    /// What one tenant's pulses add to a batch payload, at most: its id, quoted, and its entries
    /// as if it were the only tenant of its set.
    pub fn unit_bytes(tenant: &str, entries: &[serde_json::Map<String, serde_json::Value>]) -> usize {
        tenant.len() + 3 + serde_json::to_string(entries).map(|e| e.len()).unwrap_or(0)
    }

    /// Flush now?
    pub fn full(&self) -> bool {
        self.repositions >= Self::MAX_REPOSITIONS
            || self.checkpoints >= Self::MAX_CHECKPOINTS
            || self.failures >= Self::MAX_FAILURES
            || self.units >= Self::MAX_UNITS
            || self.bytes >= Self::MAX_BYTES
    }
}

/// What a run has read and not yet written.
pub(crate) struct Pending {
    /// Queue item ids start with this (`pulse#<zone>@<date>`).
    pub(crate) prefix: String,
    pub(crate) batch: Batch,
    pub(crate) repositions: Vec<(Tenant, Position)>,
    pub(crate) checkpoints: BTreeMap<u32, ShardState>,
    pub(crate) failures: Vec<(String, String)>,
    /// The zone group.
    pub(crate) group: String,
    /// Woken tenants visited: their wake items go with the next flush ([`tickwork::wake`]).
    pub(crate) woken: Vec<tickwork::wake::Waiting>,
    /// [`FlushCounts::bytes`] of the batch.
    pub(crate) bytes: usize,
}

impl Pending {
    pub(crate) fn new(prefix: String, zone: &str) -> Self {
        let common = serde_json::Map::from_iter([("zone".to_string(), serde_json::Value::String(zone.to_string()))]);
        Pending {
            prefix,
            batch: Batch::new(common),
            repositions: Vec::new(),
            checkpoints: BTreeMap::new(),
            failures: Vec::new(),
            group: zone.to_string(),
            woken: Vec::new(),
            bytes: 0,
        }
    }

    pub(crate) fn counts(&self) -> FlushCounts {
        FlushCounts {
            repositions: self.repositions.len(),
            checkpoints: self.checkpoints.len(),
            failures: self.failures.len(),
            units: self.batch.len(),
            bytes: self.bytes,
        }
    }

    pub(crate) fn add(&mut self, t: &Tenant, o: &Owed, report: &mut Report) {
        if !o.pulses.is_empty() {
            let entries = o.entries();
            self.bytes += FlushCounts::unit_bytes(&t.id, &entries);
            self.batch.add(entries, [t.id.clone()]);
        }
        for (g, _) in &o.pulses {
            *report.pulses.entry(g.to_string()).or_default() += 1;
        }
        for (g, n) in &o.skipped {
            *report.skipped.entry(g.to_string()).or_default() += u64::from(*n);
        }
        if let Some(to) = o.reposition {
            self.repositions.push((t.clone(), to));
        }
    }

    /// Takes a tenant out of what is pending: its pulses, its position write, its wake delete.
    fn drop_tenant(&mut self, id: &str) {
        self.woken.retain(|w| w.unit != id);
        self.repositions.retain(|r| r.0.id != id);
        let own = format!("{PULSE_KIND}#{id}#");
        self.batch = self.batch.subset(PULSE_KIND, |k| !k.starts_with(&own));
    }

    fn clear_written(&mut self) {
        self.bytes = 0;
        self.batch.sets.clear();
        self.repositions.clear();
        self.checkpoints.clear();
        self.failures.clear();
        self.woken.clear();
    }
}

/// How a flush ended.
pub(crate) enum Flushed {
    Written,
    LeaseLost,
}

/// Writes what is pending in one fenced transaction (step 4): the batch, the position writes,
/// the checkpoints, the failure records, the visited tenants' wake items; with the watermark's
/// advance when given, which replaces the checkpoints.
pub(crate) async fn flush(
    deps: &Deps,
    fence: &Fence,
    run: &str,
    p: &mut Pending,
    advance: Option<&str>,
) -> Result<Flushed, PulseError> {
    for _ in 0..FlushCounts::MAX_REPOSITIONS + 2 {
        let now = deps.clock.now_ms();
        let mut writes = Vec::new();
        for b in p.batch.clone().split() {
            let item = crate::pulse::batch_item(&p.prefix, &b, now);
            writes.push(enqueue_item(&deps.tables.queue, &deps.queue_cfg, &item, now)?);
        }
        let batches = writes.len();
        for (t, to) in &p.repositions {
            writes.push(deps.tenants.reposition_item(t, *to));
        }
        let moves = p.repositions.len();
        if advance.is_none() {
            for (k, st) in &p.checkpoints {
                writes.push(deps.checkpoints.save_item(&deps.cfg.job, run, &k.to_string(), st));
            }
        }
        for (t, e) in &p.failures {
            writes.push(tickwork::failures::record(&deps.tables.control, &deps.cfg.job, run, t, e, now));
        }
        if let Some(to) = advance {
            writes.push(deps.marks.advance_item(&deps.cfg.job, &p.group, to));
        }
        let woken_at = writes.len();
        for w in &p.woken {
            writes.push(deps.marks.woken_item(&deps.cfg.job, &p.group, w));
        }
        if writes.is_empty() {
            return Ok(Flushed::Written);
        }
        match fenced_write(&deps.db, fence, writes).await? {
            Fenced::Written => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            Fenced::Stale => return Ok(Flushed::LeaseLost),
            // A batch item exists: this flush landed before and its answer was lost (an id is the
            // digest of its units: the same id, the same units, written by this very transaction).
            Fenced::ConditionFailed { index, .. } if index < batches => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            // A tenant changed since its page was read (an operator's change, or a visit the
            // page's index read did not see yet): its pulses leave this flush, and it is woken, so
            // the next tick plans it again from what it is now (a visit to a tenant that left the
            // group, or already stands where it should, does nothing). It stays woken: this flush
            // no longer deletes its wake item.
            Fenced::ConditionFailed { index, .. } if index < batches + moves => {
                let id = p.repositions[index - batches].0.id.clone();
                tracing::info!(tenant = %id, "tenant changed since it was read; woken to be planned again");
                deps.marks.wake(&deps.cfg.job, &p.group, &id).await?;
                p.drop_tenant(&id);
            }
            // Woken again since the visit read it (an operator's resume or move): it stays woken,
            // planned again at the next tick from what it is now, and leaves this flush.
            Fenced::ConditionFailed { index, .. } if index >= woken_at => {
                let id = p.woken[index - woken_at].unit.clone();
                tracing::info!(tenant = %id, "woken again while visited; left for the next tick");
                p.drop_tenant(&id);
            }
            // The watermark is at or past this run already: another leader finished it.
            Fenced::ConditionFailed { .. } if advance.is_some() => {
                p.clear_written();
                return Ok(Flushed::Written);
            }
            Fenced::ConditionFailed { index, .. } => {
                return Err(PulseError::Db(tickwork::DbError::Unexpected(format!(
                    "flush of {run}: condition failure at write {index}, which no writer should fail"
                ))))
            }
        }
    }
    Err(PulseError::Db(tickwork::DbError::Contended {
        what: format!("the tenants of the flush of {run}"),
        attempts: FlushCounts::MAX_REPOSITIONS as u32 + 2,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::{Grain, Period};

    /// Tenants with the longest ids allowed (900 bytes) fill a flush by bytes long before its
    /// units: the batch it writes stays a few items, far under a transaction's 100 items and 4 MB.
    #[test]
    fn a_flush_of_long_ids_stays_within_a_transaction() {
        let day = Period::containing(Grain::Day, "2026-11-28".parse().unwrap()).unwrap();
        let entries = vec![crate::pulse::entry(Grain::Day, &day)];
        let mut batch = Batch::new(serde_json::Map::new());
        let mut counts = FlushCounts::default();
        let mut n = 0;
        while !counts.full() {
            let id = format!("{n:0900}");
            counts.units += entries.len();
            counts.bytes += FlushCounts::unit_bytes(&id, &entries);
            batch.add(entries.clone(), [id]);
            n += 1;
        }
        assert!(counts.units < FlushCounts::MAX_UNITS, "the bytes stopped it: {n} tenants");
        let items = batch.split();
        let bytes: usize = items.iter().map(|b| b.to_payload().len()).sum();
        assert!(items.len() <= 5 && bytes < 1 << 20, "{} items, {bytes} bytes", items.len());
    }
}
