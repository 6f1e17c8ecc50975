//! What a schedule says: its spec (when, in the tenant's local time), its spread and its DST
//! policy, read from text and refused by name when it cannot be right. Pure.
//!
//! Why explicit DST policies: the per-tenant alternative (one EventBridge Scheduler schedule each)
//! silently skips a local time that does not exist at the spring change and runs a repeated one
//! once, and users of other schedulers keep asking which; here the schedule says.

use std::fmt;
use std::str::FromStr;

use jiff::civil::{DateTime, Time};
use jiff::Timestamp;

use super::cron::Cron;
pub use super::error::SpecError;

/// When a schedule fires, in its tenant's zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `daily HH:MM`.
    Daily(Time),
    /// `weekly DAYS HH:MM`: days as a bit set, Sunday = bit 0 (`mon,wed`, `mon-fri`).
    Weekly(u8, Time),
    /// `monthly DAY HH:MM` (a month without that day has no occurrence) or `monthly last HH:MM`.
    Monthly(MonthDay, Time),
    /// `cron M H DOM MON DOW`, evaluated in the tenant's zone.
    Cron(Cron),
    /// `at YYYY-MM-DDTHH:MM`: once, at a local date-time of the tenant's zone.
    AtLocal(DateTime),
    /// `at <RFC 3339 instant>`: once, at an instant, whatever the zone.
    AtInstant(Timestamp),
}

/// A monthly spec's day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonthDay {
    /// The day of month (1 to 31).
    Day(i8),
    /// The month's last day.
    Last,
}

/// Where a local time that does not exist (the spring change's gap) fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gap {
    /// At the first instant after it: the instant the gap ends (default).
    #[default]
    Shift,
    /// Not at all: that occurrence is skipped.
    Skip,
}

/// Which of a repeated local time's two instants (the autumn change's fold) fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fold {
    /// The first (the default for fixed times).
    #[default]
    First,
    /// The last.
    Last,
    /// Each: the repeated hour's times fire in both its passes, each its own occurrence (the
    /// offset is part of the key). The default for a cron whose minute or hour field begins with
    /// `*` ([`Dst::for_spec`]), so that `*/15 * * * *` keeps its rhythm across the fold instead of
    /// falling silent for the second pass, as cronie runs such "wildcard" jobs.
    Both,
}

/// A schedule's DST policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dst {
    /// A local time in a gap.
    pub gap: Gap,
    /// A local time in a fold.
    pub fold: Fold,
}

impl Dst {
    /// The policy a schedule gets when it names none: `shift` for a gap; for a fold `both` when
    /// `spec` is a cron whose minute or hour field begins with `*` (cronie's MIN_STAR | HR_STAR:
    /// jobs it runs in each pass of a repeated hour), else `first`.
    pub fn for_spec(spec: &Spec) -> Dst {
        let fold = match spec {
            Spec::Cron(c) if c.wildcard() => Fold::Both,
            _ => Fold::First,
        };
        Dst { gap: Gap::Shift, fold }
    }
}

/// The longest schedule name: names go into unit keys beside tenant ids.
pub const MAX_NAME_LEN: usize = 64;

/// The widest spread: a day. A spread also has to be shorter than the spec's period.
pub const MAX_SPREAD_MIN: u32 = 1_440;

/// A schedule name: 1 to [`MAX_NAME_LEN`] bytes of letters, digits, `-`, `_`, `.`, `:`, no `#`
/// (the separator of the keys it goes into).
pub fn check_name(name: &str) -> Result<(), SpecError> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(SpecError(format!("name `{name}` must be 1 to {MAX_NAME_LEN} bytes (it is {})", name.len())));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))) {
        return Err(SpecError(format!(
            "name `{name}` holds `{c}`: only letters, digits, `-`, `_`, `.` and `:` are allowed (`#` separates key parts)"
        )));
    }
    Ok(())
}

fn time(s: &str) -> Result<Time, SpecError> {
    let bad = || SpecError(format!("`{s}` is not a local time HH:MM (00:00 to 23:59)"));
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (i8, i8) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    Time::new(h, m, 0, 0).map_err(|_| bad())
}

const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn weekday(s: &str) -> Result<u8, SpecError> {
    DAY_NAMES
        .iter()
        .position(|d| d.eq_ignore_ascii_case(s))
        .map(|i| i as u8)
        .ok_or_else(|| SpecError(format!("`{s}` is not a day (sun, mon, tue, wed, thu, fri, sat)")))
}

fn weekdays(s: &str) -> Result<u8, SpecError> {
    let mut bits = 0u8;
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (weekday(a)?, weekday(b)?);
                if a > b {
                    return Err(SpecError(format!("days `{part}` run backwards (the week starts on sun)")));
                }
                (a..=b).for_each(|d| bits |= 1 << d);
            }
            None => bits |= 1 << weekday(part)?,
        }
    }
    Ok(bits)
}

impl FromStr for Spec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let s = s.trim();
        let (kind, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
        let args: Vec<&str> = rest.split_whitespace().collect();
        let arity = |n: usize, form: &str| {
            if args.len() == n {
                Ok(())
            } else {
                Err(SpecError(format!("`{s}`: expected `{form}`")))
            }
        };
        match kind {
            "daily" => {
                arity(1, "daily HH:MM")?;
                Ok(Spec::Daily(time(args[0])?))
            }
            "weekly" => {
                arity(2, "weekly DAYS HH:MM")?;
                Ok(Spec::Weekly(weekdays(args[0])?, time(args[1])?))
            }
            "monthly" => {
                arity(2, "monthly DAY|last HH:MM")?;
                let day = match args[0] {
                    "last" => MonthDay::Last,
                    d => MonthDay::Day(
                        d.parse()
                            .ok()
                            .filter(|d| (1..=31).contains(d))
                            .ok_or_else(|| SpecError(format!("`{d}` is not a day of month (1 to 31, or last)")))?,
                    ),
                };
                Ok(Spec::Monthly(day, time(args[1])?))
            }
            "cron" => Ok(Spec::Cron(Cron::parse(rest)?)),
            "at" => {
                arity(1, "at YYYY-MM-DDTHH:MM (local) or at <RFC 3339 instant>")?;
                let a = args[0];
                if let Ok(ts) = a.parse::<Timestamp>() {
                    return Ok(Spec::AtInstant(ts));
                }
                let dt: DateTime = a.parse().map_err(|_| {
                    SpecError(format!(
                        "`{a}` is neither a local date-time (2026-12-24T09:00) nor an instant with an offset"
                    ))
                })?;
                // The stored text keeps whole seconds: a fraction would be dropped on the way to
                // the table, and the timer read back would name an earlier instant than the one
                // it was checked against (added just after it, it would never fire).
                if dt.subsec_nanosecond() != 0 {
                    return Err(SpecError(format!(
                        "`{a}` has a fraction of a second: a local timer names whole seconds"
                    )));
                }
                Ok(Spec::AtLocal(dt))
            }
            other => Err(SpecError(format!("`{other}` is not a spec (daily, weekly, monthly, cron, at)"))),
        }
    }
}

fn hhmm(t: Time) -> String {
    format!("{:02}:{:02}", t.hour(), t.minute())
}

impl fmt::Display for Spec {
    /// The canonical text: what is stored, and what schedules sharing a spec share.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Daily(t) => write!(f, "daily {}", hhmm(*t)),
            Spec::Weekly(days, t) => {
                let names: Vec<&str> = (0..7).filter(|d| days & (1 << d) != 0).map(|d| DAY_NAMES[d]).collect();
                write!(f, "weekly {} {}", names.join(","), hhmm(*t))
            }
            Spec::Monthly(MonthDay::Day(d), t) => write!(f, "monthly {d} {}", hhmm(*t)),
            Spec::Monthly(MonthDay::Last, t) => write!(f, "monthly last {}", hhmm(*t)),
            Spec::Cron(c) => write!(f, "cron {}", c.text()),
            Spec::AtLocal(dt) => write!(f, "at {}", dt.strftime("%Y-%m-%dT%H:%M:%S")),
            Spec::AtInstant(ts) => write!(f, "at {ts}"),
        }
    }
}

impl Spec {
    /// Fires once.
    pub fn one_off(&self) -> bool {
        matches!(self, Spec::AtLocal(_) | Spec::AtInstant(_))
    }

    /// The shortest time between two of its occurrences in local time (ignoring DST), in minutes:
    /// a spread must be shorter. `None` for a one-off.
    pub fn period_min(&self) -> Option<u32> {
        const DAY: u32 = 1_440;
        match self {
            Spec::Daily(_) => Some(DAY),
            Spec::Weekly(days, _) => {
                let on: Vec<u32> = (0..7).filter(|d| days & (1 << d) != 0).collect();
                // Circular gaps between chosen days (one day alone: a week).
                let gaps = on.windows(2).map(|w| w[1] - w[0]).chain(std::iter::once(on[0] + 7 - on[on.len() - 1]));
                gaps.min().map(|g| g * DAY)
            }
            // The shortest month.
            Spec::Monthly(..) => Some(28 * DAY),
            Spec::Cron(c) => Some(c.min_gap_min()),
            Spec::AtLocal(_) | Spec::AtInstant(_) => None,
        }
    }
}

impl FromStr for Gap {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "shift" => Ok(Gap::Shift),
            "skip" => Ok(Gap::Skip),
            o => Err(SpecError(format!("`{o}` is not a gap policy (shift, skip)"))),
        }
    }
}

impl FromStr for Fold {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "first" => Ok(Fold::First),
            "last" => Ok(Fold::Last),
            "both" => Ok(Fold::Both),
            o => Err(SpecError(format!("`{o}` is not a fold policy (first, last, both)"))),
        }
    }
}

impl fmt::Display for Gap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Gap::Shift => "shift",
            Gap::Skip => "skip",
        })
    }
}

impl fmt::Display for Fold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fold::First => "first",
            Fold::Last => "last",
            Fold::Both => "both",
        })
    }
}

/// A schedule as its tenant defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleDef {
    /// Unique for the tenant ([`check_name`]).
    pub name: String,
    /// When.
    pub spec: Spec,
    /// Minutes across which the tenants sharing the spec are spread: each (tenant, schedule)
    /// fires at a stable offset within it ([`super::occurrence::spread_ms`]). 0: none.
    pub spread_min: u32,
    /// The DST policy.
    pub dst: Dst,
    /// The team's own JSON document ([`ScheduleDef::with_payload`]), as canonical text: every
    /// fire delivers it in its unit (`"payload"`), as a Scheduler schedule carries its input, so
    /// a handler knows what a reminder is for without a table of its own. Part of the group.
    pub payload: Option<String>,
}

/// The largest payload a schedule carries, in bytes of its canonical JSON text. It is written
/// with every due record of its group (a write unit is 1 KB, so a payload of this size makes each
/// of the group's record writes five units instead of one) and carried in every fire's unit.
pub const MAX_PAYLOAD_BYTES: usize = 4096;

/// The deepest nesting a payload may have. The queue item carries it five levels down
/// (`{"batch": {"sets": [{"with": {"payload": …`) and serde_json reads at most 128 levels, so a
/// payload nested near that limit would be stored and then fail every fire of its group, and
/// with it its shard's tick; 32 is far more than a document of a team's needs.
pub const MAX_PAYLOAD_DEPTH: usize = 32;

fn depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        serde_json::Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

impl ScheduleDef {
    /// A schedule, checked: its name, and a spread shorter than its spec's period (none on a
    /// one-off, at most [`MAX_SPREAD_MIN`]).
    pub fn new(name: &str, spec: Spec, spread_min: u32, dst: Dst) -> Result<Self, SpecError> {
        check_name(name)?;
        if spread_min > 0 {
            match spec.period_min() {
                None => return Err(SpecError(format!("`{spec}` fires once: a spread has nothing to spread"))),
                Some(p) if spread_min >= p || spread_min > MAX_SPREAD_MIN => {
                    return Err(SpecError(format!(
                        "a spread of {spread_min} min is not shorter than `{spec}`'s period ({p} min) and at most {MAX_SPREAD_MIN}"
                    )))
                }
                Some(_) => {}
            }
        }
        if dst.fold == Fold::Both && spec.one_off() {
            return Err(SpecError(format!("`{spec}` fires once: the fold policy `both` would fire it twice")));
        }
        Ok(ScheduleDef { name: name.to_string(), spec, spread_min, dst, payload: None })
    }

    /// The same schedule carrying `payload` (a JSON `null` is none), refused over
    /// [`MAX_PAYLOAD_BYTES`]. Its text is canonical (serde_json orders an object's keys), so the
    /// same document put again is the same definition and the same group, whatever its spacing
    /// or key order.
    pub fn with_payload(mut self, payload: Option<&serde_json::Value>) -> Result<Self, SpecError> {
        self.payload = match payload {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => {
                if depth(v) > MAX_PAYLOAD_DEPTH {
                    return Err(SpecError(format!(
                        "a payload nested {} levels deep is over the {MAX_PAYLOAD_DEPTH} a schedule carries",
                        depth(v)
                    )));
                }
                let text = v.to_string();
                if text.len() > MAX_PAYLOAD_BYTES {
                    return Err(SpecError(format!(
                        "a payload of {} bytes is over the {MAX_PAYLOAD_BYTES} a schedule carries",
                        text.len()
                    )));
                }
                Some(text)
            }
        };
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_and_print_canonically() {
        for (text, canonical) in [
            ("daily 08:00", "daily 08:00"),
            ("  weekly MON-fri 09:30", "weekly mon,tue,wed,thu,fri 09:30"),
            ("weekly sun,sat 23:59", "weekly sun,sat 23:59"),
            ("monthly last 18:00", "monthly last 18:00"),
            ("monthly 31 00:00", "monthly 31 00:00"),
            ("cron */15  9-17 * * 1-5", "cron */15 9-17 * * 1-5"),
            ("at 2026-12-24T09:00", "at 2026-12-24T09:00:00"),
            ("at 2026-12-24T08:00:00Z", "at 2026-12-24T08:00:00Z"),
            ("at 2026-12-24T09:00:00+01:00", "at 2026-12-24T08:00:00Z"),
        ] {
            let s: Spec = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(s.to_string(), canonical);
            assert_eq!(s.to_string().parse::<Spec>().unwrap(), s, "{canonical} reads back");
        }
    }

    #[test]
    fn a_wildcard_cron_fires_both_passes_of_a_fold_by_default_and_a_one_off_never_does() {
        let fold = |s: &str| Dst::for_spec(&s.parse().unwrap()).fold;
        // cronie's MIN_STAR | HR_STAR: the minute or the hour field begins with `*`.
        for wild in ["cron */15 * * * *", "cron 0 * * * *", "cron * 2 * * *", "cron 0 */2 * * *"] {
            assert_eq!(fold(wild), Fold::Both, "{wild}");
        }
        for fixed in
            ["cron 30 2 * * *", "cron 0 0-23/2 * * *", "cron 0,30 1,2 * * *", "daily 02:30", "weekly sun 02:00"]
        {
            assert_eq!(fold(fixed), Fold::First, "{fixed}");
        }
        assert_eq!("both".parse::<Fold>().unwrap().to_string(), "both");
        assert!("twice".parse::<Fold>().unwrap_err().0.contains("first, last, both"));
        let both = Dst { gap: Gap::Shift, fold: Fold::Both };
        let e = ScheduleDef::new("n", "at 2027-10-31T02:30".parse().unwrap(), 0, both).unwrap_err();
        assert!(e.0.contains("fires once"), "{e}");
        assert!(ScheduleDef::new("n", "daily 02:30".parse().unwrap(), 0, both).is_ok(), "asked for, a fixed time may");
    }

    #[test]
    fn bad_specs_names_and_spreads_are_refused_by_name() {
        for (text, says) in [
            ("hourly 08:00", "`hourly` is not a spec"),
            ("daily 8:00", "`8:00` is not a local time"),
            ("daily 24:00", "`24:00` is not a local time"),
            ("daily 08:00 09:00", "expected `daily HH:MM`"),
            ("weekly funday 08:00", "`funday` is not a day"),
            ("weekly fri-mon 08:00", "run backwards"),
            ("monthly 32 08:00", "`32` is not a day of month"),
            ("cron 0 8 * *", "5 are needed"),
            ("at tomorrow", "`tomorrow` is neither"),
            ("at 2026-12-24T09:00:00.250", "a fraction of a second"),
        ] {
            let e = text.parse::<Spec>().unwrap_err().to_string();
            assert!(e.contains(says), "`{text}`: {e}");
        }
        let daily: Spec = "daily 08:00".parse().unwrap();
        for (name, says) in
            [("", "1 to 64"), ("a#b", "holds `#`"), ("a b", "holds ` `"), (&"x".repeat(65) as &str, "1 to 64")]
        {
            let e = ScheduleDef::new(name, daily.clone(), 0, Dst::default()).unwrap_err().to_string();
            assert!(e.contains(says), "{name:?}: {e}");
        }
        let spread = |spec: &str, min: u32| ScheduleDef::new("n", spec.parse().unwrap(), min, Dst::default());
        assert!(spread("daily 08:00", 1_439).is_ok());
        assert!(spread("daily 08:00", 1_440).unwrap_err().to_string().contains("not shorter"));
        assert!(spread("weekly mon,tue 08:00", 1_440).is_err(), "a day apart");
        assert!(spread("weekly mon 08:00", 1_440).is_ok(), "a week apart");
        assert!(spread("weekly mon 08:00", 1_441).is_err(), "at most a day");
        assert!(spread("cron */15 * * * *", 15).is_err());
        assert!(spread("cron */15 * * * *", 14).is_ok());
        assert!(spread("cron 0 8,20 * * *", 720).is_err(), "twelve hours apart");
        assert!(spread("at 2026-12-24T09:00", 1).unwrap_err().to_string().contains("fires once"));
    }
}
