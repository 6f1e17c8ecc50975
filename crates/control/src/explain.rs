//! `tenants.explain`: what a support engineer asks first when a tenant's summary or nudge did not
//! arrive, answered from what the tables hold, read by key only (the tenant's item, the sweep's
//! state item, the tenant's schedule partition, its partition of the queue's trouble index and the
//! head of each ready shard): no scan, whatever the stack's size.
//!
//! [`explain`] decides the answer from those reads with no I/O; [`run`] makes the reads.

use tickwork::calendar::{self, Period};
use tickwork::queue::{TroubleUnit, Troubles};
use tickwork::schedules::Schedule;
use tickwork::tenants::{Position, Tenant};
use tickwork::watermark::WatermarkState;

use crate::answer::Outcome;
use crate::deps::Deps;
use crate::explanation::{
    CalendarView, Explanation, GrainPeriod, QueueView, ScheduleNext, SweepView, TroubleView, NEXT_FIRES, TROUBLES_SHOWN,
};
use crate::refuse::{self, Ran};

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default()
}

/// The queue's oldest ready item older than this is a finding: delivery is behind.
const BEHIND_S: i64 = 300;

/// What the queue holds of a tenant's: its units that went wrong (`q.troubles`, newest first),
/// the items of several tenants' units still retrying or dead (`q.shared`: the tenant's may be
/// among them) and the queue's oldest ready instant, at `now_ms`, with findings. Pure.
pub fn queue_view(q: &QueueReads, now_ms: i64, findings: &mut Vec<String>) -> QueueView {
    let troubles = &q.troubles.units[..];
    fn state(u: &TroubleUnit) -> &str {
        match u.state.as_str() {
            "pending" => "retrying",
            "claimed" => "running",
            "done" => "recovered",
            other => other,
        }
    }
    let count = |s: &str| troubles.iter().filter(|u| state(u) == s).count();
    for u in troubles.iter().filter(|u| u.state == "dead") {
        findings.push(format!(
            "a {} unit of it is dead-lettered after {} attempts ({}): `tickctl dead-letters retry {}` runs it again",
            u.kind, u.attempts, u.last_error, u.id
        ));
    }
    for u in troubles.iter().filter(|u| u.state == "pending") {
        findings.push(format!(
            "a {} unit of it retries at {} after {} attempts ({})",
            u.kind,
            u.visible_at_ms.map(rfc3339).unwrap_or_default(),
            u.attempts,
            u.last_error
        ));
    }
    let live = |u: &&TroubleUnit| u.state == "pending" || u.state == "claimed";
    let shared_retrying = q.shared.units.iter().filter(live).count();
    if shared_retrying > 0 {
        findings.push(format!(
            "{shared_retrying} items of several tenants' units are retrying (a target failing for many tenants): a unit of it may be among them"
        ));
    }
    // Everything made ready before the oldest ready item has left the ready queue, and before
    // the oldest shared item still retrying, which holds units of tenants not named.
    let oldest_shared = q.shared.units.iter().filter(live).map(|u| u.created_at_ms).min();
    let waiting = [q.oldest_ready, oldest_shared].into_iter().flatten().min();
    let age_s = q.oldest_ready.map_or(0, |o| (now_ms - o).max(0) / 1000);
    if age_s > BEHIND_S {
        findings.push(format!(
            "the queue's oldest ready work has waited {} min: delivery is behind for every tenant (runbook: QueueLagAlarm)",
            age_s / 60
        ));
    }
    QueueView {
        retrying: count("retrying") + count("running"),
        dead: count("dead"),
        recovered: count("recovered"),
        troubles: troubles
            .iter()
            .take(TROUBLES_SHOWN)
            .map(|u| TroubleView {
                id: u.id.clone(),
                kind: u.kind.clone(),
                state: state(u).to_string(),
                attempts: u.attempts,
                last_error: u.last_error.clone(),
                retry_at: u.visible_at_ms.filter(|_| u.state == "pending").map(rfc3339),
                ended_at: u.failed_at_ms.filter(|_| u.state == "dead").or(u.finished_at_ms).map(rfc3339),
            })
            .collect(),
        last_recovered: troubles.iter().filter_map(|u| u.finished_at_ms).max().map(rfc3339),
        delivered_before: rfc3339(waiting.map_or(now_ms, |o| o.min(now_ms))),
        oldest_ready_age_s: age_s,
        shared_retrying,
        more: q.troubles.more || q.shared.more,
    }
}

/// What the queue holds of a tenant's ([`queue_view`]'s inputs).
#[derive(Debug, Clone, Default)]
pub struct QueueReads {
    /// Its units that went wrong, newest first.
    pub troubles: Troubles,
    /// Items of several tenants' units still retrying or dead, newest first.
    pub shared: Troubles,
    /// The queue's oldest ready instant.
    pub oldest_ready: Option<i64>,
}

/// The explanation of `t` from the sweep's `state`, its `schedules` and what the queue holds of
/// its, at `now_ms`. Pure.
pub fn explain(
    t: &Tenant,
    state: &WatermarkState,
    schedules: &[Schedule],
    queue: &QueueReads,
    grains: tickwork::grains::Grains,
    now_ms: i64,
) -> Explanation {
    let mut findings = Vec::new();
    if !t.active {
        findings.push("suspended: nothing is pulsed or fired for it until tenants.resume".to_string());
    }
    if state.paused {
        findings.push(format!(
            "the sweep is paused{}: nothing is pulsed or fired for any tenant (tickctl resume)",
            state.paused_reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ));
    }
    let registered = state.groups.contains(&t.zone);
    if !registered {
        findings.push(format!(
            "its zone {} is not registered with the sweep: it is never visited (add it through tenants.add)",
            t.zone
        ));
    }
    let zone_through = state.marks.get(&t.zone).cloned();
    let zone_waiting = state.wake.get(&t.zone).is_some_and(|w| w.generation.is_some() || !w.listed.is_empty());
    let tz = calendar::zone(&t.zone);
    let through: Option<jiff::civil::Date> = match t.pos {
        Position::Follows => zone_through.as_deref().and_then(|d| d.parse().ok()),
        Position::Fresh => None,
        Position::Through(d) => Some(d),
    };
    if t.pos == Position::Fresh {
        findings.push(
            "not visited yet: its first pulses come at its zone's next local midnight (or the next tick, when woken)"
                .into(),
        );
    }
    let (mut last, mut next) = (Vec::new(), Vec::new());
    if let Ok(tz) = &tz {
        // Only the grains the sweep pulses: a grain left out is neither pulsed nor owed.
        for g in grains.iter() {
            let first_owed = t.since_ms.and_then(|s| calendar::first_owed(g, s, tz).ok());
            let next_p = match through {
                Some(d) => Period::containing(g, d).ok(),
                None => first_owed
                    .or_else(|| calendar::local_date(now_ms, tz).ok().and_then(|d| Period::containing(g, d).ok())),
            };
            let shown = |p: Period| -> Option<GrainPeriod> {
                Some(GrainPeriod { grain: g.name().into(), period: p.id(), ends_at: rfc3339(p.end_ms(tz).ok()?) })
            };
            if let Some(p) = through.and_then(|d| Period::containing(g, d).ok()).and_then(|p| p.pred().ok()) {
                // Pulsed only if it was owed: it ends after the tenant is owed from.
                let owed = match (t.since_ms, p.end_ms(tz)) {
                    (Some(s), Ok(end)) => end > s,
                    _ => true,
                };
                if owed {
                    last.extend(shown(p));
                }
            }
            if let Some(p) = next_p {
                next.extend(shown(p));
            }
        }
        if let Some(first_day) = next.iter().find(|p| p.grain == "day") {
            if t.active && !state.paused && first_day.ends_at.as_str() < rfc3339(now_ms - 2 * 3_600_000).as_str() {
                findings.push(format!(
                    "its next day pulse ({}) ended at {}, more than two hours ago: the sweep is behind for its zone",
                    first_day.period, first_day.ends_at
                ));
            }
        }
    } else {
        findings.push(format!("its zone `{}` is not in the bundled tz database", t.zone));
    }
    let schedules: Vec<ScheduleNext> = schedules
        .iter()
        .map(|s| {
            let next =
                crate::schedules::coming(std::slice::from_ref(s), &t.zone, now_ms, NEXT_FIRES).unwrap_or_default();
            if s.paused {
                findings.push(format!("schedule `{}` is paused", s.def.name));
            }
            ScheduleNext { schedule: crate::schedules::view(s), next }
        })
        .collect();
    let queue = queue_view(queue, now_ms, &mut findings);
    Explanation {
        tenant: crate::tenants::view(t),
        sweep: SweepView {
            paused: state.paused,
            paused_reason: state.paused_reason.clone(),
            zone_registered: registered,
            zone_through,
            zone_waiting,
        },
        calendar: CalendarView { through: through.map(|d| d.to_string()), last, next },
        schedules,
        queue,
        findings,
    }
}

/// `tenants.explain`: reads by key (the tenant, the sweep's state item, the tenant's schedules, its
/// partition of the queue's trouble index, the head of each ready shard), then [`explain`].
pub async fn run(deps: &Deps, id: &str) -> Ran {
    let t = match crate::tenants::stored(deps, id).await? {
        Ok(t) => t,
        Err(r) => return Ok(Err(r)),
    };
    let state = match deps.marks.read_strong(&deps.job).await {
        Ok(s) => s,
        Err(e) => return Ok(Err(refuse::db(e)?)),
    };
    let schedules = match deps.schedules.list(id).await {
        Ok(s) => s,
        Err(e) => return Ok(Err(refuse::schedule(e, "id")?)),
    };
    let reads = async {
        Ok::<_, tickwork::queue::QueueError>(QueueReads {
            troubles: deps.queue.troubles(id).await?,
            shared: deps.queue.troubles(tickwork::queue::SEVERAL).await?,
            oldest_ready: deps.queue.oldest_ready().await?,
        })
    };
    let queue = match reads.await {
        Ok(q) => q,
        Err(e) => return Ok(Err(refuse::queue(e)?)),
    };
    let e = explain(&t, &state, &schedules, &queue, deps.grains, deps.clock.now_ms());
    Ok(Ok(Outcome::Explain(Box::new(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    fn state(zone: &str, through: Option<&str>) -> WatermarkState {
        let mut s = WatermarkState::default();
        s.groups.insert(zone.into());
        if let Some(d) = through {
            s.marks.insert(zone.into(), d.into());
        }
        s
    }

    #[test]
    fn a_tenant_following_its_zone_was_pulsed_through_the_zone_date() {
        let mut t = Tenant::new("t1", "Europe/Berlin");
        t.pos = Position::Follows;
        t.since_ms = Some(ms("2026-10-15T10:00:00Z"));
        let e = explain(
            &t,
            &state("Europe/Berlin", Some("2026-12-02")),
            &[],
            &QueueReads::default(),
            tickwork::grains::Grains::ALL,
            ms("2026-12-02T09:00:00Z"),
        );
        assert_eq!(e.calendar.through.as_deref(), Some("2026-12-02"));
        let get = |v: &[GrainPeriod], g: &str| v.iter().find(|p| p.grain == g).map(|p| p.period.clone());
        assert_eq!(get(&e.calendar.last, "day").as_deref(), Some("2026-12-01"));
        assert_eq!(get(&e.calendar.last, "month").as_deref(), Some("2026-11"));
        assert_eq!(get(&e.calendar.next, "day").as_deref(), Some("2026-12-02"));
        assert_eq!(e.calendar.next[0].ends_at, "2026-12-02T23:00:00Z", "Berlin's midnight");
        assert_eq!(get(&e.calendar.last, "year"), None, "2025 ended before it was owed");
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        // A sweep set to days shows days alone: the other grains are not owed.
        let days = tickwork::grains::Grains::parse("day").unwrap();
        let e = explain(
            &t,
            &state("Europe/Berlin", Some("2026-12-02")),
            &[],
            &QueueReads::default(),
            days,
            ms("2026-12-02T09:00:00Z"),
        );
        let grains: Vec<&str> = e.calendar.last.iter().chain(&e.calendar.next).map(|p| p.grain.as_str()).collect();
        assert_eq!(grains, ["day", "day"]);
    }

    #[test]
    fn what_would_keep_a_tenant_from_its_pulses_is_said() {
        let mut t = Tenant::new("t1", "Asia/Tokyo");
        t.active = false;
        let mut s = state("Europe/Berlin", Some("2026-12-02"));
        s.paused = true;
        s.paused_reason = Some("incident 7".into());
        let e = explain(&t, &s, &[], &QueueReads::default(), tickwork::grains::Grains::ALL, ms("2026-12-02T09:00:00Z"));
        let all = e.findings.join("\n");
        assert!(all.contains("suspended"), "{all}");
        assert!(all.contains("paused (incident 7)"), "{all}");
        assert!(all.contains("not registered"), "{all}");
        assert!(all.contains("not visited yet"), "{all}");
        assert!(!e.sweep.zone_registered);
    }

    #[test]
    fn a_zone_far_behind_is_a_finding() {
        let t = Tenant { pos: Position::Follows, ..Tenant::new("t1", "UTC") };
        let e = explain(
            &t,
            &state("UTC", Some("2026-11-28")),
            &[],
            &QueueReads::default(),
            tickwork::grains::Grains::ALL,
            ms("2026-12-02T09:00:00Z"),
        );
        assert!(e.findings.iter().any(|f| f.contains("behind")), "{:?}", e.findings);
    }

    fn unit(id: &str, state: &str, visible: Option<&str>, failed: Option<&str>, finished: Option<&str>) -> TroubleUnit {
        TroubleUnit {
            id: id.into(),
            kind: "sched".into(),
            state: state.into(),
            attempts: 2,
            last_error: "boom".into(),
            created_at_ms: ms("2026-12-02T08:00:00Z"),
            visible_at_ms: visible.map(ms),
            failed_at_ms: failed.map(ms),
            finished_at_ms: finished.map(ms),
        }
    }

    #[test]
    fn units_that_went_wrong_are_counted_shown_and_found() {
        let now = ms("2026-12-02T09:00:00Z");
        let troubles = [
            unit("r", "pending", Some("2026-12-02T09:00:40Z"), None, None),
            unit("d", "dead", None, Some("2026-12-02T08:30:00Z"), None),
            unit("ok", "done", None, None, Some("2026-12-02T08:10:00Z")),
        ];
        let mut findings = Vec::new();
        let reads = QueueReads {
            troubles: Troubles { units: troubles.to_vec(), more: false },
            oldest_ready: Some(ms("2026-12-02T08:59:30Z")),
            ..Default::default()
        };
        let q = queue_view(&reads, now, &mut findings);
        assert_eq!((q.retrying, q.dead, q.recovered), (1, 1, 1));
        assert_eq!(q.troubles.iter().map(|u| u.state.as_str()).collect::<Vec<_>>(), ["retrying", "dead", "recovered"]);
        assert_eq!(q.troubles[0].retry_at.as_deref(), Some("2026-12-02T09:00:40Z"));
        assert_eq!(q.troubles[1].ended_at.as_deref(), Some("2026-12-02T08:30:00Z"));
        assert_eq!(q.last_recovered.as_deref(), Some("2026-12-02T08:10:00Z"));
        assert_eq!((q.delivered_before.as_str(), q.oldest_ready_age_s), ("2026-12-02T08:59:30Z", 30));
        let all = findings.join("\n");
        assert!(all.contains("dead-lettered after 2 attempts (boom): `tickctl dead-letters retry d`"), "{all}");
        assert!(all.contains("retries at 2026-12-02T09:00:40Z"), "{all}");
        assert!(!all.contains("behind"), "30 s is not behind: {all}");
    }

    #[test]
    fn an_empty_queue_delivered_everything_until_now_and_an_old_one_is_behind() {
        let now = ms("2026-12-02T09:00:00Z");
        let mut findings = Vec::new();
        let q = queue_view(&QueueReads::default(), now, &mut findings);
        assert_eq!((q.delivered_before.as_str(), q.oldest_ready_age_s), ("2026-12-02T09:00:00Z", 0));
        assert!(findings.is_empty() && q.troubles.is_empty() && q.last_recovered.is_none());
        let old = QueueReads { oldest_ready: Some(ms("2026-12-02T08:40:00Z")), ..Default::default() };
        let q = queue_view(&old, now, &mut findings);
        assert_eq!(q.oldest_ready_age_s, 1200);
        assert!(findings[0].contains("waited 20 min: delivery is behind"), "{findings:?}");
        let many: Vec<TroubleUnit> = (0..30).map(|i| unit(&format!("d{i}"), "dead", None, None, None)).collect();
        let reads = QueueReads { troubles: Troubles { units: many, more: true }, ..Default::default() };
        let q = queue_view(&reads, now, &mut Vec::new());
        assert_eq!(
            (q.dead, q.troubles.len(), q.more),
            (30, TROUBLES_SHOWN, true),
            "all read counted, the newest shown"
        );
    }

    #[test]
    fn items_of_several_tenants_retrying_hold_back_what_is_delivered_and_are_a_finding() {
        let now = ms("2026-12-02T09:00:00Z");
        let mut retrying = unit("s1", "pending", Some("2026-12-02T09:01:00Z"), None, None);
        retrying.created_at_ms = ms("2026-12-02T08:00:00Z");
        let reads = QueueReads {
            shared: Troubles { units: vec![retrying], more: false },
            oldest_ready: Some(ms("2026-12-02T08:59:00Z")),
            ..Default::default()
        };
        let mut findings = Vec::new();
        let q = queue_view(&reads, now, &mut findings);
        assert_eq!(q.shared_retrying, 1);
        assert_eq!(q.delivered_before, "2026-12-02T08:00:00Z", "the retrying item's units were made before it");
        assert!(findings[0].starts_with("1 items of several tenants' units are retrying"), "{findings:?}");
    }
}
