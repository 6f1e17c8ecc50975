//! What is due at a tick, read from the state item alone (the idle tick's one read): zone groups
//! whose local date moved past their watermark, and woken tenants. Pure.

use tickwork::calendar;
use tickwork::clock::Millis;
use tickwork::watermark::WatermarkState;

/// A zone group whose local date moved past its watermark: one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueGroup {
    /// The zone.
    pub group: String,
    /// Its local date now (the run's window).
    pub local: String,
    /// When this run started, if an earlier tick started it.
    pub started_ms: Option<Millis>,
    /// The group's watermark (the last local date completed), `None` before its first run.
    pub mark: Option<String>,
    /// The largest tenant shard count any writer recorded in the state item: the run pages at
    /// least that many shards, even when this process's start-up registry read is older.
    pub recorded_shards: u32,
}

/// Tenants woken in one group (added, resumed or moved since its run), visited at this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeGroup {
    /// The zone.
    pub group: String,
    /// What waits, as the state item tells ([`tickwork::wake`]): the ids are read at the visit.
    pub woken: tickwork::wake::Woken,
    /// The group's watermark.
    pub mark: Option<String>,
    /// A run of the group has started and not finished.
    pub run_in_progress: bool,
}

impl DueGroup {
    /// Tenant shards the run pages: every shard this process reads (`read`, from its start-up
    /// registry) and every shard a writer recorded in the state item since, whichever is more.
    pub fn shards(&self, read: u32) -> u32 {
        read.max(self.recorded_shards)
    }

    /// The run's name in checkpoints and failure records: `<zone>@<local date>`.
    pub fn run_id(&self) -> String {
        format!("{}@{}", self.group, self.local)
    }
}

/// A zone group is due when its local date (`YYYY-MM-DD`) is past its watermark, or it has none.
/// The one rule the sweep, `tickctl plan` and `tickctl cost` apply.
pub fn group_due(watermark: Option<&str>, local_date: &str) -> bool {
    watermark.is_none_or(|m| m < local_date)
}

/// What the state item says is due at `time_ms`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Due {
    /// Groups whose local date is past their watermark.
    pub groups: Vec<DueGroup>,
    /// Tenants added, resumed or moved since their group's run, visited now.
    pub wake: Vec<WakeGroup>,
    /// Registered zones the tz database does not know: skipped, reported.
    pub unknown: Vec<String>,
    /// A schedule is due (the state item's `sched_next` is at or before the tick): with the
    /// count of schedule adds the state item showed ([`tickwork::watermark::WatermarkState::sched_adds`]).
    pub schedules: Option<i64>,
    /// This tick set the sweep's wake ([`crate::wake`]): it lets its lease go as it ends.
    pub wake_set: bool,
}

impl Due {
    /// A run of `group` starts at this tick (no earlier tick started it): it pages the group's
    /// woken tenants with the rest, so they are not visited first.
    pub fn starts_now(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g.group == group && g.started_ms.is_none())
    }

    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.wake.is_empty() && self.schedules.is_none()
    }
}

/// The groups whose local date at `time_ms` is past their watermark, with that date.
pub fn due_groups(state: &WatermarkState, time_ms: Millis) -> Due {
    let mut due =
        Due { schedules: state.sched_next.filter(|n| *n <= time_ms).map(|_| state.sched_adds), ..Default::default() };
    for g in &state.groups {
        let local = match calendar::zone(g).and_then(|tz| calendar::local_date(time_ms, &tz)) {
            Ok(d) => d.to_string(),
            Err(e) => {
                tracing::error!(zone = %g, error = %e, "registered zone is unknown; it is skipped");
                due.unknown.push(g.clone());
                continue;
            }
        };
        let mark = state.marks.get(g).cloned();
        if group_due(mark.as_deref(), &local) {
            let started_ms = state.run_started(g, &local);
            due.groups.push(DueGroup {
                group: g.clone(),
                local,
                started_ms,
                mark: mark.clone(),
                recorded_shards: state.unit_shards,
            });
        }
        if let Some(w) = state.wake.get(g).filter(|w| !w.is_empty()) {
            let run_in_progress =
                state.runs.get(g).is_some_and(|(window, _)| mark.as_deref().is_none_or(|m| window.as_str() > m));
            due.wake.push(WakeGroup { group: g.clone(), woken: w.clone(), mark, run_in_progress });
        }
    }
    due
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_groups_compare_local_dates_and_skip_unknown_zones() {
        let mut s = WatermarkState::default();
        s.groups.insert("Europe/Berlin".into());
        s.groups.insert("America/Los_Angeles".into());
        s.marks.insert("Europe/Berlin".into(), "2026-11-29".into());
        s.marks.insert("America/Los_Angeles".into(), "2026-11-28".into());
        // A writer with 16 shards recorded itself in the state item: the run pages them all.
        s.unit_shards = 16;
        // 2026-11-29T12:00Z: Berlin 13:00 on the 29th (done), Los Angeles 04:00 on the 29th (due).
        let t = "2026-11-29T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let want = DueGroup {
            group: "America/Los_Angeles".into(),
            local: "2026-11-29".into(),
            started_ms: None,
            mark: Some("2026-11-28".into()),
            recorded_shards: 16,
        };
        assert_eq!(
            due_groups(&s, t),
            Due { groups: vec![want.clone()], wake: vec![], unknown: vec![], schedules: None, wake_set: false }
        );
        s.groups.insert("Nowhere/Atlantis".into());
        let d = due_groups(&s, t);
        assert_eq!(
            (d.groups, d.unknown),
            (vec![want], vec!["Nowhere/Atlantis".to_string()]),
            "one bad zone blocks nothing"
        );
        s.runs.insert("America/Los_Angeles".into(), ("2026-11-29".into(), t - 5_000));
        assert_eq!(due_groups(&s, t).groups[0].started_ms, Some(t - 5_000));
    }

    #[test]
    fn woken_tenants_are_reported_with_whether_their_group_runs_and_a_new_run_covers_them() {
        let mut s = WatermarkState::default();
        s.groups.insert("Europe/Berlin".into());
        s.groups.insert("America/Los_Angeles".into());
        s.marks.insert("Europe/Berlin".into(), "2026-11-29".into());
        s.marks.insert("America/Los_Angeles".into(), "2026-11-28".into());
        let waiting = tickwork::wake::Woken { generation: Some(1), ..Default::default() };
        s.wake.insert("Europe/Berlin".into(), waiting.clone());
        s.wake.insert("America/Los_Angeles".into(), waiting);
        s.wake.insert("Asia/Tokyo".into(), Default::default());
        // Berlin's last run finished (its window is its watermark); Los Angeles has none yet.
        s.runs.insert("Europe/Berlin".into(), ("2026-11-29".into(), 1));
        let t = "2026-11-29T12:00:00Z".parse::<jiff::Timestamp>().unwrap().as_millisecond();
        let d = due_groups(&s, t);
        let wake: Vec<(&str, bool)> = d.wake.iter().map(|w| (w.group.as_str(), w.run_in_progress)).collect();
        assert_eq!(wake, [("America/Los_Angeles", false), ("Europe/Berlin", false)], "nothing waiting is no wake");
        assert!(d.starts_now("America/Los_Angeles"), "its run starts at this tick and pages t2");
        assert!(!d.starts_now("Europe/Berlin"), "not due: t1 is visited on its own");
        // A run of Los Angeles started by an earlier tick: in progress, and it does not start now.
        s.runs.insert("America/Los_Angeles".into(), ("2026-11-29".into(), t - 60_000));
        let d = due_groups(&s, t);
        assert!(d.wake.iter().any(|w| w.group == "America/Los_Angeles" && w.run_in_progress));
        assert!(!d.starts_now("America/Los_Angeles"));
    }

    #[test]
    fn a_schedule_is_due_when_the_state_item_says_so_and_not_before() {
        let mut s = WatermarkState { sched_next: Some(1_000), sched_adds: 7, ..Default::default() };
        assert_eq!(due_groups(&s, 999).schedules, None);
        assert!(due_groups(&s, 999).is_empty(), "an idle tick: nothing more is read");
        assert_eq!(due_groups(&s, 1_000).schedules, Some(7));
        assert!(!due_groups(&s, 1_000).is_empty());
        s.sched_next = None;
        assert!(due_groups(&s, i64::MAX).is_empty(), "no schedule ever added");
    }

    #[test]
    fn a_run_pages_every_shard_any_writer_recorded() {
        let g = DueGroup {
            group: "UTC".into(),
            local: "2026-11-29".into(),
            started_ms: None,
            mark: None,
            recorded_shards: 16,
        };
        assert_eq!((g.shards(8), g.shards(32)), (16, 32));
    }
}
