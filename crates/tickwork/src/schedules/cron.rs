//! A 5-field cron expression (`minute hour day-of-month month day-of-week`), read as Vixie cron
//! reads it and matched against *nominal* local date-times: which instant a local time names (a gap,
//! a fold) is the occurrence arithmetic's decision ([`super::occurrence`]), not the expression's.
//!
//! Written here rather than taken from a crate: the cron crates on crates.io either want a seconds
//! field, or evaluate in chrono's zones and decide DST on their own (skipping or repeating), where
//! tickwork's policies must see each nominal time before it is resolved.
//!
//! Fields: `*`, a value, `a-b`, `*/n`, `a-b/n`, `a/n`, and lists of those; months `JAN`–`DEC`,
//! days `SUN`–`SAT` (0 and 7 both Sunday). When neither day field begins with `*`, a day matches
//! either; when one does (`*`, `*/2`), it must match both (Vixie cron's DOM_STAR/DOW_STAR rule).

use jiff::civil::{Date, DateTime};

use super::error::SpecError;

/// A parsed cron expression: one bit per allowed value of each field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// The day-of-month field begins with `*` (`*`, `*/2`): Vixie cron's DOM_STAR.
    any_day: bool,
    /// The day-of-week field begins with `*`: DOW_STAR.
    any_weekday: bool,
    /// The minute or the hour field begins with `*`: cronie's MIN_STAR | HR_STAR, a "wildcard"
    /// job, run in each pass of a repeated hour.
    wildcard: bool,
    text: String,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's bounds and names.
struct Field {
    name: &'static str,
    lo: u32,
    hi: u32,
    names: &'static [&'static str],
    /// The first name's value (1 for months, 0 for days).
    names_from: u32,
}

const MINUTE: Field = Field { name: "minute", lo: 0, hi: 59, names: &[], names_from: 0 };
const HOUR: Field = Field { name: "hour", lo: 0, hi: 23, names: &[], names_from: 0 };
const DAY: Field = Field { name: "day of month", lo: 1, hi: 31, names: &[], names_from: 0 };
const MONTH: Field = Field { name: "month", lo: 1, hi: 12, names: &MONTHS, names_from: 1 };
// 7 is Sunday too; folded onto 0 after parsing.
const WEEKDAY: Field = Field { name: "day of week", lo: 0, hi: 7, names: &DAYS, names_from: 0 };

impl Field {
    fn value(&self, s: &str) -> Result<u32, SpecError> {
        let upper = s.to_ascii_uppercase();
        if let Some(i) = self.names.iter().position(|n| *n == upper) {
            return Ok(i as u32 + self.names_from);
        }
        let v: u32 =
            s.parse().map_err(|_| SpecError(format!("cron {}: `{s}` is not a number or a name", self.name)))?;
        if v < self.lo || v > self.hi {
            return Err(SpecError(format!("cron {}: {v} is outside {}-{}", self.name, self.lo, self.hi)));
        }
        Ok(v)
    }

    /// The field's allowed values as a bit set, and whether it was a bare `*`.
    fn parse(&self, text: &str) -> Result<(u64, bool), SpecError> {
        let mut bits = 0u64;
        for part in text.split(',') {
            let (range, step) = match part.split_once('/') {
                Some((r, s)) => {
                    let step: u32 =
                        s.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                            SpecError(format!("cron {}: step `{s}` is not a positive number", self.name))
                        })?;
                    (r, step)
                }
                None => (part, 1),
            };
            let (from, to) = if range == "*" {
                (self.lo, self.hi)
            } else if let Some((a, b)) = range.split_once('-') {
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(SpecError(format!("cron {}: range `{range}` runs backwards", self.name)));
                }
                (a, b)
            } else {
                let a = self.value(range)?;
                // `a/n` is "from a to the end, every n".
                (a, if part.contains('/') { self.hi } else { a })
            };
            let mut v = from;
            while v <= to {
                bits |= 1 << v;
                v += step;
            }
        }
        Ok((bits, text.starts_with('*')))
    }
}

impl Cron {
    /// Parses `m h dom mon dow`; an error names the field and the value.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [m, h, dom, mon, dow] = fields[..] else {
            return Err(SpecError(format!(
                "cron `{text}` has {} fields; 5 are needed (minute hour day-of-month month day-of-week)",
                fields.len()
            )));
        };
        let (minutes, any_minute) = MINUTE.parse(m)?;
        let (hours, any_hour) = HOUR.parse(h)?;
        let (days, any_day) = DAY.parse(dom)?;
        let (months, _) = MONTH.parse(mon)?;
        let (mut weekdays, any_weekday) = WEEKDAY.parse(dow)?;
        if weekdays & (1 << 7) != 0 {
            weekdays = (weekdays | 1) & 0x7f;
        }
        let cron = Cron {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            any_day,
            any_weekday,
            wildcard: any_minute || any_hour,
            text: fields.join(" "),
        };
        // `0 0 30 2 *` parses but never matches: refused rather than never firing.
        // (With the day of week restricted too, any weekday of the months matches.)
        let some_day = (1..=12).any(|mo| cron.month(mo) && (1..=DAYS_IN[mo as usize - 1]).any(|d| cron.dom(d)));
        if !cron.any_day && cron.any_weekday && !some_day {
            return Err(SpecError(format!("cron `{text}`: no month has the day of month it names")));
        }
        Ok(cron)
    }

    fn month(&self, m: i8) -> bool {
        self.months & (1 << m) != 0
    }
    fn dom(&self, d: i8) -> bool {
        self.days & (1 << d) != 0
    }

    /// Its minute or hour field begins with `*` (`*/15 * * * *`, `0 * * * *`): cronie runs it in
    /// each pass of a repeated hour, where it runs a fixed time (`30 2 * * *`) once.
    pub fn wildcard(&self) -> bool {
        self.wildcard
    }

    /// The date is one the expression runs on.
    pub fn matches_date(&self, d: Date) -> bool {
        if !self.month(d.month()) {
            return false;
        }
        let wd = d.weekday().to_sunday_zero_offset() as u8;
        let by_dom = self.dom(d.day());
        let by_dow = self.weekdays & (1 << wd) != 0;
        // Vixie cron: either field starred, a day must match both; neither, either.
        if self.any_day || self.any_weekday {
            by_dom && by_dow
        } else {
            by_dom || by_dow
        }
    }

    /// The nominal local times of a day the expression runs on, earliest first.
    pub fn times(&self) -> impl Iterator<Item = (i8, i8)> + '_ {
        (0..24i8)
            .filter(|h| self.hours & (1 << h) != 0)
            .flat_map(move |h| (0..60i8).filter(move |m| self.minutes & (1 << m) != 0).map(move |m| (h, m)))
    }

    /// The nominal local date-time is one the expression names.
    pub fn matches(&self, dt: DateTime) -> bool {
        self.matches_date(dt.date())
            && dt.second() == 0
            && dt.subsec_nanosecond() == 0
            && self.hours & (1 << dt.hour()) != 0
            && self.minutes & (1 << dt.minute()) != 0
    }

    /// The shortest time between two nominal occurrences, in minutes: within a day, and from a
    /// day's last time to the next matching day's first, over eight years from 2024 (every leap
    /// day and weekday pairing the rules can name).
    pub fn min_gap_min(&self) -> u32 {
        let times: Vec<u32> = self.times().map(|(h, m)| h as u32 * 60 + m as u32).collect();
        let within = times.windows(2).map(|w| w[1] - w[0]).min();
        let (first, last) = (times[0], times[times.len() - 1]);
        let mut best = within.unwrap_or(u32::MAX);
        let mut prev: Option<Date> = None;
        let mut d = jiff::civil::date(2024, 1, 1);
        while d.year() < 2032 {
            if self.matches_date(d) {
                if let Some(p) = prev {
                    let days = (d - p).get_days() as u32;
                    best = best.min(days * 1_440 - last + first);
                }
                prev = Some(d);
            }
            d = d.tomorrow().expect("in range");
        }
        best
    }

    /// The expression as written (fields separated by one space).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The most days each month can have (February in a leap year).
const DAYS_IN: [i8; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    #[test]
    fn fields_read_as_vixie_cron_reads_them() {
        let c = Cron::parse("*/15 9-17 * * MON-FRI").unwrap();
        let times: Vec<(i8, i8)> = c.times().take(5).collect();
        assert_eq!(times, [(9, 0), (9, 15), (9, 30), (9, 45), (10, 0)]);
        assert_eq!(c.times().count(), 9 * 4);
        // 2026-12-05 is a Saturday.
        assert!(!c.matches_date(date(2026, 12, 5)));
        assert!(c.matches_date(date(2026, 12, 7)));
        assert!(c.matches(date(2026, 12, 7).at(17, 45, 0, 0)));
        assert!(!c.matches(date(2026, 12, 7).at(17, 50, 0, 0)));
        // 7 is Sunday, `a/n` runs to the end, lists mix ranges and names.
        let c = Cron::parse("5/20 0 * jan,Mar-apr 7").unwrap();
        assert_eq!(c.times().collect::<Vec<_>>(), [(0, 5), (0, 25), (0, 45)]);
        assert!(c.matches_date(date(2027, 1, 3)), "a Sunday in January");
        assert!(!c.matches_date(date(2027, 2, 7)), "a Sunday in February");
    }

    #[test]
    fn both_day_fields_restricted_match_either() {
        // The 1st and 15th, and every Monday.
        let c = Cron::parse("0 8 1,15 * 1").unwrap();
        assert!(c.matches_date(date(2026, 12, 1)), "the 1st, a Tuesday");
        assert!(c.matches_date(date(2026, 12, 7)), "a Monday");
        assert!(!c.matches_date(date(2026, 12, 8)));
        // Day of month restricted alone: weekdays do not widen it.
        let c = Cron::parse("0 8 1 * *").unwrap();
        assert!(!c.matches_date(date(2026, 12, 7)));
        // A starred field with a step still asks for both: odd days that are Mondays.
        let c = Cron::parse("0 9 */2 * 1").unwrap();
        assert!(c.matches_date(date(2026, 12, 7)), "the 7th, a Monday");
        assert!(!c.matches_date(date(2026, 12, 14)), "a Monday, an even day");
        assert!(!c.matches_date(date(2026, 12, 9)), "an odd day, a Wednesday");
    }

    #[test]
    fn bad_expressions_are_refused_by_field_and_value() {
        for (text, says) in [
            ("0 8 * *", "4 fields"),
            ("60 8 * * *", "minute: 60 is outside 0-59"),
            ("0 24 * * *", "hour: 24"),
            ("0 8 0 * *", "day of month: 0"),
            ("0 8 * 13 *", "month: 13"),
            ("0 8 * * 8", "day of week: 8"),
            ("0 8 * * MOON", "`MOON` is not a number or a name"),
            ("*/0 8 * * *", "step `0`"),
            ("0 17-9 * * *", "runs backwards"),
            ("0 0 30 2 *", "no month has the day"),
        ] {
            let e = Cron::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "`{text}`: {e}");
        }
        // February 29th exists (in leap years).
        assert!(Cron::parse("0 0 29 2 *").is_ok());
    }
}
