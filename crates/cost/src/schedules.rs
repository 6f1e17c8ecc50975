//! What schedules cost: one fire tick's requests and units replayed through the sweep's own rules
//! (`pulse_sweep`'s fires: pages of [`pulse_sweep::FIRE_PAGE`] groups' due records, each group's
//! members a page of [`pulse_sweep::MEMBER_PAGE`] at a time with their tenants, transactions of
//! [`pulse_sweep::FIRE_CHUNK`] records), with the items the code builds sized by DynamoDB's rules,
//! and the month's bill of a daily schedule per tenant beside one EventBridge Scheduler schedule
//! each: tenants sharing their schedules' (zone, spec, name) are one group, and a fire then costs
//! its tenant id's bytes in a shared batch item; tenants whose every schedule differs are each a
//! group of one, and a fire costs its group's record replaced.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;
use tickwork::batch::Batch;
use tickwork::capacity::{self, Consistency};
use tickwork::queue::{enqueue_item, QueueConfig};
use tickwork::schedules::{due_shard, DueRecord, Group, Member, ScheduleDef};
use tickwork::tenants::Tenant;

use crate::bill::{scheduler_per_tenant, Prices, Stack};
pub use crate::burst::{burst, BurstInput, BurstTime, ServerTime, Wire, DUE_WCU_PER_GROUP, WAKE_WAIT_MS};
use crate::cost::calls::{table, Calls, READ_STRONG, TXN_SMALL, WRITE};

/// One schedule due at the tick: its tenant, name and occurrence. Schedules of one (name,
/// occurrence) are one group (a daily 08:00 in Berlin, as the model sizes its items).
#[derive(Debug, Clone)]
pub struct Due {
    /// Tenant id.
    pub tenant: String,
    /// Schedule name.
    pub name: String,
    /// The occurrence key it fires (`2026-12-01T08:00:00+01:00`).
    pub occurrence: String,
}

/// The group a model's schedule of `name` is in.
fn group(name: &str) -> Group {
    let def = ScheduleDef::new(name, "daily 08:00".parse().expect("a spec"), 0, Default::default()).expect("a def");
    Group::of("", &def, "Europe/Berlin")
}

fn record(g: &Group, due_ms: i64, cursor: Option<&str>) -> DueRecord {
    DueRecord {
        due_ms,
        pos_ms: due_ms,
        group: g.clone(),
        after_ms: due_ms,
        cursor: cursor.map(str::to_string),
        plan_at: cursor.map(|_| due_ms),
        shard: None,
        stage: tickwork::schedules::Stage::Open,
        leaves_seen: None,
    }
}

/// One group due at the tick, as the sweep pages it.
struct GroupDue<'a> {
    group: Group,
    occurrence: &'a str,
    tenants: Vec<&'a str>,
}

/// The pages of a group's `n` members, [`pulse_sweep::MEMBER_PAGE`] each: a full page returns a
/// cursor, and the next one is read (empty, after an exactly full last page).
fn member_pages(n: usize) -> Vec<std::ops::Range<usize>> {
    let page = pulse_sweep::MEMBER_PAGE;
    (0..=n / page).map(|i| i * page..((i + 1) * page).min(n)).collect()
}

/// The calls of a tick at which `due` fire (their tenants active, one occurrence each), for the
/// sweep's `job` and queue settings, after the tick's state read and lease.
pub fn fire_tick(due: &[Due], job: &str, queue: &QueueConfig, now_ms: i64) -> Result<Vec<Calls>> {
    let mut v = crate::cost::tick_calls(true);
    let mut groups: BTreeMap<(String, String), GroupDue> = BTreeMap::new();
    for d in due {
        groups
            .entry((d.name.clone(), d.occurrence.clone()))
            .or_insert_with(|| GroupDue { group: group(&d.name), occurrence: &d.occurrence, tenants: Vec::new() })
            .tenants
            .push(&d.tenant);
    }
    // By shard, and in a shard by sort key (the same due instant: by group id), as the sweep
    // reads them; a group's members by tenant id.
    let mut by_shard: BTreeMap<u32, BTreeMap<String, GroupDue>> = BTreeMap::new();
    for (_, mut g) in groups {
        g.tenants.sort_unstable();
        let id = g.group.id();
        by_shard.entry(due_shard(&id)).or_default().insert(id, g);
    }
    let member = |t: &str| {
        capacity::item_size(
            &Member { tenant: t.into(), ver: 1, since_ms: now_ms, owed_ms: now_ms }.to_item(job, &"0".repeat(32)),
        )
    };
    let tenant = |t: &str| capacity::item_size(&Tenant::new(t, "Europe/Berlin").to_item(8));
    let page = pulse_sweep::FIRE_PAGE as usize;
    // Every shard's cursor in one BatchGetItem (each key a unit, absent or not), and each
    // shard's first record after it (a Query of one item).
    let shards = u64::from(tickwork::schedules::DUE_SHARDS);
    v.push(Calls { table: table::CONTROL, op: "BatchGetItem", n: 1, units: shards as f64 * READ_STRONG });
    v.push(Calls { table: table::CONTROL, op: "Query", n: shards, units: READ_STRONG });
    let mut moved = vec![false; tickwork::schedules::DUE_SHARDS as usize];
    for k in 0..tickwork::schedules::DUE_SHARDS {
        let shard: Vec<&GroupDue> = by_shard.get(&k).map(|m| m.values().collect()).unwrap_or_default();
        // A shard with nothing due is done with its first record read. One with a record due is
        // fired under its own lease (taken and let go: a conditional UpdateItem each).
        if shard.is_empty() {
            continue;
        }
        v.push(Calls { table: table::CONTROL, op: "UpdateItem", n: 2, units: WRITE });
        let mut pages: Vec<&[&GroupDue]> = shard.chunks(page).collect();
        if shard.len() % page == 0 {
            pages.push(&[]);
        }
        for p in pages {
            let sizes = p.iter().map(|g| capacity::item_size(&record(&g.group, now_ms, None).to_item(job)));
            v.push(Calls {
                table: table::CONTROL,
                op: "Query",
                n: 1,
                units: capacity::query_units(sizes, Consistency::Strong),
            });
            // Each group's first page of members and their tenants 100 a BatchGetItem; then in
            // order, chunks of groups done in one page (their successors put before, in
            // BatchWriteItems of 25), and each group larger than a page alone, a page at a time.
            let mut first: Vec<(&GroupDue, std::ops::Range<usize>, bool)> = Vec::new();
            for g in p {
                let pages = member_pages(g.tenants.len());
                let r = pages[0].clone();
                v.push(member_query(&g.tenants[r.clone()], &member));
                first.push((g, r, pages.len() > 1));
            }
            let ids: Vec<&str> = first.iter().flat_map(|(g, r, _)| g.tenants[r.clone()].iter().copied()).collect();
            v.extend(tenant_reads(&ids, &tenant));
            let mut pending: Vec<(&GroupDue, std::ops::Range<usize>, bool, bool)> = Vec::new();
            for (g, r, more) in &first {
                if !more {
                    pending.push((*g, r.clone(), false, false));
                    if pending.len() == pulse_sweep::FIRE_CHUNK {
                        v.extend(transaction(
                            &std::mem::take(&mut pending),
                            job,
                            queue,
                            now_ms,
                            &mut moved[k as usize],
                        )?);
                    }
                    continue;
                }
                if !pending.is_empty() {
                    v.extend(transaction(&std::mem::take(&mut pending), job, queue, now_ms, &mut moved[k as usize])?);
                }
                let pages = member_pages(g.tenants.len());
                for (i, r) in pages.iter().enumerate() {
                    if i > 0 {
                        v.push(member_query(&g.tenants[r.clone()], &member));
                        v.extend(tenant_reads(&g.tenants[r.clone()], &tenant));
                    }
                    let seg = (*g, r.clone(), i + 1 < pages.len(), i > 0);
                    v.extend(transaction(&[seg], job, queue, now_ms, &mut moved[k as usize])?);
                }
            }
            if !pending.is_empty() {
                v.extend(transaction(&pending, job, queue, now_ms, &mut moved[k as usize])?);
            }
        }
    }
    // The earliest record left in each shard that fired (the others' read first), `sched_next`
    // set, and the lease let go (a tick that fires lets it go as it ends).
    v.push(Calls { table: table::CONTROL, op: "Query", n: by_shard.len() as u64, units: READ_STRONG });
    v.push(Calls { table: table::CONTROL, op: "UpdateItem", n: 2, units: WRITE });
    Ok(v)
}

/// A page of members read (strongly consistent).
fn member_query(tenants: &[&str], member: &dyn Fn(&str) -> usize) -> Calls {
    let units = capacity::query_units(tenants.iter().map(|t| member(t)), Consistency::Strong);
    Calls { table: table::CONTROL, op: "Query", n: 1, units }
}

/// The tenants of a page, 100 keys a BatchGetItem (strongly consistent, each item its own units).
fn tenant_reads(ids: &[&str], tenant: &dyn Fn(&str) -> usize) -> Vec<Calls> {
    ids.chunks(100)
        .map(|c| {
            let units = c.iter().map(|t| capacity::read_units(Some(tenant(t)), Consistency::Strong)).sum();
            Calls { table: table::TENANTS, op: "BatchGetItem", n: 1, units }
        })
        .collect()
}

/// The size of a shard cursor's item.
fn cursor_size(job: &str) -> usize {
    let mut item = tickwork::schedules::record::cursor_key(job, 0);
    let sk = tickwork::schedules::record::due_sk(1_796_108_400_000, &"0".repeat(32));
    item.insert(tickwork::schedules::record::CUR.to_string(), tickwork::schema::av_s(sk));
    capacity::item_size(&item)
}

/// One fenced transaction of pages `(group, members, more follow, resumed after a cursor)`: the
/// fence, each paged group's record cursor moved, the shard's cursor moved past the groups done
/// (`moved`: whether it was written before, this tick), and the fires' batch items on the queue's
/// table; before it, the successors of the groups done, 25 a BatchWriteItem.
fn transaction(
    segs: &[(&GroupDue, std::ops::Range<usize>, bool, bool)],
    job: &str,
    queue: &QueueConfig,
    now_ms: i64,
    moved: &mut bool,
) -> Result<Vec<Calls>> {
    let mut batch = Batch::new(Default::default());
    let mut control = TXN_SMALL;
    let mut done = 0usize;
    for (g, r, more, resumed) in segs {
        let tenants: Vec<String> = g.tenants[r.clone()].iter().map(|t| t.to_string()).collect();
        if !tenants.is_empty() {
            batch.add(vec![pulse_sweep::fire_entry(&g.group.name, g.occurrence)], tenants);
        }
        if *more {
            let cursor = resumed.then(|| g.tenants[r.start.saturating_sub(1)]);
            let old = capacity::item_size(&record(&g.group, now_ms, cursor).to_item(job));
            let last = g.tenants[r.end - 1];
            let new = capacity::item_size(&record(&g.group, now_ms, Some(last)).to_item(job));
            control += capacity::transactional(capacity::write_units(Some(old), Some(new)));
        } else {
            done += 1;
        }
    }
    let mut v = Vec::new();
    if done > 0 {
        let size = capacity::item_size(&record(&segs[0].0.group, now_ms + 86_400_000, None).to_item(job));
        v.extend(batch_writes(done, capacity::write_units(None, Some(size))));
        let size = cursor_size(job);
        let old = moved.then_some(size);
        control += capacity::transactional(capacity::write_units(old, Some(size)));
        *moved = true;
    }
    v.push(Calls { table: table::CONTROL, op: "TransactWriteItems", n: 1, units: control });
    // The records done, deleted after the transaction moved the cursor past them, 25 a request.
    let size = capacity::item_size(&record(&segs[0].0.group, now_ms, None).to_item(job));
    v.extend(batch_writes(done, capacity::write_units(Some(size), None)));
    for item in pulse_sweep::fire_items(batch, now_ms) {
        let w = enqueue_item("queue", queue, &item, now_ms)?;
        let size = w.put().map(|p| capacity::item_size(p.item())).unwrap_or(0);
        // Written in the same transaction: billed on the control table's request.
        v.push(Calls {
            table: table::QUEUE,
            op: "TransactWriteItems",
            n: 0,
            units: capacity::transactional(capacity::write_units(None, Some(size))),
        });
    }
    Ok(v)
}

/// `n` writes of `units` each on the control table in BatchWriteItems of 25 (DynamoDB's limit a
/// request).
fn batch_writes(n: usize, units: f64) -> Vec<Calls> {
    (0..n)
        .step_by(25)
        .map(|i| Calls { table: table::CONTROL, op: "BatchWriteItem", n: 1, units: (n - i).min(25) as f64 * units })
        .collect()
}

/// What a fire costs, by the model's tick.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerFire {
    /// Requests a fire.
    pub requests: f64,
    /// Read units a fire.
    pub rcu: f64,
    /// Write units a fire.
    pub wcu: f64,
    /// A month of one daily fire per tenant, DynamoDB, US dollars: the units, and each group's
    /// pending record stored.
    pub month_usd: f64,
    /// Of which the pending records' storage (one a group: a fired one is deleted).
    pub storage_usd: f64,
}

/// A fire's cost when tenants share their schedules and when every one differs, and a month of
/// one daily schedule per tenant beside the Scheduler.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SchedulesCost {
    /// Tenants, each with one daily schedule.
    pub tenants: u64,
    /// Fires in the modelled tick.
    pub fires: u64,
    /// Every tenant's schedule the same `daily 08:00` in one zone: one group.
    pub shared: PerFire,
    /// Every tenant's schedule its own: a group each.
    pub distinct: PerFire,
    /// One EventBridge Scheduler schedule per tenant instead, a month, US dollars.
    pub scheduler_month_usd: f64,
}

/// The units of `calls`: requests, read units, write units.
pub fn totals(calls: &[Calls]) -> (u64, f64, f64) {
    calls.iter().fold((0, 0.0, 0.0), |(n, r, w), c| {
        let units = c.units * c.n.max(1) as f64;
        if tickwork::meter::is_read(c.op) {
            (n + c.n, r + units, w)
        } else {
            (n + c.n, r, w + units)
        }
    })
}

/// One daily schedule for each of `tenants`, modelled from a tick firing `sample` of them at once
/// (the per-fire cost of a large tick), priced for 30 days: all of one group, and each its own.
pub fn month(tenants: u64, sample: u64, job: &str, prices: &Prices) -> Result<SchedulesCost> {
    let per_fire = |distinct: bool| -> Result<PerFire> {
        let due: Vec<Due> = (0..sample)
            .map(|i| Due {
                tenant: format!("tenant-{i:07}"),
                name: if distinct { format!("nudge-{i:07}") } else { "nudge".into() },
                occurrence: "2026-12-01T08:00:00+01:00".into(),
            })
            .collect();
        let calls = fire_tick(&due, job, &QueueConfig::default(), 1_796_108_400_000)?;
        let (n, r, w) = totals(&calls);
        let f = sample.max(1) as f64;
        let fires_month = tenants as f64 * 30.0;
        // A group a tenant, or one for them all; its one pending record (a fired one is deleted).
        let groups = if distinct { tenants as f64 } else { 1.0 };
        let size = capacity::item_size(&record(&group("nudge"), 1_796_108_400_000, None).to_item(job)) as f64;
        let storage_usd = groups * size / 1e9 * prices.ddb_storage_gb_month;
        Ok(PerFire {
            requests: n as f64 / f,
            rcu: r / f,
            wcu: w / f,
            month_usd: prices.units_usd(r / f * fires_month, w / f * fires_month) + storage_usd,
            storage_usd,
        })
    };
    let sched = scheduler_per_tenant(tenants as usize, &Stack::default(), prices);
    Ok(SchedulesCost {
        tenants,
        fires: sample,
        shared: per_fire(false)?,
        distinct: per_fire(true)?,
        scheduler_month_usd: sched.total(),
    })
}

/// The sweep's units a fire of burst `b` (modelled as `t`): a campaign cleaned after its fire's
/// are a shared group's and its cleaning's; a one-off fired and retired in one transaction's are
/// the burst's own (each fired member's deletes in it); otherwise a group each when most fires
/// are their own, one group when they share. Pure.
pub fn sweep_per_fire(cost: &SchedulesCost, b: &BurstInput, t: &BurstTime) -> PerFire {
    let fires = b.fires.max(1) as f64;
    if b.one_off && t.clean_write_units > 0.0 {
        let s = &cost.shared;
        return PerFire {
            rcu: s.rcu + t.clean_read_units / fires,
            wcu: s.wcu + t.clean_write_units / fires,
            ..s.clone()
        };
    }
    if b.one_off {
        return PerFire { rcu: t.read_units / fires, wcu: t.write_units / fires, ..cost.shared.clone() };
    }
    if b.groups * 2 > b.fires {
        cost.distinct.clone()
    } else {
        cost.shared.clone()
    }
}

/// A million fires' whole cost, US dollars: what the Scheduler's price covers (its invocation of
/// a target) is the sweep's hand-over and the drains' delivery here, and a fire's handler then
/// does its work (one write by the shipped handlers; a queue or a bus, its calls instead).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FullCost {
    /// The sweep's DynamoDB units.
    pub sweep_usd: f64,
    /// The drains' delivery: their time, claims, settles and hand-ons.
    pub delivery_usd: f64,
    /// The handler's one write a fire, or the target's calls.
    pub handler_usd: f64,
    /// The three.
    pub total_usd: f64,
    /// The Scheduler's invocations beyond its free ones.
    pub scheduler_usd: f64,
}

/// A million fires' [`FullCost`] from the sweep's units a fire (`per_fire`), the drains' cost of
/// delivering `fires` (`delivery_usd`) and the handler's or target's cost of a million fires
/// (`handler_usd`). Pure.
pub fn full_cost(per_fire: &PerFire, delivery_usd: f64, fires: u64, handler_usd: f64, prices: &Prices) -> FullCost {
    let sweep_usd = prices.units_usd(per_fire.rcu * 1e6, per_fire.wcu * 1e6);
    let delivery_usd = delivery_usd / fires.max(1) as f64 * 1e6;
    FullCost {
        sweep_usd,
        delivery_usd,
        handler_usd,
        total_usd: sweep_usd + delivery_usd + handler_usd,
        scheduler_usd: prices.scheduler_million,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_fire_costs_a_fraction_of_a_write_unit_and_a_distinct_one_its_successor_and_its_delete() {
        let c = month(1_000_000, 10_000, "pulse-sweep", &Prices::default()).unwrap();
        eprintln!("{c:?}");
        // Shared: a tenant id's bytes in a batch item (transactional), the record and fence
        // shared by a thousand: the 0.05 at most.
        assert!(c.shared.wcu <= 0.05, "{c:?}");
        assert!(c.shared.requests < 0.02, "{c:?}");
        // Distinct: each fire its group's successor put outside any transaction (1 unit), its
        // fired record's delete after it (1 unit: left to expire, a record could expire unfired
        // in a long stop), its bytes in a batch item and a share of the fence and shard cursor.
        assert!((2.0..=2.5).contains(&c.distinct.wcu), "{c:?}");
        // 30 million fires a month: shared, a few dollars beside the Scheduler's $24.60;
        // distinct, its reads (a member Query and a tenant a fire) make it more.
        assert!(c.shared.month_usd < c.scheduler_month_usd / 4.0, "{c:?}");
        assert!(c.distinct.month_usd > c.scheduler_month_usd, "{c:?}");
    }

    #[test]
    fn a_fires_whole_cost_is_its_hand_over_its_delivery_and_its_handlers_write() {
        let p = Prices::default();
        let fire = PerFire { requests: 0.01, rcu: 1.0, wcu: 0.04, month_usd: 0.0, storage_usd: 0.0 };
        // A million fires' sweep: a million read units and 40,000 write units; the drains' $0.50
        // for 500,000 fires is $1.00 a million; the handler's million writes.
        let c = full_cost(&fire, 0.5, 500_000, p.units_usd(0.0, 1e6), &p);
        assert!((c.sweep_usd - p.units_usd(1e6, 40_000.0)).abs() < 1e-12, "{c:?}");
        assert!((c.delivery_usd - 1.0).abs() < 1e-12, "{c:?}");
        assert!((c.total_usd - (c.sweep_usd + 1.0 + p.ddb_write_million)).abs() < 1e-12, "{c:?}");
        assert_eq!(c.scheduler_usd, p.scheduler_million);
    }

    #[test]
    fn a_bursts_sweep_units_are_its_kinds() {
        let fire = |wcu: f64| PerFire { requests: 0.0, rcu: 1.0, wcu, month_usd: 0.0, storage_usd: 0.0 };
        let cost = SchedulesCost {
            tenants: 100,
            fires: 100,
            shared: fire(0.04),
            distinct: fire(2.2),
            scheduler_month_usd: 0.0,
        };
        let b = |groups: u64, one_off: bool| BurstInput {
            fires: 100,
            groups,
            start_ms: 0.0,
            latency_ms: 10.0,
            per_kb_ms: 0.0,
            tenant_id_bytes: 36,
            one_off,
            server: ServerTime::DYNAMODB,
            tenant_concurrency: 8,
            fire_concurrency: 8,
            table_wcu: 4_000.0,
            table_rcu: 12_000.0,
            invocation_ms: 475_000.0,
            interval_ms: 900_000.0,
        };
        let t = BurstTime { write_units: 400.0, read_units: 100.0, ..Default::default() };
        assert_eq!(sweep_per_fire(&cost, &b(1, false), &t).wcu, 0.04);
        assert_eq!(sweep_per_fire(&cost, &b(30, false), &t).wcu, 0.04, "a spread still shares");
        assert_eq!(sweep_per_fire(&cost, &b(100, false), &t).wcu, 2.2);
        assert_eq!(sweep_per_fire(&cost, &b(1, true), &t).wcu, 4.0, "one-offs retired as fired: their own deletes");
        let cleaned = BurstTime { clean_write_units: 200.0, clean_read_units: 100.0, ..t.clone() };
        let campaign = sweep_per_fire(&cost, &b(1, true), &cleaned);
        assert_eq!((campaign.wcu, campaign.rcu), (0.04 + 2.0, 2.0), "a campaign: a shared fire and its cleaning");
    }
}
