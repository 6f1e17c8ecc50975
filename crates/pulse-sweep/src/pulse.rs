//! A pulse: its identity (the idempotency key), and the pure step from where a tenant stands to
//! the pulses it is owed and where it stands afterwards.
//!
//! A pulse announces that a period ended for one tenant: `(tenant, grain, period)`. It travels in a
//! batch ([`tickwork::batch`]) with the other pulses of its zone group's run; its unit key
//! `pulse#<tenant>#<grain>#<period>` is what the worker's handlers are idempotent on, so a pulse
//! delivered twice (a batch that runs again after a crash, a tenant moved mid-run) has one effect.
//!
//! Where a tenant stands ([`Position`]): nearly every tenant follows its zone group (pulsed through
//! the group's watermark), so its owed periods are the group's and it needs no write of its own.
//! A tenant that does not ([`Position::Fresh`], [`Position::Through`]) is planned from its own
//! position and brought back to the group with one conditional write in the same transaction as
//! its pulses ([`owed`] says which).

use std::collections::BTreeMap;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde_json::{Map, Value};
use tickwork::calendar::{self, CalendarError, Grain, Period, Policy};
use tickwork::clock::Millis;
use tickwork::tenants::{Position, Tenant};

/// Queue item kind of pulses (and of a pulse unit's key).
pub const PULSE_KIND: &str = "pulse";

/// The queue item of one batch of a run's pulses: id `<prefix>#<fingerprint of its units>`, so
/// that the same units under the same prefix are one item, and an existing id means they landed.
pub fn batch_item(prefix: &str, b: &tickwork::batch::Batch, now: Millis) -> tickwork::queue::NewItem {
    tickwork::queue::NewItem {
        id: format!("{prefix}#{}", b.fingerprint(PULSE_KIND)),
        kind: PULSE_KIND.into(),
        payload: b.to_payload(),
        tenant: None,
        due_ms: now,
    }
}

/// A pulse's unit key: its idempotency key.
pub fn pulse_id(tenant: &str, grain: Grain, period: &Period) -> String {
    format!("{PULSE_KIND}#{tenant}#{grain}#{}", period.id())
}

/// A batch entry for one period (`{"grain", "period"}`: the unit key's parts).
pub fn entry(grain: Grain, period: &Period) -> Map<String, Value> {
    Map::from_iter([
        ("grain".to_string(), Value::String(grain.to_string())),
        ("period".to_string(), Value::String(period.id())),
    ])
}

/// What brings tenants where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// A page of the group's run for its local date: afterwards the page's tenants follow the
    /// group (its watermark becomes the run's date when the run ends).
    Run,
    /// A woken tenant brought to the group's watermark between runs. While a run is in progress
    /// the tenant cannot simply follow (its page may be done already): it is left explicitly at
    /// the watermark, and the run's page — or the next run — brings it the rest of the way.
    Wake {
        /// A run of the group is in progress.
        run_in_progress: bool,
    },
}

/// A zone group's calendar at a visit.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The group's zone.
    pub tz: &'a TimeZone,
    /// Periods complete by the start of this local date are owed (a run's date, or the
    /// watermark for a wake visit).
    pub today: Date,
    /// Lateness is measured at this instant (the run's start).
    pub late_at: Millis,
    /// The group's watermark: where a tenant that follows it stands. `None` before its first run.
    pub mark: Option<Date>,
    /// Catch-up rules.
    pub policy: &'a Policy,
    /// The grains pulsed; the others are not owed.
    pub grains: tickwork::grains::Grains,
}

/// What one tenant is owed at a visit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owed {
    /// Periods to pulse, by grain, oldest first.
    pub pulses: Vec<(Grain, Period)>,
    /// Periods passed over by the catch-up policy or the lateness bound, by grain.
    pub skipped: BTreeMap<Grain, u32>,
    /// The tenant's new position, when it must be written.
    pub reposition: Option<Position>,
}

impl Owed {
    /// The batch entries of these pulses.
    pub fn entries(&self) -> Vec<Map<String, Value>> {
        self.pulses.iter().map(|(g, p)| entry(*g, p)).collect()
    }
}

/// The pulses `t` is owed at `target`, and where it stands afterwards (pure).
pub fn owed(t: &Tenant, target: &Target<'_>, visit: Visit) -> Result<Owed, CalendarError> {
    let cursors = match t.pos {
        Position::Follows => match target.mark {
            Some(m) => calendar::cursors_through(m)?,
            None => BTreeMap::new(),
        },
        Position::Fresh => BTreeMap::new(),
        Position::Through(d) => calendar::cursors_through(d)?,
    };
    let plans = calendar::plan_through(target.tz, target.today, target.late_at, t.since_ms, &cursors, target.policy)?;
    let mut out = Owed::default();
    for plan in plans.into_iter().filter(|p| target.grains.contains(p.grain)) {
        out.pulses.extend(plan.pulse.iter().map(|p| (plan.grain, *p)));
        if plan.skipped > 0 {
            *out.skipped.entry(plan.grain).or_default() += plan.skipped;
        }
    }
    let settles = calendar::settles_at(target.tz, t.since_ms, target.today)?;
    out.reposition = match (t.pos, visit) {
        // Where the group is: nothing to write.
        (Position::Follows, _) => None,
        // Ahead of this visit (moved from a zone further east): it waits here until the group
        // catches up; at equal dates it follows again.
        (Position::Through(d), Visit::Run) if d >= target.today => (d == target.today).then_some(Position::Follows),
        (Position::Through(d), Visit::Wake { .. }) if d >= target.today => None,
        // Added more than a day after `today` (a run that outlived its date): its history is not
        // the group's yet; it stays as it is and is planned from its own `since` again.
        _ if !settles => None,
        (_, Visit::Run | Visit::Wake { run_in_progress: false }) => Some(Position::Follows),
        (_, Visit::Wake { run_in_progress: true }) => Some(Position::Through(target.today)),
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickwork::calendar::CatchUp;

    fn ms(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    const ALL: Policy = Policy { catch_up: CatchUp::All, max_lateness_ms: 40 * 86_400_000, interval_ms: 60_000 };

    fn date(s: &str) -> Date {
        s.parse().unwrap()
    }

    fn tenant(pos: Position, since: &str) -> Tenant {
        Tenant { id: "t1".into(), zone: "UTC".into(), active: true, since_ms: Some(ms(since)), pos }
    }

    fn ids(o: &Owed) -> Vec<String> {
        o.pulses.iter().map(|(g, p)| format!("{g}:{}", p.id())).collect()
    }

    fn target<'a>(tz: &'a TimeZone, today: &str, mark: Option<&str>) -> Target<'a> {
        Target {
            tz,
            today: date(today),
            late_at: ms(&format!("{today}T00:01:00Z")),
            mark: mark.map(date),
            policy: &ALL,
            grains: tickwork::grains::Grains::ALL,
        }
    }

    #[test]
    fn a_grain_left_out_is_neither_pulsed_nor_counted_as_skipped() {
        let tz = calendar::zone("UTC").unwrap();
        // Monday the 30th after a watermark of the 29th: day the 29th and week 13 are owed.
        let all = owed(
            &tenant(Position::Follows, "2026-03-01T00:00:00Z"),
            &target(&tz, "2026-03-30", Some("2026-03-29")),
            Visit::Run,
        )
        .unwrap();
        assert_eq!(ids(&all), ["day:2026-03-29", "week:2026-W13"]);
        let days = Target {
            grains: tickwork::grains::Grains::parse("day").unwrap(),
            ..target(&tz, "2026-03-30", Some("2026-03-29"))
        };
        let o = owed(&tenant(Position::Follows, "2026-03-01T00:00:00Z"), &days, Visit::Run).unwrap();
        assert_eq!(ids(&o), ["day:2026-03-29"]);
        assert_eq!(o.reposition, all.reposition, "where it stands is the same");
    }

    #[test]
    fn a_follower_gets_the_groups_periods_and_no_write() {
        let tz = calendar::zone("UTC").unwrap();
        // Watermark the 29th (Sunday): the run for Monday the 30th owes the 29th and week 13.
        let o = owed(
            &tenant(Position::Follows, "2026-01-01T00:00:00Z"),
            &target(&tz, "2026-03-30", Some("2026-03-29")),
            Visit::Run,
        )
        .unwrap();
        assert_eq!(ids(&o), ["day:2026-03-29", "week:2026-W13"]);
        assert_eq!(o.reposition, None);
    }

    #[test]
    fn a_fresh_tenant_is_owed_nothing_before_its_day_and_then_follows() {
        let tz = calendar::zone("UTC").unwrap();
        // Added Saturday the 28th at 10:00; a wake visit at watermark 28 (no run in progress):
        // the 27th, week 12 and February ended before it existed.
        let t = tenant(Position::Fresh, "2026-03-28T10:00:00Z");
        let o =
            owed(&t, &target(&tz, "2026-03-28", Some("2026-03-28")), Visit::Wake { run_in_progress: false }).unwrap();
        assert!(o.pulses.is_empty(), "{o:?}");
        assert_eq!(o.reposition, Some(Position::Follows));
        // During a run for the 29th it is left at the watermark instead.
        let o =
            owed(&t, &target(&tz, "2026-03-28", Some("2026-03-28")), Visit::Wake { run_in_progress: true }).unwrap();
        assert_eq!(o.reposition, Some(Position::Through(date("2026-03-28"))));
        // Following the group from there owes exactly what it would have owed on its own.
        let next = owed(
            &Tenant { pos: Position::Follows, ..t.clone() },
            &target(&tz, "2026-03-29", Some("2026-03-28")),
            Visit::Run,
        )
        .unwrap();
        let alone = owed(
            &Tenant { pos: Position::Through(date("2026-03-28")), ..t },
            &target(&tz, "2026-03-29", None),
            Visit::Run,
        )
        .unwrap();
        assert_eq!(ids(&next), ["day:2026-03-28"]);
        assert_eq!(ids(&next), ids(&alone));
    }

    #[test]
    fn a_tenant_added_after_the_groups_date_began_stays_on_its_own() {
        let tz = calendar::zone("UTC").unwrap();
        // Added ten seconds into the 29th; the group stands at the 28th (its run for the 29th not
        // yet begun). Following it would owe the 28th, which ended before the tenant existed.
        let t = tenant(Position::Fresh, "2026-03-29T00:00:10Z");
        let o =
            owed(&t, &target(&tz, "2026-03-28", Some("2026-03-28")), Visit::Wake { run_in_progress: false }).unwrap();
        assert!(o.pulses.is_empty() && o.reposition.is_none(), "{o:?}");
        // The group's run for the 29th owes it nothing and takes it along.
        let o = owed(&t, &target(&tz, "2026-03-29", Some("2026-03-28")), Visit::Run).unwrap();
        assert!(o.pulses.is_empty(), "{o:?}");
        assert_eq!(o.reposition, Some(Position::Follows));
    }

    #[test]
    fn a_resumed_tenant_catches_up_from_where_it_left() {
        let tz = calendar::zone("UTC").unwrap();
        let t = tenant(Position::Through(date("2026-03-27")), "2026-01-01T00:00:00Z");
        let o = owed(&t, &target(&tz, "2026-03-30", Some("2026-03-29")), Visit::Run).unwrap();
        assert_eq!(ids(&o), ["day:2026-03-27", "day:2026-03-28", "day:2026-03-29", "week:2026-W13"]);
        assert_eq!(o.reposition, Some(Position::Follows));
    }

    #[test]
    fn a_tenant_ahead_waits_and_follows_when_the_group_reaches_it() {
        let tz = calendar::zone("America/Los_Angeles").unwrap();
        // Moved from Berlin, pulsed through the 31st there; Los Angeles is still running the 30th.
        let t = tenant(Position::Through(date("2026-03-31")), "2026-01-01T00:00:00Z");
        let o = owed(&t, &target(&tz, "2026-03-30", Some("2026-03-29")), Visit::Run).unwrap();
        assert!(o.pulses.is_empty() && o.reposition.is_none(), "{o:?}");
        let o = owed(&t, &target(&tz, "2026-03-31", Some("2026-03-30")), Visit::Run).unwrap();
        assert!(o.pulses.is_empty());
        assert_eq!(o.reposition, Some(Position::Follows), "at the group's date it follows again");
        let o =
            owed(&t, &target(&tz, "2026-03-30", Some("2026-03-30")), Visit::Wake { run_in_progress: false }).unwrap();
        assert!(o.pulses.is_empty() && o.reposition.is_none());
    }

    #[test]
    fn unit_keys_are_the_pulse_ids() {
        let p = Period::parse(Grain::Day, "2026-03-30").unwrap();
        let mut b = tickwork::batch::Batch::new(Map::new());
        b.add(vec![entry(Grain::Day, &p)], ["t1".to_string()]);
        assert_eq!(b.units(PULSE_KIND)[0].key, pulse_id("t1", Grain::Day, &p));
    }
}
