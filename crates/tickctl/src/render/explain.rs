//! `tickctl tenants explain`'s text: the control function's explanation, read top to bottom the
//! way a support engineer asks (what it is, whether the sweep reaches it, what it got, what comes,
//! and what looks wrong). `--json` prints the control function's answer itself.

use std::fmt::Write;

use control::explanation::Explanation;

/// The explanation as lines of text. Pure.
pub fn explanation(e: &Explanation) -> String {
    let mut s = String::new();
    let t = &e.tenant;
    let owed = t.owed_from.as_deref().map(|o| format!(", owed from {o}")).unwrap_or_default();
    let _ = writeln!(s, "tenant {} in {}: {}{owed}, position {}", t.id, t.zone, t.status, t.position);
    let w = &e.sweep;
    let _ = writeln!(
        s,
        "sweep: {}; zone {}registered{}{}",
        if w.paused {
            format!("PAUSED ({})", w.paused_reason.as_deref().unwrap_or("no reason given"))
        } else {
            "running".into()
        },
        if w.zone_registered { "" } else { "NOT " },
        w.zone_through.as_deref().map(|d| format!(", pulsed through {d}")).unwrap_or_default(),
        if w.zone_waiting { ", tenants waiting for the next tick" } else { "" },
    );
    let c = &e.calendar;
    let _ = writeln!(s, "calendar: through {}", c.through.as_deref().unwrap_or("(not visited yet)"));
    for (label, list) in [("last", &c.last), ("next", &c.next)] {
        for p in list {
            let _ = writeln!(s, "  {label} {:<7} {} (ends {})", p.grain, p.period, p.ends_at);
        }
    }
    if e.schedules.is_empty() {
        let _ = writeln!(s, "schedules: none");
    }
    for n in &e.schedules {
        let d = &n.schedule;
        let state = if d.paused { " PAUSED" } else { "" };
        let kind = if d.one_off { "timer" } else { "schedule" };
        let _ = writeln!(s, "{kind} {} `{}`{state}", d.name, d.spec);
        if let Some(p) = &d.payload {
            let _ = writeln!(s, "  payload {p}");
        }
        for f in &n.next {
            let _ = writeln!(s, "  next {} (due {})", f.occurrence, f.due);
        }
    }
    let q = &e.queue;
    let _ = writeln!(
        s,
        "queue: {}{} retrying, {} dead, {} recovered{}; delivered before {}{}",
        if q.more { "at least " } else { "" },
        q.retrying,
        q.dead,
        q.recovered,
        q.last_recovered.as_deref().map(|t| format!(" (last {t})")).unwrap_or_default(),
        q.delivered_before,
        if q.oldest_ready_age_s > 0 {
            format!(" (oldest ready waited {} s)", q.oldest_ready_age_s)
        } else {
            String::new()
        },
    );
    if q.shared_retrying > 0 {
        let _ = writeln!(s, "  and {} items of several tenants' units retrying", q.shared_retrying);
    }
    for u in &q.troubles {
        let when = u.retry_at.as_deref().or(u.ended_at.as_deref()).unwrap_or("-");
        let _ =
            writeln!(s, "  {:<9} {} {} {when} after {} attempts: {}", u.state, u.kind, u.id, u.attempts, u.last_error);
    }
    for f in &e.findings {
        let _ = writeln!(s, "! {f}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::explanation::{CalendarView, GrainPeriod, QueueView, ScheduleNext, SweepView, TroubleView};
    use control::views::{Fire, ScheduleView, TenantView};

    #[test]
    fn every_part_of_the_explanation_is_shown_and_what_is_wrong_stands_out() {
        let e = Explanation {
            tenant: TenantView {
                id: "acme".into(),
                zone: "Europe/Berlin".into(),
                status: "suspended".into(),
                owed_from: Some("2026-12-01T00:00:00Z".into()),
                position: "follows".into(),
            },
            sweep: SweepView {
                paused: true,
                paused_reason: Some("migration".into()),
                zone_registered: false,
                zone_through: Some("2026-12-02".into()),
                zone_waiting: true,
            },
            calendar: CalendarView {
                through: Some("2026-12-02".into()),
                last: vec![GrainPeriod { grain: "day".into(), period: "2026-12-01".into(), ends_at: "T1".into() }],
                next: vec![GrainPeriod { grain: "day".into(), period: "2026-12-02".into(), ends_at: "T2".into() }],
            },
            schedules: vec![ScheduleNext {
                schedule: ScheduleView {
                    tenant: "acme".into(),
                    name: "call".into(),
                    spec: "at 2026-12-24T09:00".into(),
                    spread_min: 0,
                    gap: "shift".into(),
                    fold: "first".into(),
                    paused: true,
                    one_off: true,
                    payload: Some(serde_json::json!({"plan": "pro"})),
                },
                next: vec![Fire { name: "call".into(), occurrence: "O".into(), instant: "I".into(), due: "D".into() }],
            }],
            queue: QueueView {
                retrying: 1,
                dead: 0,
                recovered: 2,
                troubles: vec![TroubleView {
                    id: "sched#x#rest#1#w#0".into(),
                    kind: "sched".into(),
                    state: "retrying".into(),
                    attempts: 1,
                    last_error: "boom".into(),
                    retry_at: Some("R".into()),
                    ended_at: None,
                }],
                last_recovered: Some("L".into()),
                delivered_before: "B".into(),
                oldest_ready_age_s: 12,
                shared_retrying: 2,
                more: false,
            },
            findings: vec!["suspended: nothing is pulsed".into()],
        };
        let text = explanation(&e);
        for want in [
            "tenant acme in Europe/Berlin: suspended, owed from 2026-12-01T00:00:00Z, position follows",
            "sweep: PAUSED (migration); zone NOT registered, pulsed through 2026-12-02, tenants waiting",
            "calendar: through 2026-12-02",
            "  last day     2026-12-01 (ends T1)",
            "  next day     2026-12-02 (ends T2)",
            "timer call `at 2026-12-24T09:00` PAUSED",
            "  payload {\"plan\":\"pro\"}",
            "  next O (due D)",
            "queue: 1 retrying, 0 dead, 2 recovered (last L); delivered before B (oldest ready waited 12 s)",
            "  and 2 items of several tenants' units retrying",
            "  retrying  sched sched#x#rest#1#w#0 R after 1 attempts: boom",
            "! suspended: nothing is pulsed",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }
}
