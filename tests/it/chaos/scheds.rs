//! Schedules in the chaos world, and their oracle: definitions written, changed, paused, resumed,
//! removed and added as one-offs while the sweep fires (and its tenants suspended, resumed and
//! moved by the tenant churn), each written through the library on a fault-free client so the
//! harness knows exactly what was asked; the sweep's own calls carry every fault.
//!
//! The harness keeps, per `(tenant, name)`, the segments in which a definition was live (active,
//! its tenant active, in one zone): `(from, to]` with its spec. The oracle computes each
//! segment's occurrences on its own, through chrono-tz (the code under test uses jiff), by the
//! documented rules: a gap shifts to its end, a fold fires at its first pass, both passes for a
//! cron whose minute or hour field begins with `*`. Then:
//! - a fire (a `sched#` unit queued or delivered) is an occurrence of one of its segments: none
//!   from a definition paused, removed or changed before it, none before the segment began;
//! - none was queued before its instant (each queue scan after a sweep round dates what it sees);
//! - each unit was queued once (one queue item holds it);
//! - every occurrence of a segment still live at the end, after the settle, was fired: none lost.
//!
//! A segment that ended (a change, a pause, a suspension) may have lost the occurrences its
//! sweep had not reached by then: the documented semantics (the old group's pending fire is not
//! its); those are allowed, not required.

use std::collections::BTreeMap;

use chrono::{Datelike, NaiveDate, NaiveDateTime, TimeZone};
use tickwork::clock::Millis;

/// One live stretch of a definition.
#[derive(Debug, Clone)]
pub struct Seg {
    /// Owed after this instant.
    pub from: Millis,
    /// Until this instant (inclusive); `None`: live at the end.
    pub to: Option<Millis>,
    /// Its spec, as written.
    pub spec: String,
    /// The zone its times are in.
    pub zone: String,
}

/// The harness's view of every schedule.
#[derive(Debug, Default)]
pub struct Scheds {
    /// Per `(tenant, name)`, its segments, oldest first.
    pub defs: BTreeMap<(String, String), Vec<Seg>>,
    /// Each `sched#` unit key, with the round time a queue scan first saw it.
    pub first_seen: BTreeMap<String, Millis>,
    /// Units seen queued more than once at one scan.
    pub doubled: Vec<String>,
    /// One-offs added so far (their names).
    pub one_offs: u32,
}

impl Scheds {
    /// The last segment of `key` ends at `now` (if live).
    pub fn close(&mut self, key: &(String, String), now: Millis) {
        if let Some(s) = self.defs.get_mut(key).and_then(|v| v.last_mut()).filter(|s| s.to.is_none()) {
            s.to = Some(now);
        }
    }

    /// Whether `key` is live now.
    pub fn live(&self, key: &(String, String)) -> bool {
        self.defs.get(key).and_then(|v| v.last()).is_some_and(|s| s.to.is_none())
    }

    /// The tenants that have schedules.
    pub fn tenants(&self) -> Vec<String> {
        let mut t: Vec<String> = self.defs.keys().map(|(t, _)| t.clone()).collect();
        t.dedup();
        t
    }
}

/// The specs the churn writes: fixed times (one in Berlin's spring gap), wildcard crons.
pub const SPECS: [&str; 5] = ["daily 08:00", "daily 02:30", "daily 21:15", "cron 0 */6 * * *", "cron 30 */6 * * *"];

fn tz(zone: &str) -> chrono_tz::Tz {
    zone.parse().unwrap_or_else(|_| panic!("chrono-tz knows no zone `{zone}`"))
}

fn local(ms: Millis, zone: &str) -> NaiveDateTime {
    tz(zone).timestamp_millis_opt(ms).single().expect("an instant").naive_local()
}

/// The instants nominal local time `n` names in `zone`: a gap shifts to its end, a fold gives its
/// first pass, or both passes when `both`.
fn resolve(zone: &str, n: NaiveDateTime, both: bool) -> Vec<Millis> {
    match tz(zone).from_local_datetime(&n) {
        chrono::LocalResult::Single(t) => vec![t.timestamp_millis()],
        chrono::LocalResult::Ambiguous(a, b) => {
            let (a, b) = (a.timestamp_millis(), b.timestamp_millis());
            if both {
                vec![a.min(b), a.max(b)]
            } else {
                vec![a.min(b)]
            }
        }
        chrono::LocalResult::None => {
            // The first minute whose local time is past the missing one: where the gap ends.
            let guess = n.and_utc().timestamp_millis() - 15 * 3_600_000;
            (0..30 * 60).map(|i| guess + i * 60_000).find(|m| local(*m, zone) > n).into_iter().collect()
        }
    }
}

/// The nominal local times `spec` names on `d`, and whether a fold fires both passes.
fn nominal(spec: &str, d: NaiveDate) -> (Vec<NaiveDateTime>, bool) {
    let at = |h: u32, m: u32| d.and_hms_opt(h, m, 0).expect("a time");
    let hm = |t: &str| {
        let mut p = t.split(':');
        let mut n = || p.next().and_then(|x| x.parse::<u32>().ok()).expect("HH:MM");
        (n(), n())
    };
    if let Some(t) = spec.strip_prefix("daily ") {
        let (h, m) = hm(t);
        (vec![at(h, m)], false)
    } else if let Some(rest) = spec.strip_prefix("cron ") {
        // `M */6 * * *` only: the churn writes no other.
        let m: u32 = rest.split(' ').next().and_then(|m| m.parse().ok()).expect("a minute");
        ([0, 6, 12, 18].map(|h| at(h, m)).to_vec(), true)
    } else if let Some(when) = spec.strip_prefix("at ") {
        let (day, t) = when.split_once('T').expect("a local date-time");
        let day: NaiveDate = day.parse().expect("a date");
        let (h, m) = hm(t);
        (if day == d { vec![at(h, m)] } else { vec![] }, false)
    } else {
        panic!("the oracle reads no spec `{spec}`")
    }
}

/// A segment's occurrences in `(from, until]` (`[from, until]` when `from_too`): `(instant,
/// key)`, the key the local time with its offset.
pub fn occurrences(seg: &Seg, until: Millis, from_too: bool) -> Vec<(Millis, String)> {
    let zone = tz(&seg.zone);
    let mut d = local(seg.from, &seg.zone).date().pred_opt().expect("a day");
    let last = local(until, &seg.zone).date().succ_opt().expect("a day");
    let mut out = Vec::new();
    while d <= last {
        let (times, both) = nominal(&seg.spec, d);
        for n in times {
            for at in resolve(&seg.zone, n, both) {
                if (at > seg.from || (from_too && at == seg.from)) && at <= until {
                    let t = zone.timestamp_millis_opt(at).single().expect("an instant");
                    out.push((at, t.format("%Y-%m-%dT%H:%M:%S%:z").to_string()));
                }
            }
        }
        d = d.succ_opt().expect("a day");
    }
    debug_assert!(out.iter().all(|(at, _)| local(*at, &seg.zone).year() > 2000));
    out.sort();
    out.dedup();
    out
}

/// The checks, with every fired `sched#` key (queued or delivered); `end` is the last tick.
pub fn check(s: &Scheds, fired: &[String], end: Millis, fail: &mut dyn FnMut(String), checks: &mut u64) {
    // Every segment's occurrences by key.
    let mut allowed: BTreeMap<(String, String), BTreeMap<String, Millis>> = BTreeMap::new();
    for (key, segs) in &s.defs {
        let a = allowed.entry(key.clone()).or_default();
        for seg in segs {
            // An occurrence at the very instant a stretch began may fire: a tenant resumed at
            // that instant is active before its schedules are retargeted, and its member, owed
            // from before the suspension, is handed the occurrence due at the resume. Nothing
            // earlier: what came due while suspended was passed by the group's record.
            a.extend(occurrences(seg, seg.to.unwrap_or(end), true).into_iter().map(|(at, k)| (k, at)));
        }
    }
    let mut have: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for unit in fired {
        *checks += 1;
        let parts: Vec<&str> = unit.splitn(4, '#').collect();
        let ["sched", t, name, occ] = parts[..] else {
            fail(format!("schedule unit `{unit}` does not read"));
            continue;
        };
        let key = (t.to_string(), name.to_string());
        have.entry(key.clone()).or_default().push(occ.to_string());
        let Some(at) = allowed.get(&key).and_then(|a| a.get(occ)) else {
            fail(format!(
                "{unit}: fired and not an occurrence of any live stretch of its definition {:?}",
                s.defs.get(&key)
            ));
            continue;
        };
        if let Some(seen) = s.first_seen.get(unit) {
            // Queued by a tick at or after the instant (a clock within the skew bound; a stalled
            // leader's takeover a minute on).
            if *seen + 2 * 60_000 < *at {
                fail(format!("{unit}: queued at {seen}, before its instant {at}"));
            }
        }
    }
    for unit in &s.doubled {
        fail(format!("{unit}: queued twice"));
    }
    // Nothing lost: every occurrence of a stretch live at the end.
    for (key, segs) in &s.defs {
        let Some(seg) = segs.last().filter(|s| s.to.is_none()) else { continue };
        let got = have.get(key).cloned().unwrap_or_default();
        for (_, occ) in occurrences(seg, end, false) {
            *checks += 1;
            if !got.contains(&occ) {
                fail(format!(
                    "sched#{}#{}#{occ}: owed ({} in {} from {}) and never fired",
                    key.0, key.1, seg.spec, seg.zone, seg.from
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> Millis {
        chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    #[test]
    fn the_oracle_by_hand() {
        // Berlin's spring gap: 02:30 on the 29th fires when it ends, 03:00 CEST.
        let seg = |spec: &str, zone: &str| Seg {
            from: ms("2026-03-28T00:00:00Z"),
            to: None,
            spec: spec.into(),
            zone: zone.into(),
        };
        let keys = |s: &Seg, until: &str| -> Vec<String> {
            occurrences(s, ms(until), false).into_iter().map(|(_, k)| k).collect()
        };
        assert_eq!(
            keys(&seg("daily 02:30", "Europe/Berlin"), "2026-03-30T00:00:00Z"),
            ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00"]
        );
        // Auckland's autumn fold (2026-04-05, 03:00 back to 02:00): a fixed time once.
        let from = Seg { from: ms("2026-04-04T00:00:00Z"), ..seg("daily 02:30", "Pacific/Auckland") };
        assert_eq!(keys(&from, "2026-04-05T12:00:00Z"), ["2026-04-05T02:30:00+13:00"]);
        let cron = Seg { spec: "cron 30 */6 * * *".into(), ..from.clone() };
        let got = keys(&cron, "2026-04-05T00:00:00Z");
        assert!(got.contains(&"2026-04-05T00:30:00+13:00".to_string()), "{got:?}");
        let at = Seg { spec: "at 2026-04-04T21:00".into(), ..from };
        assert_eq!(keys(&at, "2026-04-06T00:00:00Z"), ["2026-04-04T21:00:00+13:00"]);
    }
}
