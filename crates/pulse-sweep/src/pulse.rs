//! A pulse: its identity (the idempotency key), its queue item, and the writes that carry a
//! tenant's plans to DynamoDB.
//!
//! A pulse announces that a period ended for one tenant: `(tenant, grain, period)`. Its queue item
//! id is `pulse#<tenant>#<grain>#<period>`, written with `attribute_not_exists`, so the same pulse
//! can be attempted any number of times (a crash, a second worker after a lease lapse, a retried
//! request whose answer was lost) and exists once. The pulse and the cursor move that covers it go
//! in one transaction: a crash leaves both or neither.
//!
//! [`writes_for`] is pure: which writes a tenant's plans need, decided without I/O and tested
//! without a server; the sweep only sends them.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::TransactWriteItem;
use tickwork::calendar::{Grain, GrainPlan, Period};
use tickwork::clock::Millis;
use tickwork::queue::{enqueue_item, InvalidItem, NewItem, QueueConfig};
use tickwork::tenants::Tenant;

use crate::cursors::cursor_advance;

/// Queue item kind of a pulse.
pub const PULSE_KIND: &str = "pulse";

/// The pulse's queue-item id: its idempotency key.
pub fn pulse_id(tenant: &str, grain: Grain, period: &Period) -> String {
    format!("pulse#{tenant}#{grain}#{}", period.id())
}

/// The queue item of one pulse: its id is the idempotency key (tenant, grain, period).
pub fn pulse_item(tenant: &str, zone: &str, grain: Grain, period: &Period, now_ms: Millis) -> NewItem {
    NewItem {
        id: pulse_id(tenant, grain, period),
        kind: PULSE_KIND.into(),
        payload: serde_json::json!({"tenant": tenant, "grain": grain, "period": period.id(), "zone": zone}).to_string(),
        tenant: Some(tenant.to_string()),
        due_ms: now_ms,
    }
}

/// What one tenant's plans turn into.
#[derive(Debug, Default)]
pub struct TenantWrites {
    /// The transaction items: each pulse's conditional put, each grain's cursor move.
    pub items: Vec<TransactWriteItem>,
    /// Pulses, by grain.
    pub pulses: BTreeMap<String, u64>,
    /// Periods skipped by the catch-up policy, by grain.
    pub skipped: BTreeMap<String, u64>,
}

/// The writes that carry `plans` for tenant `t` (pure).
pub fn writes_for(
    t: &Tenant,
    plans: &[GrainPlan],
    queue_table: &str,
    control_table: &str,
    queue: &QueueConfig,
    now_ms: Millis,
) -> Result<TenantWrites, InvalidItem> {
    let mut w = TenantWrites::default();
    for plan in plans {
        for p in &plan.pulse {
            let item = pulse_item(&t.id, &t.zone, plan.grain, p, now_ms);
            w.items.push(enqueue_item(queue_table, queue, &item, now_ms)?);
            *w.pulses.entry(plan.grain.to_string()).or_default() += 1;
        }
        if plan.skipped > 0 {
            *w.skipped.entry(plan.grain.to_string()).or_default() += u64::from(plan.skipped);
        }
        if let Some(to) = plan.advance_to {
            w.items.push(cursor_advance(control_table, &t.id, plan.grain, &to));
        }
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::{CatchUp, Policy};

    #[test]
    fn pulse_ids_bind_the_tenant() {
        let p = Period::parse(Grain::Day, "2026-11-29").unwrap();
        assert_eq!(pulse_id("t42", Grain::Day, &p), "pulse#t42#day#2026-11-29");
    }

    #[test]
    fn plans_become_one_put_per_pulse_and_one_cursor_move_per_grain() {
        let tz = tickwork::calendar::zone("UTC").unwrap();
        let now = "2026-04-01T00:05:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 60_000 };
        let cursors = BTreeMap::from([(Grain::Day, "2026-03-29".to_string())]);
        let plans = tickwork::calendar::plan_tenant(&tz, now, None, &cursors, &policy).unwrap();
        let t = Tenant { id: "t1".into(), zone: "UTC".into(), active: true, since_ms: None };
        let w = writes_for(&t, &plans, "q", "c", &QueueConfig::default(), now).unwrap();
        assert_eq!(w.pulses["day"], 2, "the 30th and 31st");
        let puts = w.items.iter().filter(|i| i.put().is_some()).count();
        let moves = w.items.iter().filter(|i| i.update().is_some()).count();
        assert_eq!((puts, moves), (5, 4), "day×2, week, month, quarter; one cursor move per grain");
        let ids: Vec<String> =
            w.items.iter().filter_map(|i| i.put()).map(|p| p.item()["pk"].as_s().unwrap().clone()).collect();
        assert!(ids.contains(&"pulse#t1#day#2026-03-30".to_string()), "{ids:?}");
    }
}
