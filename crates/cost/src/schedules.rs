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

/// A burst: `fires` schedules due at the same instant (a populous zone's 08:00), in `groups`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BurstInput {
    /// Fires due at once.
    pub fires: u64,
    /// The groups they fall in: 1 when every tenant's schedule is the zone's `daily 08:00`; a
    /// 30-minute spread makes up to 30 (one a minute's offset); `fires` when every spec differs.
    pub groups: u64,
    /// From their instant until the sweep runs, ms: 0 when the instant is a tick's (a local hour
    /// falls on a quarter hour in every zone), up to a minute when a wake runs it (Scheduler's
    /// 60-second precision, the wake rounded up to the minute).
    pub start_ms: f64,
    /// One DynamoDB request's latency, ms: requests made at once overlap it.
    pub latency_ms: f64,
    /// A server's own time a request that does not overlap, ms: 0 for DynamoDB; a local server
    /// that serves one request at a time (moto) is measured for the benchmark.
    pub serial_ms: f64,
    /// A page's tenants' BatchGetItems at once (`TICKWORK_PULSE_TENANT_CONCURRENCY`).
    pub tenant_concurrency: u32,
    /// Groups' first member pages read at once in a due shard (`TICKWORK_PULSE_FIRE_CONCURRENCY`).
    pub fire_concurrency: u32,
    /// Write units a second the control table takes: a new on-demand table's
    /// [`crate::delivery::NEW_ON_DEMAND_WCU_PER_SEC`] until it has seen more (or its warm
    /// throughput, `--control-table-wcu`).
    pub table_wcu: f64,
    /// Read units a second the control and tenants tables each take (a new on-demand table's
    /// [`crate::delivery::NEW_ON_DEMAND_RCU_PER_SEC`], or their warm throughput,
    /// `--table-rcu`).
    pub table_rcu: f64,
    /// How long one sweep invocation fires, ms (its timeout less the margin).
    pub invocation_ms: f64,
    /// The sweep's tick, ms: an invocation stopped by its deadline goes on at its wake, a minute
    /// on at most ([`WAKE_WAIT_MS`]), or at this tick when it comes first.
    pub interval_ms: f64,
}

/// The longest a fire stopped by its invocation's deadline waits for the wake it set, ms: the
/// wake is for the next whole minute, and Scheduler invokes "with 60 second precision"
/// (EventBridge Scheduler User Guide, "Schedule types").
pub const WAKE_WAIT_MS: f64 = 60_000.0;

/// How a burst is handed to the queue.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BurstTime {
    /// Due-record pages read (of [`pulse_sweep::FIRE_PAGE`]).
    pub pages: u64,
    /// Member pages read (of up to [`pulse_sweep::MEMBER_PAGE`]).
    pub member_pages: u64,
    /// Requests.
    pub requests: u64,
    /// The requests' own time, ms (before the partition's write limit).
    pub requests_ms: f64,
    /// From the fires' instant until the last is queued, ms.
    pub handover_ms: f64,
    /// Sweep invocations it takes (more than one: the rest waited for a wake).
    pub invocations: u64,
    /// The least time the due partitions' write limit allows, ms: every group's fire puts its
    /// successor, deletes its record and moves its shard's cursor ([`DUE_WCU_PER_GROUP`]) in its due shard's
    /// partition, of at most 1,000 write units a second; the shards fire at once, so the busiest
    /// partition sets it.
    pub partition_floor_ms: f64,
    /// The control table's write units the burst spends (its groups' records).
    pub write_units: f64,
    /// The least time the control table's write throughput allows ([`BurstInput::table_wcu`]), ms.
    pub table_floor_ms: f64,
    /// Strongly consistent reads of the busier of the control table (a member page a group) and
    /// the tenants table (a tenant a fire), one unit each.
    pub read_units: f64,
    /// The least time the tables' read throughput allows ([`BurstInput::table_rcu`]), ms.
    pub read_floor_ms: f64,
    /// Requests in flight at most: a member Query for each of `fire_concurrency` groups in each
    /// due shard.
    pub in_flight: u64,
}

/// Write units a group's fire spends in its due partition: its successor's put and its fired
/// record's delete (small items, outside any transaction: 1 unit each) and its share of the shard
/// cursor's move (a transactional write of a small item, 2 units, once a chunk of
/// [`pulse_sweep::FIRE_CHUNK`] groups).
pub const DUE_WCU_PER_GROUP: f64 = 2.0 + 2.0 / pulse_sweep::FIRE_CHUNK as f64;

/// The sweep's part of a burst, from its own paging (pure): per page of due records a Query, each
/// group's first page of members (`tenant_concurrency` Queries at once), their tenants 100 keys a
/// BatchGetItem (`tenant_concurrency` at once), a transaction per [`pulse_sweep::FIRE_CHUNK`]
/// records, its successors put and its fired records deleted 25 a request; then each group larger than a page alone, a Query, its BatchGetItems and a
/// transaction a page; each request
/// `latency_ms`, one after another within a shard, the [`tickwork::schedules::DUE_SHARDS`] shards
/// at once (each under its own lease, taken and let go: 2 requests more); then the earliest
/// record left and `sched_next`. Not modelled: the calendar groups the same invocation
/// sweeps first (at a local hour that is not midnight, a tick with no boundary: a read).
pub fn burst(b: &BurstInput) -> BurstTime {
    let page = pulse_sweep::FIRE_PAGE as u64;
    let member_page = pulse_sweep::MEMBER_PAGE as u64;
    let shards = u64::from(tickwork::schedules::DUE_SHARDS);
    let groups = b.groups.clamp(1, b.fires.max(1));
    // Groups as even as the fires allow: `big` of them one member more.
    let (small, big) = (b.fires / groups, b.fires % groups);
    let mut t = BurstTime::default();
    // The due shards fire at once, each under its own lease: the burst takes as long as its
    // longest shard's requests, one after another within it.
    let mut longest = 0u64;
    let mut busy = 0u64;
    let mut seen = 0u64;
    let c = u64::from(b.tenant_concurrency.max(1));
    let f = u64::from(b.fire_concurrency.max(1));
    const AT_ONCE: u64 = tickwork::db::BATCH_WRITES_AT_ONCE as u64;
    for k in 0..shards {
        let n = groups / shards + u64::from(k < groups % shards);
        // Its first record read; nothing due, done.
        t.requests += 1;
        let mut rounds = 1u64;
        if n == 0 {
            longest = longest.max(rounds);
            continue;
        }
        // Its lease taken, and let go at its end; and its earliest record read again after.
        busy += 1;
        t.requests += 2;
        rounds += 2;
        let sizes: Vec<u64> = std::iter::repeat_n(page, (n / page) as usize).chain(std::iter::once(n % page)).collect();
        for r in sizes {
            t.pages += 1;
            t.requests += 1;
            rounds += 1;
            if r == 0 {
                continue;
            }
            // This page's groups, and how many members each.
            let members: Vec<u64> = (seen..seen + r).map(|i| small + u64::from(i < big)).collect();
            seen += r;
            let first: u64 = members.iter().map(|m| (*m).min(member_page)).sum();
            // A transaction a chunk of groups (a daily group's record writes nothing in it: one a
            // chunk), their successors put before it 25 a request, its fired records deleted after
            // it 25 a request, each a round of requests at once.
            let chunk = pulse_sweep::FIRE_CHUNK as u64;
            let txns = r.div_ceil(chunk);
            // (A group larger than a page puts its successor with its last page.)
            let single = members.iter().filter(|m| **m < member_page).count() as u64;
            let per_chunk = |n: u64| n.div_ceil(25);
            let puts = (single / chunk) * per_chunk(chunk) + per_chunk(single % chunk);
            let put_rounds =
                (single / chunk) * per_chunk(chunk).div_ceil(AT_ONCE) + per_chunk(single % chunk).div_ceil(AT_ONCE);
            t.member_pages += r;
            t.requests += r + first.div_ceil(100) + txns + 2 * puts;
            rounds += r.div_ceil(f) + first.div_ceil(100).div_ceil(c) + txns + 2 * put_rounds;
            for m in members {
                // Pages after the first: a Query, its tenants' BatchGetItems and a transaction
                // each (an exactly full last page is followed by an empty one).
                for j in 1..=m / member_page {
                    let tenants = (m - j * member_page).min(member_page);
                    // The last page's successor put too, and its record's delete after it.
                    let put = 2 * u64::from(j == m / member_page);
                    t.member_pages += 1;
                    t.requests += 2 + tenants.div_ceil(100) + put;
                    rounds += 2 + tenants.div_ceil(100).div_ceil(c) + put;
                }
            }
        }
        longest = longest.max(rounds);
    }
    // Every shard's cursor read first (one BatchGetItem); then the earliest record left in each
    // shard that fired (at once) and `sched_next` set.
    t.requests += 1 + busy + 1;
    let rounds = 1 + longest + u64::from(busy > 0) + 1;
    // A server that serves one request at a time (the local one) serves every shard's in turn.
    let work_ms = rounds as f64 * b.latency_ms + t.requests as f64 * b.serial_ms;
    t.requests_ms = work_ms;
    // Every shard's partition takes its own groups' writes, the shards at once.
    let busiest = groups.div_ceil(shards);
    t.partition_floor_ms = busiest as f64 * DUE_WCU_PER_GROUP / crate::boundary::PARTITION_MAX_WCU_PER_SEC * 1000.0;
    t.write_units = groups as f64 * DUE_WCU_PER_GROUP;
    t.table_floor_ms = t.write_units / b.table_wcu.max(1.0) * 1000.0;
    t.read_units = (t.member_pages as f64).max(b.fires as f64);
    t.read_floor_ms = t.read_units / b.table_rcu.max(1.0) * 1000.0;
    t.in_flight = f * shards;
    // Requests faster than the partitions or the tables take them are throttled down to them.
    let work_ms = work_ms.max(t.partition_floor_ms).max(t.table_floor_ms).max(t.read_floor_ms);
    let window = b.invocation_ms.max(1.0);
    let extra = (work_ms / window).ceil().max(1.0) - 1.0;
    t.invocations = extra as u64 + 1;
    // Each invocation stopped by its deadline sets the wake for the next whole minute (or the
    // next tick comes first): the next goes on at most a minute after it stopped.
    let period = b.interval_ms.min(window + WAKE_WAIT_MS);
    t.handover_ms = b.start_ms + extra * period + (work_ms - extra * window);
    t
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

#[cfg(test)]
mod tests {
    use super::*;

    fn burst_of(fires: u64, groups: u64) -> BurstInput {
        BurstInput {
            fires,
            groups,
            start_ms: 0.0,
            latency_ms: 10.0,
            serial_ms: 0.0,
            tenant_concurrency: 8,
            fire_concurrency: 8,
            table_wcu: 40_000.0,
            table_rcu: 40_000.0,
            invocation_ms: 255_000.0,
            interval_ms: 900_000.0,
        }
    }

    #[test]
    fn a_burst_of_distinct_schedules_is_paged_group_by_group_and_waits_on_its_due_partitions() {
        assert_eq!(tickwork::schedules::DUE_SHARDS, 8, "the figures below");
        assert_eq!(pulse_sweep::FIRE_CHUNK, 200, "a page a transaction");
        // 800 groups of one: 100 a shard, its first record read, its lease taken and let go, one
        // page: a Query, 100 member Queries in 13 rounds of 8, a BatchGet of their tenants, 4
        // BatchWriteItems of successors at once, a transaction, and 4 BatchWriteItems deleting
        // the fired records at once; then its earliest record read again.
        let t = burst(&burst_of(800, 800));
        // The 8 shards' cursors first (a BatchGetItem); at the end `sched_next` set.
        assert_eq!((t.pages, t.member_pages, t.requests, t.invocations), (8, 800, 1 + 8 * 115 + 1, 1));
        // The shards at once: one shard's 21 rounds, the cursors before, the earliest records
        // (at once) and `sched_next` after.
        assert_eq!(t.requests_ms, (1.0 + 21.0 + 1.0 + 1.0) * 10.0);
        // 201 write units in each partition, at once: below the requests' time.
        assert!((t.partition_floor_ms - 201.0).abs() < 1e-6, "{t:?}");
        assert_eq!(t.handover_ms, t.requests_ms);
        let slow = burst(&BurstInput { latency_ms: 30.0, ..burst_of(800, 800) });
        assert_eq!(slow.handover_ms, 24.0 * 30.0, "the requests, when they take longer");
        // A server that serves one request at a time adds its own time to every request, every
        // shard's in turn.
        let serial = burst(&BurstInput { serial_ms: 1.0, ..burst_of(800, 800) });
        assert_eq!(serial.requests_ms, t.requests_ms + serial.requests as f64);
        // A million distinct schedules: 125,000 a shard, 625 pages of 200 in 30 rounds each (25 of
        // member Queries) and an empty one: 188 s; their 251,250 write units a partition take
        // 251 s, the partitions at once, and set the pace.
        let m = burst(&burst_of(1_000_000, 1_000_000));
        assert!((m.partition_floor_ms - 251_250.0).abs() < 1e-3, "{m:?}");
        assert_eq!(m.requests_ms, (1.0 + (3.0 + 625.0 * 30.0 + 1.0) + 2.0) * 10.0);
        assert_eq!((m.invocations, m.handover_ms), (1, m.partition_floor_ms));
        // At 50 ms a request, 938 s: 4 invocations, 3 waits of at most a minute (a wake) between.
        let m = burst(&BurstInput { latency_ms: 50.0, ..burst_of(1_000_000, 1_000_000) });
        assert_eq!(m.invocations, 4);
        let want = 3.0 * (255_000.0 + WAKE_WAIT_MS) + (m.requests_ms - 3.0 * 255_000.0);
        assert!((m.handover_ms - want).abs() < 1e-6, "{} vs {want}", m.handover_ms);
        // With 64 groups' member pages at once (the default), 9 rounds a page: 282 s, in one
        // invocation of the template's 475 s.
        let fast = BurstInput { latency_ms: 50.0, fire_concurrency: 64, invocation_ms: 475_000.0, ..burst_of(0, 0) };
        let m = burst(&BurstInput { fires: 1_000_000, groups: 1_000_000, ..fast.clone() });
        assert_eq!(m.requests_ms, (1.0 + (3.0 + 625.0 * 9.0 + 1.0) + 2.0) * 50.0);
        assert!(m.handover_ms < 300_000.0 && m.invocations == 1, "{m:?}");
        assert_eq!(m.in_flight, 64 * 8);
        // On a new on-demand control table (4,000 write units a second until it has seen more)
        // the 2.01 million write units take 502.5 s; warmed to 12,000 (its warm throughput),
        // 167.5 s, under the requests' time. The tenants' million strong reads at 12,000 a second
        // take 83 s.
        let at = |wcu: f64| BurstInput {
            fires: 1_000_000,
            groups: 1_000_000,
            table_wcu: wcu,
            table_rcu: 12_000.0,
            ..fast.clone()
        };
        let cold = burst(&at(4_000.0));
        assert!((cold.table_floor_ms - 502_500.0).abs() < 1e-3, "{cold:?}");
        assert!(cold.handover_ms > 300_000.0, "{cold:?}");
        let warm = burst(&at(12_000.0));
        assert!((warm.read_floor_ms - 1_000_000.0 / 12.0).abs() < 1e-3, "{warm:?}");
        assert_eq!(warm.handover_ms, m.requests_ms, "{warm:?}");
    }

    #[test]
    fn a_million_fires_of_one_group_go_out_a_thousand_members_a_page_within_five_minutes() {
        // One record: its first page with the others' records (1 member Query, 10 BatchGets, 1
        // transaction), then 999 full pages (a Query, 10 BatchGets, a transaction each) and an
        // empty one (a Query, the successor's put, a transaction and the record's delete); one due
        // page; its shard's lease taken and let go; the cursors read first (a BatchGetItem), each
        // shard's first record, and the closing 2 (its earliest record, `sched_next`).
        let m = burst(&burst_of(1_000_000, 1));
        assert_eq!((m.pages, m.member_pages), (1, 1_001));
        assert_eq!(m.requests, 1 + 8 + 2 + 1 + 12 + 999 * 12 + 4 + 2);
        // Each page's 10 BatchGetItems 8 at a time: 2 rounds; so 4,008 rounds of 10 ms in its
        // shard (the other shards' first record read beside it), and the 3 before and after.
        assert_eq!(m.requests_ms, 4_011.0 * 10.0, "a page after another");
        assert!(m.handover_ms < 300_000.0 && m.invocations == 1, "{m:?}");
        assert!(m.partition_floor_ms < 3.0, "{m:?}");
        // A 30-minute spread makes 30 groups of 33,333 or 33,334: about the same requests.
        let spread = burst(&burst_of(1_000_000, 30));
        assert!(spread.handover_ms < 300_000.0, "{spread:?}");
        assert!((spread.requests as f64 / m.requests as f64 - 1.0).abs() < 0.05, "{spread:?}");
    }

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
}
