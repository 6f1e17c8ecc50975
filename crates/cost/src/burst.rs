//! A burst's hand-over: `fires` schedules due at one instant, from the sweep's own paging, each
//! request timed by its size.
//!
//! **What a request's time is assumed to be.** Its latency, and a time for each kilobyte it sends
//! and receives ([`BurstInput::per_kb_ms`]). A 1,000-member page read is about 200 KB at a 36-byte
//! tenant id, and a page of 200 distinct groups' successors is 70 KB of puts: charged like a
//! 300-byte lease write, they made the model 4 to 50 times too quick beside the benchmark. DynamoDB
//! publishes no per-kilobyte figure; `tickctl cost` assumes [`PER_KB_MS`] (a request stream of
//! about 10 MB a second) and says so. A server that serves one request at a time (the local one)
//! adds its own time, which does not overlap ([`ServerTime`], measured by `make bench
//! BENCH=burst`; zero for DynamoDB).
//!
//! **The sizes** ([`Wire`]) are the bytes the sweep's requests carry as DynamoDB's JSON, measured
//! on the wire by `make bench BENCH=burst` at 6-byte tenant ids and written as functions of the
//! tenant id's length ([`BurstInput::tenant_id_bytes`]).

use serde::Serialize;

/// A request's bytes on the wire, each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Wire {
    /// Its body.
    pub sent: f64,
    /// Its answer's body.
    pub got: f64,
}

impl Wire {
    /// Both ways, in kilobytes.
    pub fn kb(&self) -> f64 {
        (self.sent + self.got) / 1024.0
    }
}

/// The time a server spends on a request that does not overlap another's, ms: zero for DynamoDB
/// (it serves many at once); the local server serves one at a time, parses what it is sent,
/// writes out what it answers, and reads a whole table for a Query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ServerTime {
    /// Every request.
    pub request_ms: f64,
    /// A Query, beyond that.
    pub query_ms: f64,
    /// A kilobyte sent.
    pub sent_per_kb_ms: f64,
    /// A kilobyte answered.
    pub got_per_kb_ms: f64,
}

impl ServerTime {
    /// DynamoDB's: none that does not overlap.
    pub const DYNAMODB: Self = Self { request_ms: 0.0, query_ms: 0.0, sent_per_kb_ms: 0.0, got_per_kb_ms: 0.0 };

    /// One request's.
    pub fn of(&self, w: Wire, query: bool) -> f64 {
        self.request_ms
            + if query { self.query_ms } else { 0.0 }
            + self.sent_per_kb_ms * w.sent / 1024.0
            + self.got_per_kb_ms * w.got / 1024.0
    }
}

/// The model's assumption for DynamoDB: a kilobyte on the wire, either way, adds this to a
/// request, ms (about 10 MB a second on one connection). Not a published figure: `tickctl cost
/// --latency-per-kb` sets another.
pub const PER_KB_MS: f64 = 0.1;

/// A tenant id's bytes the model assumes when none is given: a UUID's 36.
pub const TENANT_ID_BYTES: u64 = 36;

/// The sizes of the sweep's requests, measured on the wire (`make bench BENCH=burst`, 6-byte
/// tenant ids): each a function of the tenant id's length `id`. Pure.
pub mod size {
    use super::Wire;

    /// A request of one small item (a lease, a cursor, a state item, a one-record Query).
    pub const SMALL: Wire = Wire { sent: 500.0, got: 300.0 };

    /// A due page: a Query answering `records` due records (about 375 bytes each).
    pub fn due_page(records: u64) -> Wire {
        Wire { sent: 300.0, got: 165.0 + 375.0 * records as f64 }
    }

    /// A member page: a Query answering `members` members (187 bytes each at 6-byte ids).
    pub fn member_page(members: u64, id: f64) -> Wire {
        Wire { sent: 290.0, got: 165.0 + (181.0 + id) * members as f64 }
    }

    /// A BatchGetItem of `tenants` tenants (their keys sent, their items answered).
    pub fn tenants(tenants: u64, id: f64) -> Wire {
        Wire { sent: 100.0 + (17.0 + id) * tenants as f64, got: 100.0 + (179.0 + id) * tenants as f64 }
    }

    /// A fire transaction of `groups` records and their batch items holding `units` fires.
    pub fn transaction(groups: u64, units: u64, id: f64) -> Wire {
        Wire { sent: 1_000.0 + 100.0 * groups as f64 + (5.0 + id) * units as f64, got: 53.0 }
    }

    /// A one-off page's deletes in its transaction: each fired member's membership and
    /// definition, conditioned on its version.
    pub fn one_off_deletes(members: u64, id: f64) -> f64 {
        2.0 * (150.0 + id) * members as f64
    }

    /// A BatchWriteItem of `n` successors' puts (350 bytes each).
    pub fn puts(n: u64) -> Wire {
        Wire { sent: 100.0 + 350.0 * n as f64, got: 176.0 }
    }

    /// A BatchWriteItem of `n` fired records' deletes (125 bytes each).
    pub fn deletes(n: u64) -> Wire {
        Wire { sent: 100.0 + 125.0 * n as f64, got: 176.0 }
    }
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
    /// A kilobyte on the wire, either way, adds this to a request, ms ([`PER_KB_MS`]).
    pub per_kb_ms: f64,
    /// A tenant id's bytes: the member pages, tenant reads and batch items grow with it.
    pub tenant_id_bytes: u64,
    /// The groups are one-off (`at <instant>`) groups, a campaign's: a group's first page is
    /// [`pulse_sweep::ONE_OFF_PAGE`] members, read after its head's joins. A group no larger is
    /// fired and retired in that page's transaction, each member's membership and definition
    /// deleted in it; a larger one is fixed by it, its other pages a thousand members each, and its
    /// members and definitions cleaned after the hand-over by plain deletes.
    #[serde(default)]
    pub one_off: bool,
    /// A server's own time a request that does not overlap: [`ServerTime::DYNAMODB`]; a local
    /// server that serves one request at a time (moto) is measured for the benchmark.
    pub server: ServerTime,
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
    /// The least time the largest one-off group's member partition allows, ms: each fired
    /// member's membership deleted in a transaction (2 write units) in its group's one member
    /// partition, at most 1,000 units a second (a group fired in one transaction; a larger one's
    /// are cleaned after the hand-over).
    pub member_floor_ms: f64,
    /// From the fires' instant until a campaign's members and definitions are cleaned, ms (0:
    /// none to clean). Its member partition takes a unit a member at 1,000 a second, and a tick
    /// cleans for [`pulse_sweep::CLEAN_FOR_MS`] of each minute's wake.
    pub cleaned_ms: f64,
    /// A campaign's cleaning's write units: a plain delete of each member's membership and of its
    /// definition.
    pub clean_write_units: f64,
    /// A campaign's cleaning's read units: its member pages (strongly consistent, a unit each 4 KB).
    pub clean_read_units: f64,
    /// The control table's write units the burst spends (its groups' records; a one-off's
    /// members' and definitions' deletes).
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

/// Write units of a small item deleted in a transaction (DynamoDB bills a transactional write
/// twice: "Capacity for transactions", Developer Guide): a fired one-off member's membership, and
/// its definition.
pub const ONE_OFF_MEMBER_DELETE_WCU: f64 = 2.0;

/// The sweep's part of a burst, from its own paging (pure): per page of due records a Query, each
/// group's first page of members (`fire_concurrency` Queries at once), their tenants 100 keys a
/// BatchGetItem (`tenant_concurrency` at once), a transaction per [`pulse_sweep::FIRE_CHUNK`]
/// records, its successors put and its fired records deleted 25 a request (8 at once); then each
/// group larger than a page alone, a Query, its BatchGetItems and a transaction a page. A round of
/// requests made at once takes one request's time, its latency and its bytes' ([`Wire`]); the
/// rounds of a shard follow one another, the [`tickwork::schedules::DUE_SHARDS`] shards at once
/// (each under its own lease, taken and let go: 2 requests more); then the earliest record left
/// and `sched_next`. A server's own time ([`ServerTime`]) is added for every request, every
/// shard's in turn. Not modelled: the calendar groups the same invocation sweeps first (at a
/// local hour that is not midnight, a tick with no boundary: a read).
pub fn burst(b: &BurstInput) -> BurstTime {
    use size::{deletes, due_page, member_page, one_off_deletes, puts, tenants, transaction, SMALL};
    let page = pulse_sweep::FIRE_PAGE as u64;
    let id = b.tenant_id_bytes as f64;
    let mpage = pulse_sweep::MEMBER_PAGE as u64;
    // A one-off group's first page is a few members, read after its head's joins.
    let first_cap = if b.one_off { pulse_sweep::ONE_OFF_PAGE as u64 } else { mpage };
    let groups = b.groups.clamp(1, b.fires.max(1));
    let largest = b.fires / groups + u64::from(b.fires % groups > 0);
    // A one-off group its first page holds whole is retired in that page's transaction, its
    // members' memberships and definitions deleted in it; a larger one is fixed by it, and
    // cleaned after.
    let deleting = b.one_off && largest < first_cap;
    let txn = |groups: u64, units: u64| {
        let w = transaction(groups, units, id);
        if deleting {
            Wire { sent: w.sent + one_off_deletes(units, id), ..w }
        } else {
            w
        }
    };
    let heads = u64::from(b.one_off);
    let chunk = pulse_sweep::FIRE_CHUNK as u64;
    let shards = u64::from(tickwork::schedules::DUE_SHARDS);
    // Groups as even as the fires allow: `big` of them one member more.
    let (small, big) = (b.fires / groups, b.fires % groups);
    let mut t = BurstTime::default();
    // A round of requests of `w` each, made at once.
    let round = |w: Wire| b.latency_ms + b.per_kb_ms * w.kb();
    // The server's own time, every request's.
    let mut serial = 0.0f64;
    let mut sent = |t: &mut BurstTime, n: u64, w: Wire, query: bool| {
        t.requests += n;
        serial += n as f64 * b.server.of(w, query);
    };
    // The due shards fire at once, each under its own lease: the burst takes as long as its
    // longest shard's rounds, one after another within it.
    let mut longest = 0.0f64;
    let mut busy = 0u64;
    let mut seen = 0u64;
    let c = u64::from(b.tenant_concurrency.max(1));
    let f = u64::from(b.fire_concurrency.max(1));
    const AT_ONCE: u64 = tickwork::db::BATCH_WRITES_AT_ONCE as u64;
    for k in 0..shards {
        let n = groups / shards + u64::from(k < groups % shards);
        // Its first record read; nothing due, done.
        sent(&mut t, 1, SMALL, true);
        let mut shard = round(SMALL);
        if n == 0 {
            longest = longest.max(shard);
            continue;
        }
        // Its lease taken, and let go at its end; and its earliest record read again after.
        busy += 1;
        sent(&mut t, 2, SMALL, false);
        shard += 2.0 * round(SMALL);
        let sizes: Vec<u64> = std::iter::repeat_n(page, (n / page) as usize).chain(std::iter::once(n % page)).collect();
        for r in sizes {
            t.pages += 1;
            sent(&mut t, 1, due_page(r), true);
            shard += round(due_page(r));
            if r == 0 {
                continue;
            }
            // This page's groups, and how many members each.
            let members: Vec<u64> = (seen..seen + r).map(|i| small + u64::from(i < big)).collect();
            seen += r;
            let firsts: Vec<u64> = members.iter().map(|m| (*m).min(first_cap)).collect();
            let first: u64 = firsts.iter().sum();
            // Each group's first member page (a one-off's after its head), `f` at once: a round
            // as long as its largest.
            for (i, m) in firsts.iter().enumerate() {
                sent(&mut t, heads, SMALL, false);
                sent(&mut t, 1, member_page(*m, id), true);
                if i as u64 % f == 0 {
                    shard += heads as f64 * round(SMALL) + round(member_page(*m, id));
                }
            }
            // Their tenants, 100 a BatchGetItem, `c` at once.
            let gets = first.div_ceil(100);
            sent(&mut t, gets, tenants(100.min(first), id), false);
            shard += gets.div_ceil(c) as f64 * round(tenants(100.min(first), id));
            // A transaction a chunk of groups (a daily group's record writes nothing in it: one a
            // chunk), their successors put before it 25 a request, its fired records deleted after
            // it 25 a request, each a round of requests at once.
            let txns = r.div_ceil(chunk);
            let per_txn = txn(r.div_ceil(txns), first.div_ceil(txns));
            sent(&mut t, txns, per_txn, false);
            shard += txns as f64 * round(per_txn);
            // (A group larger than a page puts its successor with its last page; a one-off
            // group has none: its record goes in its last page's transaction, or is followed by
            // its cleaning record.)
            let single = if b.one_off { 0 } else { members.iter().filter(|m| **m < mpage).count() as u64 };
            for part in std::iter::repeat_n(chunk, (single / chunk) as usize).chain(std::iter::once(single % chunk)) {
                let requests = part.div_ceil(25);
                let rounds = requests.div_ceil(AT_ONCE) as f64;
                sent(&mut t, requests, puts(25.min(part)), false);
                sent(&mut t, requests, deletes(25.min(part)), false);
                shard += rounds * (round(puts(25.min(part))) + round(deletes(25.min(part))));
            }
            t.member_pages += r;
            for m in members {
                // A one-off larger than its first page is fixed (its head read again, and the
                // transaction counted above fixes it, firing nothing), then fired from its start.
                let fixed = b.one_off && !deleting && m >= first_cap;
                if fixed {
                    sent(&mut t, 1, SMALL, false);
                    shard += round(SMALL);
                }
                // Pages after the first, a thousand members each: a Query, its tenants'
                // BatchGetItems and a transaction each (an exactly full last page is followed by
                // an empty one).
                let offset = if fixed { 0 } else { first_cap };
                let after_first = if m >= first_cap { (m - offset) / mpage + 1 } else { 0 };
                for j in 1..=after_first {
                    let left = (m - offset - (j - 1) * mpage).min(mpage);
                    t.member_pages += 1;
                    let gets = left.div_ceil(100);
                    // A fixed page reads its head's count of members that left first.
                    if fixed {
                        sent(&mut t, 1, SMALL, false);
                        shard += round(SMALL);
                    }
                    sent(&mut t, 1, member_page(left, id), true);
                    sent(&mut t, gets, tenants(100.min(left), id), false);
                    sent(&mut t, 1, txn(1, left), false);
                    shard += round(member_page(left, id))
                        + gets.div_ceil(c) as f64 * round(tenants(100.min(left), id))
                        + round(txn(1, left));
                    // The last page's successor put before its transaction, and its record's
                    // delete after it (a campaign's record is replaced by its cleaning record in
                    // the transaction).
                    if j == after_first && !b.one_off {
                        sent(&mut t, 1, puts(1), false);
                        sent(&mut t, 1, deletes(1), false);
                        shard += round(puts(1)) + round(deletes(1));
                    }
                }
            }
        }
        longest = longest.max(shard);
    }
    // Every shard's cursor read first (one BatchGetItem); then the earliest record left in each
    // shard that fired (at once) and `sched_next` set.
    sent(&mut t, 1, SMALL, false);
    sent(&mut t, busy, SMALL, true);
    sent(&mut t, 1, SMALL, false);
    let closing = if busy > 0 { 3.0 } else { 2.0 };
    // A server that serves one request at a time (the local one) serves every shard's in turn.
    let work_ms = longest + closing * round(SMALL) + serial;
    t.requests_ms = work_ms;
    // Every shard's partition takes its own groups' writes, the shards at once.
    let busiest = groups.div_ceil(shards);
    let per_sec = crate::boundary::PARTITION_MAX_WCU_PER_SEC;
    t.partition_floor_ms = busiest as f64 * DUE_WCU_PER_GROUP / per_sec * 1000.0;
    t.write_units = groups as f64 * DUE_WCU_PER_GROUP;
    if deleting {
        // Each fired member's membership and definition deleted in a transaction: 2 units each.
        t.member_floor_ms = largest as f64 * ONE_OFF_MEMBER_DELETE_WCU / per_sec * 1000.0;
        t.write_units += b.fires as f64 * 2.0 * ONE_OFF_MEMBER_DELETE_WCU;
    }
    t.table_floor_ms = t.write_units / b.table_wcu.max(1.0) * 1000.0;
    t.read_units = (t.member_pages as f64).max(b.fires as f64);
    t.read_floor_ms = t.read_units / b.table_rcu.max(1.0) * 1000.0;
    t.in_flight = f * shards;
    // Requests faster than the partitions or the tables take them are throttled down to them.
    let work_ms = work_ms.max(t.partition_floor_ms).max(t.member_floor_ms).max(t.table_floor_ms).max(t.read_floor_ms);
    let window = b.invocation_ms.max(1.0);
    let extra = (work_ms / window).ceil().max(1.0) - 1.0;
    t.invocations = extra as u64 + 1;
    // Each invocation stopped by its deadline sets the wake for the next whole minute (or the
    // next tick comes first): the next goes on at most a minute after it stopped.
    let period = b.interval_ms.min(window + WAKE_WAIT_MS);
    t.handover_ms = b.start_ms + extra * period + (work_ms - extra * window);
    if b.one_off && !deleting {
        clean(b, &mut t, largest, groups);
    }
    t
}

/// A campaign's cleaning after its hand-over ([`BurstTime::cleaned_ms`]): a page of a thousand
/// members a round of a Query, its definitions' deletes (`CLEAN_CONCURRENCY`, 64, at once) and its
/// memberships' BatchWriteItems; bound by the member partition's 1,000 units a second and the
/// table's write throughput; a tick cleans for [`pulse_sweep::CLEAN_FOR_MS`] of each minute. Pure.
fn clean(b: &BurstInput, t: &mut BurstTime, largest: u64, groups: u64) {
    use size::{deletes, member_page, SMALL};
    let id = b.tenant_id_bytes as f64;
    let round = |w: Wire| b.latency_ms + b.per_kb_ms * w.kb();
    const AT_ONCE: u64 = tickwork::db::BATCH_WRITES_AT_ONCE as u64;
    const DEF_DELETES_AT_ONCE: u64 = 64;
    let pages = largest.div_ceil(pulse_sweep::MEMBER_PAGE as u64) * groups.min(b.fires);
    let page_ms = round(member_page(1000, id))
        + 1000u64.div_ceil(DEF_DELETES_AT_ONCE) as f64 * round(SMALL)
        + 40u64.div_ceil(AT_ONCE) as f64 * round(deletes(25));
    let per_sec = crate::boundary::PARTITION_MAX_WCU_PER_SEC;
    t.clean_write_units = 2.0 * b.fires as f64;
    t.clean_read_units = pages as f64 * member_page(1000, id).got / 4096.0;
    let work = (pages as f64 * page_ms)
        .max(largest as f64 / per_sec * 1000.0)
        .max(t.clean_write_units / b.table_wcu.max(1.0) * 1000.0)
        .max(t.clean_read_units / b.table_rcu.max(1.0) * 1000.0);
    // A tick cleans for `CLEAN_FOR_MS`; the wake a minute on goes on.
    let slice = pulse_sweep::CLEAN_FOR_MS as f64;
    let visits = (work / slice).ceil().max(1.0);
    t.cleaned_ms = t.handover_ms + work + (visits - 1.0) * (WAKE_WAIT_MS - slice);
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
            per_kb_ms: 0.0,
            tenant_id_bytes: 36,
            one_off: false,
            server: ServerTime::DYNAMODB,
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
        let server = ServerTime { request_ms: 1.0, ..ServerTime::DYNAMODB };
        let serial = burst(&BurstInput { server, ..burst_of(800, 800) });
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
    fn a_request_takes_its_bytes_time_and_the_sizes_are_the_wires() {
        // The sizes at the benchmark's 6-byte tenant ids, as `make bench BENCH=burst` read them
        // off the wire: a full member page answered 187,280 bytes, a BatchGetItem of 100 tenants
        // 2,316 sent and 18,463 answered, a page's transaction of 1,000 fires 12,406 sent, a page
        // of 200 distinct groups' 21,854 to 22,945, 25 successors' puts 8,765, 25 deletes 3,135,
        // a due page of 200 records about 75,000 answered.
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 0.05;
        assert!(near(size::member_page(1000, 6.0).got, 187_280.0));
        assert!(near(size::tenants(100, 6.0).sent, 2_316.0) && near(size::tenants(100, 6.0).got, 18_463.0));
        assert!(near(size::transaction(1, 1000, 6.0).sent, 12_406.0));
        assert!(near(size::transaction(200, 200, 6.0).sent, 22_400.0));
        assert!(near(size::puts(25).sent, 8_765.0) && near(size::deletes(25).sent, 3_135.0));
        assert!(near(size::due_page(200).got, 75_000.0));
        // One group of a million: every full page's Query answers 212 KB at 36-byte ids, 21 ms
        // more at 0.1 ms a kilobyte; its BatchGetItems and transaction more again.
        let flat = burst(&burst_of(1_000_000, 1));
        let sized = burst(&BurstInput { per_kb_ms: PER_KB_MS, ..burst_of(1_000_000, 1) });
        let page = size::member_page(1000, 36.0);
        assert!((page.kb() - 212.4).abs() < 0.5, "{}", page.kb());
        assert!(sized.requests_ms > flat.requests_ms + 999.0 * PER_KB_MS * page.kb(), "{sized:?}");
        assert_eq!(sized.requests, flat.requests, "the same requests, each longer");
        // A server's own time: every request's, a Query's extra, its bytes'.
        let q = ServerTime { query_ms: 10.0, ..ServerTime::DYNAMODB };
        let with_queries = burst(&BurstInput { server: q, ..burst_of(800, 800) });
        let queries = 8 + 8 + 800 + 8; // first records, due pages, member pages, earliest records
        assert!(
            (with_queries.requests_ms - burst(&burst_of(800, 800)).requests_ms - queries as f64 * 10.0).abs() < 1e-6
        );
        let w = Wire { sent: 2048.0, got: 1024.0 };
        let per_kb = ServerTime { sent_per_kb_ms: 1.0, got_per_kb_ms: 3.0, ..ServerTime::DYNAMODB };
        assert_eq!(per_kb.of(w, false), 2.0 + 3.0);
    }

    #[test]
    fn a_one_off_campaign_of_a_million_is_fixed_at_its_first_page_paged_like_a_recurring_group_and_cleaned_after() {
        assert_eq!(pulse_sweep::ONE_OFF_PAGE, 40, "the figures below");
        let m = burst(&BurstInput { one_off: true, ..burst_of(1_000_000, 1) });
        // Its first page of 40 after its head's joins (a Query and a BatchGet of their tenants),
        // its head read again and the group fixed (a transaction), then from its start 1,000
        // full pages (its head's leaves read, a Query, 10 BatchGets, a transaction each) and an
        // empty one (the head, a Query and a
        // transaction, its record replaced by its cleaning record in it): a recurring group's
        // requests, a head read a page, and a few.
        let daily = burst(&burst_of(1_000_000, 1));
        assert_eq!(m.member_pages, 1_002);
        assert_eq!(m.requests, 8 + 2 + 1 + (1 + 1 + 1 + 1) + 1 + 1_000 * 13 + (1 + 1 + 1) + 3);
        assert_eq!(m.requests - daily.requests, 1_004, "a head read a page, the fix, its read, and the first page");
        // Nothing deleted in the hand-over: no member partition's floor, its write units its
        // record's; handed over within five minutes, a quarter slower than a recurring group when
        // the requests bind (a round more a page: its head read before it).
        assert_eq!(m.member_floor_ms, 0.0);
        assert!((m.write_units - DUE_WCU_PER_GROUP).abs() < 1e-6, "{m:?}");
        assert!(m.handover_ms <= daily.handover_ms * 1.3 && m.handover_ms < 300_000.0, "{m:?} {daily:?}");
        // Cleaned after: a unit a member in its one member partition, 1,000 s at 1,000 a second,
        // 45 s of each minute: 23 visits, 1,330 s after the hand-over; its member pages' reads.
        assert!((m.clean_write_units - 2_000_000.0).abs() < 1e-6, "{m:?}");
        assert!((m.clean_read_units - 1_000.0 * size::member_page(1000, 36.0).got / 4096.0).abs() < 1e-6);
        assert!((m.cleaned_ms - m.handover_ms - (1_000_000.0 + 22.0 * 15_000.0)).abs() < 1e-3, "{m:?}");
        // Distinct one-offs (a group each): fired and retired in one transaction each, their
        // deletes in it; nothing to clean after.
        let each = burst(&BurstInput { one_off: true, ..burst_of(800, 800) });
        assert_eq!((each.cleaned_ms, each.clean_write_units), (0.0, 0.0));
        assert!((each.write_units - 800.0 * (DUE_WCU_PER_GROUP + 4.0)).abs() < 1e-6, "{each:?}");
    }
}
