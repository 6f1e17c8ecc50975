//! `tickctl cost --schedules`: what a fire costs, tenants sharing a group or each its own, and how
//! long a burst takes to hand over and deliver.

/// A burst of schedules due in the same minute.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Burst {
    /// What was asked, the assumptions included.
    pub input: tickctl::schedules::BurstInput,
    /// The sweep's hand-over.
    pub time: tickctl::schedules::BurstTime,
    /// The drains' delivery of the fires, as asked.
    pub delivery: tickctl::delivery::DeliveryInput,
    /// From the fires' instant until the last is handled, ms.
    pub done_ms: f64,
    /// The target it is held to, ms (`--target`).
    pub target_ms: f64,
    /// A million such fires' whole cost, beside the Scheduler's.
    pub full: tickctl::schedules::FullCost,
}

pub fn print_schedules(as_json: bool, s: &tickctl::schedules::SchedulesCost, b: &Burst) -> anyhow::Result<()> {
    if as_json {
        return super::json(&serde_json::json!({ "cost": s, "burst": b }));
    }
    println!(
        "schedules: one daily schedule for each of {} tenants (modelled from a tick firing {} at once)",
        s.tenants, s.fires
    );
    for (what, f) in
        [("sharing one (zone, spec, name), one group", &s.shared), ("each schedule its own, a group each", &s.distinct)]
    {
        println!(
            "  a fire, tenants {what}: {:.4} requests, {:.4} read units, {:.4} write units; a month ${:.2} of DynamoDB units",
            f.requests, f.rcu, f.wcu, f.month_usd
        );
    }
    println!("  beside ${:.2} a month for one EventBridge Scheduler schedule per tenant", s.scheduler_month_usd);
    let (i, t) = (&b.input, &b.time);
    println!(
        "a burst of {} fires in {} group(s) due at one local hour ({} ms a request and {} ms a kilobyte on the wire at {}-byte tenant ids, {} groups' members read at once in each of {} due shards, the tick at their instant, an invocation firing for {:.0} s, a tick every {:.0} s):",
        i.fires,
        i.groups,
        i.latency_ms,
        i.per_kb_ms,
        i.tenant_id_bytes,
        i.fire_concurrency,
        tickwork::schedules::DUE_SHARDS,
        i.invocation_ms / 1000.0,
        i.interval_ms / 1000.0
    );
    println!(
        "  handed to the queue {:.1} s after their instant ({} due pages, {} member pages, {} requests, {} sweep invocation(s){})",
        t.handover_ms / 1000.0,
        t.pages,
        t.member_pages,
        t.requests,
        t.invocations,
        if t.invocations > 1 { ", each stopped at its deadline going on at its wake, a minute on at most" } else { "" }
    );
    println!(
        "  (its groups' {:.0} record write units go to {} due partitions at once, at most 1,000 a second each: {:.1} s at the least, however fast the requests)",
        i.groups as f64 * tickctl::schedules::DUE_WCU_PER_GROUP,
        tickwork::schedules::DUE_SHARDS,
        t.partition_floor_ms / 1000.0
    );
    if i.one_off && t.cleaned_ms > 0.0 {
        println!(
            "  (a campaign: its first page of {} members fixes the group, the rest go out {} a page; its members and definitions are cleaned after the hand-over, {:.0} write units, {:.1} s after their instant, its member partition at 1,000 a second, {} s of each minute's wake)",
            pulse_sweep::ONE_OFF_PAGE,
            pulse_sweep::MEMBER_PAGE,
            t.clean_write_units,
            t.cleaned_ms / 1000.0,
            pulse_sweep::CLEAN_FOR_MS / 1000
        );
    } else if i.one_off {
        println!(
            "  (one-off groups of fewer than {} members: each fired and retired in one transaction, each fired member's membership and definition deleted in it; the largest group's member partition takes {:.1} s at 1,000 write units a second)",
            pulse_sweep::ONE_OFF_PAGE,
            t.member_floor_ms / 1000.0
        );
    }
    println!(
        "  (the control table's {:.0} write units at {:.0} a second: {:.1} s at the least; {:.0} strongly consistent reads of the busier of it and the tenants table at {:.0} a second: {:.1} s; {} requests in flight at most, in one invocation at a time)",
        t.write_units,
        i.table_wcu,
        t.table_floor_ms / 1000.0,
        t.read_units,
        i.table_rcu,
        t.read_floor_ms / 1000.0,
        t.in_flight
    );
    println!(
        "  boundary-to-done {:.1} s ({} drain(s) of {} handler calls, {} ms a unit): {}",
        b.done_ms / 1000.0,
        b.delivery.drains,
        b.delivery.concurrency,
        b.delivery.handler_ms,
        if b.done_ms <= b.target_ms {
            format!("within {:.0} s", b.target_ms / 1000.0)
        } else {
            let bounds = [
                (t.requests_ms, "the sweep's requests (a member page a group, one after another in a due shard)"),
                (t.partition_floor_ms, "the due partitions' 1,000 write units a second each"),
                (t.member_floor_ms, "a one-off group's member partition, 1,000 write units a second"),
                (t.table_floor_ms, "the control table's write throughput (--control-table-wcu: warm it for bursts)"),
                (t.read_floor_ms, "the tables' read throughput (--table-rcu)"),
            ];
            let why = bounds.iter().max_by(|a, b| a.0.total_cmp(&b.0)).map_or("", |b| b.1);
            format!("NOT within {:.0} s: bound by {why}", b.target_ms / 1000.0)
        }
    );
    let f = &b.full;
    println!(
        "  a million such fires, whole: ${:.3} (the sweep's units ${:.3}, the drains' delivery ${:.3}, the handler's one write or the target's calls ${:.3}), beside the Scheduler's ${:.2} a million invocations with its target's work on top",
        f.total_usd, f.sweep_usd, f.delivery_usd, f.handler_usd, f.scheduler_usd
    );
    Ok(())
}
