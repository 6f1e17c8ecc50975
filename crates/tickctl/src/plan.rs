//! `tickctl plan`: the pulse sweep's next boundaries per zone group, the tenants each touches and
//! the requests those ticks will make. Reads only.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use tickwork_cost::cost;

/// The grains whose period ends when local day `d` begins: the day always, the week on a Monday,
/// the month on the 1st, the quarter and year on their first days.
pub fn grains_starting(d: jiff::civil::Date) -> Vec<String> {
    let mut grains = vec!["day".to_string()];
    if d.weekday() == jiff::civil::Weekday::Monday {
        grains.push("week".into());
    }
    if d.day() == 1 {
        grains.push("month".into());
        if matches!(d.month(), 1 | 4 | 7 | 10) {
            grains.push("quarter".into());
        }
        if d.month() == 1 {
            grains.push("year".into());
        }
    }
    grains
}

/// When a zone group is next due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    /// Due already at the time asked about (its watermark is behind its local date).
    pub due_now: bool,
    /// The instant: the time asked about when due now, else the first instant of the next local day.
    pub at: jiff::Timestamp,
    /// The local day that boundary begins (its grains end there).
    pub new_day: jiff::civil::Date,
}

/// The next boundary of a group in `tz` with watermark `mark`, as of `at_ms`: the sweep's due rule
/// ([`pulse_sweep::group_due`]) and the zone's next local midnight (or, where a DST change skips
/// midnight, the first instant of that day).
pub fn next_boundary(tz: &jiff::tz::TimeZone, at_ms: i64, mark: Option<&str>) -> Result<Boundary> {
    let at = jiff::Timestamp::from_millisecond(at_ms)?;
    let local = tickwork::calendar::local_date(at_ms, tz)?;
    if pulse_sweep::group_due(mark, &local.to_string()) {
        return Ok(Boundary { due_now: true, at, new_day: local });
    }
    let next = local.tomorrow()?;
    Ok(Boundary { due_now: false, at: next.to_zoned(tz.clone())?.start_of_day()?.timestamp(), new_day: next })
}

/// One zone group in `plan`.
#[derive(Debug, Serialize)]
pub struct GroupPlan {
    /// IANA zone.
    pub zone: String,
    /// The group's local date at `at`.
    pub local_date: String,
    /// The watermark: the local date the sweep last completed.
    pub watermark: Option<String>,
    /// Due at `at` (watermark behind the local date): the next tick does it.
    pub due_now: bool,
    /// When the group is next due (UTC): `at` when due now, else its next local midnight.
    pub next_boundary: String,
    /// The grains whose period ends at that boundary.
    pub grains: Vec<String>,
    /// The first period of each grain a tenant added at `at` is owed (the periods that end after
    /// it is added; `tenants add --owed-from` reaches further back).
    pub new_tenants_owed: Vec<String>,
    /// Active tenants (counted on the zone index).
    pub tenants: u64,
    /// Tenant pages the sweep will read.
    pub pages: u64,
    /// Read requests the group adds to its tick.
    pub reads: u64,
    /// Write requests the group adds to its tick.
    pub writes: u64,
}

/// One upcoming tick that has work.
#[derive(Debug, Serialize)]
pub struct TickPlan {
    /// When (UTC).
    pub at: String,
    /// Zone groups due then.
    pub groups: Vec<String>,
    /// Read requests of that tick (watermark, checkpoints, pages, cursors).
    pub reads: u64,
    /// Write requests (lease, page checkpoints, tenant transactions, watermarks).
    pub writes: u64,
}

/// What `plan` shows.
#[derive(Debug, Serialize)]
pub struct Plan {
    /// Job.
    pub job: String,
    /// The time planned for (UTC).
    pub at: String,
    /// Paused: every tick is 1 read and does nothing.
    pub paused: bool,
    /// An idle tick: (reads, writes).
    pub idle_tick: (u64, u64),
    /// Per zone group.
    pub groups: Vec<GroupPlan>,
    /// The ticks with work, in order.
    pub ticks: Vec<TickPlan>,
    /// Requests `plan` itself made (one watermark read, count queries).
    pub plan_requests: u64,
}

/// The pulse sweep's next boundaries per zone group at `at_ms`, the tenants each touches and the
/// requests those ticks will make. Reads the watermark item and counts tenants; writes nothing.
pub async fn plan(deps: &pulse_sweep::Deps, job: &str, at_ms: i64, mut progress: impl FnMut(u64, u64)) -> Result<Plan> {
    use tickwork::calendar;
    anyhow::ensure!(
        job == deps.cfg.job,
        "`plan` knows the pulse sweep (job `{}`); `{job}` is not it (see `tickctl status` for other jobs)",
        deps.cfg.job
    );
    let state = deps.marks.read(job).await?;
    let tenants = &deps.tenants;
    let page_size = deps.cfg.page_size as usize;
    let mut groups = Vec::new();
    let total = (state.groups.len() as u64) * u64::from(tenants.shards());
    let mut done = 0;
    for zone in &state.groups {
        let tz = calendar::zone(zone)?;
        let local = calendar::local_date(at_ms, &tz)?;
        let mark = state.marks.get(zone).cloned();
        let b = next_boundary(&tz, at_ms, mark.as_deref())?;
        // Only the grains the sweep pulses (`TICKWORK_PULSE_GRAINS`).
        let grains: Vec<String> =
            grains_starting(b.new_day).into_iter().filter(|g| deps.cfg.grains.iter().any(|p| p.name() == g)).collect();
        let mut per_shard = Vec::new();
        for k in 0..tenants.shards() {
            per_shard.push(tenants.count_zone_shard(zone, k).await? as usize);
            done += 1;
            progress(done, total);
        }
        // Units are not shown here (item sizes unknown without reading them); requests are exact
        // for tenants that follow their group (a first sight or a bulk import adds position writes).
        let (reads, writes) = cost::run_requests(&per_shard, page_size, mark.is_none())?;
        groups.push(GroupPlan {
            zone: zone.clone(),
            local_date: local.to_string(),
            watermark: mark,
            due_now: b.due_now,
            next_boundary: b.at.to_string(),
            grains,
            new_tenants_owed: deps
                .cfg
                .grains
                .iter()
                .map(|g| Ok(calendar::first_owed(g, at_ms, &tz)?.id()))
                .collect::<Result<_>>()?,
            tenants: per_shard.iter().map(|n| *n as u64).sum(),
            pages: cost::pages(&per_shard, page_size),
            reads,
            writes,
        });
    }
    // Ticks: groups due at the same instant are one invocation. (A real tick lands at the first
    // schedule time at or after the boundary.)
    let mut by_time: BTreeMap<String, Vec<&GroupPlan>> = BTreeMap::new();
    for g in &groups {
        by_time.entry(g.next_boundary.clone()).or_default().push(g);
    }
    let (tr, tw) = cost::reads_writes(&cost::tick_calls(true));
    let ticks = by_time
        .into_iter()
        .map(|(at, gs)| TickPlan {
            at,
            groups: gs.iter().map(|g| g.zone.clone()).collect(),
            reads: tr + gs.iter().map(|g| g.reads).sum::<u64>(),
            writes: tw + gs.iter().map(|g| g.writes).sum::<u64>(),
        })
        .collect();
    let (r, w) = deps.db.meter().read_write_requests();
    Ok(Plan {
        job: job.to_string(),
        at: jiff::Timestamp::from_millisecond(at_ms)?.to_string(),
        paused: state.paused,
        idle_tick: cost::reads_writes(&cost::tick_calls(false)),
        groups,
        ticks,
        plan_requests: r + w,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn next_boundary_is_the_next_local_midnight_or_now() {
        let tz = |n: &str| tickwork::calendar::zone(n).unwrap();
        let at = ms("2026-03-28T14:00:00Z");
        // Done for the 28th: Tokyo's 29th starts at 15:00Z, Berlin's (CET) at 23:00Z.
        let b = next_boundary(&tz("Asia/Tokyo"), at, Some("2026-03-28")).unwrap();
        assert_eq!(
            (b.due_now, b.at.to_string(), b.new_day.to_string()),
            (false, "2026-03-28T15:00:00Z".into(), "2026-03-29".into())
        );
        let b = next_boundary(&tz("Europe/Berlin"), at, Some("2026-03-28")).unwrap();
        assert_eq!(b.at.to_string(), "2026-03-28T23:00:00Z");
        // Berlin after the change to summer time: the 30th starts at 22:00Z.
        let b = next_boundary(&tz("Europe/Berlin"), ms("2026-03-29T12:00:00Z"), Some("2026-03-29")).unwrap();
        assert_eq!(b.at.to_string(), "2026-03-29T22:00:00Z");
        // Behind its local date, or never done: due at the time asked about.
        for mark in [Some("2026-03-27"), None] {
            let b = next_boundary(&tz("Asia/Tokyo"), at, mark).unwrap();
            assert_eq!((b.due_now, b.at.as_millisecond(), b.new_day.to_string()), (true, at, "2026-03-28".into()));
        }
        // Santiago springs forward at local midnight (2026-09-06 00:00 → 01:00): the boundary is
        // the day's first instant, which is in the new day, and a millisecond before it is not.
        let santiago = tz("America/Santiago");
        let b = next_boundary(&santiago, ms("2026-09-05T12:00:00Z"), Some("2026-09-05")).unwrap();
        let day = |t: i64| tickwork::calendar::local_date(t, &santiago).unwrap().to_string();
        assert_eq!(
            (day(b.at.as_millisecond()), day(b.at.as_millisecond() - 1)),
            ("2026-09-06".into(), "2026-09-05".into())
        );
    }

    #[test]
    fn grains_starting_a_day() {
        let d = |s: &str| s.parse::<jiff::civil::Date>().unwrap();
        assert_eq!(grains_starting(d("2026-03-29")), ["day"]); // a Sunday
        assert_eq!(grains_starting(d("2026-03-30")), ["day", "week"]);
        assert_eq!(grains_starting(d("2026-04-01")), ["day", "month", "quarter"]);
        assert_eq!(grains_starting(d("2026-05-01")), ["day", "month"]);
        assert_eq!(grains_starting(d("2029-01-01")), ["day", "week", "month", "quarter", "year"]);
    }
}
